/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what the terminal's web view checks itself (src/terminal-view/auth.c, message.c):
 * the Authorization and Origin headers, and its websocket messages as the page sends them,
 * assembled from fragments. abort() when an invariant breaks.
 *
 * Input: a selector byte, then
 *   0: an Authorization header value (the login is LOGIN below);
 *   1: "ORIGIN\nHOST";
 *   2..: fragments, each [final byte][length, 2 bytes LE][bytes], into one assembler.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LOGIN "berth:fuzzfuzzfuzzfuzzfuzz0123456789"
/* base64(LOGIN): the only token that may pass. */
#define TOKEN "YmVydGg6ZnV6emZ1enpmdXp6ZnV6emZ1enowMTIzNDU2Nzg5"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void auth(const char *s, size_t len)
{
	size_t i = 0, end = len;

	if (!view_auth_ok(s, len, LOGIN))
		return;
	/* Accepted: blanks, the scheme in some case, blanks, the one token, blanks. */
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	while (s[end - 1] == ' ' || s[end - 1] == '\t')
		end--;
	check(strncasecmp(s + i, "basic", 5) == 0);
	i += 5;
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	check(end - i == strlen(TOKEN) && memcmp(s + i, TOKEN, end - i) == 0);
}

static void origin(char *s)
{
	char *nl = strchr(s, '\n');
	const char *host = nl ? nl + 1 : NULL;

	if (nl)
		*nl = '\0';
	check(view_origin_ok(NULL, host));
	if (!view_origin_ok(s, host))
		return;
	check(host && strncmp(s, "http://", 7) == 0 && strcasecmp(s + 7, host) == 0);
}

static void messages(const uint8_t *p, size_t n)
{
	static ViewAssembler a;
	ViewMessage m;

	a.len = 0;
	a.complete = false;
	while (n >= 3) {
		bool final = p[0] & 1;
		size_t len = (size_t)p[1] | (size_t)p[2] << 8, before = a.complete ? 0 : a.len;
		int r;

		p += 3;
		n -= 3;
		len = len < n ? len : n;
		r = view_assembler_add(&a, p, len, final);
		check(r == 1 || r == 0 || r == -EMSGSIZE);
		check(a.len <= VIEW_MESSAGE_MAX);
		if (r >= 0)
			check(a.len == before + len && memcmp(a.buf + before, p, len) == 0);
		else
			check(a.len == 0 && before + len > VIEW_MESSAGE_MAX);
		p += len;
		n -= len;
		if (r != 1 || view_message_parse(a.buf, a.len, &m) < 0)
			continue;
		if (m.kind == VIEW_MESSAGE_INPUT)
			check(a.buf[0] == '0' && m.data == a.buf + 1 && m.len == a.len - 1);
		else
			check(m.kind == VIEW_MESSAGE_RESIZE && a.buf[0] == '1' && m.cols >= 1 &&
			      m.cols <= VIEW_COLS_MAX && m.rows >= 1 && m.rows <= VIEW_ROWS_MAX);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size == 0)
		return 0;
	if (data[0] >= 2) {
		messages(data + 1, size - 1);
		return 0;
	}
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] == 0)
		auth(s, strlen(s));
	else
		origin(s);
	free(s);
	return 0;
}
