/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ttrpc-frame.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void ttrpc_header_encode(const TtrpcHeader *h, uint8_t out[TTRPC_HEADER_SIZE])
{
	put32(out, h->length);
	put32(out + 4, h->stream_id);
	out[8] = h->type;
	out[9] = h->flags;
}

int ttrpc_header_decode(const uint8_t in[TTRPC_HEADER_SIZE], TtrpcHeader *ret)
{
	ret->length = get32(in);
	ret->stream_id = get32(in + 4);
	ret->type = in[8];
	ret->flags = in[9];
	if (ret->length > TTRPC_MESSAGE_MAX)
		return -EMSGSIZE;
	if (ret->type < TTRPC_REQUEST || ret->type > TTRPC_DATA)
		return -EBADMSG;
	return 0;
}

/* Drop the frame returned last, keeping what follows it. */
static void drop_consumed(TtrpcReader *r)
{
	if (!r->consumed)
		return;
	memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
	r->len -= r->consumed;
	r->consumed = 0;
}

int ttrpc_reader_feed(TtrpcReader *r, const void *data, size_t n)
{
	/* A whole frame, and the start of the next one read with it. */
	const size_t cap = TTRPC_HEADER_SIZE + TTRPC_MESSAGE_MAX + TTRPC_READ_SLACK;
	uint8_t *b;

	drop_consumed(r);
	if (n > cap - r->len)
		return -EMSGSIZE;
	b = realloc(r->buf, r->len + n ? r->len + n : 1);
	if (!b)
		return -ENOMEM;
	r->buf = b;
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	return 0;
}

int ttrpc_reader_next(TtrpcReader *r, TtrpcHeader *ret, const uint8_t **ret_payload)
{
	int k;

	drop_consumed(r);
	if (r->len < TTRPC_HEADER_SIZE)
		return 0;
	k = ttrpc_header_decode(r->buf, ret);
	if (k < 0)
		return k;
	if (r->len - TTRPC_HEADER_SIZE < ret->length)
		return 0;
	*ret_payload = r->buf + TTRPC_HEADER_SIZE;
	r->consumed = TTRPC_HEADER_SIZE + ret->length;
	return 1;
}

void ttrpc_reader_done(TtrpcReader *r)
{
	free(r->buf);
	*r = (TtrpcReader){};
}
