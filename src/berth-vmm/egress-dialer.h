/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The host egress dialer (docs/egress.md, "The host dialer"): every stream the guest opens
 * to MUX_PORT_EGRESS (1026) is one tunnel. The guest sends one request line, the dialer
 * checks it against the --egress-allow patterns, resolves the name itself, refuses if any
 * address is internal or one of the host's own (getifaddrs(), at each dial), connects,
 * answers, and then copies bytes both ways.
 *
 * Names are resolved by getaddrinfo() on a worker thread per dial (the event loop never
 * blocks); the loop gives up after 5 s and the thread's late answer is dropped. Threads
 * are started only once berth-vmm is confined, and inherit its Landlock domain and
 * seccomp filter.
 */

#include <jansson.h>
#include <stdbool.h>

#include "egress-policy.h"
#include "evloop.h"
#include "mux-io.h"

#define EGRESS_MAX_CONNS_DEFAULT 64
#define EGRESS_MAX_CONNS_MAX 4096
#define EGRESS_TEST_CIDR_ENV "BERTH_VMM_EGRESS_TEST_ALLOW_CIDR"

typedef struct EgressConfig {
	EgressAllowlist allow; /* empty: every request is denied */
	unsigned max_conns;    /* tunnels at once (and name resolutions in flight) */
	/* Test-only (EGRESS_TEST_CIDR_ENV): addresses in this block are accepted although
	 * internal. family 0: unset. */
	EgressCidr test_cidr;
	char *test_cidr_text;
} EgressConfig;

typedef struct EgressDialer EgressDialer;

/*
 * egress_config_test_cidr_from_env() - read EGRESS_TEST_CIDR_ENV into @cfg. Unset or
 * empty: nothing. A value that is not a CIDR, or a block wider than /16 (IPv4) or /48
 * (IPv6), is refused (logged, -EINVAL): the setting is for test networks, never a way to
 * turn the address check off. When set, it warns loudly.
 */
int egress_config_test_cidr_from_env(EgressConfig *cfg);
void egress_config_done(EgressConfig *cfg);

/* vm.json's endpoints.egress: {"port":1026,"allow":[...],"maxConns":N,"testAllowCidr"?:...},
 * or JSON null when there is no allowlist and no test setting. */
json_t *egress_config_to_json(const EgressConfig *cfg);

/* Resolve "localhost" once, so that glibc reads its configuration and loads the NSS
 * modules it names before the host sandbox takes away the right to. */
void egress_resolver_warm_up(void);

/*
 * egress_dialer_new() - answer the guest's opens of MUX_PORT_EGRESS on @io.
 * @cfg must outlive the dialer. vmm.log gets one JSON line (log_info) per decision and
 * per closed tunnel.
 */
int egress_dialer_new(EvLoop *loop, MuxIo *io, const EgressConfig *cfg, EgressDialer **ret);
/* Close every tunnel and pending dial. Accepts NULL; returns NULL. */
EgressDialer *egress_dialer_free(EgressDialer *d);
