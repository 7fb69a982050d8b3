/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The egress dialer's decisions, with no I/O (docs/egress.md, "The host dialer"): the
 * --egress-allow patterns, the request line a guest sends on port 1026, and which
 * addresses are internal or the host's own. egress-dialer.c does the resolving, lists the
 * host's addresses, and connects.
 *
 * Patterns are network:host: scopes (SPEC 6.1): "hostglob", "hostglob:port" or
 * "hostglob:*". The scope is split at its LAST ':' only when what follows is digits or
 * '*'; without a port the pattern covers 80 and 443. The glob knows only '*' (any run of
 * characters, dots included); '?' is literal; it must match the whole host. Names are
 * lowercased. An IPv6 literal is written in brackets, "[2001:db8::1]:443", and kept in
 * its canonical form.
 */

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_PATTERNS_MAX 256
#define EGRESS_HOST_MAX 253
/* The request line, its newline included. */
#define EGRESS_REQUEST_MAX 1024
#define EGRESS_REASON_MAX 128

typedef struct EgressPattern {
	char *host;	    /* the glob, lowercased (an IPv6 literal without brackets) */
	uint16_t port;	    /* 0 with any_port or default_ports */
	bool any_port;	    /* ":*" */
	bool default_ports; /* no port given: 80 and 443 */
	char *text;	    /* normalised, as vm.json records it: "example.com", "*.x.org:*" */
} EgressPattern;

typedef struct EgressAllowlist {
	EgressPattern *patterns;
	size_t n;
} EgressAllowlist;

/* One address block, for the test-only setting BERTH_VMM_EGRESS_TEST_ALLOW_CIDR. */
typedef struct EgressCidr {
	int family; /* AF_INET or AF_INET6; 0 when unset */
	uint8_t addr[16];
	unsigned prefix;
} EgressCidr;

/* What a guest asked for. */
typedef struct EgressTarget {
	/* The lowercased name, or the canonical text of an IP literal (IPv6 without
	 * brackets): what the patterns match against and what the log shows. */
	char host[EGRESS_HOST_MAX + 1];
	uint16_t port;
	int family; /* AF_INET or AF_INET6 for an IP literal, AF_UNSPEC for a name */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} addr;
} EgressTarget;

/*
 * egress_pattern_parse() - parse one --egress-allow value into *@ret.
 * Returns 0, -ENOMEM, or -EINVAL with the reason in @err (a sentence naming the value).
 */
int egress_pattern_parse(const char *scope, EgressPattern *ret, char *err, size_t errsize);
void egress_pattern_done(EgressPattern *p);

/* Add a pattern to @a; -EINVAL (in @err) for a bad one or past EGRESS_PATTERNS_MAX. A
 * pattern equal to one already there is not added twice. */
int egress_allowlist_add(EgressAllowlist *a, const char *scope, char *err, size_t errsize);
void egress_allowlist_done(EgressAllowlist *a);

/* The first pattern that covers @host (lowercased) and @port, or NULL. */
const EgressPattern *egress_allowlist_match(const EgressAllowlist *a, const char *host,
					    uint16_t port);

/*
 * egress_allowlist_ports() - the TCP ports the allowlist can reach, sorted, each once, for
 * the host sandbox's Landlock rules. Returns how many were written to @ret (at most
 * @max), or -ERANGE when @max is too small; *@ret_any is true when some pattern has ":*".
 */
int egress_allowlist_ports(const EgressAllowlist *a, uint16_t *ret, size_t max, bool *ret_any);

/* A host a guest may name: 1..253 of [A-Za-z0-9.-], or an IP literal (below). */
bool egress_host_name_valid(const char *host);

/*
 * egress_target_parse_host() - check and normalise @host into @ret (host, family, addr).
 * Names are lowercased. IP literals: IPv4 as a dotted quad (no other numeric form: "10.1",
 * "0x7f.1" or "2130706433" would be read as addresses by the resolver, so they are refused);
 * IPv6 bare or in brackets, no zone ("%eth0").
 * Returns 0 or -EINVAL with the reason in @err.
 */
int egress_target_parse_host(const char *host, EgressTarget *ret, char *err, size_t errsize);

/*
 * egress_request_parse() - parse one request line (without its newline):
 * {"op":"dial","host":"example.com","port":443}. Other members are ignored.
 * Returns 0 and *@ret, or -EINVAL with the reason in @err.
 */
int egress_request_parse(const char *line, size_t len, EgressTarget *ret, char *err,
			 size_t errsize);

/*
 * egress_address_internal() - whether the dialer refuses to connect to @addr (family
 * AF_INET: a struct in_addr, AF_INET6: a struct in6_addr), and why: @reason gets e.g.
 * "private (10.0.0.0/8)" or "IPv4-mapped: loopback (127.0.0.0/8)". See docs/egress.md
 * for the list. Unknown families are internal.
 */
bool egress_address_internal(int family, const void *addr, char *reason, size_t size);

struct ifaddrs;

/*
 * egress_address_own() - whether @addr is one of the host's own addresses: an address of an
 * interface in @own (a getifaddrs() list; NULL holds none), or the IPv4-mapped,
 * IPv4-translated, NAT64 or 6to4 form of one. @reason gets e.g. "this host's own address
 * (on eth0)". A service listening on 0.0.0.0 or [::] on the host answers there, and is not
 * the guest's to reach.
 */
bool egress_address_own(const struct ifaddrs *own, int family, const void *addr, char *reason,
			size_t size);

typedef enum EgressAddressClass {
	EGRESS_ADDRESS_OK,
	EGRESS_ADDRESS_INTERNAL, /* egress_address_internal(), and not in the test block */
	EGRESS_ADDRESS_OWN,	 /* egress_address_own(), whatever the test block */
	_EGRESS_ADDRESS_CLASS_MAX,
} EgressAddressClass;

/*
 * egress_address_check() - the dialer's whole check of one address it would connect to.
 * Internal addresses are refused unless @test_cidr (may be NULL) holds them; the host's own
 * addresses (@own, as for egress_address_own()) always are. @reason says why.
 */
EgressAddressClass egress_address_check(int family, const void *addr, const EgressCidr *test_cidr,
					const struct ifaddrs *own, char *reason, size_t size);

/* Parse "a.b.c.d/n" or "v6/n". Returns 0 or -EINVAL. */
int egress_cidr_parse(const char *s, EgressCidr *ret);
bool egress_cidr_contains(const EgressCidr *c, int family, const void *addr);
