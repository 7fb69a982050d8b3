/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "js-quote.h"
#include "macros.h"

const char *const capability_fs_prefixes[CAPABILITY_FS_PREFIXES_N] = CAPABILITY_FS_PREFIXES_INIT;
const char *const capability_read_baseline[CAPABILITY_READ_BASELINE_N] =
	CAPABILITY_READ_BASELINE_INIT;
static const char *const device_write_paths[CAPABILITY_DEVICE_WRITE_PATHS_N] =
	CAPABILITY_DEVICE_WRITE_PATHS_INIT;

bool capability_split(const char *s, size_t len, CapabilityParts *ret)
{
	const char *c1 = s ? memchr(s, ':', len) : NULL, *c2;

	if (!c1)
		return false;
	c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s));
	if (!c2)
		return false;
	*ret = (CapabilityParts){
		.ns = s,
		.ns_len = (size_t)(c1 - s),
		.action = c1 + 1,
		.action_len = (size_t)(c2 - c1 - 1),
		.scope = c2 + 1,
		.scope_len = len - (size_t)(c2 + 1 - s),
	};
	return true;
}

bool capability_part_is(const char *p, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(p, word, len) == 0;
}

static bool is_word(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '-'))
			return false;
	return true;
}

/* The length of the line terminator at @s (\n, \r, U+2028, U+2029: what a regex "." does
 * not match), or 0. */
static size_t line_break_at(const char *s, size_t len)
{
	if (len >= 1 && (s[0] == '\n' || s[0] == '\r'))
		return 1;
	if (len >= 3 && memcmp(s, "\xe2\x80", 2) == 0 && (s[2] == '\xa8' || s[2] == '\xa9'))
		return 3;
	return 0;
}

bool capability_is_well_formed(const char *s, size_t len)
{
	CapabilityParts p;

	/* The regex's first two parts hold no colon, so its split is the first two colons. */
	if (!capability_split(s, len, &p) || !is_word(p.ns, p.ns_len) ||
	    !is_word(p.action, p.action_len) || p.scope_len == 0)
		return false;
	for (size_t i = 0; i < p.scope_len; i++)
		if (line_break_at(p.scope + i, p.scope_len - i))
			return false;
	return true;
}

/* --- filesystem scopes and paths ------------------------------------------------------- */

bool capability_path_beneath(const char *path, size_t len, const char *prefix)
{
	size_t pl = strlen(prefix);

	return len >= pl && memcmp(path, prefix, pl) == 0 && (len == pl || path[pl] == '/');
}

/* Absolute, and every segment after the leading "/" non-empty and neither "." nor ".."
 * (nor "*" with @refuse_star). "/" alone is one empty segment. */
static bool segments_canonical(const char *p, size_t n, bool refuse_star)
{
	size_t start = 1;

	if (n < 2 || p[0] != '/')
		return false;
	for (size_t i = 1; i <= n; i++) {
		size_t seg;

		if (i < n && p[i] != '/')
			continue;
		seg = i - start;
		if (seg == 0 || (seg == 1 && p[start] == '.') ||
		    (seg == 2 && p[start] == '.' && p[start + 1] == '.') ||
		    (refuse_star && seg == 1 && p[start] == '*'))
			return false;
		start = i + 1;
	}
	return true;
}

static bool under_fs_prefix(const char *p, size_t n)
{
	for (size_t i = 0; i < ELEMENTSOF(capability_fs_prefixes); i++)
		if (capability_path_beneath(p, n, capability_fs_prefixes[i]))
			return true;
	return false;
}

static int issue_static(const char *msg, char **ret_issue)
{
	*ret_issue = strdup(msg);
	return *ret_issue ? 0 : -ENOMEM;
}

/* @msg, then the scope as JSON.stringify() prints it. */
static int issue_quoted(const char *msg, const char *scope, size_t len, char **ret_issue)
{
	_cleanup_free_ char *q = js_quoted(scope, len);

	if (!q || asprintf(ret_issue, "%s%s", msg, q) < 0) {
		*ret_issue = NULL;
		return -ENOMEM;
	}
	return 0;
}

int capability_fs_scope_issue(const char *scope, size_t len, char **ret_issue)
{
	size_t plen = len;

	*ret_issue = NULL;
	if (memchr(scope, '\0', len))
		return issue_static("filesystem path must not contain a null byte", ret_issue);
	/* The kernel takes paths of up to PATH_MAX - 1 bytes; a longer one could never be
	 * granted, and the policy reader would refuse it. */
	if (len >= CAPABILITY_PATH_MAX)
		return issue_static("filesystem path must be shorter than 4096 bytes", ret_issue);
	if (len == 0 || scope[0] != '/')
		return issue_quoted("filesystem path must be absolute (start with \"/\"), got ",
				    scope, len, ret_issue);
	if (len >= 2 && scope[len - 2] == '/' && scope[len - 1] == '*')
		plen = len - 2;
	if (memchr(scope, '*', plen))
		return issue_quoted(
			"filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got ",
			scope, len, ret_issue);
	if (plen <= 1)
		return issue_static(
			"filesystem:*:/ would grant the entire container filesystem — declare a path under " CAPABILITY_FS_PREFIXES_TEXT
			" instead",
			ret_issue);
	if (!segments_canonical(scope, plen, false))
		return issue_quoted(
			"filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got ",
			scope, len, ret_issue);
	if (!under_fs_prefix(scope, plen))
		return issue_quoted("filesystem path must be " CAPABILITY_FS_PREFIXES_TEXT
				    " or a path beneath one of them, got ",
				    scope, len, ret_issue);
	return 0;
}

/* @s for a message that quotes it raw: NUL bytes shown as \0 so the text stays one string. */
static char *raw_text(const char *s, size_t len)
{
	char *out = malloc(2 * len + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (s[i])
			*o++ = s[i];
		else {
			*o++ = '\\';
			*o++ = '0';
		}
	*o = '\0';
	return out;
}

int capability_issue(const char *s, size_t len, char **ret_issue)
{
	CapabilityParts p;

	*ret_issue = NULL;
	if (!capability_split(s, len, &p)) {
		_cleanup_free_ char *raw = raw_text(s, len);

		if (!raw ||
		    asprintf(ret_issue,
			     "invalid capability string \"%s\": expected 'namespace:action:scope'",
			     raw) < 0) {
			*ret_issue = NULL;
			return -ENOMEM;
		}
		return 0;
	}
	if (capability_part_is(p.ns, p.ns_len, "filesystem") &&
	    (capability_part_is(p.action, p.action_len, "read") ||
	     capability_part_is(p.action, p.action_len, "write")))
		return capability_fs_scope_issue(p.scope, p.scope_len, ret_issue);
	return 0;
}

/* --- matching -------------------------------------------------------------------------- */

/* "*" against a stretch with no line break: the classic greedy match with one backtrack
 * point, linear in practice. */
static bool glob_line(const char *p, size_t plen, const char *t, size_t tlen)
{
	size_t pi = 0, ti = 0, star = SIZE_MAX, star_t = 0;

	while (ti < tlen) {
		if (pi < plen && p[pi] == '*') {
			star = pi++;
			star_t = ti;
		} else if (pi < plen && p[pi] == t[ti]) {
			pi++;
			ti++;
		} else if (star != SIZE_MAX) {
			pi = star + 1;
			ti = ++star_t;
		} else
			return false;
	}
	while (pi < plen && p[pi] == '*')
		pi++;
	return pi == plen;
}

static size_t next_line_break(const char *s, size_t len, size_t *ret_width)
{
	for (size_t i = 0; i < len; i++) {
		size_t w = line_break_at(s + i, len - i);

		if (w) {
			*ret_width = w;
			return i;
		}
	}
	*ret_width = 0;
	return len;
}

/* The scope glob: "*" never crosses a line break (like the regex "."), so both sides are
 * matched line by line, and the line breaks themselves must be the same. */
static bool glob_match(const char *p, size_t plen, const char *t, size_t tlen)
{
	for (;;) {
		size_t pw, tw;
		size_t pe = next_line_break(p, plen, &pw), te = next_line_break(t, tlen, &tw);

		if (!glob_line(p, pe, t, te))
			return false;
		if (pw != tw || memcmp(p + pe, t + te, pw) != 0)
			return false;
		if (pw == 0)
			return true;
		p += pe + pw, plen -= pe + pw;
		t += te + tw, tlen -= te + tw;
	}
}

bool capability_matches(const char *granted, const char *requested)
{
	CapabilityParts g, r;

	if (!granted || !requested || !capability_is_well_formed(granted, strlen(granted)) ||
	    !capability_is_well_formed(requested, strlen(requested)))
		return false;
	(void)capability_split(granted, strlen(granted), &g);
	(void)capability_split(requested, strlen(requested), &r);
	if (g.ns_len != r.ns_len || memcmp(g.ns, r.ns, g.ns_len) != 0)
		return false;
	if (g.action_len != r.action_len || memcmp(g.action, r.action, g.action_len) != 0)
		return false;
	return glob_match(g.scope, g.scope_len, r.scope, r.scope_len);
}

/* --- values ---------------------------------------------------------------------------- */

bool capability_app_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > CAPABILITY_APP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

bool capability_write_path_allowed(const char *path, size_t len, const char *app_name)
{
	char run_dir[sizeof("/run/berth/") + CAPABILITY_APP_NAME_MAX];

	if (!path || memchr(path, '\0', len) || !segments_canonical(path, len, true))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(device_write_paths); i++)
		if (capability_part_is(path, len, device_write_paths[i]))
			return true;
	if (capability_app_name_valid(app_name)) {
		snprintf(run_dir, sizeof(run_dir), "/run/berth/%s", app_name);
		if (capability_path_beneath(path, len, run_dir))
			return true;
	}
	return under_fs_prefix(path, len);
}

bool capability_read_path_allowed(const char *path, size_t len)
{
	return path && !memchr(path, '\0', len) && segments_canonical(path, len, true);
}

int capability_parse(const char *s, char **ret_namespace, char **ret_action, char **ret_scope)
{
	_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;
	CapabilityParts p;

	if (!s || !capability_split(s, strlen(s), &p))
		return -EINVAL;
	ns = strndup(p.ns, p.ns_len);
	action = strndup(p.action, p.action_len);
	scope = strndup(p.scope, p.scope_len);
	if (!ns || !action || !scope)
		return -ENOMEM;
	if (ret_namespace)
		*ret_namespace = TAKE_PTR(ns);
	if (ret_action)
		*ret_action = TAKE_PTR(action);
	if (ret_scope)
		*ret_scope = TAKE_PTR(scope);
	return 0;
}
