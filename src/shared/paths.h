/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Where Berth keeps its files. Everything lives under one home, ~/.berth, which
 * BERTH_HOME overrides (tests use that to work in a temporary directory).
 * Each function returns a malloc()ed path, or NULL on OOM or when no home is known.
 */

char *berth_home(void);
/* ~/.berth/vm: installed kernel, root image, berth-vmm, app bundles, state disks. */
char *berth_vm_dir(void);
/* ~/.berth/run/vm: one run directory per running VM. */
char *berth_run_root(void);
/* ~/.berth/run/vm/<name>; NULL also when @name is not a valid VM name. */
char *berth_run_dir(const char *name);
/* ~/.berth/config.json */
char *berth_config_path(void);

/* VM names: 1-64 of [a-z0-9._-], starting with a letter or digit. */
int vm_name_valid(const char *name);
