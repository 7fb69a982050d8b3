/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow.h"
#include "macros.h"

int flow_alloc(Flow *f)
{
	if (!f->buf)
		f->buf = malloc(f->size);
	return f->buf ? 0 : -ENOMEM;
}

void flow_done(Flow *f)
{
	free(f->buf);
	f->buf = NULL;
	f->start = f->end = 0;
}

void flow_clear(Flow *f)
{
	f->start = f->end = 0;
}

/* Room for @want more bytes at the end, moving the buffered ones to the front when that
 * makes more. Returns the contiguous room, or -ENOMEM. */
static ssize_t flow_reserve(Flow *f, size_t want)
{
	if (flow_alloc(f) < 0)
		return -ENOMEM;
	if (f->start > 0 && f->size - f->end < want) {
		memmove(f->buf, f->buf + f->start, f->end - f->start);
		f->end -= f->start;
		f->start = 0;
	}
	return (ssize_t)(f->size - f->end);
}

ssize_t flow_put(Flow *f, const void *data, size_t len)
{
	ssize_t room;

	len = MIN(len, flow_room(f));
	if (len == 0)
		return 0;
	room = flow_reserve(f, len);
	if (room < 0)
		return room;
	memcpy(f->buf + f->end, data, len);
	f->end += len;
	return (ssize_t)len;
}

ssize_t flow_read(Flow *f, int from)
{
	ssize_t room, n;

	if (f->eof || flow_room(f) == 0)
		return 0;
	room = flow_reserve(f, flow_room(f));
	if (room < 0)
		return room;
	n = read(from, f->buf + f->end, (size_t)room);
	if (n > 0) {
		f->end += (size_t)n;
		return n;
	}
	if (n == 0) {
		f->eof = true;
		return 0;
	}
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

ssize_t flow_write(Flow *f, int to)
{
	size_t done = 0;

	while (f->start < f->end) {
		const uint8_t *p = f->buf + f->start;
		size_t len = f->end - f->start;
		ssize_t n = -1;

		/* A peer that went away is an error to handle, not a signal that kills us. */
		if (!f->not_socket) {
			n = send(to, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno == ENOTSOCK)
				f->not_socket = true;
		}
		if (f->not_socket)
			n = write(to, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		f->start += (size_t)n;
		f->bytes += (uint64_t)n;
		done += (size_t)n;
	}
	if (f->start == f->end)
		f->start = f->end = 0;
	return (ssize_t)done;
}

bool flow_pass_eof(Flow *f, int to)
{
	if (f->eof && !f->shut && flow_len(f) == 0) {
		/* Only a socket can take a half-close without losing its read side. */
		if (!f->not_socket)
			(void)shutdown(to, SHUT_WR);
		f->shut = true;
	}
	return f->shut;
}
