/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What a request to the GitHub API asks for (SPEC 6.2, docs/github.md): the path
 * normalised, matched against an explicit route table, and turned into the capability
 * github:<action>:<scope> that a declared github: capability must cover. A path no route
 * matches asks for nothing a declaration could cover: it is denied. Pure functions; libc
 * and the capability module only.
 *
 * Normalisation, per segment of the path (the part before the first '?'):
 *   - the segment is percent-decoded to see what it is: a bad escape ('%' not followed by
 *     two hex digits), bytes that are not UTF-8, a NUL or another control character, a
 *     line separator (U+2028, U+2029), or a '/' or '\' once decoded, and there is no route;
 *   - an empty segment and "." are dropped; ".." drops the segment before it, and with
 *     none left (above the root) there is no route;
 *   - every other segment is kept as it was written, escapes and all, so the path that
 *     goes upstream is the one that was checked, with no dot segment left for GitHub to
 *     resolve differently.
 * A target that does not start with '/', or that holds a '#', has no route either.
 *
 * Routes, first match, over the decoded segments:
 *   /repos/o/r -> repos          /repos/o/r/<sub>...  -> <sub>
 *   /user      -> user           /user/<sub>...       -> user:<sub>
 *   /users/x   -> users          /users/x/<sub>...    -> users:<sub>
 *   /orgs/x    -> orgs           /orgs/x/<sub>...     -> orgs:<sub>
 *   /gists...  -> gists          /notifications...    -> notifications
 *   /search/<kind> -> search:<kind>
 * The action is "read" for GET and HEAD, "write" for every other method.
 */

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

#define GITHUB_API_HOST "api.github.com"
#define GITHUB_API_PORT 443

typedef struct GithubRoute {
	char *path;	 /* the normalised path and the query, as it goes upstream */
	char *requested; /* github:<action>:<scope> */
} GithubRoute;

void github_route_done(GithubRoute *r);

/*
 * github_path_normalize() - the normalised form of the origin-form @target (path and
 * query), as above. Returns 0 and a malloc()ed path in *@ret, -ENOENT when there is no
 * route (a bad escape, an encoded separator, ".." above the root, ...), or -ENOMEM.
 */
int github_path_normalize(const char *target, char **ret);

/*
 * github_route_classify() - what @method @target asks for. Returns 0 and fills @ret,
 * -ENOENT when no route covers it, or -ENOMEM.
 */
int github_route_classify(const char *method, const char *target, GithubRoute *ret);

/* Does a github: capability declared in @policy cover @requested (capability_matches())?
 * A NULL policy (one that could not be read) covers nothing. */
bool github_policy_allows(const CapabilityPolicy *policy, const char *requested);

/* How many github: capabilities @policy declares. */
size_t github_policy_count(const CapabilityPolicy *policy);

/*
 * The JSON bodies of the two denials, word for word as SPEC 6.2 has them, malloc()ed:
 *   {"message":"denied: no route covers <METHOD> <target> — this broker maps paths to capabilities explicitly and denies by default"}
 *   {"message":"denied: no declared capability covers <requested>"}
 * NULL on OOM.
 */
char *github_denial_no_route(const char *method, const char *target);
char *github_denial_not_covered(const char *requested);
