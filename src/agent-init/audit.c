/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include "audit.h"
#include "macros.h"

/* Takes @obj; jansson keeps insertion order, so the keys come out as packed. */
static char *line_from(json_t *obj)
{
	char *text, *line = NULL;

	if (!obj)
		return NULL;
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (text && asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	return line;
}

char *audit_policy_applied(const char *boot_id, const CapabilityPolicy *p, RulesetStatus status,
			   int64_t timestamp)
{
	_cleanup_(json_decrefp) json_t *doc = capability_policy_to_json(p);

	if (!doc)
		return NULL;
	return line_from(json_pack(
		"{s:s, s:s, s:s, s:s, s:O, s:O, s:O, s:b, s:O, s:O, s:s, s:I}", "source",
		"agent-init", "event", "capability_policy_applied", "bootId", boot_id, "app",
		p->app_name, "writePaths", json_object_get(doc, "writePaths"), "readPaths",
		json_object_get(doc, "readPaths"), "networkPorts",
		json_object_get(doc, "networkPorts"), "networkUnrestricted",
		(int)p->network_unrestricted, "bindPorts", json_object_get(doc, "bindPorts"),
		"meshPeers", json_object_get(doc, "meshPeers"), "ruleset",
		ruleset_status_to_string(status), "timestamp", (json_int_t)timestamp));
}

char *audit_capabilities_dropped(const char *boot_id, const char *app, bool dropped,
				 int64_t timestamp)
{
	return line_from(json_pack("{s:s, s:s, s:s, s:s, s:b, s:I}", "source", "agent-init",
				   "event", "capabilities_dropped", "bootId", boot_id, "app", app,
				   "dropped", (int)dropped, "timestamp", (json_int_t)timestamp));
}

char *audit_seccomp(const char *event, const char *boot_id, const char *app, bool applied,
		    const char *detail, int64_t timestamp)
{
	return line_from(json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:I}", "source", "agent-init",
				   "event", event, "bootId", boot_id, "app", app, "applied",
				   (int)applied, "detail", detail, "timestamp",
				   (json_int_t)timestamp));
}

char *audit_app_uid(const char *boot_id, const char *app, uid_t uid, gid_t gid, bool dropped,
		    const char *detail, int64_t timestamp)
{
	return line_from(json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:s, s:I}", "source",
				   "agent-init", "event", "app_uid_applied", "bootId", boot_id,
				   "app", app, "uid", (json_int_t)uid, "gid", (json_int_t)gid,
				   "dropped", (int)dropped, "detail", detail, "timestamp",
				   (json_int_t)timestamp));
}

char *audit_enforcement_refused(const char *app, const char *reason, int64_t timestamp)
{
	return line_from(json_pack("{s:s, s:s, s:s, s:s, s:I}", "source", "agent-init", "event",
				   "capability_enforcement_refused", "app", app, "reason", reason,
				   "timestamp", (json_int_t)timestamp));
}
