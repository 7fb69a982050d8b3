/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "daemon.h"
#include "evloop.h"
#include "mux-io.h"
#include "policy.h"

/*
 * The GitHub API broker of this VM (SPEC 6.2; docs/github.md). When exactly one app
 * declares a github: capability, berth-init
 *   - adds the user and group berth-github (uid/gid 9003, not in group berth);
 *   - makes /run/berth/github (0750 root:9003) with a root-owned copy of that app's
 *     compiled policy (0640 root:9003), the broker's own agent-init policy, and the dial
 *     socket (0660 root:9003), each connection a channel stream to the host's dialer;
 *   - makes the certificate directory /run/berth/github-api-broker (0700 9003:9003), where
 *     the broker writes its CA certificate, and /tmp/berth-github;
 *   - starts /usr/sbin/github-api-broker under agent-init as uid 9003, with the secrets
 *     disk's "github-api-broker" scope (GITHUB_TOKEN) in its environment and nothing of any
 *     app's;
 *   - once it listens: the certificates become root's (0644) and the directory 0750
 *     root:<the app's gid>, so the app reads the CA certificate and the broker can change
 *     nothing there any more; the app alone is told BERTH_GITHUB_API_PROXY,
 *     NODE_EXTRA_CA_CERTS, SSL_CERT_FILE and REQUESTS_CA_BUNDLE.
 * Anything that fails refuses the GitHub app, never the others.
 */

#define GITHUB_UID 9003
#define GITHUB_USER "berth-github"
#define GITHUB_DIR "/run/berth/github"
#define GITHUB_CERT_DIR CAPABILITY_GITHUB_BROKER_DIR
#define GITHUB_BROKER "/usr/sbin/github-api-broker"
#define GITHUB_BROKER_PORT 8092
#define GITHUB_PROXY_URL "http://127.0.0.1:8092"
/* The broker's name: its daemon scope on the secrets disk, its policy's appName (so its
 * certificate directory is its own /run/berth/<name>), the journal's source. */
#define GITHUB_DAEMON "github-api-broker"

/* Does a compiled policy declare a github: capability? */
bool github_policy_declares(const CapabilityPolicy *policy);

/* Is the broker in this root image? */
bool github_broker_present(void);

/*
 * github_setup() - everything but the process, for app @app (gid @app_gid) whose compiled
 * policy is the file @policy_path. On failure returns -errno and says why in @why.
 */
int github_setup(EvLoop *loop, MuxIo *io, const char *app, gid_t app_gid, const char *policy_path,
		 char *why, size_t whylen);

/* Start the broker with @secrets (the whole secrets object; its daemon scope is taken).
 * @cb follows once: listening and the certificate directory narrowed, or why not. */
void github_start(const json_t *secrets, daemon_ready_t cb, void *userdata);

/* The SIGCHLD reaper's hook: true when @pid was the broker. */
bool github_child_exited(pid_t pid, int status);

/* {app, state, pid, dials} for the status reply, or NULL when there is no broker. */
json_t *github_status(void);

/* The app's variables, "K=V" (NULL-terminated, static). */
extern const char *const github_app_env[];
