/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The warm Node runtime of a restored VM (docs/warm-start.md): a Node started in the
 * template boot from the Node startup snapshot, its own modules loaded, waiting as root to
 * become one app. Node cannot fork, so there is one, and the first Node app takes it; the
 * others start the exec'd way. A VM whose apps reload in place starts another once its
 * apps are up, for the next start.
 *
 * It runs /usr/libexec/berth/node-warm.mjs and talks only to berth-init, over a socketpair
 * it inherited (no path an app could reach), and reads nothing of an app before it is
 * handed one. The hand-over (node_warm_take()) is one byte with the app's stdout, stderr
 * and agent-init's report pipe, then the start the Python zygote's forks get: the app's
 * directory, its cgroup, "1" or "0" for a strict one, and the environment agent-init would
 * have had, each NUL-terminated, until berth-init closes its end. The process then joins
 * the cgroup and is confined by agent-init's own code, every thread of it
 * (berth-node-confine.node), before it loads the app's runtime.
 */

#define NODE_WARM_PROGRAM "/usr/libexec/berth/node-warm.mjs"
#define NODE_WARM_ADDON "/usr/libexec/berth/berth-node-confine.node"
#define NODE_WARM_READY_TIMEOUT_MSEC (120 * 1000) /* its start, under emulation */

/* In the template boot, once Node's startup snapshot is made: start the warm Node and wait
 * until it is ready. Returns 0, or a negative errno with @why set; then there is none. */
int node_warm_start(const char *snapshot_blob, char *why, size_t whylen);

/*
 * node_warm_start_background() - start another, for the next Node app's start (a reload in
 * place), without waiting: it is available once it answers, which the journal records
 * (warm_runtime_ready). From @snapshot_blob, or without one (NULL). Nothing when there is
 * one already, ready or on its way.
 */
typedef struct EvLoop EvLoop;
void node_warm_start_background(EvLoop *loop, const char *snapshot_blob);

/* Is there a warm Node to take? */
bool node_warm_available(void);

/* No Node app will take it: end it and free its memory. */
void node_warm_stop(void);

/* A restored VM: have the warm Node run an app's start once more while berth-init makes the
 * VM its own, so that QEMU has translated that code before an app needs it. */
void node_warm_rehearse(void);

/*
 * node_warm_take() - hand the warm Node an app: its stdout @out_fd, stderr @err_fd and
 * report pipe @report_fd, its directory, cgroup (empty: none; @strict_cgroup: refuse to run
 * outside it) and environment @env[0..n). Returns the process's pid, which is the app's
 * from now on (berth-init's child already), or a negative errno and the warm Node is
 * stopped. Either way there is no warm Node afterwards.
 */
pid_t node_warm_take(int out_fd, int err_fd, int report_fd, const char *dir, const char *cgroup,
		     bool strict_cgroup, char *const *env, size_t n);

/* Is @pid the warm Node, not yet an app's? Reaped then, and forgotten. */
bool node_warm_child_exited(pid_t pid, int status);
