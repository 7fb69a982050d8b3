/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the web view's page sends on its websocket (docs/terminal.md, "The websocket"), one
 * websocket message each, binary or text alike:
 *
 *   '0' BYTES          keys, as the terminal gets them (any bytes, possibly none)
 *   '1' COLS ',' ROWS  the page's terminal is now COLS x ROWS (decimal, no blanks)
 *
 * The server sends the terminal's output as binary messages, nothing else. A message may
 * come in websocket fragments; the assembler puts them together up to VIEW_MESSAGE_MAX.
 * Everything here is the peer's input: capped, checked, never trusted. libc only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIEW_MESSAGE_MAX (64 * 1024)
#define VIEW_COLS_MAX 1000
#define VIEW_ROWS_MAX 500

typedef enum ViewMessageKind {
	VIEW_MESSAGE_INPUT,
	VIEW_MESSAGE_RESIZE,
	_VIEW_MESSAGE_KIND_MAX,
	_VIEW_MESSAGE_KIND_INVALID = -22,
} ViewMessageKind;

typedef struct ViewMessage {
	ViewMessageKind kind;
	const uint8_t *data; /* VIEW_MESSAGE_INPUT: the keys, pointing into the message */
	size_t len;
	unsigned cols, rows; /* VIEW_MESSAGE_RESIZE */
} ViewMessage;

/*
 * view_message_parse() - one whole message. Returns 0 and fills @ret, or -EBADMSG for an
 * empty message, an unknown kind, or a size that is not two numbers within
 * 1..VIEW_COLS_MAX and 1..VIEW_ROWS_MAX.
 */
int view_message_parse(const uint8_t *buf, size_t len, ViewMessage *ret);

/* Fragments into whole messages. Fixed size: it never allocates. */
typedef struct ViewAssembler {
	uint8_t buf[VIEW_MESSAGE_MAX];
	size_t len;
	bool complete; /* buf holds a whole message, which the next fragment replaces */
} ViewAssembler;

/*
 * view_assembler_add() - add a fragment (@final: the message's last). Returns 1 when a
 * whole message is in a->buf (a->len bytes; the next call starts a new one), 0 when more
 * is to come, or -EMSGSIZE when the message would pass VIEW_MESSAGE_MAX (the connection
 * is then to be closed: the assembler is left empty).
 */
int view_assembler_add(ViewAssembler *a, const void *fragment, size_t len, bool final);
