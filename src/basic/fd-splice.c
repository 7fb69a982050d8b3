/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "fd-splice.h"
#include "flow.h"
#include "macros.h"

typedef struct Side {
	FdSplice *splice;
	int fd;
	EvSource *source;
	Flow out; /* bytes read from this side, to write to the other */
} Side;

struct FdSplice {
	Side side[2];
	fd_splice_done_t done;
	void *userdata;
};

FdSplice *fd_splice_free(FdSplice *s)
{
	if (!s)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ev_source_free(s->side[i].source);
		safe_close(s->side[i].fd);
		flow_done(&s->side[i].out);
	}
	free(s);
	return NULL;
}

void fd_splice_bytes(const FdSplice *s, uint64_t ret[2])
{
	ret[0] = s->side[0].out.bytes;
	ret[1] = s->side[1].out.bytes;
}

static void update(FdSplice *s)
{
	for (int i = 0; i < 2; i++) {
		Side *me = &s->side[i], *peer = &s->side[!i];
		uint32_t ev = 0;

		if (flow_wants_read(&me->out))
			ev |= EPOLLIN;
		if (flow_wants_write(&peer->out))
			ev |= EPOLLOUT;
		(void)ev_source_set_io_events(me->source, ev);
		(void)ev_source_set_enabled(me->source, ev ? EV_ON : EV_OFF);
	}
}

/* Write what @from buffered to @to; pass EOF on once drained. Returns -errno on error. */
static int drain(Side *from, Side *to)
{
	ssize_t n = flow_write(&from->out, to->fd);

	if (n < 0)
		return (int)n;
	(void)flow_pass_eof(&from->out, to->fd);
	return 0;
}

static int on_io(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Side *me = userdata, *peer;
	FdSplice *s = me->splice;
	int r = 0;

	peer = &s->side[me == &s->side[0] ? 1 : 0];
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		ssize_t n = flow_read(&me->out, fd);

		r = n < 0 ? (int)n : 0;
	}
	if (r == 0)
		r = drain(me, peer);
	if (r == 0 && (revents & EPOLLOUT))
		r = drain(peer, me);
	if (r < 0 || (me->out.shut && peer->out.shut)) {
		if (s->done)
			s->done(s, r, s->userdata);
		fd_splice_free(s);
		return 0;
	}
	update(s);
	return 0;
}

int fd_splice_new(EvLoop *loop, int a, int b, const FdSpliceConfig *cfg, FdSplice **ret)
{
	FdSplice *s = calloc(1, sizeof(*s));
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
		s->side[i].out = FLOW_INIT(FD_SPLICE_BUFFER);
		if (flags >= 0)
			(void)fcntl(fds[i], F_SETFL, flags | O_NONBLOCK);
	}
	if (cfg) {
		s->done = cfg->done;
		s->userdata = cfg->userdata;
		if (cfg->first_len > FD_SPLICE_BUFFER)
			r = -ENOBUFS;
		else if (cfg->first_len > 0) {
			ssize_t n = flow_put(&s->side[0].out, cfg->first, cfg->first_len);

			r = n < 0 ? (int)n : 0;
		}
	}
	for (int i = 0; i < 2 && r >= 0; i++)
		r = ev_add_io(loop, &s->side[i].source, fds[i], EPOLLIN, on_io, &s->side[i]);
	if (r < 0) {
		fd_splice_free(s);
		return r;
	}
	/* Bytes to pass on at once make @b's side wait for EPOLLOUT too. */
	update(s);
	if (ret)
		*ret = s;
	return 0;
}
