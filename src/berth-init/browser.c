/* SPDX-License-Identifier: Apache-2.0 */
/* The browser layer and its display stack (browser.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "browser.h"
#include "disks.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "policy.h"

#define LAYER_SERIAL "layer-browser"
#define LAYER_DIR "/run/berth/layers/browser"
#define STACK_DIR "/run/berth/browser"
#define VNC_DIR "/run/berth/vnc"
#define VNC_PASSWD VNC_DIR "/passwd"
#define VNC_PASSWD_TOOL "/usr/libexec/berth/vnc-passwd"
#define VNC_XAUTH VNC_DIR "/" BROWSER_XAUTH_NAME
#define XVFB_DIR "/run/berth/xvfb"
#define XVFB_XAUTH XVFB_DIR "/" BROWSER_XAUTH_NAME
#define XAUTH_COOKIE_BYTES 16
#define X11_DIR "/tmp/.X11-unix"
#define XVFB_POLICY STACK_DIR "/xvfb-policy.json"
#define VNC_POLICY STACK_DIR "/vnc-policy.json"
#define NOVNC_POLICY STACK_DIR "/novnc-policy.json"

/* The root image's directories the layer adds to; the others it leaves alone. */
static const char *const overlaid[] = {"/usr", "/etc", "/var"};

static const char *const xvfb_args[] = {
	BROWSER_DISPLAY, "-auth", XVFB_XAUTH, "-screen", "0", "1280x800x24", "-nolisten", "tcp",
	"-nolisten", "local",
	/* No GLX: the layer has no Mesa drivers, Chromium draws with SwiftShader. */
	"-extension", "GLX", "-noreset", NULL};
static const char *const vnc_args[] = {
	"-display", BROWSER_DISPLAY, "-auth",	   VNC_XAUTH, "-rfbauth", VNC_PASSWD,
	"-rfbport", "5900",	     "-localhost", "-noipv6", "-forever", "-shared",
	"-noshm",   "-nocmds",	     "-noremote",  "-nossl",  "-quiet",	  NULL};
static const char *const novnc_args[] = {"--web", "/usr/share/novnc", "127.0.0.1:6080",
					 "127.0.0.1:5900", NULL};

static struct {
	bool mounted, set_up;
	unsigned pending;
	daemon_ready_t cb;
	void *userdata;
	EvLoop *loop;
	bool failed;
	char why[256];
	Daemon xvfb, vnc, novnc;
} br = {
	.xvfb = {.name = "xvfb",
		 .title = "display server (Xvfb)",
		 .binary = "/usr/bin/Xvfb",
		 .user = BROWSER_XVFB_USER,
		 .uid = BROWSER_XVFB_UID,
		 .policy = XVFB_POLICY,
		 .ready_connect = X11_DIR "/X99",
		 .args = xvfb_args,
		 .listen = X11_DIR "/X99"},
	.vnc = {.name = "x11vnc",
		.title = "VNC server (x11vnc)",
		.binary = "/usr/bin/x11vnc",
		.user = BROWSER_VNC_USER,
		.uid = BROWSER_VNC_UID,
		.policy = VNC_POLICY,
		.ready_connect = "127.0.0.1:5900",
		.args = vnc_args,
		.listen = "127.0.0.1:5900"},
	.novnc = {.name = "novnc",
		  .title = "noVNC (websockify)",
		  .binary = "/usr/bin/websockify",
		  .user = BROWSER_NOVNC_USER,
		  .uid = BROWSER_NOVNC_UID,
		  .policy = NOVNC_POLICY,
		  .ready_connect = "127.0.0.1:6080",
		  .args = novnc_args,
		  .listen = "127.0.0.1:6080"},
};

int browser_layer_mount(void)
{
	char dev[64], lower[256], dir[128];
	int r;

	if (disk_find_by_serial(LAYER_SERIAL, dev, sizeof(dev)) < 0)
		return 0;
	r = daemon_make_dir("/run/berth", 0755, 0, 0);
	if (r >= 0)
		r = daemon_make_dir("/run/berth/layers", 0755, 0, 0);
	if (r >= 0)
		r = daemon_make_dir(LAYER_DIR, 0755, 0, 0);
	if (r < 0) {
		journal_logf("browser layer: cannot create %s: %s", LAYER_DIR, strerror(-r));
		return r;
	}
	if (mount(dev, LAYER_DIR, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL) < 0) {
		r = -errno;
		journal_logf("browser layer %s: cannot mount it (erofs): %s", dev, strerror(-r));
		return r;
	}
	/* The layer above the root image's own directory, both read-only: no upper layer,
	 * so nothing in the VM writes to either. */
	for (size_t i = 0; i < ELEMENTSOF(overlaid); i++) {
		struct stat st;

		snprintf(lower, sizeof(lower), "lowerdir=%s%s:%s", LAYER_DIR, overlaid[i],
			 overlaid[i]);
		snprintf(dir, sizeof(dir), "%s%s", LAYER_DIR, overlaid[i]);
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (mount("overlay", overlaid[i], "overlay", MS_RDONLY | MS_NODEV | MS_NOSUID,
			  lower) < 0) {
			r = -errno;
			journal_logf("browser layer: cannot lay it over %s (overlayfs): %s",
				     overlaid[i], strerror(-r));
			return r;
		}
	}
	br.mounted = true;
	journal_event("layer_mounted",
		      json_pack("{s:s, s:s, s:[s, s, s]}", "layer", "browser", "device", dev,
				"over", overlaid[0], overlaid[1], overlaid[2]));
	return 1;
}

bool browser_layer_mounted(void)
{
	return br.mounted;
}

/* Write the -rfbauth file: the password on the tool's standard input, never in an argv. */
static int write_vnc_password(const char *password, char *why, size_t whylen)
{
	int in[2], status;
	size_t len = strlen(password);
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) < 0)
		return daemon_why(why, whylen, "cannot make a pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		safe_close(in[0]);
		safe_close(in[1]);
		return daemon_why(why, whylen, "cannot fork: %s", strerror(errno));
	}
	if (pid == 0) {
		if (dup2(in[0], STDIN_FILENO) < 0)
			_exit(126);
		execl(VNC_PASSWD_TOOL, "vnc-passwd", VNC_PASSWD, (char *)NULL);
		_exit(127);
	}
	safe_close(in[0]);
	/* 8 bytes fit in any pipe: this write does not block. */
	if (write(in[1], password, len) != (ssize_t)len) {
		safe_close(in[1]);
		(void)waitpid(pid, &status, 0);
		return daemon_why(why, whylen, "cannot hand the password to %s", VNC_PASSWD_TOOL);
	}
	safe_close(in[1]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return daemon_why(why, whylen, "%s failed (its message is in the console log)",
				  VNC_PASSWD_TOOL);
	if (chown(VNC_PASSWD, BROWSER_VNC_UID, BROWSER_VNC_UID) < 0 || chmod(VNC_PASSWD, 0400) < 0)
		return daemon_why(why, whylen, "cannot give %s to x11vnc: %s", VNC_PASSWD,
				  strerror(errno));
	return 0;
}

/* One Xauthority entry (libXau's format: big-endian lengths): any host (FamilyWild),
 * display 99, MIT-MAGIC-COOKIE-1 and @cookie, written to @path 0400 for @uid. */
static int write_xauth(const char *path, const uint8_t cookie[XAUTH_COOKIE_BYTES], uid_t uid)
{
	static const char name[] = "MIT-MAGIC-COOKIE-1", number[] = "99";
	uint8_t buf[64];
	size_t n = 0;
	int r;

#define PUT16(v) (buf[n++] = (uint8_t)((v) >> 8), buf[n++] = (uint8_t)((v)&0xff))
	PUT16(0xffff); /* FamilyWild */
	PUT16(0);      /* no address */
	PUT16(sizeof(number) - 1);
	memcpy(buf + n, number, sizeof(number) - 1);
	n += sizeof(number) - 1;
	PUT16(sizeof(name) - 1);
	memcpy(buf + n, name, sizeof(name) - 1);
	n += sizeof(name) - 1;
	PUT16(XAUTH_COOKIE_BYTES);
	memcpy(buf + n, cookie, XAUTH_COOKIE_BYTES);
	n += XAUTH_COOKIE_BYTES;
#undef PUT16
	r = write_file_atomic(path, buf, n, 0400);
	explicit_bzero(buf, sizeof(buf));
	if (r >= 0 && chown(path, uid, uid) < 0)
		r = -errno;
	return r;
}

/* The display's cookie, for Xvfb, x11vnc and the browser app: no other uid gets one. A
 * secret, so from getrandom(), which waits for the kernel's entropy if it must. */
static int write_cookies(const char *app, uid_t app_uid, char *why, size_t whylen)
{
	uint8_t cookie[XAUTH_COOKIE_BYTES];
	char path[128];
	int r = 0;

	for (size_t got = 0; got < sizeof(cookie);) {
		ssize_t k = getrandom(cookie + got, sizeof(cookie) - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return daemon_why(why, whylen, "cannot make the display's cookie: %s",
					  strerror(errno));
		got += (size_t)k;
	}
	snprintf(path, sizeof(path), "/run/berth/%s/" BROWSER_XAUTH_NAME, app);
	r = write_xauth(XVFB_XAUTH, cookie, BROWSER_XVFB_UID);
	if (r >= 0)
		r = write_xauth(VNC_XAUTH, cookie, BROWSER_VNC_UID);
	if (r >= 0)
		r = write_xauth(path, cookie, app_uid);
	explicit_bzero(cookie, sizeof(cookie));
	if (r < 0)
		return daemon_why(why, whylen, "cannot write the display's cookies: %s",
				  strerror(-r));
	return 0;
}

static int write_policies(void)
{
	int r;

	/* Xvfb: its lock, its socket and the keymaps it compiles in /tmp (its keymap directory,
	 * /var/lib/xkb, is read-only, and Xvfb then takes /tmp). */
	r = daemon_write_policy(
		XVFB_POLICY,
		json_pack("{s:i, s:s, s:[], s:[s, s], s:[s, s, s, s, s], s:[], s:b, s:[], s:[], "
			  "s:{}}",
			  "schema", POLICY_SCHEMA, "appName", BROWSER_XVFB_USER,
			  "declaredCapabilities", "writePaths", "/dev/null", "/tmp", "readPaths",
			  "/usr", "/etc", "/dev/urandom", "/tmp", XVFB_DIR, "networkPorts",
			  "networkUnrestricted", 0, "meshPeers", "bindPorts", "cgroupLimits"),
		BROWSER_XVFB_UID);
	if (r >= 0)
		r = daemon_write_policy(
			VNC_POLICY,
			json_pack("{s:i, s:s, s:[], s:[s, s], s:[s, s, s, s, s], s:[], s:b, s:[], "
				  "s:[i], s:{}}",
				  "schema", POLICY_SCHEMA, "appName", BROWSER_VNC_USER,
				  "declaredCapabilities", "writePaths", "/dev/null",
				  "/tmp/" BROWSER_VNC_USER, "readPaths", "/usr", "/etc",
				  "/dev/urandom", VNC_DIR, "/tmp/" BROWSER_VNC_USER, "networkPorts",
				  "networkUnrestricted", 0, "meshPeers", "bindPorts",
				  BROWSER_VNC_PORT, "cgroupLimits"),
			BROWSER_VNC_UID);
	if (r >= 0)
		r = daemon_write_policy(
			NOVNC_POLICY,
			json_pack("{s:i, s:s, s:[], s:[s, s], s:[s, s, s, s], s:[i], s:b, s:[], "
				  "s:[i], s:{}}",
				  "schema", POLICY_SCHEMA, "appName", BROWSER_NOVNC_USER,
				  "declaredCapabilities", "writePaths", "/dev/null",
				  "/tmp/" BROWSER_NOVNC_USER, "readPaths", "/usr", "/etc",
				  "/dev/urandom", "/tmp/" BROWSER_NOVNC_USER, "networkPorts",
				  BROWSER_VNC_PORT, "networkUnrestricted", 0, "meshPeers",
				  "bindPorts", BROWSER_NOVNC_PORT, "cgroupLimits"),
			BROWSER_NOVNC_UID);
	return r;
}

int browser_setup(const char *app, uid_t uid, const char *password, char *why, size_t whylen)
{
	int r;

	if (!br.mounted)
		return daemon_why(
			why, whylen,
			"the browser layer is not attached: the CLI attaches it to a VM "
			"whose app declares browser:* (berth vm install --layer browser)");
	if (!password || strlen(password) != 8)
		return daemon_why(why, whylen,
				  "no VNC password for the session on the secrets disk "
				  "(BERTH_VNC_PASSWORD, 8 characters): start it with berth dev");
	snprintf(br.xvfb.app, sizeof(br.xvfb.app), "%s", app);
	snprintf(br.vnc.app, sizeof(br.vnc.app), "%s", app);
	snprintf(br.novnc.app, sizeof(br.novnc.app), "%s", app);
	r = daemon_make_dir(STACK_DIR, 0755, 0, 0);
	if (r >= 0)
		r = daemon_make_dir(VNC_DIR, 0700, BROWSER_VNC_UID, BROWSER_VNC_UID);
	if (r >= 0)
		r = daemon_make_dir(XVFB_DIR, 0700, BROWSER_XVFB_UID, BROWSER_XVFB_UID);
	/* X's socket directory, root's and sticky like /tmp, as X clients expect it. */
	if (r >= 0)
		r = daemon_make_dir(X11_DIR, 01777, 0, 0);
	if (r >= 0)
		r = daemon_make_dir("/tmp/" BROWSER_XVFB_USER, 0700, BROWSER_XVFB_UID,
				    BROWSER_XVFB_UID);
	if (r >= 0)
		r = daemon_make_dir("/tmp/" BROWSER_VNC_USER, 0700, BROWSER_VNC_UID,
				    BROWSER_VNC_UID);
	if (r >= 0)
		r = daemon_make_dir("/tmp/" BROWSER_NOVNC_USER, 0700, BROWSER_NOVNC_UID,
				    BROWSER_NOVNC_UID);
	if (r < 0)
		return daemon_why(why, whylen, "cannot create its directories: %s", strerror(-r));
	r = write_vnc_password(password, why, whylen);
	if (r >= 0)
		r = write_cookies(app, uid, why, whylen);
	if (r < 0)
		return r;
	r = write_policies();
	if (r < 0)
		return daemon_why(why, whylen, "cannot write its policies: %s", strerror(-r));
	br.set_up = true;
	return 0;
}

bool browser_set_up(void)
{
	return br.set_up;
}

static void part_done(bool ok, const char *why, void *userdata);

static void finish(void)
{
	daemon_ready_t cb = br.cb;

	br.cb = NULL;
	if (cb)
		cb(!br.failed, br.failed ? br.why : NULL, br.userdata);
}

/* Xvfb first: x11vnc needs the display at its start; websockify only at a client's. */
static void xvfb_done(bool ok, const char *why, void *userdata)
{
	if (!ok) {
		br.failed = true;
		snprintf(br.why, sizeof(br.why), "%s", why);
		finish();
		return;
	}
	br.pending = 2;
	daemon_start(&br.vnc, br.loop, NULL, NULL, part_done, NULL);
	daemon_start(&br.novnc, br.loop, NULL, NULL, part_done, NULL);
}

static void part_done(bool ok, const char *why, void *userdata)
{
	if (!ok && !br.failed) {
		br.failed = true;
		snprintf(br.why, sizeof(br.why), "%s", why);
	}
	if (--br.pending == 0)
		finish();
}

void browser_start(EvLoop *loop, daemon_ready_t cb, void *userdata)
{
	br.loop = loop;
	br.cb = cb;
	br.userdata = userdata;
	daemon_start(&br.xvfb, loop, NULL, NULL, xvfb_done, NULL);
}

const char *const *browser_app_env(void)
{
	static const char *const env[] = {
		"DISPLAY=" BROWSER_DISPLAY,
		/* Playwright's client, which the layer ships (apps/browser-native). */
		"NODE_PATH=/usr/lib/berth/node_modules",
		"BERTH_BROWSER_EXECUTABLE=/usr/lib/chromium/chromium",
		NULL,
	};
	static const char *const none[] = {NULL};

	return br.set_up ? env : none;
}

bool browser_child_exited(pid_t pid, int status)
{
	return daemon_child_exited(&br.xvfb, pid, status) ||
	       daemon_child_exited(&br.vnc, pid, status) ||
	       daemon_child_exited(&br.novnc, pid, status);
}

static json_t *part_json(const Daemon *d)
{
	return json_pack("{s:s, s:i, s:i}", "state", daemon_state_name(d->state), "pid",
			 (int)d->pid, "uid", (int)d->uid);
}

json_t *browser_status(void)
{
	if (!br.set_up)
		return NULL;
	return json_pack("{s:o, s:o, s:o}", "xvfb", part_json(&br.xvfb), "vnc", part_json(&br.vnc),
			 "novnc", part_json(&br.novnc));
}

/* The publish table names websockify's uid; the two must agree. */
_Static_assert(BROWSER_NOVNC_UID == 9012, "publish.c's noVNC row names uid 9012");
