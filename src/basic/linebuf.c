/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "linebuf.h"

typedef struct Line {
	struct Line *next;
	size_t len;
	char text[];
} Line;

struct LineBuffer {
	Line *head, *tail;
	size_t bytes, lines, max_bytes;
};

LineBuffer *linebuf_new(size_t max_bytes)
{
	LineBuffer *b = calloc(1, sizeof(*b));

	if (b)
		b->max_bytes = max_bytes;
	return b;
}

LineBuffer *linebuf_free(LineBuffer *b)
{
	if (!b)
		return NULL;
	while (b->head) {
		Line *l = b->head;

		b->head = l->next;
		free(l);
	}
	free(b);
	return NULL;
}

int linebuf_append(LineBuffer *b, const char *line, size_t len)
{
	Line *l;

	if (len > b->max_bytes)
		len = b->max_bytes;
	l = malloc(sizeof(*l) + len + 1);
	if (!l)
		return -ENOMEM;
	l->next = NULL;
	l->len = len;
	memcpy(l->text, line, len);
	l->text[len] = '\0';
	if (b->tail)
		b->tail->next = l;
	else
		b->head = l;
	b->tail = l;
	b->bytes += len;
	b->lines++;
	while (b->bytes > b->max_bytes && b->head != b->tail) {
		Line *old = b->head;

		b->head = old->next;
		b->bytes -= old->len;
		b->lines--;
		free(old);
	}
	return 0;
}

void linebuf_foreach(const LineBuffer *b, void (*cb)(const char *line, size_t len, void *userdata),
		     void *userdata)
{
	for (const Line *l = b->head; l; l = l->next)
		cb(l->text, l->len, userdata);
}

size_t linebuf_bytes(const LineBuffer *b)
{
	return b->bytes;
}

size_t linebuf_lines(const LineBuffer *b)
{
	return b->lines;
}
