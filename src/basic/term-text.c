/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "term-text.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

/* One code point of @s (at most @n bytes), strictly: no overlong forms, no surrogates,
 * nothing past U+10FFFF. Returns its length, 0 when the bytes are not valid UTF-8. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *ret)
{
	size_t len;
	uint32_t cp, min;

	if (s[0] < 0x80) {
		*ret = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret = cp;
	return len;
}

bool term_text_is_hostile(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

static void put_hostile(FILE *f, uint32_t cp, unsigned flags)
{
	if (flags & TERM_TEXT_SPACE)
		fputc(' ', f);
	else if (flags & TERM_TEXT_QUESTION)
		fputc('?', f);
	else if (flags & TERM_TEXT_JSON)
		fprintf(f, "\\u%04x", (unsigned)cp);
	else if (cp == '\t')
		fputs("\\t", f);
	else if (cp == '\n')
		fputs("\\n", f);
	else if (cp == '\r')
		fputs("\\r", f);
	else if (cp < 0x20 || cp == 0x7f)
		fprintf(f, "\\x%02x", (unsigned)cp);
	else
		fprintf(f, "\\u%04x", (unsigned)cp);
}

static void put_invalid(FILE *f, unsigned char byte, unsigned flags)
{
	if (flags & TERM_TEXT_JSON)
		fputs("\\ufffd", f);
	else if (flags & (TERM_TEXT_SPACE | TERM_TEXT_QUESTION))
		fputs(REPLACEMENT, f);
	else
		fprintf(f, "\\x%02x", (unsigned)byte);
}

void term_text_write(FILE *f, const char *s, size_t len, unsigned flags)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t clean = 0; /* start of the run of bytes that pass, written in one go */

	if (len == 0) /* @s may be NULL then */
		return;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_decode(u + i, len - i, &cp);

		if (n > 0 && !term_text_is_hostile(cp)) {
			i += n;
			continue;
		}
		if (n > 0 && cp == '\t' && (flags & TERM_TEXT_TAB)) {
			i++;
			continue;
		}
		if (n > 0 && cp == '\n' && (flags & TERM_TEXT_NEWLINE)) {
			i++;
			continue;
		}
		if (i > clean)
			fwrite(u + clean, 1, i - clean, f);
		if (n == 0) {
			put_invalid(f, u[i], flags);
			n = 1;
		} else if (cp == '\r' && (flags & TERM_TEXT_CRLF) &&
			   (i + 1 == len || u[i + 1] == '\n'))
			; /* the line's end, which the caller writes */
		else if (cp == '\n' && (flags & TERM_TEXT_NEWLINE_ESCAPED))
			fputs("\\n", f);
		else
			put_hostile(f, cp, flags);
		i += n;
		clean = i;
	}
	if (len > clean)
		fwrite(u + clean, 1, len - clean, f);
}

void term_text_puts(FILE *f, const char *s, unsigned flags)
{
	if (s)
		term_text_write(f, s, strlen(s), flags);
}

void term_text_line(FILE *f, unsigned flags, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		text = NULL; /* its contents are undefined then */
	else
		term_text_write(f, text, (size_t)n, flags);
	fputc('\n', f);
	free(text);
}

char *term_text_dup(const char *s, unsigned flags)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f;
	bool bad;

	if (!s)
		return NULL;
	f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	term_text_write(f, s, strlen(s), flags);
	bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(buf);
		return NULL;
	}
	return buf;
}

size_t term_text_cut(const char *s, size_t len, size_t max)
{
	size_t cut = max;

	if (len <= max)
		return len;
	/* Back over at most three continuation bytes to the sequence's first byte; a longer
	 * run of them is invalid anyway and is cut where it is. */
	while (cut > 0 && max - cut < 3 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	return ((unsigned char)s[cut] & 0xc0) == 0x80 ? max : cut;
}

void term_text_json(FILE *f, const char *json, size_t len)
{
	int fd = fileno(f);

	if (fd >= 0 && isatty(fd))
		term_text_write(f, json, len, TERM_TEXT_JSON | TERM_TEXT_TAB | TERM_TEXT_NEWLINE);
	else
		fwrite(json, 1, len, f);
}
