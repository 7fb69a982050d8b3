/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argv-builder.h"

void argv_add(ArgvBuilder *b, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (b->error)
		return;
	if (b->n >= ARGV_MAX) {
		b->error = -E2BIG;
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		b->error = -ENOMEM;
	else
		b->argv[b->n++] = s;
	va_end(ap);
}

int argv_finish(ArgvBuilder *b, char ***ret)
{
	char **argv = b->error ? NULL : calloc(b->n + 1, sizeof(char *));

	if (!argv) {
		for (size_t i = 0; i < b->n; i++)
			free(b->argv[i]);
		b->n = 0;
		return b->error ?: -ENOMEM;
	}
	memcpy(argv, b->argv, b->n * sizeof(char *));
	b->n = 0;
	*ret = argv;
	return 0;
}

void argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}
