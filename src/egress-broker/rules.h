/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the egress broker lets through (SPEC 6.1): host patterns from the egress app's
 * `network:host:` and `browser:navigate:` capabilities, the host reserved for the GitHub
 * broker, and the IPv4 literals it refuses as internal. libc, jansson and the capability
 * module only; no I/O except egress_rules_load().
 *
 * A pattern is a capability scope. It is split at its LAST ':' only when what follows is
 * all digits or "*": "example.com:8443" is (example.com, 8443), "*.example.com:*" is
 * (*.example.com, any port), and "example.com" alone covers ports 80 and 443. An IPv6
 * address is written in brackets ("[2001:db8::1]:443") and kept without them. The host
 * part is a glob in which only '*' is special (it matches any run of characters, dots
 * included); the match is anchored and lowercase.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* A DNS name is at most 253 characters; nothing longer is ever looked at. */
#define EGRESS_HOST_MAX 253
/* Patterns taken from one policy; more is a broken policy, refused whole. */
#define EGRESS_PATTERNS_MAX 1024
/* The host the GitHub API broker owns when the policy declares github:*. */
#define EGRESS_DEDICATED_HOST "api.github.com"

enum {
	EGRESS_PORT_DEFAULT = 0, /* ports 80 and 443 */
	EGRESS_PORT_ANY = -1,	 /* ":*" */
};

typedef struct EgressPattern {
	char *host; /* lowercased glob */
	int port;   /* 1-65535, EGRESS_PORT_DEFAULT or EGRESS_PORT_ANY; 0x10000+ never matches */
} EgressPattern;

typedef struct EgressRules {
	EgressPattern *patterns;
	size_t n_patterns;
	bool github; /* a github:* capability is declared: EGRESS_DEDICATED_HOST is refused */
} EgressRules;

void egress_rules_done(EgressRules *r);

/*
 * egress_pattern_parse() - split one scope (@len bytes) into a pattern.
 * Returns 0, -EINVAL for an empty host part, or -ENOMEM. *@ret is filled only on success.
 */
int egress_pattern_parse(const char *scope, size_t len, EgressPattern *ret);

/*
 * egress_rules_from_policy() - the rules of a compiled capability policy (SPEC 4.2):
 * every "network:host:<scope>" and "browser:navigate:<scope>" in declaredCapabilities,
 * and whether any "github:" capability is there. Returns 0, -EINVAL for too many
 * patterns, or -ENOMEM.
 */
int egress_rules_from_policy(const CapabilityPolicy *policy, EgressRules *ret);

/* Read the policy file at @path with the one policy reader (capability_policy_decode(),
 * which refuses a whole file it does not accept; *@reterr says why, malloc()ed). Returns 0
 * or -errno; on failure *@ret is empty (deny everything). */
int egress_rules_load(const char *path, EgressRules *ret, char **reterr);

/* Is @host (lowercase) on @port covered by a pattern? */
bool egress_rules_allow(const EgressRules *r, const char *host, unsigned port);

typedef enum EgressHostKind {
	EGRESS_HOST_NAME,	  /* a DNS name: the host dialer resolves it */
	EGRESS_HOST_IPV4,	  /* a canonical dotted quad outside the blocked ranges */
	EGRESS_HOST_IPV4_BLOCKED, /* an IPv4 address that is internal, or written oddly */
	EGRESS_HOST_IPV6,	  /* any IPv6 literal (the broker refuses them all) */
	EGRESS_HOST_INVALID,	  /* not a host name at all */
	_EGRESS_HOST_KIND_MAX,
} EgressHostKind;

/*
 * egress_host_normalize() - lowercase @host in place and classify it. @host is what the
 * request named, without a port: "example.com", "10.0.0.1", or "[::1]" (brackets are
 * removed in place for an IPv6 literal). A name is 1-253 characters of [a-z0-9.-]. Any
 * string inet_aton() would take as an IPv4 address ("10.1", "0x7f.1", "012.0.0.1") counts
 * as one; unless it is the canonical dotted quad it is EGRESS_HOST_IPV4_BLOCKED, since a
 * resolver would read it differently from a person.
 */
EgressHostKind egress_host_normalize(char *host);
