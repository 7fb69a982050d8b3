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

	if (access(NODE_WARM_PROGRAM, R_OK) < 0 || access(NODE_WARM_ADDON, R_OK) < 0) {
		snprintf(why, whylen, "%s or %s: %m", NODE_WARM_PROGRAM, NODE_WARM_ADDON);
		return -errno;
	}
	/* All of its stdio on /dev/null: a stream Node makes of a terminal holds a descriptor
	 * of its own, which the app's stderr put in place later would not replace. What goes
	 * wrong before it is ready, it says on the channel. */
	pid_t pid = template_spawn("/usr/bin/node", snapshot_blob ? with_blob : without,
				   SOCK_STREAM, NODE_WARM_FD, true, &warm_fd, why, whylen);

	if (pid < 0)
		return pid;
	warm_pid = pid;
	warm_since = now_ms();
	return 0;
}

/* Its answer, once warm_fd is readable: 0 for "ready", else why not (and it is stopped). */
static int take_answer(char *why, size_t whylen)
{
	int r = template_read_ready(warm_fd, why, whylen);

	if (r < 0)
		node_warm_stop();
	else
		warm_ready = true;
	return r;
}

int node_warm_start(const char *snapshot_blob, char *why, size_t whylen)
{
	int r = spawn(snapshot_blob, why, whylen);

	if (r < 0)
		return r;
	r = template_wait_ready(warm_fd, NODE_WARM_READY_TIMEOUT_MSEC, why, whylen);
	if (r < 0) {
		node_warm_stop();
		return r;
	}
	warm_ready = true;
	return 0;
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

void node_warm_rehearse(void)
{
	if (node_warm_available() && write(warm_fd, "r", 1) != 1)
		journal_logf("the warm Node runtime was not told to rehearse: %m");
}

pid_t node_warm_take(int out_fd, int err_fd, int report_fd, const char *dir, const char *cgroup,
		     bool strict_cgroup, char *const *env, size_t n)
{
	pid_t pid = warm_pid;
	int r;

	if (!node_warm_available())
		return -ENOENT;
	r = send_with_fds(warm_fd, 's', (const int[]){out_fd, err_fd, report_fd}, 3);
	if (r < 0) {
		journal_logf("the warm Node runtime did not take its app (%s); Node apps start "
			     "the exec'd way",
			     strerror(-r));
		node_warm_stop();
		return r;
	}
	/* From here on the process is the app's: whatever fails, it exits having run nothing
	 * of the app, and is reaped as the app. */
	r = template_write_start(warm_fd, dir, cgroup, strict_cgroup, env, n);
	/* A start cut short could still parse: the process must not run on it. */
	if (r < 0)
		(void)kill(pid, SIGKILL);
	forget();
	return pid;
}
