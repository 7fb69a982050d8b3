/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "egress.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "policy.h"

#define DIAL_SOCKET EGRESS_DIR "/dial.sock"
#define POLICY_COPY EGRESS_DIR "/policy.json"
#define BROKER_POLICY EGRESS_DIR "/broker-policy.json"
#define BROKER_TMP "/tmp/" EGRESS_USER
#define BROKER_PORT 8090

static struct {
	EvLoop *loop;
	Daemon daemon;
	DialSocket dial;
} eg = {
	.daemon = {.name = "egress-broker",
		   .title = "egress broker",
		   .binary = EGRESS_BROKER,
		   .user = EGRESS_USER,
		   .uid = EGRESS_UID,
		   .policy = BROKER_POLICY,
		   .ready_line = "[egress-broker] listening on ",
		   .listen = "127.0.0.1:8090"},
	.dial = {.fd = -EBADF},
};

bool egress_policy_declares(const CapabilityPolicy *policy)
{
	for (size_t i = 0; policy && i < policy->declared.n; i++) {
		const char *s = policy->declared.v[i];

		if (strneq(s, "network:host:", 13) || strneq(s, "browser:navigate:", 17))
			return true;
	}
	return false;
}

/* --- setup ------------------------------------------------------------------------ */

/* The broker's own policy (SPEC 6.3): write /tmp/berth-egress, bind 8090, no TCP connect;
 * reads only its binary's tree and its directory. */
static int write_broker_policy(void)
{
	_cleanup_(json_decrefp) json_t *doc = json_pack(
		"{s:i, s:s, s:[], s:[s, s], s:[s, s], s:[], s:b, s:[], s:[i], s:{}}", "schema",
		POLICY_SCHEMA, "appName", EGRESS_USER, "declaredCapabilities", "writePaths",
		"/dev/null", BROKER_TMP, "readPaths", "/usr", EGRESS_DIR, "networkPorts",
		"networkUnrestricted", 0, "meshPeers", "bindPorts", BROKER_PORT, "cgroupLimits");

	return daemon_write_policy(BROKER_POLICY, doc, EGRESS_UID);
}

int egress_setup(EvLoop *loop, MuxIo *io, const char *app, const char *policy_path, char *why,
		 size_t whylen)
{
	_cleanup_free_ char *policy = NULL;
	size_t size;
	int r;

	eg.loop = loop;
	snprintf(eg.daemon.app, sizeof(eg.daemon.app), "%s", app);
	if (mkdir(EGRESS_DIR, 0750) < 0 && errno != EEXIST)
		return daemon_why(why, whylen, "cannot create %s: %s", EGRESS_DIR, strerror(errno));
	if (chown(EGRESS_DIR, 0, EGRESS_UID) < 0 || chmod(EGRESS_DIR, 0750) < 0)
		return daemon_why(why, whylen, "cannot give %s to the broker: %s", EGRESS_DIR,
				  strerror(errno));
	/* A copy the broker reads once: root's, so nothing the broker does can change it. */
	r = read_full_file(policy_path, POLICY_FILE_SIZE_MAX, &policy, &size);
	if (r >= 0)
		r = write_file_atomic(POLICY_COPY, policy, size, 0640);
	if (r >= 0 && chown(POLICY_COPY, 0, EGRESS_UID) < 0)
		r = -errno;
	if (r < 0)
		return daemon_why(why, whylen, "cannot copy %s to %s: %s", policy_path, POLICY_COPY,
				  strerror(-r));
	r = write_broker_policy();
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", BROKER_POLICY, strerror(-r));
	if ((mkdir(BROKER_TMP, 0700) < 0 && errno != EEXIST) ||
	    chown(BROKER_TMP, EGRESS_UID, EGRESS_UID) < 0 || chmod(BROKER_TMP, 0700) < 0)
		return daemon_why(why, whylen, "cannot create %s: %s", BROKER_TMP, strerror(errno));
	r = dial_socket_listen(loop, io, DIAL_SOCKET, EGRESS_UID, &eg.dial);
	if (r < 0)
		return daemon_why(why, whylen, "cannot serve %s: %s", DIAL_SOCKET, strerror(-r));
	return 0;
}

/* --- the process ------------------------------------------------------------------- */

void egress_start(egress_ready_t cb, void *userdata)
{
	static const char *const extra[] = {
		"BERTH_EGRESS_POLICY=" POLICY_COPY,
		"BERTH_EGRESS_DIALER_SOCKET=" DIAL_SOCKET,
		"BERTH_EGRESS_BROKER_PORT=8090",
		NULL,
	};

	daemon_start(&eg.daemon, eg.loop, extra, NULL, cb, userdata);
}

bool egress_child_exited(pid_t pid, int status)
{
	if (!daemon_child_exited(&eg.daemon, pid, status))
		return false;
	/* Nothing dials any more; a dial socket left open would only collect connections. */
	dial_socket_close(&eg.dial);
	return true;
}

json_t *egress_status(void)
{
	if (eg.daemon.state == DAEMON_NONE)
		return NULL;
	return json_pack("{s:s, s:s, s:i, s:I}", "app", eg.daemon.app, "state",
			 daemon_state_name(eg.daemon.state), "pid", (int)eg.daemon.pid, "dials",
			 (json_int_t)eg.dial.dials);
}
