/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "apps.h"
#include "fileio.h"
#include "macros.h"

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '_'))
			return false;
	return true;
}

int sfs_apps_parse(const char *buf, size_t len, SfsApps *ret, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_error_t jerr;
	json_t *apps, *a;
	size_t i;

	*ret = (SfsApps){};
	if (len > SFS_APPS_FILE_MAX) {
		snprintf(err, errlen, "%zu bytes, over the cap of %d", len, SFS_APPS_FILE_MAX);
		return -EINVAL;
	}
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc) {
		snprintf(err, errlen, "invalid JSON: %s", jerr.text);
		return -EINVAL;
	}
	apps = json_object_get(doc, "apps");
	if (json_integer_value(json_object_get(doc, "schema")) != 1 || !json_is_array(apps)) {
		snprintf(err, errlen, "expected {\"schema\": 1, \"apps\": [...]}");
		return -EINVAL;
	}
	if (json_array_size(apps) > SFS_APPS_MAX) {
		snprintf(err, errlen, "more than %d apps", SFS_APPS_MAX);
		return -EINVAL;
	}
	json_array_foreach(apps, i, a) {
		json_t *uid = json_object_get(a, "uid"), *read = json_object_get(a, "read");
		const char *name = json_string_value(json_object_get(a, "name"));
		SfsApp *e = &ret->v[ret->n];

		if (!json_is_integer(uid) || json_integer_value(uid) <= 0 ||
		    json_integer_value(uid) >= 0xffffffffLL || !name || !name_ok(name) ||
		    (read && !json_is_boolean(read))) {
			snprintf(
				err, errlen,
				"apps[%zu] must be {\"uid\": <1..>, \"name\": \"[a-z0-9-]\", \"read\"?: bool}",
				i);
			return -EINVAL;
		}
		e->uid = (uid_t)json_integer_value(uid);
		if (sfs_apps_find(ret, e->uid)) {
			snprintf(err, errlen, "apps[%zu]: uid %u given twice", i, (unsigned)e->uid);
			return -EINVAL;
		}
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->read = !read || json_is_true(read);
		ret->n++;
	}
	return 0;
}

int sfs_apps_load(const char *path, SfsApps *ret, char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	size_t size;
	int r;

	*ret = (SfsApps){};
	r = read_full_file(path, SFS_APPS_FILE_MAX, &text, &size);
	if (r < 0) {
		snprintf(err, errlen, "%s", strerror(-r));
		return r;
	}
	return sfs_apps_parse(text, size, ret, err, errlen);
}

const SfsApp *sfs_apps_find(const SfsApps *apps, uid_t uid)
{
	for (size_t i = 0; apps && i < apps->n; i++)
		if (apps->v[i].uid == uid)
			return &apps->v[i];
	return NULL;
}

void sfs_apps_identity(const SfsApps *apps, uid_t uid, char out[static SFS_IDENTITY_MAX])
{
	const SfsApp *a = sfs_apps_find(apps, uid);

	if (uid == 0)
		snprintf(out, SFS_IDENTITY_MAX, "root");
	else if (a)
		snprintf(out, SFS_IDENTITY_MAX, "%s", a->name);
	else
		snprintf(out, SFS_IDENTITY_MAX, "uid-%u", (unsigned)uid);
}
