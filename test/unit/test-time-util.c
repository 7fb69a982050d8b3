/* SPDX-License-Identifier: Apache-2.0 */
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

int main(void)
{
	return tests_run();
}
