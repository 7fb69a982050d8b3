/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "fileio.h"
#include "js-quote.h"
#include "macros.h"
#include "manifest.h"

#define PATH_DEPTH_MAX 8
/* The largest integer a JSON number holds exactly in every consumer (JavaScript's
 * Number.MAX_SAFE_INTEGER); counts above it are refused rather than rounded. */
#define SAFE_INTEGER_MAX 9007199254740991.0

struct Manifest {
	json_t *doc; /* the normalised manifest; every pointer below points into it */
	const char *name;
	const char *version;
	const char *description;
	ManifestRuntime runtime;
	const char **capabilities;
	size_t n_capabilities;
	ManifestExport *exports;
	size_t n_exports;
	const char **secrets;
	size_t n_secrets;
	const char **on_install;
	size_t n_on_install;
	const char **on_agent_ready;
	size_t n_on_agent_ready;
	ManifestExpose expose;
	bool governs;
	bool governance_exempt;
	ManifestResources resources;
};

typedef struct Validator {
	const YamlPositions *positions;
	YamlPathSegment path[PATH_DEPTH_MAX];
	size_t depth;
	ManifestIssue *issues;
	size_t n_issues;
	size_t n_dropped;
	bool oom;
} Validator;

/*
 * Values quoted in messages are printed as JSON.stringify() prints them, the form tools that
 * read Berth's messages already parse.
 */

static void zeros(FILE *f, int n)
{
	for (int i = 0; i < n; i++)
		fputc('0', f);
}

/* Number.prototype.toString() for a finite double: the shortest digits that read back,
 * in positional notation from 1e-6 up to 1e21 and exponential notation outside. */
static void js_number(FILE *f, double x)
{
	char buf[64], digits[32];
	int k = 0, n, p;

	if (x == 0) {
		fputc('0', f);
		return;
	}
	if (x < 0) {
		fputc('-', f);
		x = -x;
	}
	for (p = 1; p <= 17; p++) {
		snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	for (const char *c = buf; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			digits[k++] = *c;
	while (k > 1 && digits[k - 1] == '0')
		k--;
	digits[k] = '\0';
	n = atoi(strchr(buf, 'e') + 1) + 1; /* x = 0.digits * 10^n */
	if (k <= n && n <= 21) {
		fputs(digits, f);
		zeros(f, n - k);
	} else if (0 < n && n <= 21)
		fprintf(f, "%.*s.%s", n, digits, digits + n);
	else if (-6 < n && n <= 0) {
		fputs("0.", f);
		zeros(f, -n);
		fputs(digits, f);
	} else
		fprintf(f, "%c%s%se%c%d", digits[0], k > 1 ? "." : "", digits + 1,
			n - 1 >= 0 ? '+' : '-', abs(n - 1));
}

static void js_stringify(FILE *f, const json_t *v)
{
	const char *key;
	json_t *item;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		bool first = true;

		fputc('{', f);
		json_object_foreach((json_t *)v, key, item) {
			fputs(first ? "" : ",", f);
			js_quote(f, key, strlen(key));
			fputc(':', f);
			js_stringify(f, item);
			first = false;
		}
		fputc('}', f);
		break;
	}
	case JSON_ARRAY:
		fputc('[', f);
		json_array_foreach(v, i, item) {
			fputs(i ? "," : "", f);
			js_stringify(f, item);
		}
		fputc(']', f);
		break;
	case JSON_STRING:
		js_quote(f, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		js_number(f, json_real_value(v));
		break;
	case JSON_TRUE:
		fputs("true", f);
		break;
	case JSON_FALSE:
		fputs("false", f);
		break;
	case JSON_NULL:
		fputs("null", f);
		break;
	}
}

/* What the statements write to FILE *f, as a malloc()ed string (NULL on OOM). */
#define TEXT_OF(...)                                    \
	({                                              \
		char *_buf = NULL;                      \
		size_t _len = 0;                        \
		FILE *f = open_memstream(&_buf, &_len); \
		if (f) {                                \
			__VA_ARGS__;                    \
			if (fclose(f) != 0) {           \
				free(_buf);             \
				_buf = NULL;            \
			}                               \
		}                                       \
		_buf;                                   \
	})

static char *js_json(const json_t *v)
{
	return TEXT_OF(js_stringify(f, v));
}

/* @s for a message that quotes it raw: NUL bytes shown as \0 so the text stays one string. */
static char *raw_text(const char *s, size_t len)
{
	return TEXT_OF({
		for (size_t i = 0; i < len; i++)
			if (s[i])
				fputc(s[i], f);
			else
				fputs("\\0", f);
	});
}

/*
 * Collecting issues.
 */

static void path_push_key(Validator *v, const char *key)
{
	if (v->depth < PATH_DEPTH_MAX)
		v->path[v->depth] = (YamlPathSegment){.key = key};
	v->depth++;
}

static void path_push_index(Validator *v, size_t index)
{
	if (v->depth < PATH_DEPTH_MAX)
		v->path[v->depth] = (YamlPathSegment){.index = index};
	v->depth++;
}

static void path_pop(Validator *v)
{
	v->depth--;
}

static char *path_dotted(const YamlPathSegment *path, size_t n)
{
	return TEXT_OF({
		for (size_t i = 0; i < n; i++) {
			if (i)
				fputc('.', f);
			if (path[i].key)
				fputs(path[i].key, f);
			else
				fprintf(f, "%zu", path[i].index);
		}
	});
}

static int issues_append(ManifestIssue **issues, size_t *n, unsigned line, unsigned column,
			 char *path, char *message)
{
	ManifestIssue *l = reallocarray(*issues, *n + 1, sizeof(ManifestIssue));

	if (!l) {
		free(path);
		free(message);
		return -ENOMEM;
	}
	*issues = l;
	l[(*n)++] = (ManifestIssue){line, column, path, message};
	return 0;
}

_printf_(2, 3) static void issue(Validator *v, const char *fmt, ...)
{
	size_t depth = MIN(v->depth, (size_t)PATH_DEPTH_MAX);
	unsigned line = 0, column = 0;
	char *path, *message = NULL;
	va_list ap;
	int r;

	if (v->n_issues >= MANIFEST_ISSUES_MAX) {
		v->n_dropped++;
		return;
	}
	va_start(ap, fmt);
	r = vasprintf(&message, fmt, ap);
	va_end(ap);
	path = path_dotted(v->path, depth);
	if (r < 0 || !path) {
		free(r < 0 ? NULL : message);
		free(path);
		v->oom = true;
		return;
	}
	yaml_positions_lookup(v->positions, v->path, depth, &line, &column);
	if (issues_append(&v->issues, &v->n_issues, line, column, path, message) < 0)
		v->oom = true;
}

/* Take over a message from a helper that returns 1/0/-ENOMEM with a malloc()ed string. */
static void issue_take(Validator *v, int r, char *message)
{
	if (r < 0)
		v->oom = true;
	else if (r > 0)
		issue(v, "%s", message);
	free(message);
}

/*
 * Types, in the wording Berth's messages have always used.
 */

static const char *js_type(const json_t *x)
{
	switch (json_typeof(x)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static bool type_is(const json_t *x, const char *type)
{
	return streq(js_type(x), type);
}

/* Absent is "Required"; a wrong type says what was expected. Returns whether @x is usable. */
static bool expect(Validator *v, const json_t *x, const char *type, bool required)
{
	if (!x) {
		if (required)
			issue(v, "Required");
		return false;
	}
	if (!type_is(x, type)) {
		issue(v, "Expected %s, received %s", type, js_type(x));
		return false;
	}
	return true;
}

static bool has_nul(const json_t *s)
{
	return memchr(json_string_value(s), '\0', json_string_length(s)) != NULL;
}

/* Whitespace as String.prototype.trim() knows it (ASCII and Unicode spaces), in UTF-8. */
static size_t space_at(const char *s, size_t len)
{
	static const char *const wide[] = {
		"\xc2\xa0",	"\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81", "\xe2\x80\x82",
		"\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86", "\xe2\x80\x87",
		"\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9",
		"\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", "\xef\xbb\xbf",
	};

	if (strchr(" \t\n\v\f\r", s[0]) && s[0])
		return 1;
	for (size_t i = 0; i < ELEMENTSOF(wide); i++) {
		size_t w = strlen(wide[i]);

		if (len >= w && memcmp(s, wide[i], w) == 0)
			return w;
	}
	return 0;
}

static bool is_blank(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t w = space_at(s + i, len - i);

		if (!w)
			return false;
		i += w;
	}
	return true;
}

static bool matches_charset(const char *s, size_t len, bool (*first)(char), bool (*rest)(char))
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(i == 0 ? first(s[i]) : rest(s[i])))
			return false;
	return true;
}

static bool is_lower_digit_dash(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static bool is_env_first(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_env_rest(char c)
{
	return is_env_first(c) || (c >= '0' && c <= '9');
}

/* ^\d+\.\d+\.\d+$ */
static bool is_semver(const char *s, size_t len)
{
	size_t i = 0;

	for (int part = 0; part < 3; part++) {
		size_t start = i;

		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == start)
			return false;
		if (part < 2) {
			if (i >= len || s[i] != '.')
				return false;
			i++;
		}
	}
	return i == len;
}

/*
 * The fields. Each check reads the raw value (NULL when absent), reports what is wrong,
 * and puts the normalised value (defaults filled in) into @out.
 */

typedef void (*FieldCheck)(Validator *v, json_t *x, json_t *out);

static void out_set(Validator *v, json_t *out, const char *key, json_t *value)
{
	if (!value || json_object_set_new(out, key, value) < 0)
		v->oom = true;
}

static void check_name(Validator *v, json_t *x, json_t *out)
{
	if (!expect(v, x, "string", true))
		return;
	if (!matches_charset(json_string_value(x), json_string_length(x), is_lower_digit_dash,
			     is_lower_digit_dash))
		issue(v, "name must be lowercase alphanumeric with dashes");
	out_set(v, out, "name", json_copy(x));
}

static void check_version(Validator *v, json_t *x, json_t *out)
{
	if (!expect(v, x, "string", true))
		return;
	if (!is_semver(json_string_value(x), json_string_length(x)))
		issue(v, "version must be semver (x.y.z)");
	out_set(v, out, "version", json_copy(x));
}

static void check_description(Validator *v, json_t *x, json_t *out)
{
	if (!x) {
		out_set(v, out, "description", json_string(""));
		return;
	}
	if (!expect(v, x, "string", false))
		return;
	if (has_nul(x))
		issue(v, "description must not contain a NUL byte");
	out_set(v, out, "description", json_copy(x));
}

typedef void (*ItemCheck)(Validator *v, json_t *item);

/* An optional array of strings, default []; @item checks each string's content. */
static void check_string_array(Validator *v, json_t *x, json_t *out, const char *key,
			       ItemCheck item)
{
	json_t *e;
	size_t i;

	if (!x) {
		out_set(v, out, key, json_array());
		return;
	}
	if (!expect(v, x, "array", false))
		return;
	json_array_foreach(x, i, e) {
		path_push_index(v, i);
		if (expect(v, e, "string", true) && item)
			item(v, e);
		path_pop(v);
	}
	out_set(v, out, key, json_copy(x));
}

static void check_capability(Validator *v, json_t *item)
{
	const char *s = json_string_value(item);
	size_t len = json_string_length(item);
	char *message = NULL;
	int r;

	if (!capability_is_well_formed(s, len)) {
		issue(v, "capability must be 'namespace:action:scope'");
		return;
	}
	r = capability_issue(s, len, &message);
	if (r < 0 || message) {
		issue_take(v, r < 0 ? r : 1, message);
		return;
	}
	/* A C string stops at the first NUL: "browser:navigate:*\0x" would be read as
	 * "browser:navigate:*" by every consumer, so no scope may carry one. */
	if (memchr(s, '\0', len))
		issue(v, "capability must not contain a NUL byte");
}

static void check_capabilities(Validator *v, json_t *x, json_t *out)
{
	check_string_array(v, x, out, "capabilities", check_capability);
}

static void check_on_install_item(Validator *v, json_t *item)
{
	if (is_blank(json_string_value(item), json_string_length(item)))
		issue(v, "on_install command must not be empty");
	else if (has_nul(item))
		issue(v, "on_install command must not contain a NUL byte");
}

static void check_on_install(Validator *v, json_t *x, json_t *out)
{
	check_string_array(v, x, out, "on_install", check_on_install_item);
}

static void check_on_agent_ready_item(Validator *v, json_t *item)
{
	if (has_nul(item))
		issue(v, "on_agent_ready command must not contain a NUL byte");
}

static void check_on_agent_ready(Validator *v, json_t *x, json_t *out)
{
	check_string_array(v, x, out, "on_agent_ready", check_on_agent_ready_item);
}

static void check_secret(Validator *v, json_t *item)
{
	if (!matches_charset(json_string_value(item), json_string_length(item), is_env_first,
			     is_env_rest))
		issue(v, "secrets entries must be valid environment variable names");
}

static void check_secrets(Validator *v, json_t *x, json_t *out)
{
	check_string_array(v, x, out, "secrets", check_secret);
}

/* The field types and tool hints are the capability model's (sdk/capability-model.json),
 * which the SDKs' validators read too. */
#define IO_TYPES CAPABILITY_EXPORT_FIELD_TYPES_TEXT
static const char *const io_types[] = CAPABILITY_EXPORT_FIELD_TYPES_INIT;
static const char *const hint_names[] = CAPABILITY_EXPORT_HINTS_INIT;
_Static_assert(ELEMENTSOF(hint_names) == _MANIFEST_HINT_MAX, "one name per hint");

const char *manifest_hint_to_string(ManifestHint h)
{
	return h >= 0 && h < _MANIFEST_HINT_MAX ? hint_names[h] : NULL;
}

/* A field's type name: one of io_types. Returns whether it is. */
static bool check_field_type(Validator *v, json_t *t)
{
	_cleanup_free_ char *raw = NULL;

	if (!json_is_string(t)) {
		issue(v, "Expected " IO_TYPES ", received %s", js_type(t));
		return false;
	}
	for (size_t i = 0; i < ELEMENTSOF(io_types); i++)
		if (streq(json_string_value(t), io_types[i]) && !has_nul(t))
			return true;
	raw = raw_text(json_string_value(t), json_string_length(t));
	if (!raw)
		v->oom = true;
	else
		issue(v, "Invalid enum value. Expected " IO_TYPES ", received '%s'", raw);
	return false;
}

/* An optional string of an export or a field, with its NUL-byte message. */
static void check_text(Validator *v, json_t *x, json_t *out, const char *key, const char *what)
{
	json_t *s = json_object_get(x, key);

	if (!s)
		return;
	path_push_key(v, key);
	if (expect(v, s, "string", false)) {
		if (has_nul(s))
			issue(v, "%s must not contain a NUL byte", what);
		out_set(v, out, key, json_copy(s));
	}
	path_pop(v);
}

/* A field: a type name, or {type, description} (other keys are dropped, as at the top). */
static void check_field(Validator *v, json_t *f, json_t *out, const char *field)
{
	json_t *spec;

	if (!json_is_object(f)) {
		if (check_field_type(v, f))
			out_set(v, out, field, json_copy(f));
		return;
	}
	spec = json_object();
	out_set(v, out, field, spec);
	if (!spec)
		return;
	path_push_key(v, "type");
	if (!json_object_get(f, "type"))
		issue(v, "Required");
	else if (check_field_type(v, json_object_get(f, "type")))
		out_set(v, spec, "type", json_copy(json_object_get(f, "type")));
	path_pop(v);
	check_text(v, f, spec, "description", "field description");
}

static void check_iospec(Validator *v, json_t *x, json_t *out, const char *key)
{
	const char *field;
	json_t *f, *spec;

	if (!expect(v, x, "object", false))
		return;
	spec = json_object();
	out_set(v, out, key, spec);
	if (!spec)
		return;
	json_object_foreach(x, field, f) {
		path_push_key(v, field);
		check_field(v, f, spec, field);
		path_pop(v);
	}
}

/* annotations: the MCP tool hints, each a boolean; keys Berth does not know are dropped. */
static void check_annotations(Validator *v, json_t *x, json_t *entry)
{
	json_t *o;

	if (!expect(v, x, "object", false))
		return;
	o = json_object();
	out_set(v, entry, "annotations", o);
	if (!o)
		return;
	for (size_t i = 0; i < ELEMENTSOF(hint_names); i++) {
		json_t *b = json_object_get(x, hint_names[i]);

		if (!b)
			continue;
		path_push_key(v, hint_names[i]);
		if (expect(v, b, "boolean", false))
			out_set(v, o, hint_names[i], json_copy(b));
		path_pop(v);
	}
}

static void check_export(Validator *v, json_t *x, json_t *exports)
{
	json_t *name, *entry;

	if (!expect(v, x, "object", true))
		return;
	entry = json_object();
	if (!entry || json_array_append_new(exports, entry) < 0) {
		v->oom = true;
		return;
	}
	name = json_object_get(x, "name");
	path_push_key(v, "name");
	if (expect(v, name, "string", true)) {
		if (has_nul(name))
			issue(v, "export name must not contain a NUL byte");
		out_set(v, entry, "name", json_copy(name));
	}
	path_pop(v);
	check_text(v, x, entry, "description", "export description");
	check_text(v, x, entry, "title", "export title");
	for (size_t i = 0; i < 2; i++) {
		const char *key = i == 0 ? "input" : "output";
		json_t *spec = json_object_get(x, key);

		if (!spec)
			continue;
		path_push_key(v, key);
		check_iospec(v, spec, entry, key);
		path_pop(v);
	}
	if (json_object_get(x, "annotations")) {
		path_push_key(v, "annotations");
		check_annotations(v, json_object_get(x, "annotations"), entry);
		path_pop(v);
	}
}

static void check_exports(Validator *v, json_t *x, json_t *out)
{
	json_t *exports, *e;
	size_t i;

	exports = json_array();
	out_set(v, out, "exports", exports);
	if (!x || !exports || !expect(v, x, "array", false))
		return;
	json_array_foreach(x, i, e) {
		path_push_index(v, i);
		check_export(v, e, exports);
		path_pop(v);
	}
}

typedef struct BoolMember {
	const char *key;
	bool def;
} BoolMember;

/* An optional mapping of optional booleans, each with its default. */
static void check_bool_object(Validator *v, json_t *x, json_t *out, const char *key,
			      const BoolMember *members, size_t n)
{
	json_t *o = json_object();

	out_set(v, out, key, o);
	if (!o)
		return;
	if (x && !expect(v, x, "object", false))
		return;
	for (size_t i = 0; i < n; i++) {
		json_t *b = x ? json_object_get(x, members[i].key) : NULL;

		path_push_key(v, members[i].key);
		if (!b)
			out_set(v, o, members[i].key, json_boolean(members[i].def));
		else if (expect(v, b, "boolean", false))
			out_set(v, o, members[i].key, json_copy(b));
		path_pop(v);
	}
}

static void check_expose(Validator *v, json_t *x, json_t *out)
{
	static const BoolMember members[] = {
		{"browser", true},
		{"terminal", true},
		{"preview", false},
	};

	check_bool_object(v, x, out, "expose", members, ELEMENTSOF(members));
}

static void check_governance(Validator *v, json_t *x, json_t *out)
{
	static const BoolMember members[] = {{"exempt", false}};

	check_bool_object(v, x, out, "governance", members, ELEMENTSOF(members));
}

static void check_governs(Validator *v, json_t *x, json_t *out)
{
	if (!x)
		out_set(v, out, "governs", json_false());
	else if (expect(v, x, "boolean", false))
		out_set(v, out, "governs", json_copy(x));
}

/* A number > 0; with @integer also a whole one (integral reals such as 2.0 count). */
static void check_positive(Validator *v, json_t *x, json_t *out, const char *key, bool integer)
{
	double d;
	bool ok = true;

	if (!expect(v, x, "number", false))
		return;
	d = json_number_value(x);
	if (integer && d != floor(d)) {
		issue(v, "Expected integer, received float");
		ok = false;
	}
	if (!(d > 0)) {
		issue(v, "Number must be greater than 0");
		ok = false;
	}
	if (integer && d > SAFE_INTEGER_MAX) {
		issue(v, "Number must be less than or equal to 9007199254740991");
		ok = false;
	}
	if (!ok)
		return;
	if (integer)
		out_set(v, out, key,
			json_integer(json_is_integer(x) ? json_integer_value(x) : (json_int_t)d));
	else
		out_set(v, out, key, json_copy(x));
}

static void check_resources(Validator *v, json_t *x, json_t *out)
{
	static const struct {
		const char *key;
		bool integer;
	} members[] = {{"cpu", false}, {"memory_mb", true}, {"gpu", true}, {"pids", true}};
	json_t *o = json_object();

	out_set(v, out, "resources", o);
	if (!o || (x && !expect(v, x, "object", false)) || !x)
		return;
	for (size_t i = 0; i < ELEMENTSOF(members); i++) {
		json_t *n = json_object_get(x, members[i].key);

		if (!n)
			continue;
		path_push_key(v, members[i].key);
		check_positive(v, n, o, members[i].key, members[i].integer);
		path_pop(v);
	}
}

static void check_runtime(Validator *v, json_t *x, json_t *out)
{
	if (!x) {
		out_set(v, out, "runtime", json_string("node"));
		return;
	}
	if (!json_is_string(x)) {
		issue(v, "Expected 'node' | 'python', received %s", js_type(x));
		return;
	}
	if (manifest_runtime_from_string(json_string_value(x)) < 0 || has_nul(x)) {
		_cleanup_free_ char *raw = raw_text(json_string_value(x), json_string_length(x));

		if (!raw)
			v->oom = true;
		else
			issue(v, "Invalid enum value. Expected 'node' | 'python', received '%s'",
			      raw);
		return;
	}
	out_set(v, out, "runtime", json_copy(x));
}

static const struct {
	const char *key;
	FieldCheck check;
} fields[] = {
	{"name", check_name},
	{"version", check_version},
	{"description", check_description},
	{"capabilities", check_capabilities},
	{"exports", check_exports},
	{"on_install", check_on_install},
	{"on_agent_ready", check_on_agent_ready},
	{"expose", check_expose},
	{"governs", check_governs},
	{"governance", check_governance},
	{"resources", check_resources},
	{"secrets", check_secrets},
	{"runtime", check_runtime},
};

/* A governor must be callable: the host routes every other app's calls to evaluate_action. */
static void check_governor(Validator *v, json_t *raw)
{
	json_t *exports = json_object_get(raw, "exports"), *e;
	size_t i;

	if (!json_is_true(json_object_get(raw, "governs")))
		return;
	if (json_is_array(exports))
		json_array_foreach(exports, i, e) {
			json_t *name = json_object_get(e, "name");

			if (json_is_string(name) && !has_nul(name) &&
			    streq(json_string_value(name), "evaluate_action"))
				return;
		}
	path_push_key(v, "governs");
	issue(v, "an app declaring governs: true must also declare an 'evaluate_action' export");
	path_pop(v);
}

/*
 * schema_version and migrations.
 */

typedef int (*Migration)(json_t *raw);

/* 0 -> 1: expose: was one boolean for everything before it became a mapping. */
static int migrate_expose_boolean(json_t *raw)
{
	json_t *expose = json_object_get(raw, "expose");
	json_t *o;

	if (!json_is_boolean(expose))
		return 0;
	o = json_pack("{s:b,s:b,s:b}", "browser", json_is_true(expose), "terminal",
		      json_is_true(expose), "preview", 0);
	if (!o || json_object_set_new(raw, "expose", o) < 0)
		return -ENOMEM;
	return 0;
}

/* Indexed by the version a step starts from. */
static const Migration migrations[] = {
	[0] = migrate_expose_boolean,
};

int manifest_migrate(json_t *raw, unsigned from, unsigned to, char **reterr_message)
{
	for (unsigned v = from; v < to; v++) {
		int r;

		if (v >= ELEMENTSOF(migrations) || !migrations[v]) {
			if (reterr_message &&
			    asprintf(
				    reterr_message,
				    "no migration registered from schema_version %u to %u — this berth.yml declares schema_version: %u, but this installed @berth/manifest-schema (current version %u) doesn't know how to bring it forward. Upgrade @berth/manifest-schema, or migrate this berth.yml to schema_version: %u by hand.",
				    v, v + 1, from, to, to) < 0)
				*reterr_message = NULL;
			return -ENOENT;
		}
		if (!json_is_object(raw))
			continue;
		r = migrations[v](raw);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Resolve schema_version in @raw (a copy) before anything else looks at it: an unusable
 * one is reported alone (the rest of the file may be of a shape this code cannot read).
 * Returns 0 (schema_version gone, @raw migrated), 1 with *@ret_fatal set, -ENOMEM.
 */
static int resolve_schema_version(json_t *raw, char **ret_fatal)
{
	json_t *sv = json_is_object(raw) ? json_object_get(raw, "schema_version") : NULL;
	_cleanup_free_ char *got = NULL, *why = NULL;
	double d;
	int r;

	*ret_fatal = NULL;
	if (!sv)
		return 0;
	d = json_is_number(sv) ? json_number_value(sv) : -1;
	if (!json_is_number(sv) || d != floor(d) || d < 0) {
		got = js_json(sv);
		if (!got ||
		    asprintf(ret_fatal, "schema_version must be a non-negative integer, got %s",
			     got) < 0)
			goto oom;
		return 1;
	}
	if (d > MANIFEST_SCHEMA_VERSION) {
		got = js_json(sv);
		if (!got ||
		    asprintf(
			    ret_fatal,
			    "declares schema_version: %s, but this installed @berth/manifest-schema only supports up to %d. Upgrade @berth/manifest-schema to load this file.",
			    got, MANIFEST_SCHEMA_VERSION) < 0)
			goto oom;
		return 1;
	}
	r = manifest_migrate(raw, (unsigned)d, MANIFEST_SCHEMA_VERSION, &why);
	if (r == -ENOENT) {
		*ret_fatal = TAKE_PTR(why);
		return *ret_fatal ? 1 : -ENOMEM;
	}
	if (r < 0)
		return r;
	json_object_del(raw, "schema_version");
	return 0;
oom:
	*ret_fatal = NULL;
	return -ENOMEM;
}

/*
 * Reports.
 */

void manifest_error_done(ManifestError *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n_issues; i++) {
		free(e->issues[i].path);
		free(e->issues[i].message);
	}
	free(e->issues);
	free(e->text);
	*e = (ManifestError){};
}

static int format_issues(ManifestError *e, const char *file, size_t n_dropped)
{
	const char *name = file ? file : "berth.yml";

	e->text = TEXT_OF({
		fputs("invalid berth.yml:", f);
		for (size_t i = 0; i < e->n_issues; i++) {
			const ManifestIssue *is = &e->issues[i];

			fprintf(f, "\n%s", name);
			if (is->line)
				fprintf(f, ":%u", is->line);
			fprintf(f, " %s: %s", *is->path ? is->path : "(root)", is->message);
		}
		if (n_dropped)
			fprintf(f, "\n%s (root): %zu more issues not shown", name, n_dropped);
	});
	return e->text ? 0 : -ENOMEM;
}

/* The report for a fatal schema_version problem: one line, naming the file if known. */
static int format_fatal(ManifestError *e, const char *file, const YamlPositions *positions,
			char *message)
{
	static const YamlPathSegment sv = {.key = "schema_version"};
	unsigned line = 0, column = 0;
	char *path = strdup("schema_version");
	int r;

	yaml_positions_lookup(positions, &sv, 1, &line, &column);
	if (file)
		r = asprintf(&e->text, "invalid berth.yml (%s): %s", file, message);
	else
		r = asprintf(&e->text, "invalid berth.yml: %s", message);
	if (r < 0) {
		e->text = NULL;
		free(path);
		free(message);
		return -ENOMEM;
	}
	if (!path) {
		free(message);
		return -ENOMEM;
	}
	return issues_append(&e->issues, &e->n_issues, line, column, path, message);
}

/*
 * The manifest.
 */

Manifest *manifest_free(Manifest *m)
{
	if (!m)
		return NULL;
	json_decref(m->doc);
	free(m->capabilities);
	free(m->exports);
	free(m->secrets);
	free(m->on_install);
	free(m->on_agent_ready);
	free(m);
	return NULL;
}

static int string_list(json_t *a, const char ***ret, size_t *ret_n)
{
	size_t n = json_array_size(a);
	const char **l = calloc(n + 1, sizeof(char *));

	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		l[i] = json_string_value(json_array_get(a, i));
	*ret = l;
	*ret_n = n;
	return 0;
}

typedef struct Ranked {
	const char *s;
	size_t i;
} Ranked;

static int ranked_cmp(const void *x, const void *y)
{
	const Ranked *a = x, *b = y;
	int c = strcmp(a->s, b->s);

	return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Drop repeated capabilities, keeping the first of each in declaration order. Sorting a copy
 * keeps this O(n log n) for the largest arrays the YAML caps allow. */
static int dedupe(const char **l, size_t *n)
{
	_cleanup_free_ Ranked *r = calloc(*n ? *n : 1, sizeof(Ranked));
	_cleanup_free_ bool *drop = calloc(*n ? *n : 1, sizeof(bool));
	size_t k = 0;

	if (!r || !drop)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		r[i] = (Ranked){l[i], i};
	qsort(r, *n, sizeof(Ranked), ranked_cmp);
	for (size_t i = 1; i < *n; i++)
		if (streq(r[i].s, r[i - 1].s))
			drop[r[i].i] = true;
	for (size_t i = 0; i < *n; i++)
		if (!drop[i])
			l[k++] = l[i];
	l[k] = NULL;
	*n = k;
	return 0;
}

static void resources_read(ManifestResources *res, json_t *o)
{
	json_t *x;

	if ((x = json_object_get(o, "cpu"))) {
		res->has_cpu = true;
		res->cpu = json_number_value(x);
	}
	if ((x = json_object_get(o, "memory_mb"))) {
		res->has_memory_mb = true;
		res->memory_mb = (uint64_t)json_integer_value(x);
	}
	if ((x = json_object_get(o, "gpu"))) {
		res->has_gpu = true;
		res->gpu = (uint64_t)json_integer_value(x);
	}
	if ((x = json_object_get(o, "pids"))) {
		res->has_pids = true;
		res->pids = (uint64_t)json_integer_value(x);
	}
}

static int manifest_build(json_t *doc, Manifest **ret)
{
	_cleanup_(manifest_freep) Manifest *m = calloc(1, sizeof(Manifest));
	json_t *exports, *expose, *e;
	size_t i;
	int r;

	if (!m)
		return -ENOMEM;
	m->doc = json_incref(doc);
	m->name = json_string_value(json_object_get(doc, "name"));
	m->version = json_string_value(json_object_get(doc, "version"));
	m->description = json_string_value(json_object_get(doc, "description"));
	m->runtime =
		manifest_runtime_from_string(json_string_value(json_object_get(doc, "runtime")));
	r = string_list(json_object_get(doc, "capabilities"), &m->capabilities, &m->n_capabilities);
	if (r >= 0)
		r = dedupe(m->capabilities, &m->n_capabilities);
	if (r >= 0)
		r = string_list(json_object_get(doc, "secrets"), &m->secrets, &m->n_secrets);
	if (r >= 0)
		r = string_list(json_object_get(doc, "on_install"), &m->on_install,
				&m->n_on_install);
	if (r >= 0)
		r = string_list(json_object_get(doc, "on_agent_ready"), &m->on_agent_ready,
				&m->n_on_agent_ready);
	if (r < 0)
		return r;
	exports = json_object_get(doc, "exports");
	m->exports = calloc(json_array_size(exports) + 1, sizeof(ManifestExport));
	if (!m->exports)
		return -ENOMEM;
	json_array_foreach(exports, i, e) {
		ManifestExport *x = &m->exports[m->n_exports++];
		json_t *hints = json_object_get(e, "annotations");

		*x = (ManifestExport){
			.name = json_string_value(json_object_get(e, "name")),
			.description = json_string_value(json_object_get(e, "description")),
			.title = json_string_value(json_object_get(e, "title")),
			.input = json_object_get(e, "input"),
			.output = json_object_get(e, "output"),
		};
		for (size_t h = 0; h < _MANIFEST_HINT_MAX; h++) {
			json_t *b = json_object_get(hints, hint_names[h]);

			x->has_hint[h] = json_is_boolean(b);
			x->hint[h] = json_is_true(b);
		}
	}
	expose = json_object_get(doc, "expose");
	m->expose = (ManifestExpose){
		.browser = json_is_true(json_object_get(expose, "browser")),
		.terminal = json_is_true(json_object_get(expose, "terminal")),
		.preview = json_is_true(json_object_get(expose, "preview")),
	};
	m->governs = json_is_true(json_object_get(doc, "governs"));
	m->governance_exempt =
		json_is_true(json_object_get(json_object_get(doc, "governance"), "exempt"));
	resources_read(&m->resources, json_object_get(doc, "resources"));
	*ret = TAKE_PTR(m);
	return 0;
}

static void validate_fields(Validator *v, json_t *raw, json_t *out)
{
	if (!json_is_object(raw)) {
		issue(v, "Expected object, received %s", js_type(raw));
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		path_push_key(v, fields[i].key);
		fields[i].check(v, json_object_get(raw, fields[i].key), out);
		path_pop(v);
	}
	check_governor(v, raw);
}

int manifest_validate_json(json_t *raw, const YamlPositions *positions, const char *file,
			   Manifest **ret, ManifestError *reterr)
{
	_cleanup_(json_decrefp) json_t *copy = NULL, *out = NULL;
	_cleanup_free_ char *fatal = NULL;
	ManifestError e = {};
	Validator v = {.positions = positions};
	int r;

	if (reterr)
		*reterr = (ManifestError){};
	if (!raw)
		return -EINVAL;
	copy = json_deep_copy(raw);
	out = json_object();
	if (!copy || !out)
		return -ENOMEM;
	r = resolve_schema_version(copy, &fatal);
	if (r < 0)
		return r;
	if (r > 0) {
		r = format_fatal(&e, file, positions, TAKE_PTR(fatal));
		goto invalid;
	}
	validate_fields(&v, copy, out);
	e.issues = TAKE_PTR(v.issues);
	e.n_issues = v.n_issues;
	if (v.oom) {
		manifest_error_done(&e);
		return -ENOMEM;
	}
	if (e.n_issues > 0) {
		r = format_issues(&e, file, v.n_dropped);
		goto invalid;
	}
	return manifest_build(out, ret);
invalid:
	if (r < 0) {
		manifest_error_done(&e);
		return r;
	}
	if (reterr)
		*reterr = e;
	else
		manifest_error_done(&e);
	return -EBADMSG;
}

/* A document YAML refused, as a one-issue report in the usual form. */
static int yaml_refused(int r, const YamlError *yerr, const char *file, ManifestError *reterr)
{
	ManifestError e = {};
	char *path = strdup(yerr->path), *message = strdup(yerr->message);
	int k;

	if (!path || !message) {
		free(path);
		free(message);
		return -ENOMEM;
	}
	k = issues_append(&e.issues, &e.n_issues, yerr->line, yerr->column, path, message);
	if (k >= 0)
		k = format_issues(&e, file, 0);
	if (k < 0 || !reterr) {
		manifest_error_done(&e);
		return k < 0 ? k : r;
	}
	*reterr = e;
	return r;
}

int manifest_parse(const char *buf, size_t size, const char *file, Manifest **ret,
		   ManifestError *reterr)
{
	_cleanup_(yaml_positions_freep) YamlPositions *positions = NULL;
	_cleanup_(json_decrefp) json_t *doc = NULL;
	YamlError yerr;
	int r;

	if (reterr)
		*reterr = (ManifestError){};
	r = yaml_to_json(buf, size, NULL, &doc, &positions, &yerr);
	if (r == -EBADMSG || r == -EFBIG)
		return yaml_refused(r, &yerr, file, reterr);
	if (r < 0)
		return r;
	return manifest_validate_json(doc, positions, file, ret, reterr);
}

int manifest_load_at(int dir_fd, const char *path, Manifest **ret, ManifestError *reterr)
{
	_cleanup_free_ char *buf = NULL;
	size_t size = 0;
	int r;

	if (reterr)
		*reterr = (ManifestError){};
	r = read_full_file_at(dir_fd, path, MANIFEST_SIZE_MAX, &buf, &size);
	if (r == -EFBIG) {
		YamlError yerr = {};

		snprintf(yerr.message, sizeof(yerr.message), "the file is larger than %u KiB",
			 MANIFEST_SIZE_MAX / 1024);
		return yaml_refused(r, &yerr, path, reterr);
	}
	if (r < 0)
		return r;
	return manifest_parse(buf, size, path, ret, reterr);
}

/*
 * Accessors.
 */

const char *manifest_name(const Manifest *m)
{
	return m->name;
}

const char *manifest_version(const Manifest *m)
{
	return m->version;
}

const char *manifest_description(const Manifest *m)
{
	return m->description;
}

ManifestRuntime manifest_runtime(const Manifest *m)
{
	return m->runtime;
}

size_t manifest_capabilities(const Manifest *m, const char *const **ret)
{
	*ret = m->capabilities;
	return m->n_capabilities;
}

const char *manifest_field_type(const json_t *spec)
{
	return json_is_object(spec) ? json_string_value(json_object_get(spec, "type"))
				    : json_string_value(spec);
}

const char *manifest_field_description(const json_t *spec)
{
	return json_string_value(json_object_get(spec, "description"));
}

size_t manifest_exports(const Manifest *m, const ManifestExport **ret)
{
	*ret = m->exports;
	return m->n_exports;
}

const ManifestExport *manifest_find_export(const Manifest *m, const char *name)
{
	for (size_t i = 0; i < m->n_exports; i++)
		if (streq(m->exports[i].name, name))
			return &m->exports[i];
	return NULL;
}

size_t manifest_secrets(const Manifest *m, const char *const **ret)
{
	*ret = m->secrets;
	return m->n_secrets;
}

size_t manifest_on_install(const Manifest *m, const char *const **ret)
{
	*ret = m->on_install;
	return m->n_on_install;
}

size_t manifest_on_agent_ready(const Manifest *m, const char *const **ret)
{
	*ret = m->on_agent_ready;
	return m->n_on_agent_ready;
}

ManifestExpose manifest_expose(const Manifest *m)
{
	return m->expose;
}

bool manifest_governs(const Manifest *m)
{
	return m->governs;
}

bool manifest_governance_exempt(const Manifest *m)
{
	return m->governance_exempt;
}

const ManifestResources *manifest_resources(const Manifest *m)
{
	return &m->resources;
}

json_t *manifest_to_json(const Manifest *m)
{
	return json_deep_copy(m->doc);
}

static const char *const runtime_names[_MANIFEST_RUNTIME_MAX] = {
	[MANIFEST_RUNTIME_NODE] = "node",
	[MANIFEST_RUNTIME_PYTHON] = "python",
};

const char *manifest_runtime_to_string(ManifestRuntime r)
{
	return r >= 0 && r < _MANIFEST_RUNTIME_MAX ? runtime_names[r] : NULL;
}

ManifestRuntime manifest_runtime_from_string(const char *s)
{
	for (int i = 0; s && i < _MANIFEST_RUNTIME_MAX; i++)
		if (streq(s, runtime_names[i]))
			return (ManifestRuntime)i;
	return _MANIFEST_RUNTIME_INVALID;
}
