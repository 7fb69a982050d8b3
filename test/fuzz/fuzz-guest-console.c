/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what berth-vmm makes of the guest's console (which a compromised guest writes as it
 * likes) and of QEMU's standard error: the bytes cut into bounded lines as they arrive (in
 * uneven pieces, the first byte picks them), each line read for a panic or a fatal QEMU
 * error, and kept in a bounded history as the log fanout keeps them. Never a crash or a
 * leak, and the invariants below hold (abort() if not).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "line-split.h"
#include "linebuf.h"
#include "macros.h"
#include "vm-diag.h"

#define FUZZ_KEPT_MAX 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Seen {
	LineBuffer *kept;
	size_t bytes, lines;
} Seen;

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void on_line(const char *line, size_t len, void *userdata)
{
	Seen *s = userdata;
	char reason[256];
	int r;

	check(len <= LINE_SPLIT_MAX && line[len] == '\0' && !memchr(line, '\n', len));
	s->bytes += len;
	s->lines++;
	(void)vm_diag_console_panic(line);
	reason[0] = '\0';
	r = vm_diag_qemu_line(line, reason, sizeof(reason));
	check(r == 0 || r == 1);
	if (r == 1)
		check(reason[0] != '\0' && memchr(reason, '\0', sizeof(reason)));
	check(linebuf_append(s->kept, line, len) >= 0);
	check(linebuf_bytes(s->kept) <= FUZZ_KEPT_MAX);
}

static void count(const char *line, size_t len, void *userdata)
{
	size_t *n = userdata;

	check(len <= FUZZ_KEPT_MAX);
	*n += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	LineSplit split = {};
	Seen s = {.kept = linebuf_new(FUZZ_KEPT_MAX)};
	const char *in = (const char *)data + 1;
	size_t left, piece, newlines = 0, crs = 0, kept = 0;

	check(s.kept != NULL);
	if (size == 0) {
		linebuf_free(s.kept);
		return 0;
	}
	left = size - 1;
	piece = (size_t)data[0] + 1;
	for (size_t i = 0; i < left; i++)
		newlines += in[i] == '\n';
	while (left > 0) {
		size_t n = MIN(piece, left);

		line_split_feed(&split, in, n, on_line, &s);
		in += n;
		left -= n;
		piece = piece * 5 % 61 + 1;
	}
	line_split_flush(&split, on_line, &s);
	/* Every byte is in a line but the newlines, and the CRs a line may end with. */
	for (size_t i = 1; i < size; i++)
		crs += data[i] == '\r';
	check(s.bytes + newlines <= size - 1 && s.bytes + newlines + crs >= size - 1);
	check(s.lines >= newlines);
	linebuf_foreach(s.kept, count, &kept);
	check(kept == linebuf_bytes(s.kept));
	linebuf_free(s.kept);
	return 0;
}
