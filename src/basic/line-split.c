/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "line-split.h"

static void emit(LineSplit *s, line_split_cb_t cb, void *userdata)
{
	size_t n = s->len;

	/* A console writes CRLF. */
	if (n > 0 && s->buf[n - 1] == '\r')
		n--;
	s->buf[n] = '\0';
	cb(s->buf, n, userdata);
	s->len = 0;
}

void line_split_feed(LineSplit *s, const char *data, size_t n, line_split_cb_t cb, void *userdata)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n') {
			emit(s, cb, userdata);
			continue;
		}
		s->buf[s->len++] = data[i];
		if (s->len == LINE_SPLIT_MAX)
			emit(s, cb, userdata);
	}
}

void line_split_flush(LineSplit *s, line_split_cb_t cb, void *userdata)
{
	if (s->len > 0)
		emit(s, cb, userdata);
}
