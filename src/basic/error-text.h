/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "macros.h"

/*
 * error_text_set() - replace *@ret_error (freed first) with a newly formatted message, for
 * functions that return -errno and say why through a `char **ret_error` the caller may
 * pass as NULL (then nothing is formatted). On OOM *@ret_error is left NULL.
 */
void error_text_set(char **ret_error, const char *fmt, ...) _printf_(2, 3);
