/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * agent-init's inputs besides the policy file (which policy.h reads): the identity and the
 * enforcement setting from the environment (SPEC 4.1), parsed and checked before anything
 * is restricted. Non-logging.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define APP_GROUPS_MAX 64

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
