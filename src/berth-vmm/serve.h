/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "vmm-run.h"

/*
 * The supervisor's loop (serve.c): serve the run dir's host sockets, bridge them over the
 * channel, follow the guest's boot events and QEMU, until the VM is gone.
 */

/* Serve and supervise; @ready_fd (>= 0) is told once the VM runs. Returns the exit code. */
int vmm_serve(Vmm *v, int ready_fd);
