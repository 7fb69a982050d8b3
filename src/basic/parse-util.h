/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Parse a decimal unsigned integer within [@min, @max]; -EINVAL or -ERANGE otherwise. */
int parse_uint_range(const char *s, unsigned min, unsigned max, unsigned *ret);

/* A TCP port: the @len bytes at @s are one to five decimal digits (leading zeros count
 * towards the five) with a value of 1 to 65535; -EINVAL otherwise. Every port a peer, a
 * manifest or a flag writes is read here. */
int parse_port(const char *s, size_t len, uint16_t *ret);
