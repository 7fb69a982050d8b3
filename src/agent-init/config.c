/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "macros.h"
#include "policy.h"

void agent_policy_done(AgentPolicy *p)
{
	json_decref(p->doc);
	*p = (AgentPolicy){};
}

static _printf_(2, 3) int fail(char **reterr_message, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(reterr_message, fmt, ap);
	va_end(ap);
	if (r < 0) {
		*reterr_message = NULL;
		return -ENOMEM;
	}
	return -EINVAL;
}

typedef enum ListKind {
	LIST_STRINGS,
	LIST_PATHS,
	LIST_PORTS,
	_LIST_KIND_MAX,
	_LIST_KIND_INVALID = -EINVAL,
} ListKind;

/* The list under @key: checked, or a new empty one put in its place when absent. */
static int get_list(json_t *doc, const char *key, ListKind kind, bool required, json_t **ret,
		    char **reterr_message)
{
	json_t *a = json_object_get(doc, key), *v;
	size_t i;

	if (!a) {
		if (required)
			return fail(reterr_message, "%s is missing", key);
		if (json_object_set_new(doc, key, json_array()) < 0)
			return -ENOMEM;
		*ret = json_object_get(doc, key);
		return 0;
	}
	if (!json_is_array(a))
		return fail(reterr_message, "%s is not an array", key);
	if (json_array_size(a) > POLICY_LIST_MAX)
		return fail(reterr_message, "%s has more than %d entries", key, POLICY_LIST_MAX);
	json_array_foreach(a, i, v) {
		switch (kind) {
		case LIST_PORTS:
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > 65535)
				return fail(reterr_message, "%s[%zu] is not a port 1-65535", key,
					    i);
			break;
		case LIST_PATHS:
			if (!json_is_string(v) || json_string_length(v) >= PATH_MAX ||
			    strlen(json_string_value(v)) != json_string_length(v) ||
			    json_string_length(v) == 0)
				return fail(reterr_message, "%s[%zu] is not a path", key, i);
			break;
		case LIST_STRINGS:
			if (!json_is_string(v))
				return fail(reterr_message, "%s[%zu] is not a string", key, i);
			break;
		case _LIST_KIND_MAX:
		case _LIST_KIND_INVALID:
		default:
			return -EINVAL;
		}
	}
	*ret = a;
	return 0;
}

static bool app_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > 64 || strlen(s) != len || streq(s, ".") || streq(s, ".."))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static const char *const known_keys[] = {
	"appName",   "declaredCapabilities", "writePaths",
	"readPaths", "networkPorts",	     "bindPorts",
	"meshPeers", "cgroupLimits",	     "networkUnrestricted",
};

static int check_keys(json_t *doc, char **reterr_message)
{
	const char *key;
	json_t *v;

	json_object_foreach(doc, key, v) {
		bool known = false;

		for (size_t i = 0; i < ELEMENTSOF(known_keys); i++)
			known = known || streq(key, known_keys[i]);
		if (!known)
			return fail(reterr_message, "unknown key \"%s\"", key);
	}
	return 0;
}

int agent_policy_parse(const char *text, size_t len, AgentPolicy *ret, char **reterr_message)
{
	json_auto_t *doc = NULL;
	AgentPolicy p = {};
	json_error_t err;
	json_t *v;
	int r;

	*reterr_message = NULL;
	if (len > POLICY_FILE_SIZE_MAX)
		return fail(reterr_message, "larger than %d bytes", POLICY_FILE_SIZE_MAX);
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (!doc)
		return fail(reterr_message, "line %d column %d: %s", err.line, err.column,
			    err.text);
	if (!json_is_object(doc))
		return fail(reterr_message, "not a JSON object");
	r = check_keys(doc, reterr_message);
	if (r < 0)
		return r;
	v = json_object_get(doc, "appName");
	if (!json_is_string(v) || !app_name_ok(json_string_value(v), json_string_length(v)))
		return fail(reterr_message, "appName is missing or not a valid name");
	p.app_name = json_string_value(v);
	v = json_object_get(doc, "networkUnrestricted");
	if (v && !json_is_boolean(v))
		return fail(reterr_message, "networkUnrestricted is not a boolean");
	p.network_unrestricted = json_is_true(v);
	v = json_object_get(doc, "cgroupLimits");
	if (v && !json_is_object(v))
		return fail(reterr_message, "cgroupLimits is not an object");

	r = get_list(doc, "declaredCapabilities", LIST_STRINGS, false, &p.declared, reterr_message);
	if (r >= 0)
		r = get_list(doc, "writePaths", LIST_PATHS, true, &p.write_paths, reterr_message);
	if (r >= 0)
		r = get_list(doc, "readPaths", LIST_PATHS, false, &p.read_paths, reterr_message);
	if (r >= 0)
		r = get_list(doc, "networkPorts", LIST_PORTS, false, &p.network_ports,
			     reterr_message);
	if (r >= 0)
		r = get_list(doc, "bindPorts", LIST_PORTS, false, &p.bind_ports, reterr_message);
	if (r >= 0)
		r = get_list(doc, "meshPeers", LIST_STRINGS, false, &p.mesh_peers, reterr_message);
	if (r < 0)
		return r;
	p.doc = TAKE_PTR(doc);
	*ret = p;
	return 0;
}

/* A decimal id with optional surrounding blanks; 0 and (id_t)-1 are not identities. */
static bool parse_id(const char *s, unsigned *ret)
{
	unsigned long long v = 0;
	size_t i = 0, digits = 0;

	if (!s)
		return false;
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	for (; s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v >= 0xffffffffULL)
			return false;
	}
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	if (digits == 0 || s[i] != '\0' || v == 0)
		return false;
	*ret = (unsigned)v;
	return true;
}

static void add_group(gid_t *list, size_t *n, gid_t g)
{
	for (size_t i = 0; i < *n; i++)
		if (list[i] == g)
			return;
	if (*n < APP_GROUPS_MAX)
		list[(*n)++] = g;
}

void app_identity_parse(const char *uid, const char *gid, const char *supplementary,
			AppIdentity *ret)
{
	AppIdentity id = {};
	unsigned u, g;

	*ret = id;
	if (!parse_id(uid, &u) || !parse_id(gid, &g))
		return;
	id.set = true;
	id.uid = u;
	id.gid = g;
	add_group(id.groups, &id.n_groups, g);
	for (const char *p = supplementary; p && *p;) {
		const char *end = strchrnul(p, ',');
		char entry[32];
		unsigned s;

		if ((size_t)(end - p) < sizeof(entry)) {
			memcpy(entry, p, (size_t)(end - p));
			entry[end - p] = '\0';
			if (parse_id(entry, &s) && id.n_groups < APP_GROUPS_MAX) {
				add_group(id.supplementary, &id.n_supplementary, s);
				add_group(id.groups, &id.n_groups, s);
			}
		}
		p = *end ? end + 1 : end;
	}
	*ret = id;
}

bool enforcement_required(const char *value)
{
	return value && (streq(value, "1") || streq(value, "true"));
}
