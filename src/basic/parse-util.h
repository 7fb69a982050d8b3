/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Parse a decimal unsigned integer within [@min, @max]; -EINVAL or -ERANGE otherwise. */
int parse_uint_range(const char *s, unsigned min, unsigned max, unsigned *ret);
