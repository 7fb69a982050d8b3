/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "artifacts.h"
#include "host-sandbox.h"

/*
 * What a VM is made of, independent of the engine that runs it: QEMU's microvm, under KVM
 * or TCG as accel.h chooses, or a Docker container on the host's kernel (engine-docker.c),
 * each implementing the same three operations.
 */

#define VM_DISKS_MAX 8
/* QEMU's microvm has eight virtio-mmio transports: the root image, the channel, the state
 * and boot disks, and what is left for app shares. */
#define VM_TRANSPORTS_MAX 8
#define VM_SHARES_MAX (VM_TRANSPORTS_MAX - 4)
#define VM_PORTS_MAX 16

typedef struct VmDisk {
	const char *serial; /* the guest finds disks by serial=, since device order is not stable */
	int fd;
	bool readonly;
} VmDisk;

typedef struct VmPort {
	const char *name;	 /* virtio-serial port name seen by the guest */
	const char *socket_path; /* host unix socket QEMU listens on */
} VmPort;

typedef enum Accel {
	ACCEL_KVM,
	ACCEL_TCG,
	_ACCEL_MAX,
	_ACCEL_INVALID = -22,
} Accel;

/* What the Docker engine needs beyond the disks and ports (engine-docker.c). */
typedef struct VmShareDir {
	const char *dir;    /* on the host: the app's bundle */
	const char *target; /* in the container: /app or /app/<name> */
} VmShareDir;

typedef struct VmContainer {
	const char *docker;   /* the docker program */
	const char *image;    /* the base image's id (sha256:...), verified (docker-image.h) */
	const char *name;     /* the container's name: unique to the boot */
	const char *host_dir; /* the run dir's directory bound at /run/berth-host */
	const char *boot_id;
	const char *volume_prefix; /* berth-<name>: -workspace, -state, -context; NULL: tmpfs */
	const char *run_dir;	   /* for the container's label */
	VmShareDir shares[VM_SHARES_MAX];
	size_t n_shares;
} VmContainer;

typedef struct VmConfig {
	const Artifacts *artifacts;
	unsigned cpus;
	unsigned mem_mib;
	Accel accel;
	long tsc_khz; /* TCG only; see tsc.h */
	/* The kernel console is QEMU's standard output, a pipe the supervisor reads
	 * (Engine.console_fd): it decides what of it a file on the host keeps. */
	const char *qmp_path; /* QEMU's QMP socket (saving and restoring), or NULL for none */
	bool incoming;	      /* a restore: -incoming defer; the stream's descriptor comes
			       * over QMP (getfd), then migrate-incoming */
	int ram_fd; /* >= 0: the guest's memory is this memfd (share=on), which a snapshot's
		     * stream leaves out (x-ignore-shared); otherwise QEMU's own */
	const char *qemu_binary;
	const char *extra_cmdline; /* pinned options only; never secrets */
	const char *cmdline;	   /* the whole kernel command line instead (a restore: the
				    * template's), or NULL */
	VmDisk disks[VM_DISKS_MAX];
	size_t n_disks;
	VmPort ports[VM_PORTS_MAX];
	size_t n_ports;
	const HostSandbox *host_sandbox; /* QEMU's confinement; NULL or off: none */
	const VmContainer *container;	 /* the Docker engine's settings; NULL for QEMU */
} VmConfig;

typedef struct Engine Engine;

typedef struct EngineOps {
	/* Start the VM; on success the engine owns a child process. */
	int (*start)(Engine *e, const VmConfig *cfg);
	/* Ask the VM to stop now (the guest had its chance to power off). */
	int (*stop)(Engine *e);
	/* Wait until the VM is gone; the engine's exit status in *ret_status. */
	int (*wait)(Engine *e, int *ret_status);
} EngineOps;

struct Engine {
	const EngineOps *ops;
	pid_t pid;
	int pidfd;
	int stderr_fd;	/* read end of QEMU's standard error: where it says why it failed */
	int console_fd; /* read end of the console, QEMU's standard output */
	int stop_fd;	/* the Docker engine's watchdog: closing it removes the container */
	Accel accel;
	char **argv;
};

extern const EngineOps engine_qemu_ops;
extern const EngineOps engine_docker_ops;
/* Remove the Docker engine's boot-disk file from @host_dir, if berth-init has not: it holds
 * the secrets, and a container that never started never read it. */
void engine_docker_forget_boot_file(const char *host_dir);

/* Wait for the engine's child (QEMU, or the docker client) to end: EngineOps.wait of both. */
int engine_wait_child(Engine *e, int *ret_status);
/* An engine that has started nothing yet. */
void engine_init(Engine *e, const EngineOps *ops);
const char *accel_to_string(Accel a);
Accel accel_from_string(const char *s);
/* The kernel command line for @cfg, malloc()ed. */
char *vm_kernel_cmdline(const VmConfig *cfg);
void engine_done(Engine *e);
