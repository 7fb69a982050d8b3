/* SPDX-License-Identifier: Apache-2.0 */
/* berth vm status | logs | stop: find VMs through their run dirs and talk to them. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"
#include "term-text.h"
#include "utf8.h"
#include "vm-client.h"
#include "vm-manage.h"

#define STATUS_TIMEOUT_MS 5000

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
		reason = vm_stale_reason(dir);
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
/* Restored from a snapshot (which one) or booted cold (and why). */
static void print_boot(json_t *boot)
{
	json_t *snap = json_object_get(boot, "snapshot");

	if (!boot)
		return;
	if (snap)
		term_text_line(stdout, 0, "  boot: restored from snapshot %.12s (made %s)",
			       str_of(snap, "sha256", "?"), str_of(snap, "createdAt", "?"));
	else
		term_text_line(stdout, 0, "  boot: cold (%s)", str_of(boot, "reason", "?"));
}

/* The guest ports published to the host: the socket berth dev serves on loopback. */
static void print_published(json_t *published)
{
	json_t *p;
	size_t i;

	json_array_foreach(published, i, p)
		term_text_line(stdout, 0, "  published: guest port %lld of %s at %s",
			       json_integer_value(json_object_get(p, "port")),
			       str_of(p, "app", "?"), str_of(p, "socket", "?"));
}

static void print_vm(json_t *vm)
{
	json_t *guest = json_object_get(vm, "guest"), *app;
	size_t i;

	term_text_line(stdout, 0, "%s  berth-vmm pid %lld  boot %s  started %s",
		       str_of(vm, "name", ""), json_integer_value(json_object_get(vm, "pid")),
		       str_of(vm, "bootId", "?"), str_of(vm, "startedAt", "?"));
	term_text_line(stdout, 0, "  run dir %s", str_of(vm, "runDir", "?"));
	json_t *container = json_object_get(vm, "container");

	if (container)
		term_text_line(stdout, 0,
			       "  container %s on the host's kernel %s (Landlock ABI %lld)",
			       str_of(container, "name", "?"),
			       str_of(json_object_get(container, "hostKernel"), "release", "?"),
			       json_integer_value(json_object_get(
				       json_object_get(container, "hostKernel"), "landlockAbi")));
	term_text_line(
		stdout, 0, "  %s, %s (%s), %lld vCPUs, %lld MiB, no network device",
		str_of(vm, "state", "unknown"), str_of(vm, "engine", "?"),
		str_of(vm, "accelerator", "?"),
		json_integer_value(json_object_get(json_object_get(vm, "vmConfig"), "cpus")),
		json_integer_value(json_object_get(json_object_get(vm, "vmConfig"), "memMiB")));
	if (json_is_string(json_object_get(json_object_get(vm, "accel"), "reason")))
		term_text_line(stdout, 0, "  accelerator: %s",
			       str_of(json_object_get(vm, "accel"), "reason", ""));
	print_boot(json_object_get(vm, "boot"));
	print_published(json_object_get(json_object_get(vm, "endpoints"), "published"));
	if (json_is_string(json_object_get(json_object_get(vm, "failure"), "reason")))
		term_text_line(stdout, 0, "  failed: %s",
			       str_of(json_object_get(vm, "failure"), "reason", ""));
	if (!guest) {
		printf("  guest: not answering on its control port (still booting?)\n");
		return;
	}
	json_array_foreach(json_object_get(guest, "apps"), i, app) {
		json_t *cg = json_object_get(app, "cgroup");
		json_int_t reloads = json_integer_value(json_object_get(app, "reloads"));
		char reloaded[64] = "";

		if (json_is_true(json_object_get(app, "reloading")))
			snprintf(reloaded, sizeof(reloaded), ", being reloaded in place");
		else if (reloads > 0)
			snprintf(reloaded, sizeof(reloaded), ", reloaded in place %lld time%s",
				 (long long)reloads, reloads == 1 ? "" : "s");
		term_text_line(stdout, 0, "  %s: %s, pid %lld, uid %lld%s%s%s",
			       str_of(app, "name", "?"), str_of(app, "state", "?"),
			       json_integer_value(json_object_get(app, "pid")),
			       json_integer_value(json_object_get(app, "uid")), cg ? ", " : "",
			       cg ? str_of(cg, "summary", "") : "", reloaded);
	}
	if (json_array_size(json_object_get(guest, "apps")) == 0)
		printf("  no apps running\n");
}

int cmd_vm_status(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {}};
	_cleanup_free_ char *root = berth_run_root();
	_cleanup_(json_decrefp) json_t *running = json_array(), *stale = json_array(),
				       *out = json_array();
	Sweep s = {.running = running, .stale = stale};
	bool json = false;
	const char *only = NULL;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (argc - optind > 1)
		return cli_usage_error("one VM at a time, not '%s' too", argv[optind + 1]);
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
	return only && json_array_size(out) == 0 ? 1 : 0;
}

int cmd_vm_logs(int argc, char **argv)
{
	static const struct option options[] = {{"follow", no_argument, NULL, 'f'},
						{"json", no_argument, NULL, 'j'},
						{"help", no_argument, NULL, 'h'},
						{}};
	VmLogsOptions o = {};
	int c;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "f", options)) != -1) {
		if (c == 'f')
			o.follow = true;
		else if (c == 'j')
			o.raw = true;
		else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (optind >= argc)
		return cli_usage_error("which VM? Give its name ('berth vm status' lists them)");
	if (argc - optind > 1)
		return cli_usage_error("one VM at a time, not '%s' too", argv[optind + 1]);
	return vm_logs_print(argv[optind], &o) < 0 ? 1 : 0;
}

int cmd_vm_stop(int argc, char **argv)
{
	static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {}};
	_cleanup_free_ char *dir = NULL;
	unsigned timeout;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c != CLI_OPT_HELP)
			return CLI_EXIT_USAGE;
		cli_print_help();
		return 0;
	}
	if (optind >= argc)
		return cli_usage_error("which VM? Give its name ('berth vm status' lists them)");
	if (argc - optind > 1)
		return cli_usage_error("one VM at a time, not '%s' too", argv[optind + 1]);
	if (vm_stop_timeout(&timeout) < 0)
		return CLI_EXIT_USAGE;
	dir = vm_running_dir(argv[optind]);
	if (!dir)
		return 1;
	r = vm_stop(argv[optind], dir, timeout);
	return r == 0 ? 0 : 1;
}
