/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-util.h"
#include "landlock-probe.h"
#include "macros.h"
#include "missing-landlock.h"

typedef enum ProbeStep {
	STEP_OPEN_DIR,
	STEP_CREATE_RULESET,
	STEP_NO_NEW_PRIVS,
	STEP_RESTRICT_SELF,
	STEP_CREATE_FILE,
	_STEP_MAX,
} ProbeStep;

static const char *const step_names[_STEP_MAX] = {
	[STEP_OPEN_DIR] = "open the probe directory", [STEP_CREATE_RULESET] = "create ruleset",
	[STEP_NO_NEW_PRIVS] = "set no_new_privs",     [STEP_RESTRICT_SELF] = "restrict self",
	[STEP_CREATE_FILE] = "create the probe file",
};

/* What the child sends back: a LandlockSupport, or -1 when a step failed that says
 * nothing about Landlock (then the probe as a whole failed). */
typedef struct ProbeReport {
	int support;
	int error;
	int step;
} ProbeReport;

static const char *const support_names[_LANDLOCK_SUPPORT_MAX] = {
	[LANDLOCK_UNSUPPORTED] = "unsupported",
	[LANDLOCK_PRESENT_NOT_ENFORCING] = "present_not_enforcing",
	[LANDLOCK_ENFORCING] = "enforcing",
};

const char *landlock_support_to_string(LandlockSupport s)
{
	if (s < 0 || s >= _LANDLOCK_SUPPORT_MAX)
		return NULL;
	return support_names[s];
}

static _noreturn_ void child_report(int fd, int support, int error, ProbeStep step)
{
	ProbeReport rep = {support, error, step};

	(void)!write(fd, &rep, sizeof(rep));
	_exit(0);
}

/* Runs in the forked child only: it ends restricted, so it must never return. */
static _noreturn_ void probe_child(const char *dir, int report_fd)
{
	struct landlock_ruleset_attr attr = {
		.handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG,
	};
	int dir_fd, ruleset_fd, fd;

	/* Resolve the directory before restricting, so the only thing that can refuse the
	 * create below is the ruleset, not a lookup the ruleset also covers. */
	dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		child_report(report_fd, -1, errno, STEP_OPEN_DIR);
	ruleset_fd = missing_landlock_create_ruleset(&attr, sizeof(attr), 0);
	if (ruleset_fd < 0)
		child_report(report_fd, LANDLOCK_UNSUPPORTED, errno, STEP_CREATE_RULESET);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_report(report_fd, -1, errno, STEP_NO_NEW_PRIVS);
	if (missing_landlock_restrict_self(ruleset_fd, 0) < 0)
		child_report(report_fd, LANDLOCK_UNSUPPORTED, errno, STEP_RESTRICT_SELF);
	fd = openat(dir_fd, "probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		child_report(report_fd, LANDLOCK_PRESENT_NOT_ENFORCING, 0, STEP_CREATE_FILE);
	if (errno == EACCES)
		child_report(report_fd, LANDLOCK_ENFORCING, 0, STEP_CREATE_FILE);
	child_report(report_fd, LANDLOCK_UNSUPPORTED, errno, STEP_CREATE_FILE);
}

static int probe_in_child(const char *dir, ProbeReport *ret)
{
	_cleanup_close_ int rfd = -EBADF;
	int fd = -EBADF, status;
	ssize_t n;
	pid_t pid;

	pid = fork_pipe(&fd);
	if (pid < 0)
		return pid;
	if (pid == 0)
		probe_child(dir, fd);
	rfd = fd;
	do
		n = read(rfd, ret, sizeof(*ret));
	while (n < 0 && errno == EINTR);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (n != (ssize_t)sizeof(*ret))
		return -EPROTO; /* the child died before it could say */
	return 0;
}

int landlock_probe(LandlockProbe *ret)
{
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX], file[PATH_MAX + 8];
	ProbeReport rep;
	int r;

	if (!tmp || *tmp != '/')
		tmp = "/tmp";
	if (snprintf(dir, sizeof(dir), "%s/berth-landlock-probe.XXXXXX", tmp) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	if (!mkdtemp(dir))
		return -errno;
	r = probe_in_child(dir, &rep);
	snprintf(file, sizeof(file), "%s/probe", dir);
	(void)unlink(file);
	(void)rmdir(dir);
	if (r < 0)
		return r;
	if (rep.support < 0)
		return rep.error > 0 ? -rep.error : -EIO;
	if (rep.support >= _LANDLOCK_SUPPORT_MAX || rep.step < 0 || rep.step >= _STEP_MAX)
		return -EPROTO;
	*ret = (LandlockProbe){
		.abi = landlock_abi_version(),
		.support = (LandlockSupport)rep.support,
		.error = rep.support == LANDLOCK_UNSUPPORTED ? rep.error : 0,
		.failed_step = rep.support == LANDLOCK_UNSUPPORTED ? step_names[rep.step] : NULL,
	};
	return 0;
}
