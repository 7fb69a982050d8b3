/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macros.h"

/*
 * The programs of the root image a template boot runs as root before any app exists: the
 * warm Python runtime (zygote.h), Node's snapshot builder (node-snapshot.h) and the warm
 * Node (node-warm.h), and how berth-init talks with the runtimes: a socketpair only it
 * holds, a "ready" when they are, descriptors passed with a byte.
 */

/*
 * exec_template_program() - in a forked child: an empty signal mask, stdin and stdout on
 * /dev/null (stderr stays berth-init's, unless @quiet), @keep_fd as fd @keep_as when
 * @keep_fd >= 0, "/" as the directory, a session of its own and an app's PATH and locale
 * (Python and Node fix their encodings at start); then exec @path with @argv. Never returns.
 */
_noreturn_ void exec_template_program(const char *path, char *const argv[], int keep_fd,
				      int keep_as, bool quiet);

/*
 * template_spawn() - start @path with @argv as exec_template_program() does, its end of a
 * new socketpair of @type (SOCK_STREAM, SOCK_SEQPACKET) as fd @keep_as. Returns the pid
 * and our end in @ret_fd, or a negative errno with @why set.
 */
pid_t template_spawn(const char *path, char *const argv[], int type, int keep_as, bool quiet,
		     int *ret_fd, char *why, size_t whylen);

/*
 * template_read_ready() - what a program started so said on @fd, readable now: 0 for
 * "ready", else -EPROTO (or the read's -errno) with @why saying what came instead, in
 * printable characters.
 */
int template_read_ready(int fd, char *why, size_t whylen);

/* The same, waiting at most @msec for it. */
int template_wait_ready(int fd, int msec, char *why, size_t whylen);

/*
 * template_write_start() - an app's start, as a warm runtime reads it: NUL-terminated
 * fields, the app's directory, its cgroup (empty: none), "1" or "0" for a strict one, then
 * the environment's NAME=VALUE entries; the end of the stream ends them (the caller closes
 * or shuts down @fd). Returns 0 or a negative errno.
 */
int template_write_start(int fd, const char *dir, const char *cgroup, bool strict_cgroup,
			 char *const *env, size_t n);

/* Send @byte with the descriptors @fds[0..@n) over @fd. Returns 0 or a negative errno. */
int send_with_fds(int fd, char byte, const int *fds, size_t n);

/* Wait up to @msec for @fd to be readable: 0, -ETIMEDOUT or a negative errno. */
int wait_fd_readable(int fd, int msec);
