/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/*
 * The run directory of one VM, ~/.berth/run/vm/<name>/ (0700): berth-vmm.pid, vm.json,
 * vmm.log, console.log and the sockets. berth-vmm holds an exclusive lock on
 * berth-vmm.pid for its whole life; a run dir whose lock is free, whose pid is gone, or
 * whose pid is no longer a berth-vmm serving this directory is stale.
 */

typedef enum RunDirState {
	RUNDIR_ABSENT,
	RUNDIR_RUNNING,
	RUNDIR_STALE,
	_RUNDIR_STATE_MAX,
	_RUNDIR_STATE_INVALID = -22,
} RunDirState;

/* Inspect @dir; *@ret_pid gets the recorded pid (0 when none). */
RunDirState rundir_inspect(const char *dir, pid_t *ret_pid);

/*
 * rundir_acquire() - create @dir (0700) for a new VM and take its lock.
 * Returns the lock fd (keep it open for the VM's life), -EBUSY when a live berth-vmm
 * owns it (its pid in *@ret_owner), or -errno. A stale run dir is cleaned first and
 * *@ret_was_stale set.
 */
int rundir_acquire(const char *dir, pid_t *ret_owner, bool *ret_was_stale);
/* Record the pid of the process holding the lock (berth-vmm after it detached). */
int rundir_write_pid(int lock_fd, pid_t pid);

/* A pidfd for the berth-vmm serving @dir, or -ESRCH when none does (yet or any more):
 * signals and waits through it reach that process even if its pid is reused. */
int rundir_open_pidfd(const char *dir);

/* Remove a run dir and everything in it. */
int rundir_remove(const char *dir);
/* Remove @dir if it is stale, deciding that under the lock rundir_acquire() takes: never a
 * dir a VM is just taking. Returns 1 when removed, 0 when not stale, or -errno. */
int rundir_remove_if_stale(const char *dir);

/*
 * rundir_sweep() - look at every run dir under @root and call @cb for each (name, state,
 * pid) before anything is removed; with @remove_stale, then remove the stale ones.
 * Returns the number of stale dirs found (and removed) or -errno.
 */
int rundir_sweep(const char *root, bool remove_stale,
		 void (*cb)(const char *name, RunDirState state, pid_t pid, void *userdata),
		 void *userdata);
