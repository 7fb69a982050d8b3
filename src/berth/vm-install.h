/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * Installing the pinned guest kernel, initrd and root image under ~/.berth/vm, each checked
 * against its sha256 pin before it is put in place (docs/vm-install.md). `berth vm install`
 * is this behind its options; `berth dev` and `berth mcp` call it when the artifacts are
 * missing.
 */
typedef struct VmInstallOptions {
	/* a directory to copy from; NULL: $BERTH_VMM_ARTIFACTS, vm.artifactsDir */
	const char *from;
	/* a download URL template; NULL: $BERTH_VM_ARTIFACTS_URL, vm.artifactsUrl */
	const char *url;
	const char *vmm;  /* a berth-vmm to install and take the pins of */
	bool no_download; /* copy only */
	bool force;	  /* replace files that are installed and match */
	bool no_snapshot; /* do not make the warm-start snapshot (docs/warm-start.md) */
	bool layers_only; /* install only the layers (an app's first need of one) */
	unsigned layers;  /* 1 << ARTIFACT_LAYER_*: the optional layers to install too */
	bool docker;	  /* --runtime docker: make the Docker base image, no snapshots */
} VmInstallOptions;

/* Install what @o says, printing a line per artifact. Returns 0 or -errno after saying
 * why (and what to do). */
int vm_install(const VmInstallOptions *o);
