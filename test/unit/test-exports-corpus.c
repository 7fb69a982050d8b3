/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exports: grammar's case corpus (test/manifest/exports-corpus.json) replayed against
 * the C validator, which is the reference: the Node and Python SDK tests replay the same
 * file (test/sdk/exports-corpus.test.mjs, test/sdk/test_exports_corpus.py).
 *
 * Each case is [exports, expected]: the manifest {name, version, exports} is validated,
 * and expected is {"exports": the normalised list} or {"issues": [[path, message], ...]}.
 *
 *   test-exports-corpus --write < exports-corpus.json > new.json
 *
 * prints the corpus with every expected value replaced by C's answer (a case may leave it
 * out): how new cases get their values. Review the diff.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "manifest.h"
#include "tests.h"

#define CORPUS_PATH "/test/manifest/exports-corpus.json"

static json_t *corpus_load_file(FILE *f)
{
	json_error_t err;
	json_t *doc = json_loadf(f, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);

	if (!doc)
		TEST_FAIL("corpus: line %d: %s", err.line, err.text);
	if (!json_is_array(json_object_get(doc, "cases")))
		TEST_FAIL("corpus: no \"cases\" list");
	return doc;
}

static json_t *corpus_load(void)
{
	const char *root = getenv("BERTH_SOURCE_ROOT");
	_cleanup_free_ char *path = NULL;
	json_t *doc;
	FILE *f;

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

/* C's answer for one exports value. */
static json_t *answer(json_t *exports)
{
	_cleanup_(manifest_freep) Manifest *m = NULL;
	json_auto_t *doc = json_pack("{s:s, s:s, s:O}", "name", "corpus", "version", "1.0.0",
				     "exports", exports);
	ManifestError err = {};
	json_t *issues;
	int r;

	if (!doc)
		return NULL;
	r = manifest_validate_json(doc, NULL, NULL, &m, &err);
	if (r >= 0) {
		json_auto_t *norm = manifest_to_json(m);

		return norm ? json_pack("{s:O}", "exports", json_object_get(norm, "exports"))
			    : NULL;
	}
	if (r != -EBADMSG)
		return NULL;
	issues = json_array();
	for (size_t i = 0; issues && i < err.n_issues; i++)
		json_array_append_new(
			issues, json_pack("[s, s]", err.issues[i].path, err.issues[i].message));
	manifest_error_done(&err);
	return issues ? json_pack("{s:o}", "issues", issues) : NULL;
}

static char *show(json_t *v)
{
	return json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_COMPACT);
}

TEST(corpus_exports)
{
	json_auto_t *doc = corpus_load();
	json_t *c;
	size_t i, n_cases = 0, n_bad = 0;

	json_array_foreach(json_object_get(doc, "cases"), i, c) {
		json_auto_t *got = NULL;

		if (json_is_string(c))
			continue;
		n_cases++;
		if (json_array_size(c) == 2)
			got = answer(json_array_get(c, 0));
		if (!got || !json_equal(got, json_array_get(c, 1))) {
			_cleanup_free_ char *cs = show(c), *gs = got ? show(got) : NULL;

			printf("# cases[%zu] %s: C says %s\n", i, cs ?: "?", gs ?: "(nothing)");
			n_bad++;
		}
	}
	printf("# %zu cases, %zu disagree\n", n_cases, n_bad);
	if (n_cases == 0)
		TEST_FAIL("corpus: no cases");
	if (n_bad)
		TEST_FAIL("%zu of %zu cases disagree with the C validator", n_bad, n_cases);
}

/* --write: the corpus from standard input with C's answers, on standard output. */
static int corpus_write(void)
{
	json_auto_t *doc = corpus_load_file(stdin);
	json_t *cases = json_object_get(doc, "cases"), *c;
	size_t i;

	json_array_foreach(cases, i, c) {
		json_t *got;

		if (json_is_string(c))
			continue;
		got = json_is_array(c) && json_array_size(c) >= 1 ? answer(json_array_get(c, 0))
								  : NULL;
		if (!got) {
			fprintf(stderr, "cases[%zu] is not [exports, expected]\n", i);
			return EXIT_FAILURE;
		}
		if (json_array_size(c) > 1)
			json_array_set_new(c, 1, got);
		else
			json_array_append_new(c, got);
	}
	/* One case a line: the corpus is read by people reviewing a diff. */
	printf("{\n  \"_comment\": ");
	json_dumpf(json_object_get(doc, "_comment"), stdout, JSON_ENCODE_ANY);
	printf(",\n  \"cases\": [\n");
	json_array_foreach(cases, i, c) {
		printf("    ");
		json_dumpf(c, stdout, JSON_ENCODE_ANY | JSON_COMPACT);
		printf("%s\n", i + 1 < json_array_size(cases) ? "," : "");
	}
	printf("  ]\n}\n");
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--write") == 0)
		return corpus_write();
	return tests_run();
}
