/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The capability-policy compiler: a manifest's capability strings in, the JSON policy that
 * agent-init enforces out (SPEC 4.2, 4.3). libc and jansson only, so that the guest init can
 * link it statically. Apart from three environment variables (see policy_compile()) and the
 * warning sink it has no side effects; policy_write() is the one function that touches disk.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Every line the compiler prints starts with this. */
#define POLICY_LOG_PREFIX "[berth:capability-policy] "

/* The only prefixes a filesystem scope may name (SPEC 1.4), as messages list them. */
#define POLICY_ALLOWED_PREFIXES_TEXT "/workspace, /context, /tmp, /app"

/* Caps on what a policy file may hold: its size, and the entries of each list in it. */
#define POLICY_FILE_SIZE_MAX (1024 * 1024)
#define POLICY_LIST_MAX 1024

/*
 * policy_set_warning_sink() - where the compiler's warnings go.
 * @sink: called once per warning with one complete line, without a newline, starting
 *        POLICY_LOG_PREFIX "WARNING: ". NULL restores the default: the line on stderr.
 * @userdata: handed to @sink unchanged.
 * Process-wide; the compiler is meant for single-threaded callers such as the guest init.
 */
void policy_set_warning_sink(void (*sink)(const char *line, void *userdata), void *userdata);

/*
 * policy_capability_is_well_formed() - does @s (@len bytes) match
 * ^[a-z0-9_-]+:[a-z0-9_-]+:.+$ where "." is any character but a line terminator (\n, \r,
 * U+2028, U+2029), as in the manifest schema?
 */
bool policy_capability_is_well_formed(const char *s, size_t len);

/*
 * policy_fs_scope_issue() - check a filesystem:read: or filesystem:write: scope (SPEC 1.4).
 * @scope, @len: the text after the second colon; it may hold a NUL.
 * @ret_issue: set to NULL when the scope is acceptable, else to a malloc()ed message worded
 *        exactly as SPEC 1.4 words it (caller frees).
 * Returns 0 (then look at *@ret_issue) or -ENOMEM.
 */
int policy_fs_scope_issue(const char *scope, size_t len, char **ret_issue);

/*
 * policy_write_path_allowed() - may agent-init create and grant write access to @path?
 * Absolute, not "/", no NUL, no empty, ".", ".." or "*" segment; and then exactly /dev/null,
 * /dev/pts or /dev/ptmx, or /run/berth/<@app_name> or beneath it (only when @app_name is a
 * single path segment), or /workspace, /context, /tmp, /app or beneath one (segment-aware).
 * @len: bytes in @path, so that an embedded NUL is seen.
 * SECURITY: this is what stands between a policy file and a mkdir as root.
 */
bool policy_write_path_allowed(const char *path, size_t len, const char *app_name);

/*
 * policy_compile() - compile an app's capabilities into its policy (SPEC 4.3).
 * @app_name: the manifest name, ^[a-z0-9-]+$, at most 64 bytes.
 * @capabilities: a JSON array (borrowed). Every element is re-validated, by the regex and by
 *        the filesystem scope rules, and skipped with a warning when invalid: never fatal.
 *        Callers that also hold grants approved at run time append them to this array.
 * @resources: the manifest's resources object ({cpu, memory_mb, pids}) or NULL (borrowed);
 *        an invalid value is skipped with a warning.
 * @cwd: the app's working directory, absolute; the last entry of the read baseline.
 * @ret_policy: on success a new object with, in this order, appName, declaredCapabilities,
 *        writePaths, readPaths, networkPorts, networkUnrestricted, meshPeers, bindPorts,
 *        cgroupLimits. The caller owns the reference.
 * @ret_summary: on success a malloc()ed "writePaths=...; networkPorts=..." summary, to be
 *        logged as POLICY_LOG_PREFIX "wrote <path>: <summary>" once the policy is written.
 * Environment: BERTH_MESH_COORDINATOR_PORT (default 4875), BERTH_HTTP_RPC_PORT and
 * BERTH_HTTP_RPC_APP.
 * Returns 0, -EINVAL for a bad @app_name, @capabilities or @cwd, or -ENOMEM; the
 * out-parameters are untouched on failure.
 */
int policy_compile(const char *app_name, const json_t *capabilities, const json_t *resources,
		   const char *cwd, json_t **ret_policy, char **ret_summary);

/*
 * policy_write() - write @policy to @path atomically (a temporary file beside it, fsync,
 * rename), as compact JSON with sorted keys so that equal policies are equal bytes, mode
 * 0640, owner root, group @gid (SPEC 4.2). The directory must exist.
 * Returns 0 or -errno.
 */
int policy_write(const char *path, const json_t *policy, gid_t gid);
