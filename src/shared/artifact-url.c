/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "artifact-url.h"
#include "macros.h"

/* Long enough for the longest value: an asset name, "initrd-" + 64 hex + ".cpio". */
#define VALUE_MAX 128

typedef int (*PlaceholderFn)(const PinSet *pins, ArtifactKind kind, char *buf, size_t len);

static int value_asset(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	_cleanup_free_ char *name = pinset_asset_name(pins, kind);

	if (!name)
		return -ENOMEM;
	snprintf(buf, len, "%s", name);
	return 0;
}

static int value_kernel8(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%.8s", pins->sha256[ARTIFACT_KERNEL]);
	return 0;
}

static int value_rootfs8(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%.8s", pins->sha256[ARTIFACT_ROOTFS]);
	return 0;
}

static int value_kernel(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%s", pins->sha256[ARTIFACT_KERNEL]);
	return 0;
}

static int value_rootfs(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%s", pins->sha256[ARTIFACT_ROOTFS]);
	return 0;
}

static int value_kind(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%s", artifact_kind_to_string(kind));
	return 0;
}

static int value_sha256(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	snprintf(buf, len, "%s", pins->sha256[kind]);
	return 0;
}

static int value_file(const PinSet *pins, ArtifactKind kind, char *buf, size_t len)
{
	/* The installed path relative to an empty root; its last component is the file name. */
	_cleanup_free_ char *path = pinset_install_path(pins, "", kind);
	const char *slash;

	if (!path)
		return -ENOMEM;
	slash = strrchr(path, '/');
	snprintf(buf, len, "%s", slash ? slash + 1 : path);
	return 0;
}

static const struct {
	const char *name;
	PlaceholderFn value;
} placeholders[] = {
	{"asset", value_asset},	  {"kernel8", value_kernel8}, {"rootfs8", value_rootfs8},
	{"kernel", value_kernel}, {"rootfs", value_rootfs},   {"kind", value_kind},
	{"sha256", value_sha256}, {"file", value_file},
};

static const char *const schemes[] = {"http://", "https://", "file://"};

_printf_(3, 4) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static PlaceholderFn placeholder_find(const char *name, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(placeholders); i++)
		if (strlen(placeholders[i].name) == len && strneq(placeholders[i].name, name, len))
			return placeholders[i].value;
	return NULL;
}

static int scheme_ok(const char *tmpl)
{
	for (size_t i = 0; i < ELEMENTSOF(schemes); i++)
		if (strncasecmp(tmpl, schemes[i], strlen(schemes[i])) == 0)
			return 1;
	return 0;
}

/* Append @len bytes to @out, which holds *@used bytes of at most ARTIFACT_URL_MAX. */
static int append(char *out, size_t *used, const char *s, size_t len)
{
	if (len > ARTIFACT_URL_MAX - *used)
		return -E2BIG;
	memcpy(out + *used, s, len);
	*used += len;
	return 0;
}

/*
 * One pass over the template for both expansion and checking: with @pins NULL nothing is
 * written, so artifact_url_check() reports exactly the errors expansion would.
 */
static int expand(const char *tmpl, const PinSet *pins, ArtifactKind kind, char *out, size_t *used,
		  char *err, size_t errlen)
{
	const char *p = tmpl;

	if (!tmpl || !*tmpl)
		return fail(err, errlen, "the URL template is empty");
	if (!scheme_ok(tmpl))
		return fail(err, errlen,
			    "the URL template must start with http://, https:// or file://");
	while (*p) {
		const char *open = strpbrk(p, "{}"), *close;
		char value[VALUE_MAX];
		PlaceholderFn fn;
		int r;

		for (const char *c = p; *c && c != open; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return fail(err, errlen,
					    "control character at offset %zu of the URL template",
					    (size_t)(c - tmpl));
		if (!open)
			return pins ? append(out, used, p, strlen(p)) : 0;
		if (*open == '}')
			return fail(err, errlen, "unbalanced '}' at offset %zu of the URL template",
				    (size_t)(open - tmpl));
		close = strpbrk(open + 1, "{}");
		if (!close || *close == '{')
			return fail(err, errlen, "unbalanced '{' at offset %zu of the URL template",
				    (size_t)(open - tmpl));
		fn = placeholder_find(open + 1, (size_t)(close - open - 1));
		if (!fn)
			return fail(
				err, errlen,
				"unknown placeholder {%.*s} in the URL template; known: {asset} {kernel8} {rootfs8} {kernel} {rootfs} {kind} {sha256} {file}",
				(int)MIN(close - open - 1, 64), open + 1);
		if (pins) {
			r = append(out, used, p, (size_t)(open - p));
			if (r >= 0)
				r = fn(pins, kind, value, sizeof(value));
			if (r >= 0)
				r = append(out, used, value, strlen(value));
			if (r == -E2BIG && err && errlen > 0)
				snprintf(err, errlen, "the URL would be longer than %d bytes",
					 ARTIFACT_URL_MAX);
			if (r < 0)
				return r;
		}
		p = close + 1;
	}
	return 0;
}

int artifact_url_expand(const char *tmpl, const PinSet *pins, ArtifactKind kind, char **ret,
			char *err, size_t errlen)
{
	_cleanup_free_ char *out = NULL;
	size_t used = 0;
	int r;

	if (!pins || kind < 0 || kind >= _ARTIFACT_KIND_MAX)
		return -EINVAL;
	out = malloc(ARTIFACT_URL_MAX + 1);
	if (!out)
		return -ENOMEM;
	r = expand(tmpl, pins, kind, out, &used, err, errlen);
	if (r < 0)
		return r;
	out[used] = '\0';
	*ret = TAKE_PTR(out);
	return 0;
}

int artifact_url_check(const char *tmpl, char *err, size_t errlen)
{
	size_t used = 0;

	return expand(tmpl, NULL, ARTIFACT_KERNEL, NULL, &used, err, errlen);
}
