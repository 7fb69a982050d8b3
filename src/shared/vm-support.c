/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "vm-support.h"

typedef struct Unsupported {
	const char *ns, *action; /* NULL action: any */
	const char *why;
} Unsupported;

/* What the VM has no broker or device for; every other capability is enforced or recorded. */
static const Unsupported unsupported[] = {
	{"network", "peer", "the VM has no mesh network (WireGuard) daemon"},
	{"network", "host", "the egress broker and host dialer are not in this VM runtime yet"},
	{"browser", NULL, "the VM has no browser layer"},
	{"terminal", NULL, "the VM has no terminal (ttyd) service"},
	{"github", NULL, "the VM has no GitHub API broker"},
};

int vm_support_check(const Manifest *m, char **reason)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	*reason = NULL;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) < 0)
			continue;
		if (streq(ns, "network") && !streq(action, "connect") && !streq(action, "host") &&
		    !streq(action, "peer")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml: the VM runtime supports network:connect:<port> and network:host:<host> only; remove it or change it to one of those (see docs/vm.md)",
				    caps[i], manifest_name(m)) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		for (size_t k = 0; k < ELEMENTSOF(unsupported); k++) {
			if (!streq(ns, unsupported[k].ns) ||
			    (unsupported[k].action && !streq(action, unsupported[k].action)))
				continue;
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: %s. Remove the capability to run the app here (see docs/vm.md)",
				    caps[i], manifest_name(m), unsupported[k].why) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
	}
	return 0;
}
