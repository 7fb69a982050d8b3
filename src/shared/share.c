/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"
#include "share.h"

typedef struct Listing {
	char **lines;
	size_t n, alloc;
	uint64_t bytes;
} Listing;

static void listing_done(Listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->lines[i]);
	free(l->lines);
}

static int listing_add(Listing *l, const char *sha, const char *rel)
{
	char *line;

	if (l->n >= SHARE_FILES_MAX)
		return -E2BIG;
	if (l->n == l->alloc) {
		size_t n = l->alloc ? l->alloc * 2 : 64;
		char **p = realloc(l->lines, n * sizeof(char *));

		if (!p)
			return -ENOMEM;
		l->lines = p;
		l->alloc = n;
	}
	if (asprintf(&line, "%s  %s\n", sha, rel) < 0)
		return -ENOMEM;
	l->lines[l->n++] = line;
	return 0;
}

static const char *file_kind(mode_t mode)
{
	if (S_ISLNK(mode))
		return "symlink";
	if (S_ISFIFO(mode))
		return "FIFO";
	if (S_ISSOCK(mode))
		return "socket";
	if (S_ISCHR(mode))
		return "character device";
	if (S_ISBLK(mode))
		return "block device";
	return "special file";
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the directory @dfd (without "." and ".."), sorted bytewise. */
static int list_dir(int dfd, char ***ret_names, size_t *ret_n)
{
	_cleanup_close_ int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	char **names = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -EBADF;
	while ((errno = 0, de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (n >= SHARE_FILES_MAX) {
			r = -E2BIG;
			break;
		}
		if (n == alloc) {
			size_t m = alloc ? alloc * 2 : 16;
			char **p = realloc(names, m * sizeof(char *));

			if (!p) {
				r = -ENOMEM;
				break;
			}
			names = p;
			alloc = m;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	if (r == 0 && errno != 0)
		r = -errno;
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	qsort(names, n, sizeof(char *), cmp_names);
	*ret_names = names;
	*ret_n = n;
	return 0;
}

typedef struct Walk {
	const char *root;
	Listing *l; /* NULL: check only */
	unsigned files;
	uint64_t bytes;
	char *err;
	size_t errlen;
} Walk;

/*
 * Check (and, with @w->l, measure) the directory @dfd, which is @rel under @w->root.
 * Everything is opened relative to its directory with O_NOFOLLOW and checked again on the
 * descriptor, so a name swapped for a symlink or a FIFO after the first look is refused,
 * never followed or blocked on.
 */
static int walk(Walk *w, int dfd, const char *rel, unsigned depth)
{
	const char *root = w->root;
	char *err = w->err;
	size_t errlen = w->errlen;
	char **names = NULL;
	size_t n = 0;
	int r;

	if (depth > SHARE_DEPTH_MAX) {
		snprintf(err, errlen, "%s/%s is more than %d directories deep", root, rel,
			 SHARE_DEPTH_MAX);
		return -E2BIG;
	}
	r = list_dir(dfd, &names, &n);
	if (r < 0) {
		if (r == -E2BIG)
			snprintf(err, errlen, "%s%s%s has more than %d entries", root,
				 *rel ? "/" : "", rel, SHARE_FILES_MAX);
		else
			snprintf(err, errlen, "cannot read %s%s%s: %s", root, *rel ? "/" : "", rel,
				 strerror(-r));
		return r;
	}
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *child = NULL;
		_cleanup_close_ int fd = -EBADF;
		const char *name = names[i];
		struct stat st, fst;
		char sha[65];
		uint64_t size = 0;

		if (r < 0)
			goto next;
		if (asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", name) < 0) {
			r = -ENOMEM;
			goto next;
		}
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot stat %s/%s: %s", root, child,
				 strerror(errno));
			goto next;
		}
		if (S_ISDIR(st.st_mode))
			fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		else if (S_ISREG(st.st_mode))
			fd = openat(dfd, name,
				    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		else {
			/* A symlink could point anywhere on the host (mkfs.erofs would keep it as
			 * a link for the guest to follow); a FIFO or device has no contents to
			 * measure. Only plain files and directories travel. */
			r = S_ISLNK(st.st_mode) ? -ELOOP : -EBADFD;
			snprintf(err, errlen,
				 "%s/%s is a %s; an app share holds regular files only", root,
				 child, file_kind(st.st_mode));
			goto next;
		}
		if (fd < 0 && errno != ELOOP) {
			r = -errno;
			snprintf(err, errlen, "cannot open %s/%s: %s", root, child,
				 strerror(errno));
			goto next;
		}
		if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev ||
		    fst.st_ino != st.st_ino || (fst.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
			r = -ESTALE;
			snprintf(err, errlen, "%s/%s changed while the share was read", root,
				 child);
			goto next;
		}
		if (S_ISDIR(fst.st_mode)) {
			r = walk(w, fd, child, depth + 1);
			goto next;
		}
		/* Another name for the same inode may lie outside the share, and what is
		 * written there would change the share after it was measured. */
		if (fst.st_nlink > 1) {
			r = -EMLINK;
			snprintf(
				err, errlen,
				"%s/%s is a hard link (%ju names); an app share holds files of its own only",
				root, child, (uintmax_t)fst.st_nlink);
			goto next;
		}
		if (w->l) {
			r = sha256_fd_hex(fd, sha, &size);
			if (r < 0) {
				snprintf(err, errlen, "cannot read %s/%s: %s", root, child,
					 strerror(-r));
				goto next;
			}
			r = listing_add(w->l, sha, child);
		} else
			size = (uint64_t)fst.st_size;
		w->bytes += size;
		if (r == -E2BIG || ++w->files > SHARE_FILES_MAX || w->bytes > SHARE_BYTES_MAX) {
			r = -E2BIG;
			snprintf(err, errlen, "%s has more than %d files or %llu bytes", root,
				 SHARE_FILES_MAX, (unsigned long long)SHARE_BYTES_MAX);
		}
	next:
		free(names[i]);
	}
	free(names);
	return r;
}

static int walk_share(const char *dir, Listing *l, char *err, size_t errlen)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	Walk w = {.root = dir, .l = l, .err = err, .errlen = errlen};
	int r;

	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return r;
	}
	r = walk(&w, fd, "", 0);
	if (l)
		l->bytes = w.bytes;
	return r;
}

static int cmp_lines(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;

	/* Sort by path, which starts after the 64 hex digits and two spaces. */
	return strcmp(*x + 66, *y + 66);
}

int share_digest(const char *dir, ShareDigest *ret, char *err, size_t errlen)
{
	_cleanup_(sha256_freep) Sha256 *s = sha256_new();
	Listing l = {};
	int r;

	if (!s)
		return -ENOMEM;
	r = walk_share(dir, &l, err, errlen);
	if (r >= 0) {
		qsort(l.lines, l.n, sizeof(char *), cmp_lines);
		for (size_t i = 0; i < l.n && r >= 0; i++)
			r = sha256_update(s, l.lines[i], strlen(l.lines[i]));
		if (r >= 0)
			r = sha256_final_hex(s, ret->tree_sha256);
		ret->files = (unsigned)l.n;
		ret->bytes = l.bytes;
	}
	listing_done(&l);
	return r;
}

/* mkfs.erofs from an absolute $PATH entry only: a relative one (".", "node_modules/.bin")
 * would be looked up in whatever directory berth-vmm was started from, an app's perhaps. */
static int find_mkfs_erofs(char **ret)
{
	const char *path = getenv("PATH");
	_cleanup_free_ char *copy = strdup(
		path && *path ? path
			      : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		struct stat st;
		char *p;

		if (d[0] != '/')
			continue;
		if (asprintf(&p, "%s/mkfs.erofs", d) < 0)
			return -ENOMEM;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
			*ret = p;
			return 0;
		}
		free(p);
	}
	return -ENOENT;
}

int share_pack(const char *dir, const char *image, char *err, size_t errlen)
{
	_cleanup_free_ char *mkfs = NULL;
	int status, devnull, r;
	pid_t pid;

	/* The same refusals as share_digest(), whoever calls: mkfs.erofs would pack a symlink
	 * for the guest to follow and a hard link's contents from wherever its other names
	 * are. */
	r = walk_share(dir, NULL, err, errlen);
	if (r < 0)
		return r;
	r = find_mkfs_erofs(&mkfs);
	if (r < 0) {
		snprintf(err, errlen, "mkfs.erofs is missing: install erofs-utils");
		return r;
	}
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* -x-1: no extended attributes, so the image holds only what the digest
		 * measures, whatever labels or user.* attributes the host put on the files. */
		char *argv[] = {"mkfs.erofs",
				"--quiet",
				"-x-1",
				"-T0",
				"--all-root",
				"-U",
				"62657274-6800-4000-8000-000000000002",
				(char *)image,
				(char *)dir,
				NULL};

		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (devnull >= 0)
			dup2(devnull, STDOUT_FILENO);
		execv(mkfs, argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "mkfs.erofs could not pack %s", dir);
		return -EIO;
	}
	return 0;
}
