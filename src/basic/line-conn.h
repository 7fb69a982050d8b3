/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "evloop.h"

/*
 * LineConn: a newline-delimited connection on an EvLoop. Incoming bytes are split into
 * lines of at most @max_line bytes; a longer line closes the connection with -EMSGSIZE
 * (the peer controls line length, so it gets a hard cap). Outgoing lines are buffered up
 * to @max_out bytes; past that line_conn_write() fails with -ENOBUFS rather than grow.
 */

typedef struct LineConn LineConn;

/* One complete line, without its newline (NUL-terminated for convenience). */
typedef void (*line_conn_line_t)(LineConn *c, char *line, size_t len, void *userdata);
/* The connection ended: 0 on EOF, or -errno. The LineConn is freed right after. */
typedef void (*line_conn_close_t)(LineConn *c, int error, void *userdata);

/* Takes ownership of @fd (made non-blocking), also on failure. */
int line_conn_new(EvLoop *loop, int fd, size_t max_line, size_t max_out, line_conn_line_t on_line,
		  line_conn_close_t on_close, void *userdata, LineConn **ret);
/*
 * line_conn_set_skip_overlong() - for a peer whose over-long line is its mistake, not the
 * end of it (an MCP client's message): such a line is dropped instead, @on_overlong runs
 * once it has ended, and the lines after it are read as usual. Nothing of it is kept
 * beyond @max_line bytes.
 */
typedef void (*line_conn_overlong_t)(LineConn *c, void *userdata);
void line_conn_set_skip_overlong(LineConn *c, line_conn_overlong_t on_overlong);
/* At end of input, hand out a last line that has no newline before on_close runs. */
void line_conn_set_last_line(LineConn *c, bool deliver);

/* Queue @len bytes and a newline. */
int line_conn_write(LineConn *c, const char *line, size_t len);
/* Close once everything queued was written (on_close is called then). */
void line_conn_close_after_flush(LineConn *c);
/* Close now; on_close is not called. Accepts NULL; returns NULL. */
LineConn *line_conn_free(LineConn *c);
size_t line_conn_pending(const LineConn *c);
