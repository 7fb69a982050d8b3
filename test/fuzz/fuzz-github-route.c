/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the GitHub broker's route classifier: any method and target. Never a crash or a
 * leak, and what it says holds (abort() if not): a normalised path starts with '/', has no
 * empty, "." or ".." segment and no '#', and normalising it again changes nothing; a
 * request that has a route asks for a well-formed github:read: or github:write:
 * capability, for the path normalisation gives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool has_dot_segment(const char *p)
{
	size_t end = strcspn(p, "?");

	for (size_t i = 0; i < end;) {
		size_t len = strcspn(p + i + 1, "/?");

		if (len == 0 && i + 1 < end)
			return true;
		if ((len == 1 && p[i + 1] == '.') || (len == 2 && strncmp(p + i + 1, "..", 2) == 0))
			return true;
		i += len + 1;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* "METHOD target": the method is up to the first space. */
	char *in = strndup((const char *)data, size);
	char *sp = in ? strchr(in, ' ') : NULL;
	const char *method = "GET", *target = in;
	GithubRoute r = {};
	char *p = NULL, *again = NULL;

	if (!in)
		return 0;
	if (sp) {
		*sp = '\0';
		method = in;
		target = sp + 1;
	}
	if (github_path_normalize(target, &p) == 0) {
		check(p[0] == '/' && !strchr(p, '#') && !has_dot_segment(p));
		check(github_path_normalize(p, &again) == 0 && strcmp(again, p) == 0);
		free(again);
	}
	if (github_route_classify(method, target, &r) == 0) {
		check(p && strcmp(r.path, p) == 0);
		check(strncmp(r.requested, "github:read:", 12) == 0 ||
		      strncmp(r.requested, "github:write:", 13) == 0);
		check(capability_is_well_formed(r.requested, strlen(r.requested)));
		free(github_denial_not_covered(r.requested));
		github_route_done(&r);
	}
	free(github_denial_no_route(method, target));
	free(p);
	free(in);
	return 0;
}
