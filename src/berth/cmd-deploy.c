/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth deploy and berth test: the app as a Docker image of its own (berth-vmm image, on
 * Berth's base image made from the pinned rootfs), then either told how to run it and
 * pushed where asked, or run once with the stub invocation of every export (SPEC 2.9).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "docker-image.h"
#include "exec-util.h"
#include "log.h"
#include "macros.h"
#include "random-util.h"
#include "vm-launch.h"

#define IMAGE_TIMEOUT_MS (10 * 60 * 1000)
#define TEST_TIMEOUT_MS (5 * 60 * 1000)
#define OUTPUT_MAX (1024 * 1024)

typedef struct AppImage {
	VmLaunch l;
	char *tag;
	json_t *built; /* berth-vmm image's answer */
} AppImage;

static void app_image_done(AppImage *a)
{
	vm_launch_done(&a->l);
	free(a->tag);
	json_decref(a->built);
}

/* Run @argv; 0 and its output, or -errno / -EIO after printing what it said. */
static int run_tool(char *const argv[], int timeout_ms, char **ret_out)
{
	RunCapture o = {.timeout_ms = timeout_ms, .max_bytes = OUTPUT_MAX, .with_stderr = true};
	_cleanup_free_ char *out = NULL;
	int status, r = run_capture_opts(argv, &o, &out, &status);

	if (r < 0)
		return log_error_errno(r, "%s %s: %s", argv[0], argv[1],
				       r == -ETIME ? "timed out" : strerror(-r));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s", out ? out : "");
		return log_error("%s %s failed (see above)", argv[0], argv[1]), -EIO;
	}
	*ret_out = TAKE_PTR(out);
	return 0;
}

/* Load, bundle and build @dir's app as @tag (NULL: @default_prefix<name>:<version>). */
static int app_image_build(AppImage *a, const char *dir, const char *tag,
			   const char *default_prefix, const char *prefix, bool for_test)
{
	_cleanup_free_ char *out = NULL;
	char err[1024];
	const char *last;
	int r;

	a->l.prefix = prefix;
	r = vm_launch_load(&a->l, dir, "docker", "berth-image-");
	if (r < 0)
		return r;
	r = vm_launch_prepare(&a->l);
	if (r < 0)
		return r;
	r = vm_launch_bundle(&a->l, err, sizeof(err));
	if (r < 0)
		return log_error("cannot bundle %s: %s", a->l.app_dir, err);
	if (tag)
		a->tag = strdup(tag);
	else if (asprintf(&a->tag, "%s%s:%s", default_prefix, a->l.name,
			  manifest_version(a->l.manifest) ?: "latest") < 0)
		a->tag = NULL;
	if (!a->tag)
		return log_error_errno(-ENOMEM, "out of memory");
	fprintf(stderr, "%sbuilding %s from %s\n", prefix, a->tag, a->l.bundle.dir);
	char *const argv[] = {a->l.vmm,
			      "image",
			      "--app",
			      a->l.bundle.dir,
			      "--tag",
			      a->tag,
			      for_test ? "--for-test" : NULL,
			      NULL};

	r = run_tool(argv, IMAGE_TIMEOUT_MS, &out);
	if (r < 0)
		return r;
	/* Its last line is the answer; what comes before is its log. */
	for (size_t n = strlen(out); n > 0 && out[n - 1] == '\n';)
		out[--n] = '\0';
	last = strrchr(out, '\n');
	a->built = json_loads(last ? last + 1 : out, 0, NULL);
	if (!json_is_string(json_object_get(a->built, "image")))
		return log_error("berth-vmm image gave no image: %.500s", out), -EIO;
	return 0;
}

static const char *built(const AppImage *a, const char *key)
{
	return json_string_value(json_object_get(a->built, key)) ?: "";
}

/* --- berth deploy -------------------------------------------------------------------- */

static void print_run(const AppImage *a)
{
	const char *name = a->l.name;

	printf("Run it; each app's RPC is a unix socket in the directory bound at /run/berth-rpc:\n");
	printf("  mkdir -p %s-rpc\n", name);
	printf("  docker run -d --name %s", name);
	for (const char *const *arg = docker_confinement_args; *arg; arg++)
		printf(" %s", *arg);
	printf(" -v \"$PWD/%s-rpc:/run/berth-rpc\" %s\n", name, built(a, "image"));
	printf("  berth rpc %s --socket %s-rpc/%s.sock --export <name>\n", name, name, name);
}

int cmd_deploy(int argc, char **argv)
{
	static const struct option options[] = {{"tag", required_argument, NULL, 't'},
						{"push", required_argument, NULL, 'p'},
						{"help", no_argument, NULL, 'h'},
						{}};
	_cleanup_free_ char *pushed = NULL;
	const char *tag = NULL, *push = NULL, *dir = ".";
	AppImage a = {};
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 't')
			tag = optarg;
		else if (c == 'p')
			push = optarg;
		else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		dir = argv[optind++];
	if (optind < argc)
		return cli_usage_error("one app folder at a time, not '%s' too", argv[optind]);
	r = app_image_build(&a, dir, tag, "berth-app-", "[berth:deploy] ", false);
	if (r >= 0) {
		printf("Built %s\n", a.tag);
		printf("  image  %s\n", built(&a, "image"));
		printf("  base   %s (the pinned rootfs %.16s…)\n", built(&a, "base"),
		       built(&a, "rootfsSha256"));
		json_t *app;
		size_t i;

		json_array_foreach(json_object_get(a.built, "apps"), i, app)
			printf("  app    %s: share %.16s…, policy %.16s…\n",
			       json_string_value(json_object_get(app, "name")),
			       json_string_value(json_object_get(app, "treeSha256")),
			       json_string_value(json_object_get(app, "policySha256")));
		print_run(&a);
	}
	/* Nowhere unless asked: a registry is named with --push. */
	if (r >= 0 && push) {
		_cleanup_free_ char *out = NULL, *out2 = NULL;
		char *docker = NULL, err[512];

		docker = docker_program(err, sizeof(err));
		if (!docker)
			r = (log_error("%s", err), -ENOENT);
		else {
			char *const tagv[] = {docker, "tag", (char *)built(&a, "image"),
					      (char *)push, NULL};
			char *const pushv[] = {docker, "push", (char *)push, NULL};

			r = run_tool(tagv, IMAGE_TIMEOUT_MS, &out);
			if (r >= 0)
				r = run_tool(pushv, IMAGE_TIMEOUT_MS, &out2);
			if (r >= 0)
				printf("Pushed %s\n%s", push, out2);
			free(docker);
		}
	}
	app_image_done(&a);
	return r < 0 ? 1 : 0;
}

/* --- berth test ------------------------------------------------------------------------ */

/* The app's report in the container's console: "[<app>] {...}" with ok and results. */
static json_t *find_report(const char *console, const char *app)
{
	_cleanup_free_ char *prefix = NULL;
	json_t *found = NULL;

	if (asprintf(&prefix, "[%s] {", app) < 0)
		return NULL;
	for (const char *p = console; p && *p;) {
		size_t n = strcspn(p, "\n");

		if (n > strlen(prefix) && strneq(p, prefix, strlen(prefix))) {
			const char *j = p + strlen(prefix) - 1;
			json_t *o = json_loadb(j, n - (size_t)(j - p), 0, NULL);

			if (json_is_boolean(json_object_get(o, "ok")) &&
			    json_is_array(json_object_get(o, "results"))) {
				json_decref(found);
				found = o;
			} else
				json_decref(o);
		}
		p += n + (p[n] == '\n');
	}
	return found;
}

/* What agent-init said about the app's confinement, for the person running the test. */
static void echo_confinement(const char *console, const char *app)
{
	_cleanup_free_ char *prefix = NULL;

	if (asprintf(&prefix, "[%s] [agent-init] ", app) < 0)
		return;
	for (const char *p = console; *p;) {
		size_t n = strcspn(p, "\n");

		if (strneq(p, prefix, strlen(prefix)))
			fprintf(stderr, "%.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

int cmd_test(int argc, char **argv)
{
	static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {}};
	_cleanup_(json_decrefp) json_t *report = NULL;
	_cleanup_free_ char *docker = NULL, *out = NULL, *text = NULL;
	const char *dir = ".";
	AppImage a = {};
	char err[512], uuid[RANDOM_UUID_LEN + 1], name[64];
	int c, r, status;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		}
		return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		dir = argv[optind++];
	if (optind < argc)
		return cli_usage_error("one app folder at a time, not '%s' too", argv[optind]);
	/* Standard output carries the one JSON line; progress (an install's too) goes to
	 * standard error. */
	int saved_stdout = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);

	if (saved_stdout < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		return log_error_errno(errno, "cannot set standard output aside: %m"), 1;
	r = app_image_build(&a, dir, NULL, "berth-test-", "[berth:test] ", true);
	if (r >= 0 && !(docker = docker_program(err, sizeof(err))))
		r = (log_error("%s", err), -ENOENT);
	if (r >= 0) {
		random_uuid(uuid);
		snprintf(name, sizeof(name), "--name=berth-test-%.8s", uuid);
		const char *base[] = {docker, "run", "--rm", name, "--env=BERTH_CHECK_EXPORTS=1"};
		char *argv2[5 + 16 + 2] = {};
		size_t n = 0;
		RunCapture o = {.timeout_ms = TEST_TIMEOUT_MS,
				.max_bytes = OUTPUT_MAX,
				.with_stderr = true};

		for (size_t i = 0; i < ELEMENTSOF(base); i++)
			argv2[n++] = (char *)base[i];
		for (const char *const *arg = docker_confinement_args; *arg && n < 20; arg++)
			argv2[n++] = (char *)*arg;
		argv2[n++] = (char *)built(&a, "image");
		fprintf(stderr, "[berth:test] calling every export of %s with stub inputs, in %s\n",
			a.l.name, built(&a, "image"));
		r = run_capture_opts(argv2, &o, &out, &status);
		if (r < 0) {
			/* The client was killed; the container is not gone with it. */
			char *const rm[] = {docker, "rm", "--force", name + 7, NULL};
			_cleanup_free_ char *rm_out = NULL;
			int rm_status;

			(void)run_capture(rm, 30 * 1000, 4096, &rm_out, &rm_status);
			log_error_errno(r, "docker run: %s",
					r == -ETIME ? "timed out" : strerror(-r));
		}
	}
	if (r >= 0) {
		echo_confinement(out ? out : "", a.l.name);
		report = find_report(out ? out : "", a.l.name);
		/* An app that never got to its exports (refused, crashed at start) fails too,
		 * in the same one line. */
		if (!report) {
			fprintf(stderr, "%s", out ? out : "");
			log_error("%s printed no report: it did not start in its image (its log is "
				  "above)",
				  a.l.name);
			report = json_pack("{s:b, s:s, s:[]}", "ok", 0, "error",
					   "the app did not start in its image", "results");
		}
	}
	fflush(stdout);
	(void)dup2(saved_stdout, STDOUT_FILENO);
	close(saved_stdout);
	if (r >= 0) {
		text = json_dumps(report, JSON_COMPACT);
		printf("%s\n", text ? text : "{\"ok\":false}");
		r = json_is_true(json_object_get(report, "ok")) ? 0 : -EPROTO;
	}
	app_image_done(&a);
	return r < 0 ? 1 : 0;
}
