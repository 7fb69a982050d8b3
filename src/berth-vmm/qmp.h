/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

/*
 * A small QMP client (QEMU's machine protocol, JSON lines on a unix socket): what saving
 * and restoring a VM needs, and nothing else: stop, cont, migrate to a descriptor handed
 * over with getfd, and the state queries. Every wait has a deadline; every line QEMU sends
 * is capped (QMP_LINE_MAX).
 */

#define QMP_LINE_MAX (64 * 1024)

typedef struct Qmp Qmp;

/* Connect to @path (retrying while QEMU has not made it yet), read the greeting and enter
 * command mode, all within @timeout_ms. */
int qmp_connect(const char *path, int timeout_ms, Qmp **ret);
Qmp *qmp_free(Qmp *q);
static inline void qmp_freep(Qmp **q)
{
	qmp_free(*q);
}

/*
 * qmp_execute() - run @command with @args (borrowed; may be NULL) and wait for its answer
 * within @timeout_ms. Events QEMU sends meanwhile are skipped. With @ret, the "return"
 * value (new reference). Returns 0, -EIO for an "error" answer (its description in
 * @err), -ETIME, or -errno.
 */
int qmp_execute(Qmp *q, const char *command, json_t *args, int timeout_ms, json_t **ret,
		char *err, size_t errlen);

/* Hand @fd to QEMU under @name (getfd, the descriptor passed with SCM_RIGHTS). */
int qmp_send_fd(Qmp *q, int fd, const char *name, int timeout_ms, char *err, size_t errlen);
