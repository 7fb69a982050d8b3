/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "line-reader.h"
#include "macros.h"
#include "tests.h"
#include "time-util.h"

/* A pipe holding @data, its write end closed when @close_it. */
static int feed(const void *data, size_t len, bool close_it, int *ret_wfd)
{
	int p[2];

	ASSERT_OK(pipe2(p, O_CLOEXEC));
	ASSERT_EQ(write(p[1], data, len), (ssize_t)len);
	if (close_it)
		p[1] = safe_close(p[1]);
	if (ret_wfd)
		*ret_wfd = p[1];
	return p[0];
}

TEST(lines_and_lengths)
{
	static const char text[] = "one\n\ntwo\0half\nlast";
	int fd = feed(text, sizeof(text) - 1, true, NULL);
	LineReader r;
	char *line;
	size_t len;

	line_reader_init(&r, fd, 64);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_STREQ(line, "one");
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_EQ(len, 0);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_EQ(len, 8); /* a NUL inside a line does not cut it */
	ASSERT_TRUE(memcmp(line, "two\0half", 8) == 0);
	/* "last" has no newline: dropped at EOF unless asked for. */
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 0);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 0);
	line_reader_done(&r);
	close(fd);

	fd = feed(text, sizeof(text) - 1, true, NULL);
	r = LINE_READER_INIT(fd, 64);
	r.keep_partial = true;
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(line_reader_next(&r, -1, &line, NULL), 1);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_STREQ(line, "last");
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 0);
	line_reader_done(&r);
	close(fd);
}

TEST(long_lines_are_refused_once)
{
	char text[4096] = "";
	LineReader r;
	char *line;
	size_t len;
	int fd;

	/* 16 bytes fit; 17 do not; the reader goes on after the long line's newline. */
	snprintf(text, sizeof(text), "%s\n%s\n%s\nok\n%s", "0123456789abcdef", "0123456789abcdefg",
		 "x", "0123456789abcdefXYZ");
	memset(text + strlen(text), 'z', 3000);
	text[sizeof(text) - 1] = '\0';
	fd = feed(text, strlen(text), true, NULL);
	line_reader_init(&r, fd, 16);
	r.keep_partial = true;
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_EQ(len, 16);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), -EMSGSIZE);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_STREQ(line, "x");
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 1);
	ASSERT_STREQ(line, "ok");
	/* A long last line without a newline: refused, then the end. */
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), -EMSGSIZE);
	ASSERT_EQ(line_reader_next(&r, -1, &line, &len), 0);
	ASSERT_TRUE(r.alloc <= 16 + 2);
	line_reader_done(&r);
	close(fd);
}

TEST(timeouts_and_cancel)
{
	int wfd, fd = feed("partial", 7, false, &wfd), cfd = eventfd(0, EFD_CLOEXEC);
	int64_t t0;
	LineReader r;
	char *line;

	line_reader_init(&r, fd, 1024);
	ASSERT_EQ(line_reader_next(&r, 0, &line, NULL), -ETIME);
	t0 = now_ms();
	ASSERT_EQ(line_reader_next(&r, 50, &line, NULL), -ETIME);
	ASSERT_TRUE(now_ms() - t0 >= 45);
	ASSERT_EQ(write(wfd, " line\nnext\n", 11), 11);
	ASSERT_EQ(line_reader_next(&r, 0, &line, NULL), 1);
	ASSERT_STREQ(line, "partial line");
	ASSERT_EQ(line_reader_next(&r, 0, &line, NULL), 1);
	ASSERT_STREQ(line, "next");
	r.cancel_fd = cfd;
	ASSERT_EQ(eventfd_write(cfd, 1), 0);
	ASSERT_EQ(line_reader_next(&r, -1, &line, NULL), -ECANCELED);
	line_reader_done(&r);
	close(wfd);
	close(fd);
	close(cfd);
}

TEST(many_lines_through_a_small_buffer)
{
	int p[2];
	LineReader r;
	char *line;
	size_t len;
	pid_t pid;

	ASSERT_OK(pipe2(p, O_CLOEXEC));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		FILE *f = fdopen(p[1], "w");

		for (int i = 0; i < 20000; i++)
			fprintf(f, "line %d %.*s\n", i, i % 50,
				"..................................................");
		fclose(f);
		_exit(0);
	}
	close(p[1]);
	line_reader_init(&r, p[0], 64);
	for (int i = 0; i < 20000; i++) {
		char want[128];

		snprintf(want, sizeof(want), "line %d %.*s", i, i % 50,
			 "..................................................");
		ASSERT_EQ(line_reader_next(&r, 10000, &line, &len), 1);
		ASSERT_STREQ(line, want);
	}
	ASSERT_EQ(line_reader_next(&r, 10000, &line, &len), 0);
	line_reader_done(&r);
	close(p[0]);
}

int main(void)
{
	return tests_run();
}
