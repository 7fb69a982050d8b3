/* SPDX-License-Identifier: Apache-2.0 */
/* berth rpc <app> --export NAME [--input JSON]: call an app's export in its running VM. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "paths.h"
#include "rundir.h"
#include "term-text.h"
#include "time-util.h"
#include "vm-client.h"

#define RPC_TIMEOUT_MS_DEFAULT 30000
#define CONNECT_RETRY_MS 10000

/* Connect, retrying while nobody listens yet: nothing was sent, so a retry is safe. */
static int connect_rpc(const char *dir, int index)
{
	long long deadline = now_ms() + CONNECT_RETRY_MS;
	char name[32];
	int fd;

	snprintf(name, sizeof(name), "rpc-%d.sock", index);
	for (;;) {
		fd = vm_socket_connect(dir, name);
		if (fd >= 0 || (fd != -ECONNREFUSED && fd != -ENOENT) || now_ms() > deadline)
			return fd;
		usleep(100 * 1000);
	}
}

static int print_result(json_t *reply)
{
	json_t *result = json_object_get(reply, "result");
	char *text;

	/* A reply without "result" means the handler returned nothing: null. */
	text = json_dumps(result ? result : json_null(), JSON_INDENT(2) | JSON_ENCODE_ANY);
	if (!text)
		return log_error("cannot print the result"), 1;
	/* The app's JSON: as it is to a pipe, escaped (the same value) on a terminal. */
	term_text_json(stdout, text, strlen(text));
	putchar('\n');
	free(text);
	return 0;
}

int cmd_rpc(int argc, char **argv)
{
	static const struct option options[] = {
		{"export", required_argument, NULL, 'e'},  {"input", required_argument, NULL, 'i'},
		{"runtime", required_argument, NULL, 'r'}, {"socket", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},	   {}};
	const char *export = NULL, *input_text = NULL, *env = getenv("BERTH_RPC_TIMEOUT_MS");
	const char *runtime = NULL, *socket_path = NULL;
	_cleanup_(json_decrefp) json_t *input = NULL, *req = NULL;
	_cleanup_free_ char *dir = NULL, *line_out = NULL;
	unsigned timeout = RPC_TIMEOUT_MS_DEFAULT;
	char id[32];
	LineReader lr;
	char *line;
	int c, fd, r, index = 0;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 'e')
			export = optarg;
		else if (c == 'i')
			input_text = optarg;
		else if (c == 's')
			socket_path = optarg;
		else if (c == 'r') {
			if (!streq(optarg, "vm") && !streq(optarg, "docker"))
				return cli_usage_error("--runtime takes vm or docker, not '%s'",
						       optarg);
			runtime = optarg;
		} else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (optind >= argc)
		return cli_usage_error("which app? Give its name");
	if (argc - optind > 1)
		return cli_usage_error("one app at a time, not '%s' too", argv[optind + 1]);
	if (!export)
		return cli_usage_error("--export NAME is required: the export to call");
	if (env && parse_uint_range(env, 100, 3600000, &timeout) < 0)
		return log_error("BERTH_RPC_TIMEOUT_MS must be milliseconds from 100 to 3600000"),
		       2;
	if (input_text) {
		json_error_t jerr;

		input = json_loads(input_text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
		if (!input)
			return log_error("--input is not valid JSON: %s (at line %d, column %d)",
					 jerr.text, jerr.line, jerr.column),
			       2;
	}
	r = socket_path ? 0 : vm_find_app(argv[optind], NULL, &dir, &index);
	if (r < 0) {
		/* berth dev's VM for it may have died: its run dir says why. */
		_cleanup_free_ char *name = NULL, *dev_dir = NULL, *failure = NULL, *shown = NULL;

		if (asprintf(&name, "berth-dev-%s", argv[optind]) >= 0 &&
		    (dev_dir = berth_run_dir(name)) && (failure = vm_failure_reason(dev_dir)) &&
		    (shown = term_text_dup(failure, TERM_TEXT_LOG_LINE)))
			return log_error("the VM %s of \"%s\" failed: %s; start it again with "
					 "'berth dev' in its folder",
					 name, argv[optind], shown),
			       1;
	}
	if (r < 0)
		return log_error(
			       "no running VM has an app named \"%s\"; start it with 'berth dev' in its folder (or see 'berth vm status')",
			       argv[optind]),
		       1;

	/* berth rpc calls the app where it runs; --runtime says where the caller expects it. */
	if (runtime && !socket_path) {
		_cleanup_(json_decrefp) json_t *vm = vm_json_load(dir);
		const char *engine = json_string_value(json_object_get(vm, "engine"));
		const char *has = engine && streq(engine, "docker") ? "docker" : "vm";

		if (!streq(has, runtime))
			return log_error(
				       "\"%s\" runs in %s, not under --runtime %s; stop it (berth "
				       "vm stop) and start it again with --runtime %s",
				       argv[optind],
				       streq(has, "docker") ? "a Docker container" : "a VM",
				       runtime, runtime),
			       1;
	}
	snprintf(id, sizeof(id), "%lld", (long long)time(NULL) * 1000 + now_ms() % 1000);
	req = json_pack("{s:s, s:s}", "id", id, "export", export);
	if (input)
		json_object_set(req, "input", input);
	line_out = json_dumps(req, JSON_COMPACT);
	/* --socket: a deployed image's socket (berth deploy), as absolute or relative path. */
	fd = socket_path ? vm_socket_connect(socket_path[0] == '/' ? "" : ".", socket_path)
			 : connect_rpc(dir, index);
	if (fd < 0)
		return log_error_errno(fd, "cannot reach app \"%s\" at %s: %m", argv[optind],
				       socket_path ?: dir),
		       1;
	r = loop_write(fd, line_out, strlen(line_out));
	if (r >= 0)
		r = loop_write(fd, "\n", 1);
	line_reader_init(&lr, fd, VM_LINE_MAX);
	json_error_t jerr = {};
	while (r >= 0) {
		json_t *reply;

		r = line_reader_next(&lr, (int)timeout, &line, NULL);
		if (r == 0) {
			r = -ECONNRESET;
			break;
		}
		if (r < 0)
			break;
		/* An app's strings may hold NUL (a file it read): \u0000 is valid JSON. */
		reply = json_loads(line, JSON_ALLOW_NUL, &jerr);
		if (!reply) {
			r = -EBADMSG;
			break;
		}
		/* Only the answer to our id counts; anything else on the line is not ours. */
		if (!json_is_object(reply) ||
		    !streq(json_string_value(json_object_get(reply, "id")) ?: "", id)) {
			json_decref(reply);
			continue;
		}
		if (json_is_string(json_object_get(reply, "error"))) {
			json_t *error = json_object_get(reply, "error");

			/* The app's own text, which may take several lines (a stack trace). */
			term_text_write(stderr, json_string_value(error), json_string_length(error),
					TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE);
			fputc('\n', stderr);
			json_decref(reply);
			r = 1;
			break;
		}
		r = print_result(reply);
		json_decref(reply);
		break;
	}
	line_reader_done(&lr);
	close(fd);
	if (r == -ETIME)
		return log_error("no answer from \"%s\" within %u ms (BERTH_RPC_TIMEOUT_MS)",
				 argv[optind], timeout),
		       1;
	if (r == -EBADMSG)
		return log_error("\"%s\" answered with a line that is not JSON (%s, column %d); "
				 "its log may say why: berth vm logs",
				 argv[optind], jerr.text, jerr.column),
		       1;
	if (r == -ECONNRESET) {
		_cleanup_free_ char *failure = vm_failure_reason(dir),
				    *shown = term_text_dup(failure, TERM_TEXT_LOG_LINE);

		if (shown)
			return log_error("the VM of \"%s\" failed before it answered: %s",
					 argv[optind], shown),
			       1;
	}
	if (r == -ECONNRESET)
		return log_error(
			       "the connection to \"%s\" closed before an answer; the call may or may not have run (see 'berth vm logs %s')",
			       argv[optind], strrchr(dir, '/') + 1),
		       1;
	if (r < 0)
		return log_error_errno(r, "calling \"%s\" failed: %m", argv[optind]), 1;
	return r;
}
