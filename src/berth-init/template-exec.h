/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "macros.h"

/*
 * The programs of the root image a template boot runs as root before any app exists: the
 * warm Python runtime (zygote.h) and Node's snapshot builder (node-snapshot.h).
 */

/*
 * exec_template_program() - in a forked child: an empty signal mask, stdin and stdout on
 * /dev/null (stderr stays berth-init's, unless @quiet), @keep_fd as fd @keep_as when
 * @keep_fd >= 0, "/" as the directory, a session of its own and an app's PATH and locale
 * (Python and Node fix their encodings at start); then exec @path with @argv. Never returns.
 */
_noreturn_ void exec_template_program(const char *path, char *const argv[], int keep_fd,
				      int keep_as, bool quiet);

/* Wait up to @msec for @fd to be readable: 0, -ETIMEDOUT or a negative errno. */
int wait_fd_readable(int fd, int msec);
