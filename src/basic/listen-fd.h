/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Socket activation, the way berth-init starts the context daemons (docs/context.md): it
 * binds and listens on a daemon's socket itself, then starts the daemon with that socket
 * as descriptor 3 and BERTH_LISTEN_FD=3, so that apps may connect before the daemon is
 * up; the kernel queues them until it accepts. agent-init lets exactly that descriptor
 * through its exec.
 */

#define LISTEN_FD_ENV "BERTH_LISTEN_FD"
#define LISTEN_FD 3

/* Is @fd a listening unix stream socket? */
int listen_fd_is_listening_unix(int fd);

/*
 * listen_fd_take() - the listening socket this process was given: LISTEN_FD, made
 * non-blocking and close-on-exec, or -ENOENT when BERTH_LISTEN_FD is unset, or -EBADF
 * when it names anything but a listening unix stream socket on LISTEN_FD. The variable is
 * removed either way, so that no child takes it too.
 */
int listen_fd_take(void);
