/* SPDX-License-Identifier: Apache-2.0 */
/* Installing the pinned artifacts under ~/.berth/vm (vm-install.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifact-url.h"
#include "config.h"
#include "digest.h"
#include "docker-image.h"
#include "fileio.h"
#include "install.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "time-util.h"
#include "vm-install.h"
#include "vm-launch.h"
#include "vmm.h"

#define PROGRESS_INTERVAL_MS 100
#define PROGRESS_BAR_WIDTH 30

/* How the ✔ line names each way an artifact got in place. */
static const char *const origin_text[_INSTALL_ORIGIN_MAX] = {
	[INSTALL_ORIGIN_ALREADY] = "already installed",
	[INSTALL_ORIGIN_DIR] = "from",
	[INSTALL_ORIGIN_DOWNLOAD] = "downloaded",
	[INSTALL_ORIGIN_MISSING] = "missing",
};

typedef struct Progress {
	const char *name;
	uint64_t last_ms;
	bool drawn;
} Progress;

static void progress_draw(void *userdata, uint64_t done, uint64_t total)
{
	Progress *p = userdata;
	char bar[PROGRESS_BAR_WIDTH + 1];
	uint64_t t = (uint64_t)now_ms();
	size_t fill;

	if (total == 0 || (done < total && p->drawn && t - p->last_ms < PROGRESS_INTERVAL_MS))
		return;
	p->last_ms = t;
	p->drawn = true;
	fill = (size_t)(done * PROGRESS_BAR_WIDTH / total);
	memset(bar, '#', fill);
	memset(bar + fill, '.', PROGRESS_BAR_WIDTH - fill);
	bar[PROGRESS_BAR_WIDTH] = '\0';
	fprintf(stderr, "\r\033[K  %-6s [%s] %3u%%  %.1f of %.1f MiB", p->name, bar,
		(unsigned)(done * 100 / total), done / 1048576.0, total / 1048576.0);
	fflush(stderr);
}

static void progress_clear(Progress *p)
{
	if (p->drawn) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
		p->drawn = false;
	}
}

/* 57575404 -> "57,575,404" */
static void format_bytes(uint64_t n, char *buf, size_t len)
{
	char digits[32], out[48];
	size_t nd, o = 0;

	nd = (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, n);
	for (size_t i = 0; i < nd; i++) {
		if (i > 0 && (nd - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
	snprintf(buf, len, "%s", out);
}

/*
 * The pins to install are those of the berth-vmm that will boot the files, because it
 * refuses anything else; the CLI's own copy only stands in when there is no berth-vmm yet.
 */
static int pins_choose(const VmInstallOptions *o, const BerthConfig *config, PinSet *ret,
		       char *desc, size_t desclen)
{
	_cleanup_free_ char *found = NULL;
	int r;

	if (o->vmm) {
		r = vmm_query_pins(o->vmm, ret);
		if (r < 0)
			return log_error_errno(
				r,
				"--vmm %s: '%s pins --json' did not print a pin set (%m); is it a berth-vmm binary?",
				o->vmm, o->vmm);
		snprintf(desc, desclen, "berth-vmm %s", o->vmm);
		return 0;
	}
	r = vmm_locate(config->vm_vmm, &found);
	if (r >= 0) {
		r = vmm_query_pins(found, ret);
		if (r >= 0) {
			snprintf(desc, desclen, "berth-vmm %s", found);
			return 0;
		}
		log_warning_errno(
			r,
			"%s did not report its pins (%m); using the pins built into this CLI, which that berth-vmm may not boot",
			found);
	}
	pinset_compiled(ret);
	snprintf(desc, desclen, "this CLI (%s)",
		 found ? "its berth-vmm did not report any" : "no berth-vmm found");
	return 0;
}

static void print_installed(ArtifactKind kind, const PinSet *pins, const InstallResult *res,
			    const char *from)
{
	char size[48], how[PATH_MAX + 64];

	format_bytes(pins->size[kind], size, sizeof(size));
	if (res->origin == INSTALL_ORIGIN_DIR)
		snprintf(how, sizeof(how), "from %s", from);
	else if (res->origin == INSTALL_ORIGIN_DOWNLOAD && res->fetch.attempts > 1)
		snprintf(how, sizeof(how), "downloaded in %u attempts", res->fetch.attempts);
	else
		snprintf(how, sizeof(how), "%s", origin_text[res->origin]);
	printf("✔ %s %.16s… verified (%s), %s B\n", artifact_kind_to_string(kind),
	       pins->sha256[kind], how, size);
	fflush(stdout);
	if (*res->note)
		log_warning("%s: %s", artifact_kind_to_string(kind), res->note);
}

typedef struct Sources {
	const char *from;
	const char *url;
	char *url_hint;
} Sources;

static void sources_done(Sources *s)
{
	free(s->url_hint);
}

static int sources_resolve(const VmInstallOptions *o, const BerthConfig *config, Sources *ret)
{
	char err[512];
	ConfigSource src_from, src_url;
	struct stat st;

	ret->from = config_get(config, CONFIG_ARTIFACTS_DIR, o->from, &src_from);
	ret->url = config_get(config, CONFIG_ARTIFACTS_URL, o->url, &src_url);
	ret->url_hint = config_source_describe(config, CONFIG_ARTIFACTS_URL, src_url);
	if (!ret->url_hint)
		return log_error_errno(-ENOMEM, "Out of memory");
	if (ret->from && (stat(ret->from, &st) < 0 || !S_ISDIR(st.st_mode))) {
		_cleanup_free_ char *where =
			config_source_describe(config, CONFIG_ARTIFACTS_DIR, src_from);

		return log_error_errno(
			-ENOTDIR,
			"%s is not a directory (from %s); pass --from with the build output, e.g. out/artifacts",
			ret->from, where ? where : "--from");
	}
	/* An unused URL is not worth failing over. */
	if (ret->url && !o->no_download && artifact_url_check(ret->url, err, sizeof(err)) < 0)
		return log_error_errno(-EINVAL,
				       "%s (from %s); see docs/vm-install.md for the placeholders",
				       err, ret->url_hint);
	return 0;
}

static int install_all(const VmInstallOptions *o, const PinSet *pins, const char *vm_dir,
		       const Sources *s)
{
	Progress progress = {};
	InstallOptions io = {
		.from_dir = s->from,
		.url_template = o->no_download ? NULL : s->url,
		.url_hint = s->url_hint,
		.no_download = o->no_download,
		.force = o->force,
		.progress = isatty(STDERR_FILENO) ? progress_draw : NULL,
		.userdata = &progress,
	};
	char missing[_ARTIFACT_KIND_MAX][2048];
	unsigned n_missing = 0;

	unsigned n_wanted = 0;

	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		InstallResult res;
		char err[2048];
		int r;

		/* The layers only when asked for (--layer, or an app that needs one). */
		if (k >= ARTIFACT_BASE_MAX ? !(o->layers & (1u << k)) : o->layers_only)
			continue;
		if (k >= ARTIFACT_BASE_MAX && !pins->sha256[k][0])
			return log_error_errno(
				-ENOENT,
				"this berth-vmm has no %s pinned, so it cannot boot one: "
				"install a berth-vmm built with the layer's manifest "
				"(docs/browser.md)",
				artifact_kind_to_string(k));
		n_wanted++;
		progress.name = artifact_kind_to_string(k);
		r = install_artifact(pins, vm_dir, k, &io, &res, err, sizeof(err));
		progress_clear(&progress);
		if (r < 0 && res.origin == INSTALL_ORIGIN_MISSING) {
			snprintf(missing[n_missing++], sizeof(missing[0]), "%s", err);
			continue;
		}
		if (r < 0)
			return log_error_errno(r, "%s", *err ? err : strerror(-r));
		print_installed(k, pins, &res, s->from);
	}
	if (n_missing == 0)
		return 0;
	log_error("%u of %u artifacts are missing:", n_missing, n_wanted);
	for (unsigned i = 0; i < n_missing; i++)
		log_error("  %s", missing[i]);
	return log_error_errno(-ENOENT, "%s", install_missing_hint(&io));
}

/*
 * The warm-start snapshots, made by the berth-vmm that will restore them, once the
 * artifacts are in place: one for each VM size berth dev and berth mcp use (vm-launch.h),
 * since a snapshot restores only a VM of its own size. Without one a VM boots cold, which
 * is slower but as good: a failure here is told, not fatal.
 */
static void make_snapshot(const BerthConfig *config, const PinSet *pins)
{
	static const unsigned sizes[] = {VM_LAUNCH_MEM_ONE_MIB, VM_LAUNCH_MEM_CONTEXT_MIB,
					 VM_LAUNCH_MEM_SEVERAL_MIB};
	_cleanup_free_ char *vmm = NULL;
	bool matches = false;

	if (vmm_locate_for_pins(config->vm_vmm, pins, &vmm, &matches) < 0 || !matches) {
		printf("  (no berth-vmm for these pins: VMs will boot cold until `berth vm install --vmm PATH`)\n");
		return;
	}
	printf("Making the warm-start snapshots (a template boot for each VM size: %u, %u and %u MiB; once per kernel, image and berth-vmm)\n",
	       sizes[0], sizes[1], sizes[2]);
	fflush(stdout);
	for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
		char mem[16];
		int status;
		pid_t pid;

		snprintf(mem, sizeof(mem), "%u", sizes[i]);
		pid = fork();
		if (pid == 0) {
			execl(vmm, vmm, "snapshot", "--mem", mem, (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			log_warning(
				"no warm-start snapshot was made for %s MiB VMs (see above): they "
				"will boot cold; try again with `berth vm install`, or see "
				"docs/warm-start.md",
				mem);
			return;
		}
	}
}

/* The Docker runtime's base image, made from the rootfs just verified (docker-image.h). */
static int make_docker_image(const PinSet *pins, const char *vm_dir)
{
	_cleanup_free_ char *path = pinset_install_path(pins, vm_dir, ARTIFACT_ROOTFS),
			    *docker = NULL, *cache = NULL;
	_cleanup_close_ int fd = -EBADF;
	char sha[SHA256_HEX_LEN + 1], err[1024];
	DockerImage img;
	int r;

	docker = docker_program(err, sizeof(err));
	if (!docker)
		return log_error_errno(-ENOENT, "%s", err);
	if (!path || asprintf(&cache, "%s/cache", vm_dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return log_error_errno(errno, "cannot open %s: %m", path);
	/* What is extracted is what was hashed: the same descriptor. */
	r = sha256_fd_hex(fd, sha, NULL);
	if (r < 0 || !streq(sha, pins->sha256[ARTIFACT_ROOTFS]))
		return log_error_errno(r < 0 ? r : -EPERM,
				       "%s does not match its pin; run 'berth vm install --force'",
				       path);
	printf("Making the Docker base image from rootfs %.16s… (once per rootfs)\n", sha);
	fflush(stdout);
	r = docker_image_ensure(docker, fd, sha, cache, &img, err, sizeof(err));
	if (r < 0)
		return log_error_errno(r, "the Docker base image: %s", err);
	if (img.made)
		printf("✔ Docker base image %s (%s) made in %ld ms\n", img.tag, img.id,
		       img.make_ms);
	else
		printf("✔ Docker base image %s (%s) already there\n", img.tag, img.id);
	return 0;
}

int vm_install(const VmInstallOptions *o)
{
	_cleanup_(config_done) BerthConfig config = {};
	_cleanup_(sources_done) Sources sources = {};
	_cleanup_free_ char *vm_dir = NULL;
	char desc[PATH_MAX + 64], err[PATH_MAX + 256], vmm_path[PATH_MAX];
	ConfigError cerr = {};
	PinSet pins;
	int r;

	r = config_load(NULL, &config, &cerr);
	if (r < 0) {
		config_error_format(&cerr, err, sizeof(err));
		return log_error_errno(r, "%s", err);
	}
	vm_dir = berth_vm_dir();
	if (!vm_dir)
		return log_error_errno(-ENOENT, "cannot find the home directory; set BERTH_HOME");
	r = sources_resolve(o, &config, &sources);
	if (r < 0)
		return r;
	r = pins_choose(o, &config, &pins, desc, sizeof(desc));
	if (r < 0)
		return r;
	printf("Installing into %s the artifacts pinned by %s\n", vm_dir, desc);
	fflush(stdout);

	r = install_all(o, &pins, vm_dir, &sources);
	if (r < 0)
		return r;
	/* Last, and only once the files it will boot are in place: which berth-vmm is installed
	 * decides which pins are trusted. A layer installed on an app's first need takes that
	 * berth-vmm's pins and leaves which one is installed alone. */
	if (o->vmm && !o->layers_only) {
		r = install_vmm(o->vmm, vm_dir, vmm_path, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s", err);
		if (r > 0)
			printf("✔ berth-vmm installed from %s as %s\n", o->vmm, vmm_path);
		else
			printf("✔ berth-vmm %s already installed\n", vmm_path);
	}
	if (o->layers_only) {
		printf("Ready: the layer is verified in %s\n", vm_dir);
		return 0;
	}
	printf("Ready: kernel, initrd and rootfs%s verified in %s\n",
	       o->layers ? " and the layers" : "", vm_dir);
	fflush(stdout);
	if (o->docker)
		return make_docker_image(&pins, vm_dir);
	if (!o->no_snapshot)
		make_snapshot(&config, &pins);
	return 0;
}
