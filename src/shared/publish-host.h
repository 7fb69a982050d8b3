/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

#include "evloop.h"
#include "time-util.h"

/*
 * A published guest port served on the host (docs/vm.md, "Published ports"): berth-vmm makes
 * it publish-<port>.sock in the run dir, and the command that started the VM (berth dev)
 * serves that socket as TCP on 127.0.0.1 at a port the kernel picks free. Every TCP
 * connection becomes a new connection to the socket, spliced byte for byte once its first
 * request head has passed publish_host_origin_check(); the guest's server checks the
 * login. The run dir may come and go (a reload reboots the VM): a
 * connection that finds no socket is closed, and the TCP port stays the same.
 *
 * BERTH_PUBLISH_HOST serves another address instead (an IPv4 or IPv6 address, as the
 * person asked for); one that is not loopback comes with a warning for the command to print.
 */

#define PUBLISH_HOST_DEFAULT "127.0.0.1"
#define PUBLISH_HOST_CONNS_MAX 64 /* connections at once; more are closed as they come */
/* A connection's first request head, read before anything reaches the guest. */
#define PUBLISH_HOST_HEAD_MAX (8 * 1024)
#define PUBLISH_HOST_HEAD_TIMEOUT_USEC (10 * USEC_PER_SEC)

typedef struct PublishHost PublishHost;

/*
 * publish_host_new() - listen, and serve @run_dir/publish-@port.sock on @loop (which must
 * outlive it). @host is the address (NULL: BERTH_PUBLISH_HOST, else
 * PUBLISH_HOST_DEFAULT). *@ret_warning is a malloc()ed line to print when the address is
 * not loopback, else NULL. Returns 0, or -EINVAL (not an address), -errno (cannot listen)
 * with @err saying why.
 */
int publish_host_new(EvLoop *loop, const char *run_dir, uint16_t port, const char *host,
		     PublishHost **ret, char **ret_warning, char *err, size_t errlen);
/* Close the listener and every connection. NULL-safe; returns NULL. */
PublishHost *publish_host_free(PublishHost *p);

/*
 * publish_host_origin_check() - may the request whose head starts @buf (@len bytes) pass?
 * A web page the person has open elsewhere must not reach the guest's server through
 * the person's browser (a websocket to noVNC, say, guessing the VNC password): a request
 * with an Origin header passes only when it names @url (where the port is served) or a
 * loopback name for @port. A request without one (a typed URL, a same-origin script)
 * passes. Returns 1 (pass), 0 (refuse), -EAGAIN (the head is not complete yet), or
 * -E2BIG (no head within PUBLISH_HOST_HEAD_MAX bytes).
 */
int publish_host_origin_check(const char *buf, size_t len, const char *url, uint16_t port);

/* Where a browser reaches it: "http://127.0.0.1:41234", "http://[::1]:41234". */
const char *publish_host_url(const PublishHost *p);
/* The TCP port the kernel picked. */
uint16_t publish_host_port(const PublishHost *p);
/* Connections open now. */
unsigned publish_host_connections(const PublishHost *p);
