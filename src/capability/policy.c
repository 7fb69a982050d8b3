/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "js-quote.h"
#include "macros.h"
#include "parse-util.h"
#include "policy.h"

static const char *const limit_keys[POLICY_LIMITS_MAX] = {"cpu.max", "cpu.weight", "memory.max",
							  "memory.swap.max", "pids.max"};
static const char *const terminal_write_paths[CAPABILITY_TERMINAL_WRITE_PATHS_N] =
	CAPABILITY_TERMINAL_WRITE_PATHS_INIT;

/* --- lists ------------------------------------------------------------------------------ */

void policy_strings_done(PolicyStrings *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (PolicyStrings){};
}

static bool strings_has(const PolicyStrings *s, const char *v, size_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->v[i]) == len && memcmp(s->v[i], v, len) == 0)
			return true;
	return false;
}

/* Append unless already there: every list is a set that keeps the order of first mention. */
int policy_strings_add(PolicyStrings *s, const char *v, size_t len)
{
	char **grown, *copy;

	if (strings_has(s, v, len))
		return 0;
	if (s->n >= POLICY_LIST_MAX)
		return -E2BIG;
	grown = realloc(s->v, (s->n + 1) * sizeof(char *));
	if (!grown)
		return -ENOMEM;
	s->v = grown;
	copy = strndup(v, len);
	if (!copy)
		return -ENOMEM;
	s->v[s->n++] = copy;
	return 0;
}

static int strings_add_c(PolicyStrings *s, const char *v)
{
	return policy_strings_add(s, v, strlen(v));
}

static int ports_add(PolicyPorts *p, int port)
{
	uint16_t *grown;

	for (size_t i = 0; i < p->n; i++)
		if (p->v[i] == port)
			return 0;
	if (p->n >= POLICY_LIST_MAX)
		return -E2BIG;
	grown = realloc(p->v, (p->n + 1) * sizeof(uint16_t));
	if (!grown)
		return -ENOMEM;
	p->v = grown;
	p->v[p->n++] = (uint16_t)port;
	return 0;
}

CapabilityPolicy *capability_policy_free(CapabilityPolicy *p)
{
	if (!p)
		return NULL;
	free(p->app_name);
	policy_strings_done(&p->declared);
	policy_strings_done(&p->write_paths);
	policy_strings_done(&p->read_paths);
	policy_strings_done(&p->mesh_peers);
	free(p->network_ports.v);
	free(p->bind_ports.v);
	free(p);
	return NULL;
}

static int limit_set(CapabilityPolicy *p, const char *key, const char *value)
{
	for (size_t i = 0; i < p->n_limits; i++)
		if (streq(p->limits[i].key, key)) {
			snprintf(p->limits[i].value, sizeof(p->limits[i].value), "%s", value);
			return 0;
		}
	if (p->n_limits >= POLICY_LIMITS_MAX)
		return -E2BIG;
	snprintf(p->limits[p->n_limits].key, sizeof(p->limits[0].key), "%s", key);
	snprintf(p->limits[p->n_limits].value, sizeof(p->limits[0].value), "%s", value);
	p->n_limits++;
	return 0;
}

static bool limit_key_known(const char *key)
{
	for (size_t i = 0; i < ELEMENTSOF(limit_keys); i++)
		if (streq(key, limit_keys[i]))
			return true;
	return false;
}

static bool limit_value_ok(const char *v, size_t len)
{
	if (len == 0 || len >= sizeof(((PolicyLimit *)NULL)->value) || strlen(v) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'z') || v[i] == ' '))
			return false;
	return true;
}

/* --- the compiler ----------------------------------------------------------------------- */

typedef struct Compiler {
	CapabilityPolicy *p;
	PolicyStrings declared_read;
	bool terminal, github;
	int mesh_port;
	policy_warning_t warn;
	void *userdata;
} Compiler;

static _printf_(2, 3) void warn(Compiler *c, const char *fmt, ...)
{
	_cleanup_free_ char *body = NULL, *line = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (r < 0 || asprintf(&line, POLICY_LOG_PREFIX "WARNING: %s", body) < 0)
		return;
	if (c->warn)
		c->warn(line, c->userdata);
	else
		fprintf(stderr, "%s\n", line);
}

static size_t strip_trailing_glob(const char *scope, size_t len)
{
	return len >= 2 && scope[len - 2] == '/' && scope[len - 1] == '*' ? len - 2 : len;
}

/* The effect of one valid capability on the policy (SPEC 1.5). */
static int apply(Compiler *c, const CapabilityParts *cp)
{
	CapabilityPolicy *p = c->p;
	bool fs = capability_part_is(cp->ns, cp->ns_len, "filesystem"),
	     net = capability_part_is(cp->ns, cp->ns_len, "network");
	uint16_t port;
	int r;

	if (fs && capability_part_is(cp->action, cp->action_len, "write"))
		return policy_strings_add(&p->write_paths, cp->scope,
					  strip_trailing_glob(cp->scope, cp->scope_len));
	if (fs && capability_part_is(cp->action, cp->action_len, "read"))
		return policy_strings_add(&c->declared_read, cp->scope,
					  strip_trailing_glob(cp->scope, cp->scope_len));
	if (net && capability_part_is(cp->action, cp->action_len, "connect")) {
		if (capability_part_is(cp->scope, cp->scope_len, "*")) {
			p->network_unrestricted = true;
			return 0;
		}
		if (parse_port(cp->scope, cp->scope_len, &port) == 0)
			return ports_add(&p->network_ports, port);
		warn(c,
		     "ignoring invalid network:connect scope \"%.*s\" (expected a port 1-65535, or \"*\")",
		     (int)cp->scope_len, cp->scope);
		return 0;
	}
	if (net && capability_part_is(cp->action, cp->action_len, "peer")) {
		r = policy_strings_add(&p->mesh_peers, cp->scope, cp->scope_len);
		return r < 0 ? r : ports_add(&p->network_ports, c->mesh_port);
	}
	if (capability_part_is(cp->ns, cp->ns_len, "terminal")) {
		c->terminal = true;
		for (size_t i = 0; i < ELEMENTSOF(terminal_write_paths); i++)
			if ((r = strings_add_c(&p->write_paths, terminal_write_paths[i])) < 0)
				return r;
		return 0;
	}
	if (capability_part_is(cp->ns, cp->ns_len, "github"))
		c->github = true;
	return 0;
}

/* Re-validate one capability; skip it with a warning, or record it and apply it. */
static int compile_one(Compiler *c, const json_t *cap)
{
	_cleanup_free_ char *quoted = NULL, *issue = NULL;
	CapabilityParts cp;
	const char *s;
	size_t len;
	int r;

	if (!json_is_string(cap)) {
		quoted = json_dumps(cap, JSON_ENCODE_ANY | JSON_COMPACT);
		warn(c, "ignoring malformed capability string %s (capability must be a string)",
		     quoted ?: "?");
		return 0;
	}
	s = json_string_value(cap);
	len = json_string_length(cap);
	/* Every consumer reads C strings: one with a NUL would mean something else to each. */
	if (memchr(s, '\0', len)) {
		quoted = js_quoted(s, len);
		warn(c, "ignoring capability %s (capability must not contain a NUL byte)",
		     quoted ?: "?");
		return 0;
	}
	if (!capability_is_well_formed(s, len)) {
		quoted = js_quoted(s, len);
		warn(c,
		     "ignoring malformed capability string %s (capability must be 'namespace:action:scope')",
		     quoted ?: "?");
		return 0;
	}
	r = capability_issue(s, len, &issue);
	if (r < 0)
		return r;
	if (issue) {
		quoted = js_quoted(s, len);
		warn(c, "ignoring capability %s — %s", quoted ?: "?", issue);
		return 0;
	}
	r = policy_strings_add(&c->p->declared, s, len);
	if (r < 0)
		return r;
	(void)capability_split(s, len, &cp);
	return apply(c, &cp);
}

/* Everything readable (schema 2): the baseline, the app's own directories and share, what
 * it may write, what it declares. Another app's data is never among them. */
static int read_paths_fill(Compiler *c, const PolicyInput *in)
{
	CapabilityPolicy *p = c->p;
	char path[sizeof("/run/berth/") + CAPABILITY_APP_NAME_MAX];
	int r = 0;

	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(capability_read_baseline); i++)
		r = strings_add_c(&p->read_paths, capability_read_baseline[i]);
	snprintf(path, sizeof(path), "/run/berth/%s", in->app_name);
	if (r >= 0)
		r = strings_add_c(&p->read_paths, path);
	if (r >= 0)
		r = strings_add_c(&p->read_paths, in->cwd);
	if (r >= 0 && c->github)
		r = strings_add_c(&p->read_paths, CAPABILITY_GITHUB_BROKER_DIR);
	for (size_t i = 0; r >= 0 && in->extra_read && in->extra_read[i]; i++)
		r = strings_add_c(&p->read_paths, in->extra_read[i]);
	for (size_t i = 0; r >= 0 && i < c->declared_read.n; i++)
		r = strings_add_c(&p->read_paths, c->declared_read.v[i]);
	/* A path it may write, it may read back. */
	for (size_t i = 0; r >= 0 && i < p->write_paths.n; i++)
		r = strings_add_c(&p->read_paths, p->write_paths.v[i]);
	return r;
}

/* @key = "<v>", or "<v> 100000" for a CPU quota. */
static int limit_set_number(CapabilityPolicy *p, const char *key, long long v, bool quota)
{
	char buf[48];

	snprintf(buf, sizeof(buf), quota ? "%lld 100000" : "%lld", v);
	return limit_set(p, key, buf);
}

/* cgroup limits from resources: (SPEC 4.3 [N]). Never memory.high. */
static int limits_fill(Compiler *c, const json_t *resources)
{
	json_t *cpu = resources ? json_object_get(resources, "cpu") : NULL;
	json_t *mem = resources ? json_object_get(resources, "memory_mb") : NULL;
	json_t *pids = resources ? json_object_get(resources, "pids") : NULL;
	long long pids_max = 1024;
	int r;

	r = limit_set(c->p, "cpu.weight", "100");
	if (r >= 0 && cpu && json_is_number(cpu) && json_number_value(cpu) > 0 &&
	    json_number_value(cpu) <= 1e6) {
		double quota = floor(json_number_value(cpu) * 100000 + 0.5);

		r = limit_set_number(c->p, "cpu.max", (long long)MAX(1000.0, quota), true);
	} else if (cpu)
		warn(c, "ignoring invalid resources.cpu (expected a number > 0)");
	if (r >= 0 && mem && json_is_integer(mem) && json_integer_value(mem) > 0 &&
	    json_integer_value(mem) <= INT64_MAX / 1048576) {
		r = limit_set_number(c->p, "memory.max", json_integer_value(mem) * 1048576, false);
		if (r >= 0)
			r = limit_set(c->p, "memory.swap.max", "0");
	} else if (mem)
		warn(c, "ignoring invalid resources.memory_mb (expected an integer > 0)");
	if (pids && json_is_integer(pids) && json_integer_value(pids) > 0)
		pids_max = json_integer_value(pids);
	else if (pids)
		warn(c, "ignoring invalid resources.pids (expected an integer > 0)");
	return r < 0 ? r : limit_set_number(c->p, "pids.max", pids_max, false);
}

int capability_policy_compile(const PolicyInput *in, policy_warning_t warn_fn, void *userdata,
			      CapabilityPolicy **ret)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	Compiler c = {.warn = warn_fn, .userdata = userdata};
	char path[sizeof("/run/berth/") + CAPABILITY_APP_NAME_MAX];
	size_t i;
	json_t *cap;
	int r;

	if (!capability_app_name_valid(in->app_name) || !json_is_array(in->capabilities) ||
	    !in->cwd || !capability_read_path_allowed(in->cwd, strlen(in->cwd)) ||
	    (in->resources && !json_is_object(in->resources)))
		return -EINVAL;
	if (json_array_size(in->capabilities) > POLICY_LIST_MAX || strlen(in->cwd) >= PATH_MAX)
		return -E2BIG;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->app_name = strdup(in->app_name)))
		return -ENOMEM;
	c.p = p;
	c.mesh_port = in->mesh_port > 0 ? in->mesh_port : CAPABILITY_MESH_COORDINATOR_PORT_DEFAULT;
	/* The write baseline: /dev/null for everyone, and the app's own two directories. */
	r = strings_add_c(&p->write_paths, "/dev/null");
	snprintf(path, sizeof(path), "/tmp/%s", in->app_name);
	if (r >= 0)
		r = strings_add_c(&p->write_paths, path);
	snprintf(path, sizeof(path), "/run/berth/%s", in->app_name);
	if (r >= 0)
		r = strings_add_c(&p->write_paths, path);
	json_array_foreach(in->capabilities, i, cap) {
		if (r < 0)
			break;
		r = compile_one(&c, cap);
	}
	if (r >= 0)
		r = read_paths_fill(&c, in);
	if (r >= 0 && in->http_rpc_port > 0 &&
	    (!in->http_rpc_app || !in->http_rpc_app[0] || streq(in->http_rpc_app, in->app_name)))
		r = ports_add(&p->bind_ports, in->http_rpc_port);
	if (r >= 0 && c.terminal)
		r = ports_add(&p->bind_ports, CAPABILITY_TERMINAL_BIND_PORT);
	if (r >= 0)
		r = limits_fill(&c, in->resources);
	policy_strings_done(&c.declared_read);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

/* --- the file ----------------------------------------------------------------------------- */

static json_t *strings_json(const PolicyStrings *s)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->n; i++)
		if (json_array_append_new(a, json_string(s->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *ports_json(const PolicyPorts *p)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < p->n; i++)
		if (json_array_append_new(a, json_integer(p->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

json_t *capability_policy_to_json(const CapabilityPolicy *p)
{
	json_t *limits = json_object();

	for (size_t i = 0; limits && i < p->n_limits; i++)
		json_object_set_new(limits, p->limits[i].key, json_string(p->limits[i].value));
	return json_pack("{s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:o}", "schema",
			 POLICY_SCHEMA, "appName", p->app_name, "declaredCapabilities",
			 strings_json(&p->declared), "writePaths", strings_json(&p->write_paths),
			 "readPaths", strings_json(&p->read_paths), "networkPorts",
			 ports_json(&p->network_ports), "bindPorts", ports_json(&p->bind_ports),
			 "networkUnrestricted", p->network_unrestricted, "meshPeers",
			 strings_json(&p->mesh_peers), "cgroupLimits", limits);
}

int capability_policy_encode(const CapabilityPolicy *p, char **ret_text, size_t *ret_len)
{
	_cleanup_(json_decrefp) json_t *doc = capability_policy_to_json(p);
	char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	if (!text)
		return -ENOMEM;
	*ret_text = text;
	if (ret_len)
		*ret_len = strlen(text);
	return 0;
}

static _printf_(2, 3) int fail(char **reterr, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(reterr, fmt, ap);
	va_end(ap);
	if (r < 0) {
		*reterr = NULL;
		return -ENOMEM;
	}
	return -EINVAL;
}

static const char *const known_keys[] = {
	"schema",	"appName",   "declaredCapabilities", "writePaths", "readPaths",
	"networkPorts", "bindPorts", "networkUnrestricted",  "meshPeers",  "cgroupLimits",
};

typedef enum ListKind {
	LIST_STRINGS,
	LIST_WRITE_PATHS,
	LIST_READ_PATHS,
	_LIST_KIND_MAX,
	_LIST_KIND_INVALID = -22,
} ListKind;

static int decode_strings(const json_t *doc, const char *key, ListKind kind, const char *app,
			  PolicyStrings *out, char **reterr)
{
	const json_t *a = json_object_get(doc, key), *v;
	size_t i;
	int r;

	if (!json_is_array(a))
		return fail(reterr, "%s is missing or not an array", key);
	if (json_array_size(a) > POLICY_LIST_MAX)
		return fail(reterr, "%s has more than %d entries", key, POLICY_LIST_MAX);
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);

		if (s && memchr(s, '\0', len))
			return fail(reterr, "%s[%zu] holds a NUL byte", key, i);
		if (!s || (kind != LIST_STRINGS && (len == 0 || len >= PATH_MAX)))
			return fail(reterr, "%s[%zu] is not a %s", key, i,
				    kind == LIST_STRINGS ? "string" : "path");
		if (kind == LIST_WRITE_PATHS && !capability_write_path_allowed(s, len, app))
			return fail(reterr, "%s[%zu] is not a path the policy may grant writes to",
				    key, i);
		if (kind == LIST_READ_PATHS && !capability_read_path_allowed(s, len))
			return fail(reterr, "%s[%zu] is not an absolute, canonical path", key, i);
		r = policy_strings_add(out, s, len);
		if (r < 0)
			return r;
	}
	return 0;
}

static int decode_ports(const json_t *doc, const char *key, PolicyPorts *out, char **reterr)
{
	const json_t *a = json_object_get(doc, key), *v;
	size_t i;
	int r;

	if (!json_is_array(a))
		return fail(reterr, "%s is missing or not an array", key);
	if (json_array_size(a) > POLICY_LIST_MAX)
		return fail(reterr, "%s has more than %d entries", key, POLICY_LIST_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 65535)
			return fail(reterr, "%s[%zu] is not a port 1-65535", key, i);
		r = ports_add(out, (int)json_integer_value(v));
		if (r < 0)
			return r;
	}
	return 0;
}

static int decode_limits(const json_t *doc, CapabilityPolicy *p, char **reterr)
{
	const json_t *o = json_object_get(doc, "cgroupLimits"), *v;
	const char *key;

	if (!json_is_object(o))
		return fail(reterr, "cgroupLimits is missing or not an object");
	json_object_foreach((json_t *)o, key, v) {
		if (!limit_key_known(key))
			return fail(reterr, "cgroupLimits has an unknown limit \"%.40s\"", key);
		if (!json_is_string(v) ||
		    !limit_value_ok(json_string_value(v), json_string_length(v)))
			return fail(reterr, "cgroupLimits.%s is not a value of [0-9a-z ]", key);
		if (limit_set(p, key, json_string_value(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int capability_policy_from_json(const json_t *doc, CapabilityPolicy **ret, char **reterr)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	const char *key, *name;
	json_t *v;
	int r;

	*reterr = NULL;
	if (!json_is_object(doc))
		return fail(reterr, "not a JSON object");
	json_object_foreach((json_t *)doc, key, v) {
		bool known = false;

		for (size_t i = 0; i < ELEMENTSOF(known_keys); i++)
			known = known || streq(key, known_keys[i]);
		if (!known)
			return fail(reterr, "unknown key \"%.40s\"", key);
	}
	v = json_object_get(doc, "schema");
	if (!v)
		return fail(reterr,
			    "schema is missing: this policy was written for another "
			    "version of agent-init (schema %d needed)",
			    POLICY_SCHEMA);
	if (!json_is_integer(v) || json_integer_value(v) != POLICY_SCHEMA)
		return fail(reterr,
			    "schema is not %d: this policy was written for another version of "
			    "agent-init",
			    POLICY_SCHEMA);
	v = json_object_get(doc, "appName");
	name = json_string_value(v);
	if (!capability_app_name_valid(name) || strlen(name) != json_string_length(v))
		return fail(reterr, "appName is missing or not a valid name");
	v = json_object_get(doc, "networkUnrestricted");
	if (!json_is_boolean(v))
		return fail(reterr, "networkUnrestricted is missing or not a boolean");
	p = calloc(1, sizeof(*p));
	if (!p || !(p->app_name = strdup(name)))
		return -ENOMEM;
	p->network_unrestricted = json_is_true(v);
	r = decode_strings(doc, "declaredCapabilities", LIST_STRINGS, name, &p->declared, reterr);
	if (r >= 0)
		r = decode_strings(doc, "writePaths", LIST_WRITE_PATHS, name, &p->write_paths,
				   reterr);
	if (r >= 0)
		r = decode_strings(doc, "readPaths", LIST_READ_PATHS, name, &p->read_paths, reterr);
	if (r >= 0)
		r = decode_strings(doc, "meshPeers", LIST_STRINGS, name, &p->mesh_peers, reterr);
	if (r >= 0)
		r = decode_ports(doc, "networkPorts", &p->network_ports, reterr);
	if (r >= 0)
		r = decode_ports(doc, "bindPorts", &p->bind_ports, reterr);
	if (r >= 0)
		r = decode_limits(doc, p, reterr);
	if (r >= 0 && p->read_paths.n == 0)
		r = fail(reterr, "readPaths is empty: reads are confined for every app");
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int capability_policy_decode(const char *text, size_t len, CapabilityPolicy **ret, char **reterr)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_error_t err;

	*reterr = NULL;
	if (len > POLICY_FILE_SIZE_MAX) {
		(void)fail(reterr, "larger than %d bytes", POLICY_FILE_SIZE_MAX);
		return -EFBIG;
	}
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (!doc)
		return fail(reterr, "line %d column %d: %s", err.line, err.column, err.text);
	return capability_policy_from_json(doc, ret, reterr);
}

int capability_policy_write(const char *path, const CapabilityPolicy *p, gid_t gid)
{
	_cleanup_free_ char *text = NULL, *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	size_t len, done = 0;
	int r;

	r = capability_policy_encode(p, &text, &len);
	if (r < 0)
		return r;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0640) < 0 || fchown(fd, 0, gid) < 0)
		goto fail;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = EIO;
		if (n <= 0)
			goto fail;
		done += (size_t)n;
	}
	if (fsync(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return 0;
fail:
	r = -errno;
	(void)unlink(tmp);
	return r;
}

/* --- the summary and the query ------------------------------------------------------------ */

static void join_strings(FILE *f, const PolicyStrings *s)
{
	for (size_t i = 0; i < s->n; i++)
		fprintf(f, "%s%s", i ? ", " : "", s->v[i]);
}

static void join_ports(FILE *f, const PolicyPorts *p)
{
	for (size_t i = 0; i < p->n; i++)
		fprintf(f, "%s%u", i ? ", " : "", (unsigned)p->v[i]);
}

char *capability_policy_summary(const CapabilityPolicy *p)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	fputs("writePaths=", f);
	join_strings(f, &p->write_paths);
	fputs("; readPaths=", f);
	join_strings(f, &p->read_paths);
	if (p->network_unrestricted)
		fputs("; networkPorts=* (unrestricted)", f);
	else if (p->network_ports.n > 0) {
		fputs("; networkPorts=", f);
		join_ports(f, &p->network_ports);
	} else
		fputs("; networkPorts=(none — network denied by default)", f);
	if (p->bind_ports.n > 0) {
		fputs("; bindPorts=", f);
		join_ports(f, &p->bind_ports);
	}
	if (p->mesh_peers.n > 0) {
		fputs("; meshPeers=", f);
		join_strings(f, &p->mesh_peers);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

const char *capability_policy_grants(const CapabilityPolicy *p, const char *path,
				     PolicyAccess access)
{
	const PolicyStrings *rules =
		access == POLICY_ACCESS_WRITE ? &p->write_paths : &p->read_paths;

	if (!path || path[0] != '/' ||
	    (access != POLICY_ACCESS_READ && access != POLICY_ACCESS_WRITE))
		return NULL;
	for (size_t i = 0; i < rules->n; i++)
		if (capability_path_beneath(path, strlen(path), rules->v[i]))
			return rules->v[i];
	return NULL;
}
