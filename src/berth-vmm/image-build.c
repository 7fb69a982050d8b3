/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm image: an app as a runnable, self-contained Docker image (berth deploy, berth
 * test). It is Berth's base image (docker-image.h) with the app's share at /app, the boot
 * plan that berth-vmm would give a VM (the apps and their compiled policies, no secrets)
 * at /etc/berth/boot.img, and berth-init as its entrypoint in standalone mode: each app's
 * RPC on /run/berth-rpc/<app>.sock (berth-init's container.h). It leaves no berth-vmm
 * behind it, so an app that needs one (the egress dialer, the GitHub broker, a published
 * port) is refused.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capability.h"
#include "docker-image.h"
#include "exec-util.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "vmm-run.h"

#define BUILD_TIMEOUT_MS (10 * 60 * 1000)

static void usage(void)
{
	printf("usage: berth-vmm image --app DIR [--app DIR]... --tag TAG [--artifacts DIR] [--for-test]\n"
	       "  Build the apps (bundled shares) into a Docker image on Berth's base image and\n"
	       "  print {\"image\", \"tag\", ...} as one JSON line.\n");
}

/* What a deployed image has no berth-vmm for. */
static const char *needs_vmm(const char *cap)
{
	static const struct {
		const char *prefix, *why;
	} host_side[] = {
		{"network:host:", "berth-vmm's egress dialer"},
		{"browser:", "the browser layer and the egress dialer"},
		{"github:", "the GitHub broker's way out, berth-vmm's dialer"},
		{"terminal:", "a published port, which berth-vmm serves"},
	};

	for (size_t i = 0; i < ELEMENTSOF(host_side); i++)
		if (strneq(cap, host_side[i].prefix, strlen(host_side[i].prefix)))
			return host_side[i].why;
	return NULL;
}

static int check_standalone(const Vmm *v)
{
	for (size_t i = 0; i < v->n_apps; i++) {
		json_t *caps = json_object_get(v->apps[i].manifest, "capabilities"), *c;
		size_t k;

		json_array_foreach(caps, k, c) {
			const char *s = json_string_value(c), *why = s ? needs_vmm(s) : NULL;

			if (why)
				return log_error(
					"\"%s\" in %s's berth.yml needs %s, which a deployed "
					"image has not; run the app with berth dev or berth mcp "
					"(--runtime docker or vm) instead",
					s, v->apps[i].name, why);
		}
	}
	return 0;
}

static int run_tool(char *const argv[], char **ret_out)
{
	RunCapture o = {
		.timeout_ms = BUILD_TIMEOUT_MS, .max_bytes = 256 * 1024, .with_stderr = true};
	_cleanup_free_ char *out = NULL;
	int status, r = run_capture_opts(argv, &o, &out, &status);

	if (r < 0)
		return log_error_errno(r, "%s %s: %m", argv[0], argv[1]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return log_error("%s %s failed: %.2000s", argv[0], argv[1], out ? out : ""), -EIO;
	if (ret_out)
		*ret_out = TAKE_PTR(out);
	return 0;
}

static int copy_tree(const char *from, const char *to)
{
	char *const argv[] = {"/bin/cp", "-R", "--no-dereference", (char *)from, (char *)to, NULL};

	return run_tool(argv, NULL);
}

static int write_context(const Vmm *v, const DockerImage *base, const char *ctx)
{
	_cleanup_free_ char *df = NULL, *boot = NULL, *text = NULL, *buf = NULL;
	FILE *f;
	struct stat st;
	size_t len = 0;
	int r;

	if (mkdir(ctx, 0700) < 0 || asprintf(&boot, "%s/boot.img", ctx) < 0 ||
	    asprintf(&df, "%s/Dockerfile", ctx) < 0)
		return -errno ?: -ENOMEM;
	/* The boot disk: the plan, compiled as for a VM, without secrets. */
	if (fstat(v->boot_fd, &st) < 0 || !(buf = malloc((size_t)st.st_size)) ||
	    pread(v->boot_fd, buf, (size_t)st.st_size, 0) != st.st_size)
		return -EIO;
	r = write_file_atomic(boot, buf, (size_t)st.st_size, 0600);
	if (r < 0)
		return r;
	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "FROM %s\n", base->id);
	for (size_t i = 0; i < v->n_apps; i++) {
		_cleanup_free_ char *dst = NULL;

		if (asprintf(&dst, "%s/app%zu", ctx, i) < 0)
			return fclose(f), -ENOMEM;
		r = copy_tree(v->apps[i].dir, dst);
		if (r < 0)
			return fclose(f), r;
		if (v->n_apps == 1)
			fprintf(f, "COPY app0 /app\n");
		else
			fprintf(f, "COPY app%zu /app/%s\n", i, v->apps[i].name);
	}
	fprintf(f, "COPY boot.img /etc/berth/boot.img\n");
	fprintf(f, "ENV BERTH_CONTAINER=1 BERTH_STANDALONE=1\n");
	fprintf(f, "VOLUME [\"/workspace\", \"/state\", \"/context\"]\n");
	fprintf(f, "LABEL org.berth.rootfs.sha256=\"%s\" org.berth.base=\"%s\"",
		v->artifacts.a[ARTIFACT_ROOTFS].sha256, base->id);
	for (size_t i = 0; i < v->n_apps; i++)
		fprintf(f,
			" org.berth.app.%zu.name=\"%s\" org.berth.app.%zu.tree.sha256=\"%s\" "
			"org.berth.app.%zu.policy.sha256=\"%s\"",
			i, v->apps[i].name, i, v->apps[i].digest.tree_sha256, i,
			v->apps[i].policy_sha256);
	fprintf(f, "\nENTRYPOINT [\"/usr/sbin/berth-init\"]\n");
	if (fclose(f) != 0)
		return -ENOMEM;
	return write_file_atomic(df, text, len, 0600);
}

int vmm_image_main(int argc, char **argv)
{
	static const struct option options[] = {{"app", required_argument, NULL, 'a'},
						{"tag", required_argument, NULL, 't'},
						{"artifacts", required_argument, NULL, 'A'},
						{"for-test", no_argument, NULL, 'T'},
						{"help", no_argument, NULL, 'h'},
						{}};
	_cleanup_free_ char *vm_dir = NULL, *work = NULL, *ctx = NULL, *docker = NULL, *out = NULL,
			    *cache = NULL;
	const char *tag = NULL, *artifacts = NULL;
	bool for_test = false;
	char err[1024], id[128] = "";
	DockerImage base;
	Vmm v = {};
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'a':
			if (v.args.n_apps >= VMM_APPS_MAX)
				return log_error("at most %d --app", VMM_APPS_MAX), 2;
			v.args.apps[v.args.n_apps++] = optarg;
			break;
		case 't':
			tag = optarg;
			break;
		case 'A':
			artifacts = optarg;
			break;
		case 'T':
			for_test = true;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return 2;
		}
	}
	if (!v.args.n_apps || !tag || optind < argc)
		return log_error("berth-vmm image needs --app DIR and --tag TAG; see --help"), 2;
	vm_dir = artifacts ? strdup(artifacts) : berth_vm_dir();
	docker = docker_program(err, sizeof(err));
	if (!docker)
		return log_error("%s", err), 1;
	if (!vm_dir || asprintf(&cache, "%s/cache", vm_dir) < 0 || mkdir_p(cache, 0700) < 0 ||
	    asprintf(&work, "%s/image.XXXXXX", cache) < 0 || !mkdtemp(work) ||
	    asprintf(&ctx, "%s/context", work) < 0)
		return log_error_errno(-errno ?: -ENOMEM, "cannot make a work directory: %m"), 1;
	r = vmm_plan_image(&v, work);
	/* berth test runs each export once, where one that needs the host side fails on its
	 * own; an image to deploy must not need it at all. */
	if (r >= 0 && !for_test)
		r = check_standalone(&v);
	if (r >= 0) {
		r = artifacts_open_verified(vm_dir, NULL, false, &v.artifacts, err, sizeof(err));
		if (r < 0)
			log_error("%s", err);
	}
	if (r >= 0) {
		r = docker_image_ensure(docker, v.artifacts.a[ARTIFACT_ROOTFS].fd,
					v.artifacts.a[ARTIFACT_ROOTFS].sha256, cache, &base, err,
					sizeof(err));
		if (r < 0)
			log_error("the base image: %s", err);
	}
	if (r >= 0) {
		r = write_context(&v, &base, ctx);
		if (r < 0)
			log_error_errno(r, "cannot write the build context in %s: %m", ctx);
	}
	if (r >= 0) {
		/* The classic builder: it needs nothing but dockerd, and no registry. */
		char *const build[] = {docker, "build", "--quiet", "--tag", (char *)tag, ctx, NULL};

		(void)setenv("DOCKER_BUILDKIT", "0", 1);
		r = run_tool(build, &out);
		/* --quiet prints the id, after whatever notice the builder gives first. */
		const char *at = NULL;

		for (const char *p = out; p && (p = strstr(p, "sha256:")); p++)
			at = p;
		if (r >= 0 && (!at || sscanf(at, "%127s", id) != 1 || strlen(id) != 71)) {
			log_error("docker build printed no image id: %.500s", out ? out : "");
			r = -EIO;
		}
	}
	{
		char *const rm[] = {"/bin/rm", "-rf", "--one-file-system", work, NULL};

		(void)run_tool(rm, NULL);
	}
	if (r >= 0) {
		json_t *apps = json_array();

		for (size_t i = 0; i < v.n_apps; i++)
			json_array_append_new(apps,
					      json_pack("{s:s, s:s, s:s}", "name", v.apps[i].name,
							"treeSha256", v.apps[i].digest.tree_sha256,
							"policySha256", v.apps[i].policy_sha256));
		json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:o}", "image", id, "tag", tag,
					"base", base.id, "rootfsSha256",
					v.artifacts.a[ARTIFACT_ROOTFS].sha256, "apps", apps);
		char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(doc);
	}
	vmm_done(&v);
	return r < 0 ? 1 : 0;
}
