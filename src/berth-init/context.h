/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "daemon.h"
#include "evloop.h"

/*
 * The two daemons every VM with apps runs for them (SPEC 5, 2.9; docs/context-bus.md and
 * docs/context.md, "what berth-init must do"), each as a Daemon of daemon.c under
 * agent-init with a policy of its own, started after the identities and before any app:
 *
 *   - the context bus, /usr/sbin/context-bus, uid 9001 (user berth-context-bus, in group
 *     berth), its socket /tmp/berth-context-bus.sock (0660, group berth) and its table
 *     of the apps' uids in /run/berth/context-bus;
 *   - the /context index, /usr/sbin/semantic-fs, uid 9005 (berth-semantic-fs, in group
 *     berth), its socket /run/berth/semantic-fs/sfs.sock, its index on the state disk
 *     (/state/semantic-fs, bind-mounted at /run/berth/semantic-fs/index), its table of the
 *     apps' uids and whether each may read /context in /run/berth/semantic-fs-config.
 *
 * A daemon missing from the image is skipped (the apps then use an in-process bus, or have
 * no /context index, and say so); one that fails to start refuses no app.
 */

#define CONTEXT_BUS_UID 9001
#define CONTEXT_BUS_USER "berth-context-bus"
#define CONTEXT_BUS_SOCKET "/tmp/berth-context-bus.sock"
#define SEMANTIC_FS_UID 9005
#define SEMANTIC_FS_USER "berth-semantic-fs"
#define SEMANTIC_FS_SOCKET "/run/berth/semantic-fs/sfs.sock"

typedef struct ContextApp {
	const char *name;
	uid_t uid;
	bool reads_context; /* its policy lets it read /context */
} ContextApp;

/* Which daemons the image has: each adds its user to /etc/passwd and group berth. */
bool context_bus_present(void);
bool semantic_fs_present(void);

/* The files, directories and mounts of both (those present), for @apps; @persistent: the
 * state disk is mounted on /state. A daemon whose setup fails is not started, and said
 * so in the journal. */
void context_setup(const ContextApp *apps, size_t n, bool persistent);

/* How many daemons were set up; context_start() binds their sockets, and @cb is called
 * once for each, from the loop or at once. context_release() then execs them: an app that
 * connects before is queued (both are socket-activated), and does not share the CPU with
 * their start while it starts itself. */
unsigned context_daemons(void);
void context_start(EvLoop *loop, daemon_ready_t cb, void *userdata);
void context_release(void);

/* The apps' environment: "K=V" strings, NULL-terminated, valid for the VM's life. */
const char *const *context_app_env(void);

bool context_child_exited(pid_t pid, int status);
/* {"contextBus": {state, pid}, "semanticFs": {...}} for the status reply, or NULL. */
json_t *context_status(void);
