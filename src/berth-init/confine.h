/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "policy.h"

/*
 * What berth-init prepares so that agent-init can confine each app: the capability policy
 * (compiled on the host from the app's berth.yml, checked here and written as the one file
 * agent-init reads, hashed for attestation), the declared write paths created before any
 * app starts, and the app's cgroup with its limits read back.
 */

#define POLICY_DIR "/run/berth/policy"
#define CGROUP_ROOT "/sys/fs/cgroup"

typedef struct AppConfinement {
	char policy_path[96];
	char policy_sha256[65];
	CapabilityPolicy *policy; /* as agent-init will read it */
	char cgroup[128];	  /* /sys/fs/cgroup/berth/apps/<name>, "" without cgroups */
	json_t *cgroup_limits;	  /* as read back */
} AppConfinement;

/*
 * confine_install_policy() - check @policy (the boot plan's, a JSON object) with the one
 * policy reader, make sure it is app @name's, write it to POLICY_DIR/<name>.json
 * (root:<@uid> 0640) with the one writer, and hash the file. @warnings (the compiler's,
 * may be NULL) and the summary go to the app's log. On failure returns -errno with a
 * reason in @why: that app is refused, not the VM.
 */
int confine_install_policy(const char *name, uid_t uid, const json_t *policy,
			   const json_t *warnings, AppConfinement *ret, char *why, size_t whylen);

#define CONFINE_WHY_MAX 512

/* Create the declared write paths of all apps before any starts: a path one app declares
 * is that app's (0755); one several declare is root:berth 2775. No symlink is followed on
 * the way. @ret_why[i] is "" for app i, or why one of its paths could not be made (then
 * that app must be refused). Returns 0 or -ENOMEM. */
int confine_precreate(const char *const *names, const AppConfinement *const *apps,
		      const uid_t *uids, size_t n, char (*ret_why)[CONFINE_WHY_MAX]);

/* The cgroup tree: /berth/daemons (berth-init) and /berth/apps, controllers delegated. */
int confine_cgroups_setup(void);
/* /berth/static-keys: empty, with a CPU quota, so that the scheduler's bandwidth control
 * (a static key that counts the cgroups with a quota) stays on whatever the apps' cgroups
 * get or lose (kernel-keys.h). 0 or -errno. */
int confine_cgroup_hold_cpu_quota(void);
/* /berth/apps/<name> with the policy's cgroupLimits, read back; -EPERM with @why when a
 * limit did not apply (the app is then refused in strict mode). */
int confine_app_cgroup(const char *name, AppConfinement *c, char *why, size_t whylen);
