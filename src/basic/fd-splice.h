/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "evloop.h"

/*
 * Copy bytes both ways between two stream fds on an EvLoop until both directions have
 * ended, passing a half-close on with shutdown(SHUT_WR). Each direction buffers at most
 * FD_SPLICE_BUFFER bytes: a side that stops reading stalls only its own direction.
 * Takes ownership of both fds; everything is freed when the splice ends.
 */

#define FD_SPLICE_BUFFER (64 * 1024)

int fd_splice_new(EvLoop *loop, int a, int b);
