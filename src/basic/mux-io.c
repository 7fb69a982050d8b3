/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flow.h"
#include "log.h"
#include "mux-io.h"

/* Local reads stop while this much waits for the transport, and resume below the low mark;
 * this keeps the output queue (and the latency every stream sees) small. */
#define OUTPUT_HIGH (256u * 1024u)
#define OUTPUT_LOW (64u * 1024u)
#define EOF_POLL_DEFAULT (100 * USEC_PER_MSEC)
#define HELLO_RETRY_DEFAULT (500 * USEC_PER_MSEC)

typedef struct Bridge Bridge;

struct Bridge {
	MuxIo *io;
	MuxStream *stream;
	int fd;
	EvSource *source;
	/* Bytes from the peer not yet written to @fd, never more than our receive window;
	 * its eof is the peer's CLOSE, its shut that CLOSE passed on to @fd. */
	Flow in;
	bool local_eof; /* read() == 0 on @fd; CLOSE sent */
	/* The stream is gone, but the peer had sent all of it (its CLOSE came): what is
	 * buffered still goes to @fd, then EOF; nothing is read from @fd any more. */
	bool draining;
	Bridge *prev, *next;
};

typedef struct Listener {
	uint32_t port;
	mux_io_accept_handler_t cb;
	void *userdata;
} Listener;

struct MuxIo {
	EvLoop *loop;
	MuxIoConfig cfg;
	Mux *mux;
	MuxIoState state;

	int fd;
	bool fd_is_socket;
	EvSource *transport;
	EvSource *timer;
	bool host_absent;
	int down_error; /* transport failed; handled by the pump */
	/* Writing hit EPIPE or ECONNRESET: the peer closed, but what it sent before that is
	 * still ours to read. Output is dropped from here on; the read's EOF ends it. */
	int write_error;

	bool paused; /* local reads stopped: the output queue is over OUTPUT_HIGH */
	bool pumping, repump;

	Listener listeners[MUX_IO_LISTEN_MAX];
	size_t n_listeners;
	Bridge *bridges;
	unsigned n_bridges;
	uint8_t tmp[MUX_FRAME_PAYLOAD_MAX];
};

static void io_pump(MuxIo *io);

/* Write without SIGPIPE: a peer that went away is an error to handle, not a signal that
 * kills the supervisor. */
static ssize_t write_nosignal(int fd, bool is_socket, const void *buf, size_t len)
{
	if (is_socket)
		return send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	return write(fd, buf, len);
}

static bool fd_is_socket(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}
static void timer_arm(MuxIo *io, uint64_t usec);

static void set_state(MuxIo *io, MuxIoState state, int error)
{
	if (io->state == state && state != MUX_IO_RESET)
		return;
	io->state = state;
	if (io->cfg.on_state)
		io->cfg.on_state(io, state, error, io->cfg.userdata);
}

/* ---- bridges ---- */

static void bridge_free(Bridge *b)
{
	MuxIo *io = b->io;

	if (b->prev)
		b->prev->next = b->next;
	else
		io->bridges = b->next;
	if (b->next)
		b->next->prev = b->prev;
	io->n_bridges--;
	ev_source_free(b->source);
	safe_close(b->fd);
	if (b->stream) {
		mux_stream_set_userdata(b->stream, NULL);
		mux_stream_release(b->stream);
	}
	flow_done(&b->in);
	free(b);
}

static void bridge_abort(Bridge *b, int error)
{
	if (b->stream) {
		log_debug_errno(error, "Stream %u (port %u): local end failed, aborting: %m",
				mux_stream_get_id(b->stream), mux_stream_get_port(b->stream));
		(void)mux_stream_abort(b->stream, error);
	}
	bridge_free(b);
}

static void bridge_update(Bridge *b)
{
	MuxIo *io = b->io;
	uint32_t events = 0;

	if (!b->local_eof && !b->draining && !io->paused && io->state == MUX_IO_READY &&
	    mux_stream_get_credit(b->stream) > 0)
		events |= EPOLLIN;
	if (flow_wants_write(&b->in))
		events |= EPOLLOUT;
	if (events == 0) {
		(void)ev_source_set_enabled(b->source, EV_OFF);
		return;
	}
	(void)ev_source_set_io_events(b->source, events);
	(void)ev_source_set_enabled(b->source, EV_ON);
}

static void bridges_update_all(MuxIo *io)
{
	for (Bridge *b = io->bridges; b; b = b->next)
		bridge_update(b);
}

/* Write buffered peer bytes to the local fd and give the peer that much credit back.
 * Returns 1 when the bridge is finished (freed), 0, or -errno. */
static int bridge_flush_local(Bridge *b)
{
	ssize_t n = flow_write(&b->in, b->fd);

	if (n < 0)
		return (int)n;
	if (n > 0 && b->stream)
		(void)mux_stream_ack(b->stream, (size_t)n);
	(void)flow_pass_eof(&b->in, b->fd);
	if ((b->local_eof || b->draining) && b->in.shut) {
		bridge_free(b);
		return 1;
	}
	return 0;
}

/*
 * The stream was reset. Bytes the peer sent and ended with a CLOSE are delivered all the
 * same, as a socket's are after its peer closed: a session that ends because the peer went
 * away (a VM powering off after its last words) loses nothing that was sent in full. The
 * bridge is cut from the stream and only writes what it holds, at most a window. A stream
 * reset before its CLOSE was aborted, and its bytes go with it.
 */
static void bridge_on_reset(Bridge *b)
{
	int r;

	if (!b->in.eof || b->in.shut) {
		bridge_free(b);
		return;
	}
	mux_stream_set_userdata(b->stream, NULL);
	mux_stream_release(b->stream);
	b->stream = NULL;
	b->draining = true;
	r = bridge_flush_local(b);
	if (r < 0)
		bridge_free(b);
	else if (r == 0)
		bridge_update(b);
}

/* Move one read's worth from the local fd into the stream. Returns 1 if the bridge is gone. */
static int bridge_read_local(Bridge *b)
{
	MuxIo *io = b->io;
	size_t want;
	ssize_t n, w;
	int r;

	if (b->draining)
		return 0;
	want = MIN(mux_stream_get_credit(b->stream), sizeof(io->tmp));
	want = MIN(want, (size_t)mux_get_max_frame_out(io->mux));
	if (want == 0 || b->local_eof)
		return 0;
	n = read(b->fd, io->tmp, want);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		bridge_abort(b, -errno);
		return 1;
	}
	if (n == 0) {
		b->local_eof = true;
		(void)mux_stream_close(b->stream);
		r = bridge_flush_local(b);
		if (r < 0)
			bridge_abort(b, r);
		return r != 0;
	}
	w = mux_stream_write(b->stream, io->tmp, (size_t)n);
	if (w != n) {
		bridge_abort(b, w < 0 ? (int)w : -EIO);
		return 1;
	}
	return 0;
}

static int on_bridge_io(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Bridge *b = userdata;
	MuxIo *io = b->io;
	int r;

	if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
		r = bridge_flush_local(b);
		if (r < 0) {
			bridge_abort(b, r);
			goto out;
		}
		if (r > 0)
			goto out;
	}
	if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP) && bridge_read_local(b) > 0)
		goto out;
	bridge_update(b);
out:
	io_pump(io);
	return 0;
}

static int bridge_new(MuxIo *io, MuxStream *stream, int fd, Bridge **ret)
{
	Bridge *b;
	int flags, r;

	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->io = io;
	b->fd = fd;
	b->stream = stream;
	b->in = FLOW_INIT(io->cfg.mux.window);
	b->in.not_socket = !fd_is_socket(fd);
	r = ev_add_io(io->loop, &b->source, fd, EPOLLIN, on_bridge_io, b);
	if (r < 0) {
		free(b);
		return r;
	}
	b->next = io->bridges;
	if (io->bridges)
		io->bridges->prev = b;
	io->bridges = b;
	io->n_bridges++;
	mux_stream_set_userdata(stream, b);
	bridge_update(b);
	*ret = b;
	return 0;
}

static void bridge_on_data(Bridge *b, const uint8_t *data, size_t size)
{
	ssize_t n = flow_put(&b->in, data, size);
	int r;

	/* The core checked the peer's credit, so this always fits. */
	if (n < 0 || (size_t)n < size) {
		bridge_abort(b, n < 0 ? (int)n : -ENOBUFS);
		return;
	}
	r = bridge_flush_local(b);
	if (r < 0)
		bridge_abort(b, r);
	else if (r == 0)
		bridge_update(b);
}

/* ---- session events ---- */

static Listener *listener_find(MuxIo *io, uint32_t port)
{
	for (size_t i = 0; i < io->n_listeners; i++)
		if (io->listeners[i].port == port)
			return &io->listeners[i];
	return NULL;
}

static void on_open(MuxIo *io, MuxStream *s, uint32_t port)
{
	Listener *l = listener_find(io, port);
	Bridge *b;
	int fd, r;

	if (!l) {
		(void)mux_stream_refuse(s, -ECONNREFUSED);
		return;
	}
	fd = l->cb(io, port, l->userdata);
	if (fd < 0) {
		(void)mux_stream_refuse(s, fd);
		return;
	}
	r = mux_stream_accept(s);
	if (r < 0) {
		safe_close(fd);
		(void)mux_stream_refuse(s, r);
		return;
	}
	r = bridge_new(io, s, fd, &b);
	if (r < 0) {
		log_debug_errno(r, "Cannot bridge stream to port %u: %m", port);
		safe_close(fd);
		(void)mux_stream_abort(s, r);
		mux_stream_release(s);
	}
}

static void dispatch_event(MuxIo *io, const MuxEvent *ev)
{
	Bridge *b = ev->stream ? mux_stream_get_userdata(ev->stream) : NULL;

	switch (ev->type) {
	case MUX_EVENT_READY:
		set_state(io, MUX_IO_READY, 0);
		bridges_update_all(io);
		return;
	case MUX_EVENT_SESSION_RESET:
		set_state(io, MUX_IO_RESET, ev->error);
		if (io->fd >= 0 && !io->host_absent) {
			set_state(io, MUX_IO_HANDSHAKE, 0);
			timer_arm(io, io->cfg.hello_retry_usec);
		}
		return;
	case MUX_EVENT_OPEN:
		on_open(io, ev->stream, ev->port);
		return;
	case MUX_EVENT_OPEN_OK:
	case MUX_EVENT_WINDOW:
		break;
	case MUX_EVENT_OPEN_FAIL:
		if (b)
			bridge_free(b);
		else
			mux_stream_release(ev->stream);
		return;
	case MUX_EVENT_STREAM_RESET:
		if (b)
			bridge_on_reset(b);
		else
			mux_stream_release(ev->stream);
		return;
	case MUX_EVENT_DATA:
		if (b)
			bridge_on_data(b, ev->data, ev->size);
		return;
	case MUX_EVENT_CLOSE:
		if (b) {
			int r;

			b->in.eof = true;
			r = bridge_flush_local(b);
			if (r < 0)
				bridge_abort(b, r);
			if (r != 0)
				return;
		}
		break;
	}
	if (b)
		bridge_update(b);
}

/* ---- transport ---- */

static void transport_update(MuxIo *io)
{
	uint32_t events = 0;
	const uint8_t *p;
	uint8_t *q;

	if (!io->transport)
		return;
	if (io->host_absent) {
		(void)ev_source_set_enabled(io->transport, EV_OFF);
		return;
	}
	if (mux_input_space(io->mux, &q) > 0)
		events |= EPOLLIN;
	if (mux_output(io->mux, &p) > 0 && io->write_error == 0)
		events |= EPOLLOUT;
	if (events == 0) {
		(void)ev_source_set_enabled(io->transport, EV_OFF);
		return;
	}
	(void)ev_source_set_io_events(io->transport, events);
	(void)ev_source_set_enabled(io->transport, EV_ON);
}

/* Write what we can. Returns bytes written (0 on EAGAIN); failures go to down_error. */
static size_t transport_flush(MuxIo *io)
{
	size_t total = 0;

	while (io->fd >= 0 && !io->host_absent && io->down_error == 0) {
		const uint8_t *p;
		size_t len = mux_output(io->mux, &p);
		ssize_t n;

		if (len == 0)
			break;
		if (io->write_error != 0) {
			mux_output_advance(io->mux, len); /* nobody reads it */
			break;
		}
		n = write_nosignal(io->fd, io->fd_is_socket, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (io->fd_is_socket && (errno == EPIPE || errno == ECONNRESET))
				/* Read on: the EOF comes after whatever the peer sent. */
				io->write_error = -errno;
			else if (errno != EAGAIN)
				io->down_error = -errno;
			break;
		}
		mux_output_advance(io->mux, (size_t)n);
		total += (size_t)n;
	}
	return total;
}

static void timer_arm(MuxIo *io, uint64_t usec)
{
	(void)ev_source_set_time_relative(io->timer, usec);
	(void)ev_source_set_enabled(io->timer, EV_ONESHOT);
}

/* Close the transport and reset the session. With no transport there is nobody to talk
 * to: the HELLO the host queues now is dropped, mux_io_set_transport() queues a fresh one. */
static void transport_close(MuxIo *io, int error)
{
	const uint8_t *p;

	io->host_absent = false;
	io->write_error = 0;
	io->transport = ev_source_free(io->transport);
	io->fd = safe_close(io->fd);
	(void)ev_source_set_enabled(io->timer, EV_OFF);
	mux_start(io->mux, error);
	mux_output_advance(io->mux, mux_output(io->mux, &p));
}

/* The transport hit EOF or an error. */
static void transport_down(MuxIo *io)
{
	int error = io->down_error;

	io->down_error = 0;
	io->write_error = 0;
	if (io->cfg.tolerate_eof) {
		bool was_ready = mux_get_state(io->mux) == MUX_STATE_READY;

		/* No host client on the chardev right now. Keep the fd and look again later;
		 * whatever the next host gets from us starts with our answer to its HELLO. */
		if (io->state != MUX_IO_HOST_ABSENT)
			log_debug_errno(error, "Transport: host absent, polling: %m");
		io->host_absent = true;
		mux_start(io->mux, error);
		/* An EOF can also be the port's state flickering while the host stays (a restored
		 * VM's port reopens): that host, still in the session, learns of its end from
		 * this RESET and starts a new one instead of waiting on a guest that ignores it. */
		if (was_ready)
			mux_notify_reset(io->mux);
		timer_arm(io, io->cfg.eof_poll_usec);
		return;
	}
	log_debug_errno(error, "Transport lost: %m");
	transport_close(io, error);
}

static void dispatch_all(MuxIo *io)
{
	MuxEvent ev;

	while (mux_next_event(io->mux, &ev) > 0)
		dispatch_event(io, &ev);
}

/* Move everything as far as it goes: events out of the core, bytes to the transport, and
 * the epoll masks in line. Re-entry from callbacks is folded into the running pump. */
static void io_pump(MuxIo *io)
{
	bool was_paused = io->paused;
	const uint8_t *p;

	if (io->pumping) {
		io->repump = true;
		return;
	}
	io->pumping = true;
	do {
		io->repump = false;
		dispatch_all(io);
		if (transport_flush(io) > 0 && mux_output(io->mux, &p) < MUX_OUTPUT_PAUSE)
			io->repump =
				true; /* input parked behind a full output queue may move now */
		if (io->down_error != 0) {
			int error = io->down_error;

			transport_down(io);
			dispatch_all(io);
			set_state(io, io->host_absent ? MUX_IO_HOST_ABSENT : MUX_IO_DISCONNECTED,
				  error);
		}
	} while (io->repump);
	io->paused = mux_output(io->mux, &p) >= (io->paused ? OUTPUT_LOW : OUTPUT_HIGH);
	if (io->paused != was_paused)
		bridges_update_all(io);
	transport_update(io);
	io->pumping = false;
}

static int on_transport(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	MuxIo *io = userdata;

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		uint8_t *buf;
		size_t space = mux_input_space(io->mux, &buf);

		if (space > 0) {
			ssize_t n = read(fd, buf, space);

			if (n > 0)
				mux_input_commit(io->mux, (size_t)n);
			else if (n == 0)
				io->down_error = -ECONNRESET;
			else if (errno != EAGAIN && errno != EINTR)
				io->down_error = -errno;
		} else if (revents & (EPOLLHUP | EPOLLERR))
			/* Input is parked and the peer is gone: a level-triggered HUP would spin.
			 */
			io->down_error = -ECONNRESET;
	}
	io_pump(io);
	return 0;
}

static int on_timer(EvSource *s, uint64_t usec, void *userdata)
{
	MuxIo *io = userdata;

	if (io->fd < 0)
		return 0;
	if (io->host_absent) {
		/* Look at the port again; a read() of 0 brings us back here. */
		io->host_absent = false;
		timer_arm(io, io->cfg.eof_poll_usec);
	} else if (mux_get_state(io->mux) != MUX_STATE_READY) {
		if (mux_get_role(io->mux) == MUX_ROLE_HOST)
			mux_resend_hello(io->mux);
		timer_arm(io, io->cfg.hello_retry_usec);
	}
	io_pump(io);
	return 0;
}

/* ---- public API ---- */

int mux_io_new(EvLoop *loop, const MuxIoConfig *cfg, MuxIo **ret)
{
	MuxIo *io;
	int r;

	if (!loop || !cfg || !ret)
		return -EINVAL;
	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->loop = loop;
	io->cfg = *cfg;
	io->fd = -EBADF;
	if (io->cfg.eof_poll_usec == 0)
		io->cfg.eof_poll_usec = EOF_POLL_DEFAULT;
	if (io->cfg.hello_retry_usec == 0)
		io->cfg.hello_retry_usec = HELLO_RETRY_DEFAULT;
	if (io->cfg.mux.window == 0)
		io->cfg.mux.window = MUX_WINDOW_DEFAULT;
	r = mux_new(&io->cfg.mux, &io->mux);
	if (r >= 0)
		r = ev_add_time(loop, &io->timer, EV_USEC_INFINITY, on_timer, io);
	if (r < 0) {
		mux_io_free(io);
		return r;
	}
	(void)ev_source_set_enabled(io->timer, EV_OFF);
	*ret = io;
	return 0;
}

MuxIo *mux_io_free(MuxIo *io)
{
	if (!io)
		return NULL;
	while (io->bridges)
		bridge_free(io->bridges);
	ev_source_free(io->transport);
	ev_source_free(io->timer);
	safe_close(io->fd);
	mux_free(io->mux);
	free(io);
	return NULL;
}

/* Close the transport (session reset, MUX_IO_DISCONNECTED). */
static void mux_io_drop_transport(MuxIo *io)
{
	if (io->fd < 0)
		return;
	transport_close(io, -ECONNRESET);
	io_pump(io);
	set_state(io, MUX_IO_DISCONNECTED, -ECONNRESET);
}

int mux_io_set_transport(MuxIo *io, int fd)
{
	int flags, r;

	if (fd < 0)
		return -EBADF;
	mux_io_drop_transport(io);
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		r = -errno;
		safe_close(fd);
		return r;
	}
	r = ev_add_io(io->loop, &io->transport, fd, EPOLLIN, on_transport, io);
	if (r < 0) {
		safe_close(fd);
		return r;
	}
	io->fd = fd;
	io->fd_is_socket = fd_is_socket(fd);
	io->down_error = 0;
	io->write_error = 0;
	mux_start(io->mux, -ECONNRESET);
	set_state(io, MUX_IO_HANDSHAKE, 0);
	timer_arm(io, io->cfg.hello_retry_usec);
	io_pump(io);
	return 0;
}

int mux_io_listen(MuxIo *io, uint32_t port, mux_io_accept_handler_t cb, void *userdata)
{
	if (port == 0 || port > MUX_PORT_MAX || !cb)
		return -EINVAL;
	if (listener_find(io, port))
		return -EEXIST;
	if (io->n_listeners >= MUX_IO_LISTEN_MAX)
		return -ENOSPC;
	io->listeners[io->n_listeners++] = (Listener){port, cb, userdata};
	return 0;
}

int mux_io_unlisten(MuxIo *io, uint32_t port)
{
	Listener *l = listener_find(io, port);

	if (!l)
		return -ENOENT;
	*l = io->listeners[--io->n_listeners];
	return 0;
}

int mux_io_open_bridge(MuxIo *io, uint32_t port, int fd)
{
	MuxStream *s;
	Bridge *b;
	int r;

	if (fd < 0)
		return -EBADF;
	r = mux_open(io->mux, port, &s);
	if (r < 0) {
		safe_close(fd);
		return r;
	}
	r = bridge_new(io, s, fd, &b);
	if (r < 0) {
		safe_close(fd);
		mux_stream_release(s);
		return r;
	}
	io_pump(io);
	return 0;
}

MuxIoState mux_io_get_state(MuxIo *io)
{
	return io->state;
}

Mux *mux_io_get_mux(MuxIo *io)
{
	return io->mux;
}

unsigned mux_io_get_n_bridges(MuxIo *io)
{
	return io->n_bridges;
}
