/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The part of agent-init's sequence that Linux keeps per thread, and applying it to every
 * thread of a runtime that is already running (docs/confinement.md, "In place").
 *
 * The capability sets, the credentials, no_new_privs and the Landlock domain belong to a
 * thread, not to its process. An exec'd app has one thread when agent-init confines it; a
 * runtime started before its app does not: Node has V8's workers and an inspector watchdog
 * that blocks every signal it can. glibc meets the same problem in setuid(): it signals
 * each thread, on a signal of its own that no thread may block, and has it change its own
 * credentials. threads_confine_others() does the same on that signal with a handler of
 * ours, which runs thread_confine_self() in each thread; the seccomp filter then reaches
 * every thread through SECCOMP_FILTER_FLAG_TSYNC.
 */

#include <stdbool.h>
#include <sys/types.h>

#include "inputs.h"

/* The steps of agent-init's irreversible sequence, in their order (main.c). */
typedef enum Step {
	STEP_CAPABILITIES,
	STEP_IDENTITY,
	STEP_NO_NEW_PRIVS,
	STEP_LANDLOCK,
	STEP_FDS,
	STEP_SECCOMP_BASE,
	STEP_SECCOMP_DATAGRAM,
	STEP_THREADS,
	_STEP_MAX,
} Step;

/* What each thread applies to itself. */
typedef struct ThreadSteps {
	int cap_last;	       /* the highest capability number the kernel knows */
	const AppIdentity *id; /* id->set false: the credentials stay */
	int ruleset_fd;	       /* < 0: no Landlock ruleset */
} ThreadSteps;

/* Where a thread's confinement failed. */
typedef struct ThreadFailure {
	Step step;
	int error; /* a positive errno */
	pid_t tid;
} ThreadFailure;

/*
 * thread_confine_self() - in the calling thread, in this order: empty the bounding set,
 * clear the ambient and inheritable capabilities, set the groups, gid and uid (all three
 * of each), set no_new_privs and restrict it with the Landlock ruleset. Raw system calls
 * only, so that it can run in a signal handler (glibc's wrappers for the ids would signal
 * every thread). Returns 0, or -errno with @f saying which step failed.
 */
int thread_confine_self(const ThreadSteps *s, ThreadFailure *f);

/*
 * threads_confine_others() - have every other thread of the process run
 * thread_confine_self() on itself, threads that appear meanwhile included, then check in
 * /proc that each has the app's credentials, no capability and no_new_privs. Returns 0, or
 * a negative errno with @f set: the thread and its step when a thread failed to confine
 * itself, else STEP_THREADS and @why. Nothing of the caller is restricted by it.
 */
int threads_confine_others(const ThreadSteps *s, ThreadFailure *f, char *why, size_t whylen);
