/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "digest.h"

/*
 * The bundler's inputs, stamped without reading them: the sha256 of one line per file
 * (path, type, size, mtime and ctime in ns, inode, a link's target) under each of @paths,
 * in sorted order and skipping .git, and of the environment variables @env_names. The same
 * stamp means the bundler would read the same bytes, so its earlier output can be used
 * without running it (dev-bundle.c). A tree over BUNDLE_STAMP_ENTRIES_MAX entries is
 * -E2BIG: the bundler then just runs.
 */

#define BUNDLE_STAMP_ENTRIES_MAX 200000
#define BUNDLE_STAMP_DEPTH_MAX 64
/* *ret_racy: a file's ctime falls in the clock tick in which the walk began, so it may
 * change again with the same times; such a stamp is not worth recording (as git treats a
 * racily clean index entry). */
int bundle_stamp(const char *const *paths, const char *const *env_names,
		 char ret_hex[SHA256_HEX_LEN + 1], bool *ret_racy);
