/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libberth-confine.so: agent-init's confinement for a runtime that is already running.
 *
 * The warm-start zygote (sdk/python/zygote.py, docs/warm-start.md) forks a Python that has
 * imported the SDK; the child sets up the app's environment as berth-init would for
 * agent-init, then calls berth_confine_in_place() through ctypes before it imports a line
 * of the app. The code is agent-init's own, so the identity, capabilities, no_new_privs,
 * Landlock and seccomp are those of an exec'd app, step for step.
 */
#include <stdlib.h>
#include <unistd.h>

#include "agent-init.h"

/*
 * berth_confine_in_place() - confine the calling single-threaded process as the app its
 * environment names (BERTH_CAPABILITY_POLICY, BERTH_APP_UID, ...). Returns 0 once
 * confined; never returns otherwise: the process exits 1 with agent-init's refusal, so
 * no caller can run on unconfined by ignoring an error.
 */
__attribute__((visibility("default"))) int berth_confine_in_place(void)
{
	char *argv[] = {(char *)"agent-init", NULL};

	if (agent_init_run(1, argv, true) != EXIT_SUCCESS)
		_exit(EXIT_FAILURE);
	return 0;
}
