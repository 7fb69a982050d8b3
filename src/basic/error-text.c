/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "error-text.h"

void error_text_set(char **ret_error, const char *fmt, ...)
{
	va_list ap;

	if (!ret_error)
		return;
	free(*ret_error);
	*ret_error = NULL;
	va_start(ap, fmt);
	if (vasprintf(ret_error, fmt, ap) < 0)
		*ret_error = NULL;
	va_end(ap);
}
