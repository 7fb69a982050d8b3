/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "pins-generated.h"
#include "pins.h"

static const Pin pins[_ARTIFACT_KIND_MAX] = {
	[ARTIFACT_KERNEL] = { ARTIFACT_KERNEL, "kernel", PIN_KERNEL_SHA256, PIN_KERNEL_SIZE },
	[ARTIFACT_INITRD] = { ARTIFACT_INITRD, "initrd", PIN_INITRD_SHA256, PIN_INITRD_SIZE },
	[ARTIFACT_ROOTFS] = { ARTIFACT_ROOTFS, "rootfs", PIN_ROOTFS_SHA256, PIN_ROOTFS_SIZE },
};

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

const char *pin_kernel_package(void)
{
	return PIN_KERNEL_PACKAGE;
}

const char *pin_kernel_package_version(void)
{
	return PIN_KERNEL_PACKAGE_VERSION;
}

char *pin_install_path(const char *vm_dir, ArtifactKind kind)
{
	char *p = NULL;
	int r = -1;

	switch (kind) {
	case ARTIFACT_KERNEL:
		r = asprintf(&p, "%s/kernel/sha256/%s/vmlinux", vm_dir, PIN_KERNEL_SHA256);
		break;
	case ARTIFACT_INITRD:
		r = asprintf(&p, "%s/kernel/sha256/%s/initrd-%s.cpio", vm_dir, PIN_KERNEL_SHA256,
			     PIN_INITRD_SHA256);
		break;
	case ARTIFACT_ROOTFS:
		r = asprintf(&p, "%s/rootfs/rootfs-%s.erofs", vm_dir, PIN_ROOTFS_SHA256);
		break;
	case _ARTIFACT_KIND_MAX:
	case _ARTIFACT_KIND_INVALID:
		break;
	}
	return r < 0 ? NULL : p;
}

char *pin_asset_name(ArtifactKind kind)
{
	const Pin *pin = pin_get(kind);
	char *p = NULL;
	int r = -1;

	if (!pin)
		return NULL;
	switch (kind) {
	case ARTIFACT_KERNEL:
		r = asprintf(&p, "vmlinux-%s", pin->sha256);
		break;
	case ARTIFACT_INITRD:
		r = asprintf(&p, "initrd-%s.cpio", pin->sha256);
		break;
	case ARTIFACT_ROOTFS:
		r = asprintf(&p, "rootfs-%s.erofs", pin->sha256);
		break;
	case _ARTIFACT_KIND_MAX:
	case _ARTIFACT_KIND_INVALID:
		break;
	}
	return r < 0 ? NULL : p;
}
