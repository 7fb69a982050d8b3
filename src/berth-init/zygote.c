/* SPDX-License-Identifier: Apache-2.0 */
/* The warm Python runtime of a restored VM (zygote.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "template-exec.h"
#include "time-util.h"
#include "zygote.h"

#define ZYGOTE_FD 3 /* its end of the socketpair, in the zygote */

static pid_t zygote_pid = -1;
static int zygote_fd = -EBADF; /* berth-init's end: SOCK_SEQPACKET */

bool zygote_available(void)
{
	return zygote_pid > 0 && zygote_fd >= 0;
}

void zygote_stop(void)
{
	if (zygote_pid > 0)
		(void)kill(zygote_pid, SIGKILL); /* reaped by zygote_child_exited() */
	zygote_fd = safe_close(zygote_fd);
	zygote_pid = -1;
}

bool zygote_child_exited(pid_t pid, int status)
{
	if (pid <= 0 || pid != zygote_pid)
		return false;
	journal_logf("the warm Python runtime ended (status %d); Python apps start cold", status);
	zygote_pid = -1;
	zygote_fd = safe_close(zygote_fd);
	return true;
}

static _noreturn_ void exec_zygote(int fd)
{
	char *const argv[] = {(char *)"python3", (char *)ZYGOTE_PROGRAM, NULL};

	exec_template_program("/usr/bin/python3", argv, fd, ZYGOTE_FD, false);
}

int zygote_start(char *why, size_t whylen)
{
	int sv[2];
	char buf[16];
	ssize_t n;
	int r;

	if (access(ZYGOTE_PROGRAM, R_OK) < 0) {
		snprintf(why, whylen, "%s: %m", ZYGOTE_PROGRAM);
		return -errno;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, whylen, "socketpair: %m");
		return -errno;
	}
	zygote_pid = fork();
	if (zygote_pid < 0) {
		r = -errno;
		snprintf(why, whylen, "fork: %m");
		safe_close(sv[0]);
		safe_close(sv[1]);
		return r;
	}
	if (zygote_pid == 0)
		exec_zygote(sv[1]);
	safe_close(sv[1]);
	zygote_fd = sv[0];
	r = wait_fd_readable(zygote_fd, ZYGOTE_READY_TIMEOUT_MSEC);
	n = r < 0 ? r : read(zygote_fd, buf, sizeof(buf) - 1);
	if (n < 0 && r >= 0)
		n = -errno;
	if (n != 5 || memcmp(buf, "ready", 5) != 0) {
		snprintf(why, whylen, "it did not say it was ready (%s)",
			 n < 0	  ? strerror((int)-n)
			 : n == 0 ? "it ended"
				  : "it said something else");
		zygote_stop();
		return n < 0 ? (int)n : -EPROTO;
	}
	return 0;
}

/* Send the request: one byte and the new process's four descriptors. */
static int send_fork(int start_peer, int out_fd, int err_fd, int report_fd)
{
	int fds[4] = {start_peer, out_fd, err_fd, report_fd};
	char control[CMSG_SPACE(sizeof(fds))] = {};
	struct iovec iov = {.iov_base = (char *)"f", .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = sizeof(control)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	return sendmsg(zygote_fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

pid_t zygote_fork(int out_fd, int err_fd, int report_fd, int *ret_start)
{
	int sv[2], r;
	char line[32];
	ssize_t n;
	long pid;
	char *end;

	if (!zygote_available())
		return -ENOENT;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	r = send_fork(sv[1], out_fd, err_fd, report_fd);
	safe_close(sv[1]);
	/* "pid <n>\n", once the process is berth-init's child. */
	if (r >= 0)
		r = wait_fd_readable(sv[0], ZYGOTE_FORK_TIMEOUT_MSEC);
	n = r < 0 ? r : read(sv[0], line, sizeof(line) - 1);
	if (n < 0 && r >= 0)
		n = -errno;
	if (n > 0) {
		line[n] = 0;
		errno = 0;
		pid = strneq(line, "pid ", 4) ? strtol(line + 4, &end, 10) : 0;
		if (errno == 0 && pid > 1 && *end == '\n') {
			*ret_start = sv[0];
			return (pid_t)pid;
		}
	}
	safe_close(sv[0]);
	journal_logf("the warm Python runtime did not fork (%s); Python apps start cold",
		     n < 0 ? strerror((int)-n) : "no pid");
	zygote_stop();
	return n < 0 ? (int)n : -EPROTO;
}

int zygote_start_app(int start_fd, const char *dir, const char *cgroup, bool strict_cgroup,
		     char *const *env, size_t n)
{
	/* NUL-terminated fields: the directory, the cgroup, "1" or "0", then the variables;
	 * the end of the stream ends them. */
	int r = loop_write(start_fd, dir, strlen(dir) + 1);

	if (r >= 0)
		r = loop_write(start_fd, cgroup, strlen(cgroup) + 1);
	if (r >= 0)
		r = loop_write(start_fd, strict_cgroup ? "1" : "0", 2);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = loop_write(start_fd, env[i], strlen(env[i]) + 1);
	safe_close(start_fd);
	return r < 0 ? r : 0;
}
