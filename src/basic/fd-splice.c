/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-splice.h"
#include "macros.h"

typedef struct Splice Splice;

typedef struct Side {
	Splice *splice;
	int fd;
	EvSource *source;
	char buf[FD_SPLICE_BUFFER]; /* bytes read from this side, to write to the other */
	size_t len;
	bool read_eof; /* this side sent EOF */
	bool shut;     /* the other side was told (SHUT_WR) */
} Side;

struct Splice {
	Side side[2];
	int ended; /* directions finished */
};

static void splice_free(Splice *s)
{
	for (int i = 0; i < 2; i++) {
		ev_source_free(s->side[i].source);
		safe_close(s->side[i].fd);
	}
	free(s);
}

static void update(Splice *s)
{
	for (int i = 0; i < 2; i++) {
		Side *me = &s->side[i], *peer = &s->side[!i];
		uint32_t ev = 0;

		if (!me->read_eof && me->len < sizeof(me->buf))
			ev |= EPOLLIN;
		if (peer->len > 0)
			ev |= EPOLLOUT;
		(void)ev_source_set_io_events(me->source, ev);
		(void)ev_source_set_enabled(me->source, ev ? EV_ON : EV_OFF);
	}
}

/* Write what @from buffered to @to; pass EOF on once drained. Returns -errno on error. */
static int drain(Side *from, Side *to)
{
	while (from->len > 0) {
		ssize_t n = send(to->fd, from->buf, from->len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == ENOTSOCK)
			n = write(to->fd, from->buf, from->len);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		memmove(from->buf, from->buf + n, from->len - (size_t)n);
		from->len -= (size_t)n;
	}
	if (from->read_eof && !from->shut) {
		(void)shutdown(to->fd, SHUT_WR);
		from->shut = true;
		from->splice->ended++;
	}
	return 0;
}

static int on_io(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Side *me = userdata, *peer;
	Splice *s = me->splice;
	int r = 0;

	peer = &s->side[me == &s->side[0] ? 1 : 0];
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && !me->read_eof &&
	    me->len < sizeof(me->buf)) {
		ssize_t n = read(fd, me->buf + me->len, sizeof(me->buf) - me->len);

		if (n > 0)
			me->len += (size_t)n;
		else if (n == 0)
			me->read_eof = true;
		else if (errno != EAGAIN && errno != EINTR)
			r = -errno;
	}
	if (r == 0)
		r = drain(me, peer);
	if (r == 0 && (revents & EPOLLOUT))
		r = drain(peer, me);
	if (r < 0 || s->ended == 2) {
		splice_free(s);
		return 0;
	}
	update(s);
	return 0;
}

int fd_splice_new(EvLoop *loop, int a, int b)
{
	Splice *s = calloc(1, sizeof(*s));
	int fds[2] = {a, b}, r = 0;

	if (!s) {
		safe_close(a);
		safe_close(b);
		return -ENOMEM;
	}
	for (int i = 0; i < 2; i++) {
		int flags = fcntl(fds[i], F_GETFL);

		s->side[i].splice = s;
		s->side[i].fd = fds[i];
		if (flags >= 0)
			(void)fcntl(fds[i], F_SETFL, flags | O_NONBLOCK);
	}
	for (int i = 0; i < 2 && r >= 0; i++)
		r = ev_add_io(loop, &s->side[i].source, fds[i], EPOLLIN, on_io, &s->side[i]);
	if (r < 0) {
		splice_free(s);
		return r;
	}
	return 0;
}
