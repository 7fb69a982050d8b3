/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"
#include "mkdir-beneath.h"

/* One step down from @dir_fd to the directory @name, never through a link. */
static int open_step(int dir_fd, const char *name)
{
	/* RESOLVE_NO_SYMLINKS, not O_NOFOLLOW: a link is then ELOOP, not "not a directory". */
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
	};
	struct stat st;
	int fd = (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));

	/* FIXME: drop when the baseline is >= 5.6 (openat2). A single name under O_NOFOLLOW
	 * is the same check; it reports a link as ENOTDIR, so tell the two apart. */
	if (fd < 0 && errno == ENOSYS) {
		fd = openat(dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOTDIR &&
		    fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			errno = ELOOP;
	}
	return fd < 0 ? -errno : fd;
}

int mkdir_beneath(const char *path, mode_t mode, uid_t uid, gid_t gid, bool *ret_created,
		  char *ret_bad, size_t badlen)
{
	_cleanup_free_ char *copy = path ? strdup(path) : NULL;
	int cur, r = 0;
	bool created = false;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	if (copy[0] != '/')
		return -EINVAL;
	cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	for (char *seg = strtok_r(copy, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		int next = open_step(cur, seg);

		created = false;
		if (next == -ENOENT) {
			if (mkdirat(cur, seg, mode) == 0) {
				created = true;
				next = uid == (uid_t)-1 || fchownat(cur, seg, uid, gid,
								    AT_SYMLINK_NOFOLLOW) == 0
					       ? open_step(cur, seg)
					       : -errno;
			} else if (errno == EEXIST)
				next = open_step(cur, seg); /* another made it meanwhile */
			else
				next = -errno;
		}
		if (next < 0) {
			if (ret_bad)
				snprintf(ret_bad, badlen, "%s", seg);
			r = next;
			break;
		}
		safe_close(cur);
		cur = next;
	}
	if (r < 0) {
		safe_close(cur);
		return r;
	}
	if (ret_created)
		*ret_created = created;
	return cur;
}
