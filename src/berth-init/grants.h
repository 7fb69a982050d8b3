/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "policy.h"

/*
 * Calls between the apps of a VM (SPEC 9.1, 9.2), granted by the kernel's DAC alone:
 *
 *   - every app's own socket, /run/berth/<app>/rpc.sock, is 0600: no other app may
 *     connect to it (EACCES);
 *   - app:invoke:<target> in the caller's berth.yml makes /run/berth/<target>/peers/<caller>
 *     (2710, the target's uid, the caller's gid), where the target's runtime serves the
 *     caller a socket of its own (0660): only the caller's gid reaches it, and the target
 *     knows who calls. Nothing else grants a call; a grant is not transitive;
 *   - the app that declares governs: true (at most one; berth-vmm refuses two) gets such
 *     a directory for every other app, whose runtimes ask its evaluate_action before each
 *     call and refuse the call when it cannot be asked (fail closed).
 */

typedef struct GrantApp {
	const char *name;
	uid_t uid; /* and gid */
	const CapabilityPolicy *policy;
	bool governs;
} GrantApp;

/* Make every app's /run/berth/<app>/peers (0711) and the grants; a target that is not in
 * the VM is warned about in the caller's log and ignored. *@ret_governor is the index of
 * the governing app, or -1. Returns 0 or -errno. */
int grants_setup(const GrantApp *apps, size_t n, int *ret_governor);
