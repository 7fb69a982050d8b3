/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Published ports: the guest TCP ports that may reach the host (docs/vm.md, "Published
 * ports"), and which capability's app serves each. One table, read by the CLI (what to ask
 * for), berth-vmm (what to accept on --publish) and berth-init (whose listener a host
 * connection may reach). A port not in the table is never published: CDP (9222), an app's
 * own ports, anything else. libc only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* At most this many ports per VM (berth-vmm run --publish). */
#define PUBLISH_PORTS_MAX 8

typedef struct PublishPort {
	uint16_t port;
	const char *ns;	  /* the capability namespace whose app serves it: "terminal" */
	const char *what; /* for messages: "the terminal's web view" */
	/* Who must own the guest's listener: 0, the serving app's uid; otherwise the uid of
	 * the daemon berth-init runs for that app (noVNC's websockify, browser.h). */
	uint32_t listener_uid;
} PublishPort;

/* The row for @port, or NULL when @port may never be published. */
const PublishPort *publish_port_lookup(uint16_t port);

/* Every row, for messages that list them ("7681 (the terminal's web view)"). */
const PublishPort *publish_ports(size_t *ret_n);

/* Does @capability (a declared capability string) belong to namespace @ns? */
bool publish_capability_in(const char *capability, const char *ns);

/* Does @p declare a capability of namespace @ns (so its app serves @ns's port)? */
bool publish_policy_declares(const CapabilityPolicy *p, const char *ns);
