/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yaml-json.h"

/*
 * berth.yml, the manifest every app declares itself with: load, validate, and read the
 * result. docs/manifest.md describes the fields, the rules and every message.
 *
 * Validation reports every problem at once, one line each, in the form users of Berth
 * already know:
 *
 *   invalid berth.yml:
 *   berth.yml:3 name: name must be lowercase alphanumeric with dashes
 *   berth.yml:7 capabilities.1: filesystem path must be absolute (start with "/"), got "etc"
 *
 * A schema_version that cannot be used is the one error reported on its own:
 *
 *   invalid berth.yml (apps/x/berth.yml): schema_version must be a non-negative integer, got
 * "latest"
 */

#define MANIFEST_SIZE_MAX YAML_JSON_SIZE_MAX
#define MANIFEST_SCHEMA_VERSION 1 /* the shape this code validates */
#define MANIFEST_ISSUES_MAX 200	  /* more are counted, not listed */

typedef struct Manifest Manifest;

typedef enum ManifestRuntime {
	MANIFEST_RUNTIME_NODE,
	MANIFEST_RUNTIME_PYTHON,
	_MANIFEST_RUNTIME_MAX,
	_MANIFEST_RUNTIME_INVALID = -22,
} ManifestRuntime;

/* One problem. @line is 1-based (0 when the file has no place for it). */
typedef struct ManifestIssue {
	unsigned line;
	unsigned column;
	char *path;    /* dotted, array indexes as numbers ("capabilities.1"); "" = the document */
	char *message; /* without the location */
} ManifestIssue;

/* Why a manifest was refused. @text is the whole report for a user, no trailing newline. */
typedef struct ManifestError {
	ManifestIssue *issues;
	size_t n_issues;
	char *text;
} ManifestError;

/* The MCP tool hints an export may state in berth.yml (annotations:). */
typedef enum ManifestHint {
	MANIFEST_HINT_READ_ONLY,
	MANIFEST_HINT_DESTRUCTIVE,
	MANIFEST_HINT_IDEMPOTENT,
	MANIFEST_HINT_OPEN_WORLD,
	_MANIFEST_HINT_MAX,
	_MANIFEST_HINT_INVALID = -22,
} ManifestHint;

/*
 * One entry of exports:. Everything is borrowed from the manifest; what was not declared
 * is NULL. @input and @output map a field name to its spec: a type name ("string"), or
 * {type, description}; read them with manifest_field_type() and
 * manifest_field_description(). @hints says for each ManifestHint whether berth.yml
 * stated it (has_hint) and as what (hint).
 */
typedef struct ManifestExport {
	const char *name;
	const char *description;
	const char *title;
	json_t *input;
	json_t *output;
	bool has_hint[_MANIFEST_HINT_MAX];
	bool hint[_MANIFEST_HINT_MAX];
} ManifestExport;

/* A field spec's type ("string", ...) and description (NULL when none). */
const char *manifest_field_type(const json_t *spec);
const char *manifest_field_description(const json_t *spec);
/* "readOnlyHint", ... as berth.yml and MCP name them. */
const char *manifest_hint_to_string(ManifestHint h);

/* resources:. A has_* flag is false when the key is absent. */
typedef struct ManifestResources {
	bool has_cpu, has_memory_mb, has_gpu, has_pids;
	double cpu;	    /* cores, > 0 */
	uint64_t memory_mb; /* MiB, > 0 */
	uint64_t gpu;	    /* a count, > 0 */
	uint64_t pids;	    /* tasks, > 0 */
} ManifestResources;

/* expose: (what berth dev publishes to the host). */
typedef struct ManifestExpose {
	bool browser;  /* default true */
	bool terminal; /* default true */
	bool preview;  /* default false */
} ManifestExpose;

/*
 * manifest_parse() - validate a berth.yml held in memory.
 * @buf, @size: the file's bytes.
 * @file: how messages name the file (the path as the user gave it); NULL means
 *        "berth.yml", and then a schema_version error names no path.
 * @ret: the manifest on success (free with manifest_free()).
 * @reterr (may be NULL): on -EBADMSG or -EFBIG, every issue and the formatted text; free
 *         with manifest_error_done(). Zeroed on success.
 * Returns 0; -EBADMSG when the file is not a valid manifest (YAML refused included);
 * -EFBIG above MANIFEST_SIZE_MAX; -ENOMEM.
 */
int manifest_parse(const char *buf, size_t size, const char *file, Manifest **ret,
		   ManifestError *reterr);

/*
 * manifest_load_at() - read @path relative to @dir_fd (AT_FDCWD for the working directory)
 * and validate it as manifest_parse() does, naming it @path in messages.
 * The final component is not followed if it is a symlink.
 * Returns as manifest_parse(), or the -errno of reading the file (@reterr then empty).
 */
int manifest_load_at(int dir_fd, const char *path, Manifest **ret, ManifestError *reterr);

/*
 * manifest_validate_json() - validate an already parsed document (for example JSON from a
 * registry). @raw is not modified.
 * @positions (may be NULL): node places from yaml_to_json(), for the line of each issue.
 * @file: as for manifest_parse().
 */
int manifest_validate_json(json_t *raw, const YamlPositions *positions, const char *file,
			   Manifest **ret, ManifestError *reterr);

Manifest *manifest_free(Manifest *m);
static inline void manifest_freep(Manifest **m)
{
	manifest_free(*m);
}
void manifest_error_done(ManifestError *e);

/* The fields, defaults applied. Strings and json_t are owned by @m. */
const char *manifest_name(const Manifest *m);
const char *manifest_version(const Manifest *m);
const char *manifest_description(const Manifest *m);
ManifestRuntime manifest_runtime(const Manifest *m);
/* Capabilities as declared, duplicates dropped (a repeated declaration is one grant). */
size_t manifest_capabilities(const Manifest *m, const char *const **ret);
size_t manifest_exports(const Manifest *m, const ManifestExport **ret);
/* The export called @name, NULL when not declared. */
const ManifestExport *manifest_find_export(const Manifest *m, const char *name);
size_t manifest_secrets(const Manifest *m, const char *const **ret);
size_t manifest_on_install(const Manifest *m, const char *const **ret);
size_t manifest_on_agent_ready(const Manifest *m, const char *const **ret);
ManifestExpose manifest_expose(const Manifest *m);
bool manifest_governs(const Manifest *m);
bool manifest_governance_exempt(const Manifest *m);
const ManifestResources *manifest_resources(const Manifest *m);

/*
 * manifest_to_json() - the normalised manifest: every defined field, defaults filled in,
 * unknown keys and schema_version dropped, capabilities as written (duplicates kept).
 * Returns a new reference, NULL on OOM.
 */
json_t *manifest_to_json(const Manifest *m);

const char *manifest_runtime_to_string(ManifestRuntime r);
ManifestRuntime manifest_runtime_from_string(const char *s);

/*
 * manifest_migrate() - bring @raw (a mapping, modified in place) from schema_version @from
 * to @to one registered step at a time. Only the step from 0 exists (a boolean expose:
 * becomes {browser, terminal, preview: false}).
 * @reterr_message: on -ENOENT, why (a step is missing), malloc()ed.
 * Returns 0, -ENOENT, -ENOMEM. manifest_parse() calls it with @to = MANIFEST_SCHEMA_VERSION.
 */
int manifest_migrate(json_t *raw, unsigned from, unsigned to, char **reterr_message);

/* Capability strings and their rules are the capability module's (src/capability). */
#include "capability.h"
