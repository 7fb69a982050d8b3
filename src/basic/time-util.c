/* SPDX-License-Identifier: Apache-2.0 */
#include <time.h>

#include "time-util.h"

uint64_t now_usec(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail with a valid pointer. */
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

int64_t now_ms(void)
{
	return (int64_t)(now_usec() / USEC_PER_MSEC);
}
