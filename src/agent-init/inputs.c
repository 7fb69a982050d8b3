/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"
#include "macros.h"

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
