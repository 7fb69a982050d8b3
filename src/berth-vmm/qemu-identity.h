/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <limits.h>
#include <stdbool.h>

/*
 * A QEMU program as the accelerator probe's cache and the snapshot's key name it: its
 * resolved path and the first line of its `-version`. The version is asked once per file:
 * ~/.berth/vm/qemu-version.json remembers it for as long as the file's inode, size and
 * change times stay what they were, since an exec of QEMU would cost every VM's start tens
 * of milliseconds.
 */

typedef struct QemuIdentity {
	char path[PATH_MAX]; /* @qemu itself when it is not found */
	char version[256];   /* "unknown" when it did not say */
	bool found;
} QemuIdentity;

void qemu_identify(const char *qemu, QemuIdentity *ret);

/* @name as an absolute path: itself when it has a '/', else found in $PATH's absolute
 * entries. NULL when there is no such program. */
char *qemu_resolve_program(const char *name);
