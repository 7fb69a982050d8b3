/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *log_program = "berth";
static int log_max_level = LOG_LEVEL_INFO;
static int log_extra_fd = -1;
/* log_set_byte_cap(): what is written so far, and the caps; SIZE_MAX when uncapped. */
static size_t log_written, log_cap = SIZE_MAX, log_reserve;
static bool log_cap_said;

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

void log_set_byte_cap(size_t max_bytes, size_t reserve)
{
	log_cap = max_bytes;
	log_reserve = reserve;
}

/* May a line of @len bytes at @level still be written? Says once when the cap is hit. */
static bool log_room(int level, size_t len)
{
	size_t cap = log_cap;

	if (cap == SIZE_MAX)
		return true;
	if (level <= LOG_LEVEL_WARNING)
		cap = cap + log_reserve;
	if (log_written + len <= cap) {
		log_written += len;
		return true;
	}
	if (!log_cap_said) {
		log_cap_said = true;
		dprintf(STDERR_FILENO,
			"%s: this log reached its cap of %zu bytes; lines from now "
			"on are dropped\n",
			log_program, log_cap + log_reserve);
	}
	return false;
}

void log_record(const char *text)
{
	size_t len = strlen(text) + 1;

	if (log_room(LOG_LEVEL_INFO, len))
		dprintf(log_extra_fd >= 0 ? log_extra_fd : STDERR_FILENO, "%s\n", text);
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
	if (!log_room(level, strlen(log_program) + strlen(buf) + 3)) {
		errno = saved;
		return error ? -error : -EINVAL;
	}

	if (log_max_level >= LOG_LEVEL_DEBUG)
		dprintf(STDERR_FILENO, "%s: %s (%s:%d)\n", log_program, buf, file, line);
	else
		dprintf(STDERR_FILENO, "%s: %s\n", log_program, buf);
	if (log_extra_fd >= 0)
		dprintf(log_extra_fd, "%s\n", buf);

	errno = saved;
	return error ? -error : -EINVAL;
}
