/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "host-glob.h"
#include "macros.h"
#include "parse-util.h"
#include "policy.h"
#include "rules.h"

void egress_rules_done(EgressRules *r)
{
	for (size_t i = 0; i < r->n_patterns; i++)
		free(r->patterns[i].host);
	free(r->patterns);
	*r = (EgressRules){};
}

static char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

int egress_pattern_parse(const char *scope, size_t len, EgressPattern *ret)
{
	const char *colon = NULL;
	size_t host_len = len;
	int port = EGRESS_PORT_DEFAULT;
	char *host;

	for (size_t i = len; i > 0; i--)
		if (scope[i - 1] == ':') {
			colon = scope + i - 1;
			break;
		}
	if (colon) {
		const char *p = colon + 1;
		size_t n = len - (size_t)(p - scope);
		bool digits = n > 0;

		for (size_t i = 0; i < n; i++)
			digits &= p[i] >= '0' && p[i] <= '9';
		if (n == 1 && p[0] == '*') {
			port = EGRESS_PORT_ANY;
			host_len = (size_t)(colon - scope);
		} else if (digits) {
			uint16_t v;

			/* A port that cannot exist is kept as one that never matches. */
			port = parse_port(p, n, &v) < 0 ? 0x10000 : v;
			host_len = (size_t)(colon - scope);
		}
	}
	/* An IPv6 address is written in brackets ("[::1]:443"); requests are matched without. */
	if (host_len >= 2 && scope[0] == '[' && scope[host_len - 1] == ']') {
		scope++;
		host_len -= 2;
	}
	if (host_len == 0 || memchr(scope, '\0', host_len))
		return -EINVAL;
	host = strndup(scope, host_len);
	if (!host)
		return -ENOMEM;
	for (char *c = host; *c; c++)
		*c = ascii_lower(*c);
	*ret = (EgressPattern){.host = host, .port = port};
	return 0;
}

static bool has_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(s, prefix, n) == 0;
}

int egress_rules_from_policy(const CapabilityPolicy *policy, EgressRules *ret)
{
	_cleanup_(egress_rules_done) EgressRules r = {};
	const PolicyStrings *caps = &policy->declared;

	r.patterns = calloc(MAX(caps->n, 1), sizeof(EgressPattern));
	if (!r.patterns)
		return -ENOMEM;
	for (size_t i = 0; i < caps->n; i++) {
		static const char *const prefixes[] = {"network:host:", "browser:navigate:"};
		const char *s = caps->v[i];
		size_t len = strlen(s);

		if (has_prefix(s, len, "github:"))
			r.github = true;
		for (size_t k = 0; k < ELEMENTSOF(prefixes); k++) {
			size_t plen = strlen(prefixes[k]);
			int q;

			if (!has_prefix(s, len, prefixes[k]))
				continue;
			if (r.n_patterns >= EGRESS_PATTERNS_MAX)
				return -EINVAL;
			q = egress_pattern_parse(s + plen, len - plen, &r.patterns[r.n_patterns]);
			if (q == -ENOMEM)
				return q;
			/* An empty host part covers nothing. */
			if (q >= 0)
				r.n_patterns++;
		}
	}
	*ret = r;
	r = (EgressRules){};
	return 0;
}

int egress_rules_load(const char *path, EgressRules *ret, char **reterr)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	_cleanup_free_ char *text = NULL;
	size_t size;
	int r;

	*ret = (EgressRules){};
	*reterr = NULL;
	r = read_full_file(path, POLICY_FILE_SIZE_MAX, &text, &size);
	if (r < 0)
		return r;
	/* The one reader of the policy file (src/capability): what agent-init enforces is
	 * what the broker reads, and a file it refuses, the broker refuses too. */
	r = capability_policy_decode(text, size, &p, reterr);
	if (r < 0)
		return r;
	return egress_rules_from_policy(p, ret);
}

bool egress_rules_allow(const EgressRules *r, const char *host, unsigned port)
{
	for (size_t i = 0; i < r->n_patterns; i++) {
		const EgressPattern *p = &r->patterns[i];
		bool port_ok;

		if (p->port == EGRESS_PORT_ANY)
			port_ok = true;
		else if (p->port == EGRESS_PORT_DEFAULT)
			port_ok = port == 80 || port == 443;
		else
			port_ok = (unsigned)p->port == port;
		if (port_ok && host_glob_match(p->host, host))
			return true;
	}
	return false;
}

/* SPEC 6.1's blocked IPv4 ranges; @addr in host byte order. */
static bool egress_ipv4_blocked(uint32_t a)
{
	static const struct {
		uint32_t net;
		unsigned bits;
	} blocked[] = {
		{0x00000000, 8},  /* 0/8: "this network" */
		{0x0a000000, 8},  /* 10/8 */
		{0x7f000000, 8},  /* 127/8: loopback */
		{0xa9fe0000, 16}, /* 169.254/16: link-local, cloud metadata */
		{0xac100000, 12}, /* 172.16/12 */
		{0xc0a80000, 16}, /* 192.168/16 */
		{0x64400000, 10}, /* 100.64/10: carrier-grade NAT */
		{0xe0000000, 3},  /* 224/3 and up: multicast, reserved, broadcast */
	};

	for (size_t i = 0; i < ELEMENTSOF(blocked); i++) {
		uint32_t mask = blocked[i].bits ? ~UINT32_C(0) << (32 - blocked[i].bits) : 0;

		if ((a & mask) == blocked[i].net)
			return true;
	}
	return false;
}

EgressHostKind egress_host_normalize(char *host)
{
	size_t n = strlen(host);
	struct in_addr v4;
	char canonical[INET_ADDRSTRLEN];

	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		struct in6_addr v6;

		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
		for (char *c = host; *c; c++)
			*c = ascii_lower(*c);
		return inet_pton(AF_INET6, host, &v6) == 1 ? EGRESS_HOST_IPV6 : EGRESS_HOST_INVALID;
	}
	if (n == 0 || n > EGRESS_HOST_MAX)
		return EGRESS_HOST_INVALID;
	for (char *c = host; *c; c++) {
		*c = ascii_lower(*c);
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
		      *c == '-'))
			return EGRESS_HOST_INVALID;
	}
	if (inet_aton(host, &v4) == 0)
		return EGRESS_HOST_NAME;
	if (!inet_ntop(AF_INET, &v4, canonical, sizeof(canonical)) || !streq(canonical, host))
		return EGRESS_HOST_IPV4_BLOCKED;
	return egress_ipv4_blocked(ntohl(v4.s_addr)) ? EGRESS_HOST_IPV4_BLOCKED : EGRESS_HOST_IPV4;
}
