/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what berth-vmm's egress dialer reads from the guest on port 1026: the request line,
 * cut at the first newline within EGRESS_REQUEST_MAX as the dialer cuts it, the host forms
 * it accepts, the allowlist match and the address checks of a literal. The lines after the
 * first are --egress-allow patterns (they come from an app's berth.yml), so the pattern
 * parser and the glob are fuzzed too. Never a crash or a leak, and the invariants below
 * hold (abort() if not).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress-policy.h"
#include "macros.h"

#define FUZZ_PATTERNS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void add_patterns(EgressAllowlist *allow, const char *p, const char *end)
{
	for (int k = 0; p < end && k < FUZZ_PATTERNS_MAX; k++) {
		const char *e = memchr(p, '\n', (size_t)(end - p)) ?: end;
		char *scope = strndup(p, (size_t)(e - p)), err[512] = "";
		size_t before = allow->n;
		int r;

		check(scope != NULL);
		r = egress_allowlist_add(allow, scope, err, sizeof(err));
		check(r == 0 || r == -EINVAL);
		check(r == 0 || (err[0] && allow->n == before));
		free(scope);
		p = e + 1;
	}
	for (size_t i = 0; i < allow->n; i++) {
		const EgressPattern *pat = &allow->patterns[i];
		EgressPattern again;
		char err[512];

		check(pat->host && pat->host[0] && pat->text && pat->text[0]);
		check(pat->any_port + pat->default_ports + (pat->port != 0) == 1);
		for (const char *c = pat->host; *c; c++)
			check(*c < 'A' || *c > 'Z');
		/* What vm.json records reads back as the same pattern. */
		check(egress_pattern_parse(pat->text, &again, err, sizeof(err)) == 0);
		check(streq(again.text, pat->text) && streq(again.host, pat->host));
		check(again.port == pat->port && again.any_port == pat->any_port);
		egress_pattern_done(&again);
	}
}

static void check_ports(const EgressAllowlist *allow)
{
	uint16_t ports[2 * EGRESS_PATTERNS_MAX];
	bool any;
	int n = egress_allowlist_ports(allow, ports, ELEMENTSOF(ports), &any);

	check(n >= 0);
	for (int i = 1; i < n; i++)
		check(ports[i - 1] < ports[i]);
}

static void check_target(const EgressAllowlist *allow, const EgressTarget *t)
{
	size_t n = strlen(t->host);
	const EgressPattern *p;
	char why[EGRESS_REASON_MAX], err[512];
	EgressTarget again;

	check(t->port >= 1);
	check(n >= 1 && n <= EGRESS_HOST_MAX);
	if (t->family == AF_UNSPEC) {
		struct in_addr hidden;

		check(egress_host_name_valid(t->host));
		for (const char *c = t->host; *c; c++)
			check(*c < 'A' || *c > 'Z');
		/* No spelling of a name can be read as an address by the resolver. */
		check(inet_aton(t->host, &hidden) == 0);
	} else {
		uint8_t raw[16];

		check(t->family == AF_INET || t->family == AF_INET6);
		check(inet_pton(t->family, t->host, raw) == 1);
		check(memcmp(raw, &t->addr, t->family == AF_INET ? 4 : 16) == 0);
		(void)egress_address_check(t->family, &t->addr, NULL, NULL, why, sizeof(why));
	}
	/* The normalised host is a fixed point. */
	check(egress_target_parse_host(t->host, &again, err, sizeof(err)) == 0);
	check(streq(again.host, t->host) && again.family == t->family);
	p = egress_allowlist_match(allow, t->host, t->port);
	if (p)
		check(p->any_port || (p->default_ports && (t->port == 80 || t->port == 443)) ||
		      p->port == t->port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nl = memchr(in, '\n', MIN(size, (size_t)EGRESS_REQUEST_MAX));
	EgressAllowlist allow = {};
	EgressTarget t;
	char err[512] = "";
	int r;

	if (nl)
		add_patterns(&allow, nl + 1, in + size);
	check_ports(&allow);
	/* Without a newline in the first EGRESS_REQUEST_MAX bytes the dialer refuses the
	 * stream; the line is whatever comes before the newline, NULs included. */
	if (nl) {
		r = egress_request_parse(in, (size_t)(nl - in), &t, err, sizeof(err));
		check(r == 0 || (r == -EINVAL && err[0]));
		if (r == 0)
			check_target(&allow, &t);
	}
	egress_allowlist_done(&allow);
	return 0;
}
