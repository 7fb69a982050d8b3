/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * agent-init's inputs (SPEC 4.1, 4.2): the policy file and the identity environment, parsed
 * and checked before anything is restricted. Non-logging.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define APP_GROUPS_MAX 64

/* A policy file, validated. The arrays always exist (empty when the file left them out). */
typedef struct AgentPolicy {
	json_t *doc; /* owns everything below */
	const char *app_name;
	json_t *declared;      /* strings */
	json_t *write_paths;   /* strings without NUL */
	json_t *read_paths;    /* strings without NUL */
	json_t *network_ports; /* integers 1-65535 */
	json_t *bind_ports;    /* integers 1-65535 */
	json_t *mesh_peers;    /* strings */
	bool network_unrestricted;
} AgentPolicy;

void agent_policy_done(AgentPolicy *p);

/*
 * agent_policy_parse() - parse and check a policy document.
 * @text, @len: the file's bytes.
 * @ret: filled on success; release with agent_policy_done().
 * @reterr_message: on failure a malloc()ed reason, e.g. "writePaths[2] is not a string".
 * The checks: an object; appName a name of 1-64 characters from [A-Za-z0-9._-] other than
 * "." and ".."; writePaths present; every list an array of at most POLICY_LIST_MAX entries
 * of the right type (paths without NUL and shorter than PATH_MAX, ports 1-65535);
 * networkUnrestricted a boolean; cgroupLimits an object (not used here); any other key is
 * an error. Duplicate keys are refused at parse time.
 * Returns 0, -EINVAL for a bad document, or -ENOMEM.
 */
int agent_policy_parse(const char *text, size_t len, AgentPolicy *ret, char **reterr_message);

/* The app identity from BERTH_APP_UID, BERTH_APP_GID, BERTH_APP_SUPPLEMENTARY_GIDS. */
typedef struct AppIdentity {
	bool set; /* false: stay root */
	uid_t uid;
	gid_t gid;
	gid_t groups[APP_GROUPS_MAX]; /* for setgroups(): gid first, then the supplementary */
	size_t n_groups;
	gid_t supplementary[APP_GROUPS_MAX]; /* as given, parsed, without 0 */
	size_t n_supplementary;
} AppIdentity;

/*
 * app_identity_parse() - SPEC 4.1: a uid or gid that is missing, not a decimal number, 0 or
 * (uid_t)-1 means no identity (stay root). Supplementary entries are split on ",", trimmed;
 * the unparseable and 0 ones dropped, duplicates kept once, at most APP_GROUPS_MAX - 1.
 * Any argument may be NULL.
 */
void app_identity_parse(const char *uid, const char *gid, const char *supplementary,
			AppIdentity *ret);

/* BERTH_REQUIRE_ENFORCEMENT: "1" or "true". */
bool enforcement_required(const char *value);
