/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal's web view login (terminal-login.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "terminal-login.h"

/* RFC 4648, section 5. */
static const char base64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* @n (a multiple of 3, at most 48) random bytes from getrandom() as 4n/3 base64url
 * characters and a NUL at @ret: no padding needed. */
static int random_base64url(size_t n, char *ret)
{
	uint8_t secret[48];
	size_t got = 0, o = 0;

	if (n % 3 || n > sizeof(secret))
		return -EINVAL;
	while (got < n) {
		ssize_t k = getrandom(secret + got, n - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		got += (size_t)k;
	}
	for (size_t i = 0; i < n; i += 3) {
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

int terminal_login_new(char ret[static TERMINAL_LOGIN_LEN + 1])
{
	size_t o = strlen(TERMINAL_LOGIN_USER ":");

	memcpy(ret, TERMINAL_LOGIN_USER ":", o);
	return random_base64url(TERMINAL_LOGIN_SECRET_BYTES, ret + o);
}

int vnc_password_new(char ret[static VNC_PASSWORD_LEN + 1])
{
	return random_base64url(VNC_PASSWORD_BYTES, ret);
}

const char *terminal_login_secret(const char *login)
{
	return login + strlen(TERMINAL_LOGIN_USER ":");
}
