/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * agent_init_run() - agent-init's whole job (main.c): read the policy and the identity from
 * the environment, confine the calling process, then exec argv[1] with argv[1..]. With
 * @confine_in_place, argv is unused and nothing is exec'd: the process itself goes on as
 * the app, confined as the exec'd one would be (libberth-confine.so, in-place.c).
 * Returns EXIT_FAILURE where nothing was restricted yet; a refusal or a failed step exits.
 */
int agent_init_run(int argc, char *argv[], bool confine_in_place);

/* libberth-confine.so's one export (in-place.c). */
int berth_confine_in_place(void);
