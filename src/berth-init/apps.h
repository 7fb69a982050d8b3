/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "evloop.h"
#include "mux-io.h"

/*
 * The apps of this VM: their identities, processes, logs, readiness and RPC relays.
 * App i (the order of the boot plan) runs as uid/gid 10000+i, user berth-<name>, from
 * its read-only share (/app for a single app, /app/<name> for several), with an
 * environment built from scratch, and is reached from the host on channel port 5000+i.
 */

#define APPS_MAX 64
#define APP_UID_BASE 10000
#define BERTH_GROUP_GID 9999

/* Take the apps from the boot plan (boot-disk.h), mount their shares and install their
 * policies. */
int apps_prepare(EvLoop *loop, const json_t *plan, const json_t *secrets);
/* Per-app users and groups in tmpfs copies of /etc/passwd and /etc/group, and the
 * per-app directories. */
int apps_setup_identities(void);
/* The context bus and the /context index for these apps (context.h); @persistent: the
 * state disk is mounted. */
void apps_setup_context(bool persistent);
void apps_setup_browser(void);
/* Route channel ports 5000+i to the apps' RPC sockets. */
int apps_listen_rpc(MuxIo *io);
/* The same on a unix socket @dir/<app>.sock per app, for a deployed image (container.h). */
int apps_listen_rpc_dir(const char *dir);
/* The egress broker's directory, policies and dial socket (routed to @io), when one app
 * declares egress; a failure refuses that app, never the VM. */
int apps_setup_egress(EvLoop *loop, MuxIo *io);
/* The same for the GitHub broker, when one app declares github:. */
int apps_setup_github(EvLoop *loop, MuxIo *io);
/* Route the published ports of the boot plan to their apps' listeners (publish-relay.h),
 * once the apps that will not start are known. */
int apps_setup_publish(MuxIo *io);
/* Start every app, after the egress and GitHub brokers listen when they are needed. @none_started
 * is called (from here, or later from the loop) when no app could start. */
void apps_launch(void (*none_started)(void));
/* A child exited (from the SIGCHLD reaper). Returns true when it was an app. */
bool apps_child_exited(pid_t pid, int status);
/* SIGTERM to every running app's session. */
void apps_stop_all(void);
unsigned apps_count(void);
unsigned apps_running(void);
/* 0 iff every app exited 0 or was stopped by us. */
int apps_exit_code(void);
/*
 * Reload in place (docs/warm-start.md): the host replaces one app's share while the VM
 * stays up. apps_reload_stop() stops app @name (SIGTERM, then its cgroup killed after a
 * grace period) and unmounts its share; the host then rewrites the share disk;
 * apps_reload_start() drops the disk's cached blocks, mounts it again and starts the app
 * with the policy it had, which @policy_sha256 must name. @done is called once, from the
 * loop or from within, with 0 when the app is stopped (or ready), or -errno and why.
 * While a reload is under way the app counts as running. Returns -errno with @err when
 * the step cannot begin.
 */
typedef void (*apps_reload_done_t)(int r, const char *why, void *userdata);
int apps_reload_stop(const char *name, apps_reload_done_t done, void *userdata, char *err,
		     size_t errlen);
int apps_reload_start(const char *name, const char *policy_sha256, const char *tree_sha256,
		      apps_reload_done_t done, void *userdata, char *err, size_t errlen);

/* [{name, state, pid, uid, port, exit?}] */
json_t *apps_status(void);
/* Names, for the power_off event. */
json_t *apps_summary(void);
