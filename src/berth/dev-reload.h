/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * berth dev's reload in place: the new bundle replaces the app's share in the running VM,
 * whose kernel, state disk and brokers stay up (berth-vmm's reload.h, docs/warm-start.md).
 * Used when the change keeps what the VM was set up with: the same compiled policy
 * (berth-vmm checks) and the same declared secrets (checked here). Otherwise, or when
 * anything fails before the app is stopped, the caller restarts the VM instead.
 */

#include <stdbool.h>

#include "evloop.h"

typedef struct DevReload DevReload;

typedef struct DevReloadResult {
	bool restart;	 /* restart the VM: nothing was done, or what was is undone by it */
	char why[1024];	 /* on failure */
	long long pack_ms, stop_ms, copy_ms, start_ms;
} DevReloadResult;

/* Called once from the loop: @r is 0 once the new version is ready, or -errno with @res
 * saying why and whether to restart the VM. */
typedef void (*dev_reload_done_t)(int r, const DevReloadResult *res, void *userdata);

/*
 * dev_reload_start() - pack @bundle_dir (the new bundle of app @name) into the VM's run dir
 * @run_dir and ask its berth-vmm to reload it in place. @booted_bundle_dir is the bundle the
 * VM runs now. Returns 0 with *@ret under way, or -errno with @why (the VM untouched:
 * restart it instead).
 */
int dev_reload_start(EvLoop *loop, const char *run_dir, const char *name, const char *bundle_dir,
		     const char *booted_bundle_dir, unsigned timeout_ms, dev_reload_done_t done,
		     void *userdata, DevReload **ret, char *why, size_t whylen);

DevReload *dev_reload_free(DevReload *r);
