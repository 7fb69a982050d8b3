/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "macros.h"
#include "pins-generated.h"
#include "pins.h"

static const Pin pins[_ARTIFACT_KIND_MAX] = {
	[ARTIFACT_KERNEL] = {ARTIFACT_KERNEL, "kernel", PIN_KERNEL_SHA256, PIN_KERNEL_SIZE},
	[ARTIFACT_INITRD] = {ARTIFACT_INITRD, "initrd", PIN_INITRD_SHA256, PIN_INITRD_SIZE},
	[ARTIFACT_ROOTFS] = {ARTIFACT_ROOTFS, "rootfs", PIN_ROOTFS_SHA256, PIN_ROOTFS_SIZE},
	[ARTIFACT_LAYER_BROWSER] = {ARTIFACT_LAYER_BROWSER, "layer-browser",
				    PIN_LAYER_BROWSER_SHA256, PIN_LAYER_BROWSER_SIZE},
};

bool pin_layer_known(ArtifactKind kind)
{
	return kind >= ARTIFACT_BASE_MAX && kind < _ARTIFACT_KIND_MAX && pins[kind].sha256[0];
}

ArtifactKind artifact_layer_from_name(const char *name)
{
	for (int k = ARTIFACT_BASE_MAX; name && k < _ARTIFACT_KIND_MAX; k++)
		if (streq(pins[k].name + strlen("layer-"), name))
			return k;
	return _ARTIFACT_KIND_INVALID;
}

const Pin *pin_get(ArtifactKind kind)
{
	if (kind < 0 || kind >= _ARTIFACT_KIND_MAX)
		return NULL;
	return &pins[kind];
}

const char *pin_linux_release(void)
{
	return PIN_LINUX_RELEASE;
}

const char *pin_rootfs_daemons(void)
{
	return PIN_ROOTFS_DAEMONS;
}

void pinset_compiled(PinSet *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		snprintf(ret->sha256[k], sizeof(ret->sha256[k]), "%s", pins[k].sha256);
		ret->size[k] = pins[k].size;
	}
	snprintf(ret->linux_release, sizeof(ret->linux_release), "%s", PIN_LINUX_RELEASE);
}

const char *artifact_kind_to_string(ArtifactKind kind)
{
	const Pin *pin = pin_get(kind);

	return pin ? pin->name : NULL;
}

char *pinset_install_path(const PinSet *set, const char *vm_dir, ArtifactKind kind)
{
	char *p = NULL;
	int r = -1;

	switch (kind) {
	case ARTIFACT_KERNEL:
		r = asprintf(&p, "%s/kernel/sha256/%s/vmlinux", vm_dir, set->sha256[kind]);
		break;
	case ARTIFACT_INITRD:
		r = asprintf(&p, "%s/kernel/sha256/%s/initrd-%s.cpio", vm_dir,
			     set->sha256[ARTIFACT_KERNEL], set->sha256[kind]);
		break;
	case ARTIFACT_ROOTFS:
		r = asprintf(&p, "%s/rootfs/rootfs-%s.erofs", vm_dir, set->sha256[kind]);
		break;
	case ARTIFACT_LAYER_BROWSER:
		r = asprintf(&p, "%s/layers/browser-%s.erofs", vm_dir, set->sha256[kind]);
		break;
	case _ARTIFACT_KIND_MAX:
	case _ARTIFACT_KIND_INVALID:
		break;
	}
	return r < 0 ? NULL : p;
}

char *pinset_asset_name(const PinSet *set, ArtifactKind kind)
{
	static const char *const prefix[_ARTIFACT_KIND_MAX] = {
		[ARTIFACT_KERNEL] = "vmlinux-",
		[ARTIFACT_INITRD] = "initrd-",
		[ARTIFACT_ROOTFS] = "rootfs-",
		[ARTIFACT_LAYER_BROWSER] = "layer-browser-",
	};
	static const char *const suffix[_ARTIFACT_KIND_MAX] = {
		[ARTIFACT_KERNEL] = "",
		[ARTIFACT_INITRD] = ".cpio",
		[ARTIFACT_ROOTFS] = ".erofs",
		[ARTIFACT_LAYER_BROWSER] = ".erofs",
	};
	char *p = NULL;

	if (kind < 0 || kind >= _ARTIFACT_KIND_MAX)
		return NULL;
	if (asprintf(&p, "%s%s%s", prefix[kind], set->sha256[kind], suffix[kind]) < 0)
		return NULL;
	return p;
}

char *pin_install_path(const char *vm_dir, ArtifactKind kind)
{
	PinSet set;

	pinset_compiled(&set);
	return pinset_install_path(&set, vm_dir, kind);
}
