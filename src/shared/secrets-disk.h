/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "env-args.h"
#include "manifest.h"

/*
 * The secrets disk the CLI hands to a VM (SPEC §7.3, docs/secrets.md): "BERTHSEC2\n",
 * then JSON {"shared":{NAME:value},"apps":{"<app>":{NAME:value}},
 * "daemons":{"<daemon>":{NAME:value}}}, then NUL bytes up to a multiple of 512; at most
 * 1 MiB. berth-vmm attaches it read-only, and the guest's berth-init reads it once, as
 * root, before any app starts (src/berth-init/secrets.c), which still reads version 1
 * (no "daemons").
 *
 * Scoping: a name some app lists under secrets: in its berth.yml goes to the apps that
 * list it, and to no other; any other name goes to "shared", which every app receives.
 * A name a broker uses on an app's behalf goes to that broker's daemon scope alone, when
 * an app declares the broker's namespace: GITHUB_TOKEN to "github-api-broker" for an app
 * with github: capabilities, which gets SECRETS_GITHUB_TOKEN_PLACEHOLDER in its place.
 */

#define SECRETS_DISK_SIZE_MAX (1024 * 1024)
#define SECRETS_DISK_MAGIC "BERTHSEC2\n"
#define SECRETS_GITHUB_DAEMON "github-api-broker"
/* What the GitHub app finds in GITHUB_TOKEN: it says a token exists (SPEC 10's live mode)
 * and is worth nothing anywhere, the broker putting the real one into allowed requests. */
#define SECRETS_GITHUB_TOKEN_PLACEHOLDER "berth-placeholder-the-github-broker-adds-the-token"
#define SECRETS_DISK_ALIGN 512

typedef struct SecretsDiskApp {
	const char *name;	  /* the app's name in the VM: its share's directory name */
	const Manifest *manifest; /* its berth.yml, whose secrets: decide the scope */
	/* Values the CLI itself makes for this app alone (the terminal's login,
	 * BERTH_TERMINAL_CREDENTIAL), whatever its berth.yml declares; one of them wins over a
	 * --env value of the same name in the app's own set. NULL: none. */
	const EnvSet *own;
} SecretsDiskApp;

/* Called with each warning, one line, no newline; names only, never a value. */
typedef void (*SecretsWarnFn)(const char *line, void *userdata);

/*
 * secrets_disk_warn() - the warnings for a boot of @apps with @env (which may be NULL:
 * no --env given): each name no app declares, which every app will receive, and
 *   [berth] app "<app>" declares secret <NAME> in berth.yml, but no value was provided for this
 * boot for each declared name without a value.
 */
void secrets_disk_warn(const EnvSet *env, const SecretsDiskApp *apps, size_t n_apps,
		       SecretsWarnFn warn, void *userdata);

/*
 * secrets_disk_build() - the disk image for @env and @apps, in memory.
 * Returns 0 with a malloc()ed image in *@ret and its size (a multiple of 512) in
 * *@ret_size; free it with secrets_disk_image_free(), which zeroes it. -E2BIG when it
 * would exceed SECRETS_DISK_SIZE_MAX, -EINVAL for an app name the guest would refuse,
 * -ENOMEM; on failure @err says why.
 */
int secrets_disk_build(const EnvSet *env, const SecretsDiskApp *apps, size_t n_apps, char **ret,
		       size_t *ret_size, char *err, size_t errlen);
void secrets_disk_image_free(char *image, size_t size);

/*
 * secrets_disk_write() - create @path (0600, O_EXCL, O_NOFOLLOW) holding @size bytes of
 * @image. A file already there is removed first only when it is a regular file owned by
 * this user (left by a run that crashed); anything else there is refused (-EEXIST).
 * The directory must exist. On failure nothing is left at @path, and @err says why.
 */
int secrets_disk_write(const char *path, const char *image, size_t size, char *err, size_t errlen);

/*
 * secrets_disk_path() - where the disk of VM @vm_name goes: ~/.berth/run/secrets/<vm>.img,
 * its directory created 0700 and checked to be a real directory of ours that nobody else
 * may enter. Not the run dir: berth-vmm removes and recreates that when it starts.
 * Returns 0 and a malloc()ed path, -EINVAL for an invalid name, -EPERM when the directory
 * is not safe (@err says why), or -errno.
 */
int secrets_disk_path(const char *vm_name, char **ret, char *err, size_t errlen);

/* Remove @path if it is there; 0 also when it was already gone. */
int secrets_disk_remove(const char *path);
