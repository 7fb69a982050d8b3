/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capability model's case corpus (test/capability/corpus.json) replayed against the
 * C implementation, which is the reference: the Node and Python SDK tests replay the same
 * file (test/sdk/capability-corpus.test.mjs, test/sdk/test_capability_corpus.py).
 *
 * Each section is a list of cases, [input..., expected]; a bare string in a section is a
 * heading for the reader and is skipped. NUL bytes are written \u0000.
 *
 *   test-capability-corpus --write < corpus.json > new.json
 *
 * prints the corpus with every expected value replaced by the C answer (a case may then
 * leave its expected value out): how new cases get their values. Review the diff.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "macros.h"
#include "tests.h"

#define CORPUS_PATH "/test/capability/corpus.json"

typedef struct Section {
	const char *name;
	size_t n_inputs;
	/* The C answer for the case's inputs, or NULL with *why set when the case is unusable. */
	json_t *(*answer)(json_t *c, const char **why);
} Section;

static const char *str_at(json_t *c, size_t i, size_t *len)
{
	json_t *v = json_array_get(c, i);

	if (!json_is_string(v))
		return NULL;
	*len = json_string_length(v);
	return json_string_value(v);
}

static json_t *answer_well_formed(json_t *c, const char **why)
{
	size_t len;
	const char *s = str_at(c, 0, &len);

	(void)why;
	return json_boolean(capability_is_well_formed(s, len));
}

static json_t *answer_issue(json_t *c, const char **why)
{
	_cleanup_free_ char *msg = NULL;
	size_t len;
	const char *s = str_at(c, 0, &len);

	if (capability_issue(s, len, &msg) < 0) {
		*why = "capability_issue() failed";
		return NULL;
	}
	return msg ? json_string(msg) : json_null();
}

static json_t *answer_matches(json_t *c, const char **why)
{
	size_t glen, rlen;
	const char *g = str_at(c, 0, &glen), *r = str_at(c, 1, &rlen);

	/* capability_matches() takes C strings: a NUL would cut the case short unseen. */
	if (strlen(g) != glen || strlen(r) != rlen) {
		*why = "a matches case may not hold a NUL (capability_matches takes C strings)";
		return NULL;
	}
	return json_boolean(capability_matches(g, r));
}

static json_t *answer_parse(json_t *c, const char **why)
{
	_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;
	size_t len;
	const char *s = str_at(c, 0, &len);
	int r;

	if (strlen(s) != len) {
		*why = "a parse case may not hold a NUL (capability_parse takes a C string)";
		return NULL;
	}
	r = capability_parse(s, &ns, &action, &scope);
	if (r == -EINVAL)
		return json_null();
	if (r < 0) {
		*why = "capability_parse() failed";
		return NULL;
	}
	return json_pack("{s:s, s:s, s:s}", "namespace", ns, "action", action, "scope", scope);
}

static const Section sections[] = {
	{"wellFormed", 1, answer_well_formed},
	{"issues", 1, answer_issue},
	{"matches", 2, answer_matches},
	{"parse", 1, answer_parse},
};

static json_t *corpus_load_file(FILE *f)
{
	json_error_t err;
	json_t *doc = json_loadf(f, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);

	if (!doc)
		TEST_FAIL("corpus: line %d: %s", err.line, err.text);
	if (!json_is_object(doc))
		TEST_FAIL("corpus: not a JSON object");
	return doc;
}

static json_t *corpus_load(void)
{
	const char *root = getenv("BERTH_SOURCE_ROOT");
	_cleanup_free_ char *path = NULL;
	FILE *f;
	json_t *doc;

	if (!root)
		TEST_FAIL("BERTH_SOURCE_ROOT is not set (meson test sets it)");
	if (asprintf(&path, "%s" CORPUS_PATH, root) < 0)
		TEST_FAIL("out of memory");
	f = fopen(path, "re");
	if (!f)
		TEST_FAIL("%s: %s", path, strerror(errno));
	doc = corpus_load_file(f);
	fclose(f);
	return doc;
}

/* Is @c a case of @sec: @sec->n_inputs strings, then the expected value (optional when
 * @need_expected is false)? */
static bool case_shaped(const Section *sec, json_t *c, bool need_expected)
{
	size_t n = json_array_size(c);

	if (!json_is_array(c) || n > sec->n_inputs + 1 || n < sec->n_inputs + need_expected)
		return false;
	for (size_t i = 0; i < sec->n_inputs; i++)
		if (!json_is_string(json_array_get(c, i)))
			return false;
	return true;
}

static char *show(json_t *v)
{
	return json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
}

/* Replay one section; every disagreement is printed, then the test fails. */
static void replay(const char *name)
{
	json_auto_t *doc = corpus_load();
	const Section *sec = NULL;
	json_t *cases, *c;
	size_t i, n_cases = 0, n_bad = 0;

	for (i = 0; i < ELEMENTSOF(sections); i++)
		if (strcmp(sections[i].name, name) == 0)
			sec = &sections[i];
	ASSERT_NOT_NULL(sec);
	cases = json_object_get(doc, name);
	if (!json_is_array(cases))
		TEST_FAIL("corpus: no \"%s\" list", name);
	json_array_foreach(cases, i, c) {
		const char *why = NULL;
		json_auto_t *got = NULL;

		if (json_is_string(c))
			continue;
		n_cases++;
		if (!case_shaped(sec, c, true))
			why = "not a case of this section";
		else
			got = sec->answer(c, &why);
		if (!got || !json_equal(got, json_array_get(c, sec->n_inputs))) {
			_cleanup_free_ char *cs = show(c), *gs = got ? show(got) : NULL;

			printf("# %s[%zu] %s: %s%s\n", name, i, cs ? cs : "?",
			       why ? why : "C says ", why ? "" : (gs ? gs : "?"));
			n_bad++;
		}
	}
	printf("# %s: %zu cases, %zu disagree\n", name, n_cases, n_bad);
	if (n_cases == 0)
		TEST_FAIL("corpus: \"%s\" holds no cases", name);
	if (n_bad)
		TEST_FAIL("%zu of %zu \"%s\" cases disagree with the C implementation", n_bad,
			  n_cases, name);
}

TEST(corpus_well_formed)
{
	replay("wellFormed");
}

TEST(corpus_issues)
{
	replay("issues");
}

TEST(corpus_matches)
{
	replay("matches");
}

TEST(corpus_parse)
{
	replay("parse");
}

TEST(corpus_has_only_known_sections)
{
	json_auto_t *doc = corpus_load();
	const char *key;
	json_t *v;

	json_object_foreach(doc, key, v) {
		bool known = key[0] == '_';

		for (size_t i = 0; i < ELEMENTSOF(sections); i++)
			known = known || strcmp(key, sections[i].name) == 0;
		if (!known)
			TEST_FAIL("corpus: unknown section \"%s\"", key);
	}
}

/* One JSON value on one line, with the line breaks a reader would not see (U+2028, U+2029,
 * U+0085) escaped. */
static void write_value(FILE *out, json_t *v)
{
	_cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY);

	if (!s) {
		fprintf(stderr, "out of memory\n");
		exit(EXIT_FAILURE);
	}
	for (const char *p = s; *p; p++)
		if (strncmp(p, "\xe2\x80\xa8", 3) == 0 || strncmp(p, "\xe2\x80\xa9", 3) == 0) {
			fprintf(out, "\\u%s", p[2] == '\xa8' ? "2028" : "2029");
			p += 2;
		} else if (strncmp(p, "\xc2\x85", 2) == 0) {
			fputs("\\u0085", out);
			p += 1;
		} else
			fputc(*p, out);
}

/* --write: the corpus from standard input with C's answers, on standard output. */
static int corpus_write(void)
{
	json_auto_t *doc = corpus_load_file(stdin);
	const char *key;
	json_t *v;
	bool first = true;

	fputs("{\n", stdout);
	json_object_foreach(doc, key, v) {
		json_auto_t *k = json_string(key);

		if (key[0] != '_')
			continue;
		fputs(first ? "  " : ",\n  ", stdout);
		write_value(stdout, k);
		fputs(": ", stdout);
		write_value(stdout, v);
		first = false;
	}
	for (size_t s = 0; s < ELEMENTSOF(sections); s++) {
		const Section *sec = &sections[s];
		json_t *cases = json_object_get(doc, sec->name), *c;
		size_t i;

		if (!json_is_array(cases)) {
			fprintf(stderr, "no \"%s\" list\n", sec->name);
			return EXIT_FAILURE;
		}
		printf("%s  \"%s\": [\n", first ? "" : ",\n", sec->name);
		first = false;
		json_array_foreach(cases, i, c) {
			const char *why = NULL;
			json_t *got = NULL;

			if (!json_is_string(c)) {
				if (case_shaped(sec, c, false))
					got = sec->answer(c, &why);
				else
					why = "not a case of this section";
				if (!got) {
					_cleanup_free_ char *cs = show(c);

					fprintf(stderr, "%s[%zu] %s: %s\n", sec->name, i,
						cs ? cs : "?", why ? why : "?");
					return EXIT_FAILURE;
				}
				if (json_array_size(c) > sec->n_inputs)
					json_array_set_new(c, sec->n_inputs, got);
				else
					json_array_append_new(c, got);
			}
			fputs("    ", stdout);
			write_value(stdout, c);
			fputs(i + 1 < json_array_size(cases) ? ",\n" : "\n", stdout);
		}
		fputs("  ]", stdout);
	}
	fputs("\n}\n", stdout);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--write") == 0)
		return corpus_write();
	return tests_run();
}
