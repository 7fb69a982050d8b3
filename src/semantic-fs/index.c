/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "index.h"
#include "macros.h"
#include "request.h"
#include "utf8.h"

#define SCHEMA_VERSION 1
/* Column weights for bm25: a word in the name or the task says more than one in the text. */
#define BM25_WEIGHTS "4.0, 3.0, 2.0, 1.0"

struct SfsIndex {
	sqlite3 *db;
	int context_fd;
	const SfsApps *apps;
	long long text_total;
	long long files;
	/* The rows a walk found, so that it can forget the others without writing the
	 * ones it found: an unchanged tree costs a walk and no write. */
	long long *seen;
	size_t n_seen, cap_seen;
	bool walking;
	/* The walk did not see the whole tree: what it did not see is kept, not forgotten. */
	bool partial;
	bool said_full;
};

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS files("
	" id INTEGER PRIMARY KEY,"
	" path TEXT NOT NULL UNIQUE,"
	" owner_uid INTEGER NOT NULL,"
	" created_by TEXT NOT NULL,"
	" task TEXT NOT NULL DEFAULT '',"
	" related TEXT NOT NULL DEFAULT '[]',"
	" tagged_by TEXT,"
	" created_at INTEGER NOT NULL,"
	" updated_at INTEGER NOT NULL,"
	" mode INTEGER NOT NULL, gid INTEGER NOT NULL,"
	" ino INTEGER NOT NULL, size INTEGER NOT NULL,"
	" mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,"
	" text_bytes INTEGER NOT NULL DEFAULT 0);"
	"CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(path, task, related, body,"
	" tokenize = 'unicode61 remove_diacritics 2');";

static void sqlite3_closep(sqlite3 **db)
{
	if (*db)
		sqlite3_close_v2(*db);
}

static void stmt_freep(sqlite3_stmt **s)
{
	sqlite3_finalize(*s);
}
#define _cleanup_stmt_ _cleanup_(stmt_freep)

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

static int prepare(SfsIndex *x, const char *sql, sqlite3_stmt **ret)
{
	return sqlite3_prepare_v2(x->db, sql, -1, ret, NULL) == SQLITE_OK ? 0 : -EIO;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long ts_ns(struct statx_timestamp t)
{
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long ts_ms(struct statx_timestamp t)
{
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static long long query_int(SfsIndex *x, const char *sql)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (prepare(x, sql, &s) < 0 || sqlite3_step(s) != SQLITE_ROW)
		return 0;
	return sqlite3_column_int64(s, 0);
}

/* Is the database there whole? A failed check, or one that cannot be read at all, is no. */
static bool db_sound(sqlite3 *db)
{
	sqlite3_stmt *s = NULL;
	bool ok = false;

	if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		ok = streq((const char *)sqlite3_column_text(s, 0) ?: "", "ok");
	sqlite3_finalize(s);
	return ok;
}

static int open_db(const char *path, sqlite3 **ret)
{
	_cleanup_(sqlite3_closep) sqlite3 *db = NULL;
	int k = sqlite3_open_v2(path, &db,
				SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW |
					SQLITE_OPEN_NOMUTEX,
				NULL);

	if (k != SQLITE_OK)
		return -EIO;
	sqlite3_extended_result_codes(db, 1);
	/* WAL: a crash mid-write leaves the last commit; FULL: each commit is fsynced. */
	if (exec(db, "PRAGMA journal_mode = WAL") < 0 ||
	    exec(db, "PRAGMA synchronous = FULL") < 0 || !db_sound(db) || exec(db, schema_sql) < 0)
		return -EIO;
	*ret = TAKE_PTR(db);
	return 0;
}

/* A broken index is moved aside (never deleted: someone may want to look) and rebuilt. */
static void move_aside(const char *path)
{
	static const char *const suffixes[] = {"", "-wal", "-shm"};
	char from[4200], to[4300];
	long long t = now_ms();

	for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
		snprintf(from, sizeof(from), "%s%s", path, suffixes[i]);
		snprintf(to, sizeof(to), "%s.broken-%lld%s", path, t, suffixes[i]);
		(void)rename(from, to);
	}
}

int sfs_index_open(const char *dir, int context_fd, const SfsApps *apps, SfsIndex **ret, char *err,
		   size_t errlen)
{
	_cleanup_free_ SfsIndex *x = NULL;
	char path[4096];
	int k;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, SFS_INDEX_DB) >= sizeof(path)) {
		snprintf(err, errlen, "index directory path too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	(void)sqlite3_hard_heap_limit64(SFS_SQLITE_HEAP_MAX);
	k = open_db(path, &x->db);
	if (k < 0) {
		fprintf(stderr,
			"[semantic-fs] WARNING: the index %s is damaged: moved aside, "
			"rebuilding it from the files (their tags are lost)\n",
			path);
		move_aside(path);
		k = open_db(path, &x->db);
	}
	if (k < 0) {
		snprintf(err, errlen, "cannot open the index %s", path);
		return k;
	}
	(void)exec(x->db, "PRAGMA user_version = 1");
	x->context_fd = context_fd;
	x->apps = apps;
	x->text_total = query_int(x, "SELECT COALESCE(SUM(text_bytes), 0) FROM files");
	x->files = query_int(x, "SELECT COUNT(*) FROM files");
	*ret = TAKE_PTR(x);
	return 0;
}

void sfs_index_close(SfsIndex *x)
{
	if (!x)
		return;
	sqlite3_close_v2(x->db);
	free(x->seen);
	free(x);
}

/* --- reading a file ------------------------------------------------------------------ */

/*
 * At most @max bytes of the text of @name in @dfd, into *@ret (NULL when it is not text:
 * a NUL byte, or not UTF-8). The open does not follow a link and does not wait on a FIFO
 * swapped in since the walk saw a file; what is opened must be that file.
 */
static int read_text(int dfd, const char *name, const struct statx *stx, size_t max, char **ret,
		     size_t *ret_len)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t n = 0;

	*ret = NULL;
	*ret_len = 0;
	if (max == 0)
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_ino != stx->stx_ino)
		return -ESTALE;
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	while (n < max) {
		ssize_t k = read(fd, buf + n, max - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (memchr(buf, 0, n))
		return 0;
	/* A cut at the cap may split a character: back off to its start. */
	for (size_t back = 0; back < 4 && n > 0 && !utf8_valid(buf, n); back++)
		n--;
	if (!utf8_valid(buf, n))
		return 0;
	buf[n] = 0;
	*ret = TAKE_PTR(buf);
	*ret_len = n;
	return 0;
}

/* "a b c" from a JSON array text. */
static char *related_words(const char *json_text)
{
	_cleanup_(json_decrefp) json_t *a = json_loads(json_text, 0, NULL);
	size_t len = 1, i, o = 0;
	json_t *v;
	char *out;

	json_array_foreach(a, i, v)
		len += json_string_length(v) + 1;
	out = malloc(len);
	if (!out)
		return NULL;
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			continue;
		if (o > 0)
			out[o++] = ' ';
		memcpy(out + o, json_string_value(v), json_string_length(v));
		o += json_string_length(v);
	}
	out[o] = 0;
	return out;
}

static int fts_put(SfsIndex *x, long long id, const char *path, const char *task,
		   const char *related, const char *body, size_t body_len)
{
	_cleanup_stmt_ sqlite3_stmt *del = NULL, *ins = NULL;
	_cleanup_free_ char *words = related_words(related);

	if (!words)
		return -ENOMEM;
	if (prepare(x, "DELETE FROM fts WHERE rowid = ?1", &del) < 0 ||
	    prepare(x,
		    "INSERT INTO fts(rowid, path, task, related, body) VALUES(?1, ?2, ?3, ?4, ?5)",
		    &ins) < 0)
		return -EIO;
	sqlite3_bind_int64(del, 1, id);
	if (sqlite3_step(del) != SQLITE_DONE)
		return -EIO;
	sqlite3_bind_int64(ins, 1, id);
	sqlite3_bind_text(ins, 2, path, -1, SQLITE_STATIC);
	sqlite3_bind_text(ins, 3, task, -1, SQLITE_STATIC);
	sqlite3_bind_text(ins, 4, words, -1, SQLITE_STATIC);
	sqlite3_bind_text(ins, 5, body ?: "", body ? (int)body_len : 0, SQLITE_STATIC);
	return sqlite3_step(ins) == SQLITE_DONE ? 0 : -EIO;
}

typedef struct Row {
	long long id, owner, ino, size, mtime_ns, ctime_ns, text_bytes, created_at;
	char *task, *related;
} Row;

static void row_done(Row *r)
{
	free(r->task);
	free(r->related);
}

/* 1 and the row of @path, 0 when there is none, or -EIO. */
static int row_get(SfsIndex *x, const char *path, Row *ret)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int k;

	*ret = (Row){};
	if (prepare(x,
		    "SELECT id, owner_uid, ino, size, mtime_ns, ctime_ns, text_bytes, created_at,"
		    " task, related FROM files WHERE path = ?1",
		    &s) < 0)
		return -EIO;
	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	k = sqlite3_step(s);
	if (k == SQLITE_DONE)
		return 0;
	if (k != SQLITE_ROW)
		return -EIO;
	*ret = (Row){
		.id = sqlite3_column_int64(s, 0),
		.owner = sqlite3_column_int64(s, 1),
		.ino = sqlite3_column_int64(s, 2),
		.size = sqlite3_column_int64(s, 3),
		.mtime_ns = sqlite3_column_int64(s, 4),
		.ctime_ns = sqlite3_column_int64(s, 5),
		.text_bytes = sqlite3_column_int64(s, 6),
		.created_at = sqlite3_column_int64(s, 7),
		.task = strdup((const char *)sqlite3_column_text(s, 8) ?: ""),
		.related = strdup((const char *)sqlite3_column_text(s, 9) ?: "[]"),
	};
	if (!ret->task || !ret->related) {
		row_done(ret);
		return -ENOMEM;
	}
	return 1;
}

static int mark_seen(SfsIndex *x, long long id)
{
	if (!x->walking)
		return 0;
	if (x->n_seen == x->cap_seen) {
		size_t cap = MAX(x->cap_seen * 2, (size_t)256);
		long long *v = reallocarray(x->seen, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->seen = v;
		x->cap_seen = cap;
	}
	x->seen[x->n_seen++] = id;
	return 0;
}

/*
 * One regular file the walk (or a tag) found: @name in @dfd, @path from the root.
 * Returns 1 when it was (re)indexed, 0 when it was unchanged or left out, or -errno.
 */
static int sync_file(SfsIndex *x, int dfd, const char *name, const char *path,
		     const struct statx *stx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_(row_done) Row row = {};
	_cleanup_free_ char *text = NULL;
	char owner[SFS_IDENTITY_MAX];
	bool same_owner;
	size_t text_len = 0, room;
	long long created_at;
	int have, k;

	have = row_get(x, path, &row);
	if (have < 0)
		return have;
	if (have && row.owner == stx->stx_uid && row.ino == (long long)stx->stx_ino &&
	    row.size == (long long)stx->stx_size && row.mtime_ns == ts_ns(stx->stx_mtime) &&
	    row.ctime_ns == ts_ns(stx->stx_ctime))
		return mark_seen(x, row.id);
	if (!have && x->files >= SFS_FILES_MAX) {
		if (!x->said_full)
			fprintf(stderr,
				"[semantic-fs] WARNING: %d files indexed, the cap: "
				"newer files are left out\n",
				SFS_FILES_MAX);
		x->said_full = true;
		return 0;
	}
	room = (size_t)MAX(0LL, SFS_TEXT_TOTAL_MAX - (x->text_total - row.text_bytes));
	k = read_text(dfd, name, stx, MIN(room, (size_t)SFS_FILE_TEXT_MAX), &text, &text_len);
	/* Replaced or removed since the walk saw it (a durable write renames a new inode over
	 * it): left as it was, tags and all, for the next walk to see. */
	if (k == -ENOENT || k == -ESTALE || k == -ELOOP)
		return have ? mark_seen(x, row.id) : 0;
	if (k == -ENOMEM)
		return k;
	/* Any other failure to read (EACCES: not readable by this daemon) leaves the name
	 * and the tags searchable, without the text. */
	sfs_apps_identity(x->apps, stx->stx_uid, owner);
	same_owner = have && row.owner == stx->stx_uid;
	/* First seen: the file's birth if the filesystem keeps it. */
	created_at = same_owner			     ? row.created_at
		     : (stx->stx_mask & STATX_BTIME) ? ts_ms(stx->stx_btime)
						     : ts_ms(stx->stx_mtime);
	if (prepare(x,
		    have ? "UPDATE files SET owner_uid = ?2, created_by = ?3, created_at = ?4,"
			   " updated_at = ?5, mode = ?6, gid = ?7, ino = ?8, size = ?9,"
			   " mtime_ns = ?10, ctime_ns = ?11, text_bytes = ?12,"
			   " task = ?14, related = ?15, tagged_by = CASE WHEN ?16 THEN tagged_by END"
			   " WHERE path = ?1"
			 : "INSERT INTO files(path, owner_uid, created_by, created_at, updated_at,"
			   " mode, gid, ino, size, mtime_ns, ctime_ns, text_bytes, task, related)"
			   " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?14, ?15)",
		    &s) < 0)
		return -EIO;
	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, stx->stx_uid);
	sqlite3_bind_text(s, 3, owner, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, created_at);
	sqlite3_bind_int64(s, 5, ts_ms(stx->stx_mtime));
	sqlite3_bind_int64(s, 6, stx->stx_mode & 07777);
	sqlite3_bind_int64(s, 7, stx->stx_gid);
	sqlite3_bind_int64(s, 8, (long long)stx->stx_ino);
	sqlite3_bind_int64(s, 9, (long long)stx->stx_size);
	sqlite3_bind_int64(s, 10, ts_ns(stx->stx_mtime));
	sqlite3_bind_int64(s, 11, ts_ns(stx->stx_ctime));
	sqlite3_bind_int64(s, 12, (long long)text_len);
	/* Another owner means another file: the old one's tags are not the new one's. */
	sqlite3_bind_text(s, 14, same_owner ? row.task : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 15, same_owner ? row.related : "[]", -1, SQLITE_STATIC);
	if (have)
		sqlite3_bind_int(s, 16, same_owner);
	if (sqlite3_step(s) != SQLITE_DONE)
		return -EIO;
	if (!have) {
		row.id = sqlite3_last_insert_rowid(x->db);
		x->files++;
	}
	x->text_total += (long long)text_len - row.text_bytes;
	k = mark_seen(x, row.id);
	if (k < 0)
		return k;
	k = fts_put(x, row.id, path, same_owner ? row.task : "", same_owner ? row.related : "[]",
		    text, text_len);
	return k < 0 ? k : 1;
}

/* --- the walk -------------------------------------------------------------------------- */

static bool name_indexable(const char *name)
{
	size_t n = strlen(name);

	/* Hidden names: in-flight writes (writeFileDurable's ".<name>.<pid>...tmp"), and
	 * what a path in a request may not name anyway. */
	if (name[0] == '.' || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return false;
	return utf8_valid(name, n);
}

static int statx_at(int dfd, const char *name, struct statx *ret)
{
	return RET_NERRNO(statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
				STATX_BASIC_STATS | STATX_BTIME, ret));
}

static int walk(SfsIndex *x, int dfd, const char *prefix, unsigned depth, SfsSyncStats *st)
{
	_cleanup_close_ int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -EBADF;
	rewinddir(d);
	while (r >= 0 && (de = readdir(d))) {
		char path[SFS_PATH_MAX + 1];
		struct statx stx;
		int k;

		if (!name_indexable(de->d_name))
			continue;
		if (++st->entries > SFS_WALK_ENTRIES_MAX) {
			if (st->entries == SFS_WALK_ENTRIES_MAX + 1)
				fprintf(stderr,
					"[semantic-fs] WARNING: the walk stopped at %d entries, the cap\n",
					SFS_WALK_ENTRIES_MAX);
			x->partial = true;
			break;
		}
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "",
				     de->d_name) >= sizeof(path))
			continue;
		if (statx_at(dfd, de->d_name, &stx) < 0)
			continue;
		if (S_ISDIR(stx.stx_mode) && depth + 1 < SFS_PATH_DEPTH_MAX) {
			_cleanup_close_ int sub = openat(
				dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			/* A directory this daemon may not read is one it cannot index; one it
			 * could not open for another reason (out of fds) is only not seen now. */
			if (sub >= 0)
				r = walk(x, sub, path, depth + 1, st);
			else if (errno != EACCES && errno != ENOENT && errno != ENOTDIR &&
				 errno != ELOOP)
				x->partial = true;
		} else if (S_ISREG(stx.stx_mode)) {
			st->files++;
			k = sync_file(x, dfd, de->d_name, path, &stx);
			if (k > 0)
				st->updated++;
			else if (k == 0 && x->files >= SFS_FILES_MAX)
				st->skipped++;
			else if (k < 0)
				r = k;
		}
	}
	closedir(d);
	return r;
}

static int cmp_id(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static int remove_unseen(SfsIndex *x, unsigned *ret)
{
	_cleanup_stmt_ sqlite3_stmt *all = NULL, *a = NULL, *b = NULL;
	unsigned removed = 0;
	int k;

	if (x->n_seen > 0)
		qsort(x->seen, x->n_seen, sizeof(*x->seen), cmp_id);
	if (prepare(x, "SELECT id FROM files", &all) < 0 ||
	    prepare(x, "DELETE FROM fts WHERE rowid = ?1", &a) < 0 ||
	    prepare(x, "DELETE FROM files WHERE id = ?1", &b) < 0)
		return -EIO;
	/* Deleting the row the SELECT stands on is allowed in SQLite (the cursor moves on). */
	while ((k = sqlite3_step(all)) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(all, 0);

		if (x->n_seen > 0 && bsearch(&id, x->seen, x->n_seen, sizeof(*x->seen), cmp_id))
			continue;
		sqlite3_bind_int64(a, 1, id);
		sqlite3_bind_int64(b, 1, id);
		if (sqlite3_step(a) != SQLITE_DONE || sqlite3_step(b) != SQLITE_DONE)
			return -EIO;
		sqlite3_reset(a);
		sqlite3_reset(b);
		removed++;
	}
	if (k != SQLITE_DONE)
		return -EIO;
	*ret = removed;
	return 0;
}

static void recount(SfsIndex *x)
{
	x->text_total = query_int(x, "SELECT COALESCE(SUM(text_bytes), 0) FROM files");
	x->files = query_int(x, "SELECT COUNT(*) FROM files");
}

int sfs_index_sync(SfsIndex *x, SfsSyncStats *ret)
{
	SfsSyncStats st = {};
	int r;

	if (exec(x->db, "BEGIN IMMEDIATE") < 0)
		return -EIO;
	x->n_seen = 0;
	x->walking = true;
	x->partial = false;
	r = walk(x, x->context_fd, "", 0, &st);
	x->walking = false;
	if (r >= 0 && !x->partial)
		r = remove_unseen(x, &st.removed);
	if (r >= 0 && st.removed > 0)
		x->files -= st.removed;
	if (r < 0 || exec(x->db, "COMMIT") < 0) {
		(void)exec(x->db, "ROLLBACK");
		recount(x);
		return r < 0 ? r : -EIO;
	}
	if (x->files < SFS_FILES_MAX)
		x->said_full = false;
	if (ret)
		*ret = st;
	return 0;
}

/* --- tag ------------------------------------------------------------------------------- */

/* The directory holding @path's last segment (a new fd) and that segment's name. */
static int open_parent(int root, const char *path, int *ret_fd, const char **ret_name)
{
	_cleanup_close_ int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
	const char *p = path, *slash;

	if (fd < 0)
		return -errno;
	while ((slash = strchr(p, '/'))) {
		char seg[256];
		size_t n = (size_t)(slash - p);
		int sub;

		if (n == 0 || n >= sizeof(seg))
			return -EINVAL;
		memcpy(seg, p, n);
		seg[n] = 0;
		sub = openat(fd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return errno == ELOOP || errno == ENOTDIR ? -ENOENT : -errno;
		safe_close(fd);
		fd = sub;
		p = slash + 1;
	}
	*ret_fd = TAKE_FD(fd);
	*ret_name = p;
	return 0;
}

static json_t *entry_json(sqlite3_stmt *s, bool with_score)
{
	_cleanup_(json_decrefp) json_t *related =
		json_loads((const char *)sqlite3_column_text(s, 3) ?: "[]", 0, NULL);
	json_t *e;

	if (!json_is_array(related)) {
		json_decref(related);
		related = json_array();
	}
	e = json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:s}", "path",
		      (const char *)sqlite3_column_text(s, 0) ?: "", "created_by",
		      (const char *)sqlite3_column_text(s, 1) ?: "", "task",
		      (const char *)sqlite3_column_text(s, 2) ?: "", "related_apps", related,
		      "created_at", (json_int_t)sqlite3_column_int64(s, 4), "updated_at",
		      (json_int_t)sqlite3_column_int64(s, 5), "ranking", "keyword");

	/* bm25 is lower for a better match; the answer says higher is better. */
	if (e && with_score)
		json_object_set_new(e, "score", json_real(-sqlite3_column_double(s, 6)));
	return e;
}

#define ENTRY_COLUMNS "f.path, f.created_by, f.task, f.related, f.created_at, f.updated_at"

static int entry_of(SfsIndex *x, const char *path, json_t **ret)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (prepare(x, "SELECT " ENTRY_COLUMNS " FROM files f WHERE f.path = ?1", &s) < 0)
		return -EIO;
	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW)
		return -EIO;
	*ret = entry_json(s, false);
	return *ret ? 0 : -ENOMEM;
}

static int set_tags(SfsIndex *x, const char *path, const char *task, const char *related,
		    const char *by)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_(row_done) Row row = {};
	int k;

	if (prepare(x,
		    "UPDATE files SET task = COALESCE(?2, task), related = COALESCE(?3, related),"
		    " tagged_by = ?4 WHERE path = ?1",
		    &s) < 0)
		return -EIO;
	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	if (task)
		sqlite3_bind_text(s, 2, task, -1, SQLITE_STATIC);
	if (related)
		sqlite3_bind_text(s, 3, related, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, by, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_DONE)
		return -EIO;
	k = row_get(x, path, &row);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	/* The text stays; only the tag columns change. */
	{
		_cleanup_stmt_ sqlite3_stmt *b = NULL;
		_cleanup_free_ char *body = NULL;
		int n = 0;

		if (prepare(x, "SELECT body FROM fts WHERE rowid = ?1", &b) < 0)
			return -EIO;
		sqlite3_bind_int64(b, 1, row.id);
		if (sqlite3_step(b) == SQLITE_ROW) {
			n = sqlite3_column_bytes(b, 0);
			body = strndup((const char *)sqlite3_column_text(b, 0) ?: "", (size_t)n);
			if (!body)
				return -ENOMEM;
		}
		sqlite3_reset(b);
		return fts_put(x, row.id, path, row.task, row.related, body, (size_t)n);
	}
}

static int tag_locked(SfsIndex *x, const SfsCaller *caller, const char *path, const char *task,
		      const char *related, json_t **ret, char *err, size_t errlen)
{
	_cleanup_close_ int dfd = -EBADF;
	_cleanup_(row_done) Row row = {};
	char owner[SFS_IDENTITY_MAX];
	const char *name = NULL;
	struct statx stx;
	int k;

	k = open_parent(x->context_fd, path, &dfd, &name);
	if (k >= 0)
		k = statx_at(dfd, name, &stx);
	if (k == -ENOENT || k == -ENOTDIR) {
		snprintf(err, errlen, "no such file in /context: \"%s\"", path);
		return -ENOENT;
	}
	if (k < 0) {
		snprintf(err, errlen, "cannot look at \"%s\": %s", path, strerror(-k));
		return k;
	}
	if (!S_ISREG(stx.stx_mode)) {
		snprintf(err, errlen, "\"%s\" is not a regular file", path);
		return S_ISDIR(stx.stx_mode) ? -EISDIR : -EINVAL;
	}
	/* The owner's word only: the uid that created the file, or root. */
	if (caller->uid != 0 && caller->uid != stx.stx_uid) {
		sfs_apps_identity(x->apps, stx.stx_uid, owner);
		snprintf(err, errlen, "\"%s\" was created by \"%s\": only it may tag the file",
			 path, owner);
		return -EACCES;
	}
	k = sync_file(x, dfd, name, path, &stx);
	if (k < 0)
		goto io;
	k = row_get(x, path, &row);
	if (k < 0)
		goto io;
	if (k == 0) {
		snprintf(err, errlen, "\"%s\" cannot be indexed: %d files are, the cap", path,
			 SFS_FILES_MAX);
		return -ENOSPC;
	}
	k = set_tags(x, path, task, related, caller->name);
	if (k >= 0)
		k = entry_of(x, path, ret);
	if (k >= 0)
		return 0;
io:
	snprintf(err, errlen, "the index failed: %s",
		 k == -EIO ? sqlite3_errmsg(x->db) : strerror(-k));
	return k;
}

int sfs_index_tag(SfsIndex *x, const SfsCaller *caller, const char *path, const char *task,
		  char *const *related, size_t n_related, bool has_related, json_t **ret, char *err,
		  size_t errlen)
{
	_cleanup_(json_decrefp) json_t *arr = json_array();
	_cleanup_free_ char *related_text = NULL;
	int k;

	*ret = NULL;
	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < n_related; i++)
		if (json_array_append_new(arr, json_string(related[i])) < 0)
			return -ENOMEM;
	if (has_related && !(related_text = json_dumps(arr, JSON_COMPACT)))
		return -ENOMEM;
	if (exec(x->db, "BEGIN IMMEDIATE") < 0) {
		snprintf(err, errlen, "the index failed: %s", sqlite3_errmsg(x->db));
		return -EIO;
	}
	k = tag_locked(x, caller, path, task, related_text, ret, err, errlen);
	if (k < 0 || exec(x->db, "COMMIT") < 0) {
		(void)exec(x->db, "ROLLBACK");
		recount(x);
		json_decref(*ret);
		*ret = NULL;
		if (k >= 0) {
			snprintf(err, errlen, "the index failed: %s", sqlite3_errmsg(x->db));
			k = -EIO;
		}
	}
	return k;
}

/* --- query ----------------------------------------------------------------------------- */

static bool dac_allows(const SfsCaller *c, const struct stat *st, mode_t want_owner)
{
	/* want_owner is S_IRUSR or S_IXUSR; the group and other bits are it shifted. */
	if (c->uid == st->st_uid)
		return st->st_mode & want_owner;
	if (c->gid == st->st_gid)
		return st->st_mode & (want_owner >> 3);
	for (size_t i = 0; i < c->n_groups; i++)
		if (c->groups[i] == st->st_gid)
			return st->st_mode & (want_owner >> 3);
	return st->st_mode & (want_owner >> 6);
}

bool sfs_caller_may_read(int context_fd, const SfsCaller *caller, const char *path)
{
	_cleanup_close_ int fd = fcntl(context_fd, F_DUPFD_CLOEXEC, 3);
	const char *p = path, *slash;
	struct stat st;

	if (caller->uid == 0)
		return true;
	if (fd < 0 || fstat(fd, &st) < 0 || !dac_allows(caller, &st, S_IXUSR))
		return false;
	while ((slash = strchr(p, '/'))) {
		char seg[256];
		size_t n = (size_t)(slash - p);
		int sub;

		if (n == 0 || n >= sizeof(seg))
			return false;
		memcpy(seg, p, n);
		seg[n] = 0;
		sub = openat(fd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return false;
		safe_close(fd);
		fd = sub;
		if (fstat(fd, &st) < 0 || !dac_allows(caller, &st, S_IXUSR))
			return false;
		p = slash + 1;
	}
	if (fstatat(fd, p, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return false;
	return dac_allows(caller, &st, S_IRUSR);
}

int sfs_index_query(SfsIndex *x, const SfsCaller *caller, const char *match, unsigned limit,
		    json_t **ret)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_(json_decrefp) json_t *out = json_array();

	if (!out)
		return -ENOMEM;
	if (!caller->may_read) {
		*ret = TAKE_PTR(out);
		return 0;
	}
	if (prepare(x,
		    *match ? "SELECT " ENTRY_COLUMNS ", bm25(fts, " BM25_WEIGHTS ") AS score"
			     " FROM fts JOIN files f ON f.id = fts.rowid WHERE fts MATCH ?1"
			     " ORDER BY score, f.updated_at DESC, f.path LIMIT ?2"
			   : "SELECT " ENTRY_COLUMNS ", 0.0 FROM files f"
			     " ORDER BY f.updated_at DESC, f.path LIMIT ?2",
		    &s) < 0)
		return -EIO;
	if (*match)
		sqlite3_bind_text(s, 1, match, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 2, SFS_QUERY_SCAN_MAX);
	while (json_array_size(out) < limit && sqlite3_step(s) == SQLITE_ROW) {
		const char *path = (const char *)sqlite3_column_text(s, 0);

		if (!path || !sfs_caller_may_read(x->context_fd, caller, path))
			continue;
		if (json_array_append_new(out, entry_json(s, true)) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(out);
	return 0;
}
