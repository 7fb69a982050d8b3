/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A peer that goes away after its last words: what it sent in full, ended with a CLOSE,
 * reaches the local end even when the session dies before we read or delivered it. Two
 * MuxIo (host and guest) in one process, each with its own EvLoop, so the test decides
 * which side runs and when: that is what makes the orders below happen every time.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evloop.h"
#include "mux-io.h"
#include "tests.h"

#define PORT 6000u
#define SIZE (64u * 1024u) /* under the window: the guest sends it all without an ack */

typedef struct Side {
	EvLoop *e;
	MuxIo *io;
	int app; /* the test's end of the accepted stream's socketpair (guest) */
} Side;

static int on_accept(MuxIo *io, uint32_t port, void *userdata)
{
	Side *s = userdata;
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp));
	s->app = sp[1];
	return sp[0];
}

static void side_new(Side *s, MuxRole role, int transport)
{
	MuxIoConfig cfg = {.mux.role = role, .userdata = s};

	s->app = -EBADF;
	ASSERT_OK(ev_loop_new(&s->e));
	ASSERT_OK(mux_io_new(s->e, &cfg, &s->io));
	ASSERT_OK(mux_io_listen(s->io, PORT, on_accept, s));
	ASSERT_OK(mux_io_set_transport(s->io, transport));
}

static void side_free(Side *s)
{
	s->io = mux_io_free(s->io);
	s->e = ev_loop_free(s->e);
	s->app = safe_close(s->app);
}

/* Run one side's loop for a while (nothing here waits on the other side's progress). */
static void run(Side *s, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++)
		ASSERT_TRUE(ev_run(s->e, 5 * USEC_PER_MSEC) >= 0);
}

static void run_both(Side *a, Side *b, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		run(a, 1);
		run(b, 1);
	}
}

static void pattern(uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 7 + (i >> 8));
}

/*
 * A host and a guest in session, and a stream the host opened to the guest: its local end
 * for the test in *@ret_host_app, the guest's in g->app.
 */
static void setup(Side *h, Side *g, int *ret_host_app, int host_sndbuf)
{
	int t[2], sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t));
	side_new(h, MUX_ROLE_HOST, t[0]);
	side_new(g, MUX_ROLE_GUEST, t[1]);
	run_both(h, g, 20);
	ASSERT_EQ(mux_io_get_state(h->io), MUX_IO_READY);
	ASSERT_EQ(mux_io_get_state(g->io), MUX_IO_READY);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp));
	if (host_sndbuf > 0)
		/* The bridge's side holds little: most of what arrives waits in the bridge. */
		ASSERT_OK(setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &host_sndbuf,
				     sizeof(host_sndbuf)));
	ASSERT_OK(mux_io_open_bridge(h->io, PORT, sp[0]));
	run_both(h, g, 20);
	ASSERT_TRUE(g->app >= 0);
	*ret_host_app = sp[1];
}

/* The guest app sends SIZE bytes and ends its side. */
static void guest_app_sends(Side *g)
{
	uint8_t buf[SIZE];

	pattern(buf, sizeof(buf));
	ASSERT_EQ(write(g->app, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	ASSERT_OK(shutdown(g->app, SHUT_WR));
}

/* Read the host app's end to EOF, running the host meanwhile; check every byte. */
static void host_app_receives_all(Side *h, int fd)
{
	static uint8_t got[2 * SIZE], want[SIZE];
	size_t len = 0;
	uint64_t deadline = ev_time_now() + 10 * USEC_PER_SEC;

	for (;;) {
		ssize_t n = read(fd, got + len, sizeof(got) - len);

		if (n == 0)
			break;
		if (n > 0)
			len += (size_t)n;
		else
			ASSERT_EQ(errno, EAGAIN);
		ASSERT_TRUE(ev_time_now() < deadline);
		run(h, 1);
	}
	pattern(want, sizeof(want));
	ASSERT_EQ(len, (size_t)SIZE);
	ASSERT_TRUE(memcmp(got, want, SIZE) == 0);
}

TEST(a_closed_peers_last_bytes_are_read_after_a_failed_write)
{
	Side h, g;
	int host_app, sp[2];

	setup(&h, &g, &host_app, 0);
	/* Only the guest runs: its bytes and its CLOSE go into the transport, unread. */
	guest_app_sends(&g);
	run(&g, 40);
	side_free(&g);
	/* The host writes first (a new stream's OPEN, sent at once) and gets EPIPE; the
	 * bytes before the EOF are still read and delivered. */
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp));
	ASSERT_OK(mux_io_open_bridge(h.io, PORT, sp[0]));
	host_app_receives_all(&h, host_app);
	run(&h, 5);
	ASSERT_EQ(mux_io_get_state(h.io), MUX_IO_DISCONNECTED);
	ASSERT_EQ(mux_io_get_n_bridges(h.io), 0);
	safe_close(sp[1]);
	safe_close(host_app);
	side_free(&h);
}

TEST(bytes_a_bridge_holds_are_delivered_after_the_session_ends)
{
	Side h, g;
	int host_app;

	/* The host app reads nothing yet, and its socket holds a few KiB: the rest of what
	 * the guest sent waits in the host's bridge when the session goes. The host app has
	 * not ended its own side, so the stream is still open, and is reset. */
	setup(&h, &g, &host_app, 4096);
	guest_app_sends(&g);
	run_both(&h, &g, 60);
	side_free(&g);
	run(&h, 5);
	ASSERT_EQ(mux_io_get_state(h.io), MUX_IO_DISCONNECTED);
	ASSERT_EQ(mux_io_get_n_bridges(h.io), 1); /* draining */
	host_app_receives_all(&h, host_app);
	run(&h, 5);
	ASSERT_EQ(mux_io_get_n_bridges(h.io), 0);
	safe_close(host_app);
	side_free(&h);
}

TEST(a_stream_reset_before_its_close_is_dropped)
{
	Side h, g;
	int host_app;
	uint8_t buf[4096];
	size_t len = 0;

	setup(&h, &g, &host_app, 4096);
	/* The guest app sends but never ends its side: the session goes mid-stream. */
	pattern(buf, sizeof(buf));
	ASSERT_EQ(write(g.app, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	run_both(&h, &g, 20);
	side_free(&g);
	run(&h, 5);
	ASSERT_EQ(mux_io_get_state(h.io), MUX_IO_DISCONNECTED);
	ASSERT_EQ(mux_io_get_n_bridges(h.io), 0);
	for (;;) {
		ssize_t n = read(host_app, buf, sizeof(buf));

		if (n <= 0) {
			/* Whatever was delivered before the reset, then the end: no hang. */
			ASSERT_TRUE(n == 0 || errno == ECONNRESET);
			break;
		}
		len += (size_t)n;
	}
	ASSERT_TRUE(len <= sizeof(buf));
	safe_close(host_app);
	side_free(&h);
}

/* A guest whose port reads as EOF (no host on the chardev) waits for the host without
 * spinning: the port is readable and hung up all the time, so it leaves the epoll set and
 * is looked at again on its timer (every 100 ms). A loop that watched it would dispatch
 * on every iteration. */
TEST(a_guest_without_a_host_waits_without_spinning)
{
	MuxIoConfig cfg = {.mux.role = MUX_ROLE_GUEST, .tolerate_eof = true};
	unsigned dispatched = 0;
	EvLoop *e;
	MuxIo *io;
	int t[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t));
	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(mux_io_new(e, &cfg, &io));
	ASSERT_OK(mux_io_set_transport(io, t[1]));
	safe_close(t[0]);
	for (int i = 0; i < 400; i++) {
		int r = ev_run(e, USEC_PER_MSEC);

		ASSERT_TRUE(r >= 0);
		dispatched += (unsigned)r;
	}
	ASSERT_EQ(mux_io_get_state(io), MUX_IO_HOST_ABSENT);
	printf("# 400 iterations without a host: %u dispatched something\n", dispatched);
	/* The EOF itself and the timer's looks, not one per iteration. */
	ASSERT_TRUE(dispatched < 40);
	mux_io_free(io);
	ev_loop_free(e);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return tests_run();
}
