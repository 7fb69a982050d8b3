/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "line-conn.h"
#include "macros.h"

struct LineConn {
	EvSource *source;
	int fd;
	char *in;
	size_t in_len, max_line;
	char *out;
	size_t out_len, out_alloc, max_out;
	bool closing, dispatching, freed;
	bool skipping;	/* inside an over-long line that on_overlong asked to drop */
	bool last_line; /* deliver an unterminated line at end of input */
	line_conn_overlong_t on_overlong;
	line_conn_line_t on_line;
	line_conn_close_t on_close;
	void *userdata;
};

static void update_events(LineConn *c)
{
	uint32_t events = c->closing ? 0 : EPOLLIN;

	if (c->out_len > 0)
		events |= EPOLLOUT;
	ev_source_set_io_events(c->source, events);
}

static void finish(LineConn *c, int error)
{
	line_conn_close_t cb = c->on_close;
	void *userdata = c->userdata;

	c->on_close = NULL;
	if (cb)
		cb(c, error, userdata);
	line_conn_free(c);
}

static int flush_out(LineConn *c)
{
	while (c->out_len > 0) {
		ssize_t n = write(c->fd, c->out, c->out_len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
	return 0;
}

/* Hand out every complete line in the input buffer. Returns -EMSGSIZE for an overlong one. */
static int split_lines(LineConn *c)
{
	size_t start = 0;

	for (size_t i = 0; i < c->in_len && !c->freed; i++) {
		if (c->in[i] != '\n')
			continue;
		if (c->skipping) {
			/* The end of a line that was dropped. */
			c->skipping = false;
			if (c->on_overlong)
				c->on_overlong(c, c->userdata);
		} else {
			c->in[i] = '\0';
			if (c->on_line)
				c->on_line(c, c->in + start, i - start, c->userdata);
		}
		start = i + 1;
	}
	if (c->freed)
		return 0;
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	if (c->skipping)
		c->in_len = 0; /* more of the dropped line */
	if (c->in_len <= c->max_line)
		return 0;
	if (!c->on_overlong)
		return -EMSGSIZE;
	c->skipping = true;
	c->in_len = 0;
	return 0;
}

/* End of input: the last line, if it had no newline and is wanted. */
static void last_line(LineConn *c)
{
	size_t len;

	if (!c->last_line || c->skipping || c->in_len == 0 || !c->on_line)
		return;
	len = c->in_len;
	c->in[len] = '\0';
	c->in_len = 0;
	c->on_line(c, c->in, len, c->userdata);
}

static int on_io(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	LineConn *c = userdata;
	int r = 0;

	c->dispatching = true;
	if (revents & EPOLLOUT) {
		r = flush_out(c);
		if (r == 0 && c->closing && c->out_len == 0)
			r = 1; /* flushed: close cleanly */
	}
	if (r == 0 && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing) {
		ssize_t n = read(fd, c->in + c->in_len, c->max_line + 1 - c->in_len);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			r = -errno;
		else if (n == 0) {
			last_line(c);
			r = 1;
		} else if (n > 0) {
			c->in_len += (size_t)n;
			r = split_lines(c);
		}
	} else if (r == 0 && (revents & (EPOLLHUP | EPOLLERR)) && c->out_len > 0)
		r = -EPIPE;
	c->dispatching = false;
	if (c->freed) {
		free(c);
		return 0;
	}
	if (r != 0) {
		finish(c, r > 0 ? 0 : r);
		return 0;
	}
	update_events(c);
	return 0;
}

int line_conn_new(EvLoop *loop, int fd, size_t max_line, size_t max_out, line_conn_line_t on_line,
		  line_conn_close_t on_close, void *userdata, LineConn **ret)
{
	LineConn *c;
	int r, flags;

	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(max_line + 1);
	if (!c || !c->in) {
		if (c)
			free(c);
		close(fd);
		return -ENOMEM;
	}
	*c = (LineConn){.fd = fd,
			.in = c->in,
			.max_line = max_line,
			.max_out = max_out,
			.on_line = on_line,
			.on_close = on_close,
			.userdata = userdata};
	r = ev_add_io(loop, &c->source, fd, EPOLLIN, on_io, c);
	if (r < 0) {
		free(c->in);
		free(c);
		close(fd);
		return r;
	}
	ev_source_set_io_fd_own(c->source, true);
	*ret = c;
	return 0;
}

int line_conn_write(LineConn *c, const char *line, size_t len)
{
	if (c->closing)
		return -EPIPE;
	if (c->out_len + len + 1 > c->max_out)
		return -ENOBUFS;
	if (c->out_len + len + 1 > c->out_alloc) {
		size_t want = MAX(c->out_alloc * 2, c->out_len + len + 1);
		char *p;

		want = MIN(MAX(want, (size_t)4096), c->max_out);
		p = realloc(c->out, want);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_alloc = want;
	}
	memcpy(c->out + c->out_len, line, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	update_events(c);
	return 0;
}

void line_conn_close_after_flush(LineConn *c)
{
	c->closing = true;
	if (c->out_len == 0) {
		if (!c->dispatching)
			finish(c, 0);
		else
			ev_source_set_io_events(c->source, EPOLLOUT);
		return;
	}
	update_events(c);
}

LineConn *line_conn_free(LineConn *c)
{
	if (!c || c->freed)
		return NULL;
	ev_source_free(c->source); /* closes the fd */
	free(c->in);
	free(c->out);
	c->in = c->out = NULL;
	if (c->dispatching) {
		c->freed = true; /* on_io frees the struct when it unwinds */
		return NULL;
	}
	free(c);
	return NULL;
}

void line_conn_set_skip_overlong(LineConn *c, line_conn_overlong_t on_overlong)
{
	c->on_overlong = on_overlong;
}

void line_conn_set_last_line(LineConn *c, bool deliver)
{
	c->last_line = deliver;
}

size_t line_conn_pending(const LineConn *c)
{
	return c->out_len;
}
