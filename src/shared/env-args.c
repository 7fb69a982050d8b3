/* SPDX-License-Identifier: Apache-2.0 */
/* --env and --env-file (env-args.h). Values are secrets: zeroed when dropped, never quoted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "utf8.h"
#include "env-args.h"
#include "fileio.h"
#include "macros.h"

typedef struct EnvVar {
	char *name;
	char *value;
	size_t len;
	bool from_flag; /* set by --env: no file overrides it */
} EnvVar;

struct EnvSet {
	EnvVar *v;
	size_t n;
};

static void secret_free(char *p, size_t len)
{
	if (p) {
		explicit_bzero(p, len);
		free(p);
	}
}

static EnvSet *env_set_new(void)
{
	return calloc(1, sizeof(EnvSet));
}

EnvSet *env_set_free(EnvSet *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		secret_free(s->v[i].value, s->v[i].len);
	}
	free(s->v);
	free(s);
	return NULL;
}

size_t env_set_size(const EnvSet *s)
{
	return s ? s->n : 0;
}

const char *env_set_name(const EnvSet *s, size_t i)
{
	return s && i < s->n ? s->v[i].name : NULL;
}

const char *env_set_value(const EnvSet *s, size_t i, size_t *ret_len)
{
	if (!s || i >= s->n)
		return NULL;
	if (ret_len)
		*ret_len = s->v[i].len;
	return s->v[i].value;
}

static EnvVar *find(const EnvSet *s, const char *name, size_t name_len)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strlen(s->v[i].name) == name_len && !memcmp(s->v[i].name, name, name_len))
			return &s->v[i];
	return NULL;
}

const char *env_set_get(const EnvSet *s, const char *name, size_t *ret_len)
{
	EnvVar *v = find(s, name, strlen(name));

	if (!v)
		return NULL;
	if (ret_len)
		*ret_len = v->len;
	return v->value;
}

static bool name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool name_char(char c)
{
	return name_start(c) || (c >= '0' && c <= '9');
}

bool env_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > ENV_NAME_LEN_MAX || !name_start(name[0]))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!name_char(name[i]))
			return false;
	return true;
}

/*
 * Put NAME=value into @s, taking @value (malloc()ed, @len bytes plus a NUL). A value from
 * a file never replaces one from --env. On failure @value is freed (zeroed).
 */
static int put(EnvSet *s, const char *name, size_t name_len, char *value, size_t len,
	       bool from_flag)
{
	EnvVar *v = find(s, name, name_len), *grown;

	if (v) {
		if (v->from_flag && !from_flag) {
			secret_free(value, len);
			return 0;
		}
		secret_free(v->value, v->len);
		v->value = value;
		v->len = len;
		v->from_flag = v->from_flag || from_flag;
		return 0;
	}
	if (s->n >= ENV_NAMES_MAX) {
		secret_free(value, len);
		return -E2BIG;
	}
	grown = reallocarray(s->v, s->n + 1, sizeof(EnvVar));
	if (!grown) {
		secret_free(value, len);
		return -ENOMEM;
	}
	s->v = grown;
	v = &s->v[s->n];
	*v = (EnvVar){.name = strndup(name, name_len),
		      .value = value,
		      .len = len,
		      .from_flag = from_flag};
	if (!v->name) {
		secret_free(value, len);
		return -ENOMEM;
	}
	s->n++;
	return 0;
}

static int ensure_set(EnvSet **set)
{
	if (!*set)
		*set = env_set_new();
	return *set ? 0 : -ENOMEM;
}

int env_set_add_env(EnvSet **set, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '='), *value;
	size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg), len;
	char *copy;
	int r;

	if (!env_name_valid(arg, name_len)) {
		/* Not quoted: a malformed argument may be a pasted value. */
		snprintf(
			err, errlen,
			"--env takes NAME or NAME=value, where NAME is letters, digits and _ (not starting with a digit, at most %d); one --env argument is not that (not shown, in case it is a value)",
			ENV_NAME_LEN_MAX);
		return -EINVAL;
	}
	if (eq)
		value = eq + 1;
	else if (!(value = getenv(arg))) {
		snprintf(
			err, errlen,
			"--env %s: %s isn't set in this shell (export it first, or use --env-file)",
			arg, arg);
		return -EINVAL;
	}
	len = strlen(value);
	if (len > ENV_VALUE_SIZE_MAX) {
		snprintf(err, errlen,
			 "--env %.*s: the value is longer than %d KiB, the most a value may hold",
			 (int)name_len, arg, ENV_VALUE_SIZE_MAX / 1024);
		return -E2BIG;
	}
	if (!utf8_valid(value, len)) {
		snprintf(err, errlen,
			 "--env %.*s: the value is not valid UTF-8 (values travel as JSON text)",
			 (int)name_len, arg);
		return -EINVAL;
	}
	r = ensure_set(set);
	if (r < 0 || !(copy = strndup(value, len))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = put(*set, arg, name_len, copy, len, true);
	if (r == -E2BIG)
		snprintf(err, errlen, "--env %.*s: more than %d variables in all", (int)name_len,
			 arg, ENV_NAMES_MAX);
	else if (r < 0)
		snprintf(err, errlen, "out of memory");
	return r;
}

/* --- dotenv ------------------------------------------------------------------------------ */

typedef struct Parser {
	const char *buf; /* CRLF already read as LF */
	size_t len, p;
	const char *file;
	char *err;
	size_t errlen;
} Parser;

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_blanks(Parser *ps)
{
	while (ps->p < ps->len && blank(ps->buf[ps->p]))
		ps->p++;
}

/* "FILE:LINE:COLUMN: message" for the byte at @at; nothing of the file is quoted. */
static int fail_at(Parser *ps, size_t at, int r, const char *msg)
{
	unsigned line = 1, col = 1;

	for (size_t i = 0; i < at && i < ps->len; i++) {
		if (ps->buf[i] == '\n')
			line++, col = 1;
		else
			col++;
	}
	snprintf(ps->err, ps->errlen, "%s:%u:%u: %s", ps->file, line, col, msg);
	return r;
}

/* A quoted value starting at the opening quote; the result is malloc()ed. */
static int parse_quoted(Parser *ps, char **ret, size_t *ret_len)
{
	size_t open = ps->p, cap = MIN(ps->len - ps->p, (size_t)ENV_VALUE_SIZE_MAX + 1), n = 0;
	char q = ps->buf[ps->p++], *v = malloc(cap + 1);
	char msg[128];

	if (!v)
		return -ENOMEM;
	for (;;) {
		char c;

		if (ps->p >= ps->len) {
			secret_free(v, cap + 1);
			snprintf(msg, sizeof(msg),
				 "the %c quote opened here is never closed; close it, or escape it",
				 q);
			return fail_at(ps, open, -EBADMSG, msg);
		}
		c = ps->buf[ps->p];
		if (c == q) {
			ps->p++;
			break;
		}
		if (n >= ENV_VALUE_SIZE_MAX) {
			secret_free(v, cap + 1);
			snprintf(
				msg, sizeof(msg),
				"the value starting here is longer than %d KiB, the most a value may hold",
				ENV_VALUE_SIZE_MAX / 1024);
			return fail_at(ps, open, -E2BIG, msg);
		}
		if (q == '"' && c == '\\' && ps->p + 1 < ps->len) {
			char e = ps->buf[ps->p + 1], out = 0;

			switch (e) {
			case 'n':
				out = '\n';
				break;
			case 'r':
				out = '\r';
				break;
			case 't':
				out = '\t';
				break;
			case '"':
			case '\\':
				out = e;
				break;
			}
			if (out) {
				v[n++] = out;
				ps->p += 2;
				continue;
			}
		}
		v[n++] = c;
		ps->p++;
	}
	v[n] = '\0';
	*ret = v;
	*ret_len = n;
	return 0;
}

static int parse_unquoted(Parser *ps, char **ret, size_t *ret_len)
{
	size_t start = ps->p, end;
	char *v, msg[128];

	while (ps->p < ps->len && ps->buf[ps->p] != '\n') {
		/* A comment needs a blank before its '#', so "pa#ss" is a value. */
		if (ps->buf[ps->p] == '#' && blank(ps->buf[ps->p - 1]))
			break;
		ps->p++;
	}
	end = ps->p;
	while (end > start && blank(ps->buf[end - 1]))
		end--;
	while (ps->p < ps->len && ps->buf[ps->p] != '\n')
		ps->p++;
	if (end - start > ENV_VALUE_SIZE_MAX) {
		snprintf(msg, sizeof(msg),
			 "the value starting here is longer than %d KiB, the most a value may hold",
			 ENV_VALUE_SIZE_MAX / 1024);
		return fail_at(ps, start, -E2BIG, msg);
	}
	v = strndup(ps->buf + start, end - start);
	if (!v)
		return -ENOMEM;
	*ret = v;
	*ret_len = end - start;
	return 0;
}

/* One NAME=value line (which a quoted value may extend); ps->p is at its first non-blank. */
static int parse_assignment(Parser *ps, EnvSet *into)
{
	size_t name_at, name_len, value_at;
	char *value = NULL, msg[160];
	size_t len = 0;
	int r;

	/* "export NAME=..." as a shell would source it; "export=1" names a variable export. */
	if (ps->len - ps->p > 6 && !memcmp(ps->buf + ps->p, "export", 6) &&
	    blank(ps->buf[ps->p + 6])) {
		size_t save = ps->p;

		ps->p += 6;
		skip_blanks(ps);
		if (ps->p >= ps->len || ps->buf[ps->p] == '=')
			ps->p = save;
	}
	name_at = ps->p;
	while (ps->p < ps->len && name_char(ps->buf[ps->p]))
		ps->p++;
	name_len = ps->p - name_at;
	if (name_len == 0 || !name_start(ps->buf[name_at]))
		return fail_at(
			ps, name_at, -EBADMSG,
			"expected NAME=value, where NAME is letters, digits and _, not starting with a digit");
	skip_blanks(ps);
	if (ps->p >= ps->len || ps->buf[ps->p] != '=')
		return fail_at(
			ps, ps->p, -EBADMSG,
			"expected '=' after the variable name: each line is NAME=value (quote a value that spans lines)");
	if (name_len > ENV_NAME_LEN_MAX) {
		snprintf(msg, sizeof(msg), "the variable name is longer than %d characters",
			 ENV_NAME_LEN_MAX);
		return fail_at(ps, name_at, -EBADMSG, msg);
	}
	ps->p++;
	skip_blanks(ps);
	value_at = ps->p;
	if (ps->p < ps->len && strchr("'\"`", ps->buf[ps->p]) && ps->buf[ps->p]) {
		r = parse_quoted(ps, &value, &len);
		if (r < 0)
			return r;
		skip_blanks(ps);
		if (ps->p < ps->len && ps->buf[ps->p] != '\n' && ps->buf[ps->p] != '#') {
			secret_free(value, len);
			return fail_at(
				ps, ps->p, -EBADMSG,
				"unexpected text after the closing quote; only a # comment may follow it");
		}
		while (ps->p < ps->len && ps->buf[ps->p] != '\n')
			ps->p++;
	} else {
		r = parse_unquoted(ps, &value, &len);
		if (r < 0)
			return r;
	}
	if (!utf8_valid(value, len)) {
		secret_free(value, len);
		snprintf(msg, sizeof(msg),
			 "the value of %.*s is not valid UTF-8 (values travel as JSON text)",
			 (int)name_len, ps->buf + name_at);
		return fail_at(ps, value_at, -EBADMSG, msg);
	}
	r = put(into, ps->buf + name_at, name_len, value, len, false);
	if (r == -E2BIG) {
		snprintf(msg, sizeof(msg), "more than %d variables in all", ENV_NAMES_MAX);
		return fail_at(ps, name_at, r, msg);
	}
	if (r < 0)
		snprintf(ps->err, ps->errlen, "out of memory");
	return r;
}

static int parse_all(Parser *ps, EnvSet *into)
{
	const char *nul = memchr(ps->buf, '\0', ps->len);
	int r;

	if (nul)
		return fail_at(
			ps, (size_t)(nul - ps->buf), -EBADMSG,
			"a NUL byte: values may not contain NUL, and this is not a text file");
	while (ps->p < ps->len) {
		skip_blanks(ps);
		if (ps->p >= ps->len)
			break;
		if (ps->buf[ps->p] == '#') {
			while (ps->p < ps->len && ps->buf[ps->p] != '\n')
				ps->p++;
		} else if (ps->buf[ps->p] != '\n') {
			r = parse_assignment(ps, into);
			if (r < 0)
				return r;
		}
		if (ps->p < ps->len)
			ps->p++; /* the '\n' */
	}
	return 0;
}

int env_set_parse_dotenv(EnvSet **set, const char *buf, size_t len, const char *file, char *err,
			 size_t errlen)
{
	_cleanup_(env_set_freep) EnvSet *parsed = env_set_new();
	char *text = malloc(len + 1);
	size_t n = 0, added = 0;
	Parser ps;
	int r;

	if (!parsed || !text) {
		free(text);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* CRLF reads as LF; a lone CR stays (within a quoted value it is the user's). */
	for (size_t i = 0; i < len; i++)
		if (!(buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n'))
			text[n++] = buf[i];
	text[n] = '\0';
	ps = (Parser){.buf = text, .len = n, .file = file, .err = err, .errlen = errlen};
	r = parse_all(&ps, parsed);
	secret_free(text, len + 1);
	if (r < 0)
		return r;

	r = ensure_set(set);
	if (r < 0) {
		snprintf(err, errlen, "out of memory");
		return r;
	}
	for (size_t i = 0; i < parsed->n; i++)
		if (!find(*set, parsed->v[i].name, strlen(parsed->v[i].name)))
			added++;
	if ((*set)->n + added > ENV_NAMES_MAX) {
		snprintf(err, errlen, "%s: more than %d variables in all", file, ENV_NAMES_MAX);
		return -E2BIG;
	}
	for (size_t i = 0; i < parsed->n; i++) {
		EnvVar *v = &parsed->v[i];

		r = put(*set, v->name, strlen(v->name), TAKE_PTR(v->value), v->len, false);
		v->len = 0;
		if (r < 0) {
			snprintf(err, errlen, "out of memory");
			return r;
		}
	}
	return 0;
}

int env_set_add_env_file(EnvSet **set, const char *path, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -EBADF;
	char *buf;
	ssize_t n;
	int r;

	/* Not O_NOFOLLOW: the user names this file, and <(command) or a symlinked .env is
	 * theirs to use. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "--env-file %s: %s", path, strerror(-r));
		return r;
	}
	/* One allocation of the cap, so no copy of a value is left behind by a realloc(). */
	buf = malloc(ENV_FILE_SIZE_MAX + 1);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n = loop_read(fd, buf, ENV_FILE_SIZE_MAX + 1);
	if (n < 0) {
		secret_free(buf, ENV_FILE_SIZE_MAX + 1);
		snprintf(err, errlen, "--env-file %s: %s", path, strerror((int)-n));
		return (int)n;
	}
	if (n > ENV_FILE_SIZE_MAX) {
		secret_free(buf, ENV_FILE_SIZE_MAX + 1);
		snprintf(
			err, errlen,
			"--env-file %s: larger than %d KiB; keep it to the variables this app needs",
			path, ENV_FILE_SIZE_MAX / 1024);
		return -EFBIG;
	}
	r = env_set_parse_dotenv(set, buf, (size_t)n, path, err, errlen);
	secret_free(buf, ENV_FILE_SIZE_MAX + 1);
	return r;
}
