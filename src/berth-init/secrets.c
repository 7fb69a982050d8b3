/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "boot-disk.h"
#include "secrets.h"

/* Version 1: shared and apps. Version 2 adds daemons, the secrets of a broker berth-init
 * starts (the GitHub broker's GITHUB_TOKEN), which no app receives. */
#define MAGIC_V1 "BERTHSEC1\n"
#define MAGIC_V2 "BERTHSEC2\n"
#define MAGIC_LEN 10

static int secrets_name_valid(const char *name)
{
	if (!name || !*name || strlen(name) > 128)
		return 0;
	if (!((*name >= 'A' && *name <= 'Z') || (*name >= 'a' && *name <= 'z') || *name == '_'))
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		      (*c >= '0' && *c <= '9') || *c == '_'))
			return 0;
	return 1;
}

static int app_name_valid(const char *name)
{
	if (!*name || strlen(name) > 64)
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return 0;
	return 1;
}

static int check_env_object(const json_t *o, const char *where, char *err, size_t errlen)
{
	const char *name;
	json_t *v;

	if (!json_is_object(o)) {
		snprintf(err, errlen, "secrets disk: %s is not an object", where);
		return -EBADMSG;
	}
	json_object_foreach((json_t *)o, name, v) {
		if (!secrets_name_valid(name)) {
			snprintf(err, errlen, "secrets disk: %s has an invalid variable name",
				 where);
			return -EBADMSG;
		}
		if (!json_is_string(v)) {
			snprintf(err, errlen, "secrets disk: %s.%s is not a string", where, name);
			return -EBADMSG;
		}
	}
	return 0;
}

int secrets_parse(const char *buf, size_t len, json_t **ret, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	size_t body, end;
	const char *key, *app;
	json_t *v, *apps;
	int version, r;

	if (len > SECRETS_MAX_BYTES || len < MAGIC_LEN) {
		snprintf(err, errlen, "secrets disk: not a BERTHSEC1 or BERTHSEC2 image");
		return -EBADMSG;
	}
	if (memcmp(buf, MAGIC_V1, MAGIC_LEN) == 0)
		version = 1;
	else if (memcmp(buf, MAGIC_V2, MAGIC_LEN) == 0)
		version = 2;
	else {
		snprintf(err, errlen, "secrets disk: not a BERTHSEC1 or BERTHSEC2 image");
		return -EBADMSG;
	}
	body = MAGIC_LEN;
	end = body;
	while (end < len && buf[end] != '\0')
		end++;
	for (size_t i = end; i < len; i++)
		if (buf[i] != '\0') {
			snprintf(err, errlen, "secrets disk: data after the JSON document");
			return -EBADMSG;
		}
	/* No JSON_ALLOW_NUL: a value with a NUL byte is refused by the parser itself. */
	doc = json_loadb(buf + body, end - body, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(doc)) {
		/* jansson's error text can quote input; say only where the problem is. */
		snprintf(err, errlen, "secrets disk: the JSON document is malformed");
		return -EBADMSG;
	}
	json_object_foreach(doc, key, v) {
		if (!streq(key, "shared") && !streq(key, "apps") &&
		    !(version >= 2 && streq(key, "daemons"))) {
			snprintf(err, errlen, "secrets disk: unknown top-level key");
			return -EBADMSG;
		}
	}
	if (json_object_get(doc, "shared")) {
		r = check_env_object(json_object_get(doc, "shared"), "shared", err, errlen);
		if (r < 0)
			return r;
	}
	for (size_t k = 0; k < 2; k++) {
		const char *scope = k == 0 ? "apps" : "daemons";

		apps = json_object_get(doc, scope);
		if (apps && !json_is_object(apps)) {
			snprintf(err, errlen, "secrets disk: %s is not an object", scope);
			return -EBADMSG;
		}
		json_object_foreach(apps, app, v) {
			char where[96];

			if (!app_name_valid(app)) {
				snprintf(err, errlen, "secrets disk: invalid %s name",
					 k == 0 ? "app" : "daemon");
				return -EBADMSG;
			}
			snprintf(where, sizeof(where), "%s.%s", scope, app);
			r = check_env_object(v, where, err, errlen);
			if (r < 0)
				return r;
		}
	}
	*ret = TAKE_PTR(doc);
	return 0;
}

const json_t *secrets_for_daemon(const json_t *secrets, const char *daemon)
{
	return json_object_get(json_object_get(secrets, "daemons"), daemon);
}

/* Where the disk's content ends, as far as the header in @buf[0..@n) says: the header's
 * end, or the secrets image's beyond it; 0 while the header's end is not in it yet. The
 * values are only a length to read: boot_disk_parse() checks them. */
static size_t boot_disk_extent(const char *buf, size_t n)
{
	size_t magic = strlen(BOOT_DISK_MAGIC), header;
	const char *nul = n > magic ? memchr(buf + magic, '\0', n - magic) : NULL;
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_t *secrets;
	json_int_t at, len;

	if (!nul)
		return 0;
	header = (size_t)(nul - buf) + 1;
	doc = json_loadb(buf + magic, header - 1 - magic, 0, NULL);
	secrets = json_object_get(doc, "secrets");
	at = json_integer_value(json_object_get(secrets, "offset"));
	len = json_integer_value(json_object_get(secrets, "length"));
	if (at <= 0 || len <= 0 || at > BOOT_DISK_SIZE_MAX || len > BOOT_DISK_SIZE_MAX)
		return header;
	return MIN(MAX(header, (size_t)(at + len)), (size_t)BOOT_DISK_SIZE_MAX);
}

/*
 * The disk up to what its header says it holds: a restored VM's boot disk has the size of
 * the template's placeholder, megabytes of zeros past the plan and the secrets, which
 * reading would cost. Returns the bytes read into @buf (BOOT_DISK_SIZE_MAX of room).
 */
static ssize_t read_boot_disk(int fd, char *buf)
{
	size_t have = 0, want = 0;

	while (have < BOOT_DISK_SIZE_MAX) {
		size_t step = want > have ? want - have : 64 * 1024;
		ssize_t n = read(fd, buf + have, MIN(step, BOOT_DISK_SIZE_MAX - have));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		have += (size_t)n;
		if (n == 0 || (want && have >= want))
			break;
		want = boot_disk_extent(buf, have);
		if (want && have >= want)
			break;
	}
	return (ssize_t)have;
}

int boot_read_device(const char *dev, json_t **ret_plan, json_t **ret_secrets, char *err,
		     size_t errlen)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_(json_decrefp) json_t *plan = NULL;
	char *buf = malloc(BOOT_DISK_SIZE_MAX);
	const char *secrets = NULL;
	size_t secrets_len = 0;
	ssize_t n;
	int r;

	*ret_secrets = NULL;
	if (!buf)
		return -ENOMEM;
	fd = open(dev, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "boot disk: cannot open %s: %s", dev, strerror(-r));
		free(buf);
		return r;
	}
	/* Nobody may open it again: no app, no later process of ours. */
	(void)chmod(dev, 0);
	(void)unlink(dev);
	n = read_boot_disk(fd, buf);
	if (n < 0) {
		snprintf(err, errlen, "boot disk: cannot read %s: %s", dev, strerror((int)-n));
		r = (int)n;
	} else
		r = boot_disk_parse(buf, (size_t)n, &plan, &secrets, &secrets_len, err, errlen);
	if (r >= 0 && secrets)
		r = secrets_parse(secrets, secrets_len, ret_secrets, err, errlen);
	/* The values live on only in the parsed object, never in a freed buffer (nothing was
	 * read past the n bytes). */
	explicit_bzero(buf, n > 0 ? (size_t)n : 0);
	free(buf);
	if (r < 0)
		return r;
	*ret_plan = TAKE_PTR(plan);
	return 0;
}

static json_t *names_of(const json_t *o)
{
	json_t *arr = json_array(), *v;
	const char *name;

	json_object_foreach((json_t *)o, name, v)
		json_array_append_new(arr, json_string(name));
	return arr;
}

static json_t *scope_names(const json_t *scope)
{
	json_t *out = json_object(), *v;
	const char *name;

	json_object_foreach((json_t *)scope, name, v)
		json_object_set_new(out, name, names_of(v));
	return out;
}

json_t *secrets_names(const json_t *secrets)
{
	json_t *o = json_pack("{s:o, s:o}", "apps", scope_names(json_object_get(secrets, "apps")),
			      "shared", names_of(json_object_get(secrets, "shared")));

	/* Only when there is one: the event reads as it always has for a disk without. */
	if (o && json_object_size(json_object_get(secrets, "daemons")) > 0)
		json_object_set_new(o, "daemons", scope_names(json_object_get(secrets, "daemons")));
	return o;
}
