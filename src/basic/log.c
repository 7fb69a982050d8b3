/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *log_program = "berth";
static int log_max_level = LOG_LEVEL_INFO;
static int log_extra_fd = -1;

void log_setup(const char *program, int max_level)
{
	const char *env = getenv("BERTH_LOG_LEVEL");

	log_program = program;
	log_max_level = max_level;
	if (env && *env >= '0' && *env <= '7' && env[1] == '\0')
		log_max_level = *env - '0';
}

void log_set_extra_fd(int fd)
{
	log_extra_fd = fd;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
{
	int saved = errno;
	char buf[4096];
	va_list ap;

	if (error < 0)
		error = -error;
	/* A message without an errno still reports a failure to `return log_error(...)`. */
	if (level > log_max_level)
		return error ? -error : -EINVAL;

	/* %m must name @error, not whatever errno happens to hold now. */
	errno = error;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	if (log_max_level >= LOG_LEVEL_DEBUG)
		dprintf(STDERR_FILENO, "%s: %s (%s:%d)\n", log_program, buf, file, line);
	else
		dprintf(STDERR_FILENO, "%s: %s\n", log_program, buf);
	if (log_extra_fd >= 0)
		dprintf(log_extra_fd, "%s\n", buf);

	errno = saved;
	return error ? -error : -EINVAL;
}
