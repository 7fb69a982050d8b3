/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "github.h"
#include "journal.h"
#include "macros.h"
#include "secrets.h"

#define DIAL_SOCKET GITHUB_DIR "/dial.sock"
#define POLICY_COPY GITHUB_DIR "/policy.json"
#define BROKER_POLICY GITHUB_DIR "/broker-policy.json"
#define BROKER_TMP "/tmp/" GITHUB_USER

const char *const github_app_env[] = {
	"BERTH_GITHUB_API_PROXY=" GITHUB_PROXY_URL,
	/* Node adds this to its roots. */
	"NODE_EXTRA_CA_CERTS=" GITHUB_CERT_DIR "/ca.crt",
	/* OpenSSL (Python's ssl, urllib, http.client, httpx) and requests replace their roots
	 * with these: the system's roots and the broker's CA, so other hosts still verify. */
	"SSL_CERT_FILE=" GITHUB_CERT_DIR "/ca-bundle.crt",
	"REQUESTS_CA_BUNDLE=" GITHUB_CERT_DIR "/ca-bundle.crt",
	NULL,
};

static struct {
	EvLoop *loop;
	gid_t app_gid;
	Daemon daemon;
	DialSocket dial;
	daemon_ready_t cb;
	void *userdata;
} gh = {
	.daemon = {.name = GITHUB_DAEMON,
		   .title = "GitHub API broker",
		   .binary = GITHUB_BROKER,
		   .user = GITHUB_USER,
		   .uid = GITHUB_UID,
		   .policy = BROKER_POLICY,
		   .ready_line = "[github-api-broker] listening on ",
		   .listen = "127.0.0.1:8092"},
	.dial = {.fd = -EBADF},
};

bool github_policy_declares(const CapabilityPolicy *policy)
{
	for (size_t i = 0; policy && i < policy->declared.n; i++)
		if (strneq(policy->declared.v[i], "github:", 7))
			return true;
	return false;
}

bool github_broker_present(void)
{
	return access(GITHUB_BROKER, X_OK) == 0;
}

/* The broker's own policy: bind 8092 and no TCP connect; write its certificate directory
 * (its own /run/berth/<name>) and /tmp/berth-github; read its binary's tree, its
 * directory and the system's roots. */
static int write_broker_policy(void)
{
	_cleanup_(json_decrefp) json_t *doc = json_pack(
		"{s:i, s:s, s:[], s:[s, s, s], s:[s, s, s, s], s:[], s:b, s:[], s:[i], s:{}}",
		"schema", POLICY_SCHEMA, "appName", GITHUB_DAEMON, "declaredCapabilities",
		"writePaths", "/dev/null", BROKER_TMP, GITHUB_CERT_DIR, "readPaths", "/usr",
		GITHUB_DIR, "/etc/ssl/certs", GITHUB_CERT_DIR, "networkPorts",
		"networkUnrestricted", 0, "meshPeers", "bindPorts", GITHUB_BROKER_PORT,
		"cgroupLimits");

	return daemon_write_policy(BROKER_POLICY, doc, GITHUB_UID);
}

int github_setup(EvLoop *loop, MuxIo *io, const char *app, gid_t app_gid, const char *policy_path,
		 char *why, size_t whylen)
{
	_cleanup_free_ char *policy = NULL;
	size_t size;
	int r;

	gh.loop = loop;
	gh.app_gid = app_gid;
	snprintf(gh.daemon.app, sizeof(gh.daemon.app), "%s", app);
	if (daemon_make_dir(GITHUB_DIR, 0750, 0, GITHUB_UID) < 0)
		return daemon_why(why, whylen, "cannot create %s: %s", GITHUB_DIR, strerror(errno));
	/* A copy the broker reads once: root's, so nothing the broker does can change it. */
	r = read_full_file(policy_path, POLICY_FILE_SIZE_MAX, &policy, &size);
	if (r >= 0)
		r = write_file_atomic(POLICY_COPY, policy, size, 0640);
	if (r >= 0 && chown(POLICY_COPY, 0, GITHUB_UID) < 0)
		r = -errno;
	if (r < 0)
		return daemon_why(why, whylen, "cannot copy %s to %s: %s", policy_path, POLICY_COPY,
				  strerror(-r));
	r = write_broker_policy();
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", BROKER_POLICY, strerror(-r));
	/* 0700 while the broker writes into it; narrowed once it listens. */
	if (daemon_make_dir(GITHUB_CERT_DIR, 0700, GITHUB_UID, GITHUB_UID) < 0 ||
	    daemon_make_dir(BROKER_TMP, 0700, GITHUB_UID, GITHUB_UID) < 0)
		return daemon_why(why, whylen, "cannot create the broker's directories: %s",
				  strerror(errno));
	r = dial_socket_listen(loop, io, DIAL_SOCKET, GITHUB_UID, &gh.dial);
	if (r < 0)
		return daemon_why(why, whylen, "cannot serve %s: %s", DIAL_SOCKET, strerror(-r));
	return 0;
}

/* One certificate the broker wrote becomes root's: a regular file, not a link. */
static int take_file(int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != GITHUB_UID)
		return -EPERM;
	if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0644) < 0)
		return -errno;
	return 0;
}

/*
 * The app reads the CA certificate; the broker, which no longer needs the directory, can
 * change nothing in it: its files become root's, and the directory 0750 root:<app gid>,
 * which uid 9003 cannot even enter.
 */
static int narrow_cert_dir(char *why, size_t whylen)
{
	_cleanup_close_ int dfd =
		open(GITHUB_CERT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r;

	if (dfd < 0)
		return daemon_why(why, whylen, "cannot open %s: %s", GITHUB_CERT_DIR,
				  strerror(errno));
	if (fchown(dfd, 0, gh.app_gid) < 0 || fchmod(dfd, 0750) < 0)
		return daemon_why(why, whylen, "cannot narrow %s: %s", GITHUB_CERT_DIR,
				  strerror(errno));
	for (size_t i = 0; i < 2; i++) {
		const char *name = i == 0 ? "ca.crt" : "ca-bundle.crt";

		r = take_file(dfd, name);
		if (r < 0)
			return daemon_why(why, whylen,
					  "the broker's %s/%s is not a file of its own: %s",
					  GITHUB_CERT_DIR, name, strerror(-r));
	}
	return 0;
}

static void on_ready(bool ok, const char *why, void *userdata)
{
	char narrowed[256];
	daemon_ready_t cb = gh.cb;

	gh.cb = NULL;
	if (ok && narrow_cert_dir(narrowed, sizeof(narrowed)) < 0) {
		ok = false;
		why = narrowed;
	}
	if (cb)
		cb(ok, why, gh.userdata);
}

void github_start(const json_t *secrets, daemon_ready_t cb, void *userdata)
{
	static const char *const extra[] = {
		"BERTH_GITHUB_POLICY=" POLICY_COPY,
		"BERTH_GITHUB_DIALER_SOCKET=" DIAL_SOCKET,
		"BERTH_GITHUB_API_BROKER_PORT=8092",
		"BERTH_GITHUB_API_BROKER_CERT_DIR=" GITHUB_CERT_DIR,
		NULL,
	};

	gh.cb = cb;
	gh.userdata = userdata;
	daemon_start(&gh.daemon, gh.loop, extra, secrets_for_daemon(secrets, GITHUB_DAEMON),
		     on_ready, NULL);
}

bool github_child_exited(pid_t pid, int status)
{
	if (!daemon_child_exited(&gh.daemon, pid, status))
		return false;
	dial_socket_close(&gh.dial);
	return true;
}

json_t *github_status(void)
{
	if (gh.daemon.state == DAEMON_NONE)
		return NULL;
	return json_pack("{s:s, s:s, s:i, s:I}", "app", gh.daemon.app, "state",
			 daemon_state_name(gh.daemon.state), "pid", (int)gh.daemon.pid, "dials",
			 (json_int_t)gh.dial.dials);
}
