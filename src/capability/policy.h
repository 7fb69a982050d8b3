/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * An app's capability policy: what agent-init enforces (SPEC 4.2, 4.3). One compiler, one
 * writer and one reader, so that what the host compiles, what berth-init writes and hashes
 * and what agent-init applies cannot drift apart. libc and jansson only.
 *
 * The policy file is compact JSON with sorted keys, so equal policies are equal bytes:
 *   {"appName":"notes","bindPorts":[],"cgroupLimits":{"cpu.weight":"100","pids.max":"1024"},
 *    "declaredCapabilities":["filesystem:write:/workspace"],"meshPeers":[],"networkPorts":[],
 *    "networkUnrestricted":false,"readPaths":[…],"schema":2,"writePaths":[…]}
 * Schema 2 (this one) confines reads for every app; schema 1 files (no "schema" key) left
 * reads open unless a filesystem:read: was declared, and are refused.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "capability.h"

#define POLICY_SCHEMA 2
/* Every line the compiler prints starts with this. */
#define POLICY_LOG_PREFIX "[berth:capability-policy] "
/* Caps on what a policy may hold: its file's size, the entries of each list. */
#define POLICY_FILE_SIZE_MAX (1024 * 1024)
#define POLICY_LIST_MAX 1024
#define POLICY_LIMITS_MAX 5

typedef struct PolicyStrings {
	char **v;
	size_t n;
} PolicyStrings;

typedef struct PolicyPorts {
	uint16_t *v;
	size_t n;
} PolicyPorts;

typedef struct PolicyLimit {
	char key[24];	/* one of cpu.max, cpu.weight, memory.max, memory.swap.max, pids.max */
	char value[48]; /* ^[0-9a-z ]+$ */
} PolicyLimit;

typedef struct CapabilityPolicy {
	char *app_name;
	PolicyStrings declared;	   /* the capabilities it was compiled from, valid ones only */
	PolicyStrings write_paths; /* each capability_write_path_allowed() for app_name */
	PolicyStrings read_paths;  /* never empty: reads are confined for every app */
	PolicyStrings mesh_peers;
	PolicyPorts network_ports; /* TCP connect */
	PolicyPorts bind_ports;	   /* TCP bind */
	bool network_unrestricted;
	PolicyLimit limits[POLICY_LIMITS_MAX]; /* cgroup limits for berth-init to write */
	size_t n_limits;
} CapabilityPolicy;

/* A set of strings that keeps the order of first mention: @v added unless already there.
 * Returns 0, -E2BIG past POLICY_LIST_MAX, -ENOMEM. */
int policy_strings_add(PolicyStrings *s, const char *v, size_t len);
void policy_strings_done(PolicyStrings *s);

CapabilityPolicy *capability_policy_free(CapabilityPolicy *p);
static inline void capability_policy_freep(CapabilityPolicy **p)
{
	capability_policy_free(*p);
}

/* What a policy is compiled from. The caller reads the environment, not the compiler. */
typedef struct PolicyInput {
	const char *app_name;	       /* the manifest's name */
	const json_t *capabilities;    /* a JSON array, borrowed; each element is re-validated */
	const json_t *resources;       /* {cpu, memory_mb, pids} or NULL */
	const char *cwd;	       /* the app's directory, absolute: readable, as its share */
	int mesh_port;		       /* the mesh coordinator's port; 0: the default */
	int http_rpc_port;	       /* BERTH_HTTP_RPC_PORT, 0 for none */
	const char *http_rpc_app;      /* BERTH_HTTP_RPC_APP, NULL for every app */
	const char *const *extra_read; /* more readable paths (NULL-terminated), or NULL */
} PolicyInput;

typedef void (*policy_warning_t)(const char *line, void *userdata);

/*
 * capability_policy_compile() - compile @in into a policy (SPEC 4.3, with reads confined for
 * every app: the read baseline, the app's own directories and everything it may write are
 * readable, and nothing else unless declared).
 * Invalid capabilities and resources are skipped, never fatal: each gives @warn (may be
 * NULL: stderr) one complete line starting POLICY_LOG_PREFIX "WARNING: ".
 * Returns 0 and a new policy in *@ret, -EINVAL for a bad app name, capabilities array or
 * cwd, -E2BIG past POLICY_LIST_MAX, or -ENOMEM.
 */
int capability_policy_compile(const PolicyInput *in, policy_warning_t warn, void *userdata,
			      CapabilityPolicy **ret);

/* "writePaths=...; readPaths=...; networkPorts=..." for the log line. malloc()ed. */
char *capability_policy_summary(const CapabilityPolicy *p);

/* The policy as a JSON object (the file's content); NULL on OOM. */
json_t *capability_policy_to_json(const CapabilityPolicy *p);

/*
 * capability_policy_encode() - the policy file's bytes: compact JSON, sorted keys, no
 * newline. Returns 0 and a malloc()ed NUL-terminated buffer, or -ENOMEM.
 */
int capability_policy_encode(const CapabilityPolicy *p, char **ret_text, size_t *ret_len);

/*
 * capability_policy_from_json() / capability_policy_decode() - the one reader.
 * Checks everything: an object with exactly the known keys, schema POLICY_SCHEMA, a valid
 * appName, every list of the right type and at most POLICY_LIST_MAX long, each write path
 * allowed for the app, each read path canonical, ports 1-65535, limits known and well
 * formed. Duplicate keys are refused at parse time.
 * Returns 0 and a new policy, -EINVAL with a malloc()ed reason in *@reterr ("writePaths[2]
 * is not a path the policy may grant writes to"), -EFBIG above POLICY_FILE_SIZE_MAX, or -ENOMEM.
 */
int capability_policy_from_json(const json_t *doc, CapabilityPolicy **ret, char **reterr);
int capability_policy_decode(const char *text, size_t len, CapabilityPolicy **ret, char **reterr);

/*
 * capability_policy_write() - the encoded policy to @path atomically (a temporary file
 * beside it, fsync, rename), mode 0640, owner root, group @gid (SPEC 4.2). The one
 * function here that touches disk. Returns 0 or -errno.
 */
int capability_policy_write(const char *path, const CapabilityPolicy *p, gid_t gid);

typedef enum PolicyAccess {
	POLICY_ACCESS_READ,
	POLICY_ACCESS_WRITE,
	_POLICY_ACCESS_MAX,
	_POLICY_ACCESS_INVALID = -22,
} PolicyAccess;

/*
 * capability_policy_grants() - does @p let its app @access @path, as the Landlock ruleset
 * built from it would (a rule grants its path and everything beneath)? @path is absolute
 * and canonical (no "." or ".." segments: the caller resolves them).
 * Returns the rule's path (owned by @p) or NULL. What the denial explainer asks.
 */
const char *capability_policy_grants(const CapabilityPolicy *p, const char *path,
				     PolicyAccess access);
