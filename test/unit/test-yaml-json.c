/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "tests.h"
#include "yaml-json.h"

/* Convert @yaml; on failure the error is left in *@err and NULL returned. */
static json_t *convert_limits(const char *yaml, const YamlLimits *limits, YamlPositions **ret_pos,
			      YamlError *err, int *ret_r)
{
	json_t *v = NULL;
	int r = yaml_to_json(yaml, strlen(yaml), limits, &v, ret_pos, err);

	if (ret_r)
		*ret_r = r;
	return r < 0 ? NULL : v;
}

static json_t *convert(const char *yaml)
{
	YamlError err;
	json_t *v = convert_limits(yaml, NULL, NULL, &err, NULL);

	if (!v)
		TEST_FAIL("refused %s: %u:%u %s: %s", yaml, err.line, err.column, err.path,
			  err.message);
	return v;
}

/* The compact JSON of @yaml, malloc()ed. */
static char *to_text(const char *yaml)
{
	_cleanup_(json_decrefp) json_t *v = convert(yaml);

	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

#define ASSERT_YAML_JSON(yaml, json)                     \
	do {                                             \
		_cleanup_free_ char *_t = to_text(yaml); \
		ASSERT_STREQ(_t, json);                  \
	} while (0)

/* @yaml is refused with -EBADMSG at @line, @path, with @message. */
static void assert_refused(const char *yaml, unsigned line, const char *path, const char *message)
{
	YamlError err;
	int r;
	json_t *v = convert_limits(yaml, NULL, NULL, &err, &r);

	if (v)
		TEST_FAIL("accepted: %s", yaml);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_EQ(err.line, line);
	ASSERT_STREQ(err.path, path);
	ASSERT_STREQ(err.message, message);
}

TEST(core_schema_null_and_bool)
{
	ASSERT_YAML_JSON("[~, null, Null, NULL, '', \"\"]", "[null,null,null,null,\"\",\"\"]");
	ASSERT_YAML_JSON("- ~\n-\n- x\n", "[null,null,\"x\"]");
	ASSERT_YAML_JSON("a:\n", "{\"a\":null}");
	ASSERT_YAML_JSON("[true, True, TRUE, false, False, FALSE]",
			 "[true,true,true,false,false,false]");
	/* Not booleans in YAML 1.2: the 1.1 spellings stay strings. */
	ASSERT_YAML_JSON(
		"[no, yes, on, off, y, n, NO, Yes, ON, tRUE, nULL]",
		"[\"no\",\"yes\",\"on\",\"off\",\"y\",\"n\",\"NO\",\"Yes\",\"ON\",\"tRUE\","
		"\"nULL\"]");
	ASSERT_YAML_JSON("enabled: no\n", "{\"enabled\":\"no\"}");
}

TEST(core_schema_int)
{
	ASSERT_YAML_JSON("[0, 12, +12, -12, 012, -0, 0o17, 0x1F, 0xff]",
			 "[0,12,12,-12,12,0,15,31,255]");
	ASSERT_YAML_JSON("[9223372036854775807, -9223372036854775808]",
			 "[9223372036854775807,-9223372036854775808]");
	/* Outside int64 a number is still a number, as a real. */
	ASSERT_YAML_JSON("[99999999999999999999, 0xFFFFFFFFFFFFFFFFFF, 0o7777777777777777777777]",
			 "[1e20,4.7223664828696452e21,7.3786976294838206e19]");
	/* Not ints in the core schema. */
	ASSERT_YAML_JSON("[0b101, 1_000, -0x1F, +0o7, 0x, 0o, 0o8, 0xg, 1:2, 0X1F, 0O17]",
			 "[\"0b101\",\"1_000\",\"-0x1F\",\"+0o7\",\"0x\",\"0o\",\"0o8\",\"0xg\","
			 "\"1:2\",\"0X1F\",\"0O17\"]");
}

TEST(core_schema_float)
{
	_cleanup_(json_decrefp) json_t *v = convert("[.5, 5., 1e3, -1.5e-3, +2.5, 1.0, 0.1E+2]");
	const double want[] = {0.5, 5.0, 1000.0, -0.0015, 2.5, 1.0, 10.0};

	ASSERT_EQ(json_array_size(v), ELEMENTSOF(want));
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		ASSERT_TRUE(json_is_real(json_array_get(v, i)));
		ASSERT_TRUE(json_real_value(json_array_get(v, i)) == want[i]);
	}
	ASSERT_YAML_JSON("[., 1e, e3, 1.2.3, 1e3.5, '1.5', 1,5, -, +, .e3]",
			 "[\".\",\"1e\",\"e3\",\"1.2.3\",\"1e3.5\",\"1.5\",1,5,\"-\",\"+\","
			 "\".e3\"]");
}

TEST(non_finite_numbers_are_refused)
{
	static const char *const specials[] = {".inf",	".Inf",	 ".INF", "+.inf", "-.inf",
					       "-.INF", "+.Inf", ".nan", ".NaN",  ".NAN"};

	for (size_t i = 0; i < ELEMENTSOF(specials); i++) {
		char yaml[64], message[256];

		snprintf(yaml, sizeof(yaml), "cpu: %s\n", specials[i]);
		snprintf(
			message, sizeof(message),
			"%s is not a finite number, which JSON cannot hold; quote it if it is meant as a string",
			specials[i]);
		assert_refused(yaml, 1, "cpu", message);
	}
	assert_refused(
		"- 1e999\n", 1, "0",
		"1e999 is not a finite number, which JSON cannot hold; quote it if it is meant as a string");
	/* Quoted, or not the core spelling, they are strings. */
	ASSERT_YAML_JSON("['.inf', \".nan\", .iNf, inf, nan, .infinity]",
			 "[\".inf\",\".nan\",\".iNf\",\"inf\",\"nan\",\".infinity\"]");
}

TEST(quoted_and_block_scalars_are_strings)
{
	ASSERT_YAML_JSON("['true', \"123\", '~', \"null\", 'no', \"0x10\"]",
			 "[\"true\",\"123\",\"~\",\"null\",\"no\",\"0x10\"]");
	ASSERT_YAML_JSON("a: |\n  1\n  2\nb: >\n  true\n",
			 "{\"a\":\"1\\n2\\n\",\"b\":\"true\\n\"}");
	ASSERT_YAML_JSON("\"a\\u00e9\\tb\"", "\"aé\\tb\"");
}

TEST(keys_are_their_text)
{
	ASSERT_YAML_JSON("1: a\ntrue: b\n~: c\n'x': d\n0x10: e\n",
			 "{\"1\":\"a\",\"true\":\"b\",\"~\":\"c\",\"x\":\"d\",\"0x10\":\"e\"}");
	/* A quoted "<<" is an ordinary key. */
	ASSERT_YAML_JSON("'<<': 1\n", "{\"<<\":1}");
	ASSERT_YAML_JSON("? a\n: 1\n", "{\"a\":1}");
}

TEST(nul_in_values)
{
	_cleanup_(json_decrefp) json_t *v = convert("a: \"x\\0y\"\n");
	json_t *s = json_object_get(v, "a");

	ASSERT_EQ(json_string_length(s), 3);
	ASSERT_TRUE(memcmp(json_string_value(s), "x\0y", 3) == 0);
	assert_refused("\"a\\0b\": 1\n", 1, "", "mapping keys must not contain a NUL byte");
}

TEST(documents)
{
	_cleanup_(json_decrefp) json_t *empty = convert("");
	_cleanup_(json_decrefp) json_t *comments = convert("# nothing\n\n");
	_cleanup_(json_decrefp) json_t *marker = convert("---\n");

	ASSERT_TRUE(json_is_null(empty));
	ASSERT_TRUE(json_is_null(comments));
	ASSERT_TRUE(json_is_null(marker));
	ASSERT_YAML_JSON("%YAML 1.2\n---\na: 1\n...\n", "{\"a\":1}");
	ASSERT_YAML_JSON("--- just text\n", "\"just text\"");
	assert_refused("a: 1\n---\nb: 2\n", 2, "",
		       "a second document (---) is not allowed; keep one document per file");
	assert_refused("a: 1\n...\n---\nb: 2\n", 3, "",
		       "a second document (---) is not allowed; keep one document per file");
	assert_refused("%TAG !e! tag:example.com,2000:\n---\na: 1\n", 1, "",
		       "%TAG directives are not allowed");
}

TEST(anchors_aliases_tags_merge_keys)
{
	assert_refused("a: &x 1\nb: *x\n", 1, "a",
		       "anchors (&x) are not allowed; write the value out in full");
	assert_refused("a: 1\nb: *x\n", 2, "b",
		       "aliases (*x) are not allowed; write the value out in full");
	assert_refused("list:\n  - &base {a: 1}\n", 2, "list.0",
		       "anchors (&base) are not allowed; write the value out in full");
	assert_refused(
		"a: !!str 1\n", 1, "a",
		"tags (!!str) are not allowed; write a plain value, quoted if it must be a string");
	assert_refused(
		"a: !custom x\n", 1, "a",
		"tags (!custom) are not allowed; write a plain value, quoted if it must be a string");
	assert_refused(
		"a: ! x\n", 1, "a",
		"tags (!) are not allowed; write a plain value, quoted if it must be a string");
	assert_refused(
		"x:\n  y: !!map {}\n", 2, "x.y",
		"tags (!!map) are not allowed; write a plain value, quoted if it must be a string");
	assert_refused("base: {a: 1}\nderived:\n  <<: {a: 1}\n  b: 2\n", 3, "derived",
		       "merge keys (<<) are not allowed; write the keys out in full");
	/* The billion laughs never gets past its first anchor. */
	assert_refused("a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a]\nc: [*b,*b]\n", 1, "a",
		       "anchors (&a) are not allowed; write the value out in full");
}

TEST(duplicate_and_complex_keys)
{
	assert_refused("name: a\nversion: 1\nname: b\n", 3, "name", "duplicate key \"name\"");
	assert_refused("exports:\n  - name: a\n    name: b\n", 3, "exports.0.name",
		       "duplicate key \"name\"");
	assert_refused("{a: 1, a: 2}", 1, "a", "duplicate key \"a\"");
	assert_refused("? [a, b]\n: 1\n", 1, "",
		       "mapping keys must be plain values, not mappings or sequences");
	assert_refused("x:\n  ? {a: 1}\n  : 1\n", 2, "x",
		       "mapping keys must be plain values, not mappings or sequences");
	/* Same text, different style: still the same key. */
	assert_refused("a: 1\n'a': 2\n", 2, "a", "duplicate key \"a\"");
}

TEST(syntax_errors_have_a_line)
{
	YamlError err;
	int r;

	ASSERT_TRUE(convert_limits("a: 1\nb: [1, 2\nc: 3\n", NULL, NULL, &err, &r) == NULL);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_TRUE(err.line >= 3);
	ASSERT_TRUE(strneq(err.message, "invalid YAML: ", 14));
	ASSERT_TRUE(convert_limits("a: b: c\n", NULL, NULL, &err, &r) == NULL);
	ASSERT_EQ(err.line, 1);
	ASSERT_STREQ(err.message, "invalid YAML: mapping values are not allowed in this context");
	/* Not UTF-8. */
	ASSERT_TRUE(convert_limits("a: \xff\xfe\n", NULL, NULL, &err, &r) == NULL);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_EQ(err.line, 1);
	ASSERT_EQ(err.column, 4);
	ASSERT_STREQ(err.message, "invalid YAML: invalid leading UTF-8 octet");
	/* The reader's errors carry an offset; the line is still right. */
	ASSERT_TRUE(convert_limits("a: 1\nb: x\x01\n", NULL, NULL, &err, &r) == NULL);
	ASSERT_EQ(err.line, 2);
	ASSERT_STREQ(err.message, "invalid YAML: control characters are not allowed");
	{
		static const char nul[] = "a: 1\n\nb: x\0\n";
		json_t *v = NULL;

		ASSERT_EQ(yaml_to_json(nul, sizeof(nul) - 1, NULL, &v, NULL, &err), -EBADMSG);
		ASSERT_EQ(err.line, 3);
		ASSERT_STREQ(err.message, "invalid YAML: control characters are not allowed");
	}
}

TEST(size_cap)
{
	YamlLimits l = {.size_max = 16};
	YamlError err;
	int r;

	ASSERT_TRUE(convert_limits("a: 0123456789abcdef\n", &l, NULL, &err, &r) == NULL);
	ASSERT_EQ(r, -EFBIG);
	ASSERT_STREQ(err.message, "the file is larger than 0 KiB");
	{
		size_t n = YAML_JSON_SIZE_MAX + 1;
		_cleanup_free_ char *big = malloc(n);
		json_t *v = NULL;

		ASSERT_NOT_NULL(big);
		memset(big, '#', n);
		ASSERT_EQ(yaml_to_json(big, n, NULL, &v, NULL, &err), -EFBIG);
		ASSERT_STREQ(err.message, "the file is larger than 1024 KiB");
		ASSERT_TRUE(v == NULL);
		ASSERT_OK(yaml_to_json(big, n - 1, NULL, &v, NULL, &err));
		ASSERT_TRUE(json_is_null(v));
	}
}

static char *nested(size_t depth)
{
	char *s = malloc(depth * 2 + 1);

	if (!s)
		return NULL;
	memset(s, '[', depth);
	memset(s + depth, ']', depth);
	s[depth * 2] = '\0';
	return s;
}

TEST(depth_cap)
{
	_cleanup_free_ char *ok = nested(YAML_JSON_DEPTH_MAX),
			    *deep = nested(YAML_JSON_DEPTH_MAX + 1);
	_cleanup_free_ char *very = nested(100000);
	_cleanup_(json_decrefp) json_t *v = NULL;
	YamlError err;
	int r;

	v = convert(ok);
	ASSERT_TRUE(json_is_array(v));
	ASSERT_TRUE(convert_limits(deep, NULL, NULL, &err, &r) == NULL);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_STREQ(err.message, "nested deeper than 64 levels");
	ASSERT_EQ(err.column, 65);
	ASSERT_TRUE(convert_limits(very, NULL, NULL, &err, &r) == NULL);
	ASSERT_STREQ(err.message, "nested deeper than 64 levels");
	/* Block style counts the same. */
	ASSERT_TRUE(convert_limits("a:\n b:\n  c: 1\n", &(YamlLimits){.depth_max = 2}, NULL, &err,
				   &r) == NULL);
	ASSERT_EQ(err.line, 3);
	ASSERT_STREQ(err.path, "a.b");
}

TEST(scalar_and_node_caps)
{
	YamlLimits l = {.scalar_max = 8, .nodes_max = 5};
	YamlError err;
	int r;
	json_t *v;

	v = convert_limits("a: 12345678\n", &l, NULL, &err, &r);
	ASSERT_NOT_NULL(v);
	json_decref(v);
	ASSERT_TRUE(convert_limits("a: 123456789\n", &l, NULL, &err, &r) == NULL);
	ASSERT_STREQ(err.message, "a value longer than 8 bytes");
	ASSERT_STREQ(err.path, "a");
	ASSERT_TRUE(convert_limits("abcdefghi: 1\n", &l, NULL, &err, &r) == NULL);
	ASSERT_STREQ(err.message, "a value longer than 8 bytes");
	/* The mapping, two keys and two values are five nodes. */
	v = convert_limits("a: 1\nb: 2\n", &l, NULL, &err, &r);
	ASSERT_NOT_NULL(v);
	json_decref(v);
	ASSERT_TRUE(convert_limits("a: 1\nb: 2\nc: 3\n", &l, NULL, &err, &r) == NULL);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_STREQ(err.message, "more than 5 values in the document");
	ASSERT_EQ(err.line, 3);
}

static unsigned line_of(const YamlPositions *p, const YamlPathSegment *path, size_t n,
			size_t want_matched)
{
	unsigned line = 0, column = 0;

	ASSERT_EQ(yaml_positions_lookup(p, path, n, &line, &column), want_matched);
	ASSERT_TRUE(column > 0);
	return line;
}

TEST(positions)
{
	static const char yaml[] = "name: app\n"      /* 1 */
				   "flag: true\n"     /* 2 */
				   "other: true\n"    /* 3 */
				   "list:\n"	      /* 4 */
				   "  - a\n"	      /* 5 */
				   "  - null\n"	      /* 6 */
				   "  - {k: false}\n" /* 7 */
				   "map:\n"	      /* 8 */
				   "  inner:\n"	      /* 9 */
				   "    deep: 1\n"    /* 10 */
				   "\"a.b\": x\n"     /* 11 */
				   "a: {b: y}\n";     /* 12 */
	_cleanup_(yaml_positions_freep) YamlPositions *p = NULL;
	_cleanup_(json_decrefp) json_t *v = NULL;
	YamlError err;
	int r;

	v = convert_limits(yaml, NULL, &p, &err, &r);
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(line_of(p, NULL, 0, 0), 1);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "name"}}, 1, 1), 1);
	/* Two "true"s are one json_t in jansson, but two places in the file. */
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "flag"}}, 1, 1), 2);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "other"}}, 1, 1), 3);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "list"}}, 1, 1), 5);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "list"}, {.index = 1}}, 2, 2), 6);
	ASSERT_EQ(
		line_of(p, (YamlPathSegment[]){{.key = "list"}, {.index = 2}, {.key = "k"}}, 3, 3),
		7);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "map"}, {.key = "inner"}, {.key = "deep"}},
			  3, 3),
		  10);
	/* A key with a dot is one segment, not two. */
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "a.b"}}, 1, 1), 11);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "a"}, {.key = "b"}}, 2, 2), 12);
	/* Missing nodes: the deepest ancestor that exists. */
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "list"}, {.index = 9}}, 2, 1), 5);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "map"}, {.key = "inner"}, {.key = "x"}}, 3,
			  2),
		  10);
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "version"}}, 1, 0), 1);
	/* An index where a key is expected finds nothing. */
	ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.key = "map"}, {.index = 0}}, 2, 1), 9);
}

TEST(positions_columns)
{
	_cleanup_(yaml_positions_freep) YamlPositions *p = NULL;
	_cleanup_(json_decrefp) json_t *v = NULL;
	unsigned line, column;
	YamlError err;
	int r;

	v = convert_limits("a:   x\nb: [1,  2]\n", NULL, &p, &err, &r);
	ASSERT_NOT_NULL(v);
	yaml_positions_lookup(p, (YamlPathSegment[]){{.key = "a"}}, 1, &line, &column);
	ASSERT_EQ(line, 1);
	ASSERT_EQ(column, 6);
	yaml_positions_lookup(p, (YamlPathSegment[]){{.key = "b"}, {.index = 1}}, 2, &line,
			      &column);
	ASSERT_EQ(line, 2);
	ASSERT_EQ(column, 9);
}

TEST(many_nodes_are_fast)
{
	/* 30000 entries of one sequence: each lookup is a binary search. */
	size_t n = 30000, len = 0;
	_cleanup_free_ char *yaml = malloc(n * 12 + 1);
	_cleanup_(yaml_positions_freep) YamlPositions *p = NULL;
	_cleanup_(json_decrefp) json_t *v = NULL;
	YamlError err;
	int r;

	ASSERT_NOT_NULL(yaml);
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(yaml + len, "- %zu\n", i);
	v = convert_limits(yaml, NULL, &p, &err, &r);
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(json_array_size(v), n);
	for (size_t i = 0; i < n; i += 997)
		ASSERT_EQ(line_of(p, (YamlPathSegment[]){{.index = i}}, 1, 1), i + 1);
}

int main(void)
{
	return tests_run();
}
