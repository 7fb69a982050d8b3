/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Random ids: boot ids, session epochs, request and run ids. Ids, not secrets: when the
 * kernel has no entropy to give yet (the guest's PID 1 early in boot), the clocks and the
 * pid stand in, so these never block and never fail. Keys come from elsewhere.
 */

#include <stddef.h>

/* @n bytes into @buf. */
void random_bytes(void *buf, size_t n);

/* @n random bytes as 2 * @n lowercase hex digits and a NUL into @ret. */
void random_hex(char *ret, size_t n);

#define RANDOM_UUID_LEN 36

/* A random (version 4) UUID in its 36-character text form and a NUL. */
void random_uuid(char ret[RANDOM_UUID_LEN + 1]);
