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

#include "cli.h"
#include "commands.h"
#include "dev-reload.h"
#include "evloop.h"
#include "exec-util.h"
#include "fileio.h"
#include "linebuf.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "parse-util.h"
#include "paths.h"
#include "publish-host.h"
#include "rundir.h"
#include "runtime-select.h"
#include "source-dir.h"
#include "term-text.h"
#include "terminal-login.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-launch.h"
#include "vmm.h"

#define DEBOUNCE_USEC (200 * USEC_PER_MSEC)
#define REATTACH_USEC (500 * USEC_PER_MSEC)
/* Room for the whole replay berth-vmm sends (1 MiB of lines), which a reattach sifts. */
#define CATCH_UP_MAX (2 * 1024 * 1024)
#define WATCHES_MAX 256

typedef struct Dev {
	VmLaunch l;
	EvLoop *loop;
	int inotify_fd;
	EvSource *debounce;
	EvSource *logs_source, *reattach;
	LineReader logs;
	int logs_fd;
	char *last_line;      /* the newest log line printed, as it came */
	LineBuffer *catch_up; /* after a reattach: the replay, until its end marker */
	bool reattaching, refused_said;
	bool reload_pending;			   /* a change came while the VM booted */
	bool reboot_on_change;			   /* --reboot-on-change */
	DevReload *in_place;			   /* a reload in place under way */
	char *booted_bundle;			   /* the bundle the VM runs */
	PublishHost *published[PUBLISH_PORTS_MAX]; /* the app's published ports, on the host */
	long long t0, stop_ms; /* when the (re)load began, and what the stop took */
	int exit_code;
} Dev;

/* A line of ours, whose arguments may be the app's text (a bundling error, which may take
 * several lines): neutralised as a whole. */
static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	int n;

	fputs("[berth:dev] ", stdout);
	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n >= 0) {
		term_text_write(stdout, text, (size_t)n, TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE);
		free(text);
	}
	fputc('\n', stdout);
	fflush(stdout);
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

static void print_log_line(Dev *d, const char *line, size_t len)
{
	/* The app's and the guest's text, on its way to a terminal. */
	if (vm_log_line_print(stdout, line, len)) {
		free(d->last_line);
		d->last_line = strndup(line, len);
	}
}

typedef struct CatchUp {
	Dev *dev;
	size_t i, seen; /* replay lines already printed: up to the last equal to last_line */
} CatchUp;

static void find_printed(const char *line, size_t len, void *userdata)
{
	CatchUp *cu = userdata;

	cu->i++;
	if (cu->dev->last_line && strlen(cu->dev->last_line) == len &&
	    memcmp(cu->dev->last_line, line, len) == 0)
		cu->seen = cu->i;
}

static void print_unseen(const char *line, size_t len, void *userdata)
{
	CatchUp *cu = userdata;

	if (++cu->i > cu->seen)
		print_log_line(cu->dev, line, len);
}

/* A reattach's replay is complete: print what followed the newest line printed before (the
 * VM's log drops only its oldest lines, so when that one is gone, every line is new). */
static void catch_up_done(Dev *d)
{
	CatchUp cu = {.dev = d};

	linebuf_foreach(d->catch_up, find_printed, &cu);
	if (cu.seen == 0)
		say("the VM kept only its last 1 MiB of log: lines logged while the stream was away may be missing");
	cu.i = 0;
	linebuf_foreach(d->catch_up, print_unseen, &cu);
	d->catch_up = linebuf_free(d->catch_up);
}

static void vm_gone(Dev *d)
{
	log_error("the VM went away; see 'berth vm status' and %s/vmm.log", d->l.run_dir);
	d->exit_code = 1;
	ev_exit(d->loop, 1);
}

static void handle_log_line(Dev *d, const char *line)
{
	json_t *o;
	bool end;

	if (strneq(line, LOG_STREAM_REFUSED, strlen(LOG_STREAM_REFUSED))) {
		if (!d->refused_said)
			say("%s", line);
		d->refused_said = true;
		return;
	}
	o = json_loads(line, 0, NULL);
	end = streq(json_string_value(json_object_get(o, "event")) ?: "", "log_replay_end");
	json_decref(o);
	if (end) {
		if (d->reattaching)
			say("the log stream had ended while the VM ran on; following it again");
		d->reattaching = d->refused_said = false;
		if (d->catch_up)
			catch_up_done(d);
	} else if (d->catch_up)
		(void)linebuf_append(d->catch_up, line, strlen(line));
	else
		print_log_line(d, line, strlen(line));
}

static int on_log(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Dev *d = userdata;
	char *line;
	int r;

	/* Everything already read is handed out; then one read(). */
	while ((r = line_reader_next(&d->logs, 0, &line, NULL)) > 0)
		handle_log_line(d, line);
	fflush(stdout);
	if (r == 0 || (r < 0 && r != -ETIME)) {
		pid_t pid;

		detach_logs(d);
		if (ev_is_exiting(d->loop))
			return 0;
		/* Only a VM that is gone ends berth dev: a stream can end under a live one. */
		if (rundir_inspect(d->l.run_dir, &pid) != RUNDIR_RUNNING) {
			vm_gone(d);
			return 0;
		}
		d->reattaching = true;
		ev_source_set_time_relative(d->reattach, REATTACH_USEC);
		ev_source_set_enabled(d->reattach, EV_ONESHOT);
	}
	return 0;
}

/* @again: the same VM as before, whose replay repeats lines already printed. */
static int attach_logs(Dev *d, bool again)
{
	d->catch_up = linebuf_free(d->catch_up);
	if (!again) {
		free(d->last_line);
		d->last_line = NULL;
	} else if (d->last_line && !(d->catch_up = linebuf_new(CATCH_UP_MAX)))
		return -ENOMEM;
	d->logs_fd = vm_socket_connect(d->l.run_dir, "logs.sock");
	if (d->logs_fd < 0)
		return d->logs_fd;
	line_reader_init(&d->logs, d->logs_fd, VM_LINE_MAX);
	return ev_add_io(d->loop, &d->logs_source, d->logs_fd, EPOLLIN, on_log, d);
}

static int on_reattach(EvSource *s, uint64_t usec, void *userdata)
{
	Dev *d = userdata;
	pid_t pid;

	if (d->logs_fd >= 0)
		return 0;
	if (rundir_inspect(d->l.run_dir, &pid) != RUNDIR_RUNNING) {
		vm_gone(d);
		return 0;
	}
	if (attach_logs(d, true) < 0) {
		detach_logs(d);
		ev_source_set_time_relative(s, REATTACH_USEC);
		ev_source_set_enabled(s, EV_ONESHOT);
	}
	return 0;
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

static void on_reload_booted(VmLaunch *l, int r, void *userdata);

static void set_booted_bundle(Dev *d)
{
	free(d->booted_bundle);
	d->booted_bundle = d->l.bundle.dir ? strdup(d->l.bundle.dir) : NULL;
}

/* A change saved during a boot or a reload is taken once it is over. */
static void take_pending(Dev *d)
{
	if (!d->reload_pending)
		return;
	d->reload_pending = false;
	ev_source_set_time_relative(d->debounce, DEBOUNCE_USEC);
	ev_source_set_enabled(d->debounce, EV_ONESHOT);
}

static void reboot(Dev *d, const char *why)
{
	int r;

	if (why)
		say("%s; rebooting the VM with the new bundle...", why);
	else
		say("Change detected, rebooting the VM with the new bundle...");
	detach_logs(d);
	ev_source_set_enabled(d->reattach, EV_OFF);
	d->stop_ms = now_ms();
	(void)vm_launch_stop(&d->l);
	d->stop_ms = now_ms() - d->stop_ms;
	set_booted_bundle(d);
	r = vm_launch_boot_start(&d->l, d->loop, on_reload_booted, d);
	if (r < 0)
		say("the new version did not start; fix it and save again");
}

static void on_in_place_done(int r, const DevReloadResult *result, void *userdata)
{
	Dev *d = userdata;
	DevReloadResult copy = *result, *res = &copy; /* *result goes with d->in_place */

	d->in_place = dev_reload_free(d->in_place);
	if (r >= 0) {
		set_booted_bundle(d);
		printf("Reloaded in place in %lld ms (bundle %lld ms, pack %lld ms, stop %lld ms, start %lld ms). boot %s\n",
		       now_ms() - d->t0, d->l.bundle.ms, res->pack_ms, res->stop_ms, res->start_ms,
		       d->l.boot_id);
		fflush(stdout);
	} else if (res->restart) {
		reboot(d, res->why);
		return;
	} else {
		/* The VM is up and waits for the next version, which reloads in place too. */
		set_booted_bundle(d);
		say("the new version did not start: %s; fix it and save again", res->why);
	}
	take_pending(d);
}

static int reload(EvSource *s, uint64_t usec, void *userdata)
{
	Dev *d = userdata;
	Manifest *m = NULL;
	char err[1024], old_digest[65];
	int r;

	/* One boot or reload at a time. */
	if (vm_launch_booting(&d->l) || d->in_place) {
		d->reload_pending = true;
		return 0;
	}
	d->t0 = now_ms();
	if (vm_launch_load_manifest(d->l.app_dir, &m) < 0) {
		say("berth.yml is invalid; the VM keeps running the previous version");
		return 0;
	}
	manifest_free(m);
	memcpy(old_digest, d->l.bundle.digest, sizeof(old_digest));
	if (vm_launch_bundle(&d->l, err, sizeof(err)) < 0) {
		say("bundling failed: %s; the VM keeps running the previous version", err);
		return 0;
	}
	if (streq(old_digest, d->l.bundle.digest)) {
		say("the bundle did not change (%lld ms); the VM keeps running", d->l.bundle.ms);
		return 0;
	}
	if (d->reboot_on_change || !d->booted_bundle) {
		reboot(d, NULL);
		return 0;
	}
	err[0] = '\0';
	r = dev_reload_start(d->loop, d->l.run_dir, d->l.name, d->l.bundle.dir, d->booted_bundle,
			     d->l.boot_timeout_ms, on_in_place_done, d, &d->in_place, err,
			     sizeof(err));
	if (r < 0) {
		reboot(d, err[0] ? err : NULL);
		return 0;
	}
	say("Change detected, reloading the app in place...");
	return 0;
}

static void on_reload_booted(VmLaunch *l, int r, void *userdata)
{
	Dev *d = userdata;

	if (r == -ECANCELED) {
		/* The signal that cut the boot short was meant for berth dev as a whole. */
		d->exit_code = 130;
		ev_exit(d->loop, 130);
		return;
	}
	if (r < 0)
		say("the new version did not start; fix it and save again");
	else {
		printf("Reloaded in %lld ms (bundle %lld ms, stop %lld ms, boot %lld ms). boot %s\n",
		       now_ms() - d->t0, l->bundle.ms, d->stop_ms, l->boot_ms, l->boot_id);
		fflush(stdout);
		(void)attach_logs(d, false);
	}
	take_pending(d);
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
	if (asprintf(&src, "%s/src", d->l.app_dir) < 0)
		return -ENOMEM;
	watch_tree(d, src, 0);
	/* berth.yml itself: watch the folder and keep only that name's events... simpler to
	 * watch the file, re-added after editors replace it (IN_DELETE_SELF). */
	(void)inotify_add_watch(d->inotify_fd, d->l.app_dir, IN_CLOSE_WRITE | IN_MOVED_TO);
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

	/* During a boot, the boot gives up first (its done callback ends the loop). */
	if (vm_launch_booting(&d->l))
		vm_launch_boot_cancel(&d->l);
	else
		ev_exit(d->loop, d->exit_code);
	return 0;
}

static void dev_done(Dev *d)
{
	bundle_stop_bundler();
	for (size_t i = 0; i < ELEMENTSOF(d->published); i++)
		d->published[i] = publish_host_free(d->published[i]);
	detach_logs(d);
	d->in_place = dev_reload_free(d->in_place);
	free(d->booted_bundle);
	free(d->last_line);
	linebuf_free(d->catch_up);
	safe_close(d->inotify_fd);
	ev_loop_free(d->loop);
	vm_launch_done(&d->l);
}

static int parse_args(int argc, char **argv, Dev *d, const char **ret_runtime, const char **ret_dir)
{
	static const struct option options[] = {{"runtime", required_argument, NULL, 'r'},
						{"env", required_argument, NULL, 'e'},
						{"env-file", required_argument, NULL, 'f'},
						{"cold", no_argument, NULL, 'c'},
						{"reboot-on-change", no_argument, NULL, 'b'},
						{"apps", required_argument, NULL, 'a'},
						{"help", no_argument, NULL, 'h'},
						{}};
	const char *env = getenv("BERTH_DEV_BOOT_TIMEOUT_MS");
	int c;

	d->l.boot_timeout_ms = VM_LAUNCH_BOOT_TIMEOUT_MS_DEFAULT;
	if (env && parse_uint_range(env, 1000, 3600000, &d->l.boot_timeout_ms) < 0)
		return log_error(
			"BERTH_DEV_BOOT_TIMEOUT_MS must be milliseconds from 1000 to 3600000");
	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 'r')
			*ret_runtime = optarg;
		else if (c == 'c')
			d->l.cold = true;
		else if (c == 'b')
			d->reboot_on_change = true;
		else if (c == 'a')
			d->l.apps_arg = optarg;
		else if (c == 'e') {
			if (vm_launch_add_env(&d->l, optarg) < 0)
				return -EINVAL;
		} else if (c == 'f') {
			if (vm_launch_add_env_file(&d->l, optarg) < 0)
				return -EINVAL;
		} else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 1;
		} else
			return -EINVAL;
	}
	if (argc - optind > 1)
		return cli_usage_error("one app folder at a time, not '%s' too", argv[optind + 1]),
		       -EINVAL;
	/* Saves reload the app in place: the guest keeps a warm runtime for its next start. */
	d->l.reloads = !d->reboot_on_change;
	*ret_dir = optind < argc ? argv[optind] : ".";
	return 0;
}

/*
 * The login, where only the person sees it: on standard output when that is a terminal,
 * else on the controlling terminal; never into a file or a pipe (a CI log, a tee).
 */
static void print_secret(const char *label, const char *secret)
{
	FILE *tty;

	if (isatty(STDOUT_FILENO)) {
		printf("[berth:dev] %s%s\n", label, secret);
		return;
	}
	tty = fopen("/dev/tty", "we");
	if (tty) {
		fprintf(tty, "[berth:dev] %s%s\n", label, secret);
		fclose(tty);
		say("%s(printed on your terminal, not here: standard output is not one)", label);
		return;
	}
	say("%s(not printed: berth dev has no terminal to show it on; run it from one)", label);
}

static void print_login(const Dev *d)
{
	print_secret("login: " TERMINAL_LOGIN_USER " / ",
		     terminal_login_secret(d->l.terminal_login));
}

/*
 * Serve the app's published ports on the host (the terminal's web view), before the first
 * boot so that a BERTH_PUBLISH_HOST that cannot be served stops berth dev before anything
 * boots. Once: the host port stays the same across reloads, as does the login, so an open
 * tab keeps working.
 */
static int publish_ports_on_host(Dev *d)
{
	char err[512];

	for (size_t i = 0; i < d->l.n_published; i++) {
		_cleanup_free_ char *warning = NULL;
		int r;

		r = publish_host_new(d->loop, d->l.run_dir, d->l.published[i], NULL,
				     &d->published[i], &warning, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "cannot serve %s: %s",
					       publish_port_lookup(d->l.published[i])->what, err);
		if (warning)
			log_warning("%s", warning);
	}
	return 0;
}

/* Where the person finds them (SPEC 8.3), once the app is ready. */
static void print_published(const Dev *d)
{
	for (size_t i = 0; i < d->l.n_published; i++) {
		const PublishPort *row = publish_port_lookup(d->l.published[i]);

		if (streq(row->ns, "browser") && d->l.vnc_password) {
			say("noVNC:    %s/vnc.html", publish_host_url(d->published[i]));
			print_secret("VNC password: ", d->l.vnc_password);
			continue;
		}
		if (!streq(row->ns, "terminal") || !d->l.terminal_login) {
			say("%s: %s", row->what, publish_host_url(d->published[i]));
			continue;
		}
		say("Terminal: %s", publish_host_url(d->published[i]));
		print_login(d);
		say("the terminal starts with its first call (run_command, send_keys or read_screen); until then the page does not load");
	}
	fflush(stdout);
}

/* The first boot is over: on success, watch the app and stream its log. */
static void on_first_boot(VmLaunch *l, int r, void *userdata)
{
	Dev *d = userdata;
	_cleanup_(json_decrefp) json_t *vm = NULL;

	if (r < 0) {
		d->exit_code = r == -ECANCELED ? 130 : 1;
		ev_exit(d->loop, d->exit_code);
		return;
	}
	/* Watch before saying ready: a change saved right after the ready line is not lost. */
	r = start_watching(d);
	if (r < 0) {
		log_error_errno(r, "cannot watch the app: %m");
		d->exit_code = 1;
		ev_exit(d->loop, 1);
		return;
	}
	vm = vm_json_load(l->run_dir);
	printf("VM ready in %lld ms (bundle %lld ms, %s, %s %lld ms). boot %s, berth-vmm pid %lld\n",
	       now_ms() - d->t0, l->bundle.ms,
	       l->bundle.reused	  ? "unchanged"
	       : l->bundle.cached ? "cached"
				  : "fresh",
	       streq(json_string_value(json_object_get(json_object_get(vm, "boot"), "mode")) ?: "",
		     "restored")
		       ? "restore"
		       : "boot",
	       l->boot_ms, l->boot_id, json_integer_value(json_object_get(vm, "pid")));
	say("run dir %s; call it with `berth rpc %s --export <name>`", l->run_dir, l->name);
	fflush(stdout);
	/* An unchanged app was not bundled: the bundler for its first change starts now. */
	bundle_start_bundler(l->app_dir);
	print_published(d);
	r = ev_add_time_relative(d->loop, &d->reattach, EV_USEC_INFINITY, on_reattach, d);
	if (r >= 0)
		r = ev_source_set_enabled(d->reattach, EV_OFF);
	if (r >= 0)
		r = attach_logs(d, false);
	if (r < 0) {
		log_error_errno(r, "cannot watch the app: %m");
		d->exit_code = 1;
		ev_exit(d->loop, 1);
	}
}

int cmd_dev(int argc, char **argv)
{
	Dev d = {.l.prefix = "[berth:dev] ",
		 .inotify_fd = -EBADF,
		 .logs_fd = -EBADF,
		 .t0 = now_ms()};
	const char *runtime_flag = NULL, *dir = ".";
	char err[1024];
	pid_t owner;
	int r;

	r = parse_args(argc, argv, &d, &runtime_flag, &dir);
	if (r != 0) {
		dev_done(&d);
		return r < 0 ? CLI_EXIT_USAGE : 0;
	}
	/* The terminal's web view reaches the host (SPEC 8.3); berth mcp publishes nothing. */
	d.l.publish = true;
	if (vm_launch_load(&d.l, dir, runtime_flag, "berth-dev-") < 0) {
		dev_done(&d);
		return 1;
	}
	if (rundir_inspect(d.l.run_dir, &owner) == RUNDIR_RUNNING) {
		log_error(
			"\"%s\" is already running in another berth dev (berth-vmm pid %d, run dir %s); stop it there or with 'berth vm stop %s'",
			d.l.name, (int)owner, d.l.run_dir, d.l.vm_name);
		dev_done(&d);
		return 1;
	}
	if (vm_launch_prepare(&d.l) < 0) {
		dev_done(&d);
		return 1;
	}
	/* Every saved change is bundled again: a bundler kept running does it sooner. */
	bundle_keep_bundler();
	if (vm_launch_bundle(&d.l, err, sizeof(err)) < 0) {
		_cleanup_free_ char *shown =
			term_text_dup(err, TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE);

		log_error("bundling %s failed: %s", d.l.app_dir, shown ?: "(out of memory)");
		dev_done(&d);
		return 1;
	}

	r = ev_loop_new(&d.loop);
	if (r >= 0)
		r = ev_add_signal(d.loop, NULL, SIGINT, on_signal, &d);
	if (r >= 0)
		r = ev_add_signal(d.loop, NULL, SIGTERM, on_signal, &d);
	if (r >= 0)
		r = ev_add_signal(d.loop, NULL, SIGHUP, on_signal, &d);
	if (r < 0) {
		log_error_errno(r, "cannot set up the event loop: %m");
		dev_done(&d);
		return 1;
	}
	r = publish_ports_on_host(&d);
	if (r < 0) {
		dev_done(&d);
		return 1;
	}
	set_booted_bundle(&d);
	r = vm_launch_boot_start(&d.l, d.loop, on_first_boot, &d);
	if (r >= 0)
		r = ev_loop(d.loop);
	if (vm_launch_booting(&d.l))
		vm_launch_boot_cancel(&d.l);
	if (d.logs_fd >= 0 || rundir_inspect(d.l.run_dir, &owner) == RUNDIR_RUNNING) {
		say("stopping the VM");
		detach_logs(&d);
		(void)vm_launch_stop(&d.l);
	}
	dev_done(&d);
	return r < 0 ? 1 : d.exit_code;
}
