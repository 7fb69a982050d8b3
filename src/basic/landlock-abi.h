/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Which Landlock ABI version brings which access rights and scopes, in one table, for
 * everything that builds a ruleset: berth-vmm's host confinement, agent-init's app
 * confinement, and berth doctor saying what a host's kernel lacks. A ruleset that names a
 * right its kernel does not know is refused with EINVAL, so each is cut down to the
 * running kernel's ABI here first. libc only: agent-init links it statically.
 */

#include <stddef.h>
#include <stdint.h>

#include "missing-landlock.h"

/* The newest ABI the table knows; a newer kernel gets what this one has. */
#define LANDLOCK_ABI_LAST 9
/* ABI 1's file system rights: bits 0 (execute) to 12 (make symlink). */
#define LANDLOCK_ABI1_FS ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1)

typedef struct LandlockAbi {
	int abi;
	const char *kernel;	  /* the first Linux release that speaks it */
	uint64_t fs, net, scoped; /* what it adds to the ABI before it */
	const char *what;	  /* those, for messages; NULL when it adds none */
} LandlockAbi;

/* The table, ABI 1 first, one entry per version up to LANDLOCK_ABI_LAST. */
const LandlockAbi *landlock_abi_table(size_t *ret_n);

/* landlock_abi_rights() - every right and scope a kernel speaking @abi can handle. */
void landlock_abi_rights(int abi, struct landlock_ruleset_attr_v6 *ret);

/*
 * landlock_abi_restrict() - keep in @attr only what a kernel speaking @abi can handle:
 * nothing for @abi <= 0, everything the table knows past LANDLOCK_ABI_LAST.
 */
void landlock_abi_restrict(struct landlock_ruleset_attr_v6 *attr, int abi);

/*
 * landlock_abi_missing() - what @want needs that a kernel speaking @abi lacks, for a
 * message: "truncate rules (ABI 3, Linux 6.2), TCP rules (ABI 4, Linux 6.7)", "" when
 * nothing. @buf is always terminated; the text is cut short when @size is too small.
 */
void landlock_abi_missing(int abi, const struct landlock_ruleset_attr_v6 *want, char *buf,
			  size_t size);
