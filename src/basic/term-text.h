/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "macros.h"

/*
 * Text from a peer (the guest, an app, an agent) on its way to a person's terminal. It is
 * written as valid UTF-8 with nothing left that a terminal acts on or that disguises a line:
 * C0 and C1 controls, DEL (so ESC, and with it every OSC, CSI and title sequence, and the
 * 8-bit CSI 0x9b), U+2028 and U+2029, and the bidirectional controls (Unicode's
 * Bidi_Control: U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069).
 *
 * By default each is shown, so that a reader sees something was there: a tab, line feed
 * and carriage return as \t, \n and \r, another C0 control or DEL as \xHH, a C1 control or
 * another of the characters above as \uHHHH, and a byte that does not begin valid UTF-8
 * (an overlong form, a surrogate, a stray or cut-off sequence, a raw 0x9b) as \xHH.
 * A backslash in the text itself is left as it is: the escapes are for reading, not for
 * decoding back (the --json outputs keep the bytes).
 */
typedef enum TermTextFlags {
	TERM_TEXT_TAB = 1 << 0,		    /* a tab passes */
	TERM_TEXT_NEWLINE = 1 << 1,	    /* a line feed passes: text of several lines */
	TERM_TEXT_NEWLINE_ESCAPED = 1 << 2, /* a line feed is the two characters \n in any form */
	/* A carriage return that ends the text or comes right before a line feed is dropped:
	 * a line from a serial console or a CRLF file, which the caller ends itself. */
	TERM_TEXT_CRLF = 1 << 3,
	/* The forms, instead of the escapes above (at most one): */
	TERM_TEXT_SPACE = 1 << 4,    /* a space; invalid bytes U+FFFD (the denial explainer) */
	TERM_TEXT_QUESTION = 1 << 5, /* '?'; invalid bytes U+FFFD (berth audit list) */
	/* JSON text: \u00HH/\uHHHH escapes, which only occur inside its strings, so the JSON
	 * value stays the same (invalid bytes, which JSON cannot hold, become \ufffd). */
	TERM_TEXT_JSON = 1 << 6,
} TermTextFlags;

/* The usual form for a line of an app's or the guest's log: tabs pass, a CRLF's CR goes. */
#define TERM_TEXT_LOG_LINE (TERM_TEXT_TAB | TERM_TEXT_CRLF)

/* Whether @cp is one of the characters above that never reaches a terminal as it is. */
bool term_text_is_hostile(uint32_t cp);

/* Write @len bytes of @s to @f, neutralised as @flags say. */
void term_text_write(FILE *f, const char *s, size_t len, unsigned flags);
/* The same for a NUL-terminated @s; NULL writes nothing. */
void term_text_puts(FILE *f, const char *s, unsigned flags);
/* One line of the program's own whose arguments are a peer's text: @fmt formatted, the
 * whole of it neutralised as @flags say, then a line feed. */
void term_text_line(FILE *f, unsigned flags, const char *fmt, ...) _printf_(3, 4);
/* A malloc()ed neutralised copy of @s, for a message built with printf-like functions
 * (log_error()); NULL when @s is NULL or on OOM. */
char *term_text_dup(const char *s, unsigned flags);

/* @len cut back to at most @max bytes without ending inside a UTF-8 sequence. */
size_t term_text_cut(const char *s, size_t len, size_t max);

/*
 * Machine-readable JSON text (a --json output, berth rpc's result): written as it is to a
 * pipe or a file, so its bytes stay exactly what they were; when @f is a terminal, with
 * TERM_TEXT_JSON, so that the same JSON value reaches a reader's screen harmless.
 */
void term_text_json(FILE *f, const char *json, size_t len);
