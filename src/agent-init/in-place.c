/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libberth-confine.so: agent-init's confinement for a runtime that is already running.
 *
 * The warm-start zygote (src/berth-init/python-zygote.py, docs/warm-start.md) forks a
 * Python that has imported the SDK; the child sets up the app's environment as berth-init
 * would for agent-init, then calls berth_confine_in_place() through ctypes before it
 * imports a line of the app. The warm Node of a restored VM calls
 * berth_confine_in_place_event_loop() through its addon (node-addon.c). The code is
 * agent-init's own, so the identity, capabilities, no_new_privs, Landlock and seccomp are
 * those of an exec'd app, step for step, in every thread of the runtime.
 */
#include <stdlib.h>
#include <unistd.h>

#include "agent-init.h"
#include "filters.h"

static int confine(AgentInitMode mode)
{
	char *argv[] = {(char *)"agent-init", NULL};

	if (agent_init_run(1, argv, mode) != EXIT_SUCCESS)
		_exit(EXIT_FAILURE);
	return 0;
}

/*
 * berth_confine_preload() - do now what confining any app will need, in a runtime that
 * waits for its app: compile the seccomp filters (filters.h). Returns 0 or -errno; on an
 * error the confinement compiles them itself, as agent-init does.
 */
__attribute__((visibility("default"))) int berth_confine_preload(void)
{
	return filters_prebuild();
}

/*
 * berth_confine_in_place() - confine the calling process as the app its environment names
 * (BERTH_CAPABILITY_POLICY, BERTH_APP_UID, ...), every descriptor but stdio closed. Returns
 * 0 once confined; never returns otherwise: the process exits 1 with agent-init's refusal,
 * so no caller can run on unconfined by ignoring an error.
 */
__attribute__((visibility("default"))) int berth_confine_in_place(void)
{
	return confine(AGENT_INIT_IN_PLACE);
}

/* berth_confine_in_place_event_loop() - the same for a runtime whose event loop holds
 * descriptors of its own, which stay open (agent-init.h). */
__attribute__((visibility("default"))) int berth_confine_in_place_event_loop(void)
{
	return confine(AGENT_INIT_IN_PLACE_EVENT_LOOP);
}
