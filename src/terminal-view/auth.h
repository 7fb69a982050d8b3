/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the terminal's web view checks on every request before it answers (docs/terminal.md):
 * the login, as HTTP Basic, and for a websocket the page it comes from. The header values
 * are the peer's; every one is capped, and nothing here allocates. libc only.
 */

#include <stdbool.h>
#include <stddef.h>

/* A header value longer than this is refused without being looked at. */
#define VIEW_HEADER_MAX 1024
/* "berth:" and the secret: 24 random bytes in base64url are 32 characters. */
#define VIEW_CREDENTIAL_MAX 128
#define VIEW_USER "berth"

/*
 * view_credential_valid() - is @s (@len bytes) a login this server takes: "berth:" then
 * 16 to VIEW_CREDENTIAL_MAX - 6 characters of base64url? The host makes one of
 * 24 random bytes; anything shorter is not worth guarding a shell with.
 */
bool view_credential_valid(const char *s, size_t len);

/*
 * view_auth_ok() - does the Authorization header @value (@len bytes, NULL when absent)
 * carry @credential? "Basic" (any case), blanks, then the standard base64 of
 * "user:password" with its padding; blanks around are allowed, nothing else.
 * SECURITY: the decoded bytes are compared with @credential in time that does not depend
 * on where they differ, or on how long either is.
 */
bool view_auth_ok(const char *value, size_t len, const char *credential);

/*
 * view_origin_ok() - may a websocket whose Origin header is @origin (NULL when absent)
 * open on a server the browser reached as @host (the Host header, NULL when absent)?
 * Yes without an Origin (not a browser: a browser always sends one), or when it is exactly
 * "http://" followed by @host (the host compared without regard to case). A page of
 * another site that the browser would send the cached login with is refused.
 */
bool view_origin_ok(const char *origin, const char *host);
