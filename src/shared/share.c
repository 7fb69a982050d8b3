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

static int walk(const char *root, const char *rel, Listing *l, char *err, size_t errlen)
{
	_cleanup_free_ char *path = NULL;
	struct dirent **names = NULL;
	int n, r = 0;

	if (asprintf(&path, "%s%s%s", root, *rel ? "/" : "", rel) < 0)
		return -ENOMEM;
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *child = NULL, *full = NULL;
		const char *name = names[i]->d_name;
		struct stat st;
		char sha[65];
		uint64_t size;

		if (r < 0 || streq(name, ".") || streq(name, ".."))
			goto next;
		if (asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", name) < 0 ||
		    asprintf(&full, "%s/%s", root, child) < 0) {
			r = -ENOMEM;
			goto next;
		}
		if (lstat(full, &st) < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot stat %s: %s", full, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			r = walk(root, child, l, err, errlen);
		} else if (S_ISREG(st.st_mode)) {
			r = sha256_file_hex(full, sha, &size);
			if (r >= 0)
				r = listing_add(l, sha, child);
			l->bytes += size;
			if (r == -E2BIG || l->bytes > SHARE_BYTES_MAX) {
				r = -E2BIG;
				snprintf(err, errlen, "%s has more than %d files or %llu bytes",
					 root, SHARE_FILES_MAX,
					 (unsigned long long)SHARE_BYTES_MAX);
			}
		} else {
			/* A symlink could point anywhere on the host; only plain files travel. */
			r = S_ISLNK(st.st_mode) ? -ELOOP : -EBADFD;
			snprintf(err, errlen, "%s is a %s; an app share holds regular files only",
				 full, S_ISLNK(st.st_mode) ? "symlink" : "special file");
		}
	next:
		free(names[i]);
	}
	free(names);
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
	r = walk(dir, "", &l, err, errlen);
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

int share_pack(const char *dir, const char *image, char *err, size_t errlen)
{
	int status, devnull;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (devnull >= 0)
			dup2(devnull, STDOUT_FILENO);
		execlp("mkfs.erofs", "mkfs.erofs", "--quiet", "-T0", "--all-root", "-U",
		       "62657274-6800-4000-8000-000000000002", image, dir, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen,
			 WIFEXITED(status) && WEXITSTATUS(status) == 127
				 ? "mkfs.erofs is missing: install erofs-utils"
				 : "mkfs.erofs could not pack %s",
			 dir);
		return -EIO;
	}
	return 0;
}
