/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth mcp --app NAME [--app-dir DIR]: serve an app's exports as MCP tools over stdio
 * (SPEC §3.2-3.5, docs/mcp.md). The options, then the VM (vm.c), then the session
 * (session.c); mcp.h says what each file of this directory does.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attest.h"
#include "cli.h"
#include "commands.h"
#include "log.h"
#include "macros.h"
#include "mcp.h"
#include "parse-util.h"
#include "random-util.h"
#include "relay.h"
#include "rundir.h"
#include "tools.h"

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **split_only(const char *s)
{
	_cleanup_free_ char *copy = strdup(s);
	char **v = calloc(strlen(s) / 2 + 2, sizeof(char *));
	size_t n = 0;

	if (!copy || !v) {
		free(v);
		return NULL;
	}
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		t += strspn(t, " ");
		for (size_t k = strlen(t); k > 0 && t[k - 1] == ' '; k--)
			t[k - 1] = '\0';
		if (*t)
			v[n++] = strdup(t);
	}
	return v;
}

enum {
	O_APP = 0x100,
	O_APP_DIR,
	O_ONLY,
	O_CONTAINER,
	O_BOOT,
	O_NO_BOOT,
	O_WARM,
	O_BOOT_TIMEOUT,
	O_RUNTIME,
	O_RUN_ID,
	O_ENV,
	O_ENV_FILE,
	O_PRINT_CONFIG,
};

static int parse_args(int argc, char **argv, Mcp *c)
{
	static const struct option options[] = {
		{"app", required_argument, NULL, O_APP},
		{"app-dir", required_argument, NULL, O_APP_DIR},
		{"only", required_argument, NULL, O_ONLY},
		{"container", required_argument, NULL, O_CONTAINER},
		{"boot", no_argument, NULL, O_BOOT},
		{"no-boot", no_argument, NULL, O_NO_BOOT},
		{"warm", no_argument, NULL, O_WARM},
		{"boot-timeout", required_argument, NULL, O_BOOT_TIMEOUT},
		{"runtime", required_argument, NULL, O_RUNTIME},
		{"run-id", required_argument, NULL, O_RUN_ID},
		{"env", required_argument, NULL, O_ENV},
		{"env-file", required_argument, NULL, O_ENV_FILE},
		{"print-config", required_argument, NULL, O_PRINT_CONFIG},
		{"help", no_argument, NULL, 'h'},
		{}};
	const char *env = getenv("BERTH_MCP_CALL_TIMEOUT_MS");
	int opt;

	c->app_dir = ".";
	c->boot_timeout_s = MCP_BOOT_TIMEOUT_S_DEFAULT;
	c->call_timeout_ms = MCP_CALL_TIMEOUT_MS_DEFAULT;
	if (env && parse_uint_range(env, 100, 24 * 3600 * 1000, &c->call_timeout_ms) < 0)
		return log_error("BERTH_MCP_CALL_TIMEOUT_MS must be milliseconds from 100 to "
				 "86400000");
	optind = 0;
	while ((opt = cli_getopt(argc, argv, "", options)) != -1) {
		switch (opt) {
		case O_APP:
			c->app = optarg;
			break;
		case O_APP_DIR:
			c->app_dir = optarg;
			break;
		case O_ONLY:
			strv_free(c->only);
			c->only = split_only(optarg);
			if (!c->only || !c->only[0]) {
				cli_usage_error("--only needs a comma-separated list of exports");
				return -EINVAL;
			}
			break;
		case O_CONTAINER:
			c->container = optarg;
			break;
		case O_BOOT:
			c->no_boot = false;
			break;
		case O_NO_BOOT:
			c->no_boot = true;
			break;
		case O_WARM:
			c->warm = true;
			break;
		case O_BOOT_TIMEOUT:
			if (parse_uint_range(optarg, 1, 3600, &c->boot_timeout_s) < 0) {
				cli_usage_error("--boot-timeout must be seconds from 1 to 3600");
				return -EINVAL;
			}
			break;
		case O_RUNTIME:
			c->runtime = optarg;
			break;
		case O_RUN_ID:
			if (!attest_run_id_valid(optarg)) {
				cli_usage_error(
					"--run-id must be 1-128 of A-Z a-z 0-9 . _ - and not "
					"start with '.'");
				return -EINVAL;
			}
			free(c->run_id);
			c->run_id = strdup(optarg);
			break;
		case O_ENV:
			if (vm_launch_add_env(&c->l, optarg) < 0)
				return -EINVAL;
			c->env_given = true;
			break;
		case O_PRINT_CONFIG:
			c->print_config = optarg;
			break;
		case O_ENV_FILE:
			if (vm_launch_add_env_file(&c->l, optarg) < 0)
				return -EINVAL;
			c->env_given = true;
			break;
		case CLI_OPT_HELP:
			cli_set_help_fd(c->out_fd);
			cli_print_help();
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]), -EINVAL;
	if (!c->app)
		return cli_usage_error("--app NAME is required: the app whose exports to serve"),
		       -EINVAL;
	return 0;
}

static int make_run_id(Mcp *c)
{
	char rnd[7];
	char stamp[32];
	time_t t = time(NULL);
	struct tm tm;

	random_hex(rnd, 3);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (!c->run_id && asprintf(&c->run_id, "mcp-%s-%s-%s", c->l.name, stamp, rnd) < 0)
		return -ENOMEM;
	if (!attest_run_id_valid(c->run_id))
		return log_error("the run id %s is not valid; pass --run-id", c->run_id);
	random_hex(c->bridge, 8);
	return 0;
}

/* A signal while the VM boots: the boot is cut short and what it started is stopped. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	stop_requested = sig;
}

static void catch_stop_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART: waits end */

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* Load berth.yml and check --only: everything a session needs before it looks for a VM. */
static int load_app(Mcp *c)
{
	_cleanup_free_ char *bad = NULL;
	int r;

	c->l.boot_timeout_ms = c->boot_timeout_s * 1000;
	r = vm_launch_load(&c->l, c->app_dir, c->runtime, "berth-mcp-");
	if (r < 0)
		return log_error("couldn't load berth.yml from \"%s\": see above", c->app_dir);
	if (asprintf(&c->manifest_path, "%s/berth.yml", c->l.app_dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	if (!streq(c->app, c->l.name))
		log_warning("--app %s differs from the name in %s (\"%s\"); serving \"%s\"", c->app,
			    c->manifest_path, c->l.name, c->l.name);
	bad = mcp_check_only(c->l.name, c->l.manifest, c->only);
	if (bad)
		return log_error("%s", bad);
	c->server = (McpServer){.app = c->l.name, .manifest = c->l.manifest, .only = c->only};
	return make_run_id(c);
}

/* Attach to a running VM, or decide to boot the session's own (in serve, on the loop). */
static int choose_vm(Mcp *c)
{
	int r;

	if (!c->warm && mcp_find_running(c) >= 0) {
		r = mcp_attach(c);
		c->phase = MCP_PHASE_RECORDING;
		return r;
	}
	if (c->container && !c->warm)
		return log_error("no running VM is called %s; see 'berth vm status'", c->container);
	if (c->no_boot)
		return log_error("no VM runs \"%s\" and --no-boot was given; start it with 'berth "
				 "dev %s' or drop --no-boot",
				 c->l.name, c->l.app_dir);
	if (c->warm)
		return mcp_boot_own(c);
	c->owned = true; /* booted by mcp_serve(), on the loop */
	c->phase = MCP_PHASE_BOOTING;
	return 0;
}

static int run(Mcp *c)
{
	const char *capture = getenv("BERTH_AUDIT_CAPTURE_PAYLOADS");
	int r;

	r = load_app(c);
	if (r >= 0)
		r = choose_vm(c);
	if (r < 0)
		return r;
	if (stop_requested)
		return log_error("stopped by signal %d before serving", (int)stop_requested);
	if (c->warm) {
		mcp_say("warm: \"%s\" boots; its bundle and the VM artifacts are ready for the "
			"next session",
			c->l.name);
		return 0;
	}
	r = audit_sink_open(NULL, capture && streq(capture, "1"), &c->audit);
	if (r < 0)
		log_warning("cannot open the audit trail (%s); tool calls will not be recorded",
			    strerror(-r));
	return mcp_serve(c);
}

static void mcp_done(Mcp *c)
{
	if (c->owned && c->l.vm_name &&
	    rundir_inspect(c->l.run_dir, &(pid_t){0}) != RUNDIR_ABSENT) {
		mcp_say("stopping the VM %s it booted", c->l.vm_name);
		(void)vm_launch_stop(&c->l);
	}
	ev_loop_free(c->loop);
	audit_sink_free(c->audit);
	vm_launch_done(&c->l);
	mcp_state_done(&c->state);
	strv_free(c->only);
	free(c->run_id);
	free(c->vm_name);
	free(c->run_dir);
	free(c->rpc_socket);
	free(c->manifest_path);
}

int cmd_mcp(int argc, char **argv)
{
	Mcp c = {.out_fd = -EBADF,
		 .l.prefix = "", /* the relay prefixes every line */
		 .enforcement = ENFORCEMENT_UNKNOWN,
		 .app_cwd = "/app"};
	int r, status;

	/* A client that goes away mid-answer must not kill us before the VM is stopped. */
	signal(SIGPIPE, SIG_IGN);
	catch_stop_signals();
	r = relay_start(&c.out_fd);
	if (r < 0)
		return log_error_errno(r, "cannot set up standard output for MCP: %m"), 1;
	log_setup("berth", LOG_LEVEL_INFO);
	r = parse_args(argc, argv, &c);
	if (r != 0)
		status = r < 0 ? CLI_EXIT_USAGE : 0;
	else if (c.print_config) {
		r = mcp_print_config(&c);
		status = r < 0 ? 1 : r;
	} else
		status = run(&c) < 0 ? 1 : 0;
	mcp_done(&c);
	relay_stop();
	return status;
}
