/* SPDX-License-Identifier: Apache-2.0 */
/* berth vm status | logs | stop: find VMs through their run dirs and talk to them. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "paths.h"
#include "rundir.h"
#include "term-text.h"
#include "time-util.h"
#include "utf8.h"
#include "vm-client.h"

#define STATUS_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS_DEFAULT 30000

/* Why a stale run dir was left behind, from what its berth-vmm wrote last. */
static char *stale_reason(const char *run_dir)
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(run_dir);
	_cleanup_free_ char *path = NULL, *log = NULL;
	const char *state = json_string_value(json_object_get(vm, "state"));
	char *last = NULL, *reason = NULL;

	if (asprintf(&path, "%s/vmm.log", run_dir) >= 0 &&
	    read_full_file(path, 4 * 1024 * 1024, &log, NULL) >= 0) {
		size_t n = strlen(log);

		while (n > 0 && log[n - 1] == '\n')
			log[--n] = '\0';
		last = strrchr(log, '\n');
		last = last ? last + 1 : log;
	}
	const char *failure =
		json_string_value(json_object_get(json_object_get(vm, "failure"), "reason"));

	if (failure) {
		if (asprintf(&reason, "state %s: %s", state ? state : "unknown", failure) < 0)
			return NULL;
		return reason;
	}
	if (asprintf(&reason, "state %s%s%s", state ? state : "unknown",
		     last && *last ? "; last log line: " : "", last ? last : "") < 0)
		return NULL;
	return reason;
}

typedef struct Sweep {
	json_t *running; /* names */
	json_t *stale;	 /* [{name, reason}] */
	const char *root;
} Sweep;

static void on_run_dir(const char *name, RunDirState state, pid_t pid, void *userdata)
{
	Sweep *s = userdata;
	_cleanup_free_ char *dir = NULL, *reason = NULL;

	if (state == RUNDIR_RUNNING) {
		json_array_append_new(s->running, json_string(name));
		return;
	}
	/* Read why it died before the sweep removes it. */
	if (asprintf(&dir, "%s/%s", s->root, name) >= 0)
		reason = stale_reason(dir);
	/* JSON holds only UTF-8: a log line that is not keeps its bytes as escapes, rather than
	 * the run dir going unreported. */
	if (reason && !utf8_valid(reason, strlen(reason))) {
		char *shown = term_text_dup(reason, TERM_TEXT_LOG_LINE);

		free(reason);
		reason = shown;
	}
	json_array_append_new(s->stale, json_pack("{s:s, s:s}", "name", name, "reason",
						  reason ? reason : "unknown"));
}

static json_t *describe_vm(const char *name, bool query)
{
	_cleanup_free_ char *dir = berth_run_dir(name);
	json_t *vm = dir ? vm_json_load(dir) : NULL, *status = NULL;

	if (!vm)
		vm = json_pack("{s:s, s:s}", "name", name, "runDir", dir ? dir : "");
	if (query && dir &&
	    vm_control_request(dir, "{\"op\":\"status\"}", STATUS_TIMEOUT_MS, &status) >= 0)
		json_object_set_new(vm, "guest", status);
	return vm;
}

/* A string field of @o, or @dflt. */
static const char *str_of(json_t *o, const char *key, const char *dflt)
{
	return json_string_value(json_object_get(o, key)) ?: dflt;
}

/* Every field comes from vm.json or the guest, and reaches the terminal neutralised. */
static void print_vm(json_t *vm)
{
	json_t *guest = json_object_get(vm, "guest"), *app;
	size_t i;

	term_text_line(stdout, 0, "%s  berth-vmm pid %lld  boot %s  started %s",
		       str_of(vm, "name", ""), json_integer_value(json_object_get(vm, "pid")),
		       str_of(vm, "bootId", "?"), str_of(vm, "startedAt", "?"));
	term_text_line(stdout, 0, "  run dir %s", str_of(vm, "runDir", "?"));
	term_text_line(
		stdout, 0, "  %s, %s (%s), %lld vCPUs, %lld MiB, no network device",
		str_of(vm, "state", "unknown"), str_of(vm, "engine", "?"),
		str_of(vm, "accelerator", "?"),
		json_integer_value(json_object_get(json_object_get(vm, "vmConfig"), "cpus")),
		json_integer_value(json_object_get(json_object_get(vm, "vmConfig"), "memMiB")));
	if (json_is_string(json_object_get(json_object_get(vm, "accel"), "reason")))
		term_text_line(stdout, 0, "  accelerator: %s",
			       str_of(json_object_get(vm, "accel"), "reason", ""));
	if (json_is_string(json_object_get(json_object_get(vm, "failure"), "reason")))
		term_text_line(stdout, 0, "  failed: %s",
			       str_of(json_object_get(vm, "failure"), "reason", ""));
	if (!guest) {
		printf("  guest: not answering on its control port (still booting?)\n");
		return;
	}
	json_array_foreach(json_object_get(guest, "apps"), i, app) {
		json_t *cg = json_object_get(app, "cgroup");

		term_text_line(stdout, 0, "  %s: %s, pid %lld, uid %lld%s%s",
			       str_of(app, "name", "?"), str_of(app, "state", "?"),
			       json_integer_value(json_object_get(app, "pid")),
			       json_integer_value(json_object_get(app, "uid")), cg ? ", " : "",
			       cg ? str_of(cg, "summary", "") : "");
	}
	if (json_array_size(json_object_get(guest, "apps")) == 0)
		printf("  no apps running\n");
}

int cmd_vm_status(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {}};
	_cleanup_free_ char *root = berth_run_root();
	Sweep s = {.running = json_array(), .stale = json_array()};
	json_t *out = json_array();
	bool json = false;
	const char *only = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		if (c == 'j')
			json = true;
		else if (c == 'h') {
			printf("usage: berth vm status [NAME] [--json]\n");
			return 0;
		} else
			return 2;
	}
	if (optind < argc)
		only = argv[optind];
	if (!root)
		return log_error("cannot find your home directory; set HOME or BERTH_HOME"), 1;
	s.root = root;
	r = rundir_sweep(root, true, on_run_dir, &s);
	if (r < 0)
		return log_error_errno(r, "cannot read %s: %m", root), 1;

	for (size_t i = 0; i < json_array_size(s.stale); i++) {
		json_t *st = json_array_get(s.stale, i);

		if (!json)
			term_text_line(
				stdout, 0,
				"cleaned up stale run dir of \"%s\" (its berth-vmm is gone; %s)",
				str_of(st, "name", "?"), str_of(st, "reason", "unknown"));
	}
	for (size_t i = 0; i < json_array_size(s.running); i++) {
		const char *name = json_string_value(json_array_get(s.running, i));

		if (only && !streq(only, name))
			continue;
		json_array_append_new(out, describe_vm(name, true));
	}
	if (json) {
		json_t *doc = json_pack("{s:O, s:O}", "vms", out, "staleCleaned", s.stale);
		char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);

		if (text)
			term_text_json(stdout, text, strlen(text));
		putchar('\n');
		free(text);
		json_decref(doc);
	} else if (json_array_size(out) == 0) {
		if (only)
			printf("no microVM sandbox named \"%s\" is running\n", only);
		else
			printf("no microVM sandboxes running\n");
	} else
		for (size_t i = 0; i < json_array_size(out); i++)
			print_vm(json_array_get(out, i));
	r = only && json_array_size(out) == 0 ? 1 : 0;
	json_decref(out);
	json_decref(s.running);
	json_decref(s.stale);
	return r;
}

/* The run dir of a running VM, or an error that says what to do. */
static char *running_dir(const char *name)
{
	char *dir = berth_run_dir(name);
	pid_t pid;

	if (!dir) {
		log_error("invalid VM name \"%s\"", name);
		return NULL;
	}
	switch (rundir_inspect(dir, &pid)) {
	case RUNDIR_RUNNING:
		return dir;
	case RUNDIR_STALE: {
		_cleanup_free_ char *reason = stale_reason(dir),
				    *shown = term_text_dup(reason, TERM_TEXT_LOG_LINE);

		(void)rundir_remove_if_stale(dir);
		log_error("VM \"%s\" is not running; cleaned up its stale run dir (%s)", name,
			  shown ?: "unknown");
		break;
	}
	case RUNDIR_ABSENT:
	case _RUNDIR_STATE_MAX:
	case _RUNDIR_STATE_INVALID:
		log_error("no VM named \"%s\" is running; 'berth vm status' lists them", name);
		break;
	}
	free(dir);
	return NULL;
}

/* A line as --json passes it on: its bytes, escaped only on a terminal. */
static void print_raw_line(const char *line)
{
	term_text_json(stdout, line, strlen(line));
	putchar('\n');
}

static void print_log_line(const char *line, bool raw)
{
	if (raw)
		print_raw_line(line);
	else
		(void)vm_log_line_print(stdout, line, strlen(line));
}

/*
 * A VM that stopped without a clean power-off keeps its run dir, or, when the command that
 * started it gave up on it, its logs under ~/.berth/runs/<boot id>/ (runs/latest-<name>
 * points there). Its console mirrors the guest log as "[src] line", so that is what is
 * left to show. A run dir stays for 'berth vm status' to report.
 */
static int print_stopped_log(const char *name, const char *dir, bool raw)
{
	_cleanup_free_ char *path = NULL, *text = NULL, *reason = stale_reason(dir),
			    *shown = term_text_dup(reason, TERM_TEXT_LOG_LINE);
	char *save = NULL;

	if (asprintf(&path, "%s/console.log", dir) < 0 ||
	    read_file_tail(path, 64 * 1024 * 1024, &text) < 0)
		return log_error("VM \"%s\" is not running and left no console log", name), 1;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (l[0] != '[' || strneq(l, "[event]", 7) || strneq(l, "[ ", 2))
			continue;
		if (raw)
			print_raw_line(l);
		else {
			term_text_puts(stdout, l, TERM_TEXT_LOG_LINE);
			putchar('\n');
		}
	}
	fflush(stdout);
	log_warning("VM \"%s\" is not running (%s); above is the guest log its console kept", name,
		    shown ?: "stopped");
	return 0;
}

/* The logs the last failed boot of @name left under ~/.berth/runs, or NULL. */
static char *kept_logs_dir(const char *name)
{
	_cleanup_free_ char *home = berth_home(), *link = NULL;
	char target[64], *dir = NULL;
	ssize_t n;

	if (!home || !vm_name_valid(name) || asprintf(&link, "%s/runs/latest-%s", home, name) < 0)
		return NULL;
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return NULL;
	target[n] = '\0';
	/* A boot id, nothing else: the link must not lead anywhere else. */
	if (strspn(target, "0123456789abcdef-") != (size_t)n ||
	    asprintf(&dir, "%s/runs/%s", home, target) < 0)
		return NULL;
	return dir;
}

int cmd_vm_logs(int argc, char **argv)
{
	static const struct option options[] = {{"follow", no_argument, NULL, 'f'},
						{"json", no_argument, NULL, 'j'},
						{"help", no_argument, NULL, 'h'},
						{}};
	_cleanup_free_ char *dir = NULL;
	bool follow = false, raw = false;
	LineReader lr;
	pid_t pid;
	char *line;
	int c, fd, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f", options, NULL)) >= 0) {
		if (c == 'f')
			follow = true;
		else if (c == 'j')
			raw = true;
		else if (c == 'h') {
			printf("usage: berth vm logs NAME [--follow] [--json]\n");
			return 0;
		} else
			return 2;
	}
	if (optind >= argc)
		return log_error("usage: berth vm logs NAME [--follow]"), 2;
	dir = berth_run_dir(argv[optind]);
	if (dir && rundir_inspect(dir, &pid) == RUNDIR_STALE)
		return print_stopped_log(argv[optind], dir, raw);
	if (dir && rundir_inspect(dir, &pid) == RUNDIR_ABSENT) {
		_cleanup_free_ char *kept = kept_logs_dir(argv[optind]);

		if (kept)
			return print_stopped_log(argv[optind], kept, raw);
	}
	free(dir);
	dir = running_dir(argv[optind]);
	if (!dir)
		return 1;
	fd = vm_socket_connect(dir, "logs.sock");
	if (fd < 0) /* shutting down: what its console kept is all there is */
		return print_stopped_log(argv[optind], dir, raw);
	line_reader_init(&lr, fd, VM_LINE_MAX);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		json_t *o;

		r = line_reader_next(&lr, follow ? -1 : STATUS_TIMEOUT_MS, &line, NULL);
		if (r <= 0)
			break;
		if (streq(line, "log stream attached"))
			continue;
		if (strneq(line, LOG_STREAM_REFUSED, strlen(LOG_STREAM_REFUSED))) {
			log_error("%s", line);
			r = -EBUSY;
			break;
		}
		o = json_loads(line, 0, NULL);
		if (json_is_string(json_object_get(o, "event")) &&
		    streq(json_string_value(json_object_get(o, "event")), "log_replay_end")) {
			json_decref(o);
			if (!follow) {
				r = 0;
				break;
			}
			continue;
		}
		json_decref(o);
		print_log_line(line, raw);
	}
	line_reader_done(&lr);
	close(fd);
	if (r == -EBUSY)
		return 1;
	if (r < 0 && r != -ETIME)
		return log_error_errno(r, "reading the log stream failed: %m"), 1;
	return 0;
}

static int wait_pidfd_gone(int pidfd, int timeout_ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};

	if (pidfd < 0)
		return 0;
	return poll(&p, 1, timeout_ms) > 0 ? 0 : -ETIME;
}

/* Kill @pid only if it still is the QEMU of @dir: pids get reused, so the check and the
 * kill go through one pidfd. */
static void kill_if_qemu_of(pid_t pid, const char *dir)
{
	_cleanup_free_ char *path = NULL, *cmd = NULL;
	_cleanup_close_ int pidfd = pid > 1 ? pidfd_open(pid, 0) : -EBADF;
	size_t len = 0;

	if (pidfd < 0 || asprintf(&path, "/proc/%d/cmdline", (int)pid) < 0 ||
	    read_full_file(path, 256 * 1024, &cmd, &len) < 0)
		return;
	for (size_t i = 0; i < len; i++)
		if (cmd[i] == '\0')
			cmd[i] = ' ';
	if (strstr(cmd, "qemu-system") && strstr(cmd, dir))
		(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
}

int cmd_vm_stop(int argc, char **argv)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_(json_decrefp) json_t *vm = NULL;
	const char *env = getenv("BERTH_VM_STOP_TIMEOUT_MS");
	unsigned timeout = STOP_TIMEOUT_MS_DEFAULT;
	long long t0 = now_ms();
	_cleanup_close_ int pidfd = -EBADF;
	pid_t pid;
	int r;

	if (argc < 2 || argv[1][0] == '-')
		return log_error("usage: berth vm stop NAME"), 2;
	if (env && parse_uint_range(env, 100, 3600000, &timeout) < 0)
		return log_error(
			       "BERTH_VM_STOP_TIMEOUT_MS must be milliseconds from 100 to 3600000"),
		       2;
	dir = running_dir(argv[1]);
	if (!dir)
		return 1;
	vm = vm_json_load(dir);
	/* A pidfd taken now, while the pid is known to be this run dir's berth-vmm: every
	 * signal below goes to that process, even if it dies and its pid is reused. */
	if (rundir_inspect(dir, &pid) == RUNDIR_RUNNING && pid > 0)
		pidfd = pidfd_open(pid, 0);
	if (pidfd < 0 && rundir_inspect(dir, &pid) == RUNDIR_RUNNING)
		return log_error_errno(errno, "cannot follow berth-vmm (pid %d): %m", (int)pid), 1;

	/* berth-vmm knows the guest: it asks one that answered on its channel to power off,
	 * and kills one that never did at once (there is nothing of it to lose). */
	r = pidfd >= 0 ? RET_NERRNO(pidfd_send_signal(pidfd, SIGTERM, NULL, 0)) : -ESRCH;
	if (r < 0 && r != -ESRCH)
		log_warning_errno(r, "cannot signal berth-vmm (pid %d): %m; killing it", (int)pid);
	else if (r == -ESRCH || wait_pidfd_gone(pidfd, (int)timeout) == 0) {
		/* berth-vmm removes its run dir after a clean power-off; make sure. */
		(void)rundir_remove_if_stale(dir);
		printf("stopped \"%s\" in %lld ms\n", argv[1], now_ms() - t0);
		return 0;
	} else
		log_warning("\"%s\" did not power off within %u ms; killing it", argv[1], timeout);

	/* berth-vmm's QEMU dies with it (parent-death signal); kill QEMU too in case. */
	(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	if (json_is_integer(json_object_get(vm, "enginePid")))
		kill_if_qemu_of((pid_t)json_integer_value(json_object_get(vm, "enginePid")), dir);
	(void)wait_pidfd_gone(pidfd, 5000);
	rundir_remove(dir);
	printf("killed \"%s\" after %lld ms (it did not shut down cleanly)\n", argv[1],
	       now_ms() - t0);
	return 1;
}
