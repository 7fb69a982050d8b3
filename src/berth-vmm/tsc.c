/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

#include "tsc.h"

static double now_seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

long tsc_measure_khz(void)
{
	double best = 0;

	/* Three 50 ms windows; preemption can only stretch the wall-clock side of a
	 * window, which lowers the estimate, so the highest of the three is the closest. */
	for (int i = 0; i < 3; i++) {
		struct timespec d = {0, 50 * 1000 * 1000};
		double t0 = now_seconds(), t1, khz;
		uint64_t c0 = __rdtsc(), c1;

		nanosleep(&d, NULL);
		c1 = __rdtsc();
		t1 = now_seconds();
		khz = (double)(c1 - c0) / (t1 - t0) / 1000.0;
		if (khz > best)
			best = khz;
	}
	if (best < 100000 || best > 20000000) /* 0.1-20 GHz, else the TSC is not usable */
		return -ERANGE;
	return (long)(best + 0.5);
}
