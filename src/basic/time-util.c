/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
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

void format_rfc3339(char *buf, size_t size, const struct timespec *ts, bool ms)
{
	struct tm tm;

	if (size == 0)
		return;
	if (!gmtime_r(&ts->tv_sec, &tm)) {
		buf[0] = '\0';
		return;
	}
	if (ms)
		snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (int)(ts->tv_nsec / 1000000) % 1000);
	else
		snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void now_rfc3339(char *buf, size_t size, bool ms)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	format_rfc3339(buf, size, &ts, ms);
}
