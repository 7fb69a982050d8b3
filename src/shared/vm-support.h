/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "manifest.h"

/*
 * vm_support_check() - refuse, before anything boots, an app whose berth.yml needs what
 * the VM runtime cannot give (yet). Returns 0, or -EOPNOTSUPP with a malloc()ed reason in
 * *@reason that names the capability and what to do instead.
 */
int vm_support_check(const Manifest *m, char **reason);
