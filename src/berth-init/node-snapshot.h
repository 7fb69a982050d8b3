/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * The Node startup snapshot of a template boot (docs/warm-start.md). The image's Node runs
 * its whole bootstrap from source at every start; a snapshot of the bootstrap, made once in
 * the template by Node itself from node-startup.js, is part of every VM restored from it,
 * and its Node apps start from it (`node --snapshot-blob`). It holds nothing of an app.
 *
 * It lives on a tmpfs of its own over an empty directory of the root image, beneath /usr so
 * that every app's Landlock baseline reads it, and is remounted read-only once made.
 */

#define NODE_SNAPSHOT_DIR "/usr/libexec/berth/warm"
#define NODE_SNAPSHOT_BLOB NODE_SNAPSHOT_DIR "/node-startup.blob"
#define NODE_SNAPSHOT_ENTRY "/usr/libexec/berth/node-startup.js"
#define NODE_SNAPSHOT_TIMEOUT_MSEC (120 * 1000)

/* In the template boot: start making the snapshot, beside the rest of the template's work.
 * Returns 0 or a negative errno with @why set. */
int node_snapshot_start(char *why, size_t whylen);

/* Wait for it; 0 once the snapshot is there and read-only, or a negative errno with @why
 * set (then Node apps start without it). */
int node_snapshot_wait(char *why, size_t whylen);

/* The snapshot's path, or NULL when there is none (a cold boot). */
const char *node_snapshot_blob(void);
