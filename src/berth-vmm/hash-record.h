/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/*
 * A digest remembered while its file stays unchanged (docs/warm-start.md, "Remembered
 * digests").
 *
 * Hashing the root image, the kernel and a snapshot's memory again on every start is, on a
 * small host, most of a restore's CPU. A file that matched its pin or its snapshot's record
 * is remembered by its device and inode with its size, modification and change times; while
 * all of them are the same, it holds the bytes it held when it was hashed. Writing to a file,
 * truncating it, renaming another over it or changing its times or mode all move its change
 * time, which no one but root can set: such a file is hashed in full again.
 *
 * SECURITY: a record is trusted only from a directory and file of the caller's own uid that
 * no one else may write, reached without following a link (berth_vm_dir()/hashed, whatever
 * the artifacts' directory). A file changed within HASH_RECORD_MARGIN_SEC before it was
 * opened is not remembered: a write in the same tick of the file system's clock may leave
 * its times as they were.
 */

#define HASH_RECORD_MARGIN_SEC 2
/* Records kept in a directory at most: the least recently used go first. */
#define HASH_RECORD_MAX 64

/* The records' directory, berth_vm_dir()/hashed (malloc'd), or NULL when out of memory. */
char *hash_record_dir(void);

/* What a file was when it was opened to be hashed. */
typedef struct HashStamp {
	struct stat st;
	struct timespec taken; /* CLOCK_REALTIME */
	bool valid;
} HashStamp;

/* Stamp @fd now, before it is read. Returns 0 or a negative errno (the stamp is not valid). */
int hash_stamp_take(int fd, HashStamp *ret);

/* Whether @fd is still the file stamped in @s, unchanged: after reading a file trusted by its
 * record, that nothing changed it while it was read. */
bool hash_stamp_unchanged(int fd, const HashStamp *s);

/*
 * hash_record_holds() - whether @dir remembers the file stamped in @s, as it is now, as
 * having the digest @sha256 of kind @kind (how it was computed: "sha256",
 * "chunked-64KiB-sha256"). Anything missing, unreadable, not the caller's or different is
 * false: the caller hashes the file. A record that holds is marked as used.
 */
bool hash_record_holds(const char *dir, const HashStamp *s, const char *kind, const char *sha256);

/*
 * hash_record_save() - remember that the file @fd, stamped in @before and since hashed, has
 * the digest @sha256 of @kind. Returns 0; -ESTALE when @fd changed since @before or had
 * changed too shortly before it (nothing saved); -EPERM when @dir is not the caller's alone;
 * -EINVAL for a bad @kind or @sha256; another negative errno when it cannot be written. @dir
 * is made (0700) when missing.
 */
int hash_record_save(const char *dir, int fd, const HashStamp *before, const char *kind,
		     const char *sha256);
