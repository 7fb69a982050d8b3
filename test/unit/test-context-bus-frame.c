/* SPDX-License-Identifier: Apache-2.0 */
/* The context bus's framing (src/context-bus/frame.c): whole frames, split frames, empty
 * frames, and oversized frames skipped without their bytes being kept. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "tests.h"

static size_t put_frame(uint8_t *out, const char *body, uint32_t announced)
{
	frame_header_put(out, announced);
	memcpy(out + FRAME_HEADER_SIZE, body, strlen(body));
	return FRAME_HEADER_SIZE + strlen(body);
}

TEST(header_is_big_endian)
{
	uint8_t h[4];

	frame_header_put(h, 0x01020304);
	ASSERT_EQ(h[0], 1);
	ASSERT_EQ(h[1], 2);
	ASSERT_EQ(h[2], 3);
	ASSERT_EQ(h[3], 4);
}

TEST(two_frames_in_one_read)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t buf[64];
	size_t n = put_frame(buf, "abc", 3), used, len;
	const uint8_t *body;

	n += put_frame(buf + n, "hello", 5);
	ASSERT_EQ(frame_reader_feed(&r, buf, n, &used), FRAME_READY);
	ASSERT_EQ(used, 7);
	body = frame_reader_body(&r, &len);
	ASSERT_EQ(len, 3);
	ASSERT_TRUE(memcmp(body, "abc", 3) == 0);
	ASSERT_EQ(frame_reader_feed(&r, buf + 7, n - 7, &used), FRAME_READY);
	ASSERT_EQ(used, 9);
	body = frame_reader_body(&r, &len);
	ASSERT_EQ(len, 5);
	ASSERT_TRUE(memcmp(body, "hello", 5) == 0);
	ASSERT_EQ(frame_reader_feed(&r, buf, 0, &used), FRAME_MORE);
	ASSERT_TRUE(frame_reader_idle(&r));
	frame_reader_done(&r);
}

TEST(split_a_byte_at_a_time)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t buf[64];
	size_t n = put_frame(buf, "split me", 8), used, len;
	const uint8_t *body;

	for (size_t i = 0; i + 1 < n; i++) {
		ASSERT_EQ(frame_reader_feed(&r, buf + i, 1, &used), FRAME_MORE);
		ASSERT_EQ(used, 1);
	}
	ASSERT_EQ(frame_reader_pending(&r), 8);
	ASSERT_EQ(frame_reader_feed(&r, buf + n - 1, 1, &used), FRAME_READY);
	body = frame_reader_body(&r, &len);
	ASSERT_EQ(len, 8);
	ASSERT_TRUE(memcmp(body, "split me", 8) == 0);
	frame_reader_done(&r);
}

TEST(empty_frame)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t buf[4] = {0, 0, 0, 0};
	size_t used, len;

	ASSERT_EQ(frame_reader_feed(&r, buf, 4, &used), FRAME_READY);
	(void)frame_reader_body(&r, &len);
	ASSERT_EQ(len, 0);
	frame_reader_done(&r);
}

TEST(oversized_is_skipped_and_the_next_frame_read)
{
	FrameReader r = FRAME_READER_INIT(8);
	uint8_t buf[64];
	size_t n = put_frame(buf, "0123456789", 10), used, off = 0, len;
	const uint8_t *body;

	n += put_frame(buf + n, "ok", 2);
	ASSERT_EQ(frame_reader_feed(&r, buf, n, &used), FRAME_OVERSIZED);
	ASSERT_EQ(used, 4);
	/* Nothing of it is kept. */
	ASSERT_TRUE(r.body == NULL);
	off = used;
	ASSERT_EQ(frame_reader_feed(&r, buf + off, 3, &used), FRAME_MORE);
	off += used;
	ASSERT_EQ(frame_reader_feed(&r, buf + off, n - off, &used), FRAME_SKIPPED);
	off += used;
	ASSERT_EQ(off, 14);
	ASSERT_EQ(frame_reader_feed(&r, buf + off, n - off, &used), FRAME_READY);
	body = frame_reader_body(&r, &len);
	ASSERT_EQ(len, 2);
	ASSERT_TRUE(memcmp(body, "ok", 2) == 0);
	frame_reader_done(&r);
}

TEST(huge_announcement_allocates_nothing)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t head[4];
	static uint8_t junk[65536];
	size_t used;
	uint64_t left = 0xffffffffull;
	int res = FRAME_MORE;

	frame_header_put(head, 0xffffffffu);
	ASSERT_EQ(frame_reader_feed(&r, head, 4, &used), FRAME_OVERSIZED);
	/* 4 GiB of junk goes by in 64 KiB steps, with no buffer at any point. */
	while (left > 0) {
		size_t n = left < sizeof(junk) ? (size_t)left : sizeof(junk);

		res = frame_reader_feed(&r, junk, n, &used);
		ASSERT_EQ(used, n);
		ASSERT_TRUE(r.body == NULL);
		left -= n;
	}
	ASSERT_EQ(res, FRAME_SKIPPED);
	ASSERT_TRUE(frame_reader_idle(&r));
	frame_reader_done(&r);
}

TEST(body_grows_with_what_arrived)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t head[4], byte = 'x';
	size_t used;

	frame_header_put(head, FRAME_SIZE_MAX);
	ASSERT_EQ(frame_reader_feed(&r, head, 4, &used), FRAME_MORE);
	ASSERT_EQ(frame_reader_feed(&r, &byte, 1, &used), FRAME_MORE);
	/* An 8 MiB announcement with one byte sent holds one small chunk, not 8 MiB. */
	ASSERT_TRUE(r.body_cap <= 4096);
	frame_reader_done(&r);
}

TEST(refused_frame_is_skipped)
{
	FrameReader r = FRAME_READER_INIT(FRAME_SIZE_MAX);
	uint8_t buf[64];
	size_t n = put_frame(buf, "abcdef", 6), used, off;

	n += put_frame(buf + n, "z", 1);
	ASSERT_EQ(frame_reader_feed(&r, buf, 6, &used), FRAME_MORE);
	off = used;
	frame_reader_refuse(&r);
	ASSERT_TRUE(r.body == NULL);
	ASSERT_EQ(frame_reader_feed(&r, buf + off, n - off, &used), FRAME_REFUSED);
	off += used;
	ASSERT_EQ(off, 10);
	ASSERT_EQ(frame_reader_feed(&r, buf + off, n - off, &used), FRAME_READY);
	frame_reader_done(&r);
}

int main(void)
{
	return tests_run();
}
