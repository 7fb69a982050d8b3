/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz berth.yml loading: YAML bytes through yaml_to_json() and the manifest validator,
 * then every accessor of what was accepted, and the capability helpers on the raw bytes.
 * It must never crash, leak or break the invariants checked below (abort() if it does).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

#define PAIRS_MAX 64 /* capability pairs matched per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void exercise(const Manifest *m)
{
	const char *const *caps, *const *l;
	const ManifestExport *exports;
	json_t *doc = manifest_to_json(m);
	size_t n, pairs = 0;
	char *text;

	check(doc != NULL);
	text = json_dumps(doc, JSON_COMPACT);
	check(text != NULL);
	free(text);
	json_decref(doc);
	check(manifest_name(m) && manifest_version(m) && manifest_description(m));
	check(manifest_runtime_to_string(manifest_runtime(m)) != NULL);
	n = manifest_capabilities(m, &caps);
	for (size_t i = 0; i < n; i++) {
		char *ns = NULL, *action = NULL, *scope = NULL;

		check(capability_is_well_formed(caps[i], strlen(caps[i])));
		check(capability_parse(caps[i], &ns, &action, &scope) == 0);
		free(ns);
		free(action);
		free(scope);
		check(capability_matches(caps[i], caps[i]));
		for (size_t j = 0; j < n && pairs < PAIRS_MAX; j++, pairs++)
			(void)capability_matches(caps[i], caps[j]);
	}
	n = manifest_exports(m, &exports);
	for (size_t i = 0; i < n; i++) {
		check(exports[i].name != NULL);
		check(!exports[i].input || json_is_object(exports[i].input));
		check(manifest_find_export(m, exports[i].name) != NULL);
	}
	(void)manifest_secrets(m, &l);
	(void)manifest_on_install(m, &l);
	(void)manifest_on_agent_ready(m, &l);
	(void)manifest_expose(m);
	(void)manifest_governs(m);
	(void)manifest_governance_exempt(m);
	check(manifest_resources(m) != NULL);
}

/* The raw bytes as a scope and as a capability pair split at the first newline. */
static void helpers(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *nl = memchr(s, '\n', size);
	char *msg = NULL, *g, *r;
	int k;

	k = capability_fs_scope_issue(s, size, &msg);
	check(k == 0);
	free(msg);
	k = capability_issue(s, size, &msg);
	check(k == 0);
	free(msg);
	(void)capability_is_well_formed(s, size);
	if (!nl)
		return;
	g = strndup(s, (size_t)(nl - s));
	r = strndup(nl + 1, size - (size_t)(nl - s) - 1);
	check(g && r);
	(void)capability_matches(g, r);
	free(g);
	free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ManifestError e = {};
	Manifest *m = NULL;
	int r;

	r = manifest_parse((const char *)data, size, NULL, &m, &e);
	if (r >= 0) {
		check(m != NULL && e.text == NULL && e.n_issues == 0);
		exercise(m);
		manifest_free(m);
	} else {
		check(m == NULL);
		if (r == -EBADMSG || r == -EFBIG) {
			check(e.text && strncmp(e.text, "invalid berth.yml", 17) == 0);
			check(e.n_issues > 0);
		}
		manifest_error_done(&e);
	}
	if (size <= 4096)
		helpers(data, size);
	return 0;
}
