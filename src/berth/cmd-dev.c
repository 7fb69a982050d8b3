/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth dev [DIR]: bundle the app, boot it in a VM, stream its logs, and reboot on a
 * changed bundle. Ctrl-C stops the VM.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "dev-bundle.h"
#include "evloop.h"
#include "exec-util.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "parse-util.h"
#include "paths.h"
#include "rundir.h"
#include "runtime-select.h"
#include "source-dir.h"
#include "vm-client.h"
#include "vm-support.h"
#include "vmm.h"

#define BOOT_TIMEOUT_MS_DEFAULT (180 * 1000)
#define DEBOUNCE_USEC (200 * USEC_PER_MSEC)
#define WATCHES_MAX 256

typedef struct Dev {
	char *app_dir;
	char *name;
	char *vm_name;
	char *run_dir;
	char *vmm;
	char *state;
	Bundle bundle;
	EvLoop *loop;
	int inotify_fd;
	EvSource *debounce;
	EvSource *logs_source;
	LineReader logs;
	int logs_fd;
	unsigned boot_timeout_ms;
	int exit_code;
} Dev;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("[berth:dev] ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static int load_manifest(const char *dir, Manifest **ret)
{
	_cleanup_free_ char *path = NULL;
	ManifestError err = {};
	int r;

	if (asprintf(&path, "%s/berth.yml", dir) < 0)
		return -ENOMEM;
	r = manifest_load_at(AT_FDCWD, path, ret, &err);
	if (r == -ENOENT)
		return log_error(
			"%s has no berth.yml: run berth dev in an app folder (berth init NAME makes one)",
			dir);
	if (r < 0) {
		fprintf(stderr, "%s\n", err.text ? err.text : strerror(-r));
		manifest_error_done(&err);
		return r;
	}
	return 0;
}

/* The VM needs the pinned artifacts; install them from this checkout or the configured
 * source when they are missing, as `berth vm install` would. */
static int ensure_artifacts(Dev *d)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *from = NULL;
	PinSet pins;
	bool missing = false;
	int r;

	if (vmm_query_pins(d->vmm, &pins) < 0)
		pinset_compiled(&pins);
	for (int k = 0; k < _ARTIFACT_KIND_MAX && !missing; k++) {
		_cleanup_free_ char *p = pinset_install_path(&pins, vm_dir, k);

		missing = !p || access(p, R_OK) < 0;
	}
	if (!missing)
		return 0;
	say("the pinned kernel and root image are not installed yet; installing them");
	{
		char *argv[8] = {"install", NULL};
		int argc = 1;

		if (berth_source_path("out/artifacts/manifest-rootfs.json", &from) >= 0) {
			*strrchr(from, '/') = '\0';
			argv[argc++] = "--from";
			argv[argc++] = from;
		}
		argv[argc++] = "--vmm";
		argv[argc++] = d->vmm;
		optind = 1;
		r = cmd_vm_install(argc, argv);
	}
	return r == 0 ? 0
		      : log_error(
				"could not install the VM artifacts; see above, or run 'berth vm install'");
}

static int stop_vm(Dev *d);

/* A VM whose app failed powers off by itself once no app is left; wait for that (or stop
 * it), so its log is read from a run dir that no longer changes. */
static void settle_failed_vm(Dev *d)
{
	long long deadline = now_ms() + 20000;
	pid_t pid;

	while (rundir_inspect(d->run_dir, &pid) == RUNDIR_RUNNING && now_ms() < deadline)
		usleep(100 * 1000);
	if (rundir_inspect(d->run_dir, &pid) == RUNDIR_RUNNING)
		(void)stop_vm(d);
}

static int boot(Dev *d, long long *ret_ms, char *ret_boot_id)
{
	_cleanup_free_ char *out = NULL;
	_cleanup_(json_decrefp) json_t *vm = NULL;
	char *argv[] = {d->vmm,	       "run",	  "--name", d->vm_name, "--app",
			d->bundle.dir, "--state", d->state, NULL};
	char reason[512];
	long long t0 = now_ms();
	int status, r;

	r = run_capture(argv, 120 * 1000, 1024 * 1024, &out, &status);
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* berth-vmm explains itself on stderr, which run_capture() discards: ask again. */
		return log_error(
			"berth-vmm could not start the VM; run '%s run --name %s --app %s --foreground --console-stderr' to see why",
			d->vmm, d->vm_name, d->bundle.dir);
	}
	r = vm_wait_ready(d->run_dir, 1, (int)d->boot_timeout_ms, reason, sizeof(reason));
	if (r < 0) {
		if (r == -ETIME)
			snprintf(reason, sizeof(reason), "the app was not ready within %u ms",
				 d->boot_timeout_ms);
		log_error("%s; its log follows (berth vm logs %s)", reason, d->vm_name);
		settle_failed_vm(d);
		{
			char *largv[] = {"logs", d->vm_name, NULL};

			optind = 1;
			(void)cmd_vm_logs(2, largv);
		}
		return -EIO;
	}
	*ret_ms = now_ms() - t0;
	vm = vm_json_load(d->run_dir);
	snprintf(ret_boot_id, 37, "%s", json_string_value(json_object_get(vm, "bootId")) ?: "?");
	return 0;
}

static int stop_vm(Dev *d)
{
	char *argv[] = {"stop", d->vm_name, NULL};

	optind = 1;
	return cmd_vm_stop(2, argv);
}

/* --- logs ------------------------------------------------------------------------------ */

static void detach_logs(Dev *d)
{
	d->logs_source = ev_source_free(d->logs_source);
	if (d->logs_fd >= 0) {
		line_reader_done(&d->logs);
		d->logs_fd = safe_close(d->logs_fd);
	}
}

static int on_log(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Dev *d = userdata;
	char *line;
	int r;

	/* Everything already read is handed out; then one read(). */
	while ((r = line_reader_next(&d->logs, 0, &line)) > 0) {
		json_t *o = json_loads(line, 0, NULL);

		if (json_is_string(json_object_get(o, "line")))
			printf("[%s] %s\n", json_string_value(json_object_get(o, "src")) ?: "?",
			       json_string_value(json_object_get(o, "line")));
		json_decref(o);
		fflush(stdout);
	}
	if (r == 0 || (r < 0 && r != -ETIME)) {
		detach_logs(d);
		if (!ev_is_exiting(d->loop)) {
			log_error("the VM went away; see 'berth vm status' and %s/vmm.log",
				  d->run_dir);
			d->exit_code = 1;
			ev_exit(d->loop, 1);
		}
	}
	return 0;
}

static int attach_logs(Dev *d)
{
	d->logs_fd = vm_socket_connect(d->run_dir, "logs.sock");
	if (d->logs_fd < 0)
		return d->logs_fd;
	line_reader_init(&d->logs, d->logs_fd);
	return ev_add_io(d->loop, &d->logs_source, d->logs_fd, EPOLLIN, on_log, d);
}

/* --- watching --------------------------------------------------------------------------- */

static void watch_tree(Dev *d, const char *dir, unsigned depth)
{
	DIR *dd;
	struct dirent *e;

	if (depth > 8)
		return;
	(void)inotify_add_watch(d->inotify_fd, dir,
				IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO |
					IN_MOVED_FROM);
	dd = opendir(dir);
	while (dd && (e = readdir(dd))) {
		_cleanup_free_ char *sub = NULL;

		if (e->d_type != DT_DIR || e->d_name[0] == '.' || streq(e->d_name, "node_modules"))
			continue;
		if (asprintf(&sub, "%s/%s", dir, e->d_name) >= 0)
			watch_tree(d, sub, depth + 1);
	}
	if (dd)
		closedir(dd);
}

static int reload(EvSource *s, uint64_t usec, void *userdata)
{
	Dev *d = userdata;
	Manifest *m = NULL;
	Bundle b;
	char err[1024], boot_id[37];
	long long t0 = now_ms(), stop_ms, boot_ms;

	if (load_manifest(d->app_dir, &m) < 0) {
		say("berth.yml is invalid; the VM keeps running the previous version");
		return 0;
	}
	manifest_free(m);
	if (bundle_app(d->app_dir, d->name, &b, err, sizeof(err)) < 0) {
		say("bundling failed: %s; the VM keeps running the previous version", err);
		return 0;
	}
	if (streq(b.digest, d->bundle.digest)) {
		say("the bundle did not change (%lld ms); the VM keeps running", b.ms);
		bundle_done(&b);
		return 0;
	}
	say("Change detected, rebooting the VM with the new bundle...");
	detach_logs(d);
	bundle_done(&d->bundle);
	d->bundle = b;
	stop_ms = now_ms();
	(void)stop_vm(d);
	stop_ms = now_ms() - stop_ms;
	if (boot(d, &boot_ms, boot_id) < 0) {
		say("the new version did not start; fix it and save again");
		return 0;
	}
	printf("Reloaded in %lld ms (bundle %lld ms, stop %lld ms, boot %lld ms). boot %s\n",
	       now_ms() - t0, b.ms, stop_ms, boot_ms, boot_id);
	fflush(stdout);
	(void)attach_logs(d);
	return 0;
}

static int on_inotify(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Dev *d = userdata;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool relevant = false;
	ssize_t n = read(fd, buf, sizeof(buf));

	for (char *p = buf; n > 0 && p < buf + n;) {
		struct inotify_event *ev = (struct inotify_event *)p;

		if (ev->len == 0 || (ev->name[0] != '.' && !strstr(ev->name, "~")))
			relevant = true;
		/* New directories under src/ are watched too. */
		if ((ev->mask & IN_ISDIR) && (ev->mask & IN_CREATE))
			relevant = true;
		p += sizeof(*ev) + ev->len;
	}
	if (!relevant)
		return 0;
	/* Editors save in bursts: reload once things settle. */
	ev_source_set_time_relative(d->debounce, DEBOUNCE_USEC);
	ev_source_set_enabled(d->debounce, EV_ONESHOT);
	return 0;
}

static int start_watching(Dev *d)
{
	_cleanup_free_ char *src = NULL;
	int r;

	d->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (d->inotify_fd < 0)
		return -errno;
	if (asprintf(&src, "%s/src", d->app_dir) < 0)
		return -ENOMEM;
	watch_tree(d, src, 0);
	/* berth.yml itself: watch the folder and keep only that name's events... simpler to
	 * watch the file, re-added after editors replace it (IN_DELETE_SELF). */
	(void)inotify_add_watch(d->inotify_fd, d->app_dir, IN_CLOSE_WRITE | IN_MOVED_TO);
	r = ev_add_io(d->loop, NULL, d->inotify_fd, EPOLLIN, on_inotify, d);
	if (r < 0)
		return r;
	r = ev_add_time_relative(d->loop, &d->debounce, EV_USEC_INFINITY, reload, d);
	if (r >= 0)
		ev_source_set_enabled(d->debounce, EV_OFF);
	return r;
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	Dev *d = userdata;

	ev_exit(d->loop, d->exit_code);
	return 0;
}

static void dev_done(Dev *d)
{
	detach_logs(d);
	safe_close(d->inotify_fd);
	ev_loop_free(d->loop);
	bundle_done(&d->bundle);
	free(d->app_dir);
	free(d->name);
	free(d->vm_name);
	free(d->run_dir);
	free(d->vmm);
	free(d->state);
}

/* The berth-vmm built for this CLI's artifacts, or another with a warning. */
static int locate_vmm(Dev *d)
{
	PinSet mine;
	bool matches;
	int r;

	pinset_compiled(&mine);
	r = vmm_locate_for_pins(NULL, &mine, &d->vmm, &matches);
	if (r >= 0 && !matches)
		log_warning(
			"%s was built for other artifacts than this berth; using it anyway (install the matching one with 'berth vm install --vmm PATH')",
			d->vmm);
	return r;
}

static int parse_args(int argc, char **argv, Dev *d, const char **ret_runtime, const char **ret_dir)
{
	static const struct option options[] = {
		{"runtime", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'}, {}};
	const char *env = getenv("BERTH_DEV_BOOT_TIMEOUT_MS");
	int c;

	d->boot_timeout_ms = BOOT_TIMEOUT_MS_DEFAULT;
	if (env && parse_uint_range(env, 1000, 3600000, &d->boot_timeout_ms) < 0)
		return log_error(
			"BERTH_DEV_BOOT_TIMEOUT_MS must be milliseconds from 1000 to 3600000");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		if (c == 'r')
			*ret_runtime = optarg;
		else if (c == 'h') {
			printf("usage: berth dev [DIR] [--runtime vm|docker]\n");
			exit(0);
		} else
			return -EINVAL;
	}
	*ret_dir = optind < argc ? argv[optind] : ".";
	return 0;
}

int cmd_dev(int argc, char **argv)
{
	Dev d = {.inotify_fd = -EBADF, .logs_fd = -EBADF};
	_cleanup_free_ char *vm_dir = NULL, *reason = NULL;
	const char *runtime_flag = NULL, *dir = ".";
	Manifest *m = NULL;
	char err[1024], boot_id[37];
	long long t0 = now_ms(), boot_ms;
	pid_t owner;
	int r;

	if (parse_args(argc, argv, &d, &runtime_flag, &dir) < 0)
		return 2;
	d.app_dir = realpath(dir, NULL);
	if (!d.app_dir)
		return log_error_errno(errno, "%s: %m", dir), 1;
	/* An invalid berth.yml is reported before anything boots. */
	if (load_manifest(d.app_dir, &m) < 0)
		return 1;
	r = runtime_select(runtime_flag, &reason);
	if (r < 0) {
		manifest_free(m);
		return log_error("%s", reason), 1;
	}
	r = vm_support_check(m, &reason);
	if (r < 0) {
		manifest_free(m);
		return log_error("%s", reason), 1;
	}
	d.name = strdup(manifest_name(m));
	manifest_free(m);
	vm_dir = berth_vm_dir();
	if (!d.name || !vm_dir || asprintf(&d.vm_name, "berth-dev-%s", d.name) < 0 ||
	    !(d.run_dir = berth_run_dir(d.vm_name)) ||
	    asprintf(&d.state, "%s/state/%s.img", vm_dir, d.name) < 0)
		return log_error_errno(-ENOMEM, "out of memory"), 1;
	if (rundir_inspect(d.run_dir, &owner) == RUNDIR_RUNNING) {
		log_error(
			"\"%s\" is already running in another berth dev (berth-vmm pid %d, run dir %s); stop it there or with 'berth vm stop %s'",
			d.name, (int)owner, d.run_dir, d.vm_name);
		dev_done(&d);
		return 1;
	}
	if (locate_vmm(&d) < 0) {
		dev_done(&d);
		return log_error(
			       "berth-vmm not found: build it (scripts/build.sh) or install it with 'berth vm install --vmm PATH'"),
		       1;
	}
	if (ensure_artifacts(&d) < 0) {
		dev_done(&d);
		return 1;
	}
	if (bundle_app(d.app_dir, d.name, &d.bundle, err, sizeof(err)) < 0) {
		dev_done(&d);
		return log_error("bundling %s failed: %s", d.app_dir, err), 1;
	}
	if (boot(&d, &boot_ms, boot_id) < 0) {
		dev_done(&d);
		return 1;
	}
	{
		_cleanup_(json_decrefp) json_t *vm = vm_json_load(d.run_dir);

		printf("VM ready in %lld ms (bundle %lld ms, %s, boot %lld ms). boot %s, berth-vmm pid %lld\n",
		       now_ms() - t0, d.bundle.ms, d.bundle.cached ? "cached" : "fresh", boot_ms,
		       boot_id, json_integer_value(json_object_get(vm, "pid")));
	}
	say("run dir %s; call it with `berth rpc %s --export <name>`", d.run_dir, d.name);
	fflush(stdout);

	r = ev_loop_new(&d.loop);
	if (r >= 0)
		r = ev_add_signal(d.loop, NULL, SIGINT, on_signal, &d);
	if (r >= 0)
		r = ev_add_signal(d.loop, NULL, SIGTERM, on_signal, &d);
	if (r >= 0)
		r = start_watching(&d);
	if (r >= 0)
		r = attach_logs(&d);
	if (r >= 0)
		r = ev_loop(d.loop);
	if (d.logs_fd >= 0 || rundir_inspect(d.run_dir, &owner) == RUNDIR_RUNNING) {
		say("stopping the VM");
		detach_logs(&d);
		(void)stop_vm(&d);
	}
	dev_done(&d);
	return r < 0 ? 1 : d.exit_code;
}
