/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The /context index: an SQLite database (Debian's libsqlite3) with one row per file and
 * an FTS5 table over its path, task, related apps and text, ranked with FTS5's bm25.
 *
 * The files are the truth and the index follows them: sfs_index_sync() walks the context
 * root (without following a link, hidden names skipped) and re-reads what changed, so a
 * file written by any app is found, tagged or not, and a removed one is forgotten. What
 * only the index holds is a file's tags (task, related apps) and when it was first seen.
 *
 * Attribution: a file's created_by is the app whose uid owns it (the kernel's record of
 * who created it), mapped through SfsApps; it is recomputed at every sync, and when the
 * owner changes (another app replaced the file) the tags are dropped with it.
 *
 * Crash safety: WAL with synchronous=FULL (a committed tag is on the disk), one
 * transaction per sync or tag, and an index that fails its check at open is moved aside
 * and rebuilt from the files (its tags are lost; said on stderr).
 */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "apps.h"

/* Files indexed; more are left out of the index (and said so once per sync). */
#define SFS_FILES_MAX 10000
/* Directory entries one walk looks at (files, directories, anything): a tree of empty
 * directories costs a walk no more than this. */
#define SFS_WALK_ENTRIES_MAX 100000
/* Text read from one file; the rest of a longer file is not indexed. */
#define SFS_FILE_TEXT_MAX (256 * 1024)
/* Text indexed over all files; past it files are indexed by name and tags only. */
#define SFS_TEXT_TOTAL_MAX (64 * 1024 * 1024)
/* Rows looked at for one query before giving up on finding @limit the caller may read. */
#define SFS_QUERY_SCAN_MAX 2000
/* SQLite's own heap. */
#define SFS_SQLITE_HEAP_MAX (128LL * 1024 * 1024)
#define SFS_INDEX_DB "index.sqlite3"

typedef struct SfsIndex SfsIndex;

/* The caller of a query, as the kernel names it, and whether DAC lets it read a file. */
typedef struct SfsCaller {
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	size_t n_groups;
	bool may_read; /* its policy lets it read /context (SfsApp.read) */
	char name[SFS_IDENTITY_MAX];
} SfsCaller;

typedef struct SfsSyncStats {
	unsigned files, updated, removed, skipped, entries;
} SfsSyncStats;

/*
 * sfs_index_open() - open (or create) @dir/SFS_INDEX_DB for the tree at @context_fd
 * (borrowed; must stay open), attributing with @apps (borrowed). Returns 0 or -errno with
 * the reason in @err.
 */
int sfs_index_open(const char *dir, int context_fd, const SfsApps *apps, SfsIndex **ret, char *err,
		   size_t errlen);
void sfs_index_close(SfsIndex *x);

/* Bring the index in line with the tree. Returns 0 or -errno (-EIO: SQLite failed). */
int sfs_index_sync(SfsIndex *x, SfsSyncStats *ret);

/*
 * sfs_index_tag() - set @path's task (NULL: keep it) and related apps (@has_related false:
 * keep them) for @caller, which must own the file or be root. @path is relative and
 * normalised (sfs_path_normalize()). Returns 0 and the file's entry in *@ret, or -ENOENT,
 * -EISDIR/-EINVAL (not a regular file), -EACCES (not the caller's), -EIO, with the
 * peer's message in @err.
 */
int sfs_index_tag(SfsIndex *x, const SfsCaller *caller, const char *path, const char *task,
		  char *const *related, size_t n_related, bool has_related, json_t **ret, char *err,
		  size_t errlen);

/*
 * sfs_index_query() - up to @limit entries matching @match (sfs_query_match(); "" lists
 * the newest first), best first, only files @caller may read by the kernel's DAC rules
 * (each directory searchable, the file readable for its uid and groups). Returns 0 and a
 * JSON array in *@ret, or -EIO.
 */
int sfs_index_query(SfsIndex *x, const SfsCaller *caller, const char *match, unsigned limit,
		    json_t **ret);

/* Whether @caller may read the file @path beneath the root by DAC (root: always). */
bool sfs_caller_may_read(int context_fd, const SfsCaller *caller, const char *path);
