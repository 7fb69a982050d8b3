/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "request.h"
#include "utf8.h"

static const char *const op_names[_SFS_OP_MAX] = {
	[SFS_OP_REGISTER] = "register",
	[SFS_OP_TAG] = "tag",
	[SFS_OP_QUERY] = "query",
};

void sfs_request_done(SfsRequest *r)
{
	json_decref(r->id);
	free(r->claimed_app);
	free(r->path);
	free(r->task);
	for (size_t i = 0; i < r->n_related; i++)
		free(r->related[i]);
	free(r->related);
	free(r->text);
	*r = (SfsRequest){.op = _SFS_OP_INVALID};
}

static _printf_(3, 4) int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Text a peer sends: UTF-8, no NUL, no control characters but tab and newline. */
static bool text_ok(const char *s, size_t len, bool newlines)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0x7f || (c < 0x20 && !(newlines && (c == '\n' || c == '\t'))))
			return false;
	}
	return utf8_valid(s, len);
}

/* An app name as berth names apps (SPEC 9.2: [a-z0-9-]), or the stand-ins root, uid-N. */
static bool app_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SFS_APP_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '_'))
			return false;
	return true;
}

static bool depth_ok(const json_t *v, unsigned depth)
{
	const char *k;
	json_t *x;
	size_t i;

	if (depth > SFS_DEPTH_MAX)
		return false;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if (!depth_ok(x, depth + 1))
				return false;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (!depth_ok(x, depth + 1))
				return false;
	}
	return true;
}

/* Optional string @key of at most @max bytes: 0 (and *ret NULL when absent) or -EINVAL. */
static int get_text(json_t *o, const char *key, size_t max, bool newlines, char **ret, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(o, key);
	size_t len;

	*ret = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return fail(err, errlen, "\"%s\" must be a string", key);
	len = json_string_length(v);
	if (len > max)
		return fail(err, errlen, "\"%s\" is %zu bytes, over the cap of %zu", key, len, max);
	if (!text_ok(json_string_value(v), len, newlines))
		return fail(err, errlen, "\"%s\" must be UTF-8 text without control characters",
			    key);
	*ret = strdup(json_string_value(v));
	return *ret ? 0 : -ENOMEM;
}

int sfs_path_normalize(const char *path, const char *root, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	size_t len = strlen(path), rootlen = strlen(root), depth = 0, o = 0;
	const char *p = path;

	if (outlen < SFS_PATH_MAX + 1)
		return fail(err, errlen, "internal: path buffer too small");
	if (len == 0)
		return fail(err, errlen, "\"path\" must not be empty");
	if (len > SFS_PATH_MAX)
		return fail(err, errlen, "\"path\" is %zu bytes, over the cap of %d", len,
			    SFS_PATH_MAX);
	if (!text_ok(path, len, false))
		return fail(err, errlen, "\"path\" must be UTF-8 text without control characters");
	if (path[0] == '/') {
		/* An absolute path is taken only beneath the root, segment-aware. */
		while (rootlen > 1 && root[rootlen - 1] == '/')
			rootlen--;
		if (!strneq(path, root, rootlen) || (path[rootlen] != '/' && path[rootlen] != 0))
			return fail(err, errlen, "\"path\" must be beneath %.*s, got \"%s\"",
				    (int)rootlen, root, path);
		p = path + rootlen;
	}
	while (*p) {
		const char *seg, *end;
		size_t n;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		seg = p;
		end = strchrnul(seg, '/');
		n = (size_t)(end - seg);
		if (seg[0] == '.')
			return fail(
				err, errlen,
				"\"path\" must not have \".\", \"..\" or hidden segments, got \"%s\"",
				path);
		if (++depth > SFS_PATH_DEPTH_MAX)
			return fail(err, errlen, "\"path\" is deeper than %d segments",
				    SFS_PATH_DEPTH_MAX);
		if (o > 0)
			out[o++] = '/';
		memcpy(out + o, seg, n);
		o += n;
		p = end;
	}
	if (o == 0)
		return fail(err, errlen, "\"path\" must name a file beneath %s, got \"%s\"", root,
			    path);
	out[o] = 0;
	return 0;
}

static int parse_related(json_t *o, SfsRequest *r, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, "related_apps"), *x;
	size_t i;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > SFS_RELATED_MAX)
		return fail(err, errlen,
			    "\"related_apps\" must be an array of at most %d app names",
			    SFS_RELATED_MAX);
	r->has_related = true;
	r->related = calloc(MAX(json_array_size(v), 1), sizeof(char *));
	if (!r->related)
		return -ENOMEM;
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);

		if (!s || !app_name_ok(s, json_string_length(x)))
			return fail(
				err, errlen,
				"\"related_apps\"[%zu] must be an app name ([a-z0-9_-], 1 to %d bytes)",
				i, SFS_APP_NAME_MAX);
		/* A name given twice is one tag. */
		bool dup = false;
		for (size_t j = 0; j < r->n_related && !dup; j++)
			dup = streq(r->related[j], s);
		if (dup)
			continue;
		if (!(r->related[r->n_related] = strdup(s)))
			return -ENOMEM;
		r->n_related++;
	}
	return 0;
}

/* embedding and model belong to the SDK's shape; only their size is checked. */
static int check_embedding(json_t *o, char *err, size_t errlen)
{
	json_t *e = json_object_get(o, "embedding"), *m = json_object_get(o, "model"), *x;
	size_t i;

	if (e && !json_is_null(e)) {
		if (!json_is_array(e) || json_array_size(e) > SFS_EMBEDDING_MAX)
			return fail(err, errlen,
				    "\"embedding\" must be an array of at most %d numbers",
				    SFS_EMBEDDING_MAX);
		json_array_foreach(e, i, x)
			if (!json_is_number(x))
				return fail(err, errlen, "\"embedding\"[%zu] must be a number", i);
	}
	if (m && !json_is_null(m) && (!json_is_string(m) || json_string_length(m) > SFS_MODEL_MAX))
		return fail(err, errlen, "\"model\" must be a string of at most %d bytes",
			    SFS_MODEL_MAX);
	return 0;
}

static int parse_register(json_t *o, SfsRequest *r, char *err, size_t errlen)
{
	json_t *pid = json_object_get(o, "pid"), *app = json_object_get(o, "app");

	r->pid = -1;
	if (pid && !json_is_null(pid)) {
		if (!json_is_integer(pid) || json_integer_value(pid) < 0 ||
		    json_integer_value(pid) > 0x7fffffff)
			return fail(err, errlen, "\"pid\" must be a process id");
		r->pid = json_integer_value(pid);
	}
	/* The claim is only logged, but it is still a peer's text in our log. */
	if (app && !json_is_null(app) &&
	    (!json_is_string(app) || json_string_length(app) > SFS_APP_NAME_MAX ||
	     !text_ok(json_string_value(app), json_string_length(app), false)))
		return fail(err, errlen, "\"app\" must be a string of at most %d bytes",
			    SFS_APP_NAME_MAX);
	if (app && json_is_string(app) && !(r->claimed_app = strdup(json_string_value(app))))
		return -ENOMEM;
	return 0;
}

static int parse_tag(json_t *o, SfsRequest *r, char *err, size_t errlen)
{
	_cleanup_free_ char *raw = NULL;
	char norm[SFS_PATH_MAX + 1];
	int k;

	k = get_text(o, "path", SFS_PATH_MAX, false, &raw, err, errlen);
	if (k < 0)
		return k;
	if (!raw)
		return fail(err, errlen, "\"tag\" needs \"path\"");
	/* The root here is only for the shape; the daemon resolves beneath its own root. */
	k = sfs_path_normalize(raw, "/context", norm, sizeof(norm), err, errlen);
	if (k < 0)
		return k;
	if (!(r->path = strdup(norm)))
		return -ENOMEM;
	k = get_text(o, "task", SFS_TASK_MAX, true, &r->task, err, errlen);
	if (k < 0)
		return k;
	k = parse_related(o, r, err, errlen);
	return k < 0 ? k : check_embedding(o, err, errlen);
}

static int parse_query(json_t *o, SfsRequest *r, char *err, size_t errlen)
{
	json_t *limit = json_object_get(o, "limit");
	int k;

	k = get_text(o, "text", SFS_QUERY_TEXT_MAX, true, &r->text, err, errlen);
	if (k < 0)
		return k;
	if (!r->text)
		return fail(err, errlen, "\"query\" needs \"text\"");
	r->limit = SFS_LIMIT_DEFAULT;
	if (limit && !json_is_null(limit)) {
		if (!json_is_integer(limit) || json_integer_value(limit) < 1)
			return fail(err, errlen, "\"limit\" must be a positive integer");
		/* More than the cap is the cap: a client asking for everything gets the best. */
		r->limit = (unsigned)MIN(json_integer_value(limit), (json_int_t)SFS_LIMIT_MAX);
	}
	return check_embedding(o, err, errlen);
}

static int parse_id(json_t *o, SfsRequest *r, char *err, size_t errlen)
{
	json_t *id = json_object_get(o, "id");

	if (!id || json_is_null(id))
		return fail(err, errlen, "a request needs an \"id\"");
	if (json_is_string(id)) {
		if (json_string_length(id) > SFS_ID_MAX ||
		    !text_ok(json_string_value(id), json_string_length(id), false))
			return fail(err, errlen, "\"id\" must be text of at most %d bytes",
				    SFS_ID_MAX);
	} else if (!json_is_integer(id))
		return fail(err, errlen, "\"id\" must be a string");
	json_decref(r->id);
	r->id = json_incref(id);
	return 0;
}

int sfs_request_parse(const char *buf, size_t len, SfsRequest *ret, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_error_t jerr;
	const char *op;
	int k;

	*ret = (SfsRequest){.op = _SFS_OP_INVALID, .pid = -1, .id = json_null()};
	if (len > SFS_REQUEST_MAX)
		return fail(err, errlen, "request of %zu bytes is over the cap of %d", len,
			    SFS_REQUEST_MAX);
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return fail(err, errlen, "invalid JSON: %s (at byte %d)", jerr.text, jerr.position);
	if (!json_is_object(doc))
		return fail(err, errlen, "a request must be a JSON object");
	if (!depth_ok(doc, 0))
		return fail(err, errlen, "a request may nest at most %d levels", SFS_DEPTH_MAX);
	k = parse_id(doc, ret, err, errlen);
	if (k < 0)
		return k;
	op = json_string_value(json_object_get(doc, "op"));
	if (!op)
		return fail(err, errlen,
			    "a request needs \"op\": \"register\", \"tag\" or \"query\"");
	for (int i = 0; i < _SFS_OP_MAX; i++)
		if (streq(op, op_names[i]))
			ret->op = (SfsOp)i;
	switch (ret->op) {
	case SFS_OP_REGISTER:
		return parse_register(doc, ret, err, errlen);
	case SFS_OP_TAG:
		return parse_tag(doc, ret, err, errlen);
	case SFS_OP_QUERY:
		return parse_query(doc, ret, err, errlen);
	case _SFS_OP_MAX:
	case _SFS_OP_INVALID:
		break;
	}
	/* json_dumps would quote it safely, but a name is short: the first 32 bytes. */
	return fail(err, errlen, "unknown op \"%.32s\" (expected register, tag or query)",
		    text_ok(op, strnlen(op, 32), false) ? op : "?");
}

static bool term_char(unsigned char c)
{
	/* Letters and digits, and every byte of a multibyte character: unicode61 decides. */
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c >= 0x80;
}

char *sfs_query_match(const char *text)
{
	size_t len = strlen(text), o = 0, terms = 0;
	/* Each byte at most once, plus quotes and " OR " per term. */
	char *out = malloc(len + SFS_QUERY_TERMS_MAX * 6 + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < len && terms < SFS_QUERY_TERMS_MAX;) {
		size_t start;

		while (i < len && !term_char((unsigned char)text[i]))
			i++;
		if (i >= len)
			break;
		start = i;
		while (i < len && term_char((unsigned char)text[i]))
			i++;
		if (terms++ > 0) {
			memcpy(out + o, " OR ", 4);
			o += 4;
		}
		out[o++] = '"';
		memcpy(out + o, text + start, i - start);
		o += i - start;
		out[o++] = '"';
	}
	out[o] = 0;
	return out;
}

json_t *sfs_answer_error(json_t *id, const char *error)
{
	_cleanup_free_ char *text = strdup(error);
	size_t n;

	if (!text)
		return NULL;
	/* A message may quote the peer's bytes (jansson's "near '...'" cuts a character in
	 * two): what is not UTF-8 text becomes '?', or the answer could not be JSON at all. */
	n = strlen(text);
	if (!text_ok(text, n, false))
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f)
				text[i] = '?';
	return json_pack("{s:O, s:b, s:s}", "id", id ?: json_null(), "ok", 0, "error", text);
}

json_t *sfs_answer_ok(json_t *id)
{
	return json_pack("{s:O, s:b}", "id", id ?: json_null(), "ok", 1);
}

int sfs_frame_encode(const json_t *answer, size_t max, char **ret, size_t *ret_len)
{
	size_t n = json_dumpb(answer, NULL, 0, JSON_COMPACT);
	char *buf;

	if (n == 0)
		return -ENOMEM;
	if (n > max)
		return -E2BIG;
	buf = malloc(n + 4);
	if (!buf)
		return -ENOMEM;
	if (json_dumpb(answer, buf + 4, n, JSON_COMPACT) != n) {
		free(buf);
		return -ENOMEM;
	}
	buf[0] = (char)(n >> 24);
	buf[1] = (char)(n >> 16);
	buf[2] = (char)(n >> 8);
	buf[3] = (char)n;
	*ret = buf;
	*ret_len = n + 4;
	return 0;
}
