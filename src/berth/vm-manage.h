/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * What the CLI does to a VM it knows by name, through its run dir: say why one stopped,
 * print its guest log, stop it. The `berth vm` verbs are these functions behind their
 * options, and `berth dev` and `berth mcp` call them directly (vm-launch.c).
 *
 * Everything printed that came from the guest or vm.json is neutralised for a terminal
 * (term-text.h); --json lines keep their bytes.
 */

#define VM_STOP_TIMEOUT_MS_DEFAULT 30000

/* Why the stale run dir @run_dir was left behind, from what its berth-vmm wrote last
 * (vm.json's failure, else its state and vmm.log's last line). NULL on OOM. */
char *vm_stale_reason(const char *run_dir);

/* The run dir of the running VM @name; NULL after saying what to do (a stale one is
 * cleaned up, with its reason). */
char *vm_running_dir(const char *name);

typedef struct VmLogsOptions {
	bool follow; /* keep printing until the VM is gone */
	bool raw;    /* the JSON lines as the guest sent them */
} VmLogsOptions;

/*
 * vm_logs_print() - print the guest log of @name: a running VM's from its log stream, a
 * stopped one's from the console its run dir (or the kept logs of its last failed boot)
 * holds. Returns 0, or -errno after saying why.
 */
int vm_logs_print(const char *name, const VmLogsOptions *o);

/* The stop timeout: $BERTH_VM_STOP_TIMEOUT_MS, else the default. -EINVAL after saying why
 * when the variable is not milliseconds from 100 to 3600000. */
int vm_stop_timeout(unsigned *ret_ms);

/*
 * vm_stop() - stop the VM of @name and @run_dir: SIGTERM to its berth-vmm, which powers
 * the guest off; after @timeout_ms SIGKILL to berth-vmm and its QEMU. Signals go through a
 * pidfd, so a reused pid is never hit. The run dir is removed either way, and the outcome
 * printed ("stopped ..." or "killed ..."). Returns 0 when it powered off, 1 when it had to
 * be killed, -errno when it could not be signalled.
 */
int vm_stop(const char *name, const char *run_dir, unsigned timeout_ms);
