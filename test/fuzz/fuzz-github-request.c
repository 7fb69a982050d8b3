/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what the GitHub broker reads inside the tunnel with the egress broker's parser: the
 * origin-form request head, the head it forwards to GitHub (the app's Authorization always
 * replaced), the body framing fed the rest in uneven pieces, and, for input that starts
 * "HTTP/", the response head it passes back. Never a crash or a leak, and the invariants
 * below hold (abort() if not).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-head.h"
#include "routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void response(const char *in, size_t size)
{
	size_t used = 0;

	while (used < size) {
		char *out = NULL;
		size_t len, took;
		int status;

		if (http_response_head_close(in + used, size - used, &out, &len, &took, &status) !=
		    HTTP_HEAD_OK)
			return;
		check(took > 0 && took <= size - used && status >= 100 && status <= 999);
		check(len >= 4 && memcmp(out + len - 4, "\r\n\r\n", 4) == 0);
		/* The final head always ends the connection, and says so once: no other
		 * Connection, Keep-Alive or Proxy-Connection line (a header's value may hold
		 * those words; only a line's start names a header). */
		if (status >= 200) {
			check(strstr(out, "\r\nConnection: close\r\n\r\n") == out + len - 23);
			check(strcasestr(out, "\r\nconnection:") == out + len - 23);
			check(!strcasestr(out, "\r\nkeep-alive:"));
			check(!strcasestr(out, "\r\nproxy-connection:"));
		}
		free(out);
		used += took;
		if (status >= 200)
			return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const drop[] = {"authorization", NULL};
	const char *in = (const char *)data;
	HttpRequest req = {};
	char err[256] = "";
	HttpHeadStatus st;
	GithubRoute route = {};
	size_t left, piece = 1;
	const char *rest;
	HttpBody body;

	if (size >= 5 && memcmp(in, "HTTP/", 5) == 0) {
		response(in, size);
		return 0;
	}
	st = http_origin_request_parse(in, size, &req, err, sizeof(err));
	check(st < _HTTP_HEAD_STATUS_MAX && st != HTTP_HEAD_NOT_ABSOLUTE);
	if (st == HTTP_HEAD_BAD_REQUEST)
		check(err[0] != '\0');
	if (st != HTTP_HEAD_OK)
		return 0;
	check(req.path && req.path[0] == '/' && !req.connect);
	if (github_route_classify(req.method, req.path, &route) == 0) {
		char *out = NULL;
		ssize_t n = http_request_forward(&req,
						 &(HttpForward){.host = GITHUB_API_HOST,
								.path = route.path,
								.drop = drop,
								.extra = "Authorization: Bearer T\r\n"},
						 &out);

		check(n > 0 && out && strstr(out, "\r\n\r\n") == out + n - 4);
		/* Exactly one credential, the broker's. */
		check(strcasestr(out, "\r\nauthorization:") == strstr(out, "\r\nAuthorization: Bearer T\r\n"));
		check(!strcasestr(strcasestr(out, "\r\nauthorization:") + 2, "\r\nauthorization:"));
		check(strncmp(out + strlen(req.method) + 1, route.path, strlen(route.path)) == 0);
		free(out);
		github_route_done(&route);
	}
	http_body_init(&body, &req);
	rest = in + req.head_size;
	left = size - req.head_size;
	while (left > 0) {
		size_t n_in = piece < left ? piece : left;
		ssize_t took = http_body_feed(&body, rest, n_in);

		if (took < 0)
			break;
		check((size_t)took <= n_in);
		rest += n_in;
		left -= n_in;
		piece = piece * 3 % 17 + 1;
	}
	http_request_done(&req);
	return 0;
}
