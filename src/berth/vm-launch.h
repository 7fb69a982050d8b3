/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "dev-bundle.h"
#include "env-args.h"
#include "evloop.h"
#include "manifest.h"
#include "publish.h"

/*
 * Booting one app in its own VM, as `berth dev` and `berth mcp` both do: load and check
 * berth.yml, find berth-vmm and the pinned artifacts (installing them when missing),
 * bundle the app, start berth-vmm detached and wait until the app is ready.
 *
 * Human lines go to standard output prefixed with @prefix; `berth mcp` points its
 * standard output elsewhere before calling in, so nothing here reaches its MCP stream.
 *
 * Secrets (docs/secrets.md): a command that takes --env and --env-file hands each one to
 * vm_launch_add_env() / vm_launch_add_env_file() while it parses its arguments, which
 * fill l->env. vm_launch_boot() then writes the secrets disk for the VM, passes it to
 * berth-vmm with --secrets, and deletes it once berth-vmm has handed it to QEMU (on
 * every path: a failed start and a signal included). With no --env given nothing is
 * written. Warnings about the scoping go to standard error.
 *
 * The terminal (docs/terminal.md): an app that declares terminal:* gets a login made for
 * the session (l->terminal_login), on the secrets disk, for that app alone. With
 * l->publish (berth dev), its web view's port is published (berth-vmm run --publish), and
 * l->published[] says which ports and their sockets in the run dir.
 *
 * The browser (docs/browser.md): an app that declares browser:* gets the browser layer
 * (installed here on first need, attached with berth-vmm run --layer browser), 2 GiB of
 * memory and a VNC password made for the session (l->vnc_password), on the secrets disk
 * for that app alone; with l->publish, noVNC's port is published.
 */

/* How far a boot is, for a command that tells its users (berth mcp's progress). */
typedef enum VmLaunchStage {
	VM_LAUNCH_STAGE_INSTALLING,   /* the pinned artifacts are being installed */
	VM_LAUNCH_STAGE_BOOTING,      /* berth-vmm starts QEMU, the guest boots */
	VM_LAUNCH_STAGE_APP_STARTING, /* the guest started the app; it is not ready yet */
	_VM_LAUNCH_STAGE_MAX,
	_VM_LAUNCH_STAGE_INVALID = -22,
} VmLaunchStage;

struct VmLaunch;
typedef void (*vm_launch_stage_t)(struct VmLaunch *l, VmLaunchStage stage, void *userdata);

/* An app that runs beside the main one in its VM (berth dev --apps). */
typedef struct VmCompanion {
	char *dir; /* absolute */
	Manifest *manifest;
	Bundle bundle;
} VmCompanion;

#define VM_LAUNCH_COMPANIONS_MAX 3 /* a VM holds four app shares */
#define VM_LAUNCH_MEM_ONE_MIB 512
#define VM_LAUNCH_MEM_CONTEXT_MIB 768 /* one app with a /context scope (SPEC 8.3) */
#define VM_LAUNCH_MEM_SEVERAL_MIB 1024
#define VM_LAUNCH_MEM_BROWSER_MIB 2048 /* the browser layer's Chromium (SPEC 8.3) */

typedef struct VmLaunch {
	const char *prefix;   /* "[berth:dev] " */
	const char *apps_arg; /* --apps a,b: set before vm_launch_load(), which loads them */
	VmCompanion companions[VM_LAUNCH_COMPANIONS_MAX];
	size_t n_companions;
	char *app_dir; /* absolute */
	char *name;    /* the app's name in berth.yml */
	char *vm_name; /* berth-vmm --name */
	char *run_dir; /* ~/.berth/run/vm/<vm_name> */
	char *vmm;     /* the berth-vmm binary */
	char *state;   /* the app's state disk */
	Manifest *manifest;
	Bundle bundle;
	unsigned boot_timeout_ms;
	bool cold;	      /* --cold: boot the kernel, do not restore a snapshot */
	bool reloads;	      /* the apps reload in place: berth-vmm run --reloads */
	bool docker;	      /* --runtime docker: a container on this host's kernel */
	char *runtime_reason; /* which runtime, chosen where (runtime_select()) */
	char **vmm_args;      /* more `berth-vmm run` arguments, NULL-terminated (may be NULL) */
	EnvSet *env;	      /* --env and --env-file values (owned); NULL when none was given */
	char **egress_allow;  /* --egress-allow patterns from berth.yml (vm_egress_plan()) */
	char *terminal_login; /* "berth:<secret>" when the app declares terminal:*, else NULL */
	int browser_app;      /* which app declares browser:* (0 main, 1.. companions), or -1 */
	char *vnc_password;   /* its session's VNC password (docs/browser.md), else NULL */
	bool publish;	      /* publish the app's ports of the publish table (berth dev) */
	uint16_t published[PUBLISH_PORTS_MAX]; /* which, with l->publish */
	size_t n_published;
	struct VmBoot *boot;	    /* the boot in progress, NULL when none */
	long long boot_ms;	    /* the last boot that got ready: how long it took */
	char boot_id[37];	    /* and its id */
	vm_launch_stage_t on_stage; /* called as each stage begins (may be NULL) */
	void *stage_userdata;
} VmLaunch;

#define VM_LAUNCH_BOOT_TIMEOUT_MS_DEFAULT (180 * 1000)
/* berth-vmm run returns once QEMU runs; the first start after a host boot probes first. */
#define VM_LAUNCH_VMM_START_TIMEOUT_MS (180 * 1000)
#define VM_LAUNCH_TAIL_LINES 12

/*
 * vm_launch_load() - load @app_dir's berth.yml into @l and refuse what the VM cannot run
 * (printing why). @runtime_flag is --runtime or NULL; the VM is named @vm_name_prefix
 * followed by the app's name ("berth-dev-notes").
 */
int vm_launch_load(VmLaunch *l, const char *app_dir, const char *runtime_flag,
		   const char *vm_name_prefix);

/* One --env (NAME or NAME=value) or --env-file argument into l->env; on failure prints
 * why (never a value) and returns -EINVAL, -E2BIG, -EBADMSG or -errno. */
int vm_launch_add_env(VmLaunch *l, const char *arg);
int vm_launch_add_env_file(VmLaunch *l, const char *path);

/* Find berth-vmm and install the pinned artifacts when missing. */
int vm_launch_prepare(VmLaunch *l);

/* Bundle the app (again) into l->bundle. On failure @err says why. */
int vm_launch_bundle(VmLaunch *l, char *err, size_t errlen);

/*
 * vm_launch_boot_start() - start the VM with l->bundle on @loop and follow its boot; @done
 * runs once it is over, with 0 when the app is ready (l->boot_ms and l->boot_id say how
 * long it took and which boot it is), -EIO when it failed, or -ECANCELED after
 * vm_launch_boot_cancel(). On failure it prints why (berth-vmm's reason and the last lines
 * of its log and the console, or the guest's log when an app failed), stops the VM and
 * removes its run dir, keeping the logs under ~/.berth/runs/<boot id>/: a boot the command
 * gives up on leaves nothing running. A negative return means @done will not run (the
 * reason was printed).
 */
typedef void (*vm_launch_done_t)(VmLaunch *l, int r, void *userdata);
int vm_launch_boot_start(VmLaunch *l, EvLoop *loop, vm_launch_done_t done, void *userdata);
/* Give up on the boot in progress: the VM is stopped and @done runs with -ECANCELED. */
void vm_launch_boot_cancel(VmLaunch *l);
bool vm_launch_booting(const VmLaunch *l);

/*
 * vm_launch_boot() - the same, waited for on a loop of its own, on which SIGINT, SIGTERM
 * and SIGHUP cancel the boot. Returns 0, -EIO or -ECANCELED.
 */
int vm_launch_boot(VmLaunch *l);

/* Stop the VM gracefully (berth vm stop). */
int vm_launch_stop(VmLaunch *l);

void vm_launch_done(VmLaunch *l);

/* Load @dir/berth.yml, printing the manifest's own error text on failure. */
int vm_launch_load_manifest(const char *dir, Manifest **ret);
