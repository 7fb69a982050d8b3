/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * mkdir_beneath() - create @path (absolute) as mkdir -p would, from "/" one component at
 * a time, never through a symbolic link: an existing component that is a link, or not a
 * directory, fails. For root creating paths in directories an app can write (a link the
 * app left there must not lead root anywhere else).
 * Components it creates get @mode (less the umask) and, when @uid is not (uid_t)-1, the
 * owner @uid:@gid.
 * Returns an O_PATH descriptor of @path, with *@ret_created (may be NULL) telling whether
 * its last component was made now; or -errno (-ELOOP for a link, -ENOTDIR) with the
 * component that failed in @ret_bad (@badlen bytes; may be NULL).
 */
int mkdir_beneath(const char *path, mode_t mode, uid_t uid, gid_t gid, bool *ret_created,
		  char *ret_bad, size_t badlen);
