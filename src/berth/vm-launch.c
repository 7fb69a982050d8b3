/* SPDX-License-Identifier: Apache-2.0 */
/* Booting one app in its own VM, for berth dev and berth mcp (vm-launch.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "exec-util.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"
#include "runtime-select.h"
#include "source-dir.h"
#include "vm-client.h"
#include "vm-launch.h"
#include "vm-support.h"
#include "vmm.h"

#define VMM_ARGS_MAX 64

long long vm_launch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(const VmLaunch *l, const char *fmt, ...) _printf_(2, 3);
static void say(const VmLaunch *l, const char *fmt, ...)
{
	va_list ap;

	fputs(l->prefix, stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

int vm_launch_load_manifest(const char *dir, Manifest **ret)
{
	_cleanup_free_ char *path = NULL;
	ManifestError err = {};
	int r;

	if (asprintf(&path, "%s/berth.yml", dir) < 0)
		return -ENOMEM;
	r = manifest_load_at(AT_FDCWD, path, ret, &err);
	if (r == -ENOENT)
		return log_error(
			"%s has no berth.yml: point at an app folder (berth init NAME makes one)",
			dir);
	if (r < 0) {
		fprintf(stderr, "%s\n", err.text ? err.text : strerror(-r));
		manifest_error_done(&err);
		return r;
	}
	return 0;
}

int vm_launch_load(VmLaunch *l, const char *app_dir, const char *runtime_flag,
		   const char *vm_name_prefix)
{
	_cleanup_free_ char *vm_dir = NULL, *reason = NULL;
	int r;

	if (l->boot_timeout_ms == 0)
		l->boot_timeout_ms = VM_LAUNCH_BOOT_TIMEOUT_MS_DEFAULT;
	l->app_dir = realpath(app_dir, NULL);
	if (!l->app_dir)
		return log_error_errno(errno, "%s: %m", app_dir);
	/* An invalid berth.yml is reported before anything boots. */
	r = vm_launch_load_manifest(l->app_dir, &l->manifest);
	if (r < 0)
		return r;
	r = runtime_select(runtime_flag, &reason);
	if (r < 0)
		return log_error("%s", reason);
	free(reason);
	reason = NULL;
	r = vm_support_check(l->manifest, &reason);
	if (r < 0)
		return log_error("%s", reason ? reason : "this app cannot run in the VM");
	l->name = strdup(manifest_name(l->manifest));
	vm_dir = berth_vm_dir();
	if (!l->name || !vm_dir || asprintf(&l->vm_name, "%s%s", vm_name_prefix, l->name) < 0 ||
	    !(l->run_dir = berth_run_dir(l->vm_name)) ||
	    asprintf(&l->state, "%s/state/%s.img", vm_dir, l->name) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	return 0;
}

/* The berth-vmm built for this CLI's artifacts, or another with a warning. */
static int locate_vmm(VmLaunch *l)
{
	PinSet mine;
	bool matches;
	int r;

	pinset_compiled(&mine);
	r = vmm_locate_for_pins(NULL, &mine, &l->vmm, &matches);
	if (r >= 0 && !matches)
		log_warning(
			"%s was built for other artifacts than this berth; using it anyway (install the matching one with 'berth vm install --vmm PATH')",
			l->vmm);
	return r;
}

/* The VM needs the pinned artifacts; install them from this checkout or the configured
 * source when they are missing, as `berth vm install` would. */
static int ensure_artifacts(VmLaunch *l)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *from = NULL;
	char *argv[8] = {"install", NULL};
	int argc = 1, r;
	bool missing = false;
	PinSet pins;

	if (vmm_query_pins(l->vmm, &pins) < 0)
		pinset_compiled(&pins);
	for (int k = 0; k < _ARTIFACT_KIND_MAX && !missing; k++) {
		_cleanup_free_ char *p = pinset_install_path(&pins, vm_dir, k);

		missing = !p || access(p, R_OK) < 0;
	}
	if (!missing)
		return 0;
	say(l, "the pinned kernel and root image are not installed yet; installing them");
	if (berth_source_path("out/artifacts/manifest-rootfs.json", &from) >= 0) {
		*strrchr(from, '/') = '\0';
		argv[argc++] = "--from";
		argv[argc++] = from;
	}
	argv[argc++] = "--vmm";
	argv[argc++] = l->vmm;
	optind = 1;
	r = cmd_vm_install(argc, argv);
	return r == 0 ? 0
		      : log_error(
				"could not install the VM artifacts; see above, or run 'berth vm install'");
}

int vm_launch_prepare(VmLaunch *l)
{
	if (locate_vmm(l) < 0)
		return log_error(
			"berth-vmm not found: build it (scripts/build.sh) or install it with 'berth vm install --vmm PATH'");
	return ensure_artifacts(l);
}

int vm_launch_bundle(VmLaunch *l, char *err, size_t errlen)
{
	Bundle b;
	int r;

	r = bundle_app(l->app_dir, l->name, &b, err, errlen);
	if (r < 0)
		return r;
	bundle_done(&l->bundle);
	l->bundle = b;
	return 0;
}

int vm_launch_stop(VmLaunch *l)
{
	char *argv[] = {"stop", l->vm_name, NULL};

	optind = 1;
	return cmd_vm_stop(2, argv);
}

/* A VM whose app failed powers off by itself once no app is left; wait for that (or stop
 * it), so its log is read from a run dir that no longer changes. */
static void settle_failed_vm(VmLaunch *l)
{
	long long deadline = vm_launch_now_ms() + 20000;
	pid_t pid;

	while (rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING && vm_launch_now_ms() < deadline)
		usleep(100 * 1000);
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING)
		(void)vm_launch_stop(l);
}

int vm_launch_boot(VmLaunch *l, long long *ret_ms, char ret_boot_id[37])
{
	_cleanup_free_ char *out = NULL;
	_cleanup_(json_decrefp) json_t *vm = NULL;
	char *argv[VMM_ARGS_MAX + 12] = {l->vmm,  "run",	 "--name",  l->vm_name,
					 "--app", l->bundle.dir, "--state", l->state};
	size_t argc = 8;
	char reason[512];
	long long t0 = vm_launch_now_ms();
	int status, r;

	for (size_t i = 0; l->vmm_args && l->vmm_args[i]; i++) {
		if (i >= VMM_ARGS_MAX)
			return log_error("too many berth-vmm arguments (at most %d)", VMM_ARGS_MAX);
		argv[argc++] = l->vmm_args[i];
	}
	argv[argc] = NULL;
	r = run_capture(argv, 120 * 1000, 1024 * 1024, &out, &status);
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* berth-vmm explains itself on stderr, which run_capture() discards: ask again. */
		return log_error(
			"berth-vmm could not start the VM; run '%s run --name %s --app %s --foreground --console-stderr' to see why",
			l->vmm, l->vm_name, l->bundle.dir);
	}
	r = vm_wait_ready(l->run_dir, 1, (int)l->boot_timeout_ms, reason, sizeof(reason));
	if (r < 0) {
		char *largv[] = {"logs", l->vm_name, NULL};

		if (r == -ETIME)
			snprintf(reason, sizeof(reason), "the app was not ready within %u ms",
				 l->boot_timeout_ms);
		log_error("%s; its log follows (berth vm logs %s)", reason, l->vm_name);
		settle_failed_vm(l);
		optind = 1;
		(void)cmd_vm_logs(2, largv);
		return -EIO;
	}
	*ret_ms = vm_launch_now_ms() - t0;
	vm = vm_json_load(l->run_dir);
	snprintf(ret_boot_id, 37, "%s", json_string_value(json_object_get(vm, "bootId")) ?: "?");
	return 0;
}

void vm_launch_done(VmLaunch *l)
{
	bundle_done(&l->bundle);
	manifest_free(l->manifest);
	free(l->app_dir);
	free(l->name);
	free(l->vm_name);
	free(l->run_dir);
	free(l->vmm);
	free(l->state);
	*l = (VmLaunch){};
}
