/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal's web view login (terminal-login.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "terminal-login.h"

/* RFC 4648, section 5. */
static const char base64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int terminal_login_new(char ret[static TERMINAL_LOGIN_LEN + 1])
{
	uint8_t secret[TERMINAL_LOGIN_SECRET_BYTES];
	size_t got = 0, o;

	while (got < sizeof(secret)) {
		ssize_t n = getrandom(secret + got, sizeof(secret) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	o = strlen(TERMINAL_LOGIN_USER ":");
	memcpy(ret, TERMINAL_LOGIN_USER ":", o);
	/* 24 bytes are 8 groups of 3, so no padding. */
	for (size_t i = 0; i < sizeof(secret); i += 3) {
		uint32_t v =
			(uint32_t)secret[i] << 16 | (uint32_t)secret[i + 1] << 8 | secret[i + 2];

		ret[o++] = base64url[v >> 18 & 63];
		ret[o++] = base64url[v >> 12 & 63];
		ret[o++] = base64url[v >> 6 & 63];
		ret[o++] = base64url[v & 63];
	}
	ret[o] = '\0';
	explicit_bzero(secret, sizeof(secret));
	return 0;
}

const char *terminal_login_secret(const char *login)
{
	return login + strlen(TERMINAL_LOGIN_USER ":");
}
