/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * read_full_file_at() - read a whole regular file into a NUL-terminated buffer.
 * @dir_fd, @path: openat() arguments; the final component is not followed.
 * @max_size: files larger than this fail with -EFBIG (every peer-controlled size has a cap).
 * Returns 0 and a malloc()ed buffer in *@ret (size in *@ret_size, may be NULL), or -errno.
 */
int read_full_file_at(int dir_fd, const char *path, size_t max_size, char **ret, size_t *ret_size);
int read_full_file(const char *path, size_t max_size, char **ret, size_t *ret_size);

/*
 * read_file_tail() - the end of a regular file: at most @max_bytes, starting at a line
 * boundary when the file is longer. The final component is not followed.
 * Returns 0 and a malloc()ed NUL-terminated buffer in *@ret, or -errno.
 */
int read_file_tail(const char *path, size_t max_bytes, char **ret);

/* Write all of @buf to @fd, retrying on short writes and EINTR. */
int loop_write(int fd, const void *buf, size_t len);
/* Read exactly @len bytes unless EOF comes first; returns bytes read or -errno. */
ssize_t loop_read(int fd, void *buf, size_t len);

/*
 * write_file_atomic() - write @len bytes to a temporary file beside @path, fsync it and
 * rename it over @path, so readers see the old content or the new, never a mix.
 * @mode: permission bits of the new file.
 */
int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);

/* mkdir -p with @mode for each directory it creates. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf that never crosses into another filesystem nor follows symlinks. */
int rm_rf(const char *path);

bool file_exists(const char *path);
