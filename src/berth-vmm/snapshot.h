/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "artifacts.h"
#include "engine.h"
#include "vm-template.h"

/*
 * VM snapshots (docs/warm-start.md): a template boot saved once, restored for every VM
 * instead of booting one.
 *
 * A snapshot lives in ~/.berth/vm/snapshots/<key>/ as vm.snap (QEMU's migration stream of
 * the devices' state), ram (the guest's memory, a sparse file of the VM's memory size) and
 * snapshot.json (their sha256s and sizes, the key they were made for), all 0600. The
 * memory is not in the stream (QEMU's x-ignore-shared): a restore copies it into the new
 * VM's own memory, a memfd, while QEMU starts, hashing what it copies, instead of QEMU
 * parsing it out of the stream page by page. The key
 * is everything a restore must match: the kernel, initramfs and root image pins, this
 * berth-vmm's own hash, the QEMU program and version, the accelerator, the vCPUs and
 * memory, the host CPU. A snapshot whose key differs, whose file is missing or another
 * size, or whose bytes fail the hash is never used: the VM boots cold, and the snapshot
 * is removed to be made again.
 *
 * A template has every device a VM may use, in a fixed order (the root image, then the
 * state disk, the boot disk and four app shares, then the channel): a restore gets the
 * same devices, its real disks where it has them and placeholders elsewhere. The template
 * kernel saw each disk at the placeholder's size, which is therefore the largest a VM's
 * disk may be (SNAPSHOT_*_BYTES).
 */

#define SNAPSHOT_SCHEMA 2
#define SNAPSHOT_META_MAX (64 * 1024)
#define SNAPSHOT_FILE_MAX (4ULL * 1024 * 1024 * 1024) /* more than any guest's RAM image */
/* The RAM image's digest chunks: small, since a guest's pages lie scattered over it. */
#define SNAPSHOT_RAM_CHUNK (64 * 1024)
/* The kind of its digest, as remembered for an unchanged file (hash-record.h). */
#define SNAPSHOT_RAM_RECORD_KIND "chunked-64KiB-sha256"
/* The template's placeholder disks: the largest state disk (--state-size's limit), boot
 * disk and app share image a restored VM may have. */
#define SNAPSHOT_STATE_BYTES (1ULL << 40)
#define SNAPSHOT_BOOT_BYTES (8ULL * 1024 * 1024)
#define SNAPSHOT_APP_BYTES (2ULL << 30)
#define SNAPSHOT_APPS 4
/* The template's extra kernel command line (no boot id: a restore brings its own). */
#define SNAPSHOT_TEMPLATE_CMDLINE "init=/sbin/berth-init " VM_TEMPLATE_FLAG

typedef struct SnapshotKey {
	char kernel[65], initrd[65], rootfs[65]; /* the artifacts' sha256 */
	char berth_vmm[65];			 /* this berth-vmm binary's sha256 */
	char qemu[PATH_MAX];
	char qemu_version[256];
	char host_cpu[256]; /* /proc/cpuinfo's model name, and how many */
	Accel accel;
	unsigned cpus, mem_mib;
} SnapshotKey;

typedef struct Snapshot {
	char dir[PATH_MAX];
	char path[PATH_MAX]; /* dir/vm.snap */
	char sha256[65];
	uint64_t size;
	char ram_path[PATH_MAX]; /* dir/ram */
	char ram_sha256[65];	 /* its chunked digest (sha256_chunked_fd_hex()) */
	uint64_t ram_size;	 /* the VM's memory */
	char created_at[40];
	char cmdline[2048]; /* the kernel command line the template booted with */
	long make_ms;
} Snapshot;

/* The key for a VM of these artifacts, QEMU, accelerator, vCPUs and memory. */
int snapshot_key_init(SnapshotKey *k, const Artifacts *art, const char *qemu, Accel accel,
		      unsigned cpus, unsigned mem_mib);
json_t *snapshot_key_to_json(const SnapshotKey *k);
/* ~/.berth/vm/snapshots/<the key's digest>, malloc()ed. */
char *snapshot_dir_for(const SnapshotKey *k);

/*
 * snapshot_prune_stale() - remove the snapshots made for other artifacts, another berth-vmm
 * or another QEMU than @k's, which nothing installed can restore again; those of other VM
 * sizes stay, and so does one a maker holds locked. Returns how many were removed, with
 * the bytes freed in @ret_bytes, or a negative errno.
 */
int snapshot_prune_stale(const SnapshotKey *k, uint64_t *ret_bytes);

/*
 * snapshot_find() - the snapshot for @k: its snapshot.json names this key, and vm.snap and
 * ram are there with the recorded sizes. Returns 0, or -ENOENT (none made yet) or -ESTALE (one
 * that does not match, removed) with why in @why.
 */
int snapshot_find(const SnapshotKey *k, Snapshot *ret, char *why, size_t whylen);

/*
 * snapshot_open_stream() - open the snapshot's file, and a pipe for QEMU to read it from
 * (sent to it over QMP, the read end in @ret_pipe[0]; the write end, @ret_pipe[1], is
 * non-blocking). Returns the file's fd, or -errno with why in @why.
 *
 * snapshot_stream() - write the file into the pipe while QEMU reads it, hashing what is
 * written: what was hashed is what QEMU has, whatever happens to the file meanwhile. QEMU
 * (started with -S) holds the VM paused meanwhile, and nothing may let it run unless this
 * returned 0. Returns -EBADMSG when the bytes do not match the recorded size and sha256
 * (the caller removes the snapshot), -EPIPE or -ETIMEDOUT (by @deadline_ms) when QEMU stopped
 * reading a snapshot that was sound, or -errno; why in @why.
 */
int snapshot_open_stream(const Snapshot *s, int ret_pipe[2], char *why, size_t whylen);
int snapshot_stream(const Snapshot *s, int fd, int out, int64_t deadline_ms, char *why,
		    size_t whylen);

/*
 * snapshot_open_ram() - the RAM image to copy into the VM's memory, and that memory: a
 * memfd of the image's size, QEMU's RAM (share=on), in @ret_memfd. Returns the image's fd,
 * or -errno with why in @why.
 */
int snapshot_open_ram(const Snapshot *s, int *ret_memfd, char *why, size_t whylen);

/* The migration capabilities a snapshot is saved and restored with (migrate-set-capabilities'
 * arguments): the memory, shared with a memfd of ours, left out of the stream. */
json_t *snapshot_capabilities(void);

/* Remove a snapshot that must not be used again. */
void snapshot_remove(const char *dir);

/* A placeholder disk @name in @dir: a sparse file of @size, opened read-only or not. */
int snapshot_placeholder(const char *dir, const char *name, uint64_t size, bool readonly);

/*
 * snapshot_layout() - the template's device list in @cfg: state, boot and SNAPSHOT_APPS
 * app disks, in that order, each @fds[i] (state, boot, app0, ...), as a template and every
 * restore of it must have them.
 */
void snapshot_layout(VmConfig *cfg, const int fds[2 + SNAPSHOT_APPS]);

/* berth-vmm snapshot [--force] [--cpus N] [--mem MIB] [--accel A] [--qemu Q]: make the
 * snapshot for this host (snapshot-make.c). */
int vmm_snapshot_main(int argc, char **argv);
