/* SPDX-License-Identifier: Apache-2.0 */
/* The session's audit records (SPEC §3.5, docs/audit.md). */
#include <string.h>

#include "log.h"
#include "mcp.h"

json_t *mcp_audit_meta(Mcp *c)
{
	/* Before an own VM is adopted, its name is the one it is booting under. */
	return json_pack("{s:s, s:s, s:s, s:s}", "runId", c->run_id, "bridge", c->bridge, "via",
			 "vm", "container", c->vm_name ?: c->l.vm_name ?: "");
}

void mcp_audit(Mcp *c, json_t *event)
{
	int r;

	if (!c->audit || !event)
		return;
	r = audit_append(c->audit, event);
	if (r < 0)
		log_warning("could not append to the audit trail %s: %s; the call itself went on",
			    audit_sink_path(c->audit), strerror(-r));
}
