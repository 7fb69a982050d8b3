/* SPDX-License-Identifier: Apache-2.0 */
/* The secrets disk the CLI writes for a VM (secrets-disk.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "secrets-disk.h"

#define APP_NAME_MAX 64 /* what berth-init accepts as a key of "apps" */

static bool declares(const Manifest *m, const char *name)
{
	const char *const *list;
	size_t n = m ? manifest_secrets(m, &list) : 0;

	for (size_t i = 0; i < n; i++)
		if (streq(list[i], name))
			return true;
	return false;
}

static bool declared_by_any(const SecretsDiskApp *apps, size_t n_apps, const char *name)
{
	for (size_t i = 0; i < n_apps; i++)
		if (declares(apps[i].manifest, name))
			return true;
	return false;
}

/* A secret that goes to a broker instead of the apps, when an app declares a capability of
 * its namespace: the broker uses it on the app's behalf, and the app gets a placeholder. */
typedef struct SecretRoute {
	const char *ns, *name, *daemon, *placeholder, *what;
} SecretRoute;

static const SecretRoute secret_routes[] = {
	{"github", "GITHUB_TOKEN", SECRETS_GITHUB_DAEMON, SECRETS_GITHUB_TOKEN_PLACEHOLDER,
	 "the GitHub API broker"},
};

static bool declares_ns(const Manifest *m, const char *ns)
{
	const char *const *caps;
	size_t n = m ? manifest_capabilities(m, &caps) : 0, len = strlen(ns);

	for (size_t i = 0; i < n; i++)
		if (strneq(caps[i], ns, len) && caps[i][len] == ':')
			return true;
	return false;
}

static const SecretRoute *route_of(const SecretsDiskApp *apps, size_t n_apps, const char *name)
{
	for (size_t r = 0; r < ELEMENTSOF(secret_routes); r++) {
		if (!streq(secret_routes[r].name, name))
			continue;
		for (size_t i = 0; i < n_apps; i++)
			if (declares_ns(apps[i].manifest, secret_routes[r].ns))
				return &secret_routes[r];
	}
	return NULL;
}

void secrets_disk_warn(const EnvSet *env, const SecretsDiskApp *apps, size_t n_apps,
		       SecretsWarnFn warn, void *userdata)
{
	char line[512];

	for (size_t i = 0; i < env_set_size(env); i++) {
		const char *name = env_set_name(env, i);
		const SecretRoute *route = route_of(apps, n_apps, name);

		if (route) {
			snprintf(
				line, sizeof(line),
				"[berth] %s goes to %s alone: the app that declares %s: capabilities gets a placeholder in its place, and the broker adds the real value to the requests those capabilities allow",
				name, route->what, route->ns);
			warn(line, userdata);
			continue;
		}
		if (declared_by_any(apps, n_apps, name))
			continue;
		snprintf(
			line, sizeof(line),
			"[berth] %s is not declared under secrets: in any app's berth.yml, so every app in this VM receives it; to give it to one app only, list it under secrets: in that app's berth.yml",
			name);
		warn(line, userdata);
	}
	for (size_t a = 0; a < n_apps; a++) {
		const char *const *list;
		size_t n = apps[a].manifest ? manifest_secrets(apps[a].manifest, &list) : 0;

		for (size_t i = 0; i < n; i++) {
			if (env_set_get(env, list[i], NULL))
				continue;
			snprintf(
				line, sizeof(line),
				"[berth] app \"%s\" declares secret %s in berth.yml, but no value was provided for this boot",
				apps[a].name, list[i]);
			warn(line, userdata);
		}
	}
}

static bool app_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > APP_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

/* Counts bytes when @buf is NULL, so the same code sizes the image and fills it. */
typedef struct Writer {
	char *buf;
	size_t n;
} Writer;

static void emit(Writer *w, const char *s, size_t len)
{
	if (w->buf)
		memcpy(w->buf + w->n, s, len);
	w->n += len;
}

static void emit_str(Writer *w, const char *s)
{
	emit(w, s, strlen(s));
}

/* A JSON string. Values are valid UTF-8 (env-args.c checks), so only '"', '\' and
 * control characters need escaping. */
static void emit_json_string(Writer *w, const char *s, size_t len)
{
	emit(w, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			emit(w, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			emit(w, esc, 6);
		} else
			emit(w, (const char *)&s[i], 1);
	}
	emit(w, "\"", 1);
}

static void emit_pair(Writer *w, bool *first, const EnvSet *env, size_t i)
{
	size_t len;
	const char *value = env_set_value(env, i, &len);

	if (!*first)
		emit(w, ",", 1);
	*first = false;
	emit_json_string(w, env_set_name(env, i), strlen(env_set_name(env, i)));
	emit(w, ":", 1);
	emit_json_string(w, value, len);
}

/* @name=@value, or its placeholder, in app @a's object, opened on first use. */
static void emit_app_pair(Writer *w, bool *first, bool *first_app, const char *app,
			  const char *name, const char *value, size_t len)
{
	if (*first) {
		if (!*first_app)
			emit(w, ",", 1);
		*first_app = false;
		emit_json_string(w, app, strlen(app));
		emit(w, ":{", 2);
	} else
		emit(w, ",", 1);
	*first = false;
	emit_json_string(w, name, strlen(name));
	emit(w, ":", 1);
	emit_json_string(w, value, len);
}

static void emit_document(Writer *w, const EnvSet *env, const SecretsDiskApp *apps, size_t n_apps)
{
	bool first = true, first_app = true;

	emit_str(w, SECRETS_DISK_MAGIC "{\"shared\":{");
	for (size_t i = 0; i < env_set_size(env); i++)
		if (!declared_by_any(apps, n_apps, env_set_name(env, i)) &&
		    !route_of(apps, n_apps, env_set_name(env, i)))
			emit_pair(w, &first, env, i);
	emit_str(w, "},\"apps\":{");
	for (size_t a = 0; a < n_apps; a++) {
		const EnvSet *own = apps[a].own;

		first = true;
		/* First the CLI's own values, then the declared ones they leave. */
		for (size_t i = 0; i < env_set_size(own); i++) {
			size_t len;
			const char *value = env_set_value(own, i, &len);

			emit_app_pair(w, &first, &first_app, apps[a].name, env_set_name(own, i),
				      value, len);
		}
		for (size_t i = 0; i < env_set_size(env); i++) {
			const char *name = env_set_name(env, i);
			const SecretRoute *route = route_of(apps, n_apps, name);
			size_t len;
			const char *value = env_set_value(env, i, &len);

			if (env_set_get(own, name, NULL))
				continue;
			/* A routed secret: the app of its namespace gets the placeholder, no app
			 * the value. */
			if (route && declares_ns(apps[a].manifest, route->ns))
				emit_app_pair(w, &first, &first_app, apps[a].name, name,
					      route->placeholder, strlen(route->placeholder));
			else if (!route && declares(apps[a].manifest, name))
				emit_app_pair(w, &first, &first_app, apps[a].name, name, value,
					      len);
		}
		if (!first)
			emit(w, "}", 1);
	}
	emit_str(w, "},\"daemons\":{");
	first_app = true;
	for (size_t r = 0; r < ELEMENTSOF(secret_routes); r++) {
		first = true;
		for (size_t i = 0; i < env_set_size(env); i++) {
			size_t len;
			const char *value = env_set_value(env, i, &len);

			if (route_of(apps, n_apps, env_set_name(env, i)) != &secret_routes[r])
				continue;
			emit_app_pair(w, &first, &first_app, secret_routes[r].daemon,
				      env_set_name(env, i), value, len);
		}
		if (!first)
			emit(w, "}", 1);
	}
	emit_str(w, "}}");
}

int secrets_disk_build(const EnvSet *env, const SecretsDiskApp *apps, size_t n_apps, char **ret,
		       size_t *ret_size, char *err, size_t errlen)
{
	Writer w = {};
	size_t size;

	for (size_t a = 0; a < n_apps; a++) {
		if (!app_name_valid(apps[a].name)) {
			snprintf(
				err, errlen,
				"app name \"%s\" cannot key the secrets disk (1-%d of a-z, 0-9, -)",
				apps[a].name, APP_NAME_MAX);
			return -EINVAL;
		}
		for (size_t b = 0; b < a; b++)
			if (streq(apps[a].name, apps[b].name)) {
				snprintf(err, errlen, "app \"%s\" is listed twice", apps[a].name);
				return -EINVAL;
			}
	}
	emit_document(&w, env, apps, n_apps);
	size = (w.n + SECRETS_DISK_ALIGN - 1) / SECRETS_DISK_ALIGN * SECRETS_DISK_ALIGN;
	if (size > SECRETS_DISK_SIZE_MAX) {
		snprintf(
			err, errlen,
			"the values given with --env and --env-file take %zu bytes on the secrets disk, more than the %d KiB it holds; pass only what the apps need",
			w.n, SECRETS_DISK_SIZE_MAX / 1024);
		return -E2BIG;
	}
	/* calloc(): the padding is NUL bytes. */
	w = (Writer){.buf = calloc(1, size)};
	if (!w.buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	emit_document(&w, env, apps, n_apps);
	*ret = w.buf;
	*ret_size = size;
	return 0;
}

void secrets_disk_image_free(char *image, size_t size)
{
	if (image) {
		explicit_bzero(image, size);
		free(image);
	}
}

int secrets_disk_write(const char *path, const char *image, size_t size, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	for (int attempt = 0;; attempt++) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
			  0600);
		if (fd >= 0 || errno != EEXIST || attempt > 0)
			break;
		/* Left by a run that crashed before it could delete it: replace it, but only
		 * a plain file of ours. */
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
			snprintf(
				err, errlen,
				"%s exists and is not a file of this user's; remove it and try again",
				path);
			return -EEXIST;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			r = -errno;
			snprintf(err, errlen, "cannot remove the stale %s: %s", path, strerror(-r));
			return r;
		}
	}
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(-r));
		return r;
	}
	/* The umask can only take bits away; make sure nothing more than 0600 is there. */
	if (fstat(fd, &st) < 0 || (st.st_mode & 07777) != 0600) {
		(void)unlink(path);
		snprintf(err, errlen, "%s was not created with mode 0600", path);
		return -EPERM;
	}
	r = loop_write(fd, image, size);
	if (r < 0) {
		(void)unlink(path);
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-r));
		return r;
	}
	return 0;
}

int secrets_disk_path(const char *vm_name, char **ret, char *err, size_t errlen)
{
	_cleanup_free_ char *home = NULL, *dir = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	if (!vm_name_valid(vm_name)) {
		snprintf(err, errlen, "invalid VM name");
		return -EINVAL;
	}
	home = berth_home();
	if (!home || asprintf(&dir, "%s/run/secrets", home) < 0) {
		snprintf(err, errlen, "cannot find Berth's home: set HOME or BERTH_HOME");
		return -ENOMEM;
	}
	r = mkdir_p(dir, 0700);
	if (r < 0) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(-r));
		return r;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "%s is not a directory of this user's; remove it and try again", dir);
		return -EPERM;
	}
	if ((st.st_mode & 077) && fchmod(fd, 0700) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot make %s private (0700): %s", dir, strerror(-r));
		return r;
	}
	if (asprintf(ret, "%s/%s.img", dir, vm_name) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int secrets_disk_remove(const char *path)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}
