/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * What berth-init prepares so that agent-init can confine each app: the compiled
 * capability policy (from the app's berth.yml, hashed for attestation), the declared write
 * paths created before any app starts, and the app's cgroup with its limits read back.
 */

#define POLICY_DIR "/run/berth/policy"
#define CGROUP_ROOT "/sys/fs/cgroup"

typedef struct AppConfinement {
	char policy_path[96];
	char policy_sha256[65];
	json_t *policy;	       /* the compiled policy */
	char cgroup[128];      /* /sys/fs/cgroup/berth/apps/<name>, "" without cgroups */
	json_t *cgroup_limits; /* as read back */
} AppConfinement;

/*
 * confine_compile_policy() - read @dir/berth.yml, compile the policy of app @name (uid/gid
 * @uid) into POLICY_DIR/<name>.json (root:<gid> 0640) and hash it. Warnings and the
 * summary go to the app's log. On failure returns -errno with a reason in @why.
 */
int confine_compile_policy(const char *name, const char *dir, uid_t uid, AppConfinement *ret,
			   char *why, size_t whylen);

/* Create the declared write paths of all apps before any starts: a path one app declares
 * is that app's (0755); one several declare is root:berth 2775. */
int confine_precreate(const char *const *names, const AppConfinement *const *apps,
		      const uid_t *uids, size_t n);

/* The cgroup tree: /berth/daemons (berth-init) and /berth/apps, controllers delegated. */
int confine_cgroups_setup(void);
/* /berth/apps/<name> with the policy's cgroupLimits, read back; -EPERM with @why when a
 * limit did not apply (the app is then refused in strict mode). */
int confine_app_cgroup(const char *name, AppConfinement *c, char *why, size_t whylen);

void confine_done(AppConfinement *c);
