/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "daemon.h"
#include "evloop.h"

/*
 * The browser layer in the guest (docs/browser.md).
 *
 * berth-vmm attaches the pinned layer as the read-only disk "layer-browser" when an app
 * declares browser:*. berth-init mounts it (erofs) under /run/berth/layers/browser and lays
 * its /usr, /etc and /var over the root image's with read-only overlayfs, before any app
 * or daemon starts. Then, for the one app that declares browser:*, it runs the display
 * stack, each program as its own uid under agent-init with a policy of its own:
 *
 *   - Xvfb :99 (uid 9010, berth-xvfb), 1280x800x24, -nolisten tcp: its socket is
 *     /tmp/.X11-unix/X99, which the app's Chromium draws on. Its -auth file holds a
 *     random MIT-MAGIC-COOKIE-1 that only the app and x11vnc get a copy of;
 *   - x11vnc (uid 9011, berth-vnc) on 127.0.0.1:5900, with -rfbauth: the password file is
 *     written from the session's password (BERTH_VNC_PASSWORD in the app's part of the
 *     secrets disk) by the layer's vnc-passwd, never passed as an argument;
 *   - websockify with noVNC's page (uid 9012, berth-novnc) on 127.0.0.1:6080, the published
 *     port (publish.h), bridging to 5900.
 *
 * The app starts once all three listen. One that fails refuses the browser app only.
 */

#define BROWSER_XVFB_UID 9010
#define BROWSER_XVFB_USER "berth-xvfb"
#define BROWSER_VNC_UID 9011
#define BROWSER_VNC_USER "berth-vnc"
#define BROWSER_NOVNC_UID 9012
#define BROWSER_NOVNC_USER "berth-novnc"
#define BROWSER_DISPLAY ":99"
#define BROWSER_VNC_PORT 5900
#define BROWSER_NOVNC_PORT 6080
/* The display's MIT-MAGIC-COOKIE-1, in /run/berth/<app>/ for the browser app (XAUTHORITY):
 * without it no other uid of the VM may draw on, read or type into the display. */
#define BROWSER_XAUTH_NAME "Xauthority"

/* Mount the layer when its disk is attached. Returns 1 (mounted), 0 (no layer) or -errno
 * (a layer that does not mount: the boot fails, as for a root image that does not). */
int browser_layer_mount(void);
bool browser_layer_mounted(void);

/*
 * browser_setup() - the display stack's files for the app @app (@uid), with the session's
 * VNC password @password (from the secrets disk). Returns 0, or -errno with @why.
 */
int browser_setup(const char *app, uid_t uid, const char *password, char *why, size_t whylen);

/* Start the stack that browser_setup() prepared: @cb once, when all of it listens or a
 * part failed. */
void browser_start(EvLoop *loop, daemon_ready_t cb, void *userdata);
bool browser_set_up(void);

/* The browser app's environment: "K=V", NULL-terminated (DISPLAY, NODE_PATH, ...). */
const char *const *browser_app_env(void);

bool browser_child_exited(pid_t pid, int status);
/* {"xvfb": {state, pid}, "vnc": ..., "novnc": ...} for the status reply, or NULL. */
json_t *browser_status(void);
