/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Reload in place (docs/warm-start.md): replace one app's share while its VM stays up.
 *
 * berth-vmm serves vmm.sock (0600) in the run dir, one JSON line per request:
 *
 *   {"op":"reload","app":"notes","image":"reload-0.erofs","manifest":"reload-0.yml",
 *    "appDir":"/home/…/notes","treeSha256":"…","files":12,"bytes":34567,"timeoutMs":60000}
 *
 * "image" and "manifest" are files the caller packed and copied into the run dir (berth-vmm
 * cannot run mkfs.erofs once it is confined, nor read outside the run dir). berth-vmm
 * compiles the policy from the new berth.yml with the same compiler as at boot and goes on
 * only when it is the policy the app runs under. It then asks the guest to stop the app and
 * unmount its share (app_stop), copies the image over the share disk QEMU reads, and asks
 * the guest to start the app again (app_start), which answers once the new version is
 * ready. The reply:
 *
 *   {"ok":true,"stopMs":120,"copyMs":3,"startMs":2900}
 *   {"ok":false,"restart":true,"error":"…"}   nothing was touched: restart the VM instead
 *   {"ok":false,"error":"…"}                  the new version did not start; the VM is up
 *
 * vm.json then names the new share (its treeSha256, files, bytes and appDir) and counts the
 * app's reloads; the guest's app_reload events are in the boot evidence.
 */

#include <stdbool.h>
#include <stddef.h>

#include "evloop.h"
#include "vmm-run.h"

#define RELOAD_REQUEST_MAX (16 * 1024)
#define RELOAD_TIMEOUT_MS_DEFAULT (120 * 1000)
#define RELOAD_TIMEOUT_MS_MAX (600 * 1000)

typedef struct Reload Reload;

typedef struct ReloadHost {
	EvLoop *loop;
	Vmm *vmm;
	/* Write one request line to the guest's control port: 0, or -errno when it is not up. */
	int (*send_guest)(const char *line, size_t len, void *userdata);
	/* The VM's record changed (an app's share): write vm.json again. */
	void (*changed)(void *userdata);
	void *userdata;
} ReloadHost;

/* Listen on vmm.sock in the run dir. */
int reload_listen(const ReloadHost *host, Reload **ret);

/* A line from the guest's control port: true when it was the answer to a step of ours. */
bool reload_take_guest_reply(Reload *r, const char *line, size_t len);

Reload *reload_free(Reload *r);
