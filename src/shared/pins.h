/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * The guest artifacts this build trusts. The values come from vm/kernel/manifest.json
 * and vm/rootfs/manifest.json at build time; berth-vmm refuses to boot anything else.
 */

typedef enum ArtifactKind {
	ARTIFACT_KERNEL,
	ARTIFACT_INITRD,
	ARTIFACT_ROOTFS,
	/* The optional layers (docs/browser.md): installed and attached only when an app
	 * needs one. A berth-vmm built without a layer's manifest has an empty pin for it. */
	ARTIFACT_LAYER_BROWSER,
	_ARTIFACT_KIND_MAX,
	_ARTIFACT_KIND_INVALID = -22,
} ArtifactKind;

typedef struct Pin {
	ArtifactKind kind;
	const char *name;   /* "kernel", "initrd", "rootfs", "layer-browser" */
	const char *sha256; /* 64 lowercase hex digits */
	uint64_t size;	    /* bytes */
} Pin;

/* Every VM boots these three; the kinds from here on are the optional layers. */
#define ARTIFACT_BASE_MAX (ARTIFACT_ROOTFS + 1)

const Pin *pin_get(ArtifactKind kind);
/* Does this build trust a layer of @kind (its pin is not empty)? */
bool pin_layer_known(ArtifactKind kind);
/* The layer kind called @name ("browser"), or _ARTIFACT_KIND_INVALID. */
ArtifactKind artifact_layer_from_name(const char *name);
const char *pin_linux_release(void);
/* The brokers the pinned root image ships ("egress-broker,github-api-broker"), from its
 * manifest's "daemons": what a boot may ask of it without finding it missing. */
const char *pin_rootfs_daemons(void);

/* Install layout, relative to ~/.berth/vm:
 *   kernel/sha256/<kernel sha>/vmlinux, kernel/sha256/<kernel sha>/initrd-<initrd sha>.cpio,
 *   rootfs/rootfs-<rootfs sha>.erofs. Returns a malloc()ed path or NULL on OOM. */
char *pin_install_path(const char *vm_dir, ArtifactKind kind);

/* A set of pins as a value: the compiled-in one, or one read out of a berth-vmm binary
 * (`berth-vmm pins --json`), which is what that binary will agree to boot. */
typedef struct PinSet {
	char sha256[_ARTIFACT_KIND_MAX][65];
	uint64_t size[_ARTIFACT_KIND_MAX];
	char linux_release[128];
} PinSet;

void pinset_compiled(PinSet *ret);
/* Path of @kind under @vm_dir for the pins in @set (layout as pin_install_path()). */
char *pinset_install_path(const PinSet *set, const char *vm_dir, ArtifactKind kind);
char *pinset_asset_name(const PinSet *set, ArtifactKind kind);
const char *artifact_kind_to_string(ArtifactKind kind);
