/* SPDX-License-Identifier: Apache-2.0 */
/* Booting one app in its own VM, for berth dev and berth mcp (vm-launch.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "exec-util.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"
#include "runtime-select.h"
#include "secrets-disk.h"
#include "source-dir.h"
#include "term-text.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-launch.h"
#include "vm-support.h"
#include "vmm.h"

#define VMM_ARGS_MAX 64

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
		/* The message quotes berth.yml, which is the app's text. */
		term_text_puts(stderr, err.text ? err.text : strerror(-r),
			       TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE);
		fputc('\n', stderr);
		manifest_error_done(&err);
		return r;
	}
	return 0;
}

/* The hosts the VM's egress dialer may reach, from berth.yml alone (docs/egress.md). */
static int load_egress(VmLaunch *l)
{
	_cleanup_free_ char *warning = NULL, *reason = NULL;
	const Manifest *apps[] = {l->manifest};
	int r = vm_egress_plan(apps, 1, &l->egress_allow, &warning, &reason);

	if (r == -EOPNOTSUPP)
		return log_error("%s", reason ? reason : "this app's egress cannot run in the VM");
	if (r < 0)
		return log_error_errno(r, "out of memory");
	if (warning)
		log_warning("%s", warning);
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
	r = load_egress(l);
	if (r < 0)
		return r;
	l->name = strdup(manifest_name(l->manifest));
	vm_dir = berth_vm_dir();
	if (!l->name || !vm_dir || asprintf(&l->vm_name, "%s%s", vm_name_prefix, l->name) < 0 ||
	    !(l->run_dir = berth_run_dir(l->vm_name)) ||
	    asprintf(&l->state, "%s/state/%s.img", vm_dir, l->name) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	return 0;
}

int vm_launch_add_env(VmLaunch *l, const char *arg)
{
	char err[512];
	int r = env_set_add_env(&l->env, arg, err, sizeof(err));

	return r < 0 ? log_error_errno(r, "%s", err) : 0;
}

int vm_launch_add_env_file(VmLaunch *l, const char *path)
{
	char err[512];
	int r = env_set_add_env_file(&l->env, path, err, sizeof(err));

	return r < 0 ? log_error_errno(r, "%s", err) : 0;
}

/* --- the secrets disk ------------------------------------------------------------------- */

/* The disk's path for the signal handler, which may only call async-signal-safe code. */
static char secrets_path_on_signal[PATH_MAX];
static const int secrets_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static struct sigaction secrets_saved[ELEMENTSOF(secrets_signals)];

static void secrets_on_signal(int sig)
{
	int saved = errno;

	(void)unlink(secrets_path_on_signal);
	errno = saved;
	/* SA_RESETHAND restored the default action: die of the signal as before. */
	(void)raise(sig);
}

static void print_warning(const char *line, void *userdata)
{
	fprintf(stderr, "%s\n", line);
}

/*
 * Write the secrets disk of this boot when --env or --env-file gave values, warn about
 * the scoping either way, and arm the signal handlers that delete it if the CLI is
 * stopped before drop_secrets(). *@ret is the disk's path, NULL when none was written.
 */
static int write_secrets(VmLaunch *l, char **ret)
{
	_cleanup_(manifest_freep) Manifest *m = NULL;
	_cleanup_free_ char *path = NULL;
	SecretsDiskApp app;
	char err[1024], *image = NULL;
	size_t size;
	int r;

	*ret = NULL;
	/* The scope comes from the berth.yml in the share the VM boots, which a reload may
	 * have changed; the app's name in the VM is the share's. */
	r = vm_launch_load_manifest(l->bundle.dir, &m);
	if (r < 0)
		return r;
	app = (SecretsDiskApp){.name = l->name, .manifest = m};
	secrets_disk_warn(l->env, &app, 1, print_warning, NULL);
	if (env_set_size(l->env) == 0)
		return 0;
	/* `--env NAME` read NAME from this environment: berth-vmm and QEMU need not inherit
	 * it. What the CLI and berth-vmm read themselves stays. */
	for (size_t i = 0; i < env_set_size(l->env); i++) {
		const char *name = env_set_name(l->env, i);

		if (!streq(name, "PATH") && !streq(name, "HOME") && !strneq(name, "BERTH_", 6))
			(void)unsetenv(name);
	}

	r = secrets_disk_path(l->vm_name, &path, err, sizeof(err));
	if (r >= 0 && strlen(path) >= sizeof(secrets_path_on_signal)) {
		snprintf(err, sizeof(err), "its path is too long; set BERTH_HOME to a shorter one");
		r = -ENAMETOOLONG;
	}
	if (r >= 0)
		r = secrets_disk_build(l->env, &app, 1, &image, &size, err, sizeof(err));
	if (r < 0)
		return log_error_errno(r, "cannot write the secrets disk: %s", err);
	strcpy(secrets_path_on_signal, path);
	for (size_t i = 0; i < ELEMENTSOF(secrets_signals); i++) {
		struct sigaction sa = {.sa_handler = secrets_on_signal, .sa_flags = SA_RESETHAND};

		sigemptyset(&sa.sa_mask);
		(void)sigaction(secrets_signals[i], NULL, &secrets_saved[i]);
		/* A signal the user had ignored (nohup) stays ignored. */
		if (secrets_saved[i].sa_handler == SIG_DFL)
			(void)sigaction(secrets_signals[i], &sa, NULL);
	}
	r = secrets_disk_write(path, image, size, err, sizeof(err));
	secrets_disk_image_free(image, size);
	if (r < 0) {
		for (size_t i = 0; i < ELEMENTSOF(secrets_signals); i++)
			(void)sigaction(secrets_signals[i], &secrets_saved[i], NULL);
		return log_error_errno(r, "cannot write the secrets disk: %s", err);
	}
	*ret = TAKE_PTR(path);
	return 0;
}

/* berth-vmm has opened the disk and handed the descriptor to QEMU, which reads it through
 * that descriptor, or it failed: either way the file is no longer needed. */
static void drop_secrets(char *path)
{
	int r;

	if (!path)
		return;
	r = secrets_disk_remove(path);
	if (r < 0)
		log_warning_errno(
			r, "cannot delete %s, which holds this boot's secrets: %m; delete it",
			path);
	for (size_t i = 0; i < ELEMENTSOF(secrets_signals); i++)
		(void)sigaction(secrets_signals[i], &secrets_saved[i], NULL);
	secrets_path_on_signal[0] = '\0';
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
	pid_t pid;

	/* Gone already (a boot it gave up on was stopped then): nothing to say. */
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_ABSENT)
		return 0;
	optind = 1;
	return cmd_vm_stop(2, argv);
}

/* --- giving up on a VM ------------------------------------------------------------------- */

/* The boot can be cut short: by the caller's fd, or by SIGINT, SIGTERM and SIGHUP, which
 * are blocked and read from a signalfd while the boot lasts. */
typedef struct BootCancel {
	int fd;
	bool own;
	sigset_t saved;
} BootCancel;

static int cancel_begin(const VmLaunch *l, BootCancel *c)
{
	sigset_t set;

	*c = (BootCancel){.fd = l->cancel_fd};
	if (l->cancel_fd > 0)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, &c->saved) < 0)
		return -errno;
	c->fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (c->fd < 0) {
		int r = -errno;

		(void)sigprocmask(SIG_SETMASK, &c->saved, NULL);
		return r;
	}
	c->own = true;
	return 0;
}

static void cancel_end(BootCancel *c)
{
	struct signalfd_siginfo si;

	if (!c->own)
		return;
	/* The signal that cut the boot short has been acted on: take it, so that it does
	 * not strike again once unblocked (the caller returns -ECANCELED instead). */
	while (read(c->fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	safe_close(c->fd);
	(void)sigprocmask(SIG_SETMASK, &c->saved, NULL);
	c->own = false;
}

/* A VM whose app failed powers off by itself once no app is left; wait for that (or stop
 * it), so its log is read from a run dir that no longer changes. */
static void settle_failed_vm(VmLaunch *l)
{
	long long deadline = now_ms() + 20000;
	pid_t pid;

	while (rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING && now_ms() < deadline)
		usleep(100 * 1000);
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING)
		(void)vm_launch_stop(l);
}

/* The last lines of @file in the run dir, for a failure report. */
static void print_tail(const VmLaunch *l, const char *file, const char *what)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	char *save = NULL, *lines[VM_LAUNCH_TAIL_LINES];
	size_t n = 0;

	if (asprintf(&path, "%s/%s", l->run_dir, file) < 0 ||
	    read_file_tail(path, 16 * 1024, &text) < 0 || !*text)
		return;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		lines[n++ % VM_LAUNCH_TAIL_LINES] = line;
	fprintf(stderr, "%s%s, last lines (%s):\n", l->prefix, what, path);
	for (size_t i = n > VM_LAUNCH_TAIL_LINES ? n - VM_LAUNCH_TAIL_LINES : 0; i < n; i++) {
		const char *line = lines[i % VM_LAUNCH_TAIL_LINES];

		fputs("  | ", stderr);
		term_text_write(stderr, line, term_text_cut(line, strlen(line), 300),
				TERM_TEXT_LOG_LINE);
		fputc('\n', stderr);
	}
}

/* Keep the logs of a VM that failed under ~/.berth/runs/<boot id>/, where its boot
 * evidence is, before its run dir goes. */
static void keep_logs(const VmLaunch *l)
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(l->run_dir);
	_cleanup_free_ char *home = berth_home(), *dir = NULL;
	const char *boot = json_string_value(json_object_get(vm, "bootId"));
	static const char *const files[] = {"vmm.log", "console.log", "vm.json"};
	_cleanup_free_ char *latest = NULL;

	if (!boot || !home || asprintf(&dir, "%s/runs/%s", home, boot) < 0 ||
	    mkdir_p(dir, 0700) < 0)
		return;
	/* `berth vm logs NAME` finds the last failed boot of NAME through this link. */
	if (asprintf(&latest, "%s/runs/latest-%s", home, l->vm_name) >= 0) {
		(void)unlink(latest);
		if (symlink(boot, latest) < 0)
			log_debug_errno(errno, "cannot link %s: %m", latest);
	}
	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_free_ char *from = NULL, *to = NULL, *text = NULL;

		if (asprintf(&from, "%s/%s", l->run_dir, files[i]) < 0 ||
		    asprintf(&to, "%s/%s", dir, files[i]) < 0 ||
		    read_file_tail(from, 4 * 1024 * 1024, &text) < 0)
			continue;
		(void)write_file_atomic(to, text, strlen(text), 0600);
	}
	fprintf(stderr, "%sthe logs of that boot are kept in %s\n", l->prefix, dir);
}

/* The command gives up on the VM it started: nothing of it may stay behind. After a
 * failure (@failed) its logs are kept for a look later. */
static void give_up(VmLaunch *l, bool failed)
{
	_cleanup_free_ char *failure = vm_failure_reason(l->run_dir);
	pid_t pid;

	/* A berth-vmm that failed the VM ends by itself in a moment, its log complete. */
	for (int i = 0; failure && i < 30 && rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING;
	     i++)
		usleep(100 * 1000);
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_ABSENT)
		return;
	if (failed)
		keep_logs(l);
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_RUNNING)
		(void)vm_launch_stop(l);
	(void)rundir_remove(l->run_dir);
}

/* What berth-vmm printed, without the JSON lines it reports to its launcher. */
static void print_vmm_output(const VmLaunch *l, char *out)
{
	char *save = NULL;

	for (char *line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if (line[0] != '{' && !streq(line, "ok"))
			term_text_line(stderr, TERM_TEXT_LOG_LINE, "%s%s", l->prefix, line);
}

static void report_failure(VmLaunch *l, int r, const char *reason)
{
	_cleanup_free_ char *failure = vm_failure_reason(l->run_dir),
			    *shown = term_text_dup(failure ?: reason, TERM_TEXT_LOG_LINE);
	char *largv[] = {"logs", l->vm_name, NULL};

	if (failure || r == -ETIME) {
		/* The VM itself failed, or never got anywhere: berth-vmm's log and the console
		 * say why. */
		if (failure)
			log_error("the VM failed: %s", shown ?: "(out of memory)");
		else
			log_error("the app was not ready within %u ms", l->boot_timeout_ms);
		print_tail(l, "vmm.log", "berth-vmm's log");
		print_tail(l, "console.log", "the guest console");
		return;
	}
	/* The guest said what went wrong (an app exited, say): its log shows the app's own
	 * output. */
	log_error("%s; its log follows (berth vm logs %s)", shown ?: "(out of memory)", l->vm_name);
	settle_failed_vm(l);
	optind = 1;
	(void)cmd_vm_logs(2, largv);
}

int vm_launch_boot(VmLaunch *l, long long *ret_ms, char ret_boot_id[37])
{
	_cleanup_free_ char *out = NULL, *secrets = NULL, *egress = NULL;
	_cleanup_(json_decrefp) json_t *vm = NULL;
	char *argv[VMM_ARGS_MAX + 14] = {l->vmm,  "run",	 "--name",  l->vm_name,
					 "--app", l->bundle.dir, "--state", l->state};
	size_t argc = 8;
	char reason[1024];
	long long t0 = now_ms();
	BootCancel cancel;
	int status, r;

	for (size_t i = 0; l->vmm_args && l->vmm_args[i]; i++) {
		if (i >= VMM_ARGS_MAX)
			return log_error("too many berth-vmm arguments (at most %d)", VMM_ARGS_MAX);
		argv[argc++] = l->vmm_args[i];
	}
	/* One comma-separated --egress-allow: the patterns hold no commas. */
	for (size_t i = 0; l->egress_allow && l->egress_allow[i]; i++) {
		char *next = NULL;

		if (asprintf(&next, "%s%s%s", egress ? egress : "", egress ? "," : "",
			     l->egress_allow[i]) < 0)
			return log_error_errno(-ENOMEM, "out of memory");
		free(egress);
		egress = next;
	}
	if (egress) {
		argv[argc++] = "--egress-allow";
		argv[argc++] = egress;
		say(l, "egress: %s (berth-vmm checks every connection against these)", egress);
	}
	r = cancel_begin(l, &cancel);
	if (r < 0)
		return log_error_errno(r, "cannot watch for signals during the boot: %m");
	r = write_secrets(l, &secrets);
	if (r < 0)
		goto out;
	if (secrets) {
		argv[argc++] = "--secrets";
		argv[argc++] = secrets;
	}
	argv[argc] = NULL;
	/* berth-vmm returns once QEMU runs; the first start after a host boot also probes the
	 * accelerators, which takes a few seconds. */
	RunCapture rc = {.timeout_ms = VM_LAUNCH_VMM_START_TIMEOUT_MS,
			 .max_bytes = 1024 * 1024,
			 .with_stderr = true,
			 .cancel_fd = cancel.fd};

	r = run_capture_opts(argv, &rc, &out, &status);
	drop_secrets(secrets);
	if (r == -ECANCELED) {
		say(l, "interrupted while berth-vmm started the VM; stopping it");
		give_up(l, false);
		goto out;
	}
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		print_vmm_output(l, out);
		log_error(r == -ETIME ? "berth-vmm did not start the VM within %d s; see above"
				      : "berth-vmm could not start the VM; see above",
			  VM_LAUNCH_VMM_START_TIMEOUT_MS / 1000);
		give_up(l, true);
		r = -EIO;
		goto out;
	}
	snprintf(reason, sizeof(reason), "the VM went away during its boot");
	r = vm_wait_ready(l->run_dir, 1, (int)l->boot_timeout_ms, cancel.fd, reason,
			  sizeof(reason));
	if (r == -ECANCELED) {
		say(l, "interrupted during the boot; stopping the VM");
		give_up(l, false);
		goto out;
	}
	if (r < 0) {
		report_failure(l, r, reason);
		give_up(l, true);
		r = -EIO;
		goto out;
	}
	*ret_ms = now_ms() - t0;
	vm = vm_json_load(l->run_dir);
	snprintf(ret_boot_id, 37, "%s", json_string_value(json_object_get(vm, "bootId")) ?: "?");
out:
	cancel_end(&cancel);
	return r;
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
	env_set_free(l->env);
	vm_egress_allow_free(l->egress_allow);
	*l = (VmLaunch){};
}
