/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifact-url.h"
#include "commands.h"
#include "config.h"
#include "fileio.h"
#include "install.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "time-util.h"
#include "vmm.h"

#define PROGRESS_INTERVAL_MS 100
#define PROGRESS_BAR_WIDTH 30

static const char *arg_from;
static const char *arg_url;
static const char *arg_vmm;
static bool arg_no_download;
static bool arg_force;

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

static void help(void)
{
	printf("usage: berth vm install [--from DIR] [--url TEMPLATE] [--no-download] [--force] [--vmm PATH]\n"
	       "\n"
	       "Install the pinned guest kernel, initrd and root image under ~/.berth/vm, each\n"
	       "checked against its sha256 pin before it is put in place.\n"
	       "\n"
	       "  --from DIR       copy from DIR: the build output (out/artifacts), release assets,\n"
	       "                   one subdirectory per sha256, or another ~/.berth/vm\n"
	       "                   (default: $BERTH_VMM_ARTIFACTS, then vm.artifactsDir)\n"
	       "  --url TEMPLATE   download what DIR lacks, e.g. 'https://mirror/{asset}'\n"
	       "                   (default: $BERTH_VM_ARTIFACTS_URL, then vm.artifactsUrl)\n"
	       "  --no-download    copy from DIR only\n"
	       "  --force          replace files that are installed and match\n"
	       "  --vmm PATH       install PATH as ~/.berth/vm/bin/berth-vmm and use its pins\n"
	       "\n"
	       "See docs/vm-install.md.\n");
}

static int parse_argv(int argc, char **argv)
{
	enum { ARG_NO_DOWNLOAD = 0x100, ARG_FORCE, ARG_VMM };
	static const struct option options[] = {
		{"help", no_argument, NULL, 'h'},
		{"from", required_argument, NULL, 'f'},
		{"url", required_argument, NULL, 'u'},
		{"no-download", no_argument, NULL, ARG_NO_DOWNLOAD},
		{"force", no_argument, NULL, ARG_FORCE},
		{"vmm", required_argument, NULL, ARG_VMM},
		{},
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case 'f':
			arg_from = optarg;
			break;
		case 'u':
			arg_url = optarg;
			break;
		case ARG_NO_DOWNLOAD:
			arg_no_download = true;
			break;
		case ARG_FORCE:
			arg_force = true;
			break;
		case ARG_VMM:
			arg_vmm = optarg;
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; see 'berth vm install --help'", argv[optind]);
		return -EINVAL;
	}
	return 1;
}

static void progress_draw(void *userdata, uint64_t done, uint64_t total)
{
	Progress *p = userdata;
	char bar[PROGRESS_BAR_WIDTH + 1];
	uint64_t t = now_ms();
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
static int pins_choose(const BerthConfig *config, PinSet *ret, char *desc, size_t desclen)
{
	_cleanup_free_ char *found = NULL;
	int r;

	if (arg_vmm) {
		r = vmm_query_pins(arg_vmm, ret);
		if (r < 0)
			return log_error_errno(
				r,
				"--vmm %s: '%s pins --json' did not print a pin set (%m); is it a berth-vmm binary?",
				arg_vmm, arg_vmm);
		snprintf(desc, desclen, "berth-vmm %s", arg_vmm);
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

static int sources_resolve(const BerthConfig *config, Sources *ret)
{
	char err[512];
	ConfigSource src_from, src_url;
	struct stat st;

	ret->from = config_get(config, CONFIG_ARTIFACTS_DIR, arg_from, &src_from);
	ret->url = config_get(config, CONFIG_ARTIFACTS_URL, arg_url, &src_url);
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
	if (ret->url && !arg_no_download && artifact_url_check(ret->url, err, sizeof(err)) < 0)
		return log_error_errno(-EINVAL,
				       "%s (from %s); see docs/vm-install.md for the placeholders",
				       err, ret->url_hint);
	return 0;
}

static int install_all(const PinSet *pins, const char *vm_dir, const Sources *s)
{
	Progress progress = {};
	InstallOptions o = {
		.from_dir = s->from,
		.url_template = arg_no_download ? NULL : s->url,
		.url_hint = s->url_hint,
		.no_download = arg_no_download,
		.force = arg_force,
		.progress = isatty(STDERR_FILENO) ? progress_draw : NULL,
		.userdata = &progress,
	};
	char missing[_ARTIFACT_KIND_MAX][2048];
	unsigned n_missing = 0;

	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		InstallResult res;
		char err[2048];
		int r;

		progress.name = artifact_kind_to_string(k);
		r = install_artifact(pins, vm_dir, k, &o, &res, err, sizeof(err));
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
	log_error("%u of %d artifacts are missing:", n_missing, _ARTIFACT_KIND_MAX);
	for (unsigned i = 0; i < n_missing; i++)
		log_error("  %s", missing[i]);
	return log_error_errno(-ENOENT, "%s", install_missing_hint(&o));
}

int cmd_vm_install(int argc, char **argv)
{
	_cleanup_(config_done) BerthConfig config = {};
	_cleanup_(sources_done) Sources sources = {};
	_cleanup_free_ char *vm_dir = NULL;
	char desc[PATH_MAX + 64], err[PATH_MAX + 256], vmm_path[PATH_MAX];
	ConfigError cerr = {};
	PinSet pins;
	int r;

	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;

	r = config_load(NULL, &config, &cerr);
	if (r < 0) {
		config_error_format(&cerr, err, sizeof(err));
		log_error("%s", err);
		return 1;
	}
	vm_dir = berth_vm_dir();
	if (!vm_dir)
		return log_error("cannot find the home directory; set BERTH_HOME"), 1;
	if (sources_resolve(&config, &sources) < 0)
		return 1;
	if (pins_choose(&config, &pins, desc, sizeof(desc)) < 0)
		return 1;
	printf("Installing into %s the artifacts pinned by %s\n", vm_dir, desc);
	fflush(stdout);

	if (install_all(&pins, vm_dir, &sources) < 0)
		return 1;
	/* Last, and only once the files it will boot are in place: which berth-vmm is installed
	 * decides which pins are trusted. */
	if (arg_vmm) {
		r = install_vmm(arg_vmm, vm_dir, vmm_path, err, sizeof(err));
		if (r < 0)
			return log_error("%s", err), 1;
		if (r > 0)
			printf("✔ berth-vmm installed from %s as %s\n", arg_vmm, vmm_path);
		else
			printf("✔ berth-vmm %s already installed\n", vmm_path);
	}
	printf("Ready: kernel, initrd and rootfs verified in %s\n", vm_dir);
	return 0;
}
