/* SPDX-License-Identifier: Apache-2.0 */
/* The warm Node runtime of a restored VM (node-warm.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evloop.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "node-warm.h"
#include "template-exec.h"
#include "time-util.h"

#define NODE_WARM_FD 3 /* its end of the socketpair, in the warm Node */

static pid_t warm_pid = -1;
static int warm_fd = -EBADF; /* berth-init's end: SOCK_STREAM */
static bool warm_ready;	     /* it said "ready": it can be handed an app */
static EvSource *warm_watch; /* a start in the background, until its answer */
static int64_t warm_since;

bool node_warm_available(void)
{
	return warm_pid > 0 && warm_fd >= 0 && warm_ready;
}

static void forget(void)
{
	warm_watch = ev_source_free(warm_watch);
	warm_fd = safe_close(warm_fd);
	warm_pid = -1;
	warm_ready = false;
}

void node_warm_stop(void)
{
	if (warm_pid > 0)
		(void)kill(warm_pid, SIGKILL); /* reaped by node_warm_child_exited() */
	forget();
}

bool node_warm_child_exited(pid_t pid, int status)
{
	if (pid <= 0 || pid != warm_pid)
		return false;
	journal_logf("the warm Node runtime ended (status %d); Node apps start the exec'd way",
		     status);
	forget();
	return true;
}

/* Fork and exec it; its answer comes on warm_fd. */
static int spawn(const char *snapshot_blob, char *why, size_t whylen)
{
	char *const with_blob[] = {(char *)"node", (char *)"--snapshot-blob", (char *)snapshot_blob,
				   (char *)NODE_WARM_PROGRAM, NULL};
	char *const without[] = {(char *)"node", (char *)NODE_WARM_PROGRAM, NULL};
	int sv[2], r;

	if (access(NODE_WARM_PROGRAM, R_OK) < 0 || access(NODE_WARM_ADDON, R_OK) < 0) {
		snprintf(why, whylen, "%s or %s: %m", NODE_WARM_PROGRAM, NODE_WARM_ADDON);
		return -errno;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, whylen, "socketpair: %m");
		return -errno;
	}
	warm_pid = fork();
	if (warm_pid < 0) {
		r = -errno;
		snprintf(why, whylen, "fork: %m");
		safe_close(sv[0]);
		safe_close(sv[1]);
		return r;
	}
	/* All of its stdio on /dev/null: a stream Node makes of a terminal holds a descriptor
	 * of its own, which the app's stderr put in place later would not replace. What goes
	 * wrong before it is ready, it says on the channel. */
	if (warm_pid == 0)
		exec_template_program("/usr/bin/node", snapshot_blob ? with_blob : without, sv[1],
				      NODE_WARM_FD, true);
	safe_close(sv[1]);
	warm_fd = sv[0];
	warm_since = now_ms();
	return 0;
}

/* Its answer, once warm_fd is readable: 0 for "ready", else why not (and it is stopped). */
static int take_answer(char *why, size_t whylen)
{
	char buf[256];
	ssize_t n = read(warm_fd, buf, sizeof(buf) - 1);

	if (n < 0)
		n = -errno;
	if (n == 5 && memcmp(buf, "ready", 5) == 0) {
		warm_ready = true;
		return 0;
	}
	if (n > 0) {
		buf[n] = '\0';
		for (char *c = buf; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				*c = '?';
	}
	snprintf(why, whylen, "it did not say it was ready (%s)",
		 n < 0	  ? strerror((int)-n)
		 : n == 0 ? "it ended"
			  : buf);
	node_warm_stop();
	return n < 0 ? (int)n : -EPROTO;
}

int node_warm_start(const char *snapshot_blob, char *why, size_t whylen)
{
	int r = spawn(snapshot_blob, why, whylen);

	if (r < 0)
		return r;
	r = wait_fd_readable(warm_fd, NODE_WARM_READY_TIMEOUT_MSEC);
	if (r < 0) {
		snprintf(why, whylen, "it did not say it was ready (%s)", strerror(-r));
		node_warm_stop();
		return r;
	}
	return take_answer(why, whylen);
}

static int on_answer(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	char why[300];

	warm_watch = ev_source_free(warm_watch);
	if (take_answer(why, sizeof(why)) < 0)
		journal_logf("no warm Node runtime for the next start: %s", why);
	else
		journal_event("warm_runtime_ready",
			      json_pack("{s:s, s:i, s:I}", "runtime", "node", "pid", (int)warm_pid,
					"ms", (json_int_t)(now_ms() - warm_since)));
	return 0;
}

void node_warm_start_background(EvLoop *loop, const char *snapshot_blob)
{
	char why[300];
	int r;

	if (warm_pid > 0)
		return; /* one there already, or on its way */
	r = spawn(snapshot_blob, why, sizeof(why));
	if (r >= 0 && (r = ev_add_io(loop, &warm_watch, warm_fd, EPOLLIN, on_answer, NULL)) < 0)
		snprintf(why, sizeof(why), "cannot watch it: %s", strerror(-r));
	if (r < 0) {
		journal_logf("no warm Node runtime for the next start: %s", why);
		node_warm_stop();
	}
}

/* One byte and the app's three descriptors. */
static int send_fds(int out_fd, int err_fd, int report_fd)
{
	int fds[3] = {out_fd, err_fd, report_fd};
	char control[CMSG_SPACE(sizeof(fds))] = {};
	struct iovec iov = {.iov_base = (char *)"s", .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = sizeof(control)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	return sendmsg(warm_fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

pid_t node_warm_take(int out_fd, int err_fd, int report_fd, const char *dir, const char *cgroup,
		     bool strict_cgroup, char *const *env, size_t n)
{
	pid_t pid = warm_pid;
	int r;

	if (!node_warm_available())
		return -ENOENT;
	r = send_fds(out_fd, err_fd, report_fd);
	if (r < 0) {
		journal_logf("the warm Node runtime did not take its app (%s); Node apps start "
			     "the exec'd way",
			     strerror(-r));
		node_warm_stop();
		return r;
	}
	/* From here on the process is the app's: whatever fails, it exits having run nothing
	 * of the app, and is reaped as the app. */
	r = loop_write(warm_fd, dir, strlen(dir) + 1);
	if (r >= 0)
		r = loop_write(warm_fd, cgroup, strlen(cgroup) + 1);
	if (r >= 0)
		r = loop_write(warm_fd, strict_cgroup ? "1" : "0", 2);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = loop_write(warm_fd, env[i], strlen(env[i]) + 1);
	/* A start cut short could still parse: the process must not run on it. */
	if (r < 0)
		(void)kill(pid, SIGKILL);
	forget();
	return pid;
}
