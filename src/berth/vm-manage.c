/* SPDX-License-Identifier: Apache-2.0 */
/* Stopping a VM and printing its log, by name (vm-manage.h). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "paths.h"
#include "rundir.h"
#include "term-text.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-manage.h"

#define LOG_REPLAY_TIMEOUT_MS 5000

char *vm_stale_reason(const char *run_dir)
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(run_dir);
	_cleanup_free_ char *path = NULL, *log = NULL;
	const char *state = json_string_value(json_object_get(vm, "state"));
	char *last = NULL, *reason = NULL;

	if (asprintf(&path, "%s/vmm.log", run_dir) >= 0 &&
	    read_file_tail(path, 64 * 1024, &log) >= 0) {
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

char *vm_running_dir(const char *name)
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
		_cleanup_free_ char *reason = vm_stale_reason(dir),
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
	_cleanup_free_ char *path = NULL, *text = NULL, *reason = vm_stale_reason(dir),
			    *shown = term_text_dup(reason, TERM_TEXT_LOG_LINE);
	char *save = NULL;

	if (asprintf(&path, "%s/console.log", dir) < 0 ||
	    read_file_tail(path, 64 * 1024 * 1024, &text) < 0)
		return log_error_errno(-ENOENT, "VM \"%s\" is not running and left no console log",
				       name);
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

int vm_logs_print(const char *name, const VmLogsOptions *o)
{
	_cleanup_free_ char *dir = berth_run_dir(name);
	LineReader lr;
	pid_t pid;
	char *line;
	int fd, r;

	if (dir && rundir_inspect(dir, &pid) == RUNDIR_STALE)
		return print_stopped_log(name, dir, o->raw);
	if (dir && rundir_inspect(dir, &pid) == RUNDIR_ABSENT) {
		_cleanup_free_ char *kept = kept_logs_dir(name);

		if (kept)
			return print_stopped_log(name, kept, o->raw);
	}
	free(dir);
	dir = vm_running_dir(name);
	if (!dir)
		return -ESRCH;
	fd = vm_socket_connect(dir, "logs.sock");
	if (fd < 0) /* shutting down: what its console kept is all there is */
		return print_stopped_log(name, dir, o->raw);
	line_reader_init(&lr, fd, VM_LINE_MAX);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		json_t *ev;

		r = line_reader_next(&lr, o->follow ? -1 : LOG_REPLAY_TIMEOUT_MS, &line, NULL);
		if (r <= 0)
			break;
		if (streq(line, "log stream attached"))
			continue;
		if (strneq(line, LOG_STREAM_REFUSED, strlen(LOG_STREAM_REFUSED))) {
			log_error("%s", line);
			r = -EBUSY;
			break;
		}
		ev = json_loads(line, 0, NULL);
		if (json_is_string(json_object_get(ev, "event")) &&
		    streq(json_string_value(json_object_get(ev, "event")), "log_replay_end")) {
			json_decref(ev);
			if (!o->follow) {
				r = 0;
				break;
			}
			continue;
		}
		json_decref(ev);
		print_log_line(line, o->raw);
	}
	line_reader_done(&lr);
	close(fd);
	if (r == -EBUSY)
		return r;
	if (r < 0 && r != -ETIME)
		return log_error_errno(r, "reading the log stream failed: %m");
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

int vm_stop_timeout(unsigned *ret_ms)
{
	const char *env = getenv("BERTH_VM_STOP_TIMEOUT_MS");

	*ret_ms = VM_STOP_TIMEOUT_MS_DEFAULT;
	if (env && parse_uint_range(env, 100, 3600000, ret_ms) < 0)
		return log_error_errno(
			-EINVAL, "BERTH_VM_STOP_TIMEOUT_MS must be milliseconds from 100 to 3600000");
	return 0;
}

int vm_stop(const char *name, const char *dir, unsigned timeout_ms)
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(dir);
	/* Taken while the pid is known to be this run dir's berth-vmm: every signal below
	 * goes to that process, even if it dies and its pid is reused. */
	_cleanup_close_ int pidfd = rundir_open_pidfd(dir);
	long long t0 = now_ms();
	pid_t pid;
	int r;

	if (pidfd < 0 && pidfd != -ESRCH)
		return log_error_errno(pidfd, "cannot follow the berth-vmm of \"%s\": %m", name);
	if (pidfd == -ESRCH && rundir_inspect(dir, &pid) == RUNDIR_RUNNING)
		return log_error_errno(-EAGAIN,
				       "\"%s\" is still starting (its berth-vmm has not written its "
				       "pid yet); try again in a moment",
				       name);

	/* berth-vmm knows the guest: it asks one that answered on its channel to power off,
	 * and kills one that never did at once (there is nothing of it to lose). */
	r = pidfd >= 0 ? RET_NERRNO(pidfd_send_signal(pidfd, SIGTERM, NULL, 0)) : -ESRCH;
	if (r < 0 && r != -ESRCH)
		log_warning_errno(r, "cannot signal the berth-vmm of \"%s\": %m; killing it", name);
	else if (r == -ESRCH || wait_pidfd_gone(pidfd, (int)timeout_ms) == 0) {
		/* berth-vmm removes its run dir after a clean power-off; make sure. */
		(void)rundir_remove_if_stale(dir);
		printf("stopped \"%s\" in %lld ms\n", name, now_ms() - t0);
		fflush(stdout);
		return 0;
	} else
		log_warning("\"%s\" did not power off within %u ms; killing it", name, timeout_ms);

	/* berth-vmm's QEMU dies with it (parent-death signal); kill QEMU too in case. */
	(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	if (json_is_integer(json_object_get(vm, "enginePid")))
		kill_if_qemu_of((pid_t)json_integer_value(json_object_get(vm, "enginePid")), dir);
	(void)wait_pidfd_gone(pidfd, 5000);
	(void)rundir_remove(dir);
	printf("killed \"%s\" after %lld ms (it did not shut down cleanly)\n", name,
	       now_ms() - t0);
	fflush(stdout);
	return 1;
}
