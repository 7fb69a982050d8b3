/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "linebuf.h"
#include "tests.h"

static void collect(const char *line, size_t len, void *userdata)
{
	char *out = userdata;

	strncat(out, line, len);
	strcat(out, "|");
}

TEST(keeps_newest_within_cap)
{
	LineBuffer *b = linebuf_new(10);
	char out[256] = "";

	ASSERT_OK(linebuf_append(b, "aaaa", 4));
	ASSERT_OK(linebuf_append(b, "bbbb", 4));
	ASSERT_OK(linebuf_append(b, "cccc", 4));
	ASSERT_EQ(linebuf_lines(b), 2);
	ASSERT_EQ(linebuf_bytes(b), 8);
	linebuf_foreach(b, collect, out);
	ASSERT_STREQ(out, "bbbb|cccc|");
	linebuf_free(b);
}

TEST(oversized_line_is_truncated)
{
	LineBuffer *b = linebuf_new(4);
	char out[256] = "";

	ASSERT_OK(linebuf_append(b, "0123456789", 10));
	linebuf_foreach(b, collect, out);
	ASSERT_STREQ(out, "0123|");
	linebuf_free(b);
}

int main(void)
{
	return tests_run();
}
