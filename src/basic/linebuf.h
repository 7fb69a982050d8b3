/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/*
 * A bounded history of text lines: appending past @max_bytes drops the oldest lines.
 * Used for replaying boot events and guest logs to a reader that attaches late.
 */
typedef struct LineBuffer LineBuffer;

LineBuffer *linebuf_new(size_t max_bytes);
LineBuffer *linebuf_free(LineBuffer *b);
/* Copy @len bytes of @line (no newline) in; lines longer than max_bytes are truncated. */
int linebuf_append(LineBuffer *b, const char *line, size_t len);
/* Call @cb for every stored line, oldest first. */
void linebuf_foreach(const LineBuffer *b, void (*cb)(const char *line, size_t len, void *userdata),
		     void *userdata);
size_t linebuf_bytes(const LineBuffer *b);
size_t linebuf_lines(const LineBuffer *b);
