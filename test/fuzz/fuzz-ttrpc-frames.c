/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz containerd-shim-berth-v2's ttrpc framing and the envelope it decodes from each
 * frame: what containerd (or anyone who reaches the shim's socket) sends.
 *
 * Input layout: byte 0 picks how the rest is cut before it reaches the reader (whole, 1, 3
 * or 4 KiB bytes at a time); the rest is the stream. The same stream is also read whole by
 * a second reader: both must yield the same frames, each within the length cap, and every
 * request frame's payload goes through the Request decoder the shim uses.
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shim.pb-c.h"
#include "ttrpc-frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Seen {
	uint32_t n, bytes, last_stream;
	int error;
} Seen;

static void take(TtrpcReader *r, Seen *seen)
{
	TtrpcHeader h;
	const uint8_t *payload;
	int k;

	while ((k = ttrpc_reader_next(r, &h, &payload)) > 0) {
		assert(h.length <= TTRPC_MESSAGE_MAX);
		seen->n++;
		seen->bytes += h.length;
		seen->last_stream = h.stream_id;
		if (h.type == TTRPC_REQUEST) {
			Berthshim__Request *req =
				berthshim__request__unpack(NULL, h.length, payload);

			if (req)
				berthshim__request__free_unpacked(req, NULL);
		}
	}
	if (k < 0)
		seen->error = k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t cuts[] = {0, 1, 3, 4096};
	TtrpcReader a = {}, b = {};
	Seen sa = {}, sb = {};
	size_t cut;

	if (size < 1)
		return 0;
	cut = cuts[data[0] % 4];
	data++;
	size--;
	for (size_t off = 0; off < size && !sa.error;) {
		size_t n = cut ? cut : size;

		if (n > size - off)
			n = size - off;
		if (ttrpc_reader_feed(&a, data + off, n) < 0) {
			sa.error = -1;
			break;
		}
		take(&a, &sa);
		off += n;
	}
	if (ttrpc_reader_feed(&b, data, size) < 0)
		sb.error = -1;
	else
		take(&b, &sb);
	/* Whatever the cutting, the same frames (up to where either stopped). */
	if (!sa.error && !sb.error)
		assert(sa.n == sb.n && sa.bytes == sb.bytes && sa.last_stream == sb.last_stream);
	ttrpc_reader_done(&a);
	ttrpc_reader_done(&b);
	return 0;
}
