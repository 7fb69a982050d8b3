/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mux.h"
#include "tests.h"

/* A side of a connection under test: a Mux plus what its events delivered. */
typedef struct Sink {
	uint8_t data[256 * 1024];
	size_t len;
	bool closed; /* CLOSE received */
	int error;   /* STREAM_RESET / OPEN_FAIL */
	bool opened; /* OPEN_OK received */
	bool manual_ack;
} Sink;

typedef struct Peer {
	Mux *m;
	int ready, session_resets, windows;
	int last_reset_error;
	bool refuse;	 /* refuse incoming opens */
	bool leave_open; /* do not answer incoming opens */
	uint32_t last_port;
	MuxStream *last_incoming;
	Sink sinks[8];
	size_t n_sinks;
	Sink scratch; /* for streams the test gave no sink */
} Peer;

static void peer_init(Peer *p, MuxRole role, uint32_t epoch, uint32_t window)
{
	MuxConfig c = {.role = role, .test_epoch = epoch, .window = window};

	memset(p, 0, sizeof(*p));
	ASSERT_OK(mux_new(&c, &p->m));
}

static Sink *sink_new(Peer *p)
{
	ASSERT_TRUE(p->n_sinks < ELEMENTSOF(p->sinks));
	return &p->sinks[p->n_sinks++];
}

static void peer_drain(Peer *p)
{
	MuxEvent ev;

	while (mux_next_event(p->m, &ev) > 0) {
		Sink *k = ev.stream ? mux_stream_get_userdata(ev.stream) : NULL;

		if (ev.stream && !k) {
			k = &p->scratch;
			k->len = 0;
		}

		switch (ev.type) {
		case MUX_EVENT_READY:
			p->ready++;
			break;
		case MUX_EVENT_SESSION_RESET:
			p->session_resets++;
			p->last_reset_error = ev.error;
			break;
		case MUX_EVENT_OPEN:
			p->last_port = ev.port;
			p->last_incoming = ev.stream;
			if (p->leave_open)
				break;
			if (p->refuse) {
				ASSERT_OK(mux_stream_refuse(ev.stream, -ECONNREFUSED));
				p->last_incoming = NULL;
				break;
			}
			ASSERT_OK(mux_stream_accept(ev.stream));
			mux_stream_set_userdata(ev.stream, sink_new(p));
			break;
		case MUX_EVENT_OPEN_OK:
			k->opened = true;
			break;
		case MUX_EVENT_OPEN_FAIL:
		case MUX_EVENT_STREAM_RESET:
			k->error = ev.error;
			break;
		case MUX_EVENT_DATA:
			ASSERT_TRUE(k->len + ev.size <= sizeof(k->data));
			memcpy(k->data + k->len, ev.data, ev.size);
			k->len += ev.size;
			if (!k->manual_ack)
				ASSERT_OK(mux_stream_ack(ev.stream, ev.size));
			break;
		case MUX_EVENT_CLOSE:
			k->closed = true;
			break;
		case MUX_EVENT_WINDOW:
			p->windows++;
			break;
		}
	}
}

/* Move @from's output into @to's input. Returns bytes moved. */
static size_t pump(Peer *from, Peer *to)
{
	size_t total = 0;

	for (;;) {
		const uint8_t *buf;
		size_t n = mux_output(from->m, &buf), k;

		if (n == 0)
			break;
		k = mux_feed(to->m, buf, n);
		if (k == 0) {
			peer_drain(to);
			k = mux_feed(to->m, buf, n);
			if (k == 0)
				break;
		}
		mux_output_advance(from->m, k);
		total += k;
	}
	peer_drain(to);
	return total;
}

static void exchange(Peer *a, Peer *b)
{
	for (int i = 0; i < 100; i++)
		if (pump(a, b) + pump(b, a) == 0)
			return;
	TEST_FAIL("no quiescence");
}

static void connect_pair(Peer *h, Peer *g)
{
	mux_start(h->m, 0);
	mux_start(g->m, 0);
	exchange(h, g);
	ASSERT_EQ(mux_get_state(h->m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(g->m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_epoch(h->m), mux_get_epoch(g->m));
}

static size_t raw_frame(uint8_t *buf, uint8_t kind, uint32_t epoch, uint32_t stream,
			const void *payload, uint32_t len)
{
	MuxFrameHeader h = {.kind = kind, .epoch = epoch, .stream = stream, .length = len};

	mux_header_encode(&h, buf);
	if (len > 0)
		memcpy(buf + MUX_HEADER_SIZE, payload, len);
	return MUX_HEADER_SIZE + len;
}

static size_t raw_u32(uint8_t *buf, uint8_t kind, uint32_t epoch, uint32_t stream, uint32_t v)
{
	uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};

	return raw_frame(buf, kind, epoch, stream, p, 4);
}

static void peers_free(Peer *a, Peer *b)
{
	mux_free(a->m);
	mux_free(b->m);
}

TEST(header_roundtrip_and_rejects)
{
	MuxFrameHeader h = {.kind = MUX_KIND_DATA, .epoch = 0xdeadbeef, .stream = 7, .length = 9},
		       d;
	uint8_t b[MUX_HEADER_SIZE];

	mux_header_encode(&h, b);
	/* Little-endian on the wire. */
	ASSERT_EQ(b[0], 'B');
	ASSERT_EQ(b[1], 'M');
	ASSERT_EQ(b[4], 0xef);
	ASSERT_EQ(b[8], 7);
	ASSERT_OK(mux_header_decode(b, &d));
	ASSERT_EQ(d.kind, MUX_KIND_DATA);
	ASSERT_EQ(d.epoch, 0xdeadbeef);
	ASSERT_EQ(d.stream, 7);
	ASSERT_EQ(d.length, 9);

	b[0] = 'X';
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h.kind = 0;
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h.kind = _MUX_KIND_MAX;
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h = (MuxFrameHeader){
		.kind = MUX_KIND_DATA, .stream = 1, .length = MUX_FRAME_PAYLOAD_MAX + 1};
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h.length = 0; /* empty DATA */
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h = (MuxFrameHeader){.kind = MUX_KIND_WINDOW, .stream = 1, .length = 8};
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h = (MuxFrameHeader){.kind = MUX_KIND_DATA, .stream = 0, .length = 1};
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h = (MuxFrameHeader){.kind = MUX_KIND_HELLO, .stream = 3, .length = MUX_HELLO_SIZE};
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h = (MuxFrameHeader){.kind = MUX_KIND_CLOSE, .flags = 1, .stream = 3};
	mux_header_encode(&h, b);
	ASSERT_ERROR(mux_header_decode(b, &d), EBADMSG);
	h.flags = 0;
	mux_header_encode(&h, b);
	ASSERT_OK(mux_header_decode(b, &d));
}

TEST(wire_errors_map_both_ways)
{
	ASSERT_EQ(mux_error_from_wire((uint32_t)mux_error_to_wire(-ECONNREFUSED)), -ECONNREFUSED);
	ASSERT_EQ(mux_error_from_wire((uint32_t)mux_error_to_wire(-EMFILE)), -EMFILE);
	ASSERT_EQ(mux_error_from_wire((uint32_t)mux_error_to_wire(-E2BIG)), -EIO);
	ASSERT_EQ(mux_error_from_wire(12345), -EIO);
}

TEST(handshake)
{
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 100, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	ASSERT_ERROR(mux_open(h.m, 5000, &(MuxStream *){NULL}), ENOTCONN);
	connect_pair(&h, &g);
	ASSERT_EQ(h.ready, 1);
	ASSERT_EQ(g.ready, 1);
	ASSERT_EQ(mux_get_epoch(g.m), 100);
	ASSERT_EQ(h.session_resets + g.session_resets, 0);
	/* A repeated host HELLO of the same epoch changes nothing. */
	mux_resend_hello(h.m); /* no-op when ready */
	exchange(&h, &g);
	ASSERT_EQ(g.ready, 1);
	peers_free(&h, &g);
}

TEST(stale_bytes_before_hello_are_discarded)
{
	uint8_t junk[4096];
	size_t n = 0;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 500, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	mux_start(h.m, 0);
	mux_start(g.m, 0);
	/* What a previous connection left in the port: whole frames of an older epoch, some
	 * noise and a truncated frame. */
	n += raw_u32(junk + n, MUX_KIND_OPEN, 499, 2, 1026);
	n += raw_frame(junk + n, MUX_KIND_DATA, 499, 2, "stale-data", 10);
	for (int i = 0; i < 100; i++)
		junk[n++] = (uint8_t)(i * 37);
	n += raw_frame(junk + n, MUX_KIND_DATA, 499, 2, "truncated-frame", 15) - 7;
	ASSERT_EQ(mux_feed(h.m, junk, n), n);
	peer_drain(&h);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_SYNC);
	exchange(&h, &g);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_READY);
	ASSERT_EQ(h.ready, 1);
	{
		MuxStats st;

		mux_get_stats(h.m, &st);
		ASSERT_TRUE(st.sync_discarded >= n);
	}
	/* The guest also resyncs over noise in front of the host's HELLO. */
	peers_free(&h, &g);
	peer_init(&h, MUX_ROLE_HOST, 600, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	mux_start(h.m, 0);
	mux_start(g.m, 0);
	ASSERT_EQ(mux_feed(g.m, junk, n), n);
	exchange(&h, &g);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_epoch(g.m), 600);
	peers_free(&h, &g);
}

TEST(old_epoch_frames_are_dropped_when_ready)
{
	uint8_t f[256];
	size_t n = 0;
	MuxStats st;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 42, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	/* Well-formed frames of another epoch, including ones that would be errors now (an
	 * unknown stream, a session reset): all dropped, the session survives. */
	n += raw_u32(f + n, MUX_KIND_OPEN, 41, 1, 5000);
	n += raw_frame(f + n, MUX_KIND_DATA, 41, 99, "x", 1);
	n += raw_u32(f + n, MUX_KIND_RESET, 41, 0, MUX_ERR_PROTOCOL);
	ASSERT_EQ(mux_feed(g.m, f, n), n);
	peer_drain(&g);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_EQ(g.session_resets, 0);
	ASSERT_TRUE(g.last_incoming == NULL);
	mux_get_stats(g.m, &st);
	ASSERT_EQ(st.stale_frames, 3);
	peers_free(&h, &g);
}

TEST(open_data_half_close_both_ways)
{
	MuxStream *s;
	Sink *hk, *gk;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	ASSERT_OK(mux_open(h.m, MUX_PORT_RPC_BASE + 3, &s));
	ASSERT_EQ(mux_stream_get_id(s) & 1, 1); /* host ids are odd */
	hk = sink_new(&h);
	mux_stream_set_userdata(s, hk);
	/* Data may follow OPEN before OPEN_OK. */
	ASSERT_EQ(mux_stream_write(s, "hello", 5), 5);
	exchange(&h, &g);
	ASSERT_TRUE(hk->opened);
	ASSERT_EQ(g.last_port, MUX_PORT_RPC_BASE + 3);
	gk = &g.sinks[0];
	ASSERT_EQ(gk->len, 5);
	ASSERT_TRUE(memcmp(gk->data, "hello", 5) == 0);

	/* Host half-closes; the guest can still answer. */
	ASSERT_OK(mux_stream_close(s));
	ASSERT_ERROR(mux_stream_write(s, "x", 1), EPIPE);
	ASSERT_ERROR(mux_stream_close(s), EALREADY);
	exchange(&h, &g);
	ASSERT_TRUE(gk->closed);
	ASSERT_EQ(mux_stream_write(g.last_incoming, "world!", 6), 6);
	exchange(&h, &g);
	ASSERT_EQ(hk->len, 6);
	ASSERT_TRUE(memcmp(hk->data, "world!", 6) == 0);
	ASSERT_FALSE(hk->closed);
	ASSERT_OK(mux_stream_close(g.last_incoming));
	exchange(&h, &g);
	ASSERT_TRUE(hk->closed);
	ASSERT_EQ(hk->error, 0);
	ASSERT_EQ(gk->error, 0);
	/* Closed both ways: the ids are retired and a late frame for them is ignored. */
	{
		uint8_t f[64];
		size_t n =
			raw_u32(f, MUX_KIND_WINDOW, mux_get_epoch(g.m), mux_stream_get_id(s), 10);

		ASSERT_EQ(mux_feed(g.m, f, n), n);
		peer_drain(&g);
		ASSERT_EQ(g.session_resets, 0);
	}
	mux_stream_release(s);
	mux_stream_release(g.last_incoming);
	exchange(&h, &g);
	ASSERT_EQ(h.session_resets + g.session_resets, 0);
	peers_free(&h, &g);
}

TEST(guest_opens_to_host)
{
	MuxStream *s;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	ASSERT_OK(mux_open(g.m, MUX_PORT_EGRESS, &s));
	ASSERT_EQ(mux_stream_get_id(s) & 1, 0); /* guest ids are even */
	mux_stream_set_userdata(s, sink_new(&g));
	ASSERT_EQ(mux_stream_write(s, "CONNECT", 7), 7);
	exchange(&h, &g);
	ASSERT_EQ(h.last_port, MUX_PORT_EGRESS);
	ASSERT_EQ(h.sinks[0].len, 7);
	ASSERT_TRUE(mux_stream_is_incoming(h.last_incoming));
	mux_stream_release(s); /* not closed: aborts */
	exchange(&h, &g);
	ASSERT_EQ(h.sinks[0].error, -ECONNABORTED);
	peers_free(&h, &g);
}

TEST(refused_and_unanswered_opens)
{
	MuxStream *a, *b;
	Sink *ka, *kb;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	g.refuse = true;
	ASSERT_OK(mux_open(h.m, 2001, &a));
	mux_stream_set_userdata(a, ka = sink_new(&h));
	exchange(&h, &g);
	ASSERT_EQ(ka->error, -ECONNREFUSED);
	ASSERT_ERROR(mux_stream_write(a, "x", 1), ECONNREFUSED);
	mux_stream_release(a);

	g.refuse = false;
	g.leave_open = true; /* never answered: refused on the next call */
	ASSERT_OK(mux_open(h.m, 2002, &b));
	mux_stream_set_userdata(b, kb = sink_new(&h));
	exchange(&h, &g);
	ASSERT_EQ(kb->error, -ECONNREFUSED);
	mux_stream_release(b);
	ASSERT_EQ(h.session_resets + g.session_resets, 0);
	peers_free(&h, &g);
}

TEST(credit_limits_the_sender)
{
	static uint8_t big[20000];
	MuxStream *s;
	Sink *gk;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 4096); /* the guest grants 4 KiB per stream */
	connect_pair(&h, &g);
	ASSERT_OK(mux_open(h.m, 5000, &s));
	ASSERT_EQ(mux_stream_get_credit(s), 4096);
	ASSERT_EQ(mux_stream_write(s, big, sizeof(big)), 4096);
	ASSERT_ERROR(mux_stream_write(s, big, sizeof(big)), EAGAIN);
	gk = NULL;
	g.sinks[0].manual_ack = true;
	exchange(&h, &g);
	gk = &g.sinks[0];
	ASSERT_EQ(gk->len, 4096);
	ASSERT_EQ(mux_stream_get_unacked(g.last_incoming), 4096);
	ASSERT_EQ(mux_stream_get_credit(s), 0);
	/* Small acks are batched (a quarter window), then credit flows back. */
	ASSERT_OK(mux_stream_ack(g.last_incoming, 100));
	exchange(&h, &g);
	ASSERT_EQ(mux_stream_get_credit(s), 0);
	ASSERT_OK(mux_stream_ack(g.last_incoming, 1000));
	exchange(&h, &g);
	ASSERT_EQ(mux_stream_get_credit(s), 1100);
	ASSERT_ERROR(mux_stream_ack(g.last_incoming, 5000), EINVAL);
	ASSERT_EQ(mux_stream_write(s, big, sizeof(big)), 1100);
	ASSERT_EQ(h.session_resets + g.session_resets, 0);
	peers_free(&h, &g);
}

TEST(one_stalled_stream_does_not_block_another)
{
	static uint8_t big[64 * 1024];
	MuxStream *a, *b;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 8192);
	connect_pair(&h, &g);
	ASSERT_OK(mux_open(h.m, 5000, &a));
	ASSERT_OK(mux_open(h.m, 5001, &b));
	g.sinks[0].manual_ack = true; /* stream a's reader never acks */
	ASSERT_EQ(mux_stream_write(a, big, sizeof(big)), 8192);
	exchange(&h, &g);
	/* b moves freely in many rounds while a has no credit at all. */
	for (int i = 0; i < 20; i++) {
		ASSERT_EQ(mux_stream_write(b, big, 8192), 8192);
		exchange(&h, &g);
		ASSERT_EQ(mux_stream_get_credit(a), 0);
	}
	ASSERT_EQ(g.sinks[1].len, 20 * 8192);
	ASSERT_EQ(g.sinks[0].len, 8192);
	peers_free(&h, &g);
}

/* Both sides see every stream fail and come back under a new epoch. */
static void expect_reset_and_rehandshake(Peer *h, Peer *g, uint32_t old_epoch)
{
	exchange(h, g);
	ASSERT_EQ(mux_get_state(h->m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(g->m), MUX_STATE_READY);
	ASSERT_TRUE(mux_get_epoch(h->m) != old_epoch);
	ASSERT_EQ(mux_get_epoch(h->m), mux_get_epoch(g->m));
	ASSERT_EQ(h->ready, 2);
	ASSERT_EQ(g->ready, 2);
	ASSERT_EQ(h->session_resets, 1);
	ASSERT_EQ(g->session_resets, 1);
}

TEST(credit_overrun_resets_session)
{
	uint8_t f[8192 + 64];
	static uint8_t payload[8192];
	MuxStream *s;
	Sink *hk;
	uint32_t epoch;
	size_t n;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 4096);
	connect_pair(&h, &g);
	ASSERT_OK(mux_open(h.m, 5000, &s));
	mux_stream_set_userdata(s, hk = sink_new(&h));
	exchange(&h, &g);
	epoch = mux_get_epoch(g.m);
	/* 8 KiB on a stream that was granted 4 KiB: a credit overrun. */
	n = raw_frame(f, MUX_KIND_DATA, epoch, mux_stream_get_id(s), payload, sizeof(payload));
	ASSERT_EQ(mux_feed(g.m, f, n), n);
	peer_drain(&g);
	ASSERT_EQ(g.session_resets, 1);
	ASSERT_EQ(g.last_reset_error, -EPROTO);
	ASSERT_EQ(g.sinks[0].error, -ECONNRESET);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_SYNC);
	/* The guest told the host (RESET on stream 0); the host starts a new session. */
	expect_reset_and_rehandshake(&h, &g, epoch);
	ASSERT_EQ(hk->error, -ECONNRESET);
	ASSERT_ERROR(mux_stream_write(s, "x", 1), ECONNRESET);
	mux_stream_release(s);
	/* The new session works. */
	ASSERT_OK(mux_open(h.m, 5000, &s));
	mux_stream_set_userdata(s, sink_new(&h));
	ASSERT_EQ(mux_stream_write(s, "again", 5), 5);
	exchange(&h, &g);
	ASSERT_EQ(g.sinks[1].len, 5);
	peers_free(&h, &g);
}

static void malformed_case(const uint8_t *f, size_t n, int expect_error)
{
	Peer h, g;
	uint32_t epoch;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	epoch = mux_get_epoch(g.m);
	{
		uint8_t buf[MUX_HEADER_SIZE + 64];

		/* Patch the epoch in: the case builders do not know it. */
		memcpy(buf, f, MIN(n, sizeof(buf)));
		buf[4] = (uint8_t)epoch;
		buf[5] = (uint8_t)(epoch >> 8);
		buf[6] = (uint8_t)(epoch >> 16);
		buf[7] = (uint8_t)(epoch >> 24);
		ASSERT_EQ(mux_feed(g.m, buf, MIN(n, sizeof(buf))), MIN(n, sizeof(buf)));
	}
	peer_drain(&g);
	ASSERT_EQ(g.session_resets, 1);
	ASSERT_EQ(g.last_reset_error, -expect_error);
	expect_reset_and_rehandshake(&h, &g, epoch);
	peers_free(&h, &g);
}

TEST(malformed_frames_reset_the_session)
{
	uint8_t f[128];
	size_t n;

	/* Oversized length: reset on the header alone, without waiting for a payload. */
	n = raw_frame(f, MUX_KIND_DATA, 0, 1, NULL, 0);
	f[12] = f[13] = f[14] = f[15] = 0xff;
	malformed_case(f, n, EBADMSG);
	/* Bad kind, bad magic, flags set. */
	n = raw_frame(f, 99, 0, 1, NULL, 0);
	malformed_case(f, n, EBADMSG);
	n = raw_frame(f, MUX_KIND_CLOSE, 0, 1, NULL, 0);
	f[0] = 'Z';
	malformed_case(f, n, EBADMSG);
	n = raw_frame(f, MUX_KIND_CLOSE, 0, 1, NULL, 0);
	f[3] = 0x80;
	malformed_case(f, n, EBADMSG);
	/* Wrong fixed length for the kind. */
	n = raw_frame(f, MUX_KIND_WINDOW, 0, 1, "12345678", 8);
	malformed_case(f, n, EBADMSG);
	/* A stream that was never opened. */
	n = raw_frame(f, MUX_KIND_DATA, 0, 1001, "x", 1);
	malformed_case(f, n, EPROTO);
	n = raw_frame(f, MUX_KIND_CLOSE, 0, 999, NULL, 0);
	malformed_case(f, n, EPROTO);
	/* An OPEN with our own id parity, with port 0, beyond MUX_PORT_MAX. */
	n = raw_u32(f, MUX_KIND_OPEN, 0, 2, 5000);
	malformed_case(f, n, EPROTO);
	n = raw_u32(f, MUX_KIND_OPEN, 0, 1, 0);
	malformed_case(f, n, EPROTO);
	n = raw_u32(f, MUX_KIND_OPEN, 0, 1, MUX_PORT_MAX + 1);
	malformed_case(f, n, EPROTO);
	/* A zero WINDOW increment on a never-opened stream. */
	n = raw_u32(f, MUX_KIND_WINDOW, 0, 1, 0);
	malformed_case(f, n, EPROTO);
}

TEST(data_larger_than_announced_max_frame)
{
	static uint8_t f[MUX_HEADER_SIZE + 4096], payload[4096];
	MuxConfig gc = {.role = MUX_ROLE_GUEST, .max_frame = 2048};
	MuxStream *s;
	Peer h, g;
	size_t n;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	memset(&g, 0, sizeof(g));
	ASSERT_OK(mux_new(&gc, &g.m));
	connect_pair(&h, &g);
	ASSERT_EQ(mux_get_max_frame_out(h.m), 2048);
	ASSERT_OK(mux_open(h.m, 5000, &s));
	/* The host splits writes at the guest's max_frame... */
	ASSERT_EQ(mux_stream_write(s, payload, 4096), 4096);
	exchange(&h, &g);
	ASSERT_EQ(g.sinks[0].len, 4096);
	ASSERT_EQ(g.session_resets, 0);
	/* ...and a frame above it is a protocol error. */
	n = raw_frame(f, MUX_KIND_DATA, mux_get_epoch(g.m), mux_stream_get_id(s), payload, 4096);
	ASSERT_EQ(mux_feed(g.m, f, n), n);
	peer_drain(&g);
	ASSERT_EQ(g.session_resets, 1);
	ASSERT_EQ(g.last_reset_error, -EMSGSIZE);
	peers_free(&h, &g);
}

TEST(stream_caps)
{
	MuxConfig gc = {.role = MUX_ROLE_GUEST, .max_streams = 3};
	MuxStream *s[4];
	uint8_t f[64];
	Peer h, g;
	size_t n;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	memset(&g, 0, sizeof(g));
	ASSERT_OK(mux_new(&gc, &g.m));
	connect_pair(&h, &g);
	for (int i = 0; i < 3; i++)
		ASSERT_OK(mux_open(h.m, 5000, &s[i]));
	/* Our side honours the cap the peer announced... */
	ASSERT_ERROR(mux_open(h.m, 5000, &s[3]), EMFILE);
	exchange(&h, &g);
	/* ...and closing one makes room once the close is known both ways. */
	mux_stream_release(s[0]);
	ASSERT_OK(mux_open(h.m, 5000, &s[0]));
	exchange(&h, &g);
	ASSERT_EQ(g.session_resets, 0);
	/* A peer that ignores the cap resets the session. */
	n = raw_u32(f, MUX_KIND_OPEN, mux_get_epoch(g.m), 101, 5000);
	ASSERT_EQ(mux_feed(g.m, f, n), n);
	peer_drain(&g);
	ASSERT_EQ(g.session_resets, 1);
	ASSERT_EQ(g.last_reset_error, -EMFILE);
	peers_free(&h, &g);
}

TEST(host_opens_up_to_256_streams)
{
	MuxStream *s;
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	g.leave_open = false;
	for (unsigned i = 0; i < MUX_STREAMS_MAX; i++)
		ASSERT_OK(mux_open(h.m, 5000, &s));
	ASSERT_ERROR(mux_open(h.m, 5000, &s), EMFILE);
	/* The guest's sinks table is small; accept without sinks. */
	{
		MuxEvent ev;
		const uint8_t *buf;
		size_t len = mux_output(h.m, &buf);

		ASSERT_EQ(mux_feed(g.m, buf, len), len);
		mux_output_advance(h.m, len);
		while (mux_next_event(g.m, &ev) > 0)
			if (ev.type == MUX_EVENT_OPEN)
				ASSERT_OK(mux_stream_accept(ev.stream));
	}
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	peers_free(&h, &g);
}

TEST(peer_reset_frame_and_guest_sees_new_host_without_eof)
{
	MuxStream *s;
	Sink *gk;
	Peer h, h2, g;
	uint32_t e1;

	peer_init(&h, MUX_ROLE_HOST, 10, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	e1 = mux_get_epoch(g.m);
	ASSERT_OK(mux_open(h.m, 5000, &s));
	exchange(&h, &g);
	gk = &g.sinks[0];
	/* A new host process (new Mux, new epoch) talks on the same byte stream; the guest
	 * never saw an EOF in between. */
	peer_init(&h2, MUX_ROLE_HOST, 20, 0);
	mux_start(h2.m, 0);
	exchange(&h2, &g);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_epoch(g.m), 20);
	ASSERT_TRUE(mux_get_epoch(g.m) != e1);
	ASSERT_EQ(g.session_resets, 1);
	ASSERT_EQ(gk->error, -ECONNRESET);
	ASSERT_EQ(h2.ready, 1);
	mux_free(h.m);
	peers_free(&h2, &g);
}

/* The guest's port gave an EOF while the host stayed (a restored VM's port reopening): the
 * guest's RESET under the old epoch makes that host start a new session, which the guest
 * enters, instead of both waiting on each other. */
TEST(guest_eof_while_host_stays_recovers)
{
	Peer h, g;
	uint32_t e1;

	peer_init(&h, MUX_ROLE_HOST, 10, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	e1 = mux_get_epoch(h.m);
	mux_start(g.m, -ECONNRESET);
	mux_notify_reset(g.m);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_SYNC);
	exchange(&g, &h);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_TRUE(mux_get_epoch(h.m) != e1);
	ASSERT_EQ(mux_get_epoch(g.m), mux_get_epoch(h.m));
	ASSERT_EQ(h.session_resets, 1);
	peers_free(&h, &g);
}

/*
 * A restored VM's port flickers just after the guest answered the host's HELLO: the guest
 * was in the session, its answer is lost with its output, and it tells the host under that
 * epoch, which the host has not entered yet. The host offers a new session instead of
 * repeating a HELLO the guest will never take again.
 */
TEST(guest_that_left_an_offered_session_gets_a_new_one)
{
	Peer h, g;
	const uint8_t *buf;
	uint32_t e1;
	size_t n;

	peer_init(&h, MUX_ROLE_HOST, 10, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	mux_start(h.m, 0);
	mux_start(g.m, 0);
	e1 = mux_get_epoch(h.m);
	ASSERT_TRUE(pump(&h, &g) > 0);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_SYNC);
	/* The port flickers: the guest's answer goes with its output. */
	mux_start(g.m, -ECONNRESET);
	mux_notify_reset(g.m);
	n = mux_output(g.m, &buf);
	ASSERT_TRUE(n > 0);
	exchange(&g, &h);
	/* The retry the transport's timer would send. */
	mux_resend_hello(h.m);
	exchange(&h, &g);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_TRUE(mux_get_epoch(h.m) != e1);
	ASSERT_EQ(mux_get_epoch(g.m), mux_get_epoch(h.m));
	peers_free(&h, &g);
}

TEST(token_must_match)
{
	MuxConfig hc = {.role = MUX_ROLE_HOST, .test_epoch = 9, .token = {1, 2, 3}};
	MuxConfig gc = {.role = MUX_ROLE_GUEST, .token = {1, 2, 4}};
	Peer h, g;

	memset(&h, 0, sizeof(h));
	memset(&g, 0, sizeof(g));
	ASSERT_OK(mux_new(&hc, &h.m));
	ASSERT_OK(mux_new(&gc, &g.m));
	mux_start(h.m, 0);
	mux_start(g.m, 0);
	exchange(&h, &g);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_SYNC);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_SYNC);
	peers_free(&h, &g);

	gc.token[2] = 3;
	ASSERT_OK(mux_new(&hc, &h.m));
	ASSERT_OK(mux_new(&gc, &g.m));
	mux_start(h.m, 0);
	mux_start(g.m, 0);
	exchange(&h, &g);
	ASSERT_EQ(mux_get_state(g.m), MUX_STATE_READY);
	ASSERT_EQ(mux_get_state(h.m), MUX_STATE_READY);
	peers_free(&h, &g);
}

TEST(output_backlog_pauses_input)
{
	static uint8_t f[64 * 1024];
	Peer h, g;
	uint32_t id = 1;
	uint8_t *space;
	bool paused = false;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	connect_pair(&h, &g);
	g.refuse = true;
	/* A peer that floods opens and never reads the refusals: our output stops growing
	 * past MUX_OUTPUT_PAUSE plus a frame because input parsing stops. */
	for (int round = 0; round < 40 && !paused; round++) {
		size_t n = 0;

		while (n + 20 <= sizeof(f)) {
			n += raw_u32(f + n, MUX_KIND_OPEN, mux_get_epoch(g.m), id, 5000);
			id += 2;
		}
		mux_feed(g.m, f, n);
		peer_drain(&g);
		paused = mux_input_space(g.m, &space) == 0;
	}
	ASSERT_TRUE(paused);
	{
		const uint8_t *out;

		ASSERT_TRUE(mux_output(g.m, &out) < MUX_OUTPUT_PAUSE + 64);
		/* Draining the output lets input move again. */
		mux_output_advance(g.m, mux_output(g.m, &out));
		ASSERT_TRUE(mux_input_space(g.m, &space) > 0);
	}
	ASSERT_EQ(g.session_resets, 0);
	peers_free(&h, &g);
}

static uint64_t rng_state = 88172645463325252ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

TEST(random_garbage_never_crashes_and_sessions_recover)
{
	static uint8_t buf[8192];
	Peer h, g;

	peer_init(&h, MUX_ROLE_HOST, 7, 0);
	peer_init(&g, MUX_ROLE_GUEST, 0, 0);
	for (int round = 0; round < 200; round++) {
		size_t n = rng() % sizeof(buf);
		Peer *victim = round % 2 ? &h : &g;

		connect_pair(&h, &g);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rng();
		/* Sometimes splice a plausible header in, with the live epoch. */
		if (n > 32 && round % 3 == 0) {
			uint32_t epoch = mux_get_epoch(victim->m);

			raw_frame(buf, (uint8_t)(1 + rng() % 8), epoch, rng() % 8, NULL, 0);
			buf[12] = (uint8_t)rng();
			buf[13] = (uint8_t)(rng() % 2);
			buf[14] = buf[15] = 0;
		}
		mux_feed(victim->m, buf, n);
		peer_drain(victim);
		/* Whatever happened, the pair gets back to a working session. */
		for (int i = 0; i < 5 && (mux_get_state(h.m) != MUX_STATE_READY ||
					  mux_get_state(g.m) != MUX_STATE_READY);
		     i++) {
			mux_resend_hello(h.m);
			exchange(&h, &g);
		}
		if (mux_get_state(h.m) != MUX_STATE_READY ||
		    mux_get_state(g.m) != MUX_STATE_READY) {
			/* The garbage left the guest inside a bogus frame it still waits to
			 * complete; a transport reconnect (mux_start on both) always recovers. */
			mux_start(h.m, 0);
			mux_start(g.m, 0);
		}
		h.n_sinks = g.n_sinks = 0;
	}
	connect_pair(&h, &g);
	peers_free(&h, &g);
}

int main(void)
{
	return tests_run();
}
