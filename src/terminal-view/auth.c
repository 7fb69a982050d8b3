/* SPDX-License-Identifier: Apache-2.0 */
/* The web view's login and origin checks (auth.h). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "auth.h"

#define SECRET_MIN 16

static bool base64url_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

bool view_credential_valid(const char *s, size_t len)
{
	const size_t prefix = strlen(VIEW_USER ":");

	if (!s || len > VIEW_CREDENTIAL_MAX || len < prefix + SECRET_MIN ||
	    memcmp(s, VIEW_USER ":", prefix) != 0)
		return false;
	for (size_t i = prefix; i < len; i++)
		if (!base64url_char(s[i]))
			return false;
	return true;
}

/* The value of a base64 character (RFC 4648, section 4), or -1. */
static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode @len characters of padded base64 into @out (room for @size bytes). Returns the
 * number of bytes, or -1 for anything but canonical base64 that fits. */
static int b64_decode(const char *s, size_t len, uint8_t *out, size_t size)
{
	size_t n = 0;

	if (len == 0 || len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
		int v[4];

		for (int k = 0; k < 4 - pad; k++)
			if ((v[k] = b64_value(s[i + k])) < 0)
				return -1;
		/* Padding only at the very end; the bits it hides must be zero. */
		if ((pad == 1 && (v[2] & 0x3)) || (pad == 2 && (v[1] & 0xf)))
			return -1;
		if (n + 3 - (size_t)pad > size)
			return -1;
		out[n++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[n++] = (uint8_t)((v[1] & 0xf) << 4 | v[2] >> 2);
		if (pad < 1)
			out[n++] = (uint8_t)((v[2] & 0x3) << 6 | v[3]);
	}
	return (int)n;
}

/* Equal, in time that depends only on the buffers' fixed size. */
static bool equal_fixed_time(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	uint8_t pa[VIEW_CREDENTIAL_MAX] = {}, pb[VIEW_CREDENTIAL_MAX] = {};
	volatile uint8_t diff = (uint8_t)(alen != blen);

	if (alen > sizeof(pa) || blen > sizeof(pb))
		return false;
	memcpy(pa, a, alen);
	memcpy(pb, b, blen);
	for (size_t i = 0; i < sizeof(pa); i++)
		diff |= (uint8_t)(pa[i] ^ pb[i]);
	return diff == 0;
}

bool view_auth_ok(const char *value, size_t len, const char *credential)
{
	uint8_t decoded[VIEW_CREDENTIAL_MAX];
	size_t i = 0, end = len;
	int n;

	if (!value || !credential || len > VIEW_HEADER_MAX)
		return false;
	while (i < end && (value[i] == ' ' || value[i] == '\t'))
		i++;
	while (end > i && (value[end - 1] == ' ' || value[end - 1] == '\t'))
		end--;
	if (end - i < 6 || strncasecmp(value + i, "basic", 5) != 0 ||
	    (value[i + 5] != ' ' && value[i + 5] != '\t'))
		return false;
	i += 5;
	while (i < end && (value[i] == ' ' || value[i] == '\t'))
		i++;
	n = b64_decode(value + i, end - i, decoded, sizeof(decoded));
	if (n < 0)
		return false;
	return equal_fixed_time(decoded, (size_t)n, (const uint8_t *)credential,
				strlen(credential));
}

bool view_origin_ok(const char *origin, const char *host)
{
	const size_t scheme = strlen("http://");

	if (!origin)
		return true;
	if (!host || !*host || strlen(origin) != scheme + strlen(host))
		return false;
	return strncmp(origin, "http://", scheme) == 0 && strcasecmp(origin + scheme, host) == 0;
}
