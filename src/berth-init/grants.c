/* SPDX-License-Identifier: Apache-2.0 */
/* Calls between apps: peers directories, app:invoke grants, the governor (grants.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "grants.h"
#include "journal.h"
#include "macros.h"

#define INVOKE_PREFIX "app:invoke:"

/* @caller may call @target: a directory the target owns and only the caller's gid enters. */
static int grant(const GrantApp *target, const GrantApp *caller, const char *why)
{
	char path[160];
	int r;

	snprintf(path, sizeof(path), "/run/berth/%s/peers/%s", target->name, caller->name);
	r = daemon_make_dir(path, 02710, target->uid, caller->uid);
	if (r < 0) {
		journal_logf("cannot let \"%s\" call \"%s\" (%s): %s", caller->name, target->name,
			     path, strerror(-r));
		return r;
	}
	journal_event("invoke_granted", json_pack("{s:s, s:s, s:s}", "caller", caller->name,
						  "target", target->name, "by", why));
	return 0;
}

static const GrantApp *find(const GrantApp *apps, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (streq(apps[i].name, name))
			return &apps[i];
	return NULL;
}

int grants_setup(const GrantApp *apps, size_t n, int *ret_governor)
{
	int governor = -1, r;

	for (size_t i = 0; i < n; i++) {
		char path[128];

		snprintf(path, sizeof(path), "/run/berth/%s/peers", apps[i].name);
		r = daemon_make_dir(path, 0711, apps[i].uid, apps[i].uid);
		if (r < 0)
			return r;
		if (apps[i].governs && governor < 0)
			governor = (int)i;
	}
	for (size_t i = 0; i < n; i++) {
		const CapabilityPolicy *p = apps[i].policy;

		for (size_t k = 0; p && k < p->declared.n; k++) {
			const char *cap = p->declared.v[k], *target_name;
			const GrantApp *target;
			char line[256];

			if (!strneq(cap, INVOKE_PREFIX, strlen(INVOKE_PREFIX)))
				continue;
			target_name = cap + strlen(INVOKE_PREFIX);
			target = find(apps, n, target_name);
			if (target && target != &apps[i]) {
				r = grant(target, &apps[i], cap);
				if (r < 0)
					return r;
				continue;
			}
			if (target)
				snprintf(
					line, sizeof(line),
					"[berth-init] WARNING: \"%s\" declares %s, which names itself — ignoring",
					apps[i].name, cap);
			else
				snprintf(
					line, sizeof(line),
					"[berth-init] WARNING: \"%s\" declares %s, but no app named \"%s\" is in this VM — ignoring",
					apps[i].name, cap, target_name);
			journal_log(apps[i].name, "policy", line, strlen(line));
		}
	}
	for (size_t i = 0; governor >= 0 && i < n; i++)
		if ((int)i != governor) {
			r = grant(&apps[governor], &apps[i], "governs: true");
			if (r < 0)
				return r;
		}
	*ret_governor = governor;
	return 0;
}
