/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the channel multiplexer's frame parser and session state machine.
 *
 * Input layout: byte 0 selects the setup, the rest is transport bytes.
 *   bit 0: 0 = the fuzzed side is the guest, 1 = the host
 *   bit 1: 1 = handshake with a real peer first (so frames hit a READY session, epoch
 *          FUZZ_EPOCH), 0 = start in SYNC (the input must carry the HELLO itself)
 *   bits 2-3: how the bytes are cut: whole, 1 byte, 7 bytes, 4 KiB at a time
 *   bit 4: never drain our output (exercises the output-backlog pause)
 *   bit 5: drain our output 13 bytes at a time (resets then keep a partly written frame)
 * The host side always uses epoch FUZZ_EPOCH first, so seeds can carry valid frames.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mux.h"

#define FUZZ_EPOCH 1u
#define HELD_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Fuzz {
	Mux *m;
	MuxStream *held[HELD_MAX];
	size_t n_held;
	unsigned events;
	bool keep_output;
	bool trickle_output;
} Fuzz;

static void hold(Fuzz *f, MuxStream *s)
{
	if (f->n_held < HELD_MAX) {
		f->held[f->n_held++] = s;
		return;
	}
	mux_stream_release(s);
}

static void forget(Fuzz *f, MuxStream *s)
{
	for (size_t i = 0; i < f->n_held; i++)
		if (f->held[i] == s) {
			f->held[i] = f->held[--f->n_held];
			mux_stream_release(s);
			return;
		}
}

/* React to events the way a real user would, so the fuzzer reaches replies, window
 * updates, half-closes and releases from inside event processing. */
static void on_event(Fuzz *f, const MuxEvent *ev)
{
	MuxStream *s;

	f->events++;
	switch (ev->type) {
	case MUX_EVENT_READY:
		if (mux_open(f->m, MUX_PORT_CONTROL, &s) >= 0)
			hold(f, s);
		break;
	case MUX_EVENT_OPEN:
		if (ev->port % 2 == 0 && mux_stream_accept(ev->stream) >= 0)
			hold(f, ev->stream);
		else if (ev->port % 3 == 0)
			(void)mux_stream_refuse(ev->stream, -ECONNREFUSED);
		/* else: left unanswered, refused by the next call */
		break;
	case MUX_EVENT_DATA:
		(void)mux_stream_ack(ev->stream, (ev->size + 1) / 2);
		(void)mux_stream_write(ev->stream, ev->data, ev->size);
		if (ev->size > 0 && ev->data[0] == 'C')
			(void)mux_stream_close(ev->stream);
		if (ev->size > 0 && ev->data[0] == 'A')
			(void)mux_stream_abort(ev->stream, -ECONNABORTED);
		if (ev->size > 0 && ev->data[0] == 'R')
			forget(f, ev->stream);
		break;
	case MUX_EVENT_CLOSE:
		(void)mux_stream_ack(ev->stream, mux_stream_get_unacked(ev->stream));
		(void)mux_stream_close(ev->stream);
		break;
	case MUX_EVENT_OPEN_OK:
	case MUX_EVENT_WINDOW:
		(void)mux_stream_write(ev->stream, "ping", 4);
		break;
	case MUX_EVENT_OPEN_FAIL:
	case MUX_EVENT_STREAM_RESET:
		forget(f, ev->stream);
		break;
	case MUX_EVENT_SESSION_RESET:
		mux_resend_hello(f->m);
		break;
	}
}

static void drain(Fuzz *f)
{
	MuxEvent ev;

	while (mux_next_event(f->m, &ev) > 0)
		on_event(f, &ev);
	if (!f->keep_output) {
		const uint8_t *p;
		size_t n = mux_output(f->m, &p);

		mux_output_advance(f->m, f->trickle_output ? MIN(n, (size_t)13) : n);
	}
}

/* Run a real peer against the fuzzed side until both are READY. */
static int handshake(Fuzz *f, MuxRole role)
{
	Mux *m = f->m;
	MuxConfig pc = {.role = role == MUX_ROLE_HOST ? MUX_ROLE_GUEST : MUX_ROLE_HOST,
			.test_epoch = FUZZ_EPOCH};
	Mux *peer = NULL;
	MuxEvent ev;
	int r;

	r = mux_new(&pc, &peer);
	if (r < 0)
		return r;
	mux_start(peer, 0);
	for (int i = 0; i < 4; i++) {
		const uint8_t *p;
		size_t n;

		n = mux_output(peer, &p);
		mux_output_advance(peer, mux_feed(m, p, n));
		/* The fuzzed side sees its own READY and acts on it: it opens a stream, which
		 * the peer must not get to answer (the fuzz input does). */
		while (mux_next_event(m, &ev) > 0)
			on_event(f, &ev);
		if (mux_get_state(m) == MUX_STATE_READY)
			break;
		n = mux_output(m, &p);
		mux_output_advance(m, mux_feed(peer, p, n));
		while (mux_next_event(peer, &ev) > 0)
			;
	}
	r = mux_get_state(m) == MUX_STATE_READY ? 0 : -EPROTO;
	mux_free(peer);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[4] = {SIZE_MAX, 1, 7, 4096};
	MuxConfig c = {
		.test_epoch = FUZZ_EPOCH,
		.max_frame = 2048,
		.window = 4096,
		.max_streams = 8,
	};
	Fuzz f = {};
	size_t chunk;

	if (size < 1)
		return 0;
	c.role = data[0] & 1 ? MUX_ROLE_HOST : MUX_ROLE_GUEST;
	chunk = chunks[(data[0] >> 2) & 3];
	f.keep_output = data[0] & 16;
	f.trickle_output = data[0] & 32;
	if (mux_new(&c, &f.m) < 0)
		return 0;
	mux_start(f.m, 0);
	if (data[0] & 2 && handshake(&f, c.role) < 0)
		goto out;
	drain(&f);
	data++;
	size--;
	while (size > 0) {
		size_t n = mux_feed(f.m, data, MIN(size, chunk));

		if (n == 0) {
			/* Input parked behind our output: the peer "reads" it, once. */
			const uint8_t *p;

			mux_output_advance(f.m, mux_output(f.m, &p));
			n = mux_feed(f.m, data, MIN(size, chunk));
			if (n == 0)
				break;
		}
		data += n;
		size -= n;
		drain(&f);
	}
out:
	while (f.n_held > 0)
		mux_stream_release(f.held[--f.n_held]);
	mux_free(f.m);
	return 0;
}
