/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The clocks: the monotonic one, read in one place, and the wall clock as RFC 3339 text
 * (UTC, "Z"). libc only, like all of src/basic.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)

/* CLOCK_MONOTONIC in microseconds: the event loop's timers and deadlines. */
uint64_t now_usec(void);

/* CLOCK_MONOTONIC in milliseconds; signed, so that a deadline minus now may go negative. */
int64_t now_ms(void);

/* @ts in UTC as RFC 3339 into @buf: "2026-01-02T03:04:05Z", or with @ms
 * "2026-01-02T03:04:05.678Z" (truncated, not rounded). Cut short when @size is too
 * small: 25 bytes hold either form for years up to 9999. */
void format_rfc3339(char *buf, size_t size, const struct timespec *ts, bool ms);

/* CLOCK_REALTIME now, as format_rfc3339() writes it. */
void now_rfc3339(char *buf, size_t size, bool ms);
