/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"

int read_full_file_at(int dir_fd, const char *path, size_t max_size, char **ret, size_t *ret_size)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	size_t size = 0, alloc = 0;
	struct stat st;

	fd = RET_NERRNO(openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW));
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	/* st_size is only a hint: sysfs and procfs files claim 4096 or 0 bytes. */
	if ((size_t)st.st_size > max_size && st.st_size != 4096)
		return -EFBIG;

	for (;;) {
		ssize_t n;

		if (size + 1 >= alloc) {
			size_t want = alloc ? alloc * 2 : MIN((size_t)st.st_size, max_size) + 4096;
			char *p;

			if (want > max_size + 1)
				want = max_size + 1;
			if (want <= size + 1)
				return -EFBIG;
			p = realloc(buf, want);
			if (!p)
				return -ENOMEM;
			buf = p;
			alloc = want;
		}
		n = read(fd, buf + size, alloc - size - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		size += (size_t)n;
	}

	if (!buf) {
		buf = malloc(1);
		if (!buf)
			return -ENOMEM;
	}
	buf[size] = '\0';
	if (ret_size)
		*ret_size = size;
	*ret = TAKE_PTR(buf);
	return 0;
}

int read_full_file(const char *path, size_t max_size, char **ret, size_t *ret_size)
{
	return read_full_file_at(AT_FDCWD, path, max_size, ret, ret_size);
}

int loop_write(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t loop_read(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	int r;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return -ENOMEM;
	fd = RET_NERRNO(open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
	if (fd < 0)
		return fd;
	r = loop_write(fd, buf, len);
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (r >= 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_rf_children(int dir_fd, dev_t dev)
{
	_cleanup_close_ int fd = dup(dir_fd);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -EBADF; /* now owned by d */
	while ((de = readdir(d))) {
		struct stat st;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sub = -EBADF;

			if (st.st_dev != dev)
				continue;
			sub = openat(dirfd(d), de->d_name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			rm_rf_children(sub, dev);
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && r == 0)
				r = -errno;
		} else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && r == 0)
			r = -errno;
	}
	closedir(d);
	return r;
}

int rm_rf(const char *path)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return RET_NERRNO(unlink(path));
	fd = RET_NERRNO(open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return fd;
	r = rm_rf_children(fd, st.st_dev);
	if (rmdir(path) < 0 && r == 0)
		r = -errno;
	return r;
}

bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

int read_file_tail(const char *path, size_t max_bytes, char **ret)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	off_t from;
	ssize_t n;
	char *start;

	fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW));
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	from = st.st_size > (off_t)max_bytes ? st.st_size - (off_t)max_bytes : 0;
	buf = malloc(max_bytes + 1);
	if (!buf)
		return -ENOMEM;
	n = pread(fd, buf, max_bytes, from);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	/* Cut mid-file: start at the first whole line. */
	start = buf;
	if (from > 0 && (start = strchr(buf, '\n')))
		start++;
	else if (from > 0)
		start = buf + n;
	memmove(buf, start, strlen(start) + 1);
	*ret = TAKE_PTR(buf);
	return 0;
}
