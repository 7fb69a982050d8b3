/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Reading an fd line by line, for a caller that waits for each line (berth's commands on
 * a VM's sockets, the audit trail's reader): every line is bounded, every wait may have a
 * deadline and a cancel fd. Pushed bytes from an event loop are cut by line-split.h and
 * line-conn.h instead. libc only.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct LineReader {
	int fd;		   /* not owned */
	int cancel_fd;	   /* > 0: a wait ends with -ECANCELED when this turns readable */
	size_t max;	   /* the longest line, its newline not counted */
	bool keep_partial; /* at EOF, what follows the last newline is a line too */
	/* The reader's own: */
	char *buf;
	size_t start, end, alloc; /* buf[start, end) is read and not handed out yet */
	bool eof, skipping;
} LineReader;

#define LINE_READER_INIT(fd_, max_line) \
	((LineReader){.fd = (fd_), .cancel_fd = -EBADF, .max = (max_line)})

void line_reader_init(LineReader *r, int fd, size_t max_line);
/* Free the buffer (the fd is the caller's). */
void line_reader_done(LineReader *r);

/*
 * line_reader_next() - the next line, without its newline and NUL-terminated in place, in
 * *@ret_line, its length in *@ret_len (may be NULL; a line may hold NULs). The line is
 * valid until the next call. @timeout_ms: -1 for no limit; 0 takes what is there now.
 * Returns 1 with a line, 0 at EOF, -ETIME, -ECANCELED, -ENOMEM, -errno, or -EMSGSIZE once
 * a line runs past r->max: the next call goes on after that line's newline, and no more
 * than r->max + 1 bytes are ever held.
 */
int line_reader_next(LineReader *r, int timeout_ms, char **ret_line, size_t *ret_len);
