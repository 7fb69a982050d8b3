/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the context bus's frame parser and what it does with each frame: the input is
 * split into chunks that two clients send to a real Bus over socketpairs, and the bus's
 * frames back are read (or, by a flag, left unread so that the queue cap is reached).
 *
 * Input layout: a sequence of chunks, each one control byte then its bytes:
 *   bit 7: which client sends it (A or B)
 *   bit 6: leave the clients' incoming frames unread this round
 *   bits 0-5: chunk length - 1 (1 to 64 bytes)
 * A frame of either client may so be split anywhere, and the two interleave. The frame
 * parser is also driven directly, a byte at a time and whole, with a small maximum, so
 * that the oversized path is reached by short inputs; both must agree on every frame.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "evloop.h"
#include "frame.h"
#include "macros.h"

#define SMALL_MAX 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(int fd)
{
	uint8_t sink[4096];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

typedef struct Tally {
	unsigned ready, oversized, skipped;
	uint64_t bytes;
} Tally;

static void parse(const uint8_t *data, size_t size, size_t step, Tally *t)
{
	FrameReader r = FRAME_READER_INIT(SMALL_MAX);
	size_t off = 0;

	while (off < size) {
		size_t n = MIN(step, size - off), used = 0;
		int res = frame_reader_feed(&r, data + off, n, &used);
		const uint8_t *body;
		size_t len;

		off += used;
		switch (res) {
		case FRAME_READY:
			body = frame_reader_body(&r, &len);
			if (len > SMALL_MAX || (len > 0 && !body))
				__builtin_trap();
			t->ready++;
			t->bytes += len;
			break;
		case FRAME_OVERSIZED:
			t->oversized++;
			break;
		case FRAME_SKIPPED:
			t->skipped++;
			break;
		default:
			if (used != n) /* FRAME_MORE takes everything it was given */
				__builtin_trap();
			break;
		}
	}
	frame_reader_done(&r);
}

static void run_bus(const uint8_t *data, size_t size)
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	Bus *bus = NULL;
	int a[2] = {-EBADF, -EBADF}, b[2] = {-EBADF, -EBADF};
	size_t off = 0;

	if (ev_loop_new(&loop) < 0 || bus_new(loop, NULL, 4, &bus) < 0)
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, a) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, b) < 0)
		goto out;
	(void)bus_add_conn_creds(bus, TAKE_FD(a[1]), true, 10000, 1);
	(void)bus_add_conn_creds(bus, TAKE_FD(b[1]), true, 10001, 2);
	while (off < size) {
		uint8_t ctl = data[off++];
		size_t n = MIN((size_t)(ctl & 0x3f) + 1, size - off);
		int fd = ctl & 0x80 ? b[0] : a[0];

		if (n > 0)
			(void)send(fd, data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		off += n;
		while (ev_run(loop, 0) > 0)
			;
		if (!(ctl & 0x40)) {
			drain(a[0]);
			drain(b[0]);
		}
	}
	(void)shutdown(a[0], SHUT_WR);
	while (ev_run(loop, 0) > 0)
		;
out:
	bus_free(bus);
	safe_close(a[0]);
	safe_close(a[1]);
	safe_close(b[0]);
	safe_close(b[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Tally whole = {}, bytewise = {};

	/* The bus logs every frame; a fuzzing run does not need to read them (and the
	 * sanitizers' reports stay on stderr). */
	bus_log_fd = -1;
	parse(data, size, size ? size : 1, &whole);
	parse(data, size, 1, &bytewise);
	if (memcmp(&whole, &bytewise, sizeof(whole)) != 0)
		__builtin_trap();
	run_bus(data, size);
	return 0;
}
