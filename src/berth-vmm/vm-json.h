/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "vmm-run.h"

/* vm.json, the run dir's record of a VM (vm-json.c; its fields in docs/vm.md). */

/* Write vm.json in the run dir (atomically); @state e.g. "starting", "running". */
int vmm_write_state(Vmm *v, const char *state);
