/* SPDX-License-Identifier: Apache-2.0 */
/* Digests remembered while their files stay unchanged (hash-record.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "hash-record.h"
#include "macros.h"
#include "paths.h"

#define RECORD_VERSION 1
#define RECORD_BYTES_MAX 512
#define KIND_MAX 32
/* Records removed by one save at most, for a directory over its cap. */
#define PRUNE_PASSES 8

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}

/* The same file, as it was: a write, a truncation, a rename over it or a chmod differs. */
static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       ts_cmp(&a->st_mtim, &b->st_mtim) == 0 && ts_cmp(&a->st_ctim, &b->st_ctim) == 0;
}

/* Changed longer than the margin before @now. */
static bool settled(const struct timespec *t, const struct timespec *now)
{
	struct timespec limit = {.tv_sec = now->tv_sec - HASH_RECORD_MARGIN_SEC,
				 .tv_nsec = now->tv_nsec};

	return ts_cmp(t, &limit) < 0;
}

static void record_name(const struct stat *st, char name[64])
{
	snprintf(name, 64, "%" PRIx64 "-%" PRIx64, (uint64_t)st->st_dev, (uint64_t)st->st_ino);
}

/* The caller's alone: its uid's, writable by no one else. */
static bool ours(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The records' directory, reached without following a link, and only when it is ours. */
static int open_dir(const char *dir, bool create)
{
	struct stat st;
	int fd;

	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !ours(&st)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

char *hash_record_dir(void)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir();
	char *dir = NULL;

	if (!vm_dir || asprintf(&dir, "%s/hashed", vm_dir) < 0)
		return NULL;
	return dir;
}

int hash_stamp_take(int fd, HashStamp *ret)
{
	*ret = (HashStamp){};
	if (fstat(fd, &ret->st) < 0 || clock_gettime(CLOCK_REALTIME, &ret->taken) < 0)
		return -errno;
	ret->valid = true;
	return 0;
}

bool hash_stamp_unchanged(int fd, const HashStamp *s)
{
	struct stat now;

	return s->valid && fstat(fd, &now) >= 0 && same_file(&s->st, &now);
}

/* A record's text, all of it as written: version, kind, size, times, digest, newline. */
static bool parse_record(const char *text, struct stat *ret, char kind[KIND_MAX + 1],
			 char sha256[SHA256_HEX_LEN + 1])
{
	long long size, m_s, c_s;
	long m_ns, c_ns;
	int version, end = -1;

	if (sscanf(text, "%d %32s %lld %lld %ld %lld %ld %64s%n", &version, kind, &size, &m_s,
		   &m_ns, &c_s, &c_ns, sha256, &end) != 8 ||
	    end < 0 || !streq(text + end, "\n") || version != RECORD_VERSION ||
	    !sha256_hex_valid(sha256) || size < 0 || m_ns < 0 || m_ns >= 1000000000L || c_ns < 0 ||
	    c_ns >= 1000000000L)
		return false;
	*ret = (struct stat){.st_size = (off_t)size,
			     .st_mtim = {.tv_sec = (time_t)m_s, .tv_nsec = m_ns},
			     .st_ctim = {.tv_sec = (time_t)c_s, .tv_nsec = c_ns}};
	return true;
}

bool hash_record_holds(const char *dir, const HashStamp *s, const char *kind, const char *sha256)
{
	char name[64], text[RECORD_BYTES_MAX + 1], r_kind[KIND_MAX + 1], r_sha[SHA256_HEX_LEN + 1];
	struct stat st, rec;
	int dfd, fd;
	ssize_t n;
	bool holds;

	if (!dir || !s->valid)
		return false;
	dfd = open_dir(dir, false);
	if (dfd < 0)
		return false;
	record_name(&s->st, name);
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	close(dfd);
	if (fd < 0)
		return false;
	n = fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !ours(&st)
		    ? -1
		    : read(fd, text, RECORD_BYTES_MAX);
	if (n <= 0 || n >= RECORD_BYTES_MAX) {
		close(fd);
		return false;
	}
	text[n] = '\0';
	/* The file as the caller opened it is the file as it was hashed. */
	holds = parse_record(text, &rec, r_kind, r_sha) && streq(r_kind, kind) &&
		streq(r_sha, sha256) && rec.st_size == s->st.st_size &&
		ts_cmp(&rec.st_mtim, &s->st.st_mtim) == 0 &&
		ts_cmp(&rec.st_ctim, &s->st.st_ctim) == 0;
	/* Used: the last to be pruned. */
	if (holds)
		(void)futimens(fd, NULL);
	close(fd);
	return holds;
}

/* Keep the directory within its cap once @keep (the record about to be written, there
 * already or not) is in it: the least recently used go first. */
static void prune(int dfd, const char *keep)
{
	for (int pass = 0; pass < PRUNE_PASSES; pass++) {
		char oldest[NAME_MAX + 1] = "";
		struct timespec oldest_t = {};
		struct dirent *de;
		size_t count = 0;
		int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((de = readdir(d))) {
			struct stat st;

			if (de->d_name[0] == '.' ||
			    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISREG(st.st_mode))
				continue;
			if (streq(de->d_name, keep))
				continue;
			count++;
			if (!oldest[0] || ts_cmp(&st.st_mtim, &oldest_t) < 0) {
				snprintf(oldest, sizeof(oldest), "%s", de->d_name);
				oldest_t = st.st_mtim;
			}
		}
		closedir(d);
		if (count < HASH_RECORD_MAX || !oldest[0])
			return;
		(void)unlinkat(dfd, oldest, 0);
	}
}

int hash_record_save(const char *dir, int fd, const HashStamp *before, const char *kind,
		     const char *sha256)
{
	_cleanup_free_ char *path = NULL;
	char name[64], text[RECORD_BYTES_MAX];
	struct stat now;
	int n, dfd;

	if (!dir || !before->valid || strlen(kind) == 0 || strlen(kind) > KIND_MAX ||
	    strpbrk(kind, " \t\n") || !sha256_hex_valid(sha256))
		return -EINVAL;
	if (fstat(fd, &now) < 0)
		return -errno;
	if (!same_file(&before->st, &now) || !settled(&now.st_ctim, &before->taken) ||
	    !settled(&now.st_mtim, &before->taken))
		return -ESTALE;
	dfd = open_dir(dir, true);
	if (dfd < 0)
		return dfd;
	record_name(&now, name);
	prune(dfd, name);
	close(dfd);
	n = snprintf(text, sizeof(text), "%d %s %lld %lld %ld %lld %ld %s\n", RECORD_VERSION, kind,
		     (long long)now.st_size, (long long)now.st_mtim.tv_sec, now.st_mtim.tv_nsec,
		     (long long)now.st_ctim.tv_sec, now.st_ctim.tv_nsec, sha256);
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return -ENOMEM;
	/* The directory was found the caller's alone: no one else can swap a name in it. */
	return write_file_atomic(path, text, (size_t)n, 0600);
}
