/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "accel.h"
#include "artifacts.h"
#include "measure.h"
#include "docker-image.h"
#include "policy.h"
#include "publish.h"
#include "egress-dialer.h"
#include "engine.h"
#include "share.h"
#include "snapshot.h"

/* One running VM as berth-vmm sees it. */

#define VMM_APPS_MAX VM_SHARES_MAX /* one share an app (engine.h) */
#define SOCKET_PATH_MAX 103	   /* sizeof(sun_path) - 1, minus the portable margin */
#define VMM_BOOT_STALL_S_DEFAULT 30
#define VMM_LOG_BYTES_MAX (8 * 1024 * 1024) /* of vmm.log (info lines) */
#define VMM_LOG_RESERVE_BYTES (1024 * 1024) /* and warnings and errors after that */
#define POLICY_WARNINGS_MAX 64 /* compiler warnings carried per app to the guest's log */

typedef struct VmmApp {
	char *dir;		  /* on the host */
	char *name;		  /* the name in its berth.yml: the app's name in the VM */
	json_t *manifest;	  /* its berth.yml, normalised (manifest_to_json()) */
	CapabilityPolicy *policy; /* compiled from it, for the boot disk */
	json_t *warnings;	  /* what the compiler said about it */
	char policy_sha256[65];
	char *image; /* erofs image of the share, in the run dir */
	ShareDigest digest;
	int image_fd;
	unsigned reloads; /* times its share was replaced in place (reload.h) */
} VmmApp;

typedef struct VmmArgs {
	const char *name;
	const char *run_dir;
	const char *artifacts;
	const char *rootfs;
	const char *state;
	unsigned state_size_mib;
	const char *secrets;
	const char *console; /* NULL: console.log in the run dir */
	bool console_stderr;
	bool foreground;
	bool channel_external; /* leave qemu-mux.sock to another client (protocol tests) */
	bool no_host_sandbox;  /* run berth-vmm and QEMU unconfined (debugging only) */
	/* Testing: connect the channel to this unix socket instead of QEMU's; the program
	 * listening there plays the guest. */
	const char *channel_connect;
	EgressConfig egress; /* --egress-allow, --egress-max-conns, the test-only CIDR */
	unsigned cpus;
	unsigned mem_mib;
	const char *accel;     /* --accel: auto, kvm or tcg; NULL: BERTH_ACCEL, vm.accel, auto */
	const char *qemu;      /* --qemu: the QEMU program; NULL: BERTH_QEMU, vm.qemu, $PATH */
	unsigned boot_stall_s; /* a boot with no sign of life for this long fails; 0: never */
	bool cold;	       /* --cold: never restore a snapshot */
	bool reloads;	       /* --reloads: the apps reload in place (the plan says so) */
	bool docker;	       /* --engine docker: a container on the host's kernel */
	unsigned layers;       /* --layer: 1 << ARTIFACT_LAYER_* (docs/browser.md) */
	const char *apps[VMM_APPS_MAX];
	size_t n_apps;
	/* --publish: guest TCP ports served to the host as publish-<port>.sock, on channel
	 * port MUX_PORT_PUBLISH_BASE + their index here (docs/vm.md, "Published ports"). */
	uint16_t publish[PUBLISH_PORTS_MAX];
	size_t n_publish;
} VmmArgs;

typedef struct Vmm {
	VmmArgs args;
	char *name;
	char *run_dir;
	char *console_path;
	char *log_path;
	int lock_fd;
	int log_fd;
	Artifacts artifacts;
	Artifact layers[_ARTIFACT_KIND_MAX]; /* the --layer images, verified (fd -EBADF: none) */
	VmmApp apps[VMM_APPS_MAX];
	size_t n_apps;
	int state_fd;
	bool state_created;
	uint64_t state_size;
	char state_sha256[65]; /* chunked digest at boot (see sha256_chunked_fd_hex()) */
	uint64_t state_hashed_bytes;
	long state_hash_ms;
	bool state_pending;		    /* not measured yet (measure.h) */
	Measure measure;		    /* the disks measured while QEMU starts */
	int measure_kind[MEASURE_JOBS_MAX]; /* each job's artifact kind; -1: the state disk */
	bool measured;			    /* vmm_measure_finish() has answered: */
	int measure_r;			    /* what, */
	char measure_err[1024];		    /* and why */
	int secrets_fd;
	int boot_fd; /* the boot disk (boot-disk.h): unlinked, read-only to the guest */
	VmConfig vm;
	AccelChoice accel; /* which accelerator, who asked, and why */
	char *qemu;	   /* the QEMU program, resolved through the settings */
	char *failure;	   /* why the VM failed, once it has; NULL while it has not */
	int publish_app[PUBLISH_PORTS_MAX]; /* the index of the app serving each --publish */
	HostSandbox host_sandbox;
	Engine engine;
	char started_at[40];
	char boot_id[37];
	char *cmdline_extra; /* init= and the boot plan: never anything secret */
	/* Restored from a snapshot (snapshot.h), or why not. */
	bool restore;
	Snapshot snapshot;
	SnapshotKey snapshot_key; /* the pins it was made from, when restored */
	int ram_image_fd;	  /* the snapshot's memory, copied into ram_fd ... */
	int ram_fd;		  /* ... the VM's memory (a memfd QEMU maps) */
	Measure ram_load;	  /* ... by a child, while QEMU starts */
	HashStamp ram_stamp;	  /* the snapshot's memory as it was opened */
	bool ram_by_record;	  /* unchanged since it matched: copied, not hashed */
	int placeholder_fds[2 + SNAPSHOT_APPS];
	char *qmp_path;
	char boot_reason[600]; /* a cold boot: why it did not restore */
	/* The Docker engine (engine-docker.c): its settings and the verified base image. */
	VmContainer container;
	DockerImage docker_image;
	char *docker;
	char *container_name;
	char *host_dir;
	char *volume_prefix;
} Vmm;

int vmm_run_main(int argc, char **argv);

/* For serve.c: start measuring the disks prepare() left pending (the root image, the
 * layers, the state disk) beside QEMU's start; then, before the guest may run, wait for
 * them and check the pinned ones. 0, or a negative errno with @err set: -EPERM when one
 * does not match its pin, which must stop the VM (a cold boot would run the same disk). */
int vmm_measure_start(Vmm *v);
int vmm_measure_finish(Vmm *v, char *err, size_t errlen);

/* Compile @app's capability policy from its manifest (name and manifest set), in a VM of
 * @n_apps apps: policy, warnings and policy_sha256. 0 or -errno. */
int vmm_compile_policy(VmmApp *app, size_t n_apps);
/* For berth-vmm image (image-build.c): the apps of v->args loaded, their policies compiled
 * and checked as for a VM, the boot disk (no secrets) made in @work_dir, the shares'
 * digests taken. 0 or -errno after saying why. vmm_done() frees what it made. */
int vmm_plan_image(Vmm *v, const char *work_dir);
void vmm_done(Vmm *v);
/* berth-vmm image (image-build.c). */
int vmm_image_main(int argc, char **argv);

/* Configure v->vm for a cold boot after all (a restore that failed), with @reason. */
int vmm_config_cold(Vmm *v, const char *reason);
/* berth-vmm accel: the accelerator choice and the probe behind it (accel-verb.c). */
int vmm_accel_main(int argc, char **argv);
