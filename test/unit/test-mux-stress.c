/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two processes joined by a socketpair, one the host side and one the guest side of the
 * multiplexer, each with its own EvLoop and MuxIo. Every stream is bridged to a local
 * socketpair whose other end is an "app" endpoint in the same loop that sends a
 * deterministic byte pattern and checks, byte for byte, the pattern it receives.
 *
 *   - many concurrent streams with megabytes both ways, one of them with a reader that
 *     stops reading: all others must finish while it is stalled, then it resumes;
 *   - the guest side is killed mid-transfer: the host resets every stream cleanly and
 *     handshakes with a new guest process;
 *   - the host side is killed mid-transfer: the guest (tolerate_eof) resets, keeps polling
 *     and handshakes with a new host process.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evloop.h"
#include "mux-io.h"
#include "tests.h"

#define PORT_DATA 5000u
#define PORT_STALL 5001u
#define PORT_RESUME MUX_PORT_CONTROL
#define STALL_INDEX 1000u
#define ENDS_MAX 128
#define HEADER_SIZE 8

typedef struct Ctx Ctx;

typedef struct End {
	Ctx *ctx;
	int fd;
	EvSource *src;
	bool client; /* the opening side: it sends the header first */
	bool resume; /* the resume signal sender/receiver */
	uint32_t index;
	uint8_t hdr[HEADER_SIZE];
	size_t hdr_done;
	uint64_t send_seed, recv_seed;
	uint64_t to_send, sent;
	uint64_t to_recv, recvd;
	bool stalled;
	bool send_done, recv_eof, finished;
} End;

struct Ctx {
	EvLoop *e;
	MuxIo *io;
	MuxRole role;
	bool tolerate_eof;
	/* client side: streams to open once READY */
	unsigned n_streams;
	uint64_t stream_size; /* 0: size_of() */
	bool with_stall;
	/* server side: how many endpoints to expect */
	unsigned expect;

	End *ends[ENDS_MAX];
	unsigned n_ends;
	unsigned n_done, n_early;
	End *stall;
	bool stall_checked;
	uint64_t total_recv;
	pid_t kill_pid;
	uint64_t kill_after;
	bool killed;
	unsigned readies, resets, disconnects, absents;
	uint32_t epoch;
	bool quit_when_quiet;
	/* A peer process: quiet is not enough, it stays until the other side closes. Leaving
	 * as soon as its own bytes are out would close on bytes the other side still acks. */
	bool quit_when_closed;
	void (*on_progress)(Ctx *c);
};

/* Byte @k of the pattern for @seed: independent of how the stream is cut. */
static void pattern(uint64_t seed, uint64_t off, uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint64_t k = off + i, x = seed * 0x9E3779B97F4A7C15ull + (k >> 3);

		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 29;
		for (unsigned b = (unsigned)(k & 7); b < 8 && i < n; b++, i++)
			buf[i] = (uint8_t)(x >> (8 * b));
	}
}

static uint64_t size_of(uint32_t index, bool up)
{
	if (index == STALL_INDEX)
		return up ? 6u << 20 : 1u << 20;
	return (96u << 10) + (index % 8) * (48u << 10) + (up ? 0 : 4096);
}

static uint64_t seed_of(uint32_t index, bool up)
{
	return index * 2ull + (up ? 1 : 2);
}

static void end_setup(End *x, uint32_t index, uint64_t fixed)
{
	bool up = x->client; /* client→server is "up" */

	x->index = index;
	x->send_seed = seed_of(index, up);
	x->recv_seed = seed_of(index, !up);
	x->to_send = fixed ? fixed : size_of(index, up);
	x->to_recv = fixed ? fixed : size_of(index, !up);
}

static void ctx_check_quiet(Ctx *c);

static void end_finish(End *x, bool early)
{
	Ctx *c = x->ctx;

	if (x->finished)
		return;
	x->finished = true;
	x->src = ev_source_free(x->src);
	x->fd = safe_close(x->fd);
	if (early)
		c->n_early++;
	else if (!x->resume)
		c->n_done++;
	if (c->on_progress)
		c->on_progress(c);
}

static void end_update(End *x)
{
	uint32_t ev = 0;

	if (x->finished)
		return;
	if (x->send_done && x->recv_eof) {
		end_finish(x, false);
		return;
	}
	if (!x->recv_eof && !x->stalled)
		ev |= EPOLLIN;
	/* A server learns what to send from the header: nothing to write before it. */
	if (!x->send_done && (x->client || x->hdr_done == HEADER_SIZE))
		ev |= EPOLLOUT;
	if (ev == 0) {
		(void)ev_source_set_enabled(x->src, EV_OFF);
		return;
	}
	ASSERT_OK(ev_source_set_io_events(x->src, ev));
	ASSERT_OK(ev_source_set_enabled(x->src, EV_ON));
}

static void end_read(End *x)
{
	static uint8_t buf[64 * 1024], want[64 * 1024];
	Ctx *c = x->ctx;
	ssize_t n = read(x->fd, buf, sizeof(buf));
	size_t off = 0;

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		end_finish(x, true);
		return;
	}
	if (n == 0) {
		x->recv_eof = true;
		if (!x->resume &&
		    (x->recvd != x->to_recv || (!x->client && x->hdr_done < HEADER_SIZE)))
			end_finish(x, true);
		return;
	}
	if (x->resume) {
		/* The resume signal: let the stalled reader go. */
		ASSERT_TRUE(c->stall != NULL);
		c->stall->stalled = false;
		end_update(c->stall);
		x->recvd += (uint64_t)n;
		return;
	}
	if (!x->client && x->hdr_done < HEADER_SIZE) {
		size_t k = MIN((size_t)n, HEADER_SIZE - x->hdr_done);
		uint32_t index, kib;

		memcpy(x->hdr + x->hdr_done, buf, k);
		x->hdr_done += k;
		off = k;
		if (x->hdr_done < HEADER_SIZE)
			return;
		memcpy(&index, x->hdr, sizeof(index));
		memcpy(&kib, x->hdr + 4, sizeof(kib));
		end_setup(x, index, (uint64_t)kib << 10);
	}
	n -= (ssize_t)off;
	if (n == 0)
		return;
	if (x->recvd + (uint64_t)n > x->to_recv)
		TEST_FAIL("stream %u: %llu bytes too many", x->index,
			  (unsigned long long)(x->recvd + (uint64_t)n - x->to_recv));
	pattern(x->recv_seed, x->recvd, want, (size_t)n);
	if (memcmp(buf + off, want, (size_t)n) != 0)
		TEST_FAIL("stream %u: corrupt bytes near offset %llu", x->index,
			  (unsigned long long)x->recvd);
	x->recvd += (uint64_t)n;
	c->total_recv += (uint64_t)n;
	if (c->kill_pid > 0 && !c->killed && c->total_recv >= c->kill_after) {
		ASSERT_OK(kill(c->kill_pid, SIGKILL));
		c->killed = true;
	}
}

static void end_write(End *x)
{
	static uint8_t buf[64 * 1024];
	size_t n;
	ssize_t w;

	if (x->client && x->hdr_done < HEADER_SIZE) {
		w = send(x->fd, x->hdr + x->hdr_done, HEADER_SIZE - x->hdr_done, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno != EAGAIN)
				end_finish(x, true);
			return;
		}
		x->hdr_done += (size_t)w;
		if (x->hdr_done < HEADER_SIZE)
			return;
	}
	if (!x->client && x->hdr_done < HEADER_SIZE && !x->resume)
		return; /* the server learns what to send from the header */
	n = (size_t)MIN(x->to_send - x->sent, (uint64_t)sizeof(buf));
	if (n > 0) {
		pattern(x->send_seed, x->sent, buf, n);
		w = send(x->fd, buf, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno != EAGAIN)
				end_finish(x, true);
			return;
		}
		x->sent += (uint64_t)w;
	}
	if (x->sent == x->to_send) {
		(void)shutdown(x->fd, SHUT_WR);
		x->send_done = true;
	}
}

static int on_end(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	End *x = userdata;

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && !x->stalled)
		end_read(x);
	if (!x->finished && revents & (EPOLLOUT | EPOLLERR))
		end_write(x);
	end_update(x);
	return 0;
}

/* A local socketpair: one end for the bridge (returned), one for a new endpoint. */
static int end_new(Ctx *c, bool client, End **ret)
{
	int sp[2];
	End *x;

	ASSERT_TRUE(c->n_ends < ENDS_MAX);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp));
	x = calloc(1, sizeof(*x));
	ASSERT_NOT_NULL(x);
	x->ctx = c;
	x->fd = sp[1];
	x->client = client;
	ASSERT_OK(ev_add_io(c->e, &x->src, x->fd, EPOLLIN | EPOLLOUT, on_end, x));
	c->ends[c->n_ends++] = x;
	*ret = x;
	return sp[0];
}

static void open_client(Ctx *c, uint32_t port, uint32_t index)
{
	uint32_t kib = (uint32_t)(c->stream_size >> 10);
	End *x;
	int fd = end_new(c, true, &x);

	end_setup(x, index, c->stream_size);
	memcpy(x->hdr, &index, sizeof(index));
	memcpy(x->hdr + 4, &kib, sizeof(kib));
	ASSERT_OK(mux_io_open_bridge(c->io, port, fd));
	if (index == STALL_INDEX)
		c->stall = x;
}

static int on_accept(MuxIo *io, uint32_t port, void *userdata)
{
	Ctx *c = userdata;
	End *x;
	int fd = end_new(c, false, &x);

	if (port == PORT_STALL) {
		/* This reader does not read a byte until told to. */
		x->stalled = true;
		c->stall = x;
	} else if (port == PORT_RESUME) {
		x->resume = true;
		x->hdr_done = HEADER_SIZE;
		x->send_done = true;
		(void)shutdown(x->fd, SHUT_WR);
	}
	end_update(x);
	return fd;
}

static void on_state(MuxIo *io, MuxIoState state, int error, void *userdata)
{
	Ctx *c = userdata;

	switch (state) {
	case MUX_IO_READY:
		c->readies++;
		c->epoch = mux_get_epoch(mux_io_get_mux(io));
		for (unsigned i = 0; i < c->n_streams; i++)
			open_client(c, PORT_DATA, i);
		if (c->with_stall)
			open_client(c, PORT_STALL, STALL_INDEX);
		break;
	case MUX_IO_RESET:
		c->resets++;
		break;
	case MUX_IO_DISCONNECTED:
		c->disconnects++;
		break;
	case MUX_IO_HOST_ABSENT:
		c->absents++;
		break;
	case MUX_IO_IDLE:
	case MUX_IO_HANDSHAKE:
		break;
	}
	if (c->on_progress)
		c->on_progress(c);
}

/* Everything sent and received, every bridge closed both ways, nothing left to write. */
static bool ctx_quiet(Ctx *c)
{
	const uint8_t *p;

	return c->n_done >= c->expect && mux_io_get_n_bridges(c->io) == 0 &&
	       mux_output(mux_io_get_mux(c->io), &p) == 0;
}

static void ctx_check_quiet(Ctx *c)
{
	if (c->quit_when_quiet && ctx_quiet(c) &&
	    (!c->quit_when_closed || mux_io_get_state(c->io) == MUX_IO_DISCONNECTED))
		ev_exit(c->e, 0);
}

static int on_post(EvSource *s, void *userdata)
{
	ctx_check_quiet(userdata);
	return 0;
}

static int on_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	Ctx *c = userdata;
	MuxStats st;

	mux_get_stats(mux_io_get_mux(c->io), &st);
	TEST_FAIL("timeout (%s): done %u/%u early %u readies %u resets %u; channel state %d, "
		  "%u bridges, frames in %llu out %llu, stale %llu, protocol errors %llu",
		  c->role == MUX_ROLE_HOST ? "host" : "guest", c->n_done, c->expect, c->n_early,
		  c->readies, c->resets, (int)mux_io_get_state(c->io), mux_io_get_n_bridges(c->io),
		  (unsigned long long)st.frames_in, (unsigned long long)st.frames_out,
		  (unsigned long long)st.stale_frames, (unsigned long long)st.protocol_errors);
	return 0;
}

static void ctx_init(Ctx *c, MuxRole role, int transport, uint64_t timeout_usec)
{
	MuxIoConfig cfg = {
		.mux.role = role,
		.tolerate_eof = c->tolerate_eof,
		.eof_poll_usec = 20 * USEC_PER_MSEC,
		.on_state = on_state,
		.userdata = c,
	};

	c->role = role;
	ASSERT_OK(ev_loop_new(&c->e));
	ASSERT_OK(mux_io_new(c->e, &cfg, &c->io));
	ASSERT_OK(mux_io_listen(c->io, PORT_DATA, on_accept, c));
	ASSERT_OK(mux_io_listen(c->io, PORT_STALL, on_accept, c));
	ASSERT_OK(mux_io_listen(c->io, PORT_RESUME, on_accept, c));
	ASSERT_OK(ev_add_post(c->e, NULL, on_post, c));
	ASSERT_OK(ev_add_time_relative(c->e, NULL, timeout_usec, on_timeout, c));
	if (transport >= 0)
		ASSERT_OK(mux_io_set_transport(c->io, transport));
}

static void ctx_done(Ctx *c)
{
	c->io = mux_io_free(c->io);
	c->e = ev_loop_free(c->e);
	for (unsigned i = 0; i < c->n_ends; i++)
		free(c->ends[i]);
}

/* A peer process: serves or opens streams until everything is done and the other side has
 * closed, then exits 0. */
static _noreturn_ void run_peer(int fd, MuxRole role, unsigned n_streams, uint64_t size,
				unsigned expect)
{
	Ctx c = {.n_streams = n_streams,
		 .stream_size = size,
		 .expect = expect ? expect : n_streams,
		 .quit_when_quiet = true,
		 .quit_when_closed = true};

	ctx_init(&c, role, fd, 50 * USEC_PER_SEC);
	ASSERT_OK(ev_loop(c.e));
	ctx_done(&c);
	_exit(0);
}

static pid_t fork_peer(int *ret_fd, MuxRole role, unsigned n_streams, uint64_t size,
		       unsigned expect)
{
	int sp[2];
	pid_t pid;

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		close(sp[0]);
		run_peer(sp[1], role, n_streams, size, expect);
	}
	close(sp[1]);
	*ret_fd = sp[0];
	return pid;
}

static void wait_ok(pid_t pid)
{
	int status;

	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- many streams, one stalled ---- */

#define N_STREAMS 64

static void stall_progress(Ctx *c)
{
	End *x;
	int fd;

	if (c->stall_checked || c->n_done < N_STREAMS)
		return;
	/* Every ordinary stream finished, both ways. The stalled one cannot have: its reader
	 * has not read a byte, so its writer must be stuck far from the end. */
	ASSERT_NOT_NULL(c->stall);
	ASSERT_FALSE(c->stall->finished);
	ASSERT_TRUE(c->stall->sent < c->stall->to_send / 2);
	ASSERT_EQ(c->n_early, 0);
	c->stall_checked = true;
	/* Now tell the peer's stalled reader to go on. */
	fd = end_new(c, true, &x);
	x->resume = true;
	x->hdr_done = HEADER_SIZE;
	x->to_send = 1;
	x->send_seed = 0;
	ASSERT_OK(mux_io_open_bridge(c->io, PORT_RESUME, fd));
}

TEST(many_streams_both_ways_with_one_stalled_reader)
{
	Ctx c = {.n_streams = N_STREAMS,
		 .with_stall = true,
		 .expect = N_STREAMS + 1,
		 .quit_when_quiet = true,
		 .on_progress = stall_progress};
	uint64_t start = ev_time_now();
	int fd;
	pid_t pid = fork_peer(&fd, MUX_ROLE_GUEST, 0, 0, N_STREAMS + 1);

	ctx_init(&c, MUX_ROLE_HOST, fd, 50 * USEC_PER_SEC);
	ASSERT_OK(ev_loop(c.e));
	ASSERT_TRUE(c.stall_checked);
	ASSERT_TRUE(c.stall->finished);
	ASSERT_EQ(c.n_done, N_STREAMS + 1);
	ASSERT_EQ(c.n_early, 0);
	ASSERT_EQ(c.resets, 0);
	printf("# %u streams, %.1f MiB received by the host in %.2f s\n", N_STREAMS + 1,
	       (double)c.total_recv / (1 << 20), (double)(ev_time_now() - start) / 1e6);
	ctx_done(&c);
	wait_ok(pid);
}

/* ---- one side killed mid-transfer ---- */

#define KILL_STREAMS 8
#define KILL_SIZE (4u << 20)

static void kill_progress(Ctx *c)
{
	if (c->killed && c->n_early == KILL_STREAMS && (c->disconnects > 0 || c->absents > 0) &&
	    mux_io_get_n_bridges(c->io) == 0)
		ev_exit(c->e, 0);
}

TEST(guest_killed_mid_transfer_host_resets_and_rehandshakes)
{
	Ctx c = {.n_streams = KILL_STREAMS,
		 .stream_size = KILL_SIZE,
		 .kill_after = 2u << 20,
		 .on_progress = kill_progress};
	uint32_t first_epoch;
	int fd;

	c.kill_pid = fork_peer(&fd, MUX_ROLE_GUEST, 0, 0, KILL_STREAMS);
	ctx_init(&c, MUX_ROLE_HOST, fd, 50 * USEC_PER_SEC);
	ASSERT_OK(ev_loop(c.e));
	/* Every stream ended early, with the local ends closed, and the session reset. */
	ASSERT_TRUE(c.total_recv < (uint64_t)KILL_STREAMS * KILL_SIZE);
	ASSERT_EQ(c.n_done, 0);
	ASSERT_EQ(c.resets, 1);
	ASSERT_EQ(c.disconnects, 1);
	ASSERT_EQ(mux_io_get_state(c.io), MUX_IO_DISCONNECTED);
	ASSERT_EQ(waitpid(c.kill_pid, NULL, 0), c.kill_pid);
	first_epoch = c.epoch;

	/* A new guest process on a new connection: a new session under a new epoch. */
	c.kill_pid = fork_peer(&fd, MUX_ROLE_GUEST, 0, 0, 2);
	c.on_progress = NULL;
	c.killed = false;
	c.kill_after = UINT64_MAX;
	c.n_streams = 2;
	c.stream_size = 256u << 10;
	c.expect = 2;
	c.quit_when_quiet = true;
	ASSERT_OK(mux_io_set_transport(c.io, fd));
	ASSERT_OK(ev_loop(c.e));
	ASSERT_EQ(c.readies, 2);
	ASSERT_EQ(c.n_done, 2);
	ASSERT_TRUE(c.epoch != first_epoch);
	ctx_done(&c);
	wait_ok(c.kill_pid);
}

static int on_absent_check(EvSource *s, uint64_t usec, void *userdata)
{
	Ctx *c = userdata;

	/* Still polling, still holding the transport: no teardown while the host is away. */
	ASSERT_EQ(mux_io_get_state(c->io), MUX_IO_HOST_ABSENT);
	ev_exit(c->e, 0);
	return 0;
}

TEST(host_killed_mid_transfer_guest_resets_and_rehandshakes)
{
	Ctx c = {.tolerate_eof = true,
		 .expect = KILL_STREAMS,
		 .kill_after = 2u << 20,
		 .on_progress = kill_progress};
	int fd;

	/* The host (opener) is the child this time; the guest is us. */
	c.kill_pid = fork_peer(&fd, MUX_ROLE_HOST, KILL_STREAMS, KILL_SIZE, 0);
	ctx_init(&c, MUX_ROLE_GUEST, fd, 50 * USEC_PER_SEC);
	ASSERT_OK(ev_loop(c.e));
	ASSERT_EQ(c.n_done, 0);
	ASSERT_EQ(c.resets, 1);
	ASSERT_EQ(c.absents, 1);
	ASSERT_EQ(c.disconnects, 0);
	ASSERT_EQ(waitpid(c.kill_pid, NULL, 0), c.kill_pid);
	/* Several EOF polls later the guest still waits, transport attached. */
	ASSERT_OK(ev_add_time_relative(c.e, NULL, 150 * USEC_PER_MSEC, on_absent_check, &c));
	c.on_progress = NULL;
	ASSERT_OK(ev_loop(c.e));
	ASSERT_EQ(c.absents, 1);

	/* A new host process: the guest answers its HELLO and serves it. */
	c.kill_pid = fork_peer(&fd, MUX_ROLE_HOST, 2, 256u << 10, 0);
	c.killed = false;
	c.kill_after = UINT64_MAX;
	c.n_done = 0;
	c.expect = 2;
	c.quit_when_quiet = true;
	ASSERT_OK(mux_io_set_transport(c.io, fd));
	ASSERT_OK(ev_loop(c.e));
	ASSERT_EQ(c.readies, 2);
	ASSERT_EQ(c.n_done, 2);
	ctx_done(&c);
	wait_ok(c.kill_pid);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return tests_run();
}
