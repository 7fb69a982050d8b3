/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The boot disk: what berth-vmm hands berth-init besides the shares, on one read-only
 * virtio disk (serial "boot") that exists only as an unlinked file while the VM runs.
 *
 *   offset 0     "BERTHBOOT1\n", then the header, a JSON object, NUL-padded to a
 *                multiple of BOOT_DISK_SECTOR:
 *                  {"schema":1,
 *                   "plan":{"apps":[{"name":"notes","share":"app0",
 *                                    "policy":{…the compiled policy…},
 *                                    "warnings":["[berth:capability-policy] WARNING: …"]}]},
 *                   "secrets":{"offset":N,"length":M}}      (or "secrets":null)
 *   offset N     the CLI's secrets image (BERTHSEC2, docs/secrets.md), byte for byte
 *
 * The plan is public (every app's policy is readable in the guest anyway); the secrets are
 * copied from the CLI's image by the kernel (copy_file_range), never parsed on the host.
 * Compiled into berth-vmm (the writer) and berth-init (the reader). libc and jansson.
 */

#include <jansson.h>
#include <stddef.h>

#define BOOT_DISK_MAGIC "BERTHBOOT1\n"
#define BOOT_DISK_SCHEMA 1
#define BOOT_DISK_SECTOR 512
#define BOOT_DISK_HEADER_MAX (4u * 1024 * 1024)
#define BOOT_DISK_SECRETS_MAX (1u * 1024 * 1024)
#define BOOT_DISK_SIZE_MAX (BOOT_DISK_HEADER_MAX + BOOT_DISK_SECRETS_MAX + BOOT_DISK_SECTOR)

/*
 * boot_disk_write() - write the disk to @fd (empty, at offset 0): @plan (borrowed), then
 * the secrets image read from @secrets_fd (-1: none), at most BOOT_DISK_SECRETS_MAX bytes.
 * Returns 0, or -errno with @err saying what failed.
 */
int boot_disk_write(int fd, const json_t *plan, int secrets_fd, char *err, size_t errlen);

/*
 * boot_disk_parse() - the plan and where the secrets image lies in @buf (@len bytes, the
 * whole disk). @ret_plan gets a new reference; *@ret_secrets points into @buf (NULL when
 * there are none). Returns 0, or -EBADMSG with @err saying what is malformed.
 */
int boot_disk_parse(const char *buf, size_t len, json_t **ret_plan, const char **ret_secrets,
		    size_t *ret_secrets_len, char *err, size_t errlen);
