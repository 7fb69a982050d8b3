/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Who is who for the semantic-fs daemon: the uid a connection's SO_PEERCRED names, or a
 * file's owner, mapped to an app name through the file berth-init writes
 * (docs/context.md):
 *
 *   {"schema": 1, "apps": [{"uid": 10000, "name": "filesystem", "read": true}, ...]}
 *
 * "read" (default true) says whether that app's policy lets it read /context; an app
 * without it gets no query answers. uid 0 is "root"; a uid in no entry is "uid-<n>".
 * What a client says it is never enters here.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SFS_APPS_FILE_MAX (64 * 1024)
/* SPEC 9.2: at most 64 apps in one VM. */
#define SFS_APPS_MAX 64
#define SFS_IDENTITY_MAX 72

typedef struct SfsApp {
	uid_t uid;
	char name[65];
	bool read;
} SfsApp;

typedef struct SfsApps {
	SfsApp v[SFS_APPS_MAX];
	size_t n;
} SfsApps;

/*
 * sfs_apps_parse() - decode the file's @len bytes into @ret. Returns 0, or -EINVAL with
 * the reason in @err: not the shape above, a name that is not [a-z0-9-] (1 to 64), a uid
 * of 0 or given twice, more than SFS_APPS_MAX entries.
 */
int sfs_apps_parse(const char *buf, size_t len, SfsApps *ret, char *err, size_t errlen);

/* Load @path (at most SFS_APPS_FILE_MAX bytes). Returns 0 or -errno/-EINVAL with @err. */
int sfs_apps_load(const char *path, SfsApps *ret, char *err, size_t errlen);

/* The entry of @uid, or NULL. */
const SfsApp *sfs_apps_find(const SfsApps *apps, uid_t uid);

/* The name @uid goes by: the app's name, "root", or "uid-<n>". */
void sfs_apps_identity(const SfsApps *apps, uid_t uid, char out[static SFS_IDENTITY_MAX]);
