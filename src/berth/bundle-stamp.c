/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle-stamp.h"
#include "digest.h"
#include "macros.h"

#define BUNDLE_STAMP_MAGIC "berth-bundle-stamp-2\n"

typedef struct Walk {
	Sha256 *h;
	unsigned long entries;
	struct timespec newest_ctime;
} Walk;

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * One line per entry: its path, type, size, mtime, ctime, inode and (for a link) its target. A
 * directory is its path alone: its entries speak for it, and its mtime moves with every
 * editor's swap file.
 */
static int stamp_entry(Walk *w, const char *path, const struct stat *st, const char *link)
{
	bool dir = S_ISDIR(st->st_mode);
	char line[PATH_MAX + 256];
	int n;

	if (++w->entries > BUNDLE_STAMP_ENTRIES_MAX)
		return -E2BIG;
	if (!dir && (st->st_ctim.tv_sec > w->newest_ctime.tv_sec ||
		     (st->st_ctim.tv_sec == w->newest_ctime.tv_sec &&
		      st->st_ctim.tv_nsec > w->newest_ctime.tv_nsec)))
		w->newest_ctime = st->st_ctim;
	/* ctime too: a copy that keeps an old mtime (cp -p, rsync -a, tar) still sets it. */
	n = snprintf(line, sizeof(line),
		     "%s%c%o %" PRIu64 " %" PRId64 ".%09ld %" PRId64 ".%09ld %" PRIu64 " %s\n", path,
		     '\0', (unsigned)(st->st_mode & S_IFMT), dir ? 0 : (uint64_t)st->st_size,
		     dir ? 0 : (int64_t)st->st_mtim.tv_sec, dir ? 0 : st->st_mtim.tv_nsec,
		     dir ? 0 : (int64_t)st->st_ctim.tv_sec, dir ? 0 : st->st_ctim.tv_nsec,
		     dir ? 0 : (uint64_t)st->st_ino, link ? link : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		return -ENAMETOOLONG;
	return sha256_update(w->h, line, (size_t)n);
}

static int walk_dir(Walk *w, int dir_fd, const char *path, unsigned depth)
{
	_cleanup_free_ char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > BUNDLE_STAMP_DEPTH_MAX)
		return -E2BIG;
	d = fdopendir(dir_fd);
	if (!d) {
		r = -errno;
		close(dir_fd);
		return r;
	}
	/* Sorted, so that the stamp does not depend on the order readdir() returns. */
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, "..") || streq(de->d_name, ".git"))
			continue;
		if (n == cap) {
			char **more = reallocarray(names, cap ? cap * 2 : 64, sizeof(*names));

			if (!more) {
				r = -ENOMEM;
				goto out;
			}
			names = more;
			cap = cap ? cap * 2 : 64;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			goto out;
		}
		n++;
		if (w->entries + n > BUNDLE_STAMP_ENTRIES_MAX) {
			r = -E2BIG;
			goto out;
		}
	}
	if (n > 0) /* an empty directory has no array: qsort() must not get NULL */
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n && r >= 0; i++) {
		char sub[PATH_MAX], link[PATH_MAX] = "";
		struct stat st;

		if (snprintf(sub, sizeof(sub), "%s/%s", path, names[i]) >= (int)sizeof(sub)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t k = readlinkat(dirfd(d), names[i], link, sizeof(link) - 1);

			if (k < 0) {
				r = -errno;
				break;
			}
			link[k] = '\0';
		}
		r = stamp_entry(w, sub, &st, S_ISLNK(st.st_mode) ? link : NULL);
		if (r >= 0 && S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd(d), names[i],
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			r = fd < 0 ? -errno : walk_dir(w, fd, sub, depth + 1);
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	closedir(d);
	return r;
}

/* @path itself, and everything below it when it is a directory; a missing path is a line
 * of its own (it may appear later). */
static int stamp_path(Walk *w, const char *path)
{
	struct stat st;
	int fd;

	int r;

	if (lstat(path, &st) < 0) {
		char line[PATH_MAX + 16];
		int n;

		if (errno != ENOENT)
			return -errno;
		n = snprintf(line, sizeof(line), "%s%cmissing\n", path, '\0');
		return n < 0 || (size_t)n >= sizeof(line) ? -ENAMETOOLONG
							: sha256_update(w->h, line, (size_t)n);
	}
	r = stamp_entry(w, path, &st, NULL);
	if (r < 0 || !S_ISDIR(st.st_mode))
		return r;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return walk_dir(w, fd, path, 0);
}

int bundle_stamp(const char *const *paths, const char *const *env_names,
		 char ret_hex[SHA256_HEX_LEN + 1], bool *ret_racy)
{
	_cleanup_(sha256_freep) Sha256 *h = sha256_new();
	Walk w = {.h = h};
	struct timespec start;
	int r;

	if (!h)
		return -ENOMEM;
	/* The clock file times are taken from: a change after this instant has a ctime at
	 * or after it. */
	clock_gettime(CLOCK_REALTIME_COARSE, &start);
	sha256_update(h, BUNDLE_STAMP_MAGIC, strlen(BUNDLE_STAMP_MAGIC));
	for (; *paths; paths++) {
		r = stamp_path(&w, *paths);
		if (r < 0)
			return r;
	}
	for (; env_names && *env_names; env_names++) {
		const char *v = getenv(*env_names);

		sha256_update(h, *env_names, strlen(*env_names) + 1);
		sha256_update(h, v ? v : "\n(unset)", v ? strlen(v) + 1 : 9);
	}
	/* A file changed in the clock tick the walk began in may change again within that
	 * tick, unseen: such a stamp must not be trusted later. */
	*ret_racy = w.newest_ctime.tv_sec > start.tv_sec ||
		    (w.newest_ctime.tv_sec == start.tv_sec &&
		     w.newest_ctime.tv_nsec >= start.tv_nsec);
	return sha256_final_hex(h, ret_hex);
}
