/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot-disk.h"
#include "fileio.h"
#include "macros.h"

static size_t round_up(size_t n)
{
	return (n + BOOT_DISK_SECTOR - 1) / BOOT_DISK_SECTOR * BOOT_DISK_SECTOR;
}

static _printf_(3, 4) int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* The header with the secrets' offset filled in: its length decides the offset, and the
 * offset's digits its length, so settle both by trying. */
static char *header_text(const json_t *plan, size_t secrets_len, size_t *ret_offset)
{
	size_t offset = 0;

	for (int tries = 0; tries < 4; tries++) {
		json_t *doc = json_pack(
			"{s:i, s:O, s:o}", "schema", BOOT_DISK_SCHEMA, "plan", plan, "secrets",
			secrets_len ? json_pack("{s:I, s:I}", "offset", (json_int_t)offset,
						"length", (json_int_t)secrets_len)
				    : json_null());
		char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		size_t need;

		json_decref(doc);
		if (!text)
			return NULL;
		need = round_up(strlen(BOOT_DISK_MAGIC) + strlen(text) + 1);
		if (!secrets_len || need == offset) {
			*ret_offset = need;
			return text;
		}
		offset = need;
		free(text);
	}
	return NULL;
}

int boot_disk_write(int fd, const json_t *plan, int secrets_fd, char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL, *head = NULL;
	size_t secrets_len = 0, offset = 0, head_len;
	struct stat st;
	int r;

	if (secrets_fd >= 0) {
		if (fstat(secrets_fd, &st) < 0)
			return -errno;
		if (st.st_size <= 0 || (size_t)st.st_size > BOOT_DISK_SECRETS_MAX)
			return fail(err, errlen,
				    "the secrets image is empty or larger than %u bytes",
				    BOOT_DISK_SECRETS_MAX);
		secrets_len = (size_t)st.st_size;
	}
	text = header_text(plan, secrets_len, &offset);
	if (!text)
		return -ENOMEM;
	head_len = round_up(strlen(BOOT_DISK_MAGIC) + strlen(text) + 1);
	if (head_len > BOOT_DISK_HEADER_MAX)
		return fail(err, errlen, "the boot plan is larger than %u bytes; boot fewer apps",
			    BOOT_DISK_HEADER_MAX);
	head = calloc(1, head_len);
	if (!head)
		return -ENOMEM;
	memcpy(head, BOOT_DISK_MAGIC, strlen(BOOT_DISK_MAGIC));
	memcpy(head + strlen(BOOT_DISK_MAGIC), text, strlen(text));
	r = loop_write(fd, head, head_len);
	if (r < 0)
		return r;
	for (size_t done = 0; done < secrets_len;) {
		loff_t in = (loff_t)done;
		ssize_t n = copy_file_range(secrets_fd, &in, fd, NULL, secrets_len - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : fail(err, errlen, "the secrets image got shorter");
		done += (size_t)n;
	}
	/* Whole sectors, as a block device has. */
	if (ftruncate(fd, (off_t)round_up(head_len + secrets_len)) < 0)
		return -errno;
	return 0;
}

int boot_disk_parse(const char *buf, size_t len, json_t **ret_plan, const char **ret_secrets,
		    size_t *ret_secrets_len, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	size_t magic = strlen(BOOT_DISK_MAGIC), text_len;
	const char *text, *end;
	json_t *secrets, *plan;
	json_error_t jerr;

	if (len < magic || memcmp(buf, BOOT_DISK_MAGIC, magic) != 0)
		return fail(err, errlen, "boot disk: not a BERTHBOOT1 disk");
	text = buf + magic;
	end = memchr(text, '\0', MIN(len - magic, (size_t)BOOT_DISK_HEADER_MAX));
	if (!end)
		return fail(err, errlen, "boot disk: the header has no end within %u bytes",
			    BOOT_DISK_HEADER_MAX);
	text_len = (size_t)(end - text);
	doc = json_loadb(text, text_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(doc))
		return fail(err, errlen, "boot disk: the header is not a JSON object (%s)",
			    doc ? "wrong type" : jerr.text);
	if (json_integer_value(json_object_get(doc, "schema")) != BOOT_DISK_SCHEMA)
		return fail(err, errlen, "boot disk: schema %lld, not %d",
			    json_integer_value(json_object_get(doc, "schema")), BOOT_DISK_SCHEMA);
	plan = json_object_get(doc, "plan");
	secrets = json_object_get(doc, "secrets");
	if (!json_is_object(plan))
		return fail(err, errlen, "boot disk: no plan");
	*ret_secrets = NULL;
	*ret_secrets_len = 0;
	if (json_is_object(secrets)) {
		json_int_t off = json_integer_value(json_object_get(secrets, "offset"));
		json_int_t n = json_integer_value(json_object_get(secrets, "length"));

		if (off < (json_int_t)(magic + text_len + 1) || n <= 0 ||
		    n > BOOT_DISK_SECRETS_MAX || (size_t)off > len || (size_t)n > len - (size_t)off)
			return fail(err, errlen, "boot disk: the secrets lie outside the disk");
		*ret_secrets = buf + off;
		*ret_secrets_len = (size_t)n;
	} else if (secrets && !json_is_null(secrets))
		return fail(err, errlen, "boot disk: secrets is neither an object nor null");
	*ret_plan = json_incref(plan);
	return 0;
}
