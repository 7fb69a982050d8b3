/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "vm-template.h"

/*
 * The template boot and the resume of a VM restored from its snapshot (docs/warm-start.md).
 *
 * A template boot (VM_TEMPLATE_FLAG on the kernel command line) does the mounts and the
 * channel, says VM_TEMPLATE_READY on the console and waits:
 * berth-vmm saves the VM there. It reads none of its disks but the root image, and holds
 * nothing of an app: no plan, no policy, no secret, no share.
 *
 * Every VM restored from that snapshot starts from that wait, the same bytes for all. The
 * host's resume request ({"op":"resume", ...} on the control port) makes it its own before
 * anything reads randomness or a disk: fresh entropy credited to the kernel's RNG and a
 * forced reseed, the host's time, its boot id, and which of its disks are real (the others
 * are the template's placeholders, never opened); the disks' cached blocks from the
 * template are dropped.
 */

#define RESUME_ENTROPY_MIN 32  /* bytes the host must push */
#define RESUME_ENTROPY_MAX 512 /* bytes taken at most */

/* Was this boot started as a template? */
bool resume_is_template(void);

/*
 * resume_template_shed_memory() - just before the template is saved: drop the page cache
 * of what it read and does not map, and zero the memory that frees. Every restore copies
 * and hashes the pages that are not zero; what the warm runtimes map stays.
 */
void resume_template_shed_memory(void);

/* Did a resume request make this VM its own (so only the disks it named are real)? */
bool resume_done(void);

/* Is the disk with serial @serial one the host attached for this VM (always true in a cold
 * boot)? */
bool resume_disk_real(const char *serial);

/*
 * resume_apply() - act on the host's resume request @req, once: reseed the kernel's RNG,
 * set the clock, take the boot id and which disks are real. A repeat for the same boot
 * (the host sends it again after a channel reset) returns 1 and changes nothing; any
 * other second request is refused. Returns 0, or -errno with why in @err (the VM then
 * powers off: a restored VM that cannot be made its own must not run apps).
 */
int resume_apply(const json_t *req, char *err, size_t errlen);

/*
 * resume_disks_ready() - after resume_apply(): wait until the kernel sees the state disk
 * at its real size, and drop the template's cached blocks of the real disks. 0, or -errno
 * with why in @err (fatal as for resume_apply()).
 */
int resume_disks_ready(char *err, size_t errlen);
