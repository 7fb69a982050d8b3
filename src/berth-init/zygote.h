/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The warm Python runtime of a restored VM (docs/warm-start.md): a Python that imported the
 * SDK's runtime in the template boot and forks one process per Python app start.
 *
 * The zygote runs /usr/libexec/berth/python-zygote.py, talks only to berth-init over a
 * socketpair it inherited (no path an app could reach) and never reads anything of an app:
 * a request carries only descriptors. Its fork (forked once more, so that the app is
 * berth-init's child) tells berth-init its pid, then takes the app's start (directory,
 * cgroup, environment) from berth-init on a socket of its own, joins the cgroup and is
 * confined by agent-init's own code in place (libberth-confine.so) before the app's first
 * line. Every failure here means the app is started the cold way, by exec'ing agent-init.
 */

#define ZYGOTE_PROGRAM "/usr/libexec/berth/python-zygote.py"
#define ZYGOTE_READY_TIMEOUT_MSEC (120 * 1000) /* its imports, under emulation */
#define ZYGOTE_FORK_TIMEOUT_MSEC (10 * 1000)

/* In the template boot: start the zygote and wait until it has imported the runtime.
 * Returns 0, or a negative errno with @why set; then there is no zygote. */
int zygote_start(char *why, size_t whylen);

/* Is there a zygote to fork from? */
bool zygote_available(void);

/* No Python app needs it (or it misbehaved): end it and free its memory. */
void zygote_stop(void);

/*
 * zygote_fork() - a new process for a Python app, with @out_fd, @err_fd and @report_fd as
 * its stdout, stderr and agent-init's report pipe. Returns its pid (a child of berth-init)
 * and, in @ret_start, the socket zygote_start_app() writes its start to; or a negative
 * errno, and the zygote is stopped.
 */
pid_t zygote_fork(int out_fd, int err_fd, int report_fd, int *ret_start);

/*
 * zygote_start_app() - hand the forked process its start and close @start_fd: the app's
 * directory, cgroup (empty: none; @strict_cgroup: refuse to run outside it) and the
 * environment agent-init would have had, @env[0..n). Returns 0 or a negative errno (the
 * process is gone then, or will exit without running anything of the app).
 */
int zygote_start_app(int start_fd, const char *dir, const char *cgroup, bool strict_cgroup,
		     char *const *env, size_t n);

/* Is @pid the zygote? Reaped then, and forgotten. */
bool zygote_child_exited(pid_t pid, int status);
