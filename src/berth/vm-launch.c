/* SPDX-License-Identifier: Apache-2.0 */
/* Booting one app in its own VM, for berth dev and berth mcp (vm-launch.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evloop.h"
#include "exec-util.h"
#include "fileio.h"
#include "line-conn.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"
#include "runtime-select.h"
#include "secrets-disk.h"
#include "source-dir.h"
#include "term-text.h"
#include "terminal-login.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-install.h"
#include "vm-launch.h"
#include "vm-manage.h"
#include "vm-support.h"
#include "vmm.h"

#define VMM_ARGS_MAX 64
#define VMM_OUTPUT_MAX (1024 * 1024) /* of what `berth-vmm run` prints */

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

/* Every app of the VM's berth.yml: the main app's, then its companions'. */
static size_t all_manifests(const VmLaunch *l, const Manifest **ret)
{
	size_t n = 0;

	ret[n++] = l->manifest;
	for (size_t i = 0; i < l->n_companions; i++)
		ret[n++] = l->companions[i].manifest;
	return n;
}

/* The hosts the VM's egress dialer may reach, from berth.yml alone (docs/egress.md). */
static int load_egress(VmLaunch *l)
{
	_cleanup_free_ char *warning = NULL, *reason = NULL;
	const Manifest *apps[1 + VM_LAUNCH_COMPANIONS_MAX];
	size_t n = all_manifests(l, apps);
	int r = vm_egress_plan(apps, n, &l->egress_allow, &warning, &reason);

	if (r == -EOPNOTSUPP)
		return log_error("%s", reason ? reason : "this app's egress cannot run in the VM");
	if (r < 0)
		return log_error_errno(r, "out of memory");
	if (warning)
		log_warning("%s", warning);
	return 0;
}

/*
 * The ports of the publish table whose capability the app declares (the terminal's 7681),
 * and the terminal's login: made here, once, so that it stays the same across reloads and
 * a browser that has it keeps working.
 */
static int load_terminal(VmLaunch *l)
{
	const Manifest *apps[1 + VM_LAUNCH_COMPANIONS_MAX];
	size_t n_apps = all_manifests(l, apps), n_rows;
	const PublishPort *rows = publish_ports(&n_rows);
	bool terminal = false;
	int r;

	l->browser_app = -1;
	for (size_t a = 0; a < n_apps; a++) {
		const char *const *caps;
		size_t n = manifest_capabilities(apps[a], &caps);

		for (size_t i = 0; i < n; i++) {
			terminal |= publish_capability_in(caps[i], "terminal");
			if (publish_capability_in(caps[i], "browser") && l->browser_app < 0)
				l->browser_app = (int)a;
		}
	}
	if (l->browser_app >= 0) {
		l->vnc_password = malloc(VNC_PASSWORD_LEN + 1);
		if (!l->vnc_password)
			return log_error_errno(-ENOMEM, "out of memory");
		r = vnc_password_new(l->vnc_password);
		if (r < 0)
			return log_error_errno(r, "cannot make the VNC password: %m");
	}
	/* Each port once: berth-vmm refuses two apps declaring one (at most one of each). */
	for (size_t k = 0; k < n_rows; k++) {
		bool declared = false;

		for (size_t a = 0; a < n_apps && !declared; a++) {
			const char *const *caps;
			size_t n = manifest_capabilities(apps[a], &caps);
			ManifestExpose expose = manifest_expose(apps[a]);

			/* expose: {browser: false} or {terminal: false} keeps the port in the VM.
			 */
			if ((streq(rows[k].ns, "browser") && !expose.browser) ||
			    (streq(rows[k].ns, "terminal") && !expose.terminal))
				continue;
			for (size_t i = 0; i < n; i++)
				declared |= publish_capability_in(caps[i], rows[k].ns);
		}
		if (declared && l->n_published < PUBLISH_PORTS_MAX)
			l->published[l->n_published++] = rows[k].port;
	}
	if (!terminal)
		return 0;
	l->terminal_login = malloc(TERMINAL_LOGIN_LEN + 1);
	if (!l->terminal_login)
		return log_error_errno(-ENOMEM, "out of memory");
	r = terminal_login_new(l->terminal_login);
	if (r < 0)
		return log_error_errno(r, "cannot make the terminal's login: %m");
	return 0;
}

static bool declares_browser(const Manifest *m)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	for (size_t i = 0; i < n; i++)
		if (publish_capability_in(caps[i], "browser"))
			return true;
	return false;
}

/* --apps: each a folder, as given (from the working directory) or beside the main app's. */
static int load_companions(VmLaunch *l)
{
	_cleanup_free_ char *list = NULL, *parent = NULL;
	char *save = NULL, *slash;
	int r;

	if (!l->apps_arg)
		return 0;
	list = strdup(l->apps_arg);
	parent = strdup(l->app_dir);
	if (!list || !parent)
		return log_error_errno(-ENOMEM, "out of memory");
	slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = '\0';
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		_cleanup_free_ char *beside = NULL, *reason = NULL;
		const char *name;
		VmCompanion *c;

		if (l->n_companions == VM_LAUNCH_COMPANIONS_MAX)
			return log_error(
				"--apps: at most %d companions, since a VM holds %d apps; leave some out",
				VM_LAUNCH_COMPANIONS_MAX, VM_LAUNCH_COMPANIONS_MAX + 1);
		c = &l->companions[l->n_companions];
		c->dir = realpath(tok, NULL);
		if (!c->dir && tok[0] != '/' && asprintf(&beside, "%s/%s", parent, tok) >= 0)
			c->dir = realpath(beside, NULL);
		if (!c->dir)
			return log_error(
				"--apps %s: no such app folder (looked for it as given and beside %s); name each companion's folder",
				tok, l->app_dir);
		r = vm_launch_load_manifest(c->dir, &c->manifest);
		l->n_companions++;
		if (r < 0)
			return r;
		name = manifest_name(c->manifest);
		for (size_t i = 0; i + 1 < l->n_companions; i++)
			if (streq(manifest_name(l->companions[i].manifest), name))
				return log_error(
					"--apps: two companions are named \"%s\" (%s and %s); every app of a VM needs a name of its own",
					name, l->companions[i].dir, c->dir);
		if (streq(name, manifest_name(l->manifest)))
			return log_error(
				"--apps %s: it is named \"%s\" like the app itself; every app of a VM needs a name of its own",
				tok, name);
		r = vm_support_check(c->manifest, &reason);
		if (r < 0)
			return log_error("%s",
					 reason ? reason : "this companion cannot run in the VM");
	}
	/* The browser layer takes one of the VM's four places for disks of apps. */
	bool browser = declares_browser(l->manifest);

	for (size_t i = 0; i < l->n_companions; i++)
		browser |= declares_browser(l->companions[i].manifest);
	if (browser && l->n_companions > VM_LAUNCH_COMPANIONS_MAX - 1)
		return log_error(
			"--apps: at most %d companions when an app declares browser:*, since the browser layer takes one of a VM's %d app places; leave one out",
			VM_LAUNCH_COMPANIONS_MAX - 1, VM_LAUNCH_COMPANIONS_MAX + 1);
	return 0;
}

/* The VM's memory by SPEC 8.3: more for several apps, and for one that indexes /context. */
static unsigned default_mem_mib(const VmLaunch *l)
{
	const char *const *caps;
	size_t n = manifest_capabilities(l->manifest, &caps);

	if (l->browser_app >= 0)
		return VM_LAUNCH_MEM_BROWSER_MIB;
	if (l->n_companions > 0)
		return VM_LAUNCH_MEM_SEVERAL_MIB;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) >= 0 &&
		    streq(ns, "filesystem") && scope &&
		    capability_path_beneath(scope, strlen(scope), "/context"))
			return VM_LAUNCH_MEM_CONTEXT_MIB;
	}
	return VM_LAUNCH_MEM_ONE_MIB;
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
	r = runtime_select(runtime_flag, &l->runtime_reason);
	if (r < 0)
		return log_error("%s", l->runtime_reason);
	l->docker = r == SANDBOX_DOCKER;
	r = l->docker ? docker_support_check(l->manifest, &reason)
		      : vm_support_check(l->manifest, &reason);
	if (r < 0)
		return log_error("%s", reason ? reason : "this app cannot run in the VM");
	r = load_companions(l);
	if (r >= 0)
		r = load_egress(l);
	if (r >= 0)
		r = load_terminal(l);
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
/* Which app of the VM declares terminal:* (the login is its own), or -1. */
static int terminal_app(const VmLaunch *l, const Manifest *main_manifest)
{
	const Manifest *apps[1 + VM_LAUNCH_COMPANIONS_MAX];
	size_t n_apps = all_manifests(l, apps);

	apps[0] = main_manifest;
	for (size_t a = 0; a < n_apps; a++) {
		const char *const *caps;
		size_t n = manifest_capabilities(apps[a], &caps);

		for (size_t i = 0; i < n; i++)
			if (publish_capability_in(caps[i], "terminal"))
				return (int)a;
	}
	return -1;
}

static int write_secrets(VmLaunch *l, char **ret)
{
	_cleanup_(manifest_freep) Manifest *m = NULL;
	_cleanup_(env_set_freep) EnvSet *own = NULL;
	_cleanup_(env_set_freep) EnvSet *browser_own = NULL;
	_cleanup_free_ char *path = NULL, *login = NULL, *vnc = NULL;
	SecretsDiskApp apps[1 + VM_LAUNCH_COMPANIONS_MAX];
	size_t n_apps = 1 + l->n_companions;
	char err[1024], *image = NULL;
	size_t size;
	int r, term;

	*ret = NULL;
	/* The scope comes from the berth.yml in the share the VM boots, which a reload may
	 * have changed; the app's name in the VM is the share's. */
	r = vm_launch_load_manifest(l->bundle.dir, &m);
	if (r < 0)
		return r;
	/* The terminal's login, for the terminal alone. */
	if (l->terminal_login) {
		if (asprintf(&login, TERMINAL_LOGIN_ENV "=%s", l->terminal_login) < 0)
			return log_error_errno(-ENOMEM, "out of memory");
		r = env_set_add_env(&own, login, err, sizeof(err));
		explicit_bzero(login, strlen(login));
		if (r < 0)
			return log_error_errno(r, "cannot pass the terminal's login: %s", err);
	}
	apps[0] = (SecretsDiskApp){.name = l->name, .manifest = m};
	for (size_t i = 0; i < l->n_companions; i++)
		apps[1 + i] = (SecretsDiskApp){.name = manifest_name(l->companions[i].manifest),
					       .manifest = l->companions[i].manifest};
	term = terminal_app(l, m);
	if (term >= 0)
		apps[term].own = own;
	/* The VNC password, for the browser app alone (with the login, when it is also the
	 * terminal's). */
	if (l->vnc_password) {
		EnvSet **into = term == l->browser_app ? &own : &browser_own;

		if (asprintf(&vnc, VNC_PASSWORD_ENV "=%s", l->vnc_password) < 0)
			return log_error_errno(-ENOMEM, "out of memory");
		r = env_set_add_env(into, vnc, err, sizeof(err));
		explicit_bzero(vnc, strlen(vnc));
		if (r < 0)
			return log_error_errno(r, "cannot pass the VNC password: %s", err);
		apps[l->browser_app].own = *into;
	}
	secrets_disk_warn(l->env, apps, n_apps, print_warning, NULL);
	if (env_set_size(l->env) == 0 && env_set_size(own) == 0 && env_set_size(browser_own) == 0)
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
		r = secrets_disk_build(l->env, apps, n_apps, &image, &size, err, sizeof(err));
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

/* The browser layer, for an app that declares browser:*, installed on its first need (the
 * original's notice, then install's own progress bar), checked against its pin as always. */
static int ensure_layer(VmLaunch *l, const PinSet *pins, const char *vm_dir,
			const VmInstallOptions *base)
{
	_cleanup_free_ char *p = NULL;
	VmInstallOptions o = *base;

	if (l->browser_app < 0)
		return 0;
	if (!pins->sha256[ARTIFACT_LAYER_BROWSER][0])
		return log_error(
			"%s has no pin for the browser layer, which %s's browser:* "
			"capabilities need: use a berth-vmm built with it (docs/browser.md)",
			l->vmm, l->name);
	p = pinset_install_path(pins, vm_dir, ARTIFACT_LAYER_BROWSER);
	if (p && access(p, R_OK) == 0)
		return 0;
	say(l, "the browser layer (%llu MB) is needed by %s; installing it once",
	    (unsigned long long)(pins->size[ARTIFACT_LAYER_BROWSER] / 1000000), l->name);
	o.layers = 1u << ARTIFACT_LAYER_BROWSER;
	o.layers_only = true;
	if (vm_install(&o) < 0)
		return log_error("could not install the browser layer; see above, or run 'berth vm "
				 "install --layer browser'");
	return 0;
}

/* The VM needs the pinned artifacts; install them from this checkout or the configured
 * source when they are missing, as `berth vm install` would. */
static int ensure_artifacts(VmLaunch *l)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *from = NULL;
	/* No snapshot here: this is on the way to the first session's boot, which an MCP
	 * client may be timing; `berth vm install` makes it (docs/warm-start.md). */
	VmInstallOptions o = {.vmm = l->vmm, .no_snapshot = true};
	bool missing = false;
	PinSet pins;

	if (vmm_query_pins(l->vmm, &pins) < 0)
		pinset_compiled(&pins);
	for (int k = 0; k < ARTIFACT_BASE_MAX && !missing; k++) {
		_cleanup_free_ char *p = pinset_install_path(&pins, vm_dir, k);

		missing = !p || access(p, R_OK) < 0;
	}
	if (berth_source_path("out/artifacts/manifest-rootfs.json", &from) >= 0) {
		*strrchr(from, '/') = '\0';
		o.from = from;
	}
	if (!missing)
		return ensure_layer(l, &pins, vm_dir, &o);
	if (l->on_stage)
		l->on_stage(l, VM_LAUNCH_STAGE_INSTALLING, l->stage_userdata);
	say(l, "the pinned kernel and root image are not installed yet; installing them");
	if (vm_install(&o) < 0)
		return log_error("could not install the VM artifacts; see above, or run 'berth vm "
				 "install'");
	return ensure_layer(l, &pins, vm_dir, &o);
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
	/* Companions once: berth dev watches the main app only. */
	for (size_t i = 0; i < l->n_companions; i++) {
		VmCompanion *c = &l->companions[i];

		if (c->bundle.dir)
			continue;
		r = bundle_app(c->dir, manifest_name(c->manifest), &c->bundle, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

int vm_launch_stop(VmLaunch *l)
{
	unsigned timeout;
	pid_t pid;

	/* Gone already (a boot it gave up on was stopped then): nothing to say. */
	if (rundir_inspect(l->run_dir, &pid) == RUNDIR_ABSENT)
		return 0;
	if (vm_stop_timeout(&timeout) < 0)
		return -EINVAL;
	return vm_stop(l->vm_name, l->run_dir, timeout) < 0 ? -EIO : 0;
}

/* --- giving up on a VM ------------------------------------------------------------------- */

/* Wait up to @timeout_ms for the berth-vmm of @run_dir to end: it ends by itself once it
 * has failed the VM, or once no app is left in it. Returns true when it is gone. */
static bool await_vmm_gone(const char *run_dir, int timeout_ms)
{
	_cleanup_close_ int pidfd = rundir_open_pidfd(run_dir);
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	pid_t pid;

	if (pidfd >= 0)
		while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
			;
	return rundir_inspect(run_dir, &pid) != RUNDIR_RUNNING;
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
	if (failure)
		(void)await_vmm_gone(l->run_dir, 3000);
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
	 * output, read once the VM has powered off (it does when no app is left) and its run
	 * dir no longer changes. */
	log_error("%s; its log follows (berth vm logs %s)", shown ?: "(out of memory)", l->vm_name);
	if (!await_vmm_gone(l->run_dir, 20000))
		(void)vm_launch_stop(l);
	(void)vm_logs_print(l->vm_name, &(VmLogsOptions){});
}

/* --- the boot, on an event loop ---------------------------------------------------------- */

/*
 * Two steps: `berth-vmm run`, which returns once QEMU runs (after a probe of the
 * accelerators on the first start after a host boot); then the guest's boot events on the
 * control port, until every app is ready. One timer bounds each step.
 */
typedef struct VmBoot {
	VmLaunch *l;
	EvLoop *loop;
	vm_launch_done_t done;
	void *userdata;
	long long t0;
	char *secrets; /* the secrets disk's path, until berth-vmm has handed it to QEMU */
	int vmm_pidfd; /* `berth-vmm run`; -EBADF once reaped */
	EvSource *vmm_exit, *vmm_out, *timer;
	int vmm_out_fd; /* the read end of its output, owned by vmm_out */
	char *out;	/* what `berth-vmm run` printed, VMM_OUTPUT_MAX bytes at most */
	size_t out_len;
	LineConn *control;
	VmReadiness readiness;
	char reason[1024];
} VmBoot;

static void boot_finish(VmBoot *b, int r)
{
	VmLaunch *l = b->l;
	vm_launch_done_t done = b->done;
	void *userdata = b->userdata;

	if (r == 0) {
		_cleanup_(json_decrefp) json_t *vm = vm_json_load(l->run_dir);

		l->boot_ms = now_ms() - b->t0;
		snprintf(l->boot_id, sizeof(l->boot_id), "%s",
			 json_string_value(json_object_get(vm, "bootId")) ?: "?");
	}
	ev_source_free(b->vmm_exit);
	ev_source_free(b->vmm_out);
	ev_source_free(b->timer);
	line_conn_free(b->control);
	safe_close(b->vmm_pidfd);
	drop_secrets(b->secrets);
	free(b->secrets);
	free(b->out);
	free(b);
	l->boot = NULL;
	done(l, r, userdata);
}

/* `berth-vmm run` is still running (a timeout, a cancel): kill and reap it. */
static void kill_vmm_run(VmBoot *b)
{
	siginfo_t si;

	if (b->vmm_pidfd < 0)
		return;
	(void)pidfd_send_signal(b->vmm_pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, b->vmm_pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	b->vmm_exit = ev_source_free(b->vmm_exit);
	b->vmm_pidfd = safe_close(b->vmm_pidfd);
}

/* Take what `berth-vmm run` printed; past VMM_OUTPUT_MAX it is read and dropped. */
static void read_vmm_output(VmBoot *b, int fd)
{
	char scratch[4096];

	for (;;) {
		bool room = b->out_len < VMM_OUTPUT_MAX;
		ssize_t n = room ? read(fd, b->out + b->out_len, VMM_OUTPUT_MAX - b->out_len)
				 : read(fd, scratch, sizeof(scratch));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || errno != EAGAIN)
				b->vmm_out = ev_source_free(b->vmm_out);
			break;
		}
		if (room)
			b->out_len += (size_t)n;
	}
	b->out[b->out_len] = '\0';
}

static int on_vmm_output(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	read_vmm_output(userdata, fd);
	return 0;
}

static void on_control_line(LineConn *c, char *line, size_t len, void *userdata)
{
	VmBoot *b = userdata;
	_cleanup_(json_decrefp) json_t *ev = json_loadb(line, len, 0, NULL);
	int r = vm_readiness_event(&b->readiness, ev, b->reason, sizeof(b->reason));

	if (r == 0 && b->l->on_stage && json_string_value(json_object_get(ev, "event")) &&
	    streq(json_string_value(json_object_get(ev, "event")), "app_started"))
		b->l->on_stage(b->l, VM_LAUNCH_STAGE_APP_STARTING, b->l->stage_userdata);
	if (r == 0)
		return;
	if (r > 0) {
		boot_finish(b, 0);
		return;
	}
	report_failure(b->l, r, b->reason);
	give_up(b->l, true);
	boot_finish(b, -EIO);
}

static void on_control_close(LineConn *c, int error, void *userdata)
{
	VmBoot *b = userdata;

	/* berth-vmm closed us: it failed the VM, and vm.json says why. */
	b->control = NULL;
	vm_await_failure_reason(b->l->run_dir, b->reason, sizeof(b->reason));
	report_failure(b->l, -EIO, b->reason);
	give_up(b->l, true);
	boot_finish(b, -EIO);
}

/* QEMU runs: follow the guest's boot on the control port. */
static int follow_boot(VmBoot *b)
{
	VmLaunch *l = b->l;
	int fd, r;

	snprintf(b->reason, sizeof(b->reason), "the VM went away during its boot");
	vm_readiness_init(&b->readiness, 1 + l->n_companions);
	fd = vm_socket_connect(l->run_dir, "control.sock");
	if (fd < 0) {
		vm_await_failure_reason(l->run_dir, b->reason, sizeof(b->reason));
		report_failure(l, -EIO, b->reason);
		give_up(l, true);
		return -EIO;
	}
	r = line_conn_new(b->loop, fd, VM_LINE_MAX, 4096, on_control_line, on_control_close, b,
			  &b->control);
	if (r >= 0)
		r = ev_source_set_time_relative(b->timer, (uint64_t)l->boot_timeout_ms * 1000);
	if (r >= 0)
		r = ev_source_set_enabled(b->timer, EV_ONESHOT);
	if (r < 0) {
		log_error_errno(r, "cannot follow the boot: %m");
		give_up(l, true);
		return -EIO;
	}
	return 0;
}

static int on_vmm_exit(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	VmBoot *b = userdata;
	siginfo_t si = {};
	int r;

	while (waitid(P_PIDFD, b->vmm_pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	b->vmm_exit = ev_source_free(b->vmm_exit);
	b->vmm_pidfd = safe_close(b->vmm_pidfd);
	if (b->vmm_out)
		read_vmm_output(b, b->vmm_out_fd);
	b->vmm_out = ev_source_free(b->vmm_out);
	/* berth-vmm has handed the secrets disk to QEMU, or failed: it has done with it. */
	drop_secrets(b->secrets);
	free(b->secrets);
	b->secrets = NULL;
	if (si.si_code != CLD_EXITED || si.si_status != 0) {
		print_vmm_output(b->l, b->out);
		log_error("berth-vmm could not start the VM; see above");
		give_up(b->l, true);
		boot_finish(b, -EIO);
		return 0;
	}
	r = follow_boot(b);
	if (r < 0)
		boot_finish(b, r);
	return 0;
}

static int on_boot_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	VmBoot *b = userdata;

	if (b->vmm_pidfd >= 0) {
		kill_vmm_run(b);
		if (b->vmm_out)
			read_vmm_output(b, b->vmm_out_fd);
		print_vmm_output(b->l, b->out);
		log_error("berth-vmm did not start the VM within %d s; see above",
			  VM_LAUNCH_VMM_START_TIMEOUT_MS / 1000);
	} else
		report_failure(b->l, -ETIME, b->reason);
	give_up(b->l, true);
	boot_finish(b, -EIO);
	return 0;
}

/* `berth-vmm run` with the app, its state disk, the egress patterns and the secrets disk. */
static int vmm_run_argv(VmLaunch *l, VmBoot *b, char **argv, size_t size, char **ret_egress)
{
	_cleanup_free_ char *egress = NULL;
	size_t argc = 0;
	int r;

	argv[argc++] = l->vmm;
	argv[argc++] = "run";
	argv[argc++] = "--name";
	argv[argc++] = l->vm_name;
	argv[argc++] = "--app";
	argv[argc++] = l->bundle.dir;
	for (size_t i = 0; i < l->n_companions; i++) {
		argv[argc++] = "--app";
		argv[argc++] = l->companions[i].bundle.dir;
	}
	argv[argc++] = "--state";
	argv[argc++] = l->state;
	if (default_mem_mib(l) != VM_LAUNCH_MEM_ONE_MIB) {
		static char mem[16];

		snprintf(mem, sizeof(mem), "%u", default_mem_mib(l));
		argv[argc++] = "--mem";
		argv[argc++] = mem;
	}
	if (l->cold)
		argv[argc++] = "--cold";
	if (l->reloads)
		argv[argc++] = "--reloads";
	if (l->docker) {
		argv[argc++] = "--engine";
		argv[argc++] = "docker";
	}
	if (l->browser_app >= 0) {
		argv[argc++] = "--layer";
		argv[argc++] = "browser";
	}
	for (size_t i = 0; l->vmm_args && l->vmm_args[i]; i++) {
		/* Room left for --egress-allow, --publish, --secrets and the NULL. */
		if (argc + 6 + 2 * PUBLISH_PORTS_MAX >= size)
			return log_error_errno(-E2BIG, "too many berth-vmm arguments (at most %d)",
					       VMM_ARGS_MAX);
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
	/* Each published port is its own socket in the run dir; the command serves it. */
	for (size_t i = 0; l->publish && i < l->n_published; i++) {
		static char ports[PUBLISH_PORTS_MAX][8];

		snprintf(ports[i], sizeof(ports[i]), "%u", l->published[i]);
		argv[argc++] = "--publish";
		argv[argc++] = ports[i];
	}
	r = write_secrets(l, &b->secrets);
	if (r < 0)
		return r;
	if (b->secrets) {
		argv[argc++] = "--secrets";
		argv[argc++] = b->secrets;
	}
	argv[argc] = NULL;
	*ret_egress = TAKE_PTR(egress);
	return 0;
}

int vm_launch_boot_start(VmLaunch *l, EvLoop *loop, vm_launch_done_t done, void *userdata)
{
	_cleanup_free_ char *egress = NULL;
	char *argv[VMM_ARGS_MAX + 17 + 2 * PUBLISH_PORTS_MAX + 2 * VM_LAUNCH_COMPANIONS_MAX];
	VmBoot *b;
	int out_fd = -EBADF, r;

	if (l->boot)
		return -EBUSY;
	b = calloc(1, sizeof(*b));
	if (!b)
		return log_error_errno(-ENOMEM, "out of memory");
	*b = (VmBoot){.l = l,
		      .loop = loop,
		      .done = done,
		      .userdata = userdata,
		      .t0 = now_ms(),
		      .vmm_pidfd = -EBADF,
		      .out = malloc(VMM_OUTPUT_MAX + 1)};
	r = b->out ? vmm_run_argv(l, b, argv, ELEMENTSOF(argv), &egress) : -ENOMEM;
	if (r >= 0) {
		r = spawn_capture(argv, true, &b->vmm_pidfd, &out_fd);
		if (r < 0)
			log_error_errno(r, "cannot run %s: %m", l->vmm);
	}
	if (r >= 0 && fcntl(out_fd, F_SETFL, O_NONBLOCK) < 0)
		r = -errno;
	if (r >= 0)
		r = ev_add_io(loop, &b->vmm_out, out_fd, EPOLLIN, on_vmm_output, b);
	if (r >= 0) {
		(void)ev_source_set_io_fd_own(b->vmm_out, true);
		b->vmm_out_fd = TAKE_FD(out_fd);
		r = ev_add_io(loop, &b->vmm_exit, b->vmm_pidfd, EPOLLIN, on_vmm_exit, b);
	}
	if (r >= 0)
		r = ev_add_time_relative(loop, &b->timer,
					 (uint64_t)VM_LAUNCH_VMM_START_TIMEOUT_MS * 1000,
					 on_boot_timeout, b);
	if (r < 0) {
		safe_close(out_fd);
		kill_vmm_run(b);
		ev_source_free(b->vmm_out);
		ev_source_free(b->timer);
		drop_secrets(b->secrets);
		free(b->secrets);
		free(b->out);
		free(b);
		give_up(l, false);
		return r == -ENOMEM ? log_error_errno(r, "out of memory") : r;
	}
	b->out[0] = '\0';
	l->boot = b;
	if (l->on_stage)
		l->on_stage(l, VM_LAUNCH_STAGE_BOOTING, l->stage_userdata);
	return 0;
}

bool vm_launch_booting(const VmLaunch *l)
{
	return l->boot != NULL;
}

void vm_launch_boot_cancel(VmLaunch *l)
{
	VmBoot *b = l->boot;

	if (!b)
		return;
	if (b->vmm_pidfd >= 0) {
		say(l, "interrupted while berth-vmm started the VM; stopping it");
		kill_vmm_run(b);
	} else
		say(l, "interrupted during the boot; stopping the VM");
	give_up(l, false);
	boot_finish(b, -ECANCELED);
}

/* --- the boot, waited for ------------------------------------------------------------------ */

typedef struct SyncBoot {
	EvLoop *loop;
	VmLaunch *l;
	int r;
} SyncBoot;

static void on_sync_done(VmLaunch *l, int r, void *userdata)
{
	SyncBoot *sb = userdata;

	sb->r = r;
	ev_exit(sb->loop, 0);
}

static int on_sync_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	SyncBoot *sb = userdata;

	vm_launch_boot_cancel(sb->l);
	return 0;
}

int vm_launch_boot(VmLaunch *l)
{
	static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	SyncBoot sb = {.l = l, .r = -EIO};
	sigset_t saved, set;
	int r;

	/* SIGINT, SIGTERM and SIGHUP cut the boot short (the loop blocks them and reads them
	 * from its signalfd); the mask is put back as it was afterwards. */
	if (sigprocmask(SIG_SETMASK, NULL, &saved) < 0)
		return -errno;
	r = ev_loop_new(&loop);
	sb.loop = loop;
	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(signals); i++)
		r = ev_add_signal(loop, NULL, signals[i], on_sync_signal, &sb);
	if (r < 0)
		log_error_errno(r, "cannot watch for signals during the boot: %m");
	if (r >= 0)
		r = vm_launch_boot_start(l, loop, on_sync_done, &sb);
	if (r >= 0) {
		(void)ev_loop(loop);
		r = sb.r;
	}
	loop = ev_loop_free(loop);
	/* The signal that cut the boot short has been acted on: take it, so that it does not
	 * strike again once unblocked (the caller returns -ECANCELED instead). */
	sigemptyset(&set);
	for (size_t i = 0; i < ELEMENTSOF(signals); i++)
		sigaddset(&set, signals[i]);
	while (sigtimedwait(&set, NULL, &(struct timespec){}) > 0)
		;
	(void)sigprocmask(SIG_SETMASK, &saved, NULL);
	return r;
}

void vm_launch_done(VmLaunch *l)
{
	for (size_t i = 0; i < l->n_companions; i++) {
		free(l->companions[i].dir);
		manifest_free(l->companions[i].manifest);
		bundle_done(&l->companions[i].bundle);
	}
	bundle_done(&l->bundle);
	manifest_free(l->manifest);
	free(l->app_dir);
	free(l->name);
	free(l->vm_name);
	free(l->run_dir);
	free(l->vmm);
	free(l->state);
	free(l->runtime_reason);
	env_set_free(l->env);
	vm_egress_allow_free(l->egress_allow);
	if (l->terminal_login)
		explicit_bzero(l->terminal_login, strlen(l->terminal_login));
	free(l->terminal_login);
	if (l->vnc_password)
		explicit_bzero(l->vnc_password, strlen(l->vnc_password));
	free(l->vnc_password);
	*l = (VmLaunch){};
}
