/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>
#include <time.h>

#include "tests.h"
#include "time-util.h"

TEST(monotonic_ms_follows_usec)
{
	uint64_t u0 = now_usec();
	int64_t ms = now_ms();
	uint64_t u1 = now_usec();

	ASSERT_TRUE(u0 <= u1);
	ASSERT_TRUE((uint64_t)ms >= u0 / USEC_PER_MSEC && (uint64_t)ms <= u1 / USEC_PER_MSEC);
}

TEST(monotonic_ms_advances)
{
	struct timespec nap = {.tv_nsec = 20 * 1000 * 1000};
	int64_t t0 = now_ms();

	(void)nanosleep(&nap, NULL);
	ASSERT_TRUE(now_ms() - t0 >= 20);
}

TEST(rfc3339)
{
	struct timespec ts = {.tv_sec = 1796006720, .tv_nsec = 999999999};
	char buf[32];

	format_rfc3339(buf, sizeof(buf), &ts, false);
	ASSERT_STREQ(buf, "2026-11-30T02:45:20Z");
	format_rfc3339(buf, sizeof(buf), &ts, true);
	ASSERT_STREQ(buf, "2026-11-30T02:45:20.999Z");
	ts = (struct timespec){.tv_sec = 0, .tv_nsec = 5000000};
	format_rfc3339(buf, sizeof(buf), &ts, true);
	ASSERT_STREQ(buf, "1970-01-01T00:00:00.005Z");
	format_rfc3339(buf, 11, &ts, true);
	ASSERT_STREQ(buf, "1970-01-01");
	now_rfc3339(buf, sizeof(buf), true);
	ASSERT_EQ(strlen(buf), 24);
	ASSERT_TRUE(buf[10] == 'T' && buf[19] == '.' && buf[23] == 'Z');
}

int main(void)
{
	return tests_run();
}
