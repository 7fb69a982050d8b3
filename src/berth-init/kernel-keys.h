/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/*
 * The kernel's static keys, switched where no restored VM switches them.
 *
 * Switching a static key patches the kernel's text. A restored VM under TCG runs a host
 * thread per vCPU, and QEMU's translations there are not coherent with such a patch: a
 * vCPU translating a patched site while another finishes the patch can keep a stale
 * translation (docs/warm-start.md). So a restored VM must not patch its text while its
 * apps run: what an app could switch, the template switches for every VM, and what the
 * kernel switches on its first use of a random secret, each restored VM makes it use at
 * its resume, before anything else runs.
 */

/* The template: switch on, and hold on for the VM's life, the static keys an unprivileged
 * app can switch with a socket option (timestamps, a minimum TTL or hop count, a TCP MD5
 * key, UDP encapsulation, an exclusive IPv6 flow label) or its manifest (a CPU quota).
 * After confine_cgroups_setup(). 0, or -EIO with what failed logged: the template must not
 * be saved then, or its restored VMs would patch their text. */
int kernel_keys_hold(void);

/* A restored VM, after its reseed: the TCP and UDP secrets the kernel draws once, and
 * switches a static key off after, drawn over loopback by a child (each VM draws its own).
 * A failure to start it is logged. */
void kernel_keys_draw_once_start(void);

/* Wait for that child, if one was started, before anything else may use TCP or UDP; logs
 * what it could not draw. The kernel switches each key off from a work queue, a moment
 * after its draw. */
void kernel_keys_draw_once_wait(void);

/* For PID 1's reaping of its children: whether @pid was that child (its @status kept). */
bool kernel_keys_child_exited(pid_t pid, int status);
