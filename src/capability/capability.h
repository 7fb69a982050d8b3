/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The capability model, written once: the grammar of capability strings, the filesystem
 * scope rules (SPEC 1.3, 1.4), the paths a policy may ever grant, and the tables behind
 * them (sdk/capability-model.json, which both SDKs read too). libc only. Everything that
 * checks a capability or a path against the model calls here: the CLI's manifest
 * validator, the policy compiler and decoder (policy.h), agent-init, the denial explainer.
 */

#include <stdbool.h>
#include <stddef.h>

#include "capability-model.h"

/* The only prefixes a filesystem scope may name, in messages as SPEC 1.4 words them. */
extern const char *const capability_fs_prefixes[CAPABILITY_FS_PREFIXES_N];
/* What every app may read without declaring it: the runtimes and the image's libraries. */
extern const char *const capability_read_baseline[CAPABILITY_READ_BASELINE_N];

#define CAPABILITY_APP_NAME_MAX 64
#define CAPABILITY_PATH_MAX 4096 /* PATH_MAX: paths in a policy are shorter */

/* A capability string cut at its first two colons; the scope keeps any further colons. */
typedef struct CapabilityParts {
	const char *ns, *action, *scope;
	size_t ns_len, action_len, scope_len;
} CapabilityParts;

/* Split @s (@len bytes, may hold NUL) at its first two colons; false with fewer. */
bool capability_split(const char *s, size_t len, CapabilityParts *ret);

/*
 * capability_is_well_formed() - does @s match ^[a-z0-9_-]+:[a-z0-9_-]+:.+$, where "." is
 * any character but a line terminator (\n, \r, U+2028, U+2029), as in the manifest schema
 * and in both SDKs?
 */
bool capability_is_well_formed(const char *s, size_t len);

/* Is @p (@len bytes) exactly @word? */
bool capability_part_is(const char *p, size_t len, const char *word);

/*
 * capability_fs_scope_issue() - check a filesystem:read: or filesystem:write: scope.
 * @scope, @len: the text after the second colon; it may hold a NUL.
 * @ret_issue: NULL when the scope is acceptable, else a malloc()ed message worded exactly
 *        as SPEC 1.4 words it (caller frees).
 * Returns 0 (then look at *@ret_issue) or -ENOMEM.
 */
int capability_fs_scope_issue(const char *scope, size_t len, char **ret_issue);

/*
 * capability_issue() - what is wrong with the capability @s, as a manifest reports it:
 * fewer than three parts ("invalid capability string …"), or a filesystem scope that breaks
 * SPEC 1.4. Not the regex: check capability_is_well_formed() first.
 * Returns 0 with *@ret_issue NULL or malloc()ed, or -ENOMEM.
 */
int capability_issue(const char *s, size_t len, char **ret_issue);

/*
 * capability_matches() - does the granted (declared) capability cover the requested one?
 * Namespaces and actions equal, and the granted scope's glob matches the requested scope:
 * "*" matches any run of characters but a line break; "?" and "[" are literal. Not
 * symmetric; a malformed capability on either side never matches.
 */
bool capability_matches(const char *granted, const char *requested);

/* Is @path (@len bytes) @prefix or beneath it, segment-aware ("/tmpx" is not beneath "/tmp")? */
bool capability_path_beneath(const char *path, size_t len, const char *prefix);

/* Is @name a valid manifest name: 1-64 of a-z, 0-9 and "-"? */
bool capability_app_name_valid(const char *name);

/*
 * capability_write_path_allowed() - may a policy grant write access to @path (and may
 * berth-init create it)? Absolute, not "/", no NUL, no empty, ".", ".." or "*" segment;
 * and then exactly one of the device paths, or /run/berth/<@app_name> or beneath it (only
 * when @app_name is a valid name), or one of capability_fs_prefixes or beneath one.
 * SECURITY: this is what stands between a policy file and a mkdir as root.
 */
bool capability_write_path_allowed(const char *path, size_t len, const char *app_name);

/*
 * capability_read_path_allowed() - may a policy grant read access to @path? Absolute and
 * canonical (no empty, ".", ".." or "*" segment), no NUL. Reads are granted only beneath
 * what the policy names, so a well-formed path is all the decoder asks for.
 */
bool capability_read_path_allowed(const char *path, size_t len);

/*
 * capability_parse() - @s split at its first two colons into malloc()ed parts (each
 * out-parameter may be NULL). Returns 0, -EINVAL with fewer than three parts, -ENOMEM.
 */
int capability_parse(const char *s, char **ret_namespace, char **ret_action, char **ret_scope);
