/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps.h"
#include "browser.h"
#include "confine.h"
#include "container.h"
#include "context.h"
#include "daemon.h"
#include "disks.h"
#include "egress.h"
#include "fd-splice.h"
#include "fileio.h"
#include "github.h"
#include "grants.h"
#include "journal.h"
#include "macros.h"
#include "publish-relay.h"
#include "node-snapshot.h"
#include "node-warm.h"
#include "zygote.h"

#define OUTPUT_LINE_MAX (16 * 1024)
#define REPORT_BYTES_MAX (64 * 1024) /* of agent-init's reports, per app */
#define PENDING_RPC_MAX 16
#define RPC_WAIT_USEC (60 * USEC_PER_SEC)
/* The longest the context daemons wait for the apps to start (context_release()). */
#define CONTEXT_HOLD_USEC (3 * USEC_PER_SEC)
/* After the apps are up, the wait before a VM that reloads starts its next warm Node. */
#define WARM_NODE_DELAY_USEC (2 * USEC_PER_SEC)
/* berth-init's own variables (about 20), then the secrets: the host's secrets disk holds at
 * most 512 names an app and 512 shared (ENV_NAMES_MAX), so every one of them fits. */
#define ENV_OWN_MAX 32
#define ENV_MAX (ENV_OWN_MAX + 2 * 512)
#define AGENT_INIT "/usr/sbin/agent-init"
/* Debian's group tty: a terminal app's extra group, for the pseudo-terminals it opens. */
#define TTY_GID 5

typedef enum AppState {
	APP_PENDING,
	APP_STARTING,
	APP_READY,
	APP_EXITED,
	APP_REFUSED,
	_APP_STATE_MAX,
} AppState;

static const char *const app_state_names[_APP_STATE_MAX] = {
	[APP_PENDING] = "pending", [APP_STARTING] = "starting", [APP_READY] = "ready",
	[APP_EXITED] = "exited",   [APP_REFUSED] = "refused",
};

typedef struct App App;

typedef struct Output {
	App *app;
	const char *stream; /* "stdout" or "stderr" */
	int fd;
	EvSource *source;
	char buf[OUTPUT_LINE_MAX];
	size_t len;
} Output;

typedef struct PendingRpc {
	int fd; /* our end of the socketpair bridged to the host's stream */
	uint64_t deadline;
} PendingRpc;

struct App {
	unsigned index;
	char name[CAPABILITY_APP_NAME_MAX + 1];
	char dir[80];	 /* the share's mount point */
	char socket[96]; /* /run/berth/<name>/rpc.sock */
	bool python;
	bool egress;  /* the one app the egress broker serves */
	bool github;  /* the one app the GitHub broker serves */
	bool browser; /* the one app the display stack serves (browser.h) */
	uid_t uid;
	pid_t pid;
	AppState state;
	int status; /* wait status once exited */
	bool stopped;
	Output out, err, rep; /* rep: agent-init's report pipe */
	size_t report_bytes;
	PendingRpc pending[PENDING_RPC_MAX];
	size_t n_pending;
	AppConfinement conf;
	json_t *reports; /* agent-init audit events already taken, by name */
	char refused[512];
	bool share_mounted;
	unsigned reloads; /* how many times its share was replaced in place */
	bool governs;	  /* governs: true in its berth.yml (the boot plan says) */
};

typedef enum ReloadPhase {
	RELOAD_NONE,
	RELOAD_STOPPING,   /* SIGTERM sent, waiting for the app to exit */
	RELOAD_UNMOUNTING, /* exited; the share is being unmounted */
	RELOAD_STOPPED,	   /* the host may rewrite the share */
	RELOAD_STARTING,   /* the new version runs, not ready yet */
} ReloadPhase;

#define RELOAD_STOP_GRACE_USEC (3 * USEC_PER_SEC)
#define RELOAD_UNMOUNT_RETRY_USEC (50 * USEC_PER_MSEC)
#define RELOAD_UNMOUNT_TRIES 60

/* The one reload in place under way, if any. */
static struct {
	App *app;
	ReloadPhase phase;
	apps_reload_done_t done;
	void *userdata;
	EvSource *timer;
	unsigned tries;
} reload;

static bool reloading(const App *a)
{
	return reload.app == a && reload.phase != RELOAD_NONE;
}

static EvLoop *apps_loop;
static const json_t *apps_plan;
static const json_t *apps_secrets;
static App apps[APPS_MAX];
static unsigned n_apps;
static EvSource *pending_timer;
static int governor_app = -1;	   /* index of the app that governs the others' calls */
static int egress_app = -1;	   /* index of the app the egress broker serves */
static int github_app = -1;	   /* index of the app the GitHub broker serves */
static int browser_app = -1;	   /* index of the app the display stack serves */
static bool launching;		   /* waiting for the brokers before starting the apps */
static EvSource *context_hold;	   /* the context daemons wait for the apps' start... */
static int64_t context_hold_since; /* ... since then (now_ms()) */
static unsigned brokers_pending;
static EvSource *warm_node_timer; /* the next warm Node's start, once the apps are up */
static void (*launch_none_started)(void);

static int mount_share(App *a)
{
	char serial[16], dev[64];
	struct stat st;

	if (container_mode()) {
		/* Docker bound the share there, read-only (container.h). */
		if (stat(a->dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
			journal_logf("app \"%s\": no share at %s", a->name, a->dir);
			return -ENOENT;
		}
		return 0;
	}
	snprintf(serial, sizeof(serial), "app%u", a->index);
	if (disk_find_by_serial(serial, dev, sizeof(dev)) < 0) {
		journal_logf("app \"%s\": no disk with serial %s (its share)", a->name, serial);
		return -ENOENT;
	}
	(void)mkdir(a->dir, 0755);
	if (mount(dev, a->dir, "erofs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
		journal_logf("app \"%s\": cannot mount its share %s on %s: %s", a->name, dev,
			     a->dir, strerror(errno));
		return -errno;
	}
	a->share_mounted = true;
	return 0;
}

static bool share_is_python(const App *a)
{
	_cleanup_free_ char *path = NULL, *text = NULL;

	if (asprintf(&path, "%s/.berth-runtime", a->dir) < 0)
		return false;
	return read_full_file(path, 64, &text, NULL) >= 0 && strneq(text, "python", 6);
}

int apps_prepare(EvLoop *loop, const json_t *plan, const json_t *secrets)
{
	const json_t *list = json_object_get(plan, "apps"), *entry;
	size_t k;
	int r;

	apps_loop = loop;
	apps_plan = plan;
	apps_secrets = secrets;
	if (json_array_size(list) > APPS_MAX) {
		journal_logf("boot plan: more than %d apps", APPS_MAX);
		return -EINVAL;
	}
	/* The host compiled and named every app (boot-disk.h); this checks what it relies on. */
	json_array_foreach(list, k, entry) {
		const char *name = json_string_value(json_object_get(entry, "name"));
		const char *share = json_string_value(json_object_get(entry, "share"));
		char want[24];
		App *a;

		snprintf(want, sizeof(want), "app%u", (unsigned)k);
		if (!capability_app_name_valid(name) || !share || !streq(share, want)) {
			journal_logf("boot plan: app %zu has no valid name or share", k);
			return -EINVAL;
		}
		for (unsigned i = 0; i < n_apps; i++)
			if (streq(apps[i].name, name)) {
				journal_logf("boot plan: app \"%s\" listed twice", name);
				return -EINVAL;
			}
		a = &apps[n_apps];
		*a = (App){.index = n_apps,
			   .uid = APP_UID_BASE + n_apps,
			   .out.fd = -EBADF,
			   .err.fd = -EBADF,
			   .rep.fd = -EBADF};
		snprintf(a->name, sizeof(a->name), "%s", name);
		n_apps++;
	}
	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];
		const json_t *entry_i = json_array_get(list, i);

		/* One app lives at /app; several at /app/<name>. */
		snprintf(a->dir, sizeof(a->dir), n_apps == 1 ? "/app" : "/app/%s", a->name);
		snprintf(a->socket, sizeof(a->socket), "/run/berth/%s/rpc.sock", a->name);
		r = mount_share(a);
		if (r < 0)
			return r;
		a->python = share_is_python(a);
		a->reports = json_object();
		a->governs = json_is_true(json_object_get(entry_i, "governs"));
		/* A policy that does not check out refuses this app, not the VM. */
		if (confine_install_policy(a->name, a->uid, json_object_get(entry_i, "policy"),
					   json_object_get(entry_i, "warnings"), &a->conf,
					   a->refused, sizeof(a->refused)) < 0)
			a->state = APP_REFUSED;
	}
	return 0;
}

/* Copy @src to a tmpfs file with @extra appended and bind it over @src. */
static int overlay_file(const char *src, const char *copy, const char *extra)
{
	_cleanup_free_ char *text = NULL, *merged = NULL;
	int r;

	r = read_full_file(src, 1024 * 1024, &text, NULL);
	if (r < 0)
		return r;
	if (asprintf(&merged, "%s%s", text, extra) < 0)
		return -ENOMEM;
	/* A container's /etc is its own writable layer. A restarted container keeps it, so
	 * the image's own file is kept aside once and merged from every boot. */
	if (container_mode()) {
		_cleanup_free_ char *orig = NULL, *pristine = NULL, *again = NULL;

		if (asprintf(&orig, "%s.berth-image", src) < 0)
			return -ENOMEM;
		if (access(orig, F_OK) < 0) {
			r = write_file_atomic(orig, text, strlen(text), 0644);
			if (r < 0)
				return r;
		} else if ((r = read_full_file(orig, 1024 * 1024, &pristine, NULL)) < 0)
			return r;
		if (pristine && asprintf(&again, "%s%s", pristine, extra) < 0)
			return -ENOMEM;
		return again ? write_file_atomic(src, again, strlen(again), 0644)
			     : write_file_atomic(src, merged, strlen(merged), 0644);
	}
	r = write_file_atomic(copy, merged, strlen(merged), 0644);
	if (r < 0)
		return r;
	if (mount(copy, src, NULL, MS_BIND, NULL) < 0)
		return -errno;
	/* A bind mount keeps the original's flags; make the view read-only too. */
	(void)mount(NULL, src, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
	return 0;
}

static void refuse(App *a, const char *event, const char *why);

/* Every app's declared write paths, before any app starts; an app whose path cannot be
 * made (a symlink an app left in the way, say) is refused, and the others go on. */
static int precreate_write_paths(void)
{
	static char why[APPS_MAX][CONFINE_WHY_MAX];
	const char *names[APPS_MAX];
	const AppConfinement *confs[APPS_MAX];
	App *owners[APPS_MAX];
	uid_t uids[APPS_MAX];
	size_t n = 0;
	int r;

	for (unsigned i = 0; i < n_apps; i++) {
		if (!apps[i].conf.policy || apps[i].state == APP_REFUSED)
			continue;
		names[n] = apps[i].name;
		confs[n] = &apps[i].conf;
		owners[n] = &apps[i];
		uids[n++] = apps[i].uid;
	}
	r = confine_precreate(names, confs, uids, n, why);
	if (r < 0) {
		journal_logf("cannot create the declared write paths: %s", strerror(-r));
		return r;
	}
	for (size_t i = 0; i < n; i++)
		if (why[i][0])
			refuse(owners[i], "app_refused", why[i]);
	return 0;
}

static bool strict_cgroups(void)
{
	const char *e = getenv("BERTH_REQUIRE_APP_CGROUPS");

	return !e || !streq(e, "0");
}

static void refuse(App *a, const char *event, const char *why)
{
	a->state = APP_REFUSED;
	/* A long reason (every app's name) is cut to fit. */
	snprintf(a->refused, sizeof(a->refused), "%.*s", (int)sizeof(a->refused) - 1, why);
	if (event)
		journal_event(event, json_pack("{s:s, s:s}", "app", a->name, "reason", why));
}

/* Each app in /berth/apps/<name> with the limits its policy asks for, read back. In strict
 * mode (the VM's default) an app whose limits did not all apply does not start. */
static int setup_cgroups(void)
{
	int r;

	/* A container's cgroup holds all its apps, with the limits berth-vmm gave Docker:
	 * berth-init may not make cgroups of its own there (container.h). */
	if (container_mode()) {
		journal_event("cgroup_limits_container",
			      json_pack("{s:s}", "note",
					"every app shares the container's cgroup and its limits"));
		return 0;
	}
	r = confine_cgroups_setup();

	if (r < 0) {
		journal_logf("cannot set up the cgroup tree: %s", strerror(-r));
		for (unsigned i = 0; i < n_apps && strict_cgroups(); i++)
			if (apps[i].state == APP_PENDING)
				refuse(&apps[i], "cgroup_limits_refused", "no cgroup tree");
		return 0;
	}
	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];
		char why[256];

		if (a->state != APP_PENDING)
			continue;
		r = confine_app_cgroup(a->name, &a->conf, why, sizeof(why));
		if (r < 0 && strict_cgroups())
			refuse(a, "cgroup_limits_refused", why);
		else if (r < 0)
			journal_logf("app \"%s\": %s (not strict: starting anyway)", a->name, why);
	}
	return 0;
}

/*
 * The egress broker serves one app (SPEC 6.1). Several apps declaring egress refuses all
 * of them (fail closed: none gets a broker another could use); so does an app whose name
 * would collide with the broker's user, directories or policy.
 */
static void plan_egress(void)
{
	char names[APPS_MAX * 34] = "", why[sizeof(names) + 160];
	json_t *list = json_array();
	unsigned n = 0;

	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];

		if (a->state == APP_REFUSED || !egress_policy_declares(a->conf.policy))
			continue;
		a->egress = true;
		egress_app = (int)i;
		json_array_append_new(list, json_string(a->name));
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 n++ ? ", " : "", a->name);
	}
	if (n > 1) {
		snprintf(
			why, sizeof(why),
			"at most one app may declare a browser:navigate:*/network:host:* capability when running multiple apps together — found %u: %s",
			n, names);
		journal_event("egress_refused",
			      json_pack("{s:o, s:s}", "apps", list, "reason", why));
		for (unsigned i = 0; i < n_apps; i++)
			if (apps[i].egress) {
				refuse(&apps[i], NULL, why);
				apps[i].egress = false;
			}
		egress_app = -1;
		return;
	}
	json_decref(list);
	if (n == 0)
		return;
	for (unsigned i = 0; i < n_apps; i++)
		if (streq(apps[i].name, "egress") || streq(apps[i].name, EGRESS_USER)) {
			snprintf(
				why, sizeof(why),
				"an app named \"%s\" would share the egress broker's user and directories; rename that app to run \"%s\" with egress",
				apps[i].name, apps[egress_app].name);
			journal_event("egress_refused",
				      json_pack("{s:[s], s:s}", "apps", apps[egress_app].name,
						"reason", why));
			refuse(&apps[egress_app], NULL, why);
			apps[egress_app].egress = false;
			egress_app = -1;
			return;
		}
	{
		App *a = &apps[egress_app];
		const PolicyPorts *ports = &a->conf.policy->network_ports;
		bool reach = a->conf.policy->network_unrestricted;

		for (size_t k = 0; k < ports->n; k++)
			reach |= ports->v[k] == 8090;
		if (!reach) {
			char line[256];

			snprintf(
				line, sizeof(line),
				"[berth-init] WARNING: \"%s\" declares network:host: but not network:connect:8090, so Landlock keeps it from reaching the egress broker; add network:connect:8090 to its berth.yml",
				a->name);
			journal_log(a->name, "policy", line, strlen(line));
		}
	}
}

/* Does @a's policy declare TCP connect to @port (or any port)? */
static bool reaches_port(const App *a, uint16_t port)
{
	const PolicyPorts *ports = &a->conf.policy->network_ports;
	bool reach = a->conf.policy->network_unrestricted;

	for (size_t k = 0; k < ports->n; k++)
		reach |= ports->v[k] == port;
	return reach;
}

/* The display stack serves one app, the one that declares browser:* (the CLI refuses two
 * before boot; this refuses them all, failing closed). */
static void plan_browser(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < n_apps; i++)
		if (apps[i].state != APP_REFUSED &&
		    publish_policy_declares(apps[i].conf.policy, "browser")) {
			apps[i].browser = true;
			browser_app = (int)i;
			n++;
		}
	if (n <= 1)
		return;
	for (unsigned i = 0; i < n_apps; i++)
		if (apps[i].browser) {
			refuse(&apps[i], NULL,
			       "at most one app may declare a browser:* capability when running multiple apps together");
			apps[i].browser = false;
		}
	browser_app = -1;
}

/*
 * The GitHub broker serves one app (SPEC 6.2), as the egress broker does: several apps
 * declaring github: refuses all of them; so does an image without the broker, and an app
 * whose name would collide with the broker's user, directories or policy.
 */
static void plan_github(void)
{
	char names[APPS_MAX * 34] = "", why[sizeof(names) + 160];
	json_t *list = json_array();
	unsigned n = 0;

	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];

		if (a->state == APP_REFUSED || !github_policy_declares(a->conf.policy))
			continue;
		a->github = true;
		github_app = (int)i;
		json_array_append_new(list, json_string(a->name));
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 n++ ? ", " : "", a->name);
	}
	if (n == 0) {
		json_decref(list);
		return;
	}
	why[0] = '\0';
	if (n > 1)
		snprintf(
			why, sizeof(why),
			"at most one app may declare a github:* capability when running multiple apps together — found %u: %s",
			n, names);
	else if (!github_broker_present())
		snprintf(
			why, sizeof(why),
			"this root image has no GitHub API broker (%s), which github: capabilities need: boot an image built with it, or remove them",
			GITHUB_BROKER);
	for (unsigned i = 0; i < n_apps && !why[0]; i++)
		if (streq(apps[i].name, GITHUB_DAEMON) || streq(apps[i].name, GITHUB_USER) ||
		    streq(apps[i].name, "github"))
			snprintf(
				why, sizeof(why),
				"an app named \"%s\" would share the GitHub broker's user and directories (/run/berth/%s); rename that app to run \"%s\" with github: capabilities",
				apps[i].name, apps[i].name, apps[github_app].name);
	if (why[0]) {
		journal_event("github_refused",
			      json_pack("{s:o, s:s}", "apps", list, "reason", why));
		for (unsigned i = 0; i < n_apps; i++)
			if (apps[i].github) {
				refuse(&apps[i], NULL, why);
				apps[i].github = false;
			}
		github_app = -1;
		return;
	}
	json_decref(list);
	if (!reaches_port(&apps[github_app], GITHUB_BROKER_PORT)) {
		char line[256];

		snprintf(
			line, sizeof(line),
			"[berth-init] WARNING: \"%s\" declares github: but not network:connect:8092, so Landlock keeps it from reaching the GitHub broker; add network:connect:8092 to its berth.yml",
			apps[github_app].name);
		journal_log(apps[github_app].name, "policy", line, strlen(line));
	}
}

int apps_setup_identities(void)
{
	_cleanup_free_ char *users = strdup(""), *groups = NULL;
	char members[APPS_MAX * 40] = "";
	int r;

	if (n_apps == 0)
		return 0;
	plan_egress();
	plan_github();
	plan_browser();
	for (unsigned i = 0; i < n_apps; i++) {
		char *next = NULL;

		if (asprintf(&next,
			     "%sberth-%s:x:%u:%u:berth app %s:/nonexistent:/usr/sbin/nologin\n",
			     users, apps[i].name, apps[i].uid, apps[i].uid, apps[i].name) < 0)
			return -ENOMEM;
		free(users);
		users = next;
		snprintf(members + strlen(members), sizeof(members) - strlen(members), "%sberth-%s",
			 i ? "," : "", apps[i].name);
	}
	/* The context bus and the /context index serve every app, in group berth too. */
	for (size_t k = 0; k < 2; k++) {
		bool present = k == 0 ? context_bus_present() : semantic_fs_present();
		const char *user = k == 0 ? CONTEXT_BUS_USER : SEMANTIC_FS_USER;
		unsigned uid = k == 0 ? CONTEXT_BUS_UID : SEMANTIC_FS_UID;
		char *next = NULL;

		if (!present)
			continue;
		if (asprintf(&next, "%s%s:x:%u:%u:berth %s:/nonexistent:/usr/sbin/nologin\n", users,
			     user, uid, uid, k == 0 ? "context bus" : "context index") < 0)
			return -ENOMEM;
		free(users);
		users = next;
		snprintf(members + strlen(members), sizeof(members) - strlen(members), ",%s", user);
	}
	groups = strdup("");
	for (unsigned i = 0; i < n_apps && groups; i++) {
		char *next = NULL;

		if (asprintf(&next, "%sberth-%s:x:%u:\n", groups, apps[i].name, apps[i].uid) < 0)
			return -ENOMEM;
		free(groups);
		groups = next;
	}
	for (size_t k = 0; k < 2 && groups; k++) {
		char *next = NULL;

		if (!(k == 0 ? context_bus_present() : semantic_fs_present()))
			continue;
		if (asprintf(&next, "%s%s:x:%u:\n", groups,
			     k == 0 ? CONTEXT_BUS_USER : SEMANTIC_FS_USER,
			     k == 0 ? CONTEXT_BUS_UID : SEMANTIC_FS_UID) < 0)
			return -ENOMEM;
		free(groups);
		groups = next;
	}
	if (!groups) {
		return -ENOMEM;
	} else {
		char *next = NULL;

		if (asprintf(&next, "%sberth:x:%u:%s\n", groups, BERTH_GROUP_GID, members) < 0)
			return -ENOMEM;
		free(groups);
		groups = next;
	}
	if (egress_app >= 0) {
		/* The broker's own identity, outside group berth. */
		char *u = NULL, *g = NULL;

		if (asprintf(&u,
			     "%s" EGRESS_USER
			     ":x:%u:%u:berth egress broker:/nonexistent:/usr/sbin/nologin\n",
			     users, EGRESS_UID, EGRESS_UID) < 0 ||
		    asprintf(&g, "%s" EGRESS_USER ":x:%u:\n", groups, EGRESS_UID) < 0) {
			free(u);
			return -ENOMEM;
		}
		free(users);
		free(groups);
		users = u;
		groups = g;
	}
	if (github_app >= 0) {
		/* The GitHub broker's, outside group berth too. */
		char *u = NULL, *g = NULL;

		if (asprintf(&u,
			     "%s" GITHUB_USER
			     ":x:%u:%u:berth github api broker:/nonexistent:/usr/sbin/nologin\n",
			     users, GITHUB_UID, GITHUB_UID) < 0 ||
		    asprintf(&g, "%s" GITHUB_USER ":x:%u:\n", groups, GITHUB_UID) < 0) {
			free(u);
			return -ENOMEM;
		}
		free(users);
		free(groups);
		users = u;
		groups = g;
	}
	if (browser_app >= 0) {
		/* The display stack's three, outside group berth (browser.h). */
		static const struct {
			const char *user;
			unsigned uid;
		} stack[] = {{BROWSER_XVFB_USER, BROWSER_XVFB_UID},
			     {BROWSER_VNC_USER, BROWSER_VNC_UID},
			     {BROWSER_NOVNC_USER, BROWSER_NOVNC_UID}};

		for (size_t k = 0; k < ELEMENTSOF(stack); k++) {
			char *u = NULL, *g = NULL;

			if (asprintf(
				    &u,
				    "%s%s:x:%u:%u:berth browser layer:/nonexistent:/usr/sbin/nologin\n",
				    users, stack[k].user, stack[k].uid, stack[k].uid) < 0 ||
			    asprintf(&g, "%s%s:x:%u:\n", groups, stack[k].user, stack[k].uid) < 0) {
				free(u);
				return -ENOMEM;
			}
			free(users);
			free(groups);
			users = u;
			groups = g;
		}
	}
	(void)mkdir("/run/berth", 0755);
	(void)mkdir("/run/berth/etc", 0755);
	r = overlay_file("/etc/passwd", "/run/berth/etc/passwd", users);
	if (r >= 0)
		r = overlay_file("/etc/group", "/run/berth/etc/group", groups);
	if (r < 0)
		return r;

	for (unsigned i = 0; i < n_apps && r >= 0; i++) {
		char path[96];

		snprintf(path, sizeof(path), "/run/berth/%s", apps[i].name);
		r = daemon_make_dir(path, 0711, apps[i].uid, apps[i].uid);
		snprintf(path, sizeof(path), "/tmp/%s", apps[i].name);
		if (r >= 0)
			r = daemon_make_dir(path, 0700, apps[i].uid, apps[i].uid);
	}
	if (r < 0)
		return r;
	{
		GrantApp list[APPS_MAX];

		for (unsigned i = 0; i < n_apps; i++)
			list[i] = (GrantApp){apps[i].name, apps[i].uid,
					     apps[i].state == APP_REFUSED ? NULL
									  : apps[i].conf.policy,
					     apps[i].governs};
		r = grants_setup(list, n_apps, &governor_app);
		if (r < 0)
			return r;
	}
	journal_event("identities",
		      json_pack("{s:i, s:i}", "apps", (int)n_apps, "uidBase", APP_UID_BASE));
	r = precreate_write_paths();
	if (r < 0)
		return r;
	return setup_cgroups();
}

/* --- output ---------------------------------------------------------------------- */

/*
 * agent-init's audit lines come on the report pipe (BERTH_REPORT_FD), which agent-init
 * closes when it execs the app: the app cannot write there, so nothing it prints is taken
 * for a report. Only the events agent-init writes count, the first of each, and the pipe
 * is read for at most REPORT_BYTES_MAX bytes: nothing a peer sends makes PID 1 keep more.
 */
static const char *const report_events[] = {
	"capabilities_dropped",	    "app_uid_applied",	      "capability_policy_applied",
	"namespace_seccomp_filter", "network_seccomp_filter", "capability_enforcement_refused",
};

static void take_agent_init_report(App *a, const char *line, size_t len)
{
	_cleanup_(json_decrefp) json_t *o = NULL;
	const char *event;
	bool known = false;

	a->report_bytes += len + 1;
	if (a->report_bytes > REPORT_BYTES_MAX)
		return;
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	event = json_string_value(json_object_get(o, "event"));
	for (size_t i = 0; event && i < ELEMENTSOF(report_events); i++)
		known |= streq(event, report_events[i]);
	if (!known || !streq(json_string_value(json_object_get(o, "source")) ?: "", "agent-init") ||
	    json_object_get(a->reports, event))
		return;
	json_object_set(a->reports, event, o);
	journal_event("agent_init_report", json_pack("{s:s, s:O}", "app", a->name, "report", o));
}

static void reload_finish(ReloadPhase next, int r, const char *why);

/* The context daemons run once no app is still starting, or after CONTEXT_HOLD_USEC at
 * the most (an app that waits for one of them at its start waits that long, no more). */
static void release_context(const char *after)
{
	if (!context_hold)
		return;
	context_hold = ev_source_free(context_hold);
	journal_event("context_daemons_released",
		      json_pack("{s:s, s:I}", "after", after, "heldMs",
				(json_int_t)(now_ms() - context_hold_since)));
	context_release();
}

static bool apps_started(void)
{
	for (unsigned i = 0; i < n_apps; i++)
		if (apps[i].state == APP_STARTING || apps[i].state == APP_PENDING)
			return false;
	return true;
}

static void release_context_if_started(void)
{
	if (apps_started())
		release_context("apps started");
}

static int on_warm_node_delay_over(EvSource *s, uint64_t usec, void *userdata)
{
	warm_node_timer = ev_source_free(warm_node_timer);
	if (apps_started())
		node_warm_start_background(apps_loop, node_snapshot_blob());
	return 0;
}

/*
 * A VM whose apps reload in place (the plan's "reloads": berth dev) has a warm Node ready
 * for the next start of a Node app. It is started WARM_NODE_DELAY_USEC after no app is
 * starting any more: its start takes the guest's CPU for a second or more under emulation,
 * which the apps' first requests (a client attaching right after the start) should not
 * share, and an edit saved sooner than that reloads the exec'd way.
 */
static void warm_node_for_reloads(void)
{
	bool node = false;

	for (unsigned i = 0; i < n_apps; i++)
		node |= !apps[i].python && apps[i].state != APP_REFUSED;
	/* A container runs Node at the host's speed: nothing to gain there. */
	if (!node || !json_is_true(json_object_get(apps_plan, "reloads")) || !apps_started() ||
	    container_mode())
		return;
	warm_node_timer = ev_source_free(warm_node_timer);
	if (ev_add_time_relative(apps_loop, &warm_node_timer, WARM_NODE_DELAY_USEC,
				 on_warm_node_delay_over, NULL) < 0)
		warm_node_timer = NULL;
}

static int on_context_hold_over(EvSource *s, uint64_t usec, void *userdata)
{
	release_context("hold expired");
	return 0;
}

static void output_line(Output *o, const char *line, size_t len)
{
	App *a = o->app;
	char needle[CAPABILITY_APP_NAME_MAX + 16];

	if (o == &a->rep) {
		take_agent_init_report(a, line, len);
		return;
	}
	journal_log(a->name, o->stream, line, len);
	if (a->state != APP_STARTING || !streq(o->stream, "stderr"))
		return;
	/* The runtime's readiness line: [berth:runtime] "<name>" ready */
	snprintf(needle, sizeof(needle), "\"%s\" ready", a->name);
	if (memmem(line, len, needle, strlen(needle))) {
		a->state = APP_READY;
		journal_event("app_ready",
			      json_pack("{s:s, s:i}", "app", a->name, "pid", (int)a->pid));
		release_context_if_started();
		warm_node_for_reloads();
		if (reloading(a) && reload.phase == RELOAD_STARTING)
			reload_finish(RELOAD_NONE, 0, NULL);
	}
}

static int on_output(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Output *o = userdata;
	ssize_t n = read(fd, o->buf + o->len, sizeof(o->buf) - o->len);
	size_t start = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (o->len > 0)
			output_line(o, o->buf, o->len);
		o->len = 0;
		o->source = ev_source_free(o->source);
		o->fd = safe_close(o->fd);
		return 0;
	}
	o->len += (size_t)n;
	for (size_t i = 0; i < o->len; i++)
		if (o->buf[i] == '\n') {
			output_line(o, o->buf + start, i - start);
			start = i + 1;
		}
	/* A line longer than the buffer is cut, not allowed to grow without bound. */
	if (start == 0 && o->len == sizeof(o->buf)) {
		output_line(o, o->buf, o->len);
		o->len = 0;
		return 0;
	}
	memmove(o->buf, o->buf + start, o->len - start);
	o->len -= start;
	return 0;
}

static int watch_output(App *a, Output *o, const char *stream, int fd)
{
	o->app = a;
	o->stream = stream;
	o->fd = fd;
	(void)fcntl(fd, F_SETFL, O_NONBLOCK);
	return ev_add_io(apps_loop, &o->source, fd, EPOLLIN, on_output, o);
}

/* --- starting ------------------------------------------------------------------------ */

typedef struct Env {
	char *v[ENV_MAX + 1];
	size_t n;
	bool failed;
} Env;

/* Is @name among the first @n variables of @e? */
static bool env_has(const Env *e, const char *name, size_t n)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (strneq(e->v[i], name, len) && e->v[i][len] == '=')
			return true;
	return false;
}

/* Set @name unless it is set. A variable that does not fit marks @e failed: the app is not
 * started then, rather than started without a variable it was promised. */
static void env_set(Env *e, const char *name, const char *value)
{
	if (env_has(e, name, e->n))
		return;
	if (e->n >= ENV_MAX || asprintf(&e->v[e->n], "%s=%s", name, value) < 0) {
		e->failed = true;
		return;
	}
	e->n++;
}

/* @n_own: how many of @e's variables berth-init set itself (PATH, ...), which no secret
 * overrides. */
static void env_add_secrets(Env *e, const json_t *vars, size_t n_own)
{
	const char *name;
	json_t *v;

	json_object_foreach((json_t *)vars, name, v)
		/* The VNC password is x11vnc's (browser.c): the app and its Chromium, which runs
		 * without Chromium's own sandbox, never hold it. */
		if (!env_has(e, name, n_own) && !streq(name, "BERTH_VNC_PASSWORD"))
			env_set(e, name, json_string_value(v));
}

/* The environment, built from scratch: nothing of berth-init's own leaks in. Returns
 * -E2BIG when it does not fit. */
static int build_env(const App *a, Env *e)
{
	char buf[256];
	size_t n_own;

	env_set(e, "PATH", "/usr/local/bin:/usr/bin:/bin");
	snprintf(buf, sizeof(buf), "/tmp/%s", a->name);
	env_set(e, "HOME", buf);
	env_set(e, "TMPDIR", buf);
	snprintf(buf, sizeof(buf), "/tmp/%s/.config", a->name);
	env_set(e, "XDG_CONFIG_HOME", buf);
	snprintf(buf, sizeof(buf), "/tmp/%s/.cache", a->name);
	env_set(e, "XDG_CACHE_HOME", buf);
	env_set(e, "LANG", "C.UTF-8");
	env_set(e, "BERTH_APP_NAME", a->name);
	env_set(e, "BERTH_BOOT_ID", getenv("BERTH_BOOT_ID") ?: "unknown");
	if (container_check_exports()) /* berth test (container.h) */
		env_set(e, "BERTH_CHECK_EXPORTS", "1");
	env_set(e, "BERTH_RPC_SOCKET", a->socket);
	snprintf(buf, sizeof(buf), "%s/berth.yml", a->dir);
	env_set(e, "BERTH_MANIFEST_PATH", buf);
	snprintf(buf, sizeof(buf), a->python ? "%s/src/app.py" : "%s/dist/index.mjs", a->dir);
	env_set(e, "BERTH_APP_ENTRY", buf);
	env_set(e, "BERTH_WORKSPACE_ROOT", "/workspace");
	env_set(e, "BERTH_REQUIRE_ENFORCEMENT", "1");
	env_set(e, "BERTH_CAPABILITY_POLICY", a->conf.policy_path);
	env_set(e, "BERTH_REPORT_FD", "3");
	snprintf(buf, sizeof(buf), "%u", (unsigned)a->uid);
	env_set(e, "BERTH_APP_UID", buf);
	env_set(e, "BERTH_APP_GID", buf);
	/* A terminal app is in group tty too (SPEC 9.1), as the shells it runs expect. */
	if (publish_policy_declares(a->conf.policy, "terminal"))
		snprintf(buf, sizeof(buf), "%u,%u", BERTH_GROUP_GID, TTY_GID);
	else
		snprintf(buf, sizeof(buf), "%u", BERTH_GROUP_GID);
	env_set(e, "BERTH_APP_SUPPLEMENTARY_GIDS", buf);
	if (a->egress)
		env_set(e, "BERTH_EGRESS_PROXY_URL", EGRESS_PROXY_URL);
	/* Every call to a governed app is first put to the governor (fail closed). */
	if (governor_app >= 0 && (int)a->index != governor_app)
		env_set(e, "BERTH_GOVERNANCE_APP", apps[governor_app].name);
	for (const char *const *c = context_app_env(); *c; c++) {
		const char *eq = strchr(*c, '=');

		snprintf(buf, sizeof(buf), "%.*s", (int)(eq - *c), *c);
		env_set(e, buf, eq + 1);
	}
	if (a->browser) {
		snprintf(buf, sizeof(buf), "/run/berth/%s/" BROWSER_XAUTH_NAME, a->name);
		env_set(e, "XAUTHORITY", buf);
	}
	for (const char *const *c = a->browser ? browser_app_env() : NULL; c && *c; c++) {
		const char *eq = strchr(*c, '=');

		snprintf(buf, sizeof(buf), "%.*s", (int)(eq - *c), *c);
		env_set(e, buf, eq + 1);
	}
	for (size_t i = 0; a->github && github_app_env[i]; i++) {
		const char *eq = strchr(github_app_env[i], '=');
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)(eq - github_app_env[i]),
			 github_app_env[i]);
		env_set(e, name, eq + 1);
	}
	n_own = e->n;
	/* An app's own secrets win over the shared ones: add them first. */
	env_add_secrets(e, json_object_get(json_object_get(apps_secrets, "apps"), a->name), n_own);
	env_add_secrets(e, json_object_get(apps_secrets, "shared"), n_own);
	return e->failed ? -E2BIG : 0;
}

/*
 * In the child: join the app's cgroup, start a session, and exec agent-init, which
 * confines the process (identity, capabilities, no_new_privs, Landlock, seccomp) and execs
 * the runtime. Nothing of the app runs before that.
 */
static _noreturn_ void exec_app(const App *a, int out_fd, int err_fd, int report_fd)
{
	Env env = {};
	char runtime[96], procs[160];
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC), cg, r;
	sigset_t none;

	/* berth-init blocks the signals its loop reads through a signalfd, and the mask
	 * survives exec: without this an app (Python's, which does not reset it as Node
	 * does) never sees the SIGTERM of a graceful stop. */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	r = build_env(a, &env);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0)
		_exit(126);
	if (r < 0) {
		dprintf(STDERR_FILENO,
			"berth-init: the environment of \"%s\" does not fit (%d variables at "
			"most); the app was not started: pass it fewer secrets\n",
			a->name, ENV_MAX);
		_exit(126);
	}
	/* The report pipe as fd 3, which agent-init closes before it execs the app. */
	if (report_fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(report_fd, 3) < 0)
		_exit(126);
	if (a->conf.cgroup[0]) {
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", a->conf.cgroup);
		cg = open(procs, O_WRONLY | O_CLOEXEC);
		if ((cg < 0 || write(cg, "0", 1) != 1) && strict_cgroups()) {
			dprintf(STDERR_FILENO, "[berth-init] cannot join %s: %m\n", a->conf.cgroup);
			_exit(126);
		}
	}
	setsid();
	if (chdir(a->dir) < 0)
		_exit(126);
	if (a->python) {
		execle(AGENT_INIT, "agent-init", "/usr/bin/python3", "-m", "berth_sdk.runtime",
		       (char *)NULL, env.v);
	} else {
		const char *blob = node_snapshot_blob();

		snprintf(runtime, sizeof(runtime), "%s/runtime.mjs", a->dir);
		if (blob)
			execle(AGENT_INIT, "agent-init", "/usr/bin/node", "--snapshot-blob", blob,
			       runtime, (char *)NULL, env.v);
		else
			execle(AGENT_INIT, "agent-init", "/usr/bin/node", runtime, (char *)NULL,
			       env.v);
	}
	dprintf(STDERR_FILENO, "[berth-init] cannot exec %s: %m\n", AGENT_INIT);
	_exit(127);
}

static void env_done(Env *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
	e->n = 0;
}

/* Variables Node reads only as it starts (NODE_OPTIONS and its kin): an app given one must
 * have a Node that starts with it. */
static bool env_sets_node_startup(const Env *e)
{
	for (size_t i = 0; i < e->n; i++)
		if (strneq(e->v[i], "NODE_", strlen("NODE_")))
			return true;
	return false;
}

/*
 * An app in a restored VM, from a runtime the template started: a Python app is a fork of
 * the warm Python runtime (zygote.h), a Node app takes the warm Node (node-warm.h), instead
 * of an exec of agent-init. Either is confined by agent-init's code before the app's first
 * line. Returns the pid, or a negative errno when there is no warm runtime for it, and the
 * caller starts the app the exec'd way.
 */
static pid_t start_app_warm(const App *a, int out_fd, int err_fd, int report_fd)
{
	Env env = {};
	int start_fd, r;
	pid_t pid;

	if (a->python ? !zygote_available() : !node_warm_available())
		return -ENOENT;
	r = build_env(a, &env);
	if (!a->python) {
		pid = r < 0 || env_sets_node_startup(&env)
			      ? -ENOENT
			      : node_warm_take(out_fd, err_fd, report_fd, a->dir, a->conf.cgroup,
					       strict_cgroups(), env.v, env.n);
		env_done(&env);
		return pid;
	}
	pid = zygote_fork(out_fd, err_fd, report_fd, &start_fd);
	if (pid < 0) {
		env_done(&env);
		return pid;
	}
	/* From here on the process is the app's: whatever fails, it exits and is reaped as
	 * the app, having run nothing of it. */
	if (r < 0) {
		dprintf(err_fd,
			"berth-init: the environment of \"%s\" does not fit (%d variables at "
			"most); the app was not started: pass it fewer secrets\n",
			a->name, ENV_MAX);
		safe_close(start_fd);
	} else
		(void)zygote_start_app(start_fd, a->dir, a->conf.cgroup, strict_cgroups(), env.v,
				       env.n);
	env_done(&env);
	return pid;
}

static void close_pipes(int p[][2], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		safe_close(p[i][0]);
		safe_close(p[i][1]);
	}
}

static int start_app(App *a)
{
	int p[3][2] = {{-EBADF, -EBADF}, {-EBADF, -EBADF}, {-EBADF, -EBADF}}; /* out, err, rep */
	bool warm;
	pid_t pid;

	for (size_t i = 0; i < ELEMENTSOF(p); i++)
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			int r = -errno;

			close_pipes(p, ELEMENTSOF(p));
			return r;
		}
	pid = start_app_warm(a, p[0][1], p[1][1], p[2][1]);
	warm = pid > 0;
	if (!warm)
		pid = fork();
	if (pid < 0) {
		int r = -errno;

		close_pipes(p, ELEMENTSOF(p));
		return r;
	}
	if (pid == 0)
		exec_app(a, p[0][1], p[1][1], p[2][1]);
	for (size_t i = 0; i < ELEMENTSOF(p); i++)
		safe_close(p[i][1]);
	a->pid = pid;
	a->state = APP_STARTING;
	(void)watch_output(a, &a->out, "stdout", p[0][0]);
	(void)watch_output(a, &a->err, "stderr", p[1][0]);
	(void)watch_output(a, &a->rep, "reports", p[2][0]);
	journal_event("app_started",
		      json_pack("{s:s, s:i, s:i, s:s, s:i, s:s}", "app", a->name, "pid", (int)pid,
				"uid", (int)a->uid, "runtime", a->python ? "python" : "node",
				"port", (int)(MUX_PORT_RPC_BASE + a->index), "start",
				warm				     ? "warm runtime"
				: !a->python && node_snapshot_blob() ? "exec, startup snapshot"
								     : "exec"));
	return 0;
}

static int start_pending(void)
{
	int started = 0;

	for (unsigned i = 0; i < n_apps; i++) {
		int r;

		if (apps[i].state == APP_REFUSED) {
			journal_event("app_refused", json_pack("{s:s, s:s}", "app", apps[i].name,
							       "reason", apps[i].refused));
			continue;
		}
		r = start_app(&apps[i]);

		if (r < 0) {
			apps[i].state = APP_REFUSED;
			journal_event("app_refused", json_pack("{s:s, s:s}", "app", apps[i].name,
							       "reason", strerror(-r)));
			continue;
		}
		started++;
	}
	return started;
}

static void launch_rest(void)
{
	launching = false;
	if (start_pending() == 0 && launch_none_started)
		launch_none_started();
	release_context_if_started();
}

/* A broker is ready, or not: the apps start once every broker has answered. */
static void broker_done(void)
{
	if (--brokers_pending == 0)
		launch_rest();
}

/* The context bus or the index: one that did not start refuses no app (context.h). */
static void on_context_ready(bool ok, const char *why, void *userdata)
{
	if (!ok)
		journal_logf("%s; the apps start without it", why);
	broker_done();
}

/* A broker that serves one app answered: the app it did not start for is refused. */
static void serving_daemon_done(int app, const char *event, bool ok, const char *why)
{
	if (!ok && app >= 0) {
		journal_event(event,
			      json_pack("{s:[s], s:s}", "apps", apps[app].name, "reason", why));
		refuse(&apps[app], NULL, why);
	}
	broker_done();
}

static void on_egress_ready(bool ok, const char *why, void *userdata)
{
	serving_daemon_done(egress_app, "egress_refused", ok, why);
}

static void on_browser_ready(bool ok, const char *why, void *userdata)
{
	serving_daemon_done(browser_app, "browser_refused", ok, why);
}

static void on_github_ready(bool ok, const char *why, void *userdata)
{
	serving_daemon_done(github_app, "github_refused", ok, why);
}

void apps_launch(void (*none_started)(void))
{
	bool egress = egress_app >= 0 && apps[egress_app].state == APP_PENDING;
	bool github = github_app >= 0 && apps[github_app].state == APP_PENDING;

	bool browser =
		browser_app >= 0 && apps[browser_app].state == APP_PENDING && browser_set_up();
	unsigned context = context_daemons();
	bool python = false, node = false;

	launch_none_started = none_started;
	/* A warm runtime no app will take holds memory the apps have better uses for. */
	for (unsigned i = 0; i < n_apps; i++) {
		python |= apps[i].python;
		node |= !apps[i].python;
	}
	if (!python)
		zygote_stop();
	if (!node)
		node_warm_stop();
	/* The daemons first: an app's first request must find its broker listening. */
	if (!egress && !github && !browser && context == 0) {
		launch_rest();
		return;
	}
	launching = true;
	/* Counted before any starts: a start that fails at once answers from here. */
	brokers_pending = egress + github + browser + context + 1;
	if (context > 0) {
		context_hold_since = now_ms();
		if (ev_add_time_relative(apps_loop, &context_hold, CONTEXT_HOLD_USEC,
					 on_context_hold_over, NULL) < 0)
			context_hold = NULL;
		context_start(apps_loop, on_context_ready, NULL);
		/* No timer: nothing would release them later. */
		if (!context_hold)
			context_release();
	}
	if (browser)
		browser_start(apps_loop, on_browser_ready, NULL);
	if (egress)
		egress_start(on_egress_ready, NULL);
	if (github)
		github_start(apps_secrets, on_github_ready, NULL);
	broker_done();
}

/* Does @policy let its app read /context (a read path at, above or beneath it)? */
static bool reads_context(const CapabilityPolicy *policy)
{
	for (size_t i = 0; policy && i < policy->read_paths.n; i++) {
		const char *p = policy->read_paths.v[i];

		if (capability_path_beneath(p, strlen(p), "/context") ||
		    capability_path_beneath("/context", strlen("/context"), p))
			return true;
	}
	return false;
}

void apps_setup_context(bool persistent)
{
	ContextApp list[APPS_MAX];

	for (unsigned i = 0; i < n_apps; i++)
		list[i] =
			(ContextApp){apps[i].name, apps[i].uid, reads_context(apps[i].conf.policy)};
	context_setup(list, n_apps, persistent);
}

int apps_setup_egress(EvLoop *loop, MuxIo *io)
{
	char why[512];
	App *a;

	if (egress_app < 0 || apps[egress_app].state != APP_PENDING)
		return 0;
	a = &apps[egress_app];
	if (egress_setup(loop, io, a->name, a->conf.policy_path, why, sizeof(why)) < 0) {
		journal_event("egress_refused",
			      json_pack("{s:[s], s:s}", "apps", a->name, "reason", why));
		refuse(a, NULL, why);
	}
	return 0;
}

int apps_setup_github(EvLoop *loop, MuxIo *io)
{
	char why[512];
	App *a;

	if (github_app < 0 || apps[github_app].state != APP_PENDING)
		return 0;
	a = &apps[github_app];
	if (github_setup(loop, io, a->name, a->uid, a->conf.policy_path, why, sizeof(why)) < 0) {
		journal_event("github_refused",
			      json_pack("{s:[s], s:s}", "apps", a->name, "reason", why));
		refuse(a, NULL, why);
	}
	return 0;
}

static void reload_child_exited(App *a);

bool apps_child_exited(pid_t pid, int status)
{
	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];
		json_t *ev;

		if (a->pid != pid || a->state == APP_EXITED)
			continue;
		a->state = APP_EXITED;
		a->status = status;
		release_context_if_started();
		ev = json_pack("{s:s, s:i, s:b}", "app", a->name, "pid", (int)pid, "stopped",
			       a->stopped);
		if (WIFEXITED(status))
			json_object_set_new(ev, "exitCode", json_integer(WEXITSTATUS(status)));
		else
			json_object_set_new(ev, "signal", json_integer(WTERMSIG(status)));
		journal_event("app_exited", ev);
		if (reloading(a)) {
			reload_child_exited(a);
			return true;
		}
		for (size_t k = 0; k < a->n_pending; k++)
			safe_close(a->pending[k].fd);
		a->n_pending = 0;
		return true;
	}
	return false;
}

void apps_stop_all(void)
{
	/* The VM is going down: daemons still held, and the next warm Node, are not started
	 * for nothing. */
	context_hold = ev_source_free(context_hold);
	warm_node_timer = ev_source_free(warm_node_timer);
	for (unsigned i = 0; i < n_apps; i++)
		if (apps[i].state == APP_STARTING || apps[i].state == APP_READY) {
			apps[i].stopped = true;
			(void)kill(-apps[i].pid, SIGTERM);
			(void)kill(apps[i].pid, SIGTERM);
		}
}

unsigned apps_count(void)
{
	return n_apps;
}

unsigned apps_running(void)
{
	unsigned n = 0;

	/* Apps waiting for the egress broker count: they are about to start. */
	for (unsigned i = 0; i < n_apps; i++)
		if (apps[i].state == APP_STARTING || apps[i].state == APP_READY ||
		    (launching && apps[i].state == APP_PENDING) || reloading(&apps[i]))
			n++;
	return n;
}

/* --- reload in place ------------------------------------------------------------------ */

static App *app_by_name(const char *name)
{
	for (unsigned i = 0; name && i < n_apps; i++)
		if (streq(apps[i].name, name))
			return &apps[i];
	return NULL;
}

static void reload_finish(ReloadPhase next, int r, const char *why)
{
	apps_reload_done_t done = reload.done;
	void *userdata = reload.userdata;

	reload.phase = next;
	reload.done = NULL;
	if (next == RELOAD_NONE)
		reload.app = NULL;
	if (reload.timer)
		ev_source_set_enabled(reload.timer, EV_OFF);
	if (done)
		done(r, why, userdata);
}

/* Everything left in the app's cgroup (what it started, in any session), then its session. */
static void kill_app_processes(App *a)
{
	char path[160];
	int fd;

	if (a->conf.cgroup[0]) {
		snprintf(path, sizeof(path), "%s/cgroup.kill", a->conf.cgroup);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)!write(fd, "1", 1);
			close(fd);
		}
	}
	if (a->pid > 0)
		(void)kill(-a->pid, SIGKILL);
}

static void close_output(Output *o)
{
	o->source = ev_source_free(o->source);
	o->fd = safe_close(o->fd);
	o->len = 0;
}

static void reload_arm(uint64_t usec);

/* The app is gone: unmount its share, retried while the last of its processes die. */
static void reload_unmount(void)
{
	App *a = reload.app;

	reload.phase = RELOAD_UNMOUNTING;
	kill_app_processes(a);
	if (a->share_mounted && umount2(a->dir, 0) < 0 && errno != EINVAL) {
		if (errno == EBUSY && ++reload.tries < RELOAD_UNMOUNT_TRIES) {
			reload_arm(RELOAD_UNMOUNT_RETRY_USEC);
			return;
		}
		/* Every process of the app was killed: detach what they still hold. */
		journal_logf("app \"%s\": its share is still busy (%s); detaching it", a->name,
			     strerror(errno));
		(void)umount2(a->dir, MNT_DETACH);
	}
	a->share_mounted = false;
	close_output(&a->out);
	close_output(&a->err);
	close_output(&a->rep);
	journal_event("app_reload", json_pack("{s:s, s:s}", "app", a->name, "phase", "stopped"));
	reload_finish(RELOAD_STOPPED, 0, NULL);
}

static int on_reload_timer(EvSource *s, uint64_t usec, void *userdata)
{
	if (reload.phase == RELOAD_STOPPING) {
		/* The grace period is over. */
		journal_logf("app \"%s\" did not stop within %llu s of SIGTERM; killing it",
			     reload.app->name,
			     (unsigned long long)(RELOAD_STOP_GRACE_USEC / USEC_PER_SEC));
		kill_app_processes(reload.app);
	} else if (reload.phase == RELOAD_UNMOUNTING)
		reload_unmount();
	return 0;
}

static void reload_arm(uint64_t usec)
{
	if (!reload.timer)
		(void)ev_add_time_relative(apps_loop, &reload.timer, usec, on_reload_timer, NULL);
	else {
		ev_source_set_time_relative(reload.timer, usec);
		ev_source_set_enabled(reload.timer, EV_ONESHOT);
	}
}

static void reload_child_exited(App *a)
{
	char why[160];

	if (reload.phase == RELOAD_STOPPING) {
		reload_unmount();
		return;
	}
	if (reload.phase != RELOAD_STARTING)
		return;
	/* The new version died before it was ready. The VM stays up, its share mounted, for
	 * the next version: the next app_stop unmounts it. */
	if (WIFEXITED(a->status))
		snprintf(
			why, sizeof(why),
			"the new version exited with status %d before it was ready; its log says why",
			WEXITSTATUS(a->status));
	else
		snprintf(
			why, sizeof(why),
			"the new version was killed by signal %d before it was ready; its log says why",
			WTERMSIG(a->status));
	reload_finish(RELOAD_STOPPED, -EIO, why);
}

int apps_reload_stop(const char *name, apps_reload_done_t done, void *userdata, char *err,
		     size_t errlen)
{
	App *a = app_by_name(name);

	if (!a) {
		snprintf(err, errlen, "no app named \"%s\" in this VM", name ?: "");
		return -ENOENT;
	}
	if (a->state == APP_REFUSED || a->state == APP_PENDING || launching) {
		snprintf(err, errlen, "app \"%s\" is %s; only a started app is reloaded in place",
			 a->name, launching ? "waiting for its broker" : app_state_names[a->state]);
		return -EBUSY;
	}
	if (reload.phase != RELOAD_NONE && !(reload.app == a && reload.phase == RELOAD_STOPPED)) {
		snprintf(err, errlen, "app \"%s\" is being reloaded already", reload.app->name);
		return -EBUSY;
	}
	reload.app = a;
	reload.done = done;
	reload.userdata = userdata;
	reload.tries = 0;
	journal_event("app_reload", json_pack("{s:s, s:s}", "app", a->name, "phase", "stopping"));
	if (a->state == APP_STARTING || a->state == APP_READY) {
		reload.phase = RELOAD_STOPPING;
		a->stopped = true;
		(void)kill(-a->pid, SIGTERM);
		(void)kill(a->pid, SIGTERM);
		reload_arm(RELOAD_STOP_GRACE_USEC);
		return 0;
	}
	/* It had exited already (or a failed new version did): only the share is left. */
	reload_unmount();
	return 0;
}

int apps_reload_start(const char *name, const char *policy_sha256, const char *tree_sha256,
		      apps_reload_done_t done, void *userdata, char *err, size_t errlen)
{
	App *a = app_by_name(name);
	char serial[16];
	int r;

	if (!a || reload.app != a || reload.phase != RELOAD_STOPPED) {
		snprintf(err, errlen, "app \"%s\" is not stopped for a reload: send app_stop first",
			 name ?: "");
		return -EBUSY;
	}
	/* The host recompiled the policy from the new berth.yml: an app keeps the confinement
	 * it was set up with (cgroup, write paths, brokers), so only the same policy reloads
	 * in place. Anything else needs a new VM. */
	if (!policy_sha256 || !streq(policy_sha256, a->conf.policy_sha256)) {
		snprintf(
			err, errlen,
			"the new version's policy (sha256 %.12s) is not the one app \"%s\" runs under (%.12s): restart the VM to apply it",
			policy_sha256 ?: "none", a->name, a->conf.policy_sha256);
		return -EPERM;
	}
	snprintf(serial, sizeof(serial), "app%u", a->index);
	r = disk_flush_cache(serial, err, errlen);
	if (r >= 0)
		r = mount_share(a);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "cannot mount the new share: %s", strerror(-r));
		return r;
	}
	a->python = share_is_python(a);
	json_object_clear(a->reports);
	a->report_bytes = 0;
	a->stopped = false;
	a->status = 0;
	a->reloads++;
	journal_event("app_reload",
		      json_pack("{s:s, s:s, s:s, s:i}", "app", a->name, "phase", "share",
				"treeSha256", tree_sha256 ?: "", "reloads", (int)a->reloads));
	r = start_app(a);
	if (r < 0) {
		a->state = APP_EXITED;
		snprintf(err, errlen, "cannot start the new version: %s", strerror(-r));
		return r;
	}
	reload.done = done;
	reload.userdata = userdata;
	reload.phase = RELOAD_STARTING;
	return 0;
}

int apps_exit_code(void)
{
	for (unsigned i = 0; i < n_apps; i++) {
		const App *a = &apps[i];

		if (a->state == APP_REFUSED)
			return 1;
		if (a->state == APP_EXITED && !a->stopped &&
		    !(WIFEXITED(a->status) && WEXITSTATUS(a->status) == 0))
			return 1;
	}
	return 0;
}

json_t *apps_status(void)
{
	json_t *arr = json_array();

	for (unsigned i = 0; i < n_apps; i++) {
		const App *a = &apps[i];
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s}", "name", a->name, "state",
				      app_state_names[a->state], "pid", (int)a->pid, "uid",
				      (int)a->uid, "port", (int)(MUX_PORT_RPC_BASE + a->index),
				      "runtime", a->python ? "python" : "node");

		if (a->conf.cgroup[0] && a->conf.cgroup_limits) {
			char summary[256] = "";
			const char *k;
			json_t *v;

			json_object_foreach(a->conf.cgroup_limits, k, v)
				snprintf(summary + strlen(summary),
					 sizeof(summary) - strlen(summary), "%s%s=%s",
					 summary[0] ? " " : "", k, json_string_value(v));
			json_object_set_new(o, "cgroup",
					    json_pack("{s:s, s:O, s:s}", "path",
						      a->conf.cgroup + strlen(CGROUP_ROOT),
						      "limits", a->conf.cgroup_limits, "summary",
						      summary));
		}
		if (a->conf.policy)
			json_object_set_new(o, "policy",
					    json_pack("{s:s, s:s}", "path", a->conf.policy_path,
						      "sha256", a->conf.policy_sha256));
		if (a->reloads > 0 || reloading(a))
			json_object_set_new(o, "reloads", json_integer(a->reloads));
		if (reloading(a))
			json_object_set_new(o, "reloading", json_true());
		if (a->state == APP_REFUSED)
			json_object_set_new(o, "reason", json_string(a->refused));
		if (a->state == APP_EXITED)
			json_object_set_new(o, "exit",
					    json_integer(WIFEXITED(a->status)
								 ? WEXITSTATUS(a->status)
								 : 128 + WTERMSIG(a->status)));
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *apps_summary(void)
{
	return apps_status();
}

/* --- RPC relays ------------------------------------------------------------------- */

static int connect_app(const App *a)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	/* Non-blocking: an app that listens but never accepts fills its backlog, and a
	 * blocking connect would then stall PID 1's only loop. EAGAIN holds the call as
	 * pending instead, retried until its deadline. */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->socket);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	/* The socket lives in a directory the app owns, so the app could put any socket (or a
	 * link to one) there: only a peer running as the app itself is the app. */
	{
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    cred.uid != a->uid) {
			journal_logf(
				"app \"%s\": %s is not served by the app (peer uid %d); refusing "
				"the connection",
				a->name, a->socket, len == sizeof(cred) ? (int)cred.uid : -1);
			close(fd);
			return -EPERM;
		}
	}
	return fd;
}

/* Connections that arrived before their app listened: retry until it does, up to 60 s. */
static int on_pending_timer(EvSource *s, uint64_t usec, void *userdata)
{
	bool any = false;

	for (unsigned i = 0; i < n_apps; i++) {
		App *a = &apps[i];
		size_t keep = 0;

		for (size_t k = 0; k < a->n_pending; k++) {
			PendingRpc *p = &a->pending[k];
			int fd = a->state == APP_READY ? connect_app(a) : -EAGAIN;

			if (fd >= 0)
				(void)fd_splice_new(apps_loop, p->fd, fd, NULL, NULL);
			else if (fd == -EPERM || usec > p->deadline ||
				 (a->state == APP_EXITED && !reloading(a)))
				safe_close(p->fd);
			else
				a->pending[keep++] = *p;
		}
		a->n_pending = keep;
		any |= keep > 0;
	}
	if (any) {
		ev_source_set_time_relative(s, 50 * USEC_PER_MSEC);
		ev_source_set_enabled(s, EV_ONESHOT);
	}
	return 0;
}

static int rpc_accept(MuxIo *io, uint32_t port, void *userdata)
{
	App *a = userdata;
	int fd, sp[2];

	/* A call during a reload in place waits for the new version. */
	if ((a->state == APP_EXITED && !reloading(a)) || a->state == APP_REFUSED)
		return -ECONNREFUSED;
	if (a->state == APP_READY) {
		fd = connect_app(a);
		if (fd >= 0)
			return fd;
	}
	/* Not listening yet: hold the host's stream on a socketpair until it does. */
	if (a->n_pending >= PENDING_RPC_MAX)
		return -EMFILE;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	a->pending[a->n_pending++] = (PendingRpc){sp[0], ev_time_now() + RPC_WAIT_USEC};
	if (!pending_timer)
		(void)ev_add_time_relative(apps_loop, &pending_timer, 50 * USEC_PER_MSEC,
					   on_pending_timer, NULL);
	else {
		ev_source_set_time_relative(pending_timer, 50 * USEC_PER_MSEC);
		ev_source_set_enabled(pending_timer, EV_ONESHOT);
	}
	return sp[1];
}

/* The display stack for the one app that declares browser:* (browser.h); its VNC password is
 * that app's BERTH_VNC_PASSWORD on the secrets disk. */
void apps_setup_browser(void)
{
	const json_t *own;
	char why[512];
	App *a;

	if (browser_app < 0 || apps[browser_app].state != APP_PENDING)
		return;
	a = &apps[browser_app];
	own = json_object_get(json_object_get(apps_secrets, "apps"), a->name);
	if (browser_setup(a->name, a->uid,
			  json_string_value(json_object_get(own, "BERTH_VNC_PASSWORD")), why,
			  sizeof(why)) < 0) {
		journal_event("browser_refused",
			      json_pack("{s:[s], s:s}", "apps", a->name, "reason", why));
		refuse(a, NULL, why);
	}
}

int apps_setup_publish(MuxIo *io)
{
	static PublishRelayApp list[APPS_MAX];

	for (unsigned i = 0; i < n_apps; i++)
		list[i] = (PublishRelayApp){
			.name = apps[i].name,
			.uid = apps[i].uid,
			.policy = apps[i].state == APP_REFUSED ? NULL : apps[i].conf.policy,
		};
	return publish_relay_setup(io, json_object_get(apps_plan, "publish"), list, n_apps);
}

static int on_rpc_dir_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	App *a = userdata;
	int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), app;

	if (client < 0)
		return 0;
	app = rpc_accept(NULL, 0, a);
	if (app < 0 || fd_splice_new(apps_loop, client, app, NULL, NULL) < 0) {
		close(client);
		if (app >= 0)
			close(app);
	}
	return 0;
}

int apps_listen_rpc_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	if (container_uid_is_berths(st.st_uid)) {
		journal_logf("%s is owned by uid %u, an app's or a daemon's uid in the container: "
			     "its sockets would be that app's to call; bind a directory another "
			     "user owns",
			     dir, (unsigned)st.st_uid);
		return -EPERM;
	}
	for (unsigned i = 0; i < n_apps; i++) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		int fd, r;

		if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", dir,
				     apps[i].name) >= sizeof(sa.sun_path))
			return -ENAMETOOLONG;
		(void)unlink(sa.sun_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		/* The directory's owner calls the apps; no app's uid can reach another's RPC. */
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    chown(sa.sun_path, st.st_uid, st.st_gid) < 0 || chmod(sa.sun_path, 0600) < 0 ||
		    listen(fd, 64) < 0) {
			r = -errno;
			journal_logf("cannot listen on %s: %s", sa.sun_path, strerror(-r));
			close(fd);
			return r;
		}
		r = ev_add_io(apps_loop, NULL, fd, EPOLLIN, on_rpc_dir_accept, &apps[i]);
		if (r < 0) {
			close(fd);
			return r;
		}
		journal_logf("app \"%s\": RPC on %s", apps[i].name, sa.sun_path);
	}
	return 0;
}

int apps_listen_rpc(MuxIo *io)
{
	for (unsigned i = 0; i < n_apps; i++) {
		int r = mux_io_listen(io, MUX_PORT_RPC_BASE + i, rpc_accept, &apps[i]);

		if (r < 0)
			return r;
	}
	return 0;
}
