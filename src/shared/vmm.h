/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "pins.h"

/*
 * Finding berth-vmm and asking it which artifacts it trusts.
 */

/*
 * vmm_locate() - find the berth-vmm binary.
 * Order: $BERTH_VMM, @configured (vm.vmm in ~/.berth/config.json; may be NULL),
 * ~/.berth/vm/bin/berth-vmm, $PATH (its absolute entries), then the build tree next to
 * this executable (src/berth-vmm/berth-vmm beside src/berth/berth).
 * Returns 0 and a malloc()ed path, -ENOENT when none is found.
 */
int vmm_locate(const char *configured, char **ret_path);

/*
 * vmm_locate_for_pins() - like vmm_locate(), but among the installed copy, $PATH and the
 * build tree prefer the first berth-vmm whose pins are @want (an older release's berth-vmm
 * left in ~/.berth/vm/bin would boot older artifacts). $BERTH_VMM and @configured are
 * taken as they are. *@ret_matches tells whether the one returned carries @want.
 */
int vmm_locate_for_pins(const char *configured, const PinSet *want, char **ret_path,
			bool *ret_matches);

/*
 * vmm_query_pins() - run `@path pins --json` and parse what it prints into @ret.
 * Returns 0, or -errno (-ETIME when it did not finish within 10 s, -EBADMSG when it failed
 * or its output is not a pin set).
 */
int vmm_query_pins(const char *path, PinSet *ret);

/* Print the `berth-vmm pins --json` form. */
char *pinset_to_json_text(const PinSet *set);
