/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "evloop.h"

/*
 * Copy bytes both ways between two stream fds on an EvLoop until both directions have
 * ended, passing a half-close on with shutdown(SHUT_WR). Each direction is a Flow
 * (flow.h) of at most FD_SPLICE_BUFFER bytes: a side that stops reading stalls only its
 * own direction. Takes ownership of both fds; everything is freed when the splice ends.
 */

#define FD_SPLICE_BUFFER (64 * 1024)

typedef struct FdSplice FdSplice;

/* The splice ended: both directions are done (@error 0) or one failed (-errno). @s is
 * still readable here (fd_splice_bytes()) and freed right after; do not free it. */
typedef void (*fd_splice_done_t)(FdSplice *s, int error, void *userdata);

typedef struct FdSpliceConfig {
	const void *first; /* bytes that go to @b ahead of anything read from @a */
	size_t first_len;  /* at most FD_SPLICE_BUFFER */
	fd_splice_done_t done;
	void *userdata;
} FdSpliceConfig;

/*
 * fd_splice_new() - splice @a and @b (both closed on failure too). @cfg may be NULL;
 * *@ret (when @ret is not NULL) is a handle valid until the done callback returns or
 * fd_splice_free(). The callback never runs from in here.
 */
int fd_splice_new(EvLoop *loop, int a, int b, const FdSpliceConfig *cfg, FdSplice **ret);

/* End it now, without the done callback: both fds are closed. NULL-safe; returns NULL. */
FdSplice *fd_splice_free(FdSplice *s);

/* Bytes written on so far: [0] from @a to @b, [1] from @b to @a. */
void fd_splice_bytes(const FdSplice *s, uint64_t ret[2]);
