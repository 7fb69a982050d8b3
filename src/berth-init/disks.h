/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/* Find the virtio disk whose serial= is @serial; its /dev path in @ret (e.g. /dev/vdb).
 * Device order is not stable, serials are. Returns 0 or -ENOENT. */
int disk_find_by_serial(const char *serial, char *ret, size_t size);

/* Drop what the kernel cached of disk @serial's blocks (BLKFLSBUF): from now on reads go to
 * what the host put there (a restore's real disk, a reload's new share). No such disk: 0.
 * Otherwise 0, or -errno with @err saying what failed. */
int disk_flush_cache(const char *serial, char *err, size_t errlen);

/*
 * state_disk_mount() - make @dev the persistent state disk: format it as ext4 on first use
 * (no ext4 magic at byte 1080), mount it on /state (nosuid,nodev) and bind
 * /state/workspace onto /workspace. Sets *@ret_formatted when it formatted the disk.
 */
int state_disk_mount(const char *dev, int *ret_formatted);

/* Count this boot in /state/berth/boot-count and return the new count (0 on failure):
 * proof, readable by the host, that the state disk persists across boots. */
int state_disk_count_boot(void);
