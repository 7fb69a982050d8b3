/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "evloop.h"
#include "task.h"

/*
 * containerd-shim-berth-v2's daemon: containerd's runtime v2 Task service over ttrpc on one
 * unix socket, for the one task of this shim (task.h). Requests are answered in order per
 * connection; Wait is answered when the task exits.
 */

#define SHIM_VERSION "berth-shim 0.1.0"

typedef struct Shim Shim;

/* Serve on the listening socket @listen_fd until Shutdown. @ns and @id are the task's, and
 * @events_address containerd's ttrpc socket for events (NULL: publish none). */
int shim_serve(int listen_fd, const char *ns, const char *id, const char *events_address);

/* Publish one event (publish.c): @topic ("/tasks/exit"), @type_url, the packed event. Best
 * effort, bounded in time; a failure is logged. */
void shim_publish(const char *address, const char *ns, const char *topic, const char *type_url,
		  const uint8_t *event, size_t len);
