/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Small language helpers shared by every binary: scope-bound cleanup in the
 * systemd style, ownership transfer and a few arithmetic guards.
 */

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _warn_unused_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand a pointer or fd out of a cleanup scope. */
#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) _p = (p); \
		(p) = NULL;             \
		_p;                     \
	})
#define TAKE_FD(fd)             \
	({                      \
		int _fd = (fd); \
		(fd) = -EBADF;  \
		_fd;            \
	})

/* Turn a libc "-1 and errno" return into "-errno". */
#define RET_NERRNO(expr)                      \
	({                                    \
		__typeof__(expr) _r = (expr); \
		_r < 0 ? -errno : _r;         \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return -EBADF;
}

static inline void closep(int *fd)
{
	safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#define streq_ptr(a, b) ((a) && (b) && streq((a), (b)))
