/* SPDX-License-Identifier: Apache-2.0 */
/* The web view's websocket messages (message.h). */
#include <errno.h>
#include <string.h>

#include "message.h"

/* A decimal number of 1..@max with no sign, blank or leading zero. Returns the number of
 * characters taken, or 0. */
static size_t parse_dimension(const uint8_t *s, size_t len, unsigned max, unsigned *ret)
{
	unsigned v = 0;
	size_t i = 0;

	if (len == 0 || s[0] == '0')
		return 0;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > max)
			return 0;
		i++;
	}
	if (i == 0 || v == 0)
		return 0;
	*ret = v;
	return i;
}

int view_message_parse(const uint8_t *buf, size_t len, ViewMessage *ret)
{
	size_t n, m;

	if (!buf || len == 0)
		return -EBADMSG;
	switch (buf[0]) {
	case '0':
		*ret = (ViewMessage){.kind = VIEW_MESSAGE_INPUT, .data = buf + 1, .len = len - 1};
		return 0;
	case '1':
		*ret = (ViewMessage){.kind = VIEW_MESSAGE_RESIZE};
		n = parse_dimension(buf + 1, len - 1, VIEW_COLS_MAX, &ret->cols);
		if (n == 0 || 1 + n >= len || buf[1 + n] != ',')
			return -EBADMSG;
		m = parse_dimension(buf + 2 + n, len - 2 - n, VIEW_ROWS_MAX, &ret->rows);
		if (m == 0 || 2 + n + m != len)
			return -EBADMSG;
		return 0;
	default:
		return -EBADMSG;
	}
}

int view_assembler_add(ViewAssembler *a, const void *fragment, size_t len, bool final)
{
	if (a->complete)
		a->len = 0;
	a->complete = false;
	if (len > sizeof(a->buf) - a->len) {
		a->len = 0;
		return -EMSGSIZE;
	}
	if (len > 0)
		memcpy(a->buf + a->len, fragment, len);
	a->len += len;
	a->complete = final;
	return final ? 1 : 0;
}
