/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * An app's share for the VM, built by the SDK's bundler (sdk/node/bundle.mjs: esbuild for
 * Node apps, a filtered copy for Python ones) and cached by content under
 * ~/.berth/vm/apps/<name>-<16 hex of the app dir>/<16 hex of the bundle>/<name>.
 */
typedef struct Bundle {
	char *dir;	 /* the share: its base name is the app's name */
	char digest[65]; /* tree digest of the share */
	bool cached;	 /* an identical bundle was already there */
	bool reused;	 /* and the bundler did not even run: its inputs were unchanged */
	long long ms;	 /* time spent */
} Bundle;

/* Bundle @app_dir (app @name). On failure returns -errno with the bundler's message in
 * @err. */
int bundle_app(const char *app_dir, const char *name, Bundle *ret, char *err, size_t errlen);
void bundle_done(Bundle *b);

/*
 * bundle_keep_bundler() - from now on, keep the bundler running between bundle_app()
 * calls (its --serve form), for berth dev, which builds app after app. One found gone is
 * started again; one that ends by itself (its own code changed) leaves that build to a
 * one-shot run; a killed one fails the build, as a one-shot bundler would.
 */
void bundle_keep_bundler(void);

/* bundle_stop_bundler() - end the kept bundler: its input closed, killed after 2 s, reaped.
 * Without it, it ends with this process, its input closed then. */
void bundle_stop_bundler(void);

/* bundle_start_bundler() - start the kept bundler now if none runs, so that it has loaded
 * what it needs before the next build of @app_dir asks for it (best effort). */
void bundle_start_bundler(const char *app_dir);
