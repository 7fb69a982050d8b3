/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

/*
 * An app share: a directory on the host, packed as a small read-only erofs image that
 * the guest mounts (the cloud kernel has no 9p and virtiofsd is not packaged). Its
 * measurement is the sha256 of the sorted "<sha256>  <path>" listing of its files.
 */

#define SHARE_FILES_MAX 20000
#define SHARE_BYTES_MAX (512ULL * 1024 * 1024)
#define SHARE_DEPTH_MAX 64

typedef struct ShareDigest {
	char tree_sha256[65];
	unsigned files;
	uint64_t bytes;
} ShareDigest;

/*
 * Measure @dir: directories and regular files only, nothing followed. A symlink is refused
 * with -ELOOP, a FIFO, socket or device with -EBADFD, a file with more than one name (a
 * hard link, whose other names may lie outside the share) with -EMLINK, too many files,
 * bytes or levels with -E2BIG; @err says which path and why.
 */
int share_digest(const char *dir, ShareDigest *ret, char *err, size_t errlen);

/* Pack @dir into the erofs image @image with fixed time, owner and UUID and no extended
 * attributes, after the same checks as share_digest() (and the same errors). */
int share_pack(const char *dir, const char *image, char *err, size_t errlen);
