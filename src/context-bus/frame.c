/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "macros.h"

/* The first allocation for a frame's body; it doubles from there up to the frame's length. */
#define FRAME_BODY_CHUNK 4096u

static void reader_reset(FrameReader *r)
{
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
	r->head_len = 0;
	r->len = 0;
	r->skip = 0;
	r->skipping = r->refused = r->ready = false;
}

void frame_reader_done(FrameReader *r)
{
	reader_reset(r);
}

bool frame_reader_idle(const FrameReader *r)
{
	return r->head_len == 0 && !r->skipping;
}

uint32_t frame_reader_pending(const FrameReader *r)
{
	return r->head_len == FRAME_HEADER_SIZE && !r->skipping && !r->ready ? r->len : 0;
}

void frame_reader_refuse(FrameReader *r)
{
	if (r->head_len != FRAME_HEADER_SIZE || r->skipping || r->ready)
		return;
	r->skip = (uint64_t)r->len - r->body_len;
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
	r->skipping = r->refused = true;
}

const uint8_t *frame_reader_body(const FrameReader *r, size_t *ret_len)
{
	*ret_len = r->ready ? r->len : 0;
	return r->ready ? r->body : NULL;
}

void frame_header_put(uint8_t out[FRAME_HEADER_SIZE], uint32_t len)
{
	out[0] = (uint8_t)(len >> 24);
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
}

static int body_reserve(FrameReader *r, size_t want)
{
	size_t cap = r->body_cap ? r->body_cap : MIN((size_t)FRAME_BODY_CHUNK, (size_t)r->len);
	uint8_t *p;

	if (want <= r->body_cap)
		return 0;
	while (cap < want)
		cap = cap > r->len / 2 ? r->len : cap * 2;
	p = realloc(r->body, cap);
	if (!p)
		return -ENOMEM;
	r->body = p;
	r->body_cap = cap;
	return 0;
}

/* A skipped frame's bytes: counted off, never kept. */
static FrameResult feed_skip(FrameReader *r, size_t size, size_t *used)
{
	size_t n = (uint64_t)size < r->skip ? size : (size_t)r->skip;
	bool refused = r->refused;

	*used += n;
	r->skip -= n;
	if (r->skip > 0)
		return FRAME_MORE;
	reader_reset(r);
	return refused ? FRAME_REFUSED : FRAME_SKIPPED;
}

int frame_reader_feed(FrameReader *r, const uint8_t *data, size_t size, size_t *ret_used)
{
	size_t used = 0;

	if (r->ready)
		reader_reset(r);
	*ret_used = 0;
	if (r->skipping) {
		FrameResult res = feed_skip(r, size, &used);

		*ret_used = used;
		return res;
	}
	while (r->head_len < FRAME_HEADER_SIZE && used < size)
		r->head[r->head_len++] = data[used++];
	if (r->head_len < FRAME_HEADER_SIZE) {
		*ret_used = used;
		return FRAME_MORE;
	}
	if (r->body_len == 0 && r->body_cap == 0) {
		r->len = (uint32_t)r->head[0] << 24 | (uint32_t)r->head[1] << 16 |
			 (uint32_t)r->head[2] << 8 | (uint32_t)r->head[3];
		if (r->len > r->max) {
			r->skipping = true;
			r->skip = r->len;
			*ret_used = used;
			/* The announcement itself is the event; an empty tail would end it at once,
			 * but a length > max is never 0. */
			return FRAME_OVERSIZED;
		}
	}
	if (r->len > 0) {
		size_t n = MIN(size - used, (size_t)r->len - r->body_len);

		if (body_reserve(r, r->body_len + n) < 0) {
			r->skipping = true;
			r->skip = (uint64_t)r->len - r->body_len;
			free(r->body);
			r->body = NULL;
			r->body_len = r->body_cap = 0;
			*ret_used = used;
			return -ENOMEM;
		}
		if (n > 0)
			memcpy(r->body + r->body_len, data + used, n);
		r->body_len += n;
		used += n;
	}
	*ret_used = used;
	if (r->body_len < r->len)
		return FRAME_MORE;
	r->ready = true;
	return FRAME_READY;
}
