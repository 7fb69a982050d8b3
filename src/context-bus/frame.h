/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The context bus's framing (SPEC 5): a 4-byte big-endian length, then that many bytes of
 * one protobuf Envelope. libc only.
 *
 * A FrameReader takes a connection's bytes as they arrive and hands back whole frames. A
 * frame longer than @max is never allocated: its bytes are counted off as they arrive and
 * thrown away, and the frame after it is read as usual, so one oversized frame costs the
 * sender that frame and not its connection. A frame's buffer grows with the bytes that
 * actually came, never to the length a header merely announces.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_SIZE 4
/* The largest Envelope SPEC 5 lets through. */
#define FRAME_SIZE_MAX (8u * 1024u * 1024u)

typedef enum FrameResult {
	FRAME_MORE,	 /* every byte given was taken; no frame is complete yet */
	FRAME_READY,	 /* a frame is complete: frame_reader_body() until the next feed */
	FRAME_OVERSIZED, /* a header announced more than max: that frame is being skipped */
	FRAME_SKIPPED,	 /* the last byte of a skipped frame went by */
	FRAME_REFUSED,	 /* the caller's frame_reader_refuse() frame went by */
	_FRAME_RESULT_MAX,
	_FRAME_RESULT_INVALID = -1,
} FrameResult;

typedef struct FrameReader {
	size_t max;
	uint8_t head[FRAME_HEADER_SIZE];
	size_t head_len;
	uint32_t len;	 /* of the frame being read, once head_len == FRAME_HEADER_SIZE */
	uint8_t *body;	 /* owned; NULL while skipping */
	size_t body_len; /* bytes of body received */
	size_t body_cap;
	uint64_t skip; /* bytes of a skipped frame still to come */
	bool skipping;
	bool refused; /* the frame being skipped was refused by the caller */
	bool ready;   /* a complete frame is held; dropped by the next feed */
} FrameReader;

#define FRAME_READER_INIT(m) ((FrameReader){.max = (m)})

/*
 * frame_reader_feed() - take bytes from @data until a frame completes, a header announces
 * an oversized frame, or a skipped frame ends; *@ret_used says how many were taken, and the
 * caller feeds the rest again. A frame handed out by FRAME_READY is released by the next
 * call. Returns a FrameResult, or -ENOMEM (the reader is then reset to a frame boundary's
 * state for the frame in progress, which is skipped).
 */
int frame_reader_feed(FrameReader *r, const uint8_t *data, size_t size, size_t *ret_used);

/* The frame FRAME_READY handed out: its bytes and length (0 is a valid, empty frame). */
const uint8_t *frame_reader_body(const FrameReader *r, size_t *ret_len);

/*
 * frame_reader_pending() - the length the frame in progress announced, when its header is
 * complete and it is being read (not skipped); 0 otherwise. For a caller that budgets the
 * memory its frames may take across connections.
 */
uint32_t frame_reader_pending(const FrameReader *r);

/*
 * frame_reader_refuse() - skip the frame in progress (its header is read, its body is not
 * complete) instead of reading it: its buffer is freed at once and FRAME_REFUSED comes
 * when its last byte went by. For a caller whose memory budget it does not fit.
 */
void frame_reader_refuse(FrameReader *r);

/* Whether the reader is between frames (nothing of a next frame received). */
bool frame_reader_idle(const FrameReader *r);

void frame_reader_done(FrameReader *r);

/* Write the 4-byte big-endian header for a frame of @len bytes. */
void frame_header_put(uint8_t out[FRAME_HEADER_SIZE], uint32_t len);
