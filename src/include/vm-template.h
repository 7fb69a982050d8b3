/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What berth-vmm and the guest's berth-init agree on for a template boot, the boot a VM
 * snapshot is made from (docs/warm-start.md).
 */

/* On the kernel command line: boot as a template. */
#define VM_TEMPLATE_FLAG "berth.template=1"
/* On the console, once the template is ready to be saved. */
#define VM_TEMPLATE_READY "berth-template: ready"
