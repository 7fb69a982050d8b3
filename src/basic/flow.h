/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * One direction of a byte copy between two fds: a bounded buffer, whether the side it
 * reads from has ended, and whether that end was passed on to the side it writes to with
 * shutdown(SHUT_WR). fd-splice, the egress broker's tunnels and MuxIo's bridges copy
 * through it. The buffer is allocated on first use, so a flow that never carries a byte
 * costs nothing. libc only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Flow {
	uint8_t *buf;
	size_t size;	   /* the cap: never more than this is buffered */
	size_t start, end; /* the buffered bytes are buf[start, end) */
	bool eof;	   /* the reading side ended (read() == 0, or its peer said so) */
	bool shut;	   /* ... and that was passed on: shutdown(SHUT_WR) */
	bool not_socket;   /* the writing side refused send(): write() it is */
	uint64_t bytes;	   /* written on so far */
} Flow;

#define FLOW_INIT(cap) ((Flow){.size = (cap)})

/* Allocate the buffer now rather than on first use, for a caller that must not fail later.
 * Returns 0 or -ENOMEM. */
int flow_alloc(Flow *f);

/* Free the buffer; the flow is empty then, and may be used again. */
void flow_done(Flow *f);

static inline size_t flow_len(const Flow *f)
{
	return f->end - f->start;
}

static inline size_t flow_room(const Flow *f)
{
	return f->size - flow_len(f);
}

/* EPOLLIN on the reading side, EPOLLOUT on the writing side. */
static inline bool flow_wants_read(const Flow *f)
{
	return !f->eof && flow_room(f) > 0;
}

static inline bool flow_wants_write(const Flow *f)
{
	return flow_len(f) > 0;
}

/* Drop what is buffered. */
void flow_clear(Flow *f);

/* Append what fits of @data. Returns the bytes taken, or -ENOMEM. */
ssize_t flow_put(Flow *f, const void *data, size_t len);

/* One read() from @from into the room there is. Returns the bytes read; 0 when it would
 * block, when the buffer is full or at EOF (then f->eof is set); -errno on an error. */
ssize_t flow_read(Flow *f, int from);

/* Write what is buffered to @to until it would block: send() without SIGPIPE, or write()
 * when @to is not a socket. Returns the bytes written, or -errno on an error. */
ssize_t flow_write(Flow *f, int to);

/* Once the reading side has ended and everything is written, tell @to: shutdown(SHUT_WR),
 * once (a no-op for what is not a socket). Returns f->shut. */
bool flow_pass_eof(Flow *f, int to);
