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
#include "hash-record.h"
#include "macros.h"

#define RECORD_VERSION 1
#define RECORD_BYTES_MAX 512
#define KIND_MAX 32

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* The same file, as it was: a write, a truncation, a rename over it or a chmod differs. */
static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       ts_ns(&a->st_mtim) == ts_ns(&b->st_mtim) && ts_ns(&a->st_ctim) == ts_ns(&b->st_ctim);
}

static int record_path(const char *dir, const struct stat *st, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%" PRIx64 "-%" PRIx64, dir, (uint64_t)st->st_dev,
			 (uint64_t)st->st_ino);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int hash_stamp_take(int fd, HashStamp *ret)
{
	struct timespec now;

	*ret = (HashStamp){};
	if (fstat(fd, &ret->st) < 0 || clock_gettime(CLOCK_REALTIME, &now) < 0)
		return -errno;
	ret->taken_ns = ts_ns(&now);
	ret->valid = true;
	return 0;
}

bool hash_stamp_unchanged(int fd, const HashStamp *s)
{
	struct stat now;

	return s->valid && fstat(fd, &now) >= 0 && same_file(&s->st, &now);
}

bool hash_record_holds(const char *dir, const HashStamp *s, const char *kind, const char *sha256)
{
	char path[4096], text[RECORD_BYTES_MAX + 1], r_kind[KIND_MAX + 1],
		r_sha[SHA256_HEX_LEN + 1];
	long long size, m_s, m_ns, c_s, c_ns;
	const struct stat *st = &s->st;
	int version, fd;
	ssize_t n;

	if (!dir || !s->valid || record_path(dir, &s->st, path, sizeof(path)) < 0)
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return false;
	n = read(fd, text, RECORD_BYTES_MAX);
	close(fd);
	if (n <= 0 || n >= RECORD_BYTES_MAX)
		return false;
	text[n] = '\0';
	if (sscanf(text, "%d %32s %lld %lld %lld %lld %lld %64s", &version, r_kind, &size, &m_s,
		   &m_ns, &c_s, &c_ns, r_sha) != 8 ||
	    version != RECORD_VERSION)
		return false;
	/* The file as the caller opened it is the file as it was hashed. */
	return streq(r_kind, kind) && streq(r_sha, sha256) && size == (long long)st->st_size &&
	       m_s == (long long)st->st_mtim.tv_sec && m_ns == st->st_mtim.tv_nsec &&
	       c_s == (long long)st->st_ctim.tv_sec && c_ns == st->st_ctim.tv_nsec;
}

/* Keep the directory bounded: the oldest records go once there are HASH_RECORD_MAX. */
static void prune(const char *dir)
{
	char oldest[NAME_MAX + 1] = "";
	struct timespec oldest_t = {};
	struct dirent *de;
	size_t count = 0;
	int dfd;
	DIR *d = opendir(dir);

	if (!d)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.' ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		count++;
		if (!oldest[0] || ts_ns(&st.st_mtim) < ts_ns(&oldest_t)) {
			snprintf(oldest, sizeof(oldest), "%s", de->d_name);
			oldest_t = st.st_mtim;
		}
	}
	if (count >= HASH_RECORD_MAX && oldest[0])
		(void)unlinkat(dfd, oldest, 0);
	closedir(d);
}

int hash_record_save(const char *dir, int fd, const HashStamp *before, const char *kind,
		     const char *sha256)
{
	char path[4096], tmp[4096 + 16], text[RECORD_BYTES_MAX];
	struct stat now;
	int n, tfd;

	if (!dir || !before->valid || strlen(kind) > KIND_MAX || !sha256_hex_valid(sha256))
		return -EINVAL;
	if (fstat(fd, &now) < 0)
		return -errno;
	if (!same_file(&before->st, &now) ||
	    ts_ns(&now.st_ctim) > before->taken_ns - HASH_RECORD_MARGIN_NS ||
	    ts_ns(&now.st_mtim) > before->taken_ns - HASH_RECORD_MARGIN_NS)
		return -ESTALE;
	if (record_path(dir, &now, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	prune(dir);
	n = snprintf(text, sizeof(text), "%d %s %lld %lld %ld %lld %ld %s\n", RECORD_VERSION, kind,
		     (long long)now.st_size, (long long)now.st_mtim.tv_sec, now.st_mtim.tv_nsec,
		     (long long)now.st_ctim.tv_sec, now.st_ctim.tv_nsec, sha256);
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	tfd = mkostemp(tmp, O_CLOEXEC);
	if (tfd < 0)
		return -errno;
	if (write(tfd, text, (size_t)n) != n) {
		close(tfd);
		(void)unlink(tmp);
		return -EIO;
	}
	if (close(tfd) < 0 || rename(tmp, path) < 0) {
		int r = -errno;

		(void)unlink(tmp);
		return r;
	}
	return 0;
}
