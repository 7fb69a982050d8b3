/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The audit lines of SPEC 4.6: one compact JSON object per line, keys in the SPEC's order,
 * no prefix. Each function returns a malloc()ed line ending in "\n", or NULL on OOM, so
 * that the lines can be built before the irreversible sequence and only written during it.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "inputs.h"
#include "policy.h"
#include "ruleset.h"

char *audit_policy_applied(const char *boot_id, const CapabilityPolicy *p, RulesetStatus status,
			   int64_t timestamp);
char *audit_capabilities_dropped(const char *boot_id, const char *app, bool dropped,
				 int64_t timestamp);
/* @event: "namespace_seccomp_filter" or "network_seccomp_filter". */
char *audit_seccomp(const char *event, const char *boot_id, const char *app, bool applied,
		    const char *detail, int64_t timestamp);
char *audit_app_uid(const char *boot_id, const char *app, uid_t uid, gid_t gid, bool dropped,
		    const char *detail, int64_t timestamp);
char *audit_enforcement_refused(const char *app, const char *reason, int64_t timestamp);
