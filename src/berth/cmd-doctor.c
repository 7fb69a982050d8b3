/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth doctor: can this host boot a Berth VM, and if not, what exactly to do about it.
 * Each check fills one line; the verdict and the exit status follow from them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "digest.h"
#include "docker-image.h"
#include "exec-util.h"
#include "landlock-abi.h"
#include "landlock-probe.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "pins.h"
#include "vmm.h"

#define QEMU_BINARY "qemu-system-x86_64"
#define TOOL_TIMEOUT_MS 10000
#define PROBE_TIMEOUT_MS (150 * 1000) /* berth-vmm accel: two probe boots at most */
#define TOOL_OUTPUT_MAX (64 * 1024)
#define LANDLOCK_ABI_HOST_SANDBOX 6 /* berth-vmm handles every right and scope up to it */

typedef enum CheckId {
	CHECK_QEMU,
	CHECK_VMM,
	CHECK_PINS,
	CHECK_ARTIFACTS,
	CHECK_LANDLOCK,
	CHECK_ACCELERATOR, /* last: its probe boots what the others checked */
	_CHECK_ID_MAX,
} CheckId;

typedef enum CheckStatus {
	CHECK_OK,
	CHECK_WARN,
	CHECK_FAIL,
	CHECK_UNKNOWN,
	_CHECK_STATUS_MAX,
} CheckStatus;

static const char *const status_names[_CHECK_STATUS_MAX] = {
	[CHECK_OK] = "ok",
	[CHECK_WARN] = "warn",
	[CHECK_FAIL] = "fail",
	[CHECK_UNKNOWN] = "unknown",
};

static const char *const status_glyphs[_CHECK_STATUS_MAX] = {
	[CHECK_OK] = "✔",
	[CHECK_WARN] = "!",
	[CHECK_FAIL] = "✘",
	[CHECK_UNKNOWN] = "?",
};

typedef struct Check {
	const char *id;
	const char *title;
	CheckStatus status;
	char *detail;
	char *remedy; /* what to do, NULL when nothing needs doing */
	char *reason; /* the short form the verdict quotes */
	char *more;   /* further lines of detail, "\n"-separated, or NULL */
} Check;

/* One run of the doctor: the checks in output order and what they found out. */
typedef struct Report {
	const char *sandbox;
	Check checks[_CHECK_ID_MAX];
	size_t n_checks;
	char *qemu; /* the QEMU program the settings name (vm.qemu, BERTH_QEMU) */
	char *vmm;  /* berth-vmm's path, NULL when none was found */
	bool have_pins;
	PinSet pins; /* berth-vmm's own pins when have_pins */
	bool ready;
	const char *accelerator; /* "kvm", "tcg", NULL when nothing can boot */
	json_t *accel;		 /* berth-vmm accel --json: the choice and its probe */
	char *verdict;
	char *reasons[_CHECK_ID_MAX];
	size_t n_reasons;
} Report;

static char *vformat(const char *fmt, va_list ap) _printf_(1, 0);
static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

static char *format(const char *fmt, ...) _printf_(1, 2);
static char *format(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	return s;
}

/* Append to *@s, with @sep first when *@s is not empty. On OOM *@s is kept as it was. */
static void append(char **s, const char *sep, const char *fmt, ...) _printf_(3, 4);
static void append(char **s, const char *sep, const char *fmt, ...)
{
	_cleanup_free_ char *add = NULL;
	char *joined;
	va_list ap;

	va_start(ap, fmt);
	add = vformat(fmt, ap);
	va_end(ap);
	if (!add)
		return;
	if (asprintf(&joined, "%s%s%s", *s ? *s : "", *s && **s ? sep : "", add) < 0)
		return;
	free(*s);
	*s = joined;
}

static void check_set(Check *c, CheckStatus status, const char *fmt, ...) _printf_(3, 4);
static void check_set(Check *c, CheckStatus status, const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	free(c->detail);
	va_start(ap, fmt);
	c->detail = vformat(fmt, ap);
	va_end(ap);
}

static void check_remedy(Check *c, const char *fmt, ...) _printf_(2, 3);
static void check_remedy(Check *c, const char *fmt, ...)
{
	va_list ap;

	free(c->remedy);
	va_start(ap, fmt);
	c->remedy = vformat(fmt, ap);
	va_end(ap);
}

static void check_reason(Check *c, const char *fmt, ...) _printf_(2, 3);
static void check_reason(Check *c, const char *fmt, ...)
{
	va_list ap;

	free(c->reason);
	va_start(ap, fmt);
	c->reason = vformat(fmt, ap);
	va_end(ap);
}

static void report_done(Report *r)
{
	for (size_t i = 0; i < r->n_checks; i++) {
		free(r->checks[i].detail);
		free(r->checks[i].remedy);
		free(r->checks[i].reason);
		free(r->checks[i].more);
	}
	json_decref(r->accel);
	free(r->qemu);
	free(r->vmm);
	free(r->verdict);
}

static bool lists_microvm(const char *machine_help)
{
	const char *l = machine_help;

	/* One machine per line: "microvm              microvm (i386)". */
	while (l) {
		if (strneq(l, "microvm", 7) && (l[7] == ' ' || l[7] == '\t'))
			return true;
		l = strchr(l, '\n');
		if (l)
			l++;
	}
	return false;
}

/* "QEMU emulator version 7.2.22 (Debian …)" → "7.2.22"; NULL when it says something else. */
static char *qemu_version(const char *qemu)
{
	char *const argv[] = {(char *)qemu, (char *)"-version", NULL};
	_cleanup_free_ char *out = NULL;
	const char *p;
	int status;

	if (run_capture(argv, TOOL_TIMEOUT_MS, TOOL_OUTPUT_MAX, &out, &status) < 0 ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return NULL;
	p = strstr(out, "version ");
	if (!p)
		return NULL;
	p += strlen("version ");
	return strndup(p, strcspn(p, " \n"));
}

/* 1. berth-vmm execs the QEMU its settings name (qemu-system-x86_64 from PATH) and asks
 * for -machine microvm. */
static void check_qemu(Report *r)
{
	Check *c = &r->checks[CHECK_QEMU];
	_cleanup_free_ char *qemu = NULL, *out = NULL, *version = NULL;
	int k, status;

	c->title = "QEMU with microvm";
	if (strchr(r->qemu, '/') ? access(r->qemu, X_OK) < 0 || !(qemu = strdup(r->qemu))
				 : find_executable_in_path(r->qemu, &qemu) < 0) {
		if (!streq(r->qemu, QEMU_BINARY)) {
			check_set(c, CHECK_FAIL, "%s (BERTH_QEMU or vm.qemu) is not a program",
				  r->qemu);
			check_remedy(c, "point BERTH_QEMU or vm.qemu at qemu-system-x86_64, or "
					"unset it");
			check_reason(c, "no QEMU at %s", r->qemu);
			return;
		}
		check_set(c, CHECK_FAIL, QEMU_BINARY " is not in PATH");
		check_remedy(c, "install QEMU: sudo apt-get install qemu-system-x86");
		check_reason(c, "no " QEMU_BINARY " in PATH");
		return;
	}
	k = run_capture((char *const[]){qemu, (char *)"-machine", (char *)"help", NULL},
			TOOL_TIMEOUT_MS, TOOL_OUTPUT_MAX, &out, &status);
	if (k < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (k == -ETIME)
			check_set(c, CHECK_FAIL, "%s -machine help did not finish within %d s",
				  qemu, TOOL_TIMEOUT_MS / 1000);
		else if (k < 0)
			check_set(c, CHECK_FAIL, "cannot run %s: %s", qemu, strerror(-k));
		else
			check_set(c, CHECK_FAIL, "%s -machine help failed (%s %d)", qemu,
				  WIFEXITED(status) ? "exit status" : "signal",
				  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		check_remedy(c, "reinstall QEMU: sudo apt-get install --reinstall qemu-system-x86");
		check_reason(c, QEMU_BINARY " does not run");
		return;
	}
	if (!lists_microvm(out)) {
		check_set(c, CHECK_FAIL, "%s has no microvm machine type", qemu);
		check_remedy(
			c,
			"install a QEMU built with microvm (4.2 or later): sudo apt-get install qemu-system-x86");
		check_reason(c, QEMU_BINARY " lacks the microvm machine");
		return;
	}
	version = qemu_version(qemu);
	if (version)
		check_set(c, CHECK_OK, "%s (QEMU %s)", qemu, version);
	else
		check_set(c, CHECK_OK, "%s", qemu);
}

/* The settings vmm_locate() tried first and passed over, for the detail line. */
static char *skipped_settings(const char *configured, const char *config_path)
{
	const char *env = getenv("BERTH_VMM");
	char *skipped = NULL;

	if (env && *env && access(env, X_OK) < 0)
		append(&skipped, "; ", "BERTH_VMM=%s is not an executable file", env);
	if (configured && *configured && access(configured, X_OK) < 0)
		append(&skipped, "; ", "vm.vmm=%s in %s is not an executable file", configured,
		       config_path ? config_path : "~/.berth/config.json");
	return skipped;
}

static void canonicalize(char **path)
{
	char resolved[PATH_MAX], *p;

	if (!realpath(*path, resolved))
		return;
	p = strdup(resolved);
	if (!p)
		return;
	free(*path);
	*path = p;
}

/* 2. The same search berth uses to start VMs. */
static void check_vmm(Report *r, const BerthConfig *cfg)
{
	Check *c = &r->checks[CHECK_VMM];
	_cleanup_free_ char *skipped = skipped_settings(cfg->vm_vmm, cfg->path);

	c->title = "berth-vmm";
	if (vmm_locate(cfg->vm_vmm, &r->vmm) < 0) {
		r->vmm = NULL;
		check_set(c, CHECK_FAIL,
			  "not found%s%s; none in ~/.berth/vm/bin, in PATH or beside berth",
			  skipped ? ": " : "", skipped ? skipped : "");
		check_remedy(
			c,
			"build it (ninja -C build makes build/src/berth-vmm/berth-vmm) and install it with `berth vm install --vmm PATH`, or point BERTH_VMM at it");
		check_reason(c, "no berth-vmm");
		return;
	}
	canonicalize(&r->vmm);
	if (skipped) {
		check_set(c, CHECK_WARN, "%s (skipped: %s)", r->vmm, skipped);
		check_remedy(c, "point the setting at a berth-vmm binary, or remove it");
		return;
	}
	check_set(c, CHECK_OK, "%s", r->vmm);
}

/* 3. What this berth-vmm will agree to boot; it refuses anything else. */
static void check_pins(Report *r)
{
	Check *c = &r->checks[CHECK_PINS];
	int k;

	c->title = "berth-vmm's pinned kernel and rootfs";
	if (!r->vmm) {
		check_set(c, CHECK_UNKNOWN, "not checked: no berth-vmm to ask");
		check_reason(c, "berth-vmm's pins unknown");
		return;
	}
	k = vmm_query_pins(r->vmm, &r->pins);
	if (k < 0) {
		check_set(c, CHECK_FAIL, "`%s pins --json` %s", r->vmm,
			  k == -EBADMSG ? "failed or printed no pin set"
			  : k == -ETIME ? "did not finish in time"
					: strerror(-k));
		check_remedy(
			c,
			"rebuild berth-vmm (ninja -C build), or replace it with `berth vm install --force`");
		check_reason(c, "berth-vmm's pins cannot be read");
		return;
	}
	r->have_pins = true;
	check_set(c, CHECK_OK, "kernel %.16s…, initrd %.16s…, rootfs %.16s…, linux %s",
		  r->pins.sha256[ARTIFACT_KERNEL], r->pins.sha256[ARTIFACT_INITRD],
		  r->pins.sha256[ARTIFACT_ROOTFS],
		  r->pins.linux_release[0] ? r->pins.linux_release : "unknown");
}

/* What is wrong with one installed artifact, collected across the three. */
typedef struct ArtifactProblems {
	char *detail;
	char *missing; /* "kernel, rootfs" */
	char *damaged;
} ArtifactProblems;

static void inspect_artifact(const PinSet *pins, const char *vm_dir, ArtifactKind kind,
			     ArtifactProblems *p)
{
	const char *name = artifact_kind_to_string(kind);
	_cleanup_free_ char *path = pinset_install_path(pins, vm_dir, kind);
	char actual[SHA256_HEX_LEN + 1];
	const char *rel;
	struct stat st;
	int k;

	if (!path) {
		append(&p->detail, "; ", "%s: out of memory", name);
		return;
	}
	rel = path + strlen(vm_dir) + 1;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT) {
			append(&p->detail, "; ", "%s missing", name);
			append(&p->missing, ", ", "%s", name);
		} else {
			append(&p->detail, "; ", "%s %s: %s", name, rel, strerror(errno));
			append(&p->damaged, ", ", "%s", name);
		}
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		append(&p->detail, "; ", "%s %s is not a regular file", name, rel);
		append(&p->damaged, ", ", "%s", name);
		return;
	}
	k = sha256_file_hex(path, actual, NULL);
	if (k < 0) {
		append(&p->detail, "; ", "%s %s cannot be read: %s", name, rel, strerror(-k));
		append(&p->damaged, ", ", "%s", name);
		return;
	}
	if (!streq(actual, pins->sha256[kind])) {
		append(&p->detail, "; ", "%s %s has sha256 %s, expected %s", name, rel, actual,
		       pins->sha256[kind]);
		append(&p->damaged, ", ", "%s", name);
	}
}

/* 4. The files berth-vmm will look for, hashed as berth-vmm will hash them before a boot. */
static void check_artifacts(Report *r)
{
	Check *c = &r->checks[CHECK_ARTIFACTS];
	_cleanup_free_ char *vm_dir = berth_vm_dir();
	ArtifactProblems p = {};
	const char *whose = "";
	PinSet pins;

	c->title = "Pinned kernel and rootfs in ~/.berth/vm";
	if (!vm_dir) {
		check_set(c, CHECK_UNKNOWN, "no home directory to look in: set HOME or BERTH_HOME");
		check_reason(c, "no ~/.berth");
		return;
	}
	/* Without a berth-vmm to ask, the CLI's own pins are the ones `berth vm install` uses. */
	if (r->have_pins)
		pins = r->pins;
	else {
		pinset_compiled(&pins);
		whose = " (berth's own pins; berth-vmm could not be asked)";
	}
	for (int k = 0; k < ARTIFACT_BASE_MAX; k++)
		inspect_artifact(&pins, vm_dir, k, &p);
	if (!p.detail) {
		check_set(c, CHECK_OK, "%s: kernel, initrd and rootfs match the pins%s", vm_dir,
			  whose);
		return;
	}
	check_set(c, CHECK_FAIL, "%s: %s%s", vm_dir, p.detail, whose);
	if (p.damaged)
		check_remedy(c,
			     "run `berth vm install --force` to replace %s with the pinned files",
			     p.damaged);
	else
		check_remedy(c, "run `berth vm install` to install the pinned kernel and rootfs");
	if (p.missing && p.damaged)
		check_reason(c, "%s not installed; %s not matching the pins", p.missing, p.damaged);
	else if (p.missing)
		check_reason(c, "%s not installed", p.missing);
	else
		check_reason(c, "%s not matching the pins", p.damaged);
	free(p.detail);
	free(p.missing);
	free(p.damaged);
}

/* 5. berth-vmm confines itself with Landlock on the host; see whether that would bite. */
static void check_landlock(Report *r)
{
	Check *c = &r->checks[CHECK_LANDLOCK];
	struct landlock_ruleset_attr_v6 used;
	struct utsname u = {};
	char missing[320];
	LandlockProbe p;
	int k;

	c->title = "Host Landlock (for confining berth-vmm)";
	(void)uname(&u);
	k = landlock_probe(&p);
	if (k < 0) {
		check_set(c, CHECK_UNKNOWN, "the probe could not run: %s", strerror(-k));
		check_remedy(c, "make $TMPDIR (or /tmp) writable and run `berth doctor` again");
		check_reason(c, "landlock probe failed: %s", strerror(-k));
		return;
	}
	switch (p.support) {
	case LANDLOCK_ENFORCING:
		landlock_abi_rights(LANDLOCK_ABI_HOST_SANDBOX, &used);
		landlock_abi_missing(p.abi, &used, missing, sizeof(missing));
		if (!missing[0]) {
			check_set(c, CHECK_OK, "ABI %d, enforcing", p.abi);
			return;
		}
		check_set(
			c, CHECK_WARN,
			"ABI %d, enforcing; berth-vmm's confinement is weaker, as this kernel has no %s",
			p.abi, missing);
		check_remedy(c,
			     "run a host kernel of 6.12 or later for berth-vmm's full confinement");
		return;
	case LANDLOCK_PRESENT_NOT_ENFORCING:
		check_set(
			c, CHECK_FAIL,
			"ABI %d, but NOT enforcing: a ruleset forbidding file creation did not stop it (host kernel %s)",
			p.abi, u.release);
		check_reason(c, "host Landlock does not enforce");
		break;
	case LANDLOCK_UNSUPPORTED:
	case _LANDLOCK_SUPPORT_MAX:
	case _LANDLOCK_SUPPORT_INVALID:
		check_set(c, CHECK_FAIL, "unsupported by host kernel %s: %s failed: %s%s",
			  u.release, p.failed_step ? p.failed_step : "the probe", strerror(p.error),
			  p.error == ENOSYS	  ? " (built without Landlock)"
			  : p.error == EOPNOTSUPP ? " (built in but not enabled at boot)"
						  : "");
		check_reason(c, "host Landlock unsupported");
		break;
	}
	check_remedy(
		c,
		"boot a host kernel of 5.13 or later with CONFIG_SECURITY_LANDLOCK=y and landlock in its lsm= list (e.g. lsm=landlock,lockdown,yama,integrity,apparmor); for debugging only, run berth-vmm with --no-host-sandbox");
}

/* One accelerator's probe, as a line under the check. */
static void describe_trial(Check *c, const char *name, json_t *t, bool chosen)
{
	const char *why = json_string_value(json_object_get(t, "why")) ?: "";
	long long ms = json_integer_value(json_object_get(t, "ms"));

	if (!json_is_true(json_object_get(t, "usable")))
		append(&c->more, "\n", "%s: not usable (%s)", name, why);
	else if (!json_is_true(json_object_get(t, "tried")))
		append(&c->more, "\n", "%s: not probed", name);
	else if (json_is_true(json_object_get(t, "booted")))
		append(&c->more, "\n", "%s: booted the probe in %lld ms%s", name, ms,
		       chosen ? " (chosen)" : "");
	else
		append(&c->more, "\n", "%s: %s after %lld ms: %s%s", name,
		       json_is_true(json_object_get(t, "outpaced")) ? "cut off" : "failed", ms, why,
		       chosen ? " (chosen as asked)" : "");
}

/*
 * 6. The accelerator, by the probe boot berth-vmm runs once per host boot (or its cached
 * verdict): a /dev/kvm that opens proves nothing, only a VM that booted does.
 */
static void check_accelerator(Report *r)
{
	Check *c = &r->checks[CHECK_ACCELERATOR];
	_cleanup_free_ char *out = NULL;
	json_t *probe, *trials, *kvm;
	const char *chosen, *summary;
	struct passwd *pw;
	int k, status;

	c->title = "Accelerator";
	for (int i = 0; i < CHECK_ACCELERATOR; i++)
		if (r->checks[i].status == CHECK_FAIL || r->checks[i].status == CHECK_UNKNOWN) {
			check_set(c, CHECK_UNKNOWN,
				  "not probed: a probe boots the pinned kernel with berth-vmm, and "
				  "the checks above did not pass");
			check_remedy(c,
				     "fix what the checks above say, then run berth doctor again");
			check_reason(c, "accelerator not probed");
			return;
		}
	k = run_capture((char *const[]){r->vmm, (char *)"accel", (char *)"--json", NULL},
			PROBE_TIMEOUT_MS, TOOL_OUTPUT_MAX, &out, &status);
	r->accel = k >= 0 ? json_loads(out, 0, NULL) : NULL;
	if (!json_is_object(r->accel)) {
		check_set(c, CHECK_FAIL, "`%s accel --json` %s", r->vmm,
			  k == -ETIME ? "did not finish in time"
			  : k < 0     ? strerror(-k)
				      : "printed no verdict");
		check_remedy(c, "run `%s accel` to see why", r->vmm);
		check_reason(c, "the accelerator probe did not run");
		return;
	}
	probe = json_object_get(r->accel, "probe");
	trials = json_object_get(probe, "trials");
	kvm = json_object_get(trials, "kvm");
	chosen = json_string_value(json_object_get(r->accel, "chosen"));
	summary = json_string_value(json_object_get(r->accel, "reason")) ?: "";
	if (trials) {
		describe_trial(c, "tcg", json_object_get(trials, "tcg"),
			       chosen && streq(chosen, "tcg"));
		describe_trial(c, "kvm", kvm, chosen && streq(chosen, "kvm"));
		append(&c->more, "\n", "probed %s%s (berth-vmm accel --reprobe probes again)",
		       json_string_value(json_object_get(probe, "probedAt")) ?: "?",
		       json_is_true(json_object_get(probe, "cached")) ? ", cached until the host "
									"reboots or QEMU or "
									"the kernel changes"
								      : "");
	}
	if (!chosen) {
		check_set(c, CHECK_FAIL, "%s",
			  json_string_value(json_object_get(r->accel, "error")) ?: "no verdict");
		check_remedy(c,
			     "run `%s accel` for the details; BERTH_ACCEL or vm.accel may ask "
			     "for an accelerator this host cannot boot",
			     r->vmm);
		check_reason(c, "no accelerator boots the pinned kernel here");
		return;
	}
	r->accelerator = streq(chosen, "kvm") ? "kvm" : "tcg";
	if (streq(chosen, "kvm")) {
		c->title = "Accelerator (KVM)";
		check_set(c, CHECK_OK, "%s", summary);
		return;
	}
	c->title = "Accelerator (TCG emulation)";
	check_set(c, CHECK_WARN,
		  "%s. QEMU emulates the CPU, so a VM boots in seconds instead of well under a "
		  "second; the guest is as isolated as under KVM, and the same pinned kernel "
		  "enforces Landlock",
		  summary);
	if (!streq(json_string_value(json_object_get(r->accel, "mode")) ?: "", "auto"))
		check_remedy(c, "TCG was asked for (%s); drop that setting to let Berth probe KVM",
			     json_string_value(json_object_get(r->accel, "source")) ?: "?");
	else if (kvm && json_is_true(json_object_get(kvm, "usable")))
		check_remedy(c,
			     "nothing to change: this host's KVM opens but does not run the guest "
			     "faster than emulation (a nested or paravirtual KVM, say), so Berth "
			     "uses TCG");
	else if (strstr(json_string_value(json_object_get(kvm, "why")) ?: "", "ermission")) {
		pw = getpwuid(getuid());
		check_remedy(
			c,
			"let this user open /dev/kvm: sudo usermod -aG kvm %s, log in again, then "
			"berth-vmm accel --reprobe",
			pw ? pw->pw_name : "$USER");
	} else
		check_remedy(
			c,
			"enable KVM: turn on VT-x/AMD-V in the firmware (or nested virtualization for a cloud VM) and load the module (sudo modprobe kvm_intel, or kvm_amd), then let this user open /dev/kvm read-write (the kvm group)");
}

static void report_verdict(Report *r)
{
	_cleanup_free_ char *joined = NULL;
	bool any_fail = false;

	r->ready = true;
	for (size_t i = 0; i < r->n_checks; i++) {
		if (r->checks[i].status == CHECK_FAIL || r->checks[i].status == CHECK_UNKNOWN)
			r->ready = false;
		if (r->checks[i].status == CHECK_FAIL)
			any_fail = true;
	}
	/* A check that could not run because an earlier one failed adds nothing to that
	 * failure, so unknowns are quoted only when nothing failed outright. */
	for (size_t i = 0; i < r->n_checks; i++) {
		Check *c = &r->checks[i];

		if (c->status == (any_fail ? CHECK_FAIL : CHECK_UNKNOWN) && c->reason) {
			r->reasons[r->n_reasons++] = c->reason;
			append(&joined, "; ", "%s", c->reason);
		}
	}
	/* READY only when a VM of the chosen kind has booted: the probe did that. */
	if (r->ready && r->accelerator)
		r->verdict = format("VM sandbox: READY (%s)",
				    streq(r->accelerator, "kvm") ? "KVM" : "TCG emulation, slower");
	else {
		r->ready = false;
		r->accelerator = NULL;
		r->verdict =
			format("VM sandbox: NOT READY (%s)", joined ? joined : "no check passed");
	}
}

static void print_human(const Report *r)
{
	struct utsname u = {};

	(void)uname(&u);
	if (streq(r->sandbox, "vm")) {
		if (r->have_pins)
			printf("Kernel that runs Berth's apps: %s (pinned in berth-vmm)\n",
			       r->pins.linux_release[0] ? r->pins.linux_release : "unknown");
		else
			printf("Kernel that runs Berth's apps: unknown (no berth-vmm pins)\n");
		printf("Host: %s %s %s\n\n", u.sysname, u.release, u.machine);
	}
	for (size_t i = 0; i < r->n_checks; i++) {
		const Check *c = &r->checks[i];

		printf("  %s %s %s\n", status_glyphs[c->status], c->title,
		       c->detail ? c->detail : "(out of memory)");
		for (const char *m = c->more; m && *m;) {
			size_t n = strcspn(m, "\n");

			printf("      %.*s\n", (int)n, m);
			m += n + (m[n] == '\n');
		}
		if (c->remedy)
			printf("      → %s\n", c->remedy);
	}
	printf("\n%s\n", r->verdict ? r->verdict : "(out of memory)");
}

static json_t *check_to_json(const Check *c)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "id", c->id, "title", c->title, "status",
			      status_names[c->status], "detail", c->detail ? c->detail : "");

	if (o && c->remedy)
		json_object_set_new(o, "remedy", json_string(c->remedy));
	if (o && c->more)
		json_object_set_new(o, "more", json_string(c->more));
	return o;
}

static int print_json(const Report *r)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_t *checks = json_array(), *reasons = json_array();

	doc = json_pack("{s:i, s:s, s:b, s:o, s:s, s:o, s:o}", "schemaVersion", 1, "sandbox",
			r->sandbox, "ready", r->ready, "accelerator",
			r->accelerator ? json_string(r->accelerator) : json_null(), "verdict",
			r->verdict ? r->verdict : "", "reasons", reasons, "checks", checks);
	if (!doc)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_reasons; i++)
		json_array_append_new(reasons, json_string(r->reasons[i]));
	for (size_t i = 0; i < r->n_checks; i++)
		json_array_append_new(checks, check_to_json(&r->checks[i]));
	if (r->accel)
		json_object_set(doc, "accel", r->accel);
	if (r->have_pins)
		json_object_set_new(
			doc, "pins",
			json_pack("{s:s, s:s, s:s, s:s}", "kernel", r->pins.sha256[ARTIFACT_KERNEL],
				  "initrd", r->pins.sha256[ARTIFACT_INITRD], "rootfs",
				  r->pins.sha256[ARTIFACT_ROOTFS], "linux", r->pins.linux_release));
	if (json_dumpf(doc, stdout, JSON_SORT_KEYS | JSON_INDENT(2)) < 0)
		return -EIO;
	printf("\n");
	return 0;
}

static int report_emit(const Report *r, bool json)
{
	if (json && print_json(r) < 0)
		return log_error("cannot print the report as JSON"), 1;
	if (!json)
		print_human(r);
	if (fflush(stdout) != 0)
		return 1;
	return r->ready ? 0 : 1;
}

static void doctor_vm(Report *r, const BerthConfig *cfg)
{
	static const char *const ids[_CHECK_ID_MAX] = {
		[CHECK_QEMU] = "qemu",	       [CHECK_VMM] = "berth-vmm",
		[CHECK_PINS] = "pins",	       [CHECK_ARTIFACTS] = "artifacts",
		[CHECK_LANDLOCK] = "landlock", [CHECK_ACCELERATOR] = "accelerator",
	};

	r->sandbox = "vm";
	r->n_checks = _CHECK_ID_MAX;
	for (size_t i = 0; i < r->n_checks; i++)
		r->checks[i].id = ids[i];
	r->qemu = strdup(config_get(cfg, CONFIG_QEMU, NULL, NULL));
	if (!r->qemu) {
		log_error_errno(-ENOMEM, "out of memory");
		return;
	}
	check_qemu(r);
	check_vmm(r, cfg);
	check_pins(r);
	check_artifacts(r);
	check_landlock(r);
	check_accelerator(r);
	report_verdict(r);
}

/* --- --sandbox docker ----------------------------------------------------------------- */

/* The Docker sandbox's checks, in the order they are printed (and of r->checks[]). */
enum {
	DCHECK_DOCKER,
	DCHECK_VMM,  /* CHECK_VMM: check_vmm() fills it */
	DCHECK_PINS, /* CHECK_PINS: check_pins() too */
	DCHECK_ENGINE,
	DCHECK_KERNEL,
	DCHECK_IMAGE,
	_DCHECK_MAX,
};

_Static_assert((int)DCHECK_VMM == (int)CHECK_VMM && (int)DCHECK_PINS == (int)CHECK_PINS &&
		       (int)_DCHECK_MAX <= (int)_CHECK_ID_MAX,
	       "the shared checks keep their places");

static void check_docker_engine(Report *r, const char *docker)
{
	Check *c = &r->checks[DCHECK_ENGINE];
	char *const argv[] = {(char *)docker, "version", "--format", "{{.Server.Version}}", NULL};
	_cleanup_free_ char *out = NULL;
	int status, k;

	c->title = "Docker engine";
	if (!docker) {
		check_set(c, CHECK_UNKNOWN, "not checked: no docker program");
		check_reason(c, "no docker program");
		return;
	}
	k = run_capture(argv, TOOL_TIMEOUT_MS, TOOL_OUTPUT_MAX, &out, &status);
	if (out)
		out[strcspn(out, "\n")] = '\0';
	if (k < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out || !out[0]) {
		check_set(c, CHECK_FAIL, "dockerd does not answer (%s)",
			  k == -ETIME ? "timed out"
			  : k < 0     ? strerror(-k)
				      : "docker version failed");
		check_remedy(c,
			     "start it (systemctl start docker, or dockerd as root), and make sure "
			     "you may use its socket (the docker group)");
		check_reason(c, "dockerd does not answer");
		return;
	}
	check_set(c, CHECK_OK, "dockerd %s answers", out);
}

/* The kernel that enforces a container's policies is the host's: say which, and its
 * Landlock. */
static void check_enforcing_kernel(Report *r)
{
	Check *c = &r->checks[DCHECK_KERNEL];
	struct utsname u = {};
	LandlockProbe p;
	int k;

	(void)uname(&u);
	c->title = "Enforcing kernel (the host's)";
	k = landlock_probe(&p);
	if (k >= 0 && p.support == LANDLOCK_ENFORCING) {
		check_set(
			c, CHECK_OK,
			"Linux %s, Landlock ABI %d enforcing; not Berth's pinned kernel, so what an "
			"app may do depends on this host",
			u.release, p.abi);
		return;
	}
	check_set(c, CHECK_FAIL, "Linux %s: Landlock %s", u.release,
		  k < 0 ? "could not be probed" : "is not enforcing");
	check_remedy(c,
		     "boot a host kernel with Landlock enabled (5.13 or later, landlock in lsm=), "
		     "or use the VM sandbox, whose pinned kernel always has it (--runtime vm)");
	check_reason(c, "the host's kernel does not enforce Landlock");
}

static void check_docker_image(Report *r, const char *docker)
{
	Check *c = &r->checks[DCHECK_IMAGE];
	char why[512];
	DockerImage img;
	int k;

	c->title = "Berth's base image";
	if (!docker || r->checks[DCHECK_ENGINE].status != CHECK_OK || !r->have_pins) {
		check_set(c, CHECK_UNKNOWN, "not checked: %s",
			  r->have_pins ? "dockerd does not answer" : "berth-vmm's pins unknown");
		return;
	}
	k = docker_image_find(docker, r->pins.sha256[ARTIFACT_ROOTFS], &img, why, sizeof(why));
	if (k >= 0) {
		check_set(c, CHECK_OK, "%s (%.19s…), made from the pinned rootfs %.16s…", img.tag,
			  img.id, r->pins.sha256[ARTIFACT_ROOTFS]);
		return;
	}
	if (k == -ENOENT && geteuid() == 0) {
		check_set(c, CHECK_WARN, "%s; the first container makes it (a few seconds)", why);
		check_remedy(c, "nothing to do, or make it now: berth vm install --runtime docker");
		return;
	}
	check_set(c, CHECK_FAIL, "%s", why);
	check_remedy(c, "make it once as root: sudo berth vm install --runtime docker");
	check_reason(c, "no base image");
}

static void doctor_docker(Report *r, const BerthConfig *cfg)
{
	static const char *const ids[_DCHECK_MAX] = {
		[DCHECK_DOCKER] = "docker", [DCHECK_ENGINE] = "engine", [DCHECK_VMM] = "berth-vmm",
		[DCHECK_PINS] = "pins",	    [DCHECK_KERNEL] = "kernel", [DCHECK_IMAGE] = "image",
	};
	_cleanup_free_ char *docker = NULL, *joined = NULL;
	Check *c = &r->checks[DCHECK_DOCKER];
	char err[512];

	r->sandbox = "docker";
	r->n_checks = _DCHECK_MAX;
	for (size_t i = 0; i < r->n_checks; i++)
		r->checks[i].id = ids[i];
	c->title = "docker";
	docker = docker_program(err, sizeof(err));
	if (docker)
		check_set(c, CHECK_OK, "%s", docker);
	else {
		check_set(c, CHECK_FAIL, "not found");
		check_remedy(c, "%s", err);
		check_reason(c, "no docker program");
	}
	check_vmm(r, cfg);
	check_pins(r);
	check_docker_engine(r, docker);
	check_enforcing_kernel(r);
	check_docker_image(r, docker);
	r->ready = true;
	for (size_t i = 0; i < r->n_checks; i++) {
		Check *k = &r->checks[i];

		if (k->status != CHECK_FAIL && k->status != CHECK_UNKNOWN)
			continue;
		r->ready = false;
		if (k->reason && !(k->status == CHECK_UNKNOWN && joined)) {
			r->reasons[r->n_reasons++] = k->reason;
			append(&joined, "; ", "%s", k->reason);
		}
	}
	r->verdict = r->ready ? format("Docker sandbox: READY (the host's kernel enforces, not "
				       "Berth's pinned one)")
			      : format("Docker sandbox: NOT READY (%s)",
				       joined ? joined : "a check could not run");
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option options[] = {
		{"sandbox", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	_cleanup_(config_done) BerthConfig cfg = {};
	const char *flag = NULL, *sandbox;
	ConfigError cerr = {};
	Report r = {};
	bool json = false;
	int c, ret;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		switch (c) {
		case 's':
			flag = optarg;
			break;
		case 'j':
			json = true;
			break;
		case CLI_OPT_HELP:
			cli_print_help();
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage_error("takes no arguments, got '%s'", argv[optind]);
	/* A broken config file should not stop the doctor; it says so and checks the rest. */
	if (config_load(NULL, &cfg, &cerr) < 0) {
		char msg[1024];

		config_error_format(&cerr, msg, sizeof(msg));
		log_warning("ignoring the config file: %s", msg);
	}
	sandbox = config_get(&cfg, CONFIG_SANDBOX, flag, NULL);
	if (!sandbox)
		sandbox = "vm";
	if (streq(sandbox, "docker"))
		doctor_docker(&r, &cfg);
	else if (streq(sandbox, "vm"))
		doctor_vm(&r, &cfg);
	else
		return log_error("unknown sandbox '%s': use --sandbox vm or --sandbox docker",
				 sandbox),
		       2;
	ret = report_emit(&r, json);
	report_done(&r);
	return ret;
}
