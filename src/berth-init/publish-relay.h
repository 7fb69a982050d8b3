/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mux-io.h"
#include "policy.h"
#include "publish.h"

/*
 * Published ports (docs/vm.md, "Published ports"; the table is src/capability/publish.h).
 * The boot plan's "publish" lists guest TCP ports; the host reaches the i-th on channel
 * port MUX_PORT_PUBLISH_BASE + i, a stream like any other. Each is served by the one app
 * whose policy declares the port's capability (the terminal's web view on 7681).
 *
 * Every stream the host opens there becomes a connection from berth-init to
 * 127.0.0.1:<port>, made only while every TCP listener on that port belongs to the serving
 * app's uid. An app that Landlock leaves free to bind any port (network:connect:*) could
 * otherwise take the port before the terminal's view starts, and receive the person's
 * browser, its login and the keys typed. No listener yet (the view starts with the
 * terminal's first call) refuses the stream, which the host sees as a closed connection.
 */

typedef struct PublishRelayApp {
	const char *name;
	uid_t uid;
	const CapabilityPolicy *policy; /* NULL: the app was refused */
} PublishRelayApp;

/*
 * publish_relay_setup() - route the ports of @ports (the plan's "publish", NULL: none) on @io.
 * @apps (@n_apps, borrowed for as long as the VM runs) are the VM's apps. A port whose
 * capability no running app declares, or more than one, is not routed, with a
 * publish_refused event; the VM goes on. Returns -EINVAL for a plan that is not a list of
 * at most PUBLISH_PORTS_MAX distinct ports of the table.
 */
int publish_relay_setup(MuxIo *io, const json_t *ports, const PublishRelayApp *apps, size_t n_apps);

/*
 * publish_relay_listeners_check() - the TCP listeners on @port in @text (@len bytes, as
 * /proc/net/tcp or /proc/net/tcp6 print them). Returns how many there are when all of them
 * are @uid's, -EPERM when one is another uid's (*@ret_other says whose), or -EBADMSG for a
 * line that does not read as the kernel writes them.
 */
int publish_relay_listeners_check(const char *text, size_t len, uint16_t port, uid_t uid,
				  uid_t *ret_other);
