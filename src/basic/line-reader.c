/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "line-reader.h"
#include "macros.h"
#include "time-util.h"

#define READ_CHUNK 8192 /* the least a read asks for while the buffer may still grow */

void line_reader_init(LineReader *r, int fd, size_t max_line)
{
	*r = LINE_READER_INIT(fd, max_line);
}

void line_reader_done(LineReader *r)
{
	free(r->buf);
	*r = LINE_READER_INIT(-EBADF, r->max);
}

static char *hand_out(LineReader *r, size_t len, size_t *ret_len)
{
	char *line = r->buf + r->start;

	line[len] = '\0';
	if (ret_len)
		*ret_len = len;
	return line;
}

/* Room to read into: what was handed out moves away, and the buffer grows, a chunk or more
 * at a time, up to what one line of r->max bytes, its newline and a NUL need. */
static int make_room(LineReader *r)
{
	size_t limit = r->max + 2, want;
	char *b;

	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->alloc >= limit || r->alloc - r->end > READ_CHUNK)
		return 0;
	want = MIN(MAX(r->alloc * 2, (size_t)2 * READ_CHUNK), limit);
	b = realloc(r->buf, want);
	if (!b)
		return -ENOMEM;
	r->buf = b;
	r->alloc = want;
	return 0;
}

/* Wait for @r->fd until @deadline (-1: none); at least one poll, so that a timeout of 0
 * means "what is there now". 1 when readable, or -ETIME, -ECANCELED, -errno. */
static int wait_readable(LineReader *r, long long deadline, bool *polled)
{
	for (;;) {
		struct pollfd p[2] = {
			{.fd = r->fd, .events = POLLIN},
			{.fd = r->cancel_fd > 0 ? r->cancel_fd : -1, .events = POLLIN}};
		long long left = deadline < 0 ? -1 : MAX(deadline - (long long)now_ms(), 0LL);
		int n;

		if (*polled && left == 0)
			return -ETIME;
		n = poll(p, 2, (int)MIN(left, (long long)INT32_MAX));
		*polled = true;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (p[1].revents)
			return -ECANCELED;
		return 1;
	}
}

int line_reader_next(LineReader *r, int timeout_ms, char **ret_line, size_t *ret_len)
{
	long long deadline = timeout_ms < 0 ? -1 : (long long)now_ms() + timeout_ms;
	bool polled = false;

	for (;;) {
		size_t len = r->end - r->start;
		char *nl = len > 0 ? memchr(r->buf + r->start, '\n', len) : NULL;
		ssize_t n;
		int k;

		if (nl) {
			size_t line = (size_t)(nl - (r->buf + r->start));

			if (r->skipping) {
				/* The end of a line already refused. */
				r->start += line + 1;
				r->skipping = false;
				continue;
			}
			*ret_line = hand_out(r, line, ret_len);
			r->start += line + 1;
			return 1;
		}
		if (r->skipping && len > 0) {
			/* More of a line already refused. */
			r->start = r->end = 0;
			len = 0;
		} else if (len > r->max) {
			/* No newline within the cap: refuse the line, and drop the rest of it as
			 * it comes. */
			r->start = r->end = 0;
			r->skipping = true;
			return -EMSGSIZE;
		}
		if (r->eof) {
			r->skipping = false;
			if (len == 0 || !r->keep_partial) {
				r->start = r->end;
				return 0;
			}
			*ret_line = hand_out(r, len, ret_len);
			r->start = r->end;
			return 1;
		}
		k = make_room(r);
		if (k < 0)
			return k;
		k = wait_readable(r, deadline, &polled);
		if (k < 0)
			return k;
		n = read(r->fd, r->buf + r->end, r->alloc - 1 - r->end);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			r->eof = true;
		r->end += (size_t)n;
	}
}
