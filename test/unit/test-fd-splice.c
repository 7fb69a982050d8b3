/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-splice.h"
#include "flow.h"
#include "tests.h"

/* ---- Flow ---- */

TEST(flow_put_read_write)
{
	Flow f = FLOW_INIT(8);
	int p[2];
	char buf[16] = "";

	ASSERT_FALSE(flow_wants_write(&f));
	ASSERT_TRUE(flow_wants_read(&f));
	ASSERT_EQ(f.buf, NULL); /* nothing allocated until it is needed */
	ASSERT_OK(flow_alloc(&f));
	ASSERT_NOT_NULL(f.buf);
	ASSERT_EQ(flow_put(&f, "abcdefghij", 10), 8); /* what fits */
	ASSERT_EQ(flow_room(&f), 0);
	ASSERT_FALSE(flow_wants_read(&f));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p));
	ASSERT_EQ(flow_write(&f, p[0]), 8);
	ASSERT_EQ(f.bytes, 8);
	ASSERT_EQ(flow_len(&f), 0);
	ASSERT_EQ(read(p[1], buf, sizeof(buf)), 8);
	ASSERT_TRUE(memcmp(buf, "abcdefgh", 8) == 0);

	/* Reading: what is there, then nothing (EAGAIN), then EOF. */
	ASSERT_EQ(write(p[1], "xyz", 3), 3);
	ASSERT_EQ(flow_read(&f, p[0]), 3);
	ASSERT_EQ(flow_read(&f, p[0]), 0);
	ASSERT_FALSE(f.eof);
	ASSERT_OK(shutdown(p[1], SHUT_WR));
	ASSERT_EQ(flow_read(&f, p[0]), 0);
	ASSERT_TRUE(f.eof);
	ASSERT_FALSE(flow_wants_read(&f));

	/* The half-close waits for the buffer to drain. */
	ASSERT_FALSE(flow_pass_eof(&f, p[0]));
	ASSERT_EQ(flow_write(&f, p[0]), 3);
	ASSERT_TRUE(flow_pass_eof(&f, p[0]));
	ASSERT_EQ(read(p[1], buf, sizeof(buf)), 3);
	ASSERT_EQ(read(p[1], buf, sizeof(buf)), 0); /* the SHUT_WR arrived */
	flow_done(&f);
	close(p[0]);
	close(p[1]);
}

TEST(flow_compacts)
{
	Flow f = FLOW_INIT(8);
	int p[2];
	char buf[8];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p));
	ASSERT_EQ(flow_put(&f, "12345678", 8), 8);
	/* Let only part of it out: the rest moves to the front when room is needed. */
	f.start = 5;
	ASSERT_EQ(flow_put(&f, "abcde", 5), 5);
	ASSERT_EQ(flow_write(&f, p[0]), 8);
	ASSERT_EQ(read(p[1], buf, sizeof(buf)), 8);
	ASSERT_TRUE(memcmp(buf, "678abcde", 8) == 0);
	flow_done(&f);
	close(p[0]);
	close(p[1]);
}

TEST(flow_to_a_pipe)
{
	Flow f = FLOW_INIT(16);
	int p[2];
	char buf[8];

	ASSERT_OK(pipe2(p, O_CLOEXEC | O_NONBLOCK));
	f.eof = true;
	ASSERT_EQ(flow_put(&f, "pipe", 4), 4);
	ASSERT_EQ(flow_write(&f, p[1]), 4);
	ASSERT_TRUE(f.not_socket);
	ASSERT_TRUE(flow_pass_eof(&f, p[1])); /* nothing to shut down, but done */
	ASSERT_EQ(read(p[0], buf, sizeof(buf)), 4);
	flow_done(&f);
	close(p[0]);
	close(p[1]);
}

/* ---- the splice ---- */

typedef struct Ends {
	int done, error;
	uint64_t bytes[2];
} Ends;

static void on_done(FdSplice *s, int error, void *userdata)
{
	Ends *e = userdata;

	e->done++;
	e->error = error;
	fd_splice_bytes(s, e->bytes);
}

static void run_until(EvLoop *loop, const int *flag)
{
	for (int i = 0; i < 1000 && !*flag; i++)
		ASSERT_TRUE(ev_run(loop, 100 * 1000) >= 0);
}

/* Read until EOF from a non-blocking fd, running the loop in between. */
static size_t drain_fd(EvLoop *loop, int fd, char *buf, size_t size)
{
	size_t len = 0;

	for (int i = 0; i < 100000; i++) {
		ssize_t n = read(fd, buf + len, size - len);

		if (n == 0)
			return len;
		if (n > 0)
			len += (size_t)n;
		else
			ASSERT_TRUE(ev_run(loop, 100 * 1000) >= 0);
	}
	TEST_FAIL("no EOF");
	return len;
}

static void pairs(int x[2], int y[2])
{
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, x));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, y));
}

TEST(splice_first_bytes_both_ways_half_close)
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	char buf[64];
	int x[2], y[2];
	Ends e = {};

	ASSERT_OK(ev_loop_new(&loop));
	pairs(x, y);
	ASSERT_OK(fd_splice_new(
		loop, x[1], y[0],
		&(FdSpliceConfig){
			.first = "hello ", .first_len = 6, .done = on_done, .userdata = &e},
		NULL));
	ASSERT_EQ(write(x[0], "world", 5), 5);
	ASSERT_EQ(write(y[1], "reply", 5), 5);
	ASSERT_OK(shutdown(x[0], SHUT_WR));
	/* x's half-close reaches y, and y can still answer. */
	ASSERT_EQ(drain_fd(loop, y[1], buf, sizeof(buf)), 11);
	ASSERT_TRUE(memcmp(buf, "hello world", 11) == 0);
	ASSERT_EQ(e.done, 0);
	ASSERT_OK(shutdown(y[1], SHUT_WR));
	ASSERT_EQ(drain_fd(loop, x[0], buf, sizeof(buf)), 5);
	ASSERT_TRUE(memcmp(buf, "reply", 5) == 0);
	run_until(loop, &e.done);
	ASSERT_EQ(e.done, 1);
	ASSERT_EQ(e.error, 0);
	ASSERT_EQ(e.bytes[0], 11);
	ASSERT_EQ(e.bytes[1], 5);
	close(x[0]);
	close(y[1]);
}

TEST(splice_more_than_its_buffers)
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	static char in[1024 * 1024], out[sizeof(in)];
	size_t sent = 0, got = 0;
	int x[2], y[2];
	Ends e = {};

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7 + i / 4096);
	ASSERT_OK(ev_loop_new(&loop));
	pairs(x, y);
	ASSERT_OK(fd_splice_new(loop, x[1], y[0],
				&(FdSpliceConfig){.done = on_done, .userdata = &e}, NULL));
	for (int i = 0; i < 100000 && got < sizeof(in); i++) {
		ssize_t n;

		if (sent < sizeof(in) && (n = write(x[0], in + sent, sizeof(in) - sent)) > 0)
			sent += (size_t)n;
		if (sent == sizeof(in) && x[0] >= 0)
			x[0] = (close(x[0]), -1);
		while ((n = read(y[1], out + got, sizeof(out) - got)) > 0)
			got += (size_t)n;
		ASSERT_TRUE(ev_run(loop, 10 * 1000) >= 0);
	}
	ASSERT_EQ(got, sizeof(in));
	ASSERT_TRUE(memcmp(in, out, sizeof(in)) == 0);
	/* x closed altogether: once y closes too, the splice is over. */
	close(y[1]);
	run_until(loop, &e.done);
	ASSERT_EQ(e.done, 1);
	ASSERT_EQ(e.bytes[0], sizeof(in));
}

TEST(splice_freed_early_closes_both)
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	FdSplice *s = NULL;
	char c;
	int x[2], y[2];
	Ends e = {};

	ASSERT_OK(ev_loop_new(&loop));
	pairs(x, y);
	ASSERT_OK(fd_splice_new(loop, x[1], y[0],
				&(FdSpliceConfig){.done = on_done, .userdata = &e}, &s));
	ASSERT_EQ(fd_splice_free(s), NULL);
	ASSERT_EQ(read(x[0], &c, 1), 0);
	ASSERT_EQ(read(y[1], &c, 1), 0);
	ASSERT_TRUE(ev_run(loop, 0) >= 0);
	ASSERT_EQ(e.done, 0);
	close(x[0]);
	close(y[1]);
}

TEST(splice_refuses_oversized_first_bytes)
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	static char first[FD_SPLICE_BUFFER + 1];
	char c;
	int x[2], y[2];

	ASSERT_OK(ev_loop_new(&loop));
	pairs(x, y);
	ASSERT_ERROR(fd_splice_new(loop, x[1], y[0],
				   &(FdSpliceConfig){.first = first, .first_len = sizeof(first)},
				   NULL),
		     ENOBUFS);
	ASSERT_EQ(read(x[0], &c, 1), 0); /* closed on failure too */
	close(x[0]);
	close(y[1]);
}

int main(void)
{
	return tests_run();
}
