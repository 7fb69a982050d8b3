/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Running other programs from the host's programs: finding them in $PATH and collecting
 * what they print, with a deadline and a cap, so a hung or chatty tool cannot hang or flood
 * the caller; and the fork() with a pipe back that this and the probes build on.
 */

#include <sys/types.h>

/*
 * find_executable_in_path() - look @name up in $PATH, as execvp() would, but in absolute
 * entries only (a relative one names the current directory, which may be an app's).
 * Returns 0 and a malloc()ed path to an executable regular file in *@ret_path, -ENOENT when
 * $PATH has none (or is unset), -ENOMEM.
 */
int find_executable_in_path(const char *name, char **ret_path);

/* The same, passing over every candidate @accept says no to (the search goes on). */
typedef bool (*executable_accept_t)(const char *path, void *userdata);
int find_executable_in_path_if(const char *name, executable_accept_t accept, void *userdata,
			       char **ret_path);

/*
 * run_capture() - run @argv with stdin and stderr on /dev/null and collect its stdout.
 * @argv: argv[0] is the program's path; $PATH is not searched.
 * @timeout_ms: the child is killed (SIGKILL) and reaped when it has not exited by then.
 * @max_bytes: at most this much output is kept; the rest is read and discarded.
 * @ret_out: a NUL-terminated malloc()ed buffer with the output (may be empty).
 * @ret_status: the wait status (see waitpid(2)).
 * Returns 0, -ETIME after a timeout (nothing in @ret_out), or -errno.
 */
int run_capture(char *const argv[], int timeout_ms, size_t max_bytes, char **ret_out,
		int *ret_status);

/* run_capture()'s settings, for the callers that need more than a deadline and a cap. */
typedef struct RunCapture {
	int timeout_ms;
	size_t max_bytes;
	bool with_stderr; /* the child's standard error into the same buffer */
	int cancel_fd;	  /* > 0: the child is killed when this turns readable (-ECANCELED) */
} RunCapture;

/*
 * spawn_capture() - start @argv as run_capture_opts() does, without waiting, for a caller
 * that waits in its own event loop: stdin on /dev/null, stdout (and stderr when
 * @with_stderr) into the pipe whose read end is *@ret_fd. *@ret_pidfd names the child, to
 * watch, signal and reap it by. Returns 0 or -errno.
 */
int spawn_capture(char *const argv[], bool with_stderr, int *ret_pidfd, int *ret_fd);

/*
 * spawn_socket() - start @argv with its stdin and stdout on one end of a socket pair, for a
 * child that answers requests for as long as the caller keeps it: *@ret_fd is the other
 * end (a socket, so that writing to a child that died is an error to handle with
 * MSG_NOSIGNAL, not a SIGPIPE); stderr on /dev/null. *@ret_pidfd names the child, to
 * signal and reap it by. Returns 0 or -errno.
 */
int spawn_socket(char *const argv[], int *ret_pidfd, int *ret_fd);

/* pidfd_kill_and_reap() - SIGKILL the child of @pidfd (if it still runs) and reap it;
 * returns its wait status, as waitpid() gives it. */
int pidfd_kill_and_reap(int pidfd);

/*
 * run_capture_opts() - run_capture() with @o. After a timeout or a cancel *@ret_out
 * (when not NULL) still holds what the child printed until then; otherwise as above.
 */
int run_capture_opts(char *const argv[], const RunCapture *o, char **ret_out, int *ret_status);

/*
 * fork_pipe() - fork() with a close-on-exec pipe from the child back to the parent.
 * In the parent: returns the child's pid, *@ret_fd the read end. In the child: returns 0,
 * *@ret_fd the write end. The other end is closed on both sides. -errno when the pipe or
 * the fork fails (nothing is left open).
 */
pid_t fork_pipe(int *ret_fd);
