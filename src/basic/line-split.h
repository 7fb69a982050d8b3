/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Cutting a byte stream (a pipe, the tail of a growing file) into lines of bounded length,
 * as the bytes arrive. A line longer than LINE_SPLIT_MAX is handed out in pieces of that
 * size, so a peer that never sends a newline costs no more than the buffer.
 */
#define LINE_SPLIT_MAX 4096

typedef struct LineSplit {
	char buf[LINE_SPLIT_MAX + 1];
	size_t len;
} LineSplit;

typedef void (*line_split_cb_t)(const char *line, size_t len, void *userdata);

/* Feed @n bytes; @cb gets every complete line (without its newline, NUL-terminated). */
void line_split_feed(LineSplit *s, const char *data, size_t n, line_split_cb_t cb, void *userdata);
/* Hand out what is left without a newline, at end of stream. */
void line_split_flush(LineSplit *s, line_split_cb_t cb, void *userdata);
