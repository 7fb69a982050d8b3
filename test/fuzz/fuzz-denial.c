/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the denial explainer: the bytes as an app's error string (what an app controls) for
 * each enforcement status, as VM log text, and as JSON reports. It must never crash or leak,
 * an explanation must be made of its own lines only (no control characters, no line the app
 * started), and anything not explained must come back verbatim (abort() otherwise).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "denial.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char manifest_yaml[] = "name: filesystem\nversion: 0.1.0\ncapabilities:\n"
				    "  - filesystem:read:/workspace\n"
				    "  - filesystem:write:/workspace\n"
				    "  - filesystem:write:/tmp/data/*\n"
				    "  - network:connect:8090\n"
				    "exports:\n  - name: run_code\n    output:\n"
				    "      denials: array\n";

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool line_is_ours(const char *p)
{
	static const char *const keys[] = {
		DENIAL_HEADING, "app: ",	 "manifest: ", "raw: ", "denied: ",
		"path: ",	"denied-by: ",	 "fix: ",      "  - ",	"note: ",
		"declared: ",	"alternative: ", "docs: "};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strncmp(p, keys[i], strlen(keys[i])) == 0)
			return true;
	return false;
}

static void check_explanation(const char *raw, const char *out)
{
	json_t *s;

	check(out != NULL);
	if (strcmp(out, raw) == 0) {
		check(!denial_text_is_denial(out));
		return;
	}
	if (!denial_text_is_denial(out)) { /* an app's text posing as ours, marked */
		check(strncmp(out, "the app's own error text (not Berth's): ", 40) == 0);
		check(strcmp(out + 40, raw) == 0);
		return;
	}
	for (const char *p = out; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		check(line_is_ours(p));
	for (const char *p = out; *p; p++)
		check((unsigned char)*p >= 0x20 ? *p != 0x7f : *p == '\n');
	s = json_string(out); /* valid UTF-8 */
	check(s != NULL);
	json_decref(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static Manifest *m;
	char *raw, *out;
	json_t *doc, *paths;

	if (!m)
		check(manifest_parse(manifest_yaml, strlen(manifest_yaml), NULL, &m, NULL) == 0);
	if (size > 64 * 1024)
		return 0;
	raw = strndup((const char *)data, size); /* up to a NUL, as a C caller would pass it */
	check(raw != NULL);
	for (int st = 0; st <= _ENFORCEMENT_MAX; st++) {
		out = denial_explain_at(raw, "filesystem", m, "apps/filesystem/berth.yml", st,
					st % 2 ? "/app" : "/app/filesystem");
		check_explanation(raw, out);
		free(out);
	}
	check(enforcement_status_to_string(enforcement_from_logs(raw)) != NULL);
	check(enforcement_status_to_string(enforcement_from_app_logs(raw, "filesystem")) != NULL);
	doc = json_loadb((const char *)data, size, 0, NULL);
	check(enforcement_status_to_string(enforcement_from_reports(doc, "filesystem")) != NULL);
	paths = denial_reported_paths(doc);
	check(paths != NULL);
	json_decref(paths);
	free(denial_possible_refusal(m, "run_code", doc, ENFORCEMENT_ENFORCED));
	json_decref(doc);
	free(raw);
	return 0;
}
