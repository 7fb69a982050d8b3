/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Logging for the binaries' main()-side code. Library code in src/basic and
 * src/shared only logs at debug level; errors travel up as -errno.
 */

#include <stdbool.h>
#include <stddef.h>

#include "macros.h"

enum {
	LOG_LEVEL_ERROR = 3,
	LOG_LEVEL_WARNING = 4,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

/* Set the program name shown before every line and the maximum level shown. */
void log_setup(const char *program, int max_level);
/* Mirror every line to @fd as well (e.g. a log file), -1 to stop. */
void log_set_extra_fd(int fd);
/* Write at most @max_bytes of lines (counted once, whether they go to one output or two),
 * and warnings and errors @reserve bytes more, then drop lines after saying so once: for a
 * log file whose lines a peer can provoke. */
void log_set_byte_cap(size_t max_bytes, size_t reserve);
/* A record for the log file alone, as it is (a JSON line, no program name): to the mirror
 * fd when there is one, else standard error; within the byte cap. */
void log_record(const char *text);

/* Log a line; returns -abs(@error) so callers can `return log_error_errno(r, ...)`, and
 * -EINVAL when @error is 0, so that `return log_error("...")` is a failure too.
 * "%m" in @fmt expands to strerror(abs(@error)). */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
	_printf_(5, 6);

#define log_full_errno(level, error, ...) \
	log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_LEVEL_ERROR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_LEVEL_WARNING, error, __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_LEVEL_DEBUG, error, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
