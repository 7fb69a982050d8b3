/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether @len bytes at @s are well-formed UTF-8: no overlong forms, no UTF-16
 * surrogates, nothing past U+10FFFF. NUL bytes are valid (callers that refuse them check
 * separately). */
bool utf8_valid(const char *s, size_t len);
