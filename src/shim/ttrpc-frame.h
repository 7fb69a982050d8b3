/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * ttrpc's framing, the one part of containerd's shim protocol read before any message is
 * decoded: a 10-byte header (big-endian payload length and stream id, a type, flags) and
 * the payload. A peer controls every byte, so the length has a hard cap and a reader never
 * holds more than one frame.
 */

#define TTRPC_HEADER_SIZE 10
#define TTRPC_MESSAGE_MAX (4u << 20) /* ttrpc's own limit */
#define TTRPC_READ_SLACK (64u << 10) /* what one read may bring beyond a whole frame */

typedef enum TtrpcType {
	TTRPC_REQUEST = 1,
	TTRPC_RESPONSE = 2,
	TTRPC_DATA = 3,
} TtrpcType;

typedef struct TtrpcHeader {
	uint32_t length;
	uint32_t stream_id;
	uint8_t type;
	uint8_t flags;
} TtrpcHeader;

void ttrpc_header_encode(const TtrpcHeader *h, uint8_t out[TTRPC_HEADER_SIZE]);
/* 0, or -EMSGSIZE for a length over the cap, -EBADMSG for an unknown type. */
int ttrpc_header_decode(const uint8_t in[TTRPC_HEADER_SIZE], TtrpcHeader *ret);

/* Bytes in, whole frames out. */
typedef struct TtrpcReader {
	uint8_t *buf;
	size_t len;	 /* bytes held */
	size_t consumed; /* of the frame last returned */
} TtrpcReader;

/* Take @n bytes; -ENOMEM, or -EMSGSIZE when they would make more than one frame can be. */
int ttrpc_reader_feed(TtrpcReader *r, const void *data, size_t n);
/*
 * ttrpc_reader_next() - the next whole frame: 1 with its header and payload (valid until
 * the next call), 0 when more bytes are needed, or a negative errno from the header (the
 * connection is then to be dropped).
 */
int ttrpc_reader_next(TtrpcReader *r, TtrpcHeader *ret, const uint8_t **ret_payload);
void ttrpc_reader_done(TtrpcReader *r);
