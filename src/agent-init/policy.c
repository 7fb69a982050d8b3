/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "policy.h"

#define APP_NAME_MAX 64
#define MESH_COORDINATOR_PORT_DEFAULT 4875
#define TERMINAL_BIND_PORT 7681

static const char *const allowed_prefixes[] = {"/workspace", "/context", "/tmp", "/app"};
static const char *const device_write_paths[] = {"/dev/null", "/dev/pts", "/dev/ptmx"};

static void (*warning_sink)(const char *line, void *userdata);
static void *warning_userdata;

void policy_set_warning_sink(void (*sink)(const char *line, void *userdata), void *userdata)
{
	warning_sink = sink;
	warning_userdata = userdata;
}

static _printf_(1, 2) void warn(const char *fmt, ...)
{
	_cleanup_free_ char *body = NULL, *line = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (r < 0) {
		body = NULL;
		return;
	}
	if (asprintf(&line, POLICY_LOG_PREFIX "WARNING: %s", body) < 0) {
		line = NULL;
		return;
	}
	if (warning_sink)
		warning_sink(line, warning_userdata);
	else
		fprintf(stderr, "%s\n", line);
}

/* JSON.stringify() of a string, as the messages quote scopes. */
static char *js_quote(const char *s, size_t len)
{
	json_auto_t *j = json_stringn(s, len);

	return j ? json_dumps(j, JSON_ENCODE_ANY) : strdup("\"(invalid UTF-8)\"");
}

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* The regex "." matches anything but \n, \r, U+2028 and U+2029 (E2 80 A8/A9 in UTF-8). */
static bool is_line_terminator(const char *s, size_t left)
{
	if (*s == '\n' || *s == '\r')
		return true;
	return left >= 3 && (unsigned char)s[0] == 0xE2 && (unsigned char)s[1] == 0x80 &&
	       ((unsigned char)s[2] == 0xA8 || (unsigned char)s[2] == 0xA9);
}

bool policy_capability_is_well_formed(const char *s, size_t len)
{
	size_t i = 0;

	for (int part = 0; part < 2; part++) {
		size_t start = i;

		while (i < len && is_word_char(s[i]))
			i++;
		if (i == start || i >= len || s[i] != ':')
			return false;
		i++;
	}
	if (i >= len)
		return false;
	for (; i < len; i++)
		if (is_line_terminator(s + i, len - i))
			return false;
	return true;
}

static int issue_static(const char *msg, char **ret_issue)
{
	*ret_issue = strdup(msg);
	return *ret_issue ? 0 : -ENOMEM;
}

static int issue_quoted(const char *msg, const char *scope, size_t len, char **ret_issue)
{
	_cleanup_free_ char *q = js_quote(scope, len);

	if (!q || asprintf(ret_issue, "%s%s", msg, q) < 0) {
		*ret_issue = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Every segment after the leading "/" is non-empty and neither "." nor "..". */
static bool segments_canonical(const char *p, size_t n, bool refuse_star)
{
	size_t start = 1;

	if (n == 0 || p[0] != '/')
		return false;
	for (size_t i = 1; i <= n; i++) {
		size_t seg;

		if (i < n && p[i] != '/')
			continue;
		seg = i - start;
		if (seg == 0 || (seg == 1 && p[start] == '.') ||
		    (seg == 2 && p[start] == '.' && p[start + 1] == '.') ||
		    (refuse_star && seg == 1 && p[start] == '*'))
			return false;
		start = i + 1;
	}
	return true;
}

static bool is_at_or_beneath(const char *p, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);

	return n >= pl && memcmp(p, prefix, pl) == 0 && (n == pl || p[pl] == '/');
}

static bool under_allowed_prefix(const char *p, size_t n)
{
	for (size_t i = 0; i < ELEMENTSOF(allowed_prefixes); i++)
		if (is_at_or_beneath(p, n, allowed_prefixes[i]))
			return true;
	return false;
}

int policy_fs_scope_issue(const char *scope, size_t len, char **ret_issue)
{
	size_t plen = len;

	*ret_issue = NULL;
	if (memchr(scope, '\0', len))
		return issue_static("filesystem path must not contain a null byte", ret_issue);
	if (len == 0 || scope[0] != '/')
		return issue_quoted("filesystem path must be absolute (start with \"/\"), got ",
				    scope, len, ret_issue);
	if (len >= 2 && scope[len - 2] == '/' && scope[len - 1] == '*')
		plen = len - 2;
	if (memchr(scope, '*', plen))
		return issue_quoted(
			"filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got ",
			scope, len, ret_issue);
	if (plen == 1)
		return issue_static(
			"filesystem:*:/ would grant the entire container filesystem — declare a path under " POLICY_ALLOWED_PREFIXES_TEXT
			" instead",
			ret_issue);
	if (!segments_canonical(scope, plen, false))
		return issue_quoted(
			"filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got ",
			scope, len, ret_issue);
	if (!under_allowed_prefix(scope, plen))
		return issue_quoted("filesystem path must be " POLICY_ALLOWED_PREFIXES_TEXT
				    " or a path beneath one of them, got ",
				    scope, len, ret_issue);
	return 0;
}

static bool app_name_is_segment(const char *app_name)
{
	return app_name && app_name[0] && !strchr(app_name, '/') && !streq(app_name, ".") &&
	       !streq(app_name, "..");
}

bool policy_write_path_allowed(const char *path, size_t len, const char *app_name)
{
	char run_dir[sizeof("/run/berth/") + APP_NAME_MAX];

	if (len <= 1 || path[0] != '/' || memchr(path, '\0', len))
		return false;
	if (!segments_canonical(path, len, true))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(device_write_paths); i++)
		if (len == strlen(device_write_paths[i]) &&
		    memcmp(path, device_write_paths[i], len) == 0)
			return true;
	if (app_name_is_segment(app_name) && strlen(app_name) <= APP_NAME_MAX) {
		snprintf(run_dir, sizeof(run_dir), "/run/berth/%s", app_name);
		if (is_at_or_beneath(path, len, run_dir))
			return true;
	}
	return under_allowed_prefix(path, len);
}

/* --- the compiler ---------------------------------------------------------------- */

typedef struct Lists {
	json_t *declared, *write, *declared_read, *ports, *peers;
	bool unrestricted, terminal, github;
	json_int_t mesh_port;
} Lists;

static void lists_done(Lists *l)
{
	json_decref(l->declared);
	json_decref(l->write);
	json_decref(l->declared_read);
	json_decref(l->ports);
	json_decref(l->peers);
}

/* Append unless already there: every list is a set that keeps the order of first mention. */
static int add_string(json_t *a, const char *s, size_t len)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		if (json_string_length(v) == len && memcmp(json_string_value(v), s, len) == 0)
			return 0;
	}
	return json_array_append_new(a, json_stringn(s, len)) < 0 ? -ENOMEM : 0;
}

static int add_cstring(json_t *a, const char *s)
{
	return add_string(a, s, strlen(s));
}

static int add_port(json_t *a, json_int_t port)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		if (json_integer_value(v) == port)
			return 0;
	}
	return json_array_append_new(a, json_integer(port)) < 0 ? -ENOMEM : 0;
}

/* A TCP port written in decimal digits, 1-65535; -1 otherwise. */
static json_int_t parse_port(const char *s, size_t len)
{
	json_int_t v = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? v : -1;
}

static json_int_t env_port(const char *name)
{
	const char *v = getenv(name);

	return v ? parse_port(v, strlen(v)) : -1;
}

static size_t strip_trailing_glob(const char *scope, size_t len)
{
	return len >= 2 && scope[len - 2] == '/' && scope[len - 1] == '*' ? len - 2 : len;
}

static bool span_is(const char *s, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* The effect of one valid capability on the lists (SPEC 1.5). */
static int apply_capability(Lists *l, const char *ns, size_t ns_len, const char *action,
			    size_t action_len, const char *scope, size_t scope_len)
{
	bool fs = span_is(ns, ns_len, "filesystem"), net = span_is(ns, ns_len, "network");
	json_int_t port;
	int r;

	if (fs && span_is(action, action_len, "write"))
		return add_string(l->write, scope, strip_trailing_glob(scope, scope_len));
	if (fs && span_is(action, action_len, "read"))
		return add_string(l->declared_read, scope, strip_trailing_glob(scope, scope_len));
	if (net && span_is(action, action_len, "connect")) {
		if (span_is(scope, scope_len, "*")) {
			l->unrestricted = true;
			return 0;
		}
		port = parse_port(scope, scope_len);
		if (port > 0)
			return add_port(l->ports, port);
		warn("ignoring invalid network:connect scope \"%.*s\" (expected a port 1-65535, or \"*\")",
		     (int)scope_len, scope);
		return 0;
	}
	if (net && span_is(action, action_len, "peer")) {
		r = add_string(l->peers, scope, scope_len);
		return r < 0 ? r : add_port(l->ports, l->mesh_port);
	}
	if (span_is(ns, ns_len, "terminal")) {
		l->terminal = true;
		r = add_cstring(l->write, "/dev/pts");
		return r < 0 ? r : add_cstring(l->write, "/dev/ptmx");
	}
	if (span_is(ns, ns_len, "github"))
		l->github = true;
	return 0;
}

/* Re-validate one capability; skip it with a warning, or record it and apply it. */
static int compile_capability(Lists *l, const json_t *cap)
{
	_cleanup_free_ char *quoted = NULL, *issue = NULL;
	const char *s, *c1, *c2;
	size_t len;
	int r;

	if (!json_is_string(cap)) {
		quoted = json_dumps(cap, JSON_ENCODE_ANY | JSON_COMPACT);
		warn("ignoring malformed capability string %s (capability must be a string)",
		     quoted ?: "?");
		return 0;
	}
	s = json_string_value(cap);
	len = json_string_length(cap);
	if (!policy_capability_is_well_formed(s, len)) {
		quoted = js_quote(s, len);
		warn("ignoring malformed capability string %s (capability must be 'namespace:action:scope')",
		     quoted ?: "?");
		return 0;
	}
	c1 = memchr(s, ':', len);
	c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s));
	if (span_is(s, (size_t)(c1 - s), "filesystem") &&
	    (span_is(c1 + 1, (size_t)(c2 - c1 - 1), "read") ||
	     span_is(c1 + 1, (size_t)(c2 - c1 - 1), "write"))) {
		r = policy_fs_scope_issue(c2 + 1, len - (size_t)(c2 + 1 - s), &issue);
		if (r < 0)
			return r;
		if (issue) {
			quoted = js_quote(s, len);
			warn("ignoring capability %s — %s", quoted ?: "?", issue);
			return 0;
		}
	}
	r = add_string(l->declared, s, len);
	if (r < 0)
		return r;
	return apply_capability(l, s, (size_t)(c1 - s), c1 + 1, (size_t)(c2 - c1 - 1), c2 + 1,
				len - (size_t)(c2 + 1 - s));
}

static json_t *read_paths_new(const Lists *l, const char *app_name, const char *cwd)
{
	static const char *const baseline[] = {"/usr", "/bin",	"/sbin", "/lib",
					       "/etc", "/proc", "/dev",	 "/tmp"};
	json_auto_t *a = json_array();
	char run_dir[sizeof("/run/berth/") + APP_NAME_MAX];
	size_t i;
	json_t *v;

	if (!a)
		return NULL;
	if (json_array_size(l->declared_read) == 0)
		return json_incref(a);
	snprintf(run_dir, sizeof(run_dir), "/run/berth/%s", app_name);
	for (i = 0; i < ELEMENTSOF(baseline); i++)
		if (add_cstring(a, baseline[i]) < 0)
			return NULL;
	if (add_cstring(a, run_dir) < 0 || add_cstring(a, cwd) < 0)
		return NULL;
	if (l->github && add_cstring(a, "/run/berth/github-api-broker") < 0)
		return NULL;
	json_array_foreach(l->declared_read, i, v) {
		if (add_string(a, json_string_value(v), json_string_length(v)) < 0)
			return NULL;
	}
	return json_incref(a);
}

static json_t *bind_ports_new(const Lists *l, const char *app_name)
{
	json_auto_t *a = json_array();
	json_int_t rpc = env_port("BERTH_HTTP_RPC_PORT");
	const char *rpc_app = getenv("BERTH_HTTP_RPC_APP");

	if (!a)
		return NULL;
	if (rpc > 0 && (!rpc_app || !rpc_app[0] || streq(rpc_app, app_name)) &&
	    add_port(a, rpc) < 0)
		return NULL;
	if (l->terminal && add_port(a, TERMINAL_BIND_PORT) < 0)
		return NULL;
	return json_incref(a);
}

/* @key = "<v>", or "<v> 100000" for a CPU quota. */
static int set_limit(json_t *o, const char *key, long long v, bool quota)
{
	char buf[64];

	if (quota)
		snprintf(buf, sizeof(buf), "%lld 100000", v);
	else
		snprintf(buf, sizeof(buf), "%lld", v);
	return json_object_set_new(o, key, json_string(buf)) < 0 ? -ENOMEM : 0;
}

/* cgroupLimits from resources: (SPEC 4.3 [N]). Never memory.high. */
static json_t *cgroup_limits_new(const json_t *resources)
{
	json_auto_t *o = json_object();
	json_t *cpu = resources ? json_object_get(resources, "cpu") : NULL;
	json_t *mem = resources ? json_object_get(resources, "memory_mb") : NULL;
	json_t *pids = resources ? json_object_get(resources, "pids") : NULL;
	long long pids_max = 1024;

	if (!o || json_object_set_new(o, "cpu.weight", json_string("100")) < 0)
		return NULL;
	if (cpu && json_is_number(cpu) && json_number_value(cpu) > 0 &&
	    json_number_value(cpu) <= 1e6) {
		double quota = floor(json_number_value(cpu) * 100000 + 0.5);

		if (set_limit(o, "cpu.max", (long long)MAX(1000.0, quota), true) < 0)
			return NULL;
	} else if (cpu)
		warn("ignoring invalid resources.cpu (expected a number > 0)");
	if (mem && json_is_integer(mem) && json_integer_value(mem) > 0 &&
	    json_integer_value(mem) <= INT64_MAX / 1048576) {
		if (set_limit(o, "memory.max", json_integer_value(mem) * 1048576, false) < 0 ||
		    set_limit(o, "memory.swap.max", 0, false) < 0)
			return NULL;
	} else if (mem)
		warn("ignoring invalid resources.memory_mb (expected an integer > 0)");
	if (pids && json_is_integer(pids) && json_integer_value(pids) > 0)
		pids_max = json_integer_value(pids);
	else if (pids)
		warn("ignoring invalid resources.pids (expected an integer > 0)");
	if (set_limit(o, "pids.max", pids_max, false) < 0)
		return NULL;
	return json_incref(o);
}

static void join_array(FILE *f, const json_t *a)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		if (i > 0)
			fputs(", ", f);
		if (json_is_string(v))
			fputs(json_string_value(v), f);
		else
			fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	}
}

static char *summary_new(const json_t *policy)
{
	const json_t *read = json_object_get(policy, "readPaths"),
		     *ports = json_object_get(policy, "networkPorts"),
		     *bind = json_object_get(policy, "bindPorts"),
		     *peers = json_object_get(policy, "meshPeers");
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	fputs("writePaths=", f);
	join_array(f, json_object_get(policy, "writePaths"));
	if (json_array_size(read) > 0) {
		fputs("; readPaths=", f);
		join_array(f, read);
	}
	if (json_is_true(json_object_get(policy, "networkUnrestricted")))
		fputs("; networkPorts=* (unrestricted)", f);
	else if (json_array_size(ports) > 0) {
		fputs("; networkPorts=", f);
		join_array(f, ports);
	} else
		fputs("; networkPorts=(none — network denied by default)", f);
	if (json_array_size(bind) > 0) {
		fputs("; bindPorts=", f);
		join_array(f, bind);
	}
	if (json_array_size(peers) > 0) {
		fputs("; meshPeers=", f);
		join_array(f, peers);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static bool app_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > APP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static int lists_compile(Lists *l, const char *app_name, const json_t *capabilities)
{
	char path[sizeof("/run/berth/") + APP_NAME_MAX];
	json_int_t mesh = env_port("BERTH_MESH_COORDINATOR_PORT");
	size_t i;
	json_t *cap;
	int r;

	l->mesh_port = mesh > 0 ? mesh : MESH_COORDINATOR_PORT_DEFAULT;
	l->declared = json_array();
	l->write = json_array();
	l->declared_read = json_array();
	l->ports = json_array();
	l->peers = json_array();
	if (!l->declared || !l->write || !l->declared_read || !l->ports || !l->peers)
		return -ENOMEM;
	/* The write baseline: /dev/null for everyone, and the app's own two directories. */
	r = add_cstring(l->write, "/dev/null");
	snprintf(path, sizeof(path), "/tmp/%s", app_name);
	if (r >= 0)
		r = add_cstring(l->write, path);
	snprintf(path, sizeof(path), "/run/berth/%s", app_name);
	if (r >= 0)
		r = add_cstring(l->write, path);
	json_array_foreach(capabilities, i, cap) {
		if (r < 0)
			break;
		r = compile_capability(l, cap);
	}
	return r;
}

int policy_compile(const char *app_name, const json_t *capabilities, const json_t *resources,
		   const char *cwd, json_t **ret_policy, char **ret_summary)
{
	_cleanup_(lists_done) Lists l = {};
	json_auto_t *policy = NULL, *read = NULL, *bind = NULL, *limits = NULL;
	char *summary;
	int r;

	if (!app_name_valid(app_name) || !json_is_array(capabilities) || !cwd || cwd[0] != '/' ||
	    (resources && !json_is_object(resources)))
		return -EINVAL;
	if (json_array_size(capabilities) > POLICY_LIST_MAX || strlen(cwd) >= PATH_MAX)
		return -E2BIG;
	r = lists_compile(&l, app_name, capabilities);
	if (r < 0)
		return r;

	read = read_paths_new(&l, app_name, cwd);
	bind = bind_ports_new(&l, app_name);
	limits = cgroup_limits_new(resources);
	policy = json_object();
	if (!policy || !read || !bind || !limits ||
	    json_object_set_new(policy, "appName", json_string(app_name)) < 0 ||
	    json_object_set(policy, "declaredCapabilities", l.declared) < 0 ||
	    json_object_set(policy, "writePaths", l.write) < 0 ||
	    json_object_set(policy, "readPaths", read) < 0 ||
	    json_object_set(policy, "networkPorts", l.ports) < 0 ||
	    json_object_set_new(policy, "networkUnrestricted", json_boolean(l.unrestricted)) < 0 ||
	    json_object_set(policy, "meshPeers", l.peers) < 0 ||
	    json_object_set(policy, "bindPorts", bind) < 0 ||
	    json_object_set(policy, "cgroupLimits", limits) < 0)
		return -ENOMEM;
	summary = summary_new(policy);
	if (!summary)
		return -ENOMEM;
	*ret_policy = TAKE_PTR(policy);
	*ret_summary = summary;
	return 0;
}

int policy_write(const char *path, const json_t *policy, gid_t gid)
{
	_cleanup_free_ char *text = NULL, *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	size_t len, done = 0;
	int r;

	text = json_dumps(policy, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text || asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = strlen(text);
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
