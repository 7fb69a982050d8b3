/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "evloop.h"
#include "mux-io.h"

/*
 * The control port (1024) and the log port (1025), served over the multiplexer.
 *
 * Control: a greeting {"source":"berth-init","event":"hello","protocol":1,...}, a replay of
 * every boot event so far, then live events. Requests are JSON lines: {"op":"status"}
 * answers {"op":"status","ok":true,...}; {"op":"shutdown"} starts the finish phase. A line
 * over 64 KiB, or one that is not a JSON object, closes the connection.
 *
 * Logs: the line "log stream attached", the replay (at most 1 MiB), a
 * {"source":"berth-init","event":"log_replay_end","lines":N} marker, then live lines. One
 * reader at a time: a new one replaces the old.
 */

#define CONTROL_LINE_MAX (64 * 1024)
#define CONTROL_OUT_MAX (4 * 1024 * 1024)

typedef struct ControlHandlers {
	/* Fill the status reply (apps, daemons, ...). */
	void (*status)(json_t *reply, void *userdata);
	/* The host asked for a shutdown. */
	void (*shutdown)(void *userdata);
	/* The host's resume request (resume.h): 0, or -errno with why in @err. */
	int (*resume)(const json_t *req, char *err, size_t errlen, void *userdata);
	/* A reload in place's "app_stop" or "app_start" (@op): 0 when it is under way and
	 * control_reply_deferred() will answer, or -errno with why in @err to answer now. */
	int (*reload)(const char *op, const json_t *req, char *err, size_t errlen, void *userdata);
	void *userdata;
} ControlHandlers;

int control_listen(EvLoop *loop, MuxIo *io, const ControlHandlers *handlers);

/* Answer the one request under way (handlers.reload), on the connection that sent it if it
 * is still open. Takes @reply. */
void control_reply_deferred(json_t *reply);
/* Bytes still queued towards the host on control and log connections. */
size_t control_pending(void);
