/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * berth-init in a container (berth-vmm --engine docker). The init is the same; what differs
 * is what the container's runtime did already or does not allow:
 *  - /proc, /sys, /dev, /run, /tmp, the app shares (read-only) and the state volumes are
 *    mounted by Docker, so berth-init mounts nothing;
 *  - the host channel is a unix socket in CONTAINER_HOST_DIR, a directory of the run dir
 *    bound into the container, where berth-init listens and berth-vmm connects;
 *  - the boot disk is a file there, removed once read;
 *  - every app shares the container's cgroup, whose limits berth-vmm sets;
 *  - the end of the channel ends the container: berth-vmm gone means no one is left to
 *    stop it.
 */

#define CONTAINER_HOST_DIR "/run/berth-host"
#define CONTAINER_CHANNEL_SOCKET CONTAINER_HOST_DIR "/mux.sock"
#define CONTAINER_BOOT_FILE CONTAINER_HOST_DIR "/boot.img"

/*
 * A deployed image (berth deploy) runs without berth-vmm: no channel, the plan baked into
 * the image at CONTAINER_IMAGE_BOOT_FILE (policies, no secrets), and each app's RPC a unix
 * socket CONTAINER_RPC_DIR/<app>.sock, owned by the owner of that directory (a host
 * directory bound there, or root's own), mode 0600. The image says BERTH_STANDALONE=1.
 * berth test runs it with BERTH_CHECK_EXPORTS=1: each app calls every export once with
 * stub inputs, prints one JSON line of results and exits, and the container with it.
 */
#define CONTAINER_IMAGE_BOOT_FILE "/etc/berth/boot.img"
#define CONTAINER_RPC_DIR "/run/berth-rpc"

/* Whether this init runs in a container: berth-vmm sets BERTH_CONTAINER=1 there. */
bool container_mode(void);
/* A deployed image's container, with no berth-vmm on the other side. */
bool container_standalone(void);
/* berth test's run of a deployed image. */
bool container_check_exports(void);

/*
 * container_channel_accept() - listen on CONTAINER_CHANNEL_SOCKET (owned by the run dir's
 * owner, mode 0600) and wait up to 60 s for berth-vmm. Returns the connection's fd
 * (non-blocking, close-on-exec) or -errno.
 */
int container_channel_accept(void);

/*
 * container_check_confined() - refuse a container that gives its apps more than Berth's
 * containers have: a network device other than lo, or a capability beyond the seven
 * berth-init needs. A deployed image can be started by anyone's docker run (or a pod
 * spec), so berth-init checks rather than trusts. 0, or -EPERM with what to do in @why.
 */
int container_check_confined(char *why, size_t whylen);

/* Whether @uid is one berth-init gives to an app or a daemon: a socket owned by it would be
 * that app's to call. */
bool container_uid_is_berths(uid_t uid);

/* Whether @path is a mount point of its own (a Docker volume, say): a different device
 * from its parent's. */
bool container_is_mount(const char *path);
