/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A program on a pseudo-terminal of its own: what the web view attaches for each websocket. */

#include <sys/types.h>

/*
 * view_pty_spawn() - run @argv with @envp as the session leader of a new pseudo-terminal of
 * @cols x @rows, its standard input, output and error the terminal; argv[0] is looked up
 * in PATH when it has no slash. The child gets an empty signal mask and default signal
 * actions. Returns 0 with the master (non-blocking, close-on-exec) in *@ret_master and the
 * child in *@ret_pid, or -errno.
 */
int view_pty_spawn(char *const argv[], char *const envp[], unsigned cols, unsigned rows,
		   int *ret_master, pid_t *ret_pid);

/* Tell the terminal behind @master its new size (the program gets SIGWINCH). */
int view_pty_resize(int master, unsigned cols, unsigned rows);
