/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "evloop.h"
#include "mux-io.h"
#include "policy.h"

/*
 * The egress broker of this VM (SPEC 6.1, 6.3; docs/egress.md). When exactly one app
 * declares network:host: or browser:navigate:, berth-init
 *   - adds the user and group berth-egress (uid/gid 9002, not in group berth);
 *   - makes /run/berth/egress (0750 root:9002) with a root-owned copy of that app's
 *     compiled policy, policy.json (0640 root:9002), and the broker's own agent-init
 *     policy: write /dev/null and /tmp/berth-egress only, read /usr and /run/berth/egress,
 *     bind TCP 8090, connect to no TCP port;
 *   - serves /run/berth/egress/dial.sock (0660 root:9002): every connection becomes a new
 *     channel stream to the host's port 1026 (berth-vmm's egress dialer), bridged byte for
 *     byte;
 *   - starts /usr/sbin/egress-broker under agent-init as uid 9002, with its output in the
 *     journal as "egress-broker", and starts the apps once it says "listening on"; the
 *     egress app alone gets BERTH_EGRESS_PROXY_URL.
 * Anything that fails refuses the egress app, never the others.
 */

#define EGRESS_UID 9002
#define EGRESS_USER "berth-egress"
#define EGRESS_DIR "/run/berth/egress"
#define EGRESS_PROXY_URL "http://127.0.0.1:8090"
#define EGRESS_BROKER "/usr/sbin/egress-broker"

/* Does a compiled policy declare egress (network:host: or browser:navigate:)? */
bool egress_policy_declares(const CapabilityPolicy *policy);

/*
 * egress_setup() - everything but the process, for app @app whose compiled policy is the
 * file @policy_path: the directory, the policy copy, the broker's policy, its /tmp
 * directory, and the dial socket routed to @io. On failure returns -errno and says why in
 * @why.
 */
int egress_setup(EvLoop *loop, MuxIo *io, const char *app, const char *policy_path, char *why,
		 size_t whylen);

/* Called once: @ok when the broker listens; otherwise @why says what went wrong. */
typedef void (*egress_ready_t)(bool ok, const char *why, void *userdata);

/* Start the broker (after egress_setup()). @cb follows from the event loop, or at once on
 * a failure to start. */
void egress_start(egress_ready_t cb, void *userdata);

/* The SIGCHLD reaper's hook: true when @pid was the broker. */
bool egress_child_exited(pid_t pid, int status);

/* {app, state, pid} for the status reply, or NULL when there is no broker. */
json_t *egress_status(void);
