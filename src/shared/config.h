/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <limits.h>
#include <stddef.h>

/*
 * ~/.berth/config.json, the user's settings file, and the precedence rules that put
 * it between command-line flags and built-in defaults:
 *
 *   {"sandbox": "vm", "vm": {"artifactsUrl": "https://mirror/{asset}",
 *                             "artifactsDir": "~/src/berth/out/artifacts",
 *                             "vmm": "/usr/local/bin/berth-vmm",
 *                             "accel": "auto", "qemu": "qemu-system-x86_64"}}
 *
 * Every setting resolves as flag > environment variable > config file > built-in default.
 */

/* The file is small; anything bigger is not a config file. */
#define CONFIG_SIZE_MAX (1024 * 1024)

/*
 * No release host serves the artifacts, so there is no built-in download URL: a download
 * needs --url, BERTH_VM_ARTIFACTS_URL or vm.artifactsUrl.
 */
#define CONFIG_ARTIFACTS_URL_DEFAULT ""

typedef struct BerthConfig {
	char *path;		/* the file that was read, or would have been */
	char *vm_artifacts_url; /* vm.artifactsUrl, NULL when unset */
	char *vm_artifacts_dir; /* vm.artifactsDir, "~/" expanded */
	char *vm_vmm;		/* vm.vmm, "~/" expanded */
	char *sandbox;		/* "vm" or "docker" */
	char *vm_accel;		/* vm.accel: "auto", "kvm" or "tcg" */
	char *vm_qemu;		/* vm.qemu: the QEMU program, "~/" expanded */
} BerthConfig;

typedef enum ConfigKey {
	CONFIG_ARTIFACTS_URL,
	CONFIG_ARTIFACTS_DIR,
	CONFIG_VMM,
	CONFIG_SANDBOX,
	CONFIG_ACCEL,
	CONFIG_QEMU,
	_CONFIG_KEY_MAX,
	_CONFIG_KEY_INVALID = -22,
} ConfigKey;

typedef enum ConfigSource {
	CONFIG_SOURCE_NONE, /* not set anywhere, and no default */
	CONFIG_SOURCE_FLAG,
	CONFIG_SOURCE_ENV,
	CONFIG_SOURCE_FILE,
	CONFIG_SOURCE_DEFAULT,
	_CONFIG_SOURCE_MAX,
	_CONFIG_SOURCE_INVALID = -22,
} ConfigSource;

/* Where a config file went wrong. @line and @column are 1-based, 0 when not known. */
typedef struct ConfigError {
	char file[PATH_MAX];
	int line;
	int column;
	char key[64]; /* "vm.artifactsUrl", "" when the problem is not one key */
	char message[256];
} ConfigError;

/*
 * config_load() - read and validate a config file.
 * @path: the file; NULL means berth_config_path(). A missing file is an empty config.
 * @ret: filled on success (free with config_done()), zeroed on failure.
 * @reterr: on failure, the file, jansson's line and column or the key, and what is wrong.
 * Returns 0; -EBADMSG for malformed JSON or a wrong value; -EFBIG above CONFIG_SIZE_MAX;
 * other -errno when the file cannot be read.
 * Unknown keys inside "vm" are an error; unknown top-level keys belong to other commands
 * and are ignored.
 */
int config_load(const char *path, BerthConfig *ret, ConfigError *reterr);
void config_done(BerthConfig *c);

/*
 * config_get() - resolve @key: @flag (the command-line value, may be NULL), then its
 * environment variable, then the config file @c (may be NULL), then the built-in default.
 * Empty strings count as unset at every level.
 * @ret_source (may be NULL): where the value came from.
 * Returns the value (owned by its source; valid while @c and the environment are), or NULL.
 */
const char *config_get(const BerthConfig *c, ConfigKey key, const char *flag,
		       ConfigSource *ret_source);

/*
 * config_source_describe() - how a user names @source for @key in a hint, for example
 * "--url", "BERTH_VM_ARTIFACTS_URL", "vm.artifactsUrl in /home/u/.berth/config.json".
 * Returns a malloc()ed string or NULL on OOM.
 */
char *config_source_describe(const BerthConfig *c, ConfigKey key, ConfigSource source);

/* The environment variable behind @key ("BERTH_VM_ARTIFACTS_URL"), NULL for none. */
const char *config_key_env(ConfigKey key);

/*
 * config_error_format() - one message for the user: "FILE:LINE:COLUMN: what; what to do".
 */
void config_error_format(const ConfigError *e, char *buf, size_t len);
