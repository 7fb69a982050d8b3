/* SPDX-License-Identifier: Apache-2.0 */
/* Reload in place: vmm.sock, and the steps with the guest (reload.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "line-conn.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "reload.h"
#include "time-util.h"

#define RELOAD_FILE_NAME_MAX 64

typedef enum ReloadStep {
	STEP_IDLE,
	STEP_STOPPING, /* app_stop sent */
	STEP_STARTING, /* app_start sent */
} ReloadStep;

struct Reload {
	ReloadHost host;
	int listen_fd;
	EvSource *accept_source;
	LineConn *client; /* the one request under way, while its client stays */
	ReloadStep step;
	VmmApp *app;
	int image_fd; /* the new share image */
	char *image_path, *manifest_path, *app_dir;
	char policy_sha256[65];
	ShareDigest digest;
	EvSource *timer;
	uint64_t timeout_usec, step_start;
	long long stop_ms, copy_ms;
};

static void answer(Reload *r, json_t *o)
{
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	if (!r->client)
		return;
	if (!text || line_conn_write(r->client, text, strlen(text)) < 0)
		r->client = line_conn_free(r->client);
	else
		line_conn_close_after_flush(TAKE_PTR(r->client));
}

/* The request is over: forget it, and remove what the caller copied into the run dir. */
static void request_done(Reload *r)
{
	r->step = STEP_IDLE;
	r->app = NULL;
	r->image_fd = safe_close(r->image_fd);
	if (r->image_path)
		(void)unlink(r->image_path);
	if (r->manifest_path)
		(void)unlink(r->manifest_path);
	free(r->image_path);
	free(r->manifest_path);
	free(r->app_dir);
	r->image_path = r->manifest_path = r->app_dir = NULL;
	if (r->timer)
		ev_source_set_enabled(r->timer, EV_OFF);
}

/* Answer the request with why it failed; returns 0 so that callers can "return fail(…)". */
static int fail(Reload *r, bool restart, const char *fmt, ...) _printf_(3, 4);
static int fail(Reload *r, bool restart, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warning("reload in place: %s", why);
	answer(r, restart ? json_pack("{s:b, s:b, s:s}", "ok", 0, "restart", 1, "error", why)
			  : json_pack("{s:b, s:s}", "ok", 0, "error", why));
	request_done(r);
	return 0;
}

static int send_step(Reload *r, json_t *req)
{
	_cleanup_free_ char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	int k;

	json_decref(req);
	if (!text)
		return -ENOMEM;
	k = r->host.send_guest(text, strlen(text), r->host.userdata);
	if (k < 0)
		return k;
	r->step_start = ev_time_now();
	ev_source_set_time_relative(r->timer, r->timeout_usec);
	ev_source_set_enabled(r->timer, EV_ONESHOT);
	return 0;
}

static int on_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	Reload *r = userdata;

	if (r->step != STEP_IDLE)
		fail(r, true, "the guest did not answer %s within %llu s",
		     r->step == STEP_STOPPING ? "app_stop" : "app_start",
		     (unsigned long long)(r->timeout_usec / USEC_PER_SEC));
	return 0;
}

/* A name the caller put in the run dir: a plain file name, nothing that walks elsewhere. */
static char *run_dir_file(const Reload *r, const char *name)
{
	char *path = NULL;

	if (!name || !name[0] || name[0] == '.' || strchr(name, '/') ||
	    strlen(name) > RELOAD_FILE_NAME_MAX)
		return NULL;
	if (asprintf(&path, "%s/%s", r->host.vmm->run_dir, name) < 0)
		return NULL;
	return path;
}

/* The policy compiled from the new berth.yml, as at boot: its sha256 in r->policy_sha256. */
static int compile_new_policy(Reload *r, char *why, size_t whylen)
{
	_cleanup_(manifest_freep) Manifest *m = NULL;
	ManifestError merr = {};
	VmmApp tmp = {.dir = r->app->dir};
	int k;

	k = manifest_load_at(AT_FDCWD, r->manifest_path, &m, &merr);
	if (k < 0) {
		snprintf(why, whylen, "the new berth.yml is invalid: %s",
			 merr.text ? merr.text : strerror(-k));
		manifest_error_done(&merr);
		return k;
	}
	if (!streq(manifest_name(m), r->app->name)) {
		snprintf(why, whylen, "the app's name changed from \"%s\" to \"%s\"", r->app->name,
			 manifest_name(m));
		return -EINVAL;
	}
	tmp.name = r->app->name;
	tmp.manifest = manifest_to_json(m);
	k = tmp.manifest ? vmm_compile_policy(&tmp, r->host.vmm->n_apps) : -ENOMEM;
	if (k >= 0)
		memcpy(r->policy_sha256, tmp.policy_sha256, sizeof(r->policy_sha256));
	else
		snprintf(why, whylen, "cannot compile the new policy: %s", strerror(-k));
	capability_policy_free(tmp.policy);
	json_decref(tmp.warnings);
	json_decref(tmp.manifest);
	return k;
}

static bool take_digest(Reload *r, const json_t *req)
{
	const char *tree = json_string_value(json_object_get(req, "treeSha256"));
	const json_t *files = json_object_get(req, "files"), *bytes = json_object_get(req, "bytes");

	if (!tree || strlen(tree) != 64 || strspn(tree, "0123456789abcdef") != 64 ||
	    !json_is_integer(files) || !json_is_integer(bytes) || json_integer_value(files) < 0 ||
	    json_integer_value(files) > SHARE_FILES_MAX || json_integer_value(bytes) < 0 ||
	    (uint64_t)json_integer_value(bytes) > SHARE_BYTES_MAX)
		return false;
	memcpy(r->digest.tree_sha256, tree, sizeof(r->digest.tree_sha256));
	r->digest.files = (unsigned)json_integer_value(files);
	r->digest.bytes = (uint64_t)json_integer_value(bytes);
	return true;
}

static int begin(Reload *r, const json_t *req)
{
	Vmm *v = r->host.vmm;
	const char *name = json_string_value(json_object_get(req, "app"));
	const char *dir = json_string_value(json_object_get(req, "appDir"));
	json_int_t timeout_ms = json_integer_value(json_object_get(req, "timeoutMs"));
	char why[1024];
	struct stat st;
	int k;

	if (v->args.docker)
		return fail(r, true,
			    "a container's share is its bundle directory, bound at start: the "
			    "container restarts with the new one");
	for (size_t i = 0; name && i < v->n_apps; i++)
		if (streq(v->apps[i].name, name))
			r->app = &v->apps[i];
	r->image_path = run_dir_file(r, json_string_value(json_object_get(req, "image")));
	r->manifest_path = run_dir_file(r, json_string_value(json_object_get(req, "manifest")));
	if (!r->app)
		return fail(r, true, "no app named \"%s\" in this VM", name ?: "");
	if (!r->image_path || !r->manifest_path || !dir || !take_digest(r, req))
		return fail(r, true,
			    "a reload names an image and a manifest in the run dir, the app's "
			    "directory and the new share's treeSha256, files and bytes");
	if (!(r->app_dir = strdup(dir)))
		return fail(r, true, "out of memory");
	r->timeout_usec = (uint64_t)(timeout_ms > 0 ? MIN(timeout_ms, RELOAD_TIMEOUT_MS_MAX)
						    : RELOAD_TIMEOUT_MS_DEFAULT) *
			  USEC_PER_MSEC;
	r->image_fd = open(r->image_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (r->image_fd < 0 || fstat(r->image_fd, &st) < 0 || !S_ISREG(st.st_mode))
		return fail(r, true, "cannot open the new share image %s: %s", r->image_path,
			    strerror(errno ?: EINVAL));
	/* The share disk keeps the size QEMU opened it at: every share image has it. */
	if (st.st_size <= 0 || (uint64_t)st.st_size > SNAPSHOT_APP_BYTES)
		return fail(r, true, "the new share image is %lld bytes; a share disk holds %llu",
			    (long long)st.st_size, (unsigned long long)SNAPSHOT_APP_BYTES);
	if (compile_new_policy(r, why, sizeof(why)) < 0)
		return fail(r, true, "%s", why);
	if (!streq(r->policy_sha256, r->app->policy_sha256))
		return fail(
			r, true,
			"the new berth.yml compiles to another policy than the one \"%s\" runs under; "
			"the VM restarts to apply it",
			r->app->name);
	k = send_step(r, json_pack("{s:s, s:s}", "op", "app_stop", "app", r->app->name));
	if (k < 0)
		return fail(r, true, "cannot reach the guest's control port: %s", strerror(-k));
	r->step = STEP_STOPPING;
	log_info("reload in place of \"%s\": stopping it", r->app->name);
	return 0;
}

/* The app is stopped and its share unmounted in the guest: put the new image in its place.
 * QEMU reads the share disk through the same file, at the size it opened it. */
static int copy_image(Reload *r, char *why, size_t whylen)
{
	_cleanup_close_ int fd = open(r->app->image, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	loff_t in = 0;

	if (fd < 0 || ftruncate(fd, 0) < 0)
		goto fail;
	for (;;) {
		ssize_t n = copy_file_range(r->image_fd, &in, fd, NULL, 1 << 30, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
	}
	if (ftruncate(fd, (off_t)SNAPSHOT_APP_BYTES) < 0)
		goto fail;
	return 0;
fail:
	snprintf(why, whylen, "cannot write the new share into %s: %s", r->app->image,
		 strerror(errno));
	return -errno;
}

static int step_answered(Reload *r, const json_t *o)
{
	bool ok = json_is_true(json_object_get(o, "ok"));
	const char *error = json_string_value(json_object_get(o, "error")) ?: "no reason given";
	long long ms = (long long)((ev_time_now() - r->step_start) / USEC_PER_MSEC);
	char why[1024];
	int k;

	if (r->step == STEP_STOPPING) {
		uint64_t t0;

		if (!ok)
			return fail(r, true, "the guest could not stop \"%s\": %.600s",
				    r->app->name, error);
		r->stop_ms = ms;
		t0 = ev_time_now();
		if (copy_image(r, why, sizeof(why)) < 0)
			return fail(r, true, "%s", why);
		r->copy_ms = (long long)((ev_time_now() - t0) / USEC_PER_MSEC);
		/* The disk holds the new share from now on, whatever the app does with it. */
		r->app->digest = r->digest;
		free(r->app->dir);
		r->app->dir = TAKE_PTR(r->app_dir);
		r->app->reloads++;
		r->host.changed(r->host.userdata);
		k = send_step(r, json_pack("{s:s, s:s, s:s, s:s}", "op", "app_start", "app",
					   r->app->name, "policySha256", r->app->policy_sha256,
					   "treeSha256", r->digest.tree_sha256));
		if (k < 0)
			return fail(r, true, "cannot reach the guest's control port: %s",
				    strerror(-k));
		r->step = STEP_STARTING;
		return 0;
	}
	if (!ok)
		return fail(r, false, "%.900s", error);
	log_info("reload in place of \"%s\": ready (stop %lld ms, copy %lld ms, start %lld ms)",
		 r->app->name, r->stop_ms, r->copy_ms, ms);
	answer(r, json_pack("{s:b, s:I, s:I, s:I}", "ok", 1, "stopMs", (json_int_t)r->stop_ms,
			    "copyMs", (json_int_t)r->copy_ms, "startMs", (json_int_t)ms));
	request_done(r);
	return 0;
}

bool reload_take_guest_reply(Reload *r, const char *line, size_t len)
{
	_cleanup_(json_decrefp) json_t *o = NULL;
	const char *want;

	if (!r || r->step == STEP_IDLE)
		return false;
	want = r->step == STEP_STOPPING ? "\"op\":\"app_stop\"" : "\"op\":\"app_start\"";
	if (!memmem(line, len, want, strlen(want)))
		return false;
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	/* An answer has no "event": a journal line quoting the op is not one. */
	if (!json_is_object(o) || json_object_get(o, "event") ||
	    !streq(json_string_value(json_object_get(o, "op")) ?: "",
		   r->step == STEP_STOPPING ? "app_stop" : "app_start"))
		return false;
	(void)step_answered(r, o);
	return true;
}

static void on_client_line(LineConn *c, char *line, size_t len, void *userdata)
{
	Reload *r = userdata;
	_cleanup_(json_decrefp) json_t *req = NULL;

	if (c != r->client || r->step != STEP_IDLE || r->image_path)
		return; /* one request per connection */
	req = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(req) ||
	    !streq(json_string_value(json_object_get(req, "op")) ?: "", "reload"))
		(void)fail(r, false, "expected a JSON object with \"op\":\"reload\"");
	else
		(void)begin(r, req);
}

static void on_client_close(LineConn *c, int error, void *userdata)
{
	Reload *r = userdata;

	/* The steps go on: the guest must not be left half-way. Only the answer is lost. */
	if (r->client == c)
		r->client = NULL;
}

static int on_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	static const char busy[] = "{\"error\":\"another reload is under way\",\"ok\":false}";
	Reload *r = userdata;
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	LineConn *conn;

	if (c < 0)
		return 0;
	if (r->client || r->step != STEP_IDLE) {
		(void)!write(c, busy, sizeof(busy) - 1);
		(void)!write(c, "\n", 1);
		close(c);
		return 0;
	}
	if (line_conn_new(r->host.loop, c, RELOAD_REQUEST_MAX, 64 * 1024, on_client_line,
			  on_client_close, r, &conn) < 0)
		return 0;
	r->client = conn;
	return 0;
}

int reload_listen(const ReloadHost *host, Reload **ret)
{
	_cleanup_free_ Reload *r = calloc(1, sizeof(*r));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int k;

	if (!r)
		return -ENOMEM;
	r->host = *host;
	r->listen_fd = r->image_fd = -EBADF;
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/vmm.sock", host->vmm->run_dir) >=
	    sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	(void)unlink(sa.sun_path);
	r->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (r->listen_fd < 0)
		return -errno;
	if (bind(r->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0600) < 0 || listen(r->listen_fd, 4) < 0) {
		k = -errno;
		close(r->listen_fd);
		return k;
	}
	k = ev_add_io(host->loop, &r->accept_source, r->listen_fd, EPOLLIN, on_accept, r);
	if (k >= 0)
		k = ev_add_time_relative(host->loop, &r->timer, EV_USEC_INFINITY, on_timeout, r);
	if (k < 0) {
		reload_free(TAKE_PTR(r));
		return k;
	}
	ev_source_set_enabled(r->timer, EV_OFF);
	*ret = TAKE_PTR(r);
	return 0;
}

Reload *reload_free(Reload *r)
{
	if (!r)
		return NULL;
	request_done(r);
	line_conn_free(r->client);
	ev_source_free(r->accept_source);
	ev_source_free(r->timer);
	safe_close(r->listen_fd);
	free(r);
	return NULL;
}
