/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "fileio.h"
#include "identity.h"
#include "macros.h"

static _printf_(2, 3) int fail(char **reterr, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (reterr && vasprintf(reterr, fmt, ap) < 0)
		*reterr = NULL;
	va_end(ap);
	return -EINVAL;
}

void bus_identity_done(BusIdentity *id)
{
	free(id->v);
	id->v = NULL;
	id->n = 0;
}

static int parse_entry(json_t *e, size_t i, BusIdentityEntry *out, char **reterr)
{
	json_t *uid = json_object_get(e, "uid"), *name = json_object_get(e, "name");
	json_int_t u;

	if (!json_is_object(e) || json_object_size(e) != 2 || !uid || !name)
		return fail(reterr, "apps[%zu] must be an object with exactly \"uid\" and \"name\"",
			    i);
	u = json_is_integer(uid) ? json_integer_value(uid) : -1;
	if (u <= 0 || u >= (json_int_t)BUS_UID_UNKNOWN)
		return fail(reterr, "apps[%zu].uid must be an integer from 1 to %u", i,
			    (unsigned)BUS_UID_UNKNOWN - 1);
	if (!json_is_string(name) || !capability_app_name_valid(json_string_value(name)))
		return fail(reterr,
			    "apps[%zu].name must be an app name: 1-64 of a-z, 0-9 and \"-\"", i);
	out->uid = (uid_t)u;
	snprintf(out->name, sizeof(out->name), "%s", json_string_value(name));
	return 0;
}

int bus_identity_parse(const char *text, size_t len, BusIdentity *ret, char **reterr)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	_cleanup_free_ BusIdentityEntry *v = NULL;
	json_t *apps, *schema;
	json_error_t jerr;
	size_t n;
	int r;

	if (len > BUS_IDENTITY_FILE_MAX)
		return fail(reterr, "longer than %u bytes", BUS_IDENTITY_FILE_MAX);
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return fail(reterr, "not JSON: %s at line %d", jerr.text, jerr.line);
	schema = json_object_get(doc, "schema");
	apps = json_object_get(doc, "apps");
	if (!json_is_object(doc) || json_object_size(doc) != 2 || !schema || !apps)
		return fail(reterr, "must be an object with exactly \"schema\" and \"apps\"");
	if (!json_is_integer(schema) || json_integer_value(schema) != BUS_IDENTITY_SCHEMA)
		return fail(reterr, "schema must be %d", BUS_IDENTITY_SCHEMA);
	if (!json_is_array(apps))
		return fail(reterr, "apps must be an array");
	n = json_array_size(apps);
	if (n > BUS_IDENTITY_APPS_MAX)
		return fail(reterr, "more than %u apps", BUS_IDENTITY_APPS_MAX);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r = parse_entry(json_array_get(apps, i), i, &v[i], reterr);
		if (r < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (v[j].uid == v[i].uid || streq(v[j].name, v[i].name))
				return fail(reterr,
					    "apps[%zu] repeats the uid or name of apps[%zu]", i, j);
	}
	ret->v = TAKE_PTR(v);
	ret->n = n;
	return 0;
}

int bus_identity_load(const char *path, BusIdentity *ret, char **reterr)
{
	_cleanup_free_ char *text = NULL;
	size_t size;
	int r;

	r = read_full_file(path, BUS_IDENTITY_FILE_MAX, &text, &size);
	if (r < 0) {
		if (reterr && asprintf(reterr, "cannot read it: %s", strerror(-r)) < 0)
			*reterr = NULL;
		return r;
	}
	return bus_identity_parse(text, size, ret, reterr);
}

bool bus_identity_name(const BusIdentity *id, uid_t uid, bool have_creds, char ret[BUS_NAME_MAX])
{
	if (!have_creds)
		uid = BUS_UID_UNKNOWN;
	for (size_t i = 0; have_creds && id && i < id->n; i++)
		if (id->v[i].uid == uid) {
			snprintf(ret, BUS_NAME_MAX, "%s", id->v[i].name);
			return true;
		}
	if (have_creds && uid == 0)
		snprintf(ret, BUS_NAME_MAX, "root");
	else
		snprintf(ret, BUS_NAME_MAX, "uid-%u", (unsigned)uid);
	return false;
}
