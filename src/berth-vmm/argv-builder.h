/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "macros.h"

/* An engine's command line, built one formatted argument at a time; the first failure
 * sticks, and argv_finish() reports it. */
#define ARGV_MAX 128

typedef struct ArgvBuilder {
	char *argv[ARGV_MAX + 1];
	size_t n;
	int error;
} ArgvBuilder;

void argv_add(ArgvBuilder *b, const char *fmt, ...) _printf_(2, 3);
/* The arguments as a malloc()ed, NULL-terminated vector for argv_free() in *@ret; 0, or
 * the first error (everything freed). */
int argv_finish(ArgvBuilder *b, char ***ret);
void argv_free(char **argv);
