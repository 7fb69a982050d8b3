/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"

#define PIDFILE "berth-vmm.pid"

static int read_pid(const char *dir, pid_t *ret)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	char *end;
	long v;

	if (asprintf(&path, "%s/" PIDFILE, dir) < 0)
		return -ENOMEM;
	if (read_full_file(path, 64, &text, NULL) < 0)
		return -ENOENT;
	v = strtol(text, &end, 10);
	if (v <= 1 || v > INT_MAX || (*end != '\n' && *end != '\0'))
		return -EBADMSG;
	*ret = (pid_t)v;
	return 0;
}

/* Is @pid a berth-vmm whose command line names @dir (as --run-dir DIR, or --name NAME for
 * the default location)? Pid reuse makes the pid alone untrustworthy. */
static bool pid_serves_dir(pid_t pid, const char *dir)
{
	_cleanup_free_ char *path = NULL, *cmd = NULL;
	size_t len = 0;
	const char *base = strrchr(dir, '/');
	bool is_vmm = false, names_dir = false, prev_name = false;

	if (asprintf(&path, "/proc/%d/cmdline", (int)pid) < 0)
		return false;
	if (read_full_file(path, 64 * 1024, &cmd, &len) < 0)
		return false;
	for (size_t i = 0; i < len; i += strlen(cmd + i) + 1) {
		const char *a = cmd + i, *slash = strrchr(a, '/');

		if (i == 0)
			is_vmm = streq(slash ? slash + 1 : a, "berth-vmm");
		else if (streq(a, dir) || (prev_name && base && streq(a, base + 1)))
			names_dir = true;
		prev_name = streq(a, "--name");
	}
	return is_vmm && names_dir;
}

static bool lock_is_held(const char *dir)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -EBADF;

	if (asprintf(&path, "%s/" PIDFILE, dir) < 0)
		return true; /* fail closed: never treat a dir as stale on OOM */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK;
	return false;
}

RunDirState rundir_inspect(const char *dir, pid_t *ret_pid)
{
	struct stat st;
	pid_t pid = 0;

	*ret_pid = 0;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return RUNDIR_ABSENT;
	(void)read_pid(dir, &pid);
	*ret_pid = pid;
	if (pid > 0 && kill(pid, 0) == 0 && pid_serves_dir(pid, dir))
		return RUNDIR_RUNNING;
	/* Between creating the dir and writing its pid, the lock is the only sign of life. */
	if (lock_is_held(dir))
		return RUNDIR_RUNNING;
	return RUNDIR_STALE;
}

int rundir_remove(const char *dir)
{
	return rm_rf(dir);
}

/*
 * "<root>/.<name>.lock" serialises what decides a run dir's fate: a VM taking it, and its
 * removal as stale. Without it two starts could both find a dir stale, and the second
 * remove what the first had just made; or a sweep could remove a dir a start had made
 * but not yet locked. Held for a moment only; its own name is never a VM name.
 */
static int name_lock(const char *dir)
{
	_cleanup_free_ char *copy = strdup(dir), *path = NULL;
	char *slash = copy ? strrchr(copy, '/') : NULL;
	int fd;

	if (!slash || slash == copy)
		return -EINVAL;
	*slash = '\0';
	if (asprintf(&path, "%s/.%s.lock", copy, slash + 1) < 0)
		return -ENOMEM;
	(void)mkdir_p(copy, 0700);
	fd = RET_NERRNO(open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

int rundir_remove_if_stale(const char *dir)
{
	_cleanup_close_ int lock = name_lock(dir);
	pid_t pid;
	int r;

	if (lock < 0)
		return lock;
	if (rundir_inspect(dir, &pid) != RUNDIR_STALE)
		return 0;
	r = rm_rf(dir);
	return r < 0 ? r : 1;
}

int rundir_open_pidfd(const char *dir)
{
	pid_t pid, again;
	int fd;

	if (rundir_inspect(dir, &pid) != RUNDIR_RUNNING || pid <= 0)
		return -ESRCH;
	fd = pidfd_open(pid, 0);
	if (fd < 0)
		return -errno;
	/* The pid could have been reused between the look and the open: the pidfd is this
	 * VM's berth-vmm only if that pid still serves the dir now that it is held. */
	if (rundir_inspect(dir, &again) != RUNDIR_RUNNING || again != pid) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

int rundir_acquire(const char *dir, pid_t *ret_owner, bool *ret_was_stale)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -EBADF, lock = name_lock(dir);
	pid_t pid;
	int r;

	*ret_was_stale = false;
	*ret_owner = 0;
	if (lock < 0)
		return lock;
	switch (rundir_inspect(dir, &pid)) {
	case RUNDIR_RUNNING:
		*ret_owner = pid;
		return -EBUSY;
	case RUNDIR_STALE:
		*ret_was_stale = true;
		r = rundir_remove(dir);
		if (r < 0)
			return r;
		break;
	case RUNDIR_ABSENT:
	case _RUNDIR_STATE_MAX:
	case _RUNDIR_STATE_INVALID:
		break;
	}

	r = mkdir_p(dir, 0700);
	if (r < 0)
		return r;
	if (chmod(dir, 0700) < 0)
		return -errno;
	if (asprintf(&path, "%s/" PIDFILE, dir) < 0)
		return -ENOMEM;
	fd = RET_NERRNO(open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (fd < 0)
		return fd;
	/* Two starts racing for one name: exactly one gets the lock. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return -errno;
		(void)read_pid(dir, ret_owner);
		return -EBUSY;
	}
	r = rundir_write_pid(fd, getpid());
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}

int rundir_write_pid(int lock_fd, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);

	if (ftruncate(lock_fd, 0) < 0)
		return -errno;
	if (pwrite(lock_fd, buf, (size_t)n, 0) != n)
		return -EIO;
	return 0;
}

int rundir_sweep(const char *root, bool remove_stale,
		 void (*cb)(const char *name, RunDirState state, pid_t pid, void *userdata),
		 void *userdata)
{
	struct dirent **names = NULL;
	int n, removed = 0;

	n = scandir(root, &names, NULL, alphasort);
	if (n < 0)
		return errno == ENOENT ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *dir = NULL;
		const char *name = names[i]->d_name;
		RunDirState state;
		pid_t pid;

		if (vm_name_valid(name) && asprintf(&dir, "%s/%s", root, name) >= 0) {
			state = rundir_inspect(dir, &pid);
			if (state != RUNDIR_ABSENT && cb)
				cb(name, state, pid, userdata);
			if (state == RUNDIR_STALE &&
			    (!remove_stale || rundir_remove_if_stale(dir) > 0))
				removed++;
		}
		free(names[i]);
	}
	free(names);
	return removed;
}
