/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the terminal's web view as a browser reaches it: the bytes of one connection go to
 * the real server (libwebsockets' HTTP parser and websocket framing, then the view's own
 * checks and message handling, src/terminal-view/server.c) through a socketpair, as if it
 * had been accepted. No terminal is attached (attach_argv NULL), so a websocket that opens
 * takes messages and drops the keys. The server must answer or close, never crash, and must
 * never let a websocket open or a page through without the login.
 *
 * Input: the bytes a client sends; the login is LOGIN below (base64: TOKEN), which the
 * seeds carry so that the fuzzer starts past the check.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LOGIN "berth:fuzzfuzzfuzzfuzzfuzz0123456789"
#define TOKEN "YmVydGg6ZnV6emZ1enpmdXp6ZnV6emZ1enowMTIzNDU2Nzg5"
#define ROUNDS_MAX 400
/* Rounds with nothing written either way, once all was sent: the server waits for more. */
#define IDLE_ROUNDS 8

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* Did the server answer something it must not have, for this input? */
static void check_answer(const uint8_t *in, size_t in_len, const char *out, size_t out_len)
{
	bool login = memmem(in, in_len, TOKEN, strlen(TOKEN)) != NULL;

	/* Without the login in the request, no page and no websocket. */
	if (!login) {
		check(!memmem(out, out_len, "HTTP/1.1 200", 12));
		check(!memmem(out, out_len, "HTTP/1.1 101", 12));
	}
}

/* One server for every input, as a browser would find it: a context takes milliseconds to
 * make under the sanitizers, a connection much less. Each input is a connection of its own,
 * closed and seen closed before the next. */
static ViewServer *server(void)
{
	static ViewServer *s;
	ViewConfig cfg = {.port = 0, .credential = LOGIN};
	char err[256];

	if (!s && view_server_new(&cfg, &s, err, sizeof(err)) < 0)
		abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[1 << 20];
	size_t sent = 0, out_len = 0;
	ViewServer *s = server();
	bool shut = false;
	int sp[2], idle = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	(void)fcntl(sp[1], F_SETFL, O_NONBLOCK);
	check(view_server_adopt(s, sp[0]) == 0);
	for (int round = 0; round < ROUNDS_MAX && idle < IDLE_ROUNDS; round++) {
		ssize_t n;

		idle++;
		if (sent < size) {
			n = write(sp[1], data + sent, size - sent);
			if (n > 0) {
				sent += (size_t)n;
				idle = 0;
			}
		} else if (!shut) {
			(void)shutdown(sp[1], SHUT_WR);
			shut = true;
		}
		(void)view_server_service(s, -1);
		n = read(sp[1], out + out_len, sizeof(out) - out_len);
		if (n == 0)
			break; /* the server closed the connection */
		if (n > 0) {
			out_len += (size_t)n;
			idle = 0;
		}
		if (out_len == sizeof(out))
			out_len = 0;
	}
	check_answer(data, size, out, out_len);
	close(sp[1]);
	/* The server sees the connection go before the next input comes. */
	for (int round = 0; round < ROUNDS_MAX && view_server_sessions(s) > 0; round++)
		(void)view_server_service(s, -1);
	(void)view_server_service(s, -1);
	check(view_server_sessions(s) == 0);
	return 0;
}
