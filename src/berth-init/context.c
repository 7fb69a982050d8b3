/* SPDX-License-Identifier: Apache-2.0 */
/* The context bus and the /context index, started for the apps (context.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps.h"
#include "context.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "policy.h"

#define BUS_BINARY "/usr/sbin/context-bus"
#define BUS_DIR "/run/berth/context-bus"
#define BUS_APPS BUS_DIR "/apps.json"
#define BUS_POLICY BUS_DIR "/bus-policy.json"

#define SFS_BINARY "/usr/sbin/semantic-fs"
#define SFS_CONFIG "/run/berth/semantic-fs-config"
#define SFS_APPS SFS_CONFIG "/apps.json"
#define SFS_POLICY SFS_CONFIG "/daemon-policy.json"
#define SFS_DIR "/run/berth/semantic-fs"
#define SFS_INDEX SFS_DIR "/index"
#define SFS_STATE "/state/semantic-fs"
#define SFS_TMP "/tmp/" SEMANTIC_FS_USER
#define SFS_DEFAULT_LINK "/tmp/berth-semantic-fs.sock"

static struct {
	Daemon bus, sfs;
	bool bus_set_up, sfs_set_up;
	const char *app_env[4];
} ctx = {
	.bus = {.name = "context-bus",
		.title = "context bus",
		.binary = BUS_BINARY,
		.user = CONTEXT_BUS_USER,
		.uid = CONTEXT_BUS_UID,
		.policy = BUS_POLICY,
		.ready_line = "[context-bus] listening on ",
		.listen = CONTEXT_BUS_SOCKET,
		.socket = CONTEXT_BUS_SOCKET,
		.socket_gid = BERTH_GROUP_GID},
	.sfs = {.name = "semantic-fs",
		.title = "semantic-fs",
		.binary = SFS_BINARY,
		.user = SEMANTIC_FS_USER,
		.uid = SEMANTIC_FS_UID,
		.policy = SFS_POLICY,
		.ready_line = "[semantic-fs] listening on ",
		.listen = SEMANTIC_FS_SOCKET,
		.socket = SEMANTIC_FS_SOCKET,
		.socket_gid = BERTH_GROUP_GID},
};

bool context_bus_present(void)
{
	return access(BUS_BINARY, X_OK) == 0;
}

bool semantic_fs_present(void)
{
	return access(SFS_BINARY, X_OK) == 0;
}

/* The daemon's table of the apps: who a uid is, by berth-init's word (root:@gid 0640). */
static int write_apps(const char *path, const ContextApp *apps, size_t n, bool with_read, gid_t gid)
{
	_cleanup_(json_decrefp) json_t *list = json_array(), *doc = NULL;
	_cleanup_free_ char *text = NULL;
	int r;

	for (size_t i = 0; list && i < n; i++) {
		json_t *a = json_pack("{s:i, s:s}", "uid", (int)apps[i].uid, "name", apps[i].name);

		if (a && with_read)
			json_object_set_new(a, "read", json_boolean(apps[i].reads_context));
		if (!a || json_array_append_new(list, a) < 0)
			return -ENOMEM;
	}
	doc = list ? json_pack("{s:i, s:O}", "schema", 1, "apps", list) : NULL;
	text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!text)
		return -ENOMEM;
	r = write_file_atomic(path, text, strlen(text), 0640);
	if (r >= 0 && chown(path, 0, gid) < 0)
		r = -errno;
	return r;
}

/* The bus: its table and policy in /run/berth/context-bus (0750 root:9001); it makes its
 * socket in /tmp, which the apps' /tmp/<app> (0700) keeps it out of. No network. */
static int setup_bus(const ContextApp *apps, size_t n, char *why, size_t whylen)
{
	int r;

	r = daemon_make_dir(BUS_DIR, 0750, 0, CONTEXT_BUS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot create %s: %s", BUS_DIR, strerror(-r));
	r = write_apps(BUS_APPS, apps, n, false, CONTEXT_BUS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", BUS_APPS, strerror(-r));
	r = daemon_make_dir("/tmp/" CONTEXT_BUS_USER, 0700, CONTEXT_BUS_UID, CONTEXT_BUS_UID);
	if (r >= 0)
		r = daemon_write_policy(
			BUS_POLICY,
			json_pack(
				"{s:i, s:s, s:[], s:[s, s], s:[s, s], s:[], s:b, s:[], s:[], s:{}}",
				"schema", POLICY_SCHEMA, "appName", CONTEXT_BUS_USER,
				"declaredCapabilities", "writePaths", "/dev/null", "/tmp",
				"readPaths", "/usr", BUS_DIR, "networkPorts", "networkUnrestricted",
				0, "meshPeers", "bindPorts", "cgroupLimits"),
			CONTEXT_BUS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", BUS_POLICY, strerror(-r));
	return 0;
}

/*
 * The index: its configuration (0750 root:9005), its own directory (0710 9005:berth, the
 * socket's way in for the apps), and the index itself on the state disk, bind-mounted into
 * that directory: a policy grants writes only beneath its own /run/berth/<name>, and
 * under /context an app could move the index away.
 */
static int setup_sfs(const ContextApp *apps, size_t n, bool persistent, char *why, size_t whylen)
{
	int r;

	r = daemon_make_dir(SFS_CONFIG, 0750, 0, SEMANTIC_FS_UID);
	if (r >= 0)
		r = daemon_make_dir(SFS_DIR, 0710, SEMANTIC_FS_UID, BERTH_GROUP_GID);
	if (r >= 0)
		r = daemon_make_dir(SFS_TMP, 0700, SEMANTIC_FS_UID, SEMANTIC_FS_UID);
	if (r >= 0)
		r = daemon_make_dir(SFS_INDEX, 0700, SEMANTIC_FS_UID, SEMANTIC_FS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot create its directories: %s", strerror(-r));
	if (persistent) {
		r = daemon_make_dir(SFS_STATE, 0700, SEMANTIC_FS_UID, SEMANTIC_FS_UID);
		if (r < 0)
			return daemon_why(why, whylen, "cannot create %s: %s", SFS_STATE,
					  strerror(-r));
		if (mount(SFS_STATE, SFS_INDEX, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, SFS_INDEX, NULL,
			  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return daemon_why(why, whylen, "cannot mount %s on %s: %s", SFS_STATE,
					  SFS_INDEX, strerror(errno));
	}
	/* SPEC 2.4's default path, for a client not told the real one: a root-owned link in
	 * root's sticky /tmp, which protected_symlinks lets every uid follow. */
	(void)unlink(SFS_DEFAULT_LINK);
	if (symlink(SEMANTIC_FS_SOCKET, SFS_DEFAULT_LINK) < 0)
		return daemon_why(why, whylen, "cannot link %s: %s", SFS_DEFAULT_LINK,
				  strerror(errno));
	r = write_apps(SFS_APPS, apps, n, true, SEMANTIC_FS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", SFS_APPS, strerror(-r));
	r = daemon_write_policy(
		SFS_POLICY,
		json_pack("{s:i, s:s, s:[], s:[s, s, s], s:[s, s, s, s, s], s:[], s:b, s:[], s:[], "
			  "s:{}}",
			  "schema", POLICY_SCHEMA, "appName", "semantic-fs", "declaredCapabilities",
			  "writePaths", "/dev/null", SFS_TMP, SFS_DIR, "readPaths", "/usr",
			  "/dev/urandom", "/context", SFS_CONFIG, SFS_DIR, "networkPorts",
			  "networkUnrestricted", 0, "meshPeers", "bindPorts", "cgroupLimits"),
		SEMANTIC_FS_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot write %s: %s", SFS_POLICY, strerror(-r));
	return 0;
}

void context_setup(const ContextApp *apps, size_t n, bool persistent)
{
	char why[512];
	size_t k = 0;

	if (n == 0)
		return;
	if (context_bus_present()) {
		ctx.bus_set_up = setup_bus(apps, n, why, sizeof(why)) >= 0;
		if (!ctx.bus_set_up)
			journal_event("daemon_refused", json_pack("{s:s, s:s}", "daemon",
								  "context-bus", "reason", why));
	} else
		journal_event("daemon_absent", json_pack("{s:s, s:s}", "daemon", "context-bus",
							 "binary", BUS_BINARY));
	if (semantic_fs_present()) {
		ctx.sfs_set_up = setup_sfs(apps, n, persistent, why, sizeof(why)) >= 0;
		if (!ctx.sfs_set_up)
			journal_event("daemon_refused", json_pack("{s:s, s:s}", "daemon",
								  "semantic-fs", "reason", why));
	} else
		journal_event("daemon_absent", json_pack("{s:s, s:s}", "daemon", "semantic-fs",
							 "binary", SFS_BINARY));
	/* What the apps are told (SPEC 2.4): without a bus they fall back to an in-process
	 * one; without the index, /context has no tags or queries, and the SDK says so. */
	if (ctx.bus_set_up)
		ctx.app_env[k++] = "BERTH_CONTEXT_BUS_SOCKET=" CONTEXT_BUS_SOCKET;
	if (ctx.sfs_set_up) {
		ctx.app_env[k++] = "BERTH_SEMANTIC_FS_SOCKET=" SEMANTIC_FS_SOCKET;
		ctx.app_env[k++] = "BERTH_CONTEXT_MOUNT=/context";
	} else
		ctx.app_env[k++] = "BERTH_NO_SEMANTIC_FS=1";
}

unsigned context_daemons(void)
{
	return ctx.bus_set_up + ctx.sfs_set_up;
}

void context_start(EvLoop *loop, daemon_ready_t cb, void *userdata)
{
	/* agent-init gives each group berth (SPEC 9.1), which their sockets belong to. */
	static const char *const bus_extra[] = {
		"BERTH_CONTEXT_BUS_SOCKET=" CONTEXT_BUS_SOCKET,
		"BERTH_CONTEXT_BUS_APPS=" BUS_APPS,
		"BERTH_SHARED_GID=9999",
		"BERTH_APP_SUPPLEMENTARY_GIDS=9999",
		NULL,
	};
	static const char *const sfs_extra[] = {
		"BERTH_SEMANTIC_FS_SOCKET=" SEMANTIC_FS_SOCKET,
		"BERTH_CONTEXT_MOUNT=/context",
		"BERTH_SEMANTIC_FS_INDEX=" SFS_INDEX,
		"BERTH_SEMANTIC_FS_APPS=" SFS_APPS,
		"BERTH_SHARED_GID=9999",
		"BERTH_APP_SUPPLEMENTARY_GIDS=9999",
		NULL,
	};
	/* Both are socket-activated: bound now, run once the apps have started. */
	ctx.bus.hold = ctx.sfs.hold = true;
	if (ctx.bus_set_up)
		daemon_start(&ctx.bus, loop, bus_extra, NULL, cb, userdata);
	if (ctx.sfs_set_up)
		daemon_start(&ctx.sfs, loop, sfs_extra, NULL, cb, userdata);
}

void context_release(void)
{
	daemon_release(&ctx.bus);
	daemon_release(&ctx.sfs);
}

const char *const *context_app_env(void)
{
	return ctx.app_env;
}

bool context_child_exited(pid_t pid, int status)
{
	return daemon_child_exited(&ctx.bus, pid, status) ||
	       daemon_child_exited(&ctx.sfs, pid, status);
}

static json_t *daemon_json(const Daemon *d)
{
	return json_pack("{s:s, s:i}", "state", daemon_state_name(d->state), "pid", (int)d->pid);
}

json_t *context_status(void)
{
	json_t *o;

	if (ctx.bus.state == DAEMON_NONE && ctx.sfs.state == DAEMON_NONE)
		return NULL;
	o = json_object();
	if (o && ctx.bus.state != DAEMON_NONE)
		json_object_set_new(o, "contextBus", daemon_json(&ctx.bus));
	if (o && ctx.sfs.state != DAEMON_NONE)
		json_object_set_new(o, "semanticFs", daemon_json(&ctx.sfs));
	return o;
}
