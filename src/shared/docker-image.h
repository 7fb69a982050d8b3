/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Berth's base image for the Docker engine: the pinned root image itself, as a Docker
 * image. No registry is involved. It is made on this host from the rootfs that was just
 * verified against berth-vmm's pin: extracted with its owners and modes, written as one
 * tar in name order (the same bytes for the same rootfs), and imported as
 * berth-rootfs:<the rootfs pin's first 16 hex digits>. The image carries two labels, the
 * rootfs pin and the tar's sha256, and Docker's layer digest of an imported tar is the
 * tar's sha256: an image whose layer or labels do not match is made again, never used.
 */

#define DOCKER_IMAGE_REPO "berth-rootfs"

/*
 * What every Berth container runs with, whoever starts it (berth-vmm's Docker engine,
 * berth test, the command berth deploy prints): no network device but lo, every
 * capability dropped but the seven berth-init needs to make each app's identity and drop
 * into it, and /run and /tmp of its own. NULL-terminated.
 */
extern const char *const docker_confinement_args[];

typedef struct DockerImage {
	char tag[64];
	char id[80];	/* sha256:..., what docker run is given */
	char layer[80]; /* sha256:... of its one layer */
	bool made;	/* made by this call */
	long make_ms;
} DockerImage;

/* The docker program (BERTH_DOCKER, else docker in $PATH), malloc()ed, or NULL with a
 * message in @err. */
char *docker_program(char *err, size_t errlen);

/*
 * docker_image_find() - the base image for the rootfs @rootfs_sha256: 0 with *@ret filled,
 * -ENOENT when there is none that checks out (why in @err), or another -errno when Docker
 * did not answer.
 */
int docker_image_find(const char *docker, const char *rootfs_sha256, DockerImage *ret, char *err,
		      size_t errlen);

/*
 * docker_image_ensure() - find the base image for the rootfs open at @rootfs_fd, verified
 * as @rootfs_sha256, or make it from that descriptor. Making it needs root (the extraction
 * keeps the files' owners) and a few seconds.
 * @cache_dir: where the tree and the tar are made and removed again.
 * Returns 0 with *@ret filled, or -errno with what to do in @err.
 */
int docker_image_ensure(const char *docker, int rootfs_fd, const char *rootfs_sha256,
			const char *cache_dir, DockerImage *ret, char *err, size_t errlen);
