/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The monotonic clock, the one place it is read. libc only, like all of src/basic. */

#include <stdint.h>

#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)

/* CLOCK_MONOTONIC in microseconds: the event loop's timers and deadlines. */
uint64_t now_usec(void);

/* CLOCK_MONOTONIC in milliseconds; signed, so that a deadline minus now may go negative. */
int64_t now_ms(void);
