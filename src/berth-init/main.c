/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-init: PID 1 of the guest.
 *
 * Init phase (may fail: it then reports why on the control port and powers off): mounts,
 * the multiplexer on the host channel, the state disk, the boot disk, the app shares.
 * Loop phase (must never die): the event loop reaps every child and serves the host.
 * Finish phase: stop what runs, sync, unmount, report power_off and power off.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "apps.h"
#include "boot-disk.h"
#include "browser.h"
#include "confine.h"
#include "container.h"
#include "control.h"
#include "digest.h"
#include "disks.h"
#include "egress.h"
#include "evloop.h"
#include "fileio.h"
#include "context.h"
#include "github.h"
#include "journal.h"
#include "kernel-keys.h"
#include "macros.h"
#include "missing-landlock.h"
#include "mux-io.h"
#include "random-util.h"
#include "resume.h"
#include "secrets.h"
#include "node-snapshot.h"
#include "node-warm.h"
#include "zygote.h"

#define MUX_PORT_NAME "berth.mux"

typedef struct Init {
	EvLoop *loop;
	MuxIo *mux;
	json_t *plan;	 /* the apps and their policies, from the boot disk */
	json_t *secrets; /* values: never logged, never in an event */
	bool shutting_down;
	bool state_mounted;
	int exit_code;
	const char *power_off_reason;
} Init;

static Init init;

typedef struct Mount {
	const char *source, *target, *type;
	unsigned long flags;
	const char *data;
	bool optional;
} Mount;

static const Mount base_mounts[] = {
	{"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, false},
	{"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, false},
	{"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,gid=5",
	 true},
	{"tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m", true},
	{"securityfs", "/sys/kernel/security", "securityfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
	 true},
	{"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m", false},
	{"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m", false},
	{"tmpfs", "/app", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", false},
};

static _noreturn_ void power_off_now(void)
{
	/* A container ends when its PID 1 does, with the exit code Docker reports. */
	if (container_mode()) {
		sync();
		_exit(init.exit_code);
	}
	/* The console is the log of last resort (berth vm logs reads it once the VM is
	 * gone): let the serial line send its last lines before the machine stops. */
	(void)tcdrain(STDOUT_FILENO);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static int mount_base(char *cgroup_opts, size_t size)
{
	if (container_mode()) { /* Docker mounted them (container.h) */
		snprintf(cgroup_opts, size, "container");
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(base_mounts); i++) {
		const Mount *m = &base_mounts[i];

		(void)mkdir(m->target, 0755);
		if (mount(m->source, m->target, m->type, m->flags, m->data) < 0 && errno != EBUSY &&
		    !m->optional) {
			journal_logf("cannot mount %s on %s: %s", m->type, m->target,
				     strerror(errno));
			return -errno;
		}
	}
	/* cgroup2 with delegation boundaries; favordynmods is newer, fall back without it. */
	snprintf(cgroup_opts, size, "nsdelegate,favordynmods");
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  cgroup_opts) < 0) {
		snprintf(cgroup_opts, size, "nsdelegate");
		if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  cgroup_opts) < 0)
			snprintf(cgroup_opts, size, "unavailable");
	}
	return 0;
}

/* The loopback device: the VM has no other network device, but apps talk to each other
 * and to in-guest daemons on 127.0.0.1, and the kernel leaves lo down. */
static void loopback_up(void)
{
	struct ifreq ifr = {};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			journal_logf("cannot bring up lo: %s", strerror(errno));
	}
	close(fd);
}

static int find_mux_port(char *ret, size_t size)
{
	for (int attempt = 0; attempt < 200; attempt++) {
		DIR *d = opendir("/sys/class/virtio-ports");
		struct dirent *de;

		while (d && (de = readdir(d))) {
			_cleanup_free_ char *path = NULL, *name = NULL;

			if (de->d_name[0] == '.' ||
			    asprintf(&path, "/sys/class/virtio-ports/%s/name", de->d_name) < 0)
				continue;
			if (read_full_file(path, 256, &name, NULL) < 0)
				continue;
			name[strcspn(name, "\n")] = '\0';
			if (streq(name, MUX_PORT_NAME)) {
				snprintf(ret, size, "/dev/%.255s", de->d_name);
				closedir(d);
				return 0;
			}
		}
		if (d)
			closedir(d);
		usleep(10 * 1000);
	}
	return -ENOENT;
}

static void begin_shutdown(const char *reason);

static void on_mux_state(MuxIo *io, MuxIoState state, int error, void *userdata)
{
	static const char *const names[] = {"idle",  "handshake",   "ready",
					    "reset", "host_absent", "disconnected"};

	if (state == MUX_IO_READY || state == MUX_IO_RESET)
		journal_logf("host channel: %s (epoch %u)", names[state],
			     mux_get_epoch(mux_io_get_mux(io)));
	/* In a container, a channel berth-vmm closed does not come back, and nobody else
	 * would stop the apps. */
	if (container_mode() && state == MUX_IO_DISCONNECTED)
		begin_shutdown("the host closed the channel");
}

static int start_mux(void)
{
	MuxIoConfig cfg = {.mux.role = MUX_ROLE_GUEST,
			   .tolerate_eof = !container_mode(),
			   .on_state = on_mux_state};
	char dev[320];
	int r, fd;

	if (container_standalone()) /* no berth-vmm, no channel: container.h */
		return 0;
	if (container_mode()) {
		r = mux_io_new(init.loop, &cfg, &init.mux);
		if (r < 0)
			return r;
		fd = container_channel_accept();
		return fd < 0 ? fd : mux_io_set_transport(init.mux, fd);
	}
	r = find_mux_port(dev, sizeof(dev));
	if (r < 0) {
		DIR *d = opendir("/sys/class/virtio-ports");
		struct dirent *de;

		while (d && (de = readdir(d)))
			journal_logf("virtio port entry: %s", de->d_name);
		if (d)
			closedir(d);
		else
			journal_logf("no /sys/class/virtio-ports: %s", strerror(errno));
		journal_logf("no virtio port named %s: the host channel is missing", MUX_PORT_NAME);
		return r;
	}
	r = mux_io_new(init.loop, &cfg, &init.mux);
	if (r < 0)
		return r;
	/* One fd for both directions: a port can be opened only once. */
	fd = open(dev, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return mux_io_set_transport(init.mux, fd);
}

static void status_reply(json_t *reply, void *userdata)
{
	json_t *egress = egress_status(), *github = github_status(), *context = context_status();
	json_t *browser = browser_status();

	json_object_set_new(reply, "apps", apps_status());
	json_object_set_new(reply, "shuttingDown", json_boolean(init.shutting_down));
	json_object_set_new(reply, "uptimeMs", json_integer(journal_uptime_ms()));
	if (egress)
		json_object_set_new(reply, "egress", egress);
	if (github)
		json_object_set_new(reply, "github", github);
	if (context)
		json_object_set_new(reply, "context", context);
	if (browser)
		json_object_set_new(reply, "browser", browser);
}

/* The host's resume request, in a template boot's wait (resume.h). */
static int resume_requested(const json_t *req, char *err, size_t errlen, void *userdata)
{
	long long template_ms = journal_uptime_ms();
	int r = resume_apply(req, err, errlen);

	if (r < 0) {
		journal_logf("resume refused: %s", err);
		return r;
	}
	if (r > 0) /* a repeat, after a session reset: resumed already */
		return 0;
	/* What the journal holds so far is the template's boot, not this VM's. */
	journal_restart();
	/* Reseeded: the secrets the kernel draws once are this VM's, drawn (and the kernel's
	 * text patched) by a child before anything else may use TCP or UDP (see init_phase),
	 * while berth-init goes on and the warm Node rehearses. */
	kernel_keys_draw_once_start();
	node_warm_rehearse();
	r = resume_disks_ready(err, errlen);
	if (r < 0) {
		journal_logf("resume refused: %s", err);
		return r;
	}
	journal_event("restored", json_pack("{s:I}", "templateUptimeMs", (json_int_t)template_ms));
	ev_exit(init.loop, 0);
	return 0;
}

/*
 * A template boot: nothing of an app, nothing from a disk but the root image. Say so on
 * the console, where berth-vmm waits for it to save the VM, and wait for the host's
 * resume request, which every VM restored from the snapshot gets.
 */
static int template_phase(void)
{
	char why[256];

	/* Node's startup snapshot and the warm Python runtime, made here once for every VM
	 * restored from this one; the two side by side, one per vCPU. Then the warm Node. */
	bool node = node_snapshot_start(why, sizeof(why)) >= 0;

	if (!node)
		journal_logf("no Node startup snapshot: %s; Node apps start without it", why);
	if (zygote_start(why, sizeof(why)) < 0)
		journal_logf("no warm Python runtime: %s; Python apps start cold", why);
	if (node && node_snapshot_wait(why, sizeof(why)) < 0) {
		journal_logf("no Node startup snapshot: %s; Node apps start without it", why);
		node = false;
	}
	/* The warm Node starts from that snapshot, once the zygote's imports are done. */
	if (node && node_warm_start(node_snapshot_blob(), why, sizeof(why)) < 0)
		journal_logf("no warm Node runtime: %s; Node apps start the exec'd way", why);
	/* Once here, not in every restored VM's first policy hash (65 ms under emulation). */
	sha256_preload();
	/* The cgroup tree every VM makes (the apps' cgroups come after the resume). Its first
	 * memory cgroups switch on two of the kernel's static keys, which patches its text:
	 * done here, no restored VM patches it for them (docs/warm-start.md). */
	int cg = confine_cgroups_setup();

	if (cg < 0)
		journal_logf("no cgroup tree in the template (%s); each restored VM makes it",
			     strerror(-cg));
	/* The same for the keys an app could switch (kernel-keys.h): a template without them
	 * is not saved, and VMs boot cold. */
	if (kernel_keys_hold() < 0)
		return -EIO;
	resume_template_shed_memory();
	journal_event("template_ready", NULL);
	dprintf(STDOUT_FILENO, "%s\n", VM_TEMPLATE_READY);
	while (!resume_done()) {
		int r = ev_loop(init.loop);

		if (init.shutting_down)
			return -ECANCELED;
		if (r < 0 && !resume_done())
			journal_logf("event loop failed (%s) while waiting to be resumed",
				     strerror(-r));
	}
	return 0;
}

/* A step of a reload in place is over (apps.h): answer the host. */
static void reload_step_done(int r, const char *why, void *userdata)
{
	const char *op = userdata;

	if (r < 0)
		journal_logf("%s: %s", op, why ? why : strerror(-r));
	control_reply_deferred(r < 0 ? json_pack("{s:s, s:b, s:s}", "op", op, "ok", 0, "error",
						 why ? why : strerror(-r))
				     : json_pack("{s:s, s:b}", "op", op, "ok", 1));
}

static int reload_requested(const char *op, const json_t *req, char *err, size_t errlen,
			    void *userdata)
{
	const char *app = json_string_value(json_object_get(req, "app"));

	if (init.shutting_down) {
		snprintf(err, errlen, "the VM is shutting down");
		return -ESHUTDOWN;
	}
	if (streq(op, "app_stop"))
		return apps_reload_stop(app, reload_step_done, (void *)"app_stop", err, errlen);
	return apps_reload_start(app, json_string_value(json_object_get(req, "policySha256")),
				 json_string_value(json_object_get(req, "treeSha256")),
				 reload_step_done, (void *)"app_start", err, errlen);
}

static void no_app_started(void)
{
	begin_shutdown("no app could start");
}

static void shutdown_requested(void *userdata)
{
	begin_shutdown("host request");
}

static void reap_children(void)
{
	pid_t pid;
	int status;

	/* PID 1 inherits every orphan: reap them all, known or not. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (!apps_child_exited(pid, status) && !egress_child_exited(pid, status) &&
		    !github_child_exited(pid, status) && !browser_child_exited(pid, status) &&
		    !zygote_child_exited(pid, status) && !node_warm_child_exited(pid, status) &&
		    !kernel_keys_child_exited(pid, status))
			(void)context_child_exited(pid, status);
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	if (si->ssi_signo == SIGCHLD) {
		reap_children();
		if (apps_count() > 0 && apps_running() == 0)
			begin_shutdown("no app left");
		return 0;
	}
	begin_shutdown(si->ssi_signo == SIGPWR ? "SIGPWR" : "signal");
	return 0;
}

static int setup_state_disk(void)
{
	char dev[64];
	int formatted, r;

	if (container_mode()) {
		/* Docker's volumes, or this container's own layer for one run. */
		bool persistent = container_is_mount("/state") && container_is_mount("/workspace");

		init.state_mounted = persistent;
		journal_event("boot_phase",
			      json_pack("{s:s, s:b, s:s, s:i}", "phase", "state", "persistent",
					persistent, "device", "volume", "bootCount",
					persistent ? state_disk_count_boot() : 0));
		return 0;
	}
	if (disk_find_by_serial("state", dev, sizeof(dev)) < 0) {
		/* No state disk: /workspace lives in memory for this boot only. */
		if (mount("tmpfs", "/workspace", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0 ||
		    mount("tmpfs", "/context", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
			return -errno;
		journal_event("boot_phase",
			      json_pack("{s:s, s:b}", "phase", "state", "persistent", 0));
		return 0;
	}
	r = state_disk_mount(dev, &formatted);
	if (r < 0) {
		journal_logf("state disk %s: %s", dev, strerror(-r));
		return r;
	}
	init.state_mounted = true;
	journal_event("boot_phase", json_pack("{s:s, s:b, s:s, s:b, s:i}", "phase", "state",
					      "persistent", 1, "device", dev, "formatted",
					      formatted, "bootCount", state_disk_count_boot()));
	return 0;
}

/* The browser layer, when it is attached, over the root image before anything runs from it. */
static int setup_layer(void)
{
	int r = browser_layer_mount();

	return r < 0 ? r : 0;
}

/* The boot disk: which apps, their compiled policies, and the secrets (boot-disk.h). No
 * boot disk: a VM without apps. */
static int setup_boot_disk(void)
{
	char dev[64], err[256];
	int r;

	if (container_standalone()) {
		/* The image's plan holds no secret, and a restarted container must find it
		 * again: read a copy, which is removed once read like any boot disk. */
		_cleanup_free_ char *plan = NULL;
		size_t len;

		r = read_full_file(CONTAINER_IMAGE_BOOT_FILE, BOOT_DISK_SIZE_MAX, &plan, &len);
		if (r < 0) {
			journal_logf("this image has no boot plan %s (%s): build it with berth "
				     "deploy",
				     CONTAINER_IMAGE_BOOT_FILE, strerror(-r));
			return r;
		}
		snprintf(dev, sizeof(dev), "/run/berth-boot.img");
		r = write_file_atomic(dev, plan, len, 0600);
		if (r < 0)
			return r;
	} else if (container_mode()) {
		if (access(CONTAINER_BOOT_FILE, F_OK) < 0)
			return 0;
		snprintf(dev, sizeof(dev), "%s", CONTAINER_BOOT_FILE);
	} else if (disk_find_by_serial("boot", dev, sizeof(dev)) < 0)
		return 0;
	r = boot_read_device(dev, &init.plan, &init.secrets, err, sizeof(err));
	if (r < 0) {
		journal_logf("%s", err);
		return r;
	}
	if (init.secrets)
		journal_event("secrets_loaded",
			      json_pack("{s:o}", "names", secrets_names(init.secrets)));
	return 0;
}

static int setup_apps(void)
{
	int r = apps_prepare(init.loop, init.plan, init.secrets);

	if (r >= 0)
		r = apps_setup_identities();
	if (r >= 0)
		/* In a container /context is a volume of its own, and its index is kept in
		 * memory: keeping it on the volume would take a bind mount. */
		apps_setup_context(init.state_mounted && !container_mode());
	if (r >= 0)
		apps_setup_browser();
	/* A deployed image's RPC is a socket per app, and nothing else leaves it: no egress
	 * dialer, no GitHub broker, no published port (berth deploy refuses such apps). */
	if (r >= 0 && container_standalone())
		return apps_listen_rpc_dir(CONTAINER_RPC_DIR);
	if (r >= 0)
		r = apps_listen_rpc(init.mux);
	if (r >= 0)
		r = apps_setup_egress(init.loop, init.mux);
	if (r >= 0)
		r = apps_setup_github(init.loop, init.mux);
	if (r >= 0)
		r = apps_setup_publish(init.mux);
	return r;
}

static void boot_start(const char *cgroup_opts)
{
	_cleanup_free_ char *lsm = NULL, *cmdline = NULL;
	size_t cmdline_len = 0;
	struct utsname u;

	uname(&u);
	if (read_full_file("/sys/kernel/security/lsm", 4096, &lsm, NULL) < 0)
		lsm = NULL;
	(void)read_full_file("/proc/cmdline", 4096, &cmdline, &cmdline_len);
	journal_event("boot_start",
		      json_pack("{s:i, s:s, s:I, s:s, s:s, s:i}", "pid", (int)getpid(), "kernel",
				u.release, "cmdlineBytes", (json_int_t)cmdline_len, "cgroup2",
				cgroup_opts, "lsm", lsm ? strtok(lsm, "\n") : "", "landlockAbi",
				landlock_abi_version()));
}

/* A container's confinement is checked, not trusted (container.h). */
static int check_container(void)
{
	char why[512];
	int r;

	if (!container_mode())
		return 0;
	r = container_check_confined(why, sizeof(why));
	if (r < 0)
		journal_logf("%s", why);
	return r;
}

/* Nothing uses TCP or UDP before a restored VM's kernel has drawn its secrets. */
static int kernel_secrets_drawn(void)
{
	kernel_keys_draw_once_wait();
	return 0;
}

static int init_phase(void)
{
	static const struct {
		const char *phase;
		int (*run)(void);
	} steps[] = {
		{"container", check_container},
		{"state", setup_state_disk},
		{"layer", setup_layer},
		{"boot-disk", setup_boot_disk},
		{"kernel secrets", kernel_secrets_drawn},
		{"apps", setup_apps},
	};

	for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
		int r = steps[i].run();

		if (r < 0) {
			journal_event("boot_failed",
				      json_pack("{s:s, s:s}", "phase", steps[i].phase, "reason",
						strerror(-r)));
			return r;
		}
	}
	return 0;
}

/* Let queued events reach the host before the machine goes away: run the loop until it has
 * been idle for a while (bytes also sit in socketpairs between a connection and its bridge),
 * bounded, never blocking on a host that does not read. */
static void flush_to_host(uint64_t max_usec)
{
	uint64_t deadline = ev_time_now() + max_usec;
	unsigned idle = 0;

	while (ev_time_now() < deadline && idle < 3) {
		const uint8_t *buf;
		Mux *m = init.mux ? mux_io_get_mux(init.mux) : NULL;
		int r;

		if (!m || mux_io_get_state(init.mux) != MUX_IO_READY)
			break;
		r = ev_run(init.loop, 20 * USEC_PER_MSEC);
		if (r > 0 || control_pending() > 0 || mux_output(m, &buf) > 0)
			idle = 0;
		else
			idle++;
	}
}

static void unmount_all(unsigned *ret_failed)
{
	static const char *const targets[] = {"/app", "/workspace", "/context", "/state"};

	*ret_failed = 0;
	for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
		if (umount2(targets[i], 0) == 0 || errno == EINVAL)
			continue;
		/* Lazy fallback: the data is synced either way; count what refused. */
		(void)umount2(targets[i], MNT_DETACH);
		(*ret_failed)++;
	}
}

static _noreturn_ void finish_phase(void)
{
	const char *grace_env = getenv("BERTH_VM_STOP_GRACE_MS");
	uint64_t grace = (grace_env ? strtoull(grace_env, NULL, 10) : 3000) * USEC_PER_MSEC;
	uint64_t deadline = ev_time_now() + MIN(grace, 60 * USEC_PER_SEC);
	unsigned unmount_failed;
	int killed = 0;

	/* SIGTERM to every app's session, then the grace period, reaping as they go. */
	apps_stop_all();
	while (apps_running() > 0 && ev_time_now() < deadline) {
		(void)ev_run(init.loop, 50 * USEC_PER_MSEC);
		reap_children();
	}
	if (kill(-1, SIGKILL) == 0)
		killed = 1;
	usleep(20 * 1000);
	reap_children();
	if (init.exit_code == 0)
		init.exit_code = apps_exit_code();
	sync();
	if (container_mode())
		unmount_failed = 0; /* Docker unmounts what it mounted */
	else
		unmount_all(&unmount_failed);
	journal_event("power_off",
		      json_pack("{s:s, s:i, s:o, s:b, s:i}", "reason",
				init.power_off_reason ? init.power_off_reason : "", "exitCode",
				init.exit_code, "apps", apps_summary(), "killed", killed,
				"unmountFailed", (int)unmount_failed));
	flush_to_host(2 * USEC_PER_SEC);
	power_off_now();
}

static void begin_shutdown(const char *reason)
{
	if (init.shutting_down)
		return;
	init.shutting_down = true;
	init.power_off_reason = reason;
	journal_event("shutting_down", json_pack("{s:s}", "reason", reason));
	ev_exit(init.loop, 0);
}

int main(void)
{
	static const int signals[] = {SIGCHLD, SIGTERM, SIGINT, SIGPWR};
	char cgroup_opts[64];
	ControlHandlers handlers = {
		.status = status_reply,
		.shutdown = shutdown_requested,
		.resume = resume_requested,
		.reload = reload_requested,
	};
	int r;

	if (getpid() != 1) {
		dprintf(STDERR_FILENO, "berth-init: must run as PID 1 in the guest\n");
		return 1;
	}
	umask(022);
	/* A deployed image's container is started by anyone's docker run: it makes its own. */
	if (container_standalone() && !getenv("BERTH_BOOT_ID")) {
		char id[RANDOM_UUID_LEN + 1];

		random_uuid(id);
		(void)setenv("BERTH_BOOT_ID", id, 1);
	}
	if (journal_init() < 0 || mount_base(cgroup_opts, sizeof(cgroup_opts)) < 0 ||
	    ev_loop_new(&init.loop) < 0)
		power_off_now();
	for (size_t i = 0; i < ELEMENTSOF(signals); i++)
		(void)ev_add_signal(init.loop, NULL, signals[i], on_signal, NULL);

	boot_start(cgroup_opts);
	if (!container_mode()) /* Docker's --network none has lo up already */
		loopback_up();
	/* The control and log ports come first, so even a failed boot is reported. */
	r = start_mux();
	if (r >= 0 && init.mux)
		r = control_listen(init.loop, init.mux, &handlers);
	if (r < 0) {
		journal_event("boot_failed",
			      json_pack("{s:s, s:s}", "phase", "channel", "reason", strerror(-r)));
		init.exit_code = 1;
		init.power_off_reason = "boot failed";
		finish_phase();
	}
	if (resume_is_template()) {
		r = template_phase();
		if (r < 0)
			finish_phase();
		/* This VM's own record starts here. */
		boot_start(cgroup_opts);
	}
	r = init_phase();
	if (r < 0) {
		init.exit_code = 1;
		init.power_off_reason = "boot failed";
		/* Give the host a moment to attach and read why. */
		flush_to_host(3 * USEC_PER_SEC);
		finish_phase();
	}
	journal_event("boot_complete",
		      json_pack("{s:I, s:i}", "uptimeMs", (json_int_t)journal_uptime_ms(), "apps",
				(int)apps_count()));
	if (apps_count() > 0)
		apps_launch(no_app_started);

	/* The loop phase: only a shutdown ends it. */
	for (;;) {
		r = ev_loop(init.loop);
		if (init.shutting_down)
			break;
		journal_logf("event loop failed (%s); carrying on", strerror(r < 0 ? -r : EIO));
	}
	finish_phase();
}
