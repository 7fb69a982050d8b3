/* SPDX-License-Identifier: Apache-2.0 */
/* Published ports (publish.h). */
#include <string.h>

#include "macros.h"
#include "publish.h"

static const PublishPort publishable[] = {
	{CAPABILITY_TERMINAL_BIND_PORT, "terminal", "the terminal's web view", 0},
	/* noVNC, which berth-init's websockify (uid 9012) serves for the browser app. */
	{6080, "browser", "noVNC", 9012},
};

const PublishPort *publish_port_lookup(uint16_t port)
{
	for (size_t i = 0; i < ELEMENTSOF(publishable); i++)
		if (publishable[i].port == port)
			return &publishable[i];
	return NULL;
}

const PublishPort *publish_ports(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(publishable);
	return publishable;
}

bool publish_capability_in(const char *capability, const char *ns)
{
	size_t n = strlen(ns);

	return capability && strneq(capability, ns, n) && capability[n] == ':';
}

bool publish_policy_declares(const CapabilityPolicy *p, const char *ns)
{
	for (size_t i = 0; p && i < p->declared.n; i++)
		if (publish_capability_in(p->declared.v[i], ns))
			return true;
	return false;
}
