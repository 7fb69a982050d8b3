/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the egress broker's view of what an app sends: the request head parser, the head
 * it forwards, the host classification, and the body framing fed the rest of the input in
 * uneven pieces. Never a crash or a leak, and the invariants below hold (abort() if not).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-head.h"
#include "rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	HttpRequest req = {};
	char err[256] = "", host[EGRESS_HOST_MAX + 3];
	HttpHeadStatus st = http_request_parse(in, size, &req, err, sizeof(err));
	const char *rest;
	size_t left, piece = 1;
	HttpBody body;

	check(st < _HTTP_HEAD_STATUS_MAX);
	if (st == HTTP_HEAD_BAD_REQUEST)
		check(err[0] != '\0');
	if (st != HTTP_HEAD_OK)
		return 0;
	check(req.head_size <= size && req.head_size <= HTTP_HEAD_MAX);
	check(req.n_headers <= HTTP_HEADERS_MAX);
	check(req.port >= 1 && req.port <= 65535);
	check(strlen(req.host) <= EGRESS_HOST_MAX + 2);
	strcpy(host, req.host);
	check(egress_host_normalize(host) < _EGRESS_HOST_KIND_MAX);
	if (!req.connect) {
		char *out = NULL;
		ssize_t n = http_request_forward_head(&req, "h.test", &out);

		check(n > 0 && out && strstr(out, "\r\n\r\n") == out + n - 4);
		check(strstr(out, "Connection: close\r\n") != NULL);
		/* The body goes on as framed: the forwarded head must frame it the same way. */
		if (req.content_length > 0)
			check(strcasestr(out, "\r\ncontent-length: ") != NULL);
		check(!req.chunked || strstr(out, "\r\nTransfer-Encoding: chunked\r\n") != NULL);
		free(out);
		http_body_init(&body, &req);
		rest = in + req.head_size;
		left = size - req.head_size;
		while (left > 0) {
			size_t n_in = piece < left ? piece : left;
			ssize_t took = http_body_feed(&body, rest, n_in);

			if (took < 0)
				break;
			check((size_t)took <= n_in);
			check((size_t)took == n_in || http_body_done(&body));
			rest += n_in;
			left -= n_in;
			piece = piece * 3 % 17 + 1;
		}
	}
	http_request_done(&req);
	return 0;
}
