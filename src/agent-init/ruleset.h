/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The Landlock half of agent-init (SPEC 4.4): write paths checked and created, the ruleset
 * built for the ABI the kernel speaks, and its status worked out before anything is
 * restricted. Logging: the warnings SPEC 4.4 names go to stderr with the "[agent-init] "
 * prefix, as they happen.
 */

#include <stdint.h>

#include "inputs.h"
#include "policy.h"

typedef enum RulesetStatus {
	RULESET_NOT_ENFORCED,
	RULESET_PARTIALLY_ENFORCED,
	RULESET_FULLY_ENFORCED,
	_RULESET_STATUS_MAX,
	_RULESET_STATUS_INVALID = -22,
} RulesetStatus;

/* "NotEnforced", "PartiallyEnforced", "FullyEnforced". */
const char *ruleset_status_to_string(RulesetStatus s);

typedef struct Ruleset {
	int fd;		      /* the ruleset, -EBADF when there is none (ABI 0) */
	int abi;	      /* the ABI it was built for */
	RulesetStatus status; /* what landlock_restrict_self() on @fd will give */
	uint64_t handled_fs, handled_net, scoped;
	char *missing; /* the rights the policy needs that this ABI lacks, ", "-joined, or NULL */
	PolicyStrings granted_write; /* the write paths that got a rule, in policy order */
} Ruleset;

void ruleset_done(Ruleset *r);

/*
 * ruleset_abi() - the Landlock ABI to build for: the kernel's, 0 when it has none.
 * A build with -DAGENT_INIT_TEST_HOOKS also honours BERTH_TEST_LANDLOCK_ABI=<n> as a
 * ceiling; the production build does not contain that code at all.
 */
int ruleset_abi(void);

/*
 * ruleset_build() - everything SPEC 4.4 asks for short of landlock_restrict_self().
 * @policy: the validated policy.
 * @id: the app identity; directories created for write paths are given to it.
 * @abi: from ruleset_abi().
 * @ret: on success the ruleset (fd, status, what was granted); status NotEnforced and no fd
 *       when @abi is 0. The calling process is not restricted.
 * @reterr_message: on failure a malloc()ed reason.
 * Write paths outside the allowed set are refused with the SPEC warning and skipped; missing
 * ones are created as root (without following symlinks) and chowned; read paths are never
 * created, and a missing one is skipped with the SPEC warning. SECURITY: a write path other
 * than the three device paths is opened without following any symlink, so that a link
 * planted in a persistent directory cannot redirect a grant.
 * Returns 0, or -errno when the ruleset cannot be made (then nothing is enforced).
 */
int ruleset_build(const CapabilityPolicy *policy, const AppIdentity *id, int abi, Ruleset *ret,
		  char **reterr_message);
