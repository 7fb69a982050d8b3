/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * One containerd task is one Berth sandbox (docs/kubernetes.md): the OCI bundle's image
 * root holds the app (/app with its berth.yml, or /app/<name>/ for several), and the task
 * is `berth-vmm run --foreground` of it, with the run dir inside the bundle, so that the
 * app's RPC sockets are bundle/berth/rpc-<i>.sock. What the OCI spec asks for that Berth
 * cannot give (host networking, privileged mode, host mounts) is refused, and nothing in
 * the spec widens what berth.yml allows: the egress allowlist comes from berth.yml alone.
 */

#define TASK_APPS_MAX 4
#define TASK_RUN_DIR "berth" /* in the bundle */

typedef enum TaskState {
	TASK_NONE,
	TASK_CREATED,
	TASK_RUNNING,
	TASK_STOPPED,
	TASK_DELETED,
} TaskState;

typedef struct Task {
	char id[128];
	char ns[128];
	char bundle[512];
	char rootfs[600];
	char run_dir[600];
	char state_disk[700];
	char vm_name[80];
	char stdout_path[512];
	char stderr_path[512];
	char apps[TASK_APPS_MAX][700];
	size_t n_apps;
	char **egress; /* --egress-allow patterns from berth.yml */
	unsigned cpus, mem_mib;
	bool mounted;
	/* A Kubernetes pod's sandbox ("pause") container: no app, no VM, a process that
	 * holds the pod until it is killed. The pod's app containers are the Berth VMs. */
	bool pod_sandbox;
	TaskState state;
	pid_t pid; /* berth-vmm */
	int pidfd;
	/* berth-vmm's console (the app's log) and its own standard error, on pipes the shim
	 * relays to containerd's fifos (relay.c): a fifo nobody reads must never block it. */
	int out_fd, err_fd;
	uint32_t exit_status;
	struct timespec exited_at;
} Task;

typedef struct TaskMount {
	const char *type, *source;
	char *const *options;
	size_t n_options;
} TaskMount;

/*
 * task_create() - check the bundle's config.json, mount the image root (@mounts, from
 * containerd's snapshotter) at bundle/rootfs and find its apps. On failure @err says what
 * to change; nothing is left mounted.
 */
int task_create(Task *t, const char *id, const char *ns, const char *bundle,
		const TaskMount *mounts, size_t n_mounts, const char *stdout_path,
		const char *stderr_path, char *err, size_t errlen);
/* Start berth-vmm; t->pid is the task's pid. */
int task_start(Task *t, char *err, size_t errlen);
/* Deliver @sig to berth-vmm (SIGTERM: it stops the VM gracefully). */
int task_kill(Task *t, int sig);
/* berth-vmm is gone with wait status @status. */
void task_exited(Task *t, int status);
/* Remove what the task made: the run dir, the mount, the state disk. */
void task_cleanup(Task *t);
/* The same for a bundle whose shim is gone (the delete subcommand): berth-vmm killed if it
 * still serves the run dir there; @ns and @id name its state disk. */
void task_cleanup_bundle(const char *bundle, const char *ns, const char *id);
/* The VM name of task @id in namespace @ns: ctr-<16 hex of sha256(ns/id)>. */
int task_vm_name(const char *ns, const char *id, char *ret, size_t size);
/* Its state disk, under ~/.berth/containerd. */
int task_state_disk(const char *ns, const char *id, char *ret, size_t size);
