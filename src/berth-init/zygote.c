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
/* A fork the zygote made in the template, waiting for the first Python app: its channel. */
static int spare_fd = -EBADF;

bool zygote_available(void)
{
	return zygote_pid > 0 && zygote_fd >= 0;
}

void zygote_stop(void)
{
	if (zygote_pid > 0)
		(void)kill(zygote_pid, SIGKILL); /* reaped by zygote_child_exited() */
	zygote_fd = safe_close(zygote_fd);
	spare_fd = safe_close(spare_fd); /* it reads the end of its channel, and exits */
	zygote_pid = -1;
}

bool zygote_child_exited(pid_t pid, int status)
{
	if (pid <= 0 || pid != zygote_pid)
		return false;
	journal_logf("the warm Python runtime ended (status %d); Python apps start cold", status);
	zygote_pid = -1;
	zygote_fd = safe_close(zygote_fd);
	spare_fd = safe_close(spare_fd);
	return true;
}

/*
 * The spare: the zygote forks it now (twice, as for an app), and it waits on a channel of
 * its own for the request a fork would have got. A restored VM's first Python app takes it
 * and skips the forks, about 0.1 s under emulation. Without it, the zygote forks.
 */
static void make_spare(void)
{
	char why[256];
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		journal_logf("no spare Python runtime: socketpair: %m");
		return;
	}
	r = send_with_fds(zygote_fd, 's', &sv[1], 1);
	safe_close(sv[1]);
	if (r < 0)
		snprintf(why, sizeof(why), "%s", strerror(-r));
	else
		r = template_wait_ready(sv[0], ZYGOTE_FORK_TIMEOUT_MSEC, why, sizeof(why));
	if (r < 0) {
		journal_logf("no spare Python runtime: %s", why);
		safe_close(sv[0]);
		return;
	}
	spare_fd = sv[0];
}

int zygote_start(char *why, size_t whylen)
{
	char *const argv[] = {(char *)"python3", (char *)ZYGOTE_PROGRAM, NULL};
	int r;

	if (access(ZYGOTE_PROGRAM, R_OK) < 0) {
		snprintf(why, whylen, "%s: %m", ZYGOTE_PROGRAM);
		return -errno;
	}
	r = template_spawn("/usr/bin/python3", argv, SOCK_SEQPACKET, ZYGOTE_FD, false, &zygote_fd,
			   why, whylen);
	if (r < 0)
		return r;
	zygote_pid = r;
	r = template_wait_ready(zygote_fd, ZYGOTE_READY_TIMEOUT_MSEC, why, whylen);
	if (r < 0) {
		zygote_stop();
		return r;
	}
	make_spare();
	return 0;
}

/*
 * Ask @channel (the spare's or the zygote's) for the process: one byte and its four
 * descriptors; it says "pid <n>\n" on its start socket once it is berth-init's child.
 * Returns the pid and the start socket in @ret_start, or a negative errno.
 */
static pid_t request_process(int channel, int out_fd, int err_fd, int report_fd, int *ret_start)
{
	int sv[2], r;
	char line[32];
	ssize_t n;
	long pid;
	char *end;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	r = send_with_fds(channel, 'f', (int[]){sv[1], out_fd, err_fd, report_fd}, 4);
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
	return n < 0 ? (int)n : -EPROTO;
}

pid_t zygote_fork(int out_fd, int err_fd, int report_fd, int *ret_start)
{
	pid_t pid;

	if (!zygote_available())
		return -ENOENT;
	if (spare_fd >= 0) {
		pid = request_process(spare_fd, out_fd, err_fd, report_fd, ret_start);
		spare_fd = safe_close(spare_fd); /* one app's */
		if (pid > 0)
			return pid;
		journal_logf("the spare Python runtime did not start (%s); forking the zygote",
			     strerror(-pid));
	}
	pid = request_process(zygote_fd, out_fd, err_fd, report_fd, ret_start);
	if (pid > 0)
		return pid;
	journal_logf("the warm Python runtime did not fork (%s); Python apps start cold",
		     strerror(-pid));
	zygote_stop();
	return pid;
}

int zygote_start_app(int start_fd, const char *dir, const char *cgroup, bool strict_cgroup,
		     char *const *env, size_t n)
{
	int r = template_write_start(start_fd, dir, cgroup, strict_cgroup, env, n);

	safe_close(start_fd);
	return r;
}
