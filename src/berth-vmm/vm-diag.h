/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Reading QEMU's standard error and the guest's console for the signs of a VM that will
 * not get anywhere, so that a dead boot fails at once with its reason instead of at the
 * end of a timeout. A KVM internal error is the case that needs this: QEMU stays alive,
 * with the guest paused, and nothing else would ever notice.
 */

/*
 * vm_diag_qemu_line() - is @line, from QEMU's standard error, fatal to the VM?
 * Returns 1 and a short reason in @reason ("KVM internal error (Suberror: 1)"), or 0.
 */
int vm_diag_qemu_line(const char *line, char *reason, size_t size);

/* Does @line, from the guest console, say that the guest kernel panicked? Lines the
 * console mirrors from the apps' logs never do. */
bool vm_diag_console_panic(const char *line);

/* What to tell the user to do about a VM that failed under KVM. */
#define VM_DIAG_KVM_HINT                                                                      \
	"KVM on this host cannot run the guest; use --accel auto (the default), which boots " \
	"under KVM only where a probe boot showed it works, or --accel tcg ('berth doctor' "  \
	"shows what was probed)"
