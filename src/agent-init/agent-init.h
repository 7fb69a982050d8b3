/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/* How agent_init_run() leaves the process it confined. */
typedef enum AgentInitMode {
	AGENT_INIT_EXEC,     /* exec argv[1]: agent-init itself */
	AGENT_INIT_IN_PLACE, /* return, every descriptor but stdio closed (a forked Python) */
	/* return, keeping the runtime's own event-loop descriptors (epoll, eventfd, its pipes,
	 * /dev/null) and refusing any other: a Node started before its app */
	AGENT_INIT_IN_PLACE_EVENT_LOOP,
} AgentInitMode;

/*
 * agent_init_run() - agent-init's whole job (main.c): read the policy and the identity from
 * the environment, confine the calling process, then exec argv[1] with argv[1..]. In place,
 * argv is unused and nothing is exec'd: every thread of the process is confined as the
 * exec'd one would be, and the process goes on as the app (libberth-confine.so, in-place.c).
 * Returns EXIT_FAILURE where nothing was restricted yet; a refusal or a failed step exits.
 */
int agent_init_run(int argc, char *argv[], AgentInitMode mode);

/* libberth-confine.so's exports (in-place.c). */
int berth_confine_preload(void);
int berth_confine_in_place(void);
int berth_confine_in_place_event_loop(void);
