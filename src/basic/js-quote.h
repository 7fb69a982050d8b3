/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdio.h>

/*
 * Strings quoted in messages as JavaScript's JSON.stringify() quotes them: the form that
 * tools which read Berth's messages, and the SDKs that print the same messages, parse.
 * NUL bytes are kept (as \u0000); bytes >= 0x80 pass through unchanged.
 */
void js_quote(FILE *f, const char *s, size_t len);
/* The same, as a malloc()ed string; NULL on OOM. */
char *js_quoted(const char *s, size_t len);
