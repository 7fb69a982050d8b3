/* SPDX-License-Identifier: Apache-2.0 */
/* The egress dialer's patterns, request lines and address classes (egress-policy.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress-policy.h"
#include "host-glob.h"
#include "macros.h"
#include "parse-util.h"

typedef struct Block {
	uint8_t addr[16];
	unsigned prefix;
	const char *cidr;
	const char *what;
} Block;

/* IPv4 blocks the dialer never connects to (broadcast before the reserved block that
 * holds it, for the better reason). */
static const Block v4_internal[] = {
	{{0, 0, 0, 0}, 8, "0.0.0.0/8", "\"this network\""},
	{{10, 0, 0, 0}, 8, "10.0.0.0/8", "private"},
	{{100, 64, 0, 0}, 10, "100.64.0.0/10", "carrier-grade NAT"},
	{{127, 0, 0, 0}, 8, "127.0.0.0/8", "loopback"},
	{{169, 254, 0, 0}, 16, "169.254.0.0/16", "link-local (cloud metadata services live here)"},
	{{172, 16, 0, 0}, 12, "172.16.0.0/12", "private"},
	{{192, 0, 0, 0}, 24, "192.0.0.0/24", "IETF protocol assignments"},
	{{192, 0, 2, 0}, 24, "192.0.2.0/24", "documentation"},
	{{192, 88, 99, 0}, 24, "192.88.99.0/24", "6to4 relay anycast (deprecated)"},
	{{192, 168, 0, 0}, 16, "192.168.0.0/16", "private"},
	{{198, 18, 0, 0}, 15, "198.18.0.0/15", "benchmarking"},
	{{198, 51, 100, 0}, 24, "198.51.100.0/24", "documentation"},
	{{203, 0, 113, 0}, 24, "203.0.113.0/24", "documentation"},
	{{224, 0, 0, 0}, 4, "224.0.0.0/4", "multicast"},
	{{255, 255, 255, 255}, 32, "255.255.255.255/32", "broadcast"},
	{{240, 0, 0, 0}, 4, "240.0.0.0/4", "reserved"},
};

/* IPv6 blocks refused outright. Whatever is outside 2000::/3 and not an embedded IPv4
 * form handled in egress_address_internal() is refused too. */
static const Block v6_internal[] = {
	{{0}, 128, "::/128", "unspecified"},
	{{[15] = 1}, 128, "::1/128", "loopback"},
	{{0}, 96, "::/96", "IPv4-compatible (deprecated)"},
	{{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "64:ff9b:1::/48", "local-use NAT64"},
	{{0x01, 0x00}, 64, "100::/64", "discard-only"},
	{{0x20, 0x01, 0x00, 0x00}, 32, "2001::/32", "Teredo"},
	{{0x20, 0x01, 0x0d, 0xb8}, 32, "2001:db8::/32", "documentation"},
	{{0x20, 0x01, 0x00, 0x00}, 23, "2001::/23", "IETF protocol assignments"},
	{{0x3f, 0xff}, 20, "3fff::/20", "documentation"},
	{{0xfc}, 7, "fc00::/7", "unique local"},
	{{0xfe, 0x80}, 10, "fe80::/10", "link-local"},
	{{0xfe, 0xc0}, 10, "fec0::/10", "site-local (deprecated)"},
	{{0xff}, 8, "ff00::/8", "multicast"},
};

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	unsigned bytes = prefix / 8, bits = prefix % 8;

	if (memcmp(a, net, bytes) != 0)
		return false;
	if (bits == 0)
		return true;
	return ((a[bytes] ^ net[bytes]) & (uint8_t)(0xff << (8 - bits))) == 0;
}

static bool v4_internal_reason(const uint8_t *a, char *reason, size_t size, const char *via)
{
	for (size_t i = 0; i < ELEMENTSOF(v4_internal); i++)
		if (prefix_match(a, v4_internal[i].addr, v4_internal[i].prefix)) {
			snprintf(reason, size, "%s%s (%s)", via, v4_internal[i].what,
				 v4_internal[i].cidr);
			return true;
		}
	return false;
}

/* IPv6 forms that carry an IPv4 address, and are judged by it. */
typedef enum EmbeddedKind {
	EMBEDDED_MAPPED,
	EMBEDDED_TRANSLATED,
	EMBEDDED_NAT64,
	EMBEDDED_6TO4,
	_EMBEDDED_KIND_MAX,
} EmbeddedKind;

static const struct {
	const char *via;  /* in an internal reason: "IPv4-mapped private (10.0.0.0/8)" */
	const char *name; /* in a reason of the host's own: "IPv4-mapped form of ..." */
} embedded_kinds[_EMBEDDED_KIND_MAX] = {
	[EMBEDDED_MAPPED] = {"IPv4-mapped ", "IPv4-mapped"},
	[EMBEDDED_TRANSLATED] = {"IPv4-translated ", "IPv4-translated"},
	[EMBEDDED_NAT64] = {"NAT64 of ", "NAT64"},
	[EMBEDDED_6TO4] = {"6to4 of ", "6to4"},
};

/* The IPv4 address inside the IPv6 address @a, or NULL; *@ret_kind says which form. */
static const uint8_t *embedded_v4(const uint8_t *a, EmbeddedKind *ret_kind)
{
	static const struct {
		uint8_t prefix[12];
		EmbeddedKind kind;
	} forms[] = {
		{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, EMBEDDED_MAPPED},
		{{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, EMBEDDED_TRANSLATED},
		{{0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, EMBEDDED_NAT64},
	};

	for (size_t i = 0; i < ELEMENTSOF(forms); i++)
		if (memcmp(a, forms[i].prefix, sizeof(forms[i].prefix)) == 0) {
			*ret_kind = forms[i].kind;
			return a + 12;
		}
	/* 6to4: 2002:AABB:CCDD::/48 routes to the IPv4 address AA.BB.CC.DD. */
	if (a[0] == 0x20 && a[1] == 0x02) {
		*ret_kind = EMBEDDED_6TO4;
		return a + 2;
	}
	return NULL;
}

bool egress_address_internal(int family, const void *addr, char *reason, size_t size)
{
	const uint8_t *a = addr, *in;
	char v4[EGRESS_REASON_MAX];
	EmbeddedKind kind;

	if (family == AF_INET)
		return v4_internal_reason(a, reason, size, "");
	if (family != AF_INET6) {
		snprintf(reason, size, "not an IPv4 or IPv6 address");
		return true;
	}
	in = embedded_v4(a, &kind);
	if (in) {
		if (!v4_internal_reason(in, v4, sizeof(v4), ""))
			return false;
		snprintf(reason, size, "%s%s", embedded_kinds[kind].via, v4);
		return true;
	}
	for (size_t i = 0; i < ELEMENTSOF(v6_internal); i++)
		if (prefix_match(a, v6_internal[i].addr, v6_internal[i].prefix)) {
			snprintf(reason, size, "%s (%s)", v6_internal[i].what, v6_internal[i].cidr);
			return true;
		}
	if ((a[0] & 0xe0) != 0x20) {
		snprintf(reason, size, "not global unicast (outside 2000::/3)");
		return true;
	}
	return false;
}

bool egress_address_own(const struct ifaddrs *own, int family, const void *addr, char *reason,
			size_t size)
{
	const uint8_t *a = addr, *v4 = NULL;
	EmbeddedKind kind = _EMBEDDED_KIND_MAX;

	if (family == AF_INET)
		v4 = a;
	else if (family == AF_INET6)
		v4 = embedded_v4(a, &kind);
	else
		return false;
	for (const struct ifaddrs *i = own; i; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;
		const char *ifname = i->ifa_name ?: "?";
		char text[INET_ADDRSTRLEN];

		if (!sa)
			continue;
		if (sa->sa_family == AF_INET6 && family == AF_INET6 &&
		    memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, a, 16) == 0) {
			snprintf(reason, size, "this host's own address (on %s)", ifname);
			return true;
		}
		if (sa->sa_family != AF_INET || !v4 ||
		    memcmp(&((const struct sockaddr_in *)sa)->sin_addr, v4, 4) != 0)
			continue;
		if (family == AF_INET)
			snprintf(reason, size, "this host's own address (on %s)", ifname);
		else
			snprintf(reason, size, "the %s form of this host's own address %s (on %s)",
				 embedded_kinds[kind].name,
				 inet_ntop(AF_INET, v4, text, sizeof(text)) ?: "?", ifname);
		return true;
	}
	return false;
}

EgressAddressClass egress_address_check(int family, const void *addr, const EgressCidr *test_cidr,
					const struct ifaddrs *own, char *reason, size_t size)
{
	/* Internal first, for the better reason ("loopback" rather than "own" for 127.0.0.1);
	 * the host's own addresses whatever the test block, which admits a test network, never
	 * the host itself. */
	if (egress_address_internal(family, addr, reason, size) &&
	    !egress_cidr_contains(test_cidr, family, addr))
		return EGRESS_ADDRESS_INTERNAL;
	if (egress_address_own(own, family, addr, reason, size))
		return EGRESS_ADDRESS_OWN;
	return EGRESS_ADDRESS_OK;
}

int egress_cidr_parse(const char *s, EgressCidr *ret)
{
	char buf[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	unsigned long prefix;
	char *end;
	EgressCidr c = {};

	if (!slash || (size_t)(slash - s) >= sizeof(buf) || !slash[1])
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = '\0';
	errno = 0;
	prefix = strtoul(slash + 1, &end, 10);
	if (errno || *end || slash[1] < '0' || slash[1] > '9')
		return -EINVAL;
	if (inet_pton(AF_INET, buf, c.addr) == 1)
		c.family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c.addr) == 1)
		c.family = AF_INET6;
	else
		return -EINVAL;
	if (prefix > (c.family == AF_INET ? 32u : 128u))
		return -EINVAL;
	c.prefix = (unsigned)prefix;
	*ret = c;
	return 0;
}

bool egress_cidr_contains(const EgressCidr *c, int family, const void *addr)
{
	return c && c->family != 0 && c->family == family && prefix_match(addr, c->addr, c->prefix);
}

static bool all_of(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return true;
}

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-"

bool egress_host_name_valid(const char *host)
{
	size_t n = strlen(host);

	return n > 0 && n <= EGRESS_HOST_MAX && all_of(host, n, NAME_CHARS);
}

void egress_pattern_done(EgressPattern *p)
{
	free(p->host);
	free(p->text);
	*p = (EgressPattern){};
}

int egress_pattern_parse(const char *scope, EgressPattern *ret, char *err, size_t errsize)
{
	_cleanup_free_ char *s = strdup(scope), *host = NULL, *text = NULL;
	const char *port_text = NULL;
	EgressPattern p = {};
	bool v6 = false;
	char *colon;

	if (!s)
		return -ENOMEM;
	for (char *c = s; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (s[0] == '[') {
		/* An IPv6 literal: "[addr]", "[addr]:port" or "[addr]:*". */
		char *close = strchr(s, ']');
		struct in6_addr a6;
		char canon[INET6_ADDRSTRLEN];

		if (!close || (close[1] && close[1] != ':')) {
			snprintf(
				err, errsize,
				"--egress-allow %s: an IPv6 address goes in brackets, then an optional :port or :*",
				scope);
			return -EINVAL;
		}
		*close = '\0';
		if (inet_pton(AF_INET6, s + 1, &a6) != 1) {
			snprintf(err, errsize, "--egress-allow %s: \"%s\" is not an IPv6 address",
				 scope, s + 1);
			return -EINVAL;
		}
		inet_ntop(AF_INET6, &a6, canon, sizeof(canon));
		host = strdup(canon);
		port_text = close[1] ? close + 2 : NULL;
		v6 = true;
	} else {
		/* The LAST ':' separates a port only when digits or '*' follow it. */
		colon = strrchr(s, ':');
		if (colon && (streq(colon + 1, "*") ||
			      (colon[1] && all_of(colon + 1, strlen(colon + 1), "0123456789")))) {
			*colon = '\0';
			port_text = colon + 1;
		}
		host = strdup(s);
	}
	if (!host)
		return -ENOMEM;
	if (!v6) {
		size_t n = strlen(host);

		if (n == 0 || n > EGRESS_HOST_MAX) {
			snprintf(err, errsize,
				 "--egress-allow %s: the host pattern must be 1 to %d characters",
				 scope, EGRESS_HOST_MAX);
			return -EINVAL;
		}
		if (!all_of(host, n, "abcdefghijklmnopqrstuvwxyz0123456789.-*")) {
			snprintf(
				err, errsize,
				"--egress-allow %s: a host pattern is letters, digits, '.', '-' and '*' (the only wildcard), with an optional :port or :* (an IPv6 address goes in brackets)",
				scope);
			return -EINVAL;
		}
	}
	if (!port_text)
		p.default_ports = true;
	else if (streq(port_text, "*"))
		p.any_port = true;
	else if (parse_port(port_text, strlen(port_text), &p.port) < 0) {
		snprintf(err, errsize, "--egress-allow %s: the port must be 1 to 65535 or *",
			 scope);
		return -EINVAL;
	}
	if (asprintf(&text, "%s%s%s%s%s", v6 ? "[" : "", host, v6 ? "]" : "", port_text ? ":" : "",
		     port_text ? port_text : "") < 0)
		return -ENOMEM;
	/* "example.com:0443" is kept as :443. */
	if (p.port) {
		free(text);
		text = NULL;
		if (asprintf(&text, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
			     (unsigned)p.port) < 0)
			return -ENOMEM;
	}
	p.host = TAKE_PTR(host);
	p.text = TAKE_PTR(text);
	*ret = p;
	return 0;
}

int egress_allowlist_add(EgressAllowlist *a, const char *scope, char *err, size_t errsize)
{
	EgressPattern p, *grown;
	int r;

	if (a->n >= EGRESS_PATTERNS_MAX) {
		snprintf(err, errsize, "too many --egress-allow: at most %d patterns",
			 EGRESS_PATTERNS_MAX);
		return -EINVAL;
	}
	r = egress_pattern_parse(scope, &p, err, errsize);
	if (r < 0)
		return r;
	for (size_t i = 0; i < a->n; i++)
		if (streq(a->patterns[i].text, p.text)) {
			egress_pattern_done(&p);
			return 0;
		}
	grown = realloc(a->patterns, (a->n + 1) * sizeof(*grown));
	if (!grown) {
		egress_pattern_done(&p);
		return -ENOMEM;
	}
	a->patterns = grown;
	a->patterns[a->n++] = p;
	return 0;
}

void egress_allowlist_done(EgressAllowlist *a)
{
	for (size_t i = 0; i < a->n; i++)
		egress_pattern_done(&a->patterns[i]);
	free(a->patterns);
	*a = (EgressAllowlist){};
}

static bool pattern_port_ok(const EgressPattern *p, uint16_t port)
{
	if (p->any_port)
		return true;
	if (p->default_ports)
		return port == 80 || port == 443;
	return port == p->port;
}

const EgressPattern *egress_allowlist_match(const EgressAllowlist *a, const char *host,
					    uint16_t port)
{
	for (size_t i = 0; a && i < a->n; i++)
		if (pattern_port_ok(&a->patterns[i], port) &&
		    host_glob_match(a->patterns[i].host, host))
			return &a->patterns[i];
	return NULL;
}

static int add_port(uint16_t *ports, size_t *n, size_t max, uint16_t port)
{
	size_t i = 0;

	while (i < *n && ports[i] < port)
		i++;
	if (i < *n && ports[i] == port)
		return 0;
	if (*n >= max)
		return -ERANGE;
	memmove(ports + i + 1, ports + i, (*n - i) * sizeof(*ports));
	ports[i] = port;
	(*n)++;
	return 0;
}

int egress_allowlist_ports(const EgressAllowlist *a, uint16_t *ret, size_t max, bool *ret_any)
{
	size_t n = 0;
	int r = 0;

	*ret_any = false;
	for (size_t i = 0; i < a->n && r >= 0; i++) {
		const EgressPattern *p = &a->patterns[i];

		if (p->any_port)
			*ret_any = true;
		else if (p->default_ports) {
			r = add_port(ret, &n, max, 80);
			if (r >= 0)
				r = add_port(ret, &n, max, 443);
		} else
			r = add_port(ret, &n, max, p->port);
	}
	return r < 0 ? r : (int)n;
}

int egress_target_parse_host(const char *host, EgressTarget *ret, char *err, size_t errsize)
{
	size_t n = strlen(host);
	EgressTarget t = {.family = AF_UNSPEC};
	char buf[EGRESS_HOST_MAX + 3];
	struct in_addr legacy;

	if (n == 0 || n > EGRESS_HOST_MAX + 2) {
		snprintf(err, errsize, "the host must be 1 to %d characters", EGRESS_HOST_MAX);
		return -EINVAL;
	}
	memcpy(buf, host, n + 1);
	if (buf[0] == '[' || strchr(buf, ':')) {
		/* IPv6, bare or in brackets. */
		char *inner = buf;

		if (buf[0] == '[') {
			if (n < 3 || buf[n - 1] != ']') {
				snprintf(err, errsize,
					 "an IPv6 host in brackets must end with ']'");
				return -EINVAL;
			}
			buf[n - 1] = '\0';
			inner = buf + 1;
		}
		if (!all_of(inner, strlen(inner), "0123456789abcdefABCDEF:.") ||
		    inet_pton(AF_INET6, inner, &t.addr.v6) != 1) {
			snprintf(
				err, errsize,
				"the host is neither a name ([A-Za-z0-9.-]) nor an IPv4 or IPv6 address (no zone index)");
			return -EINVAL;
		}
		t.family = AF_INET6;
		inet_ntop(AF_INET6, &t.addr.v6, t.host, sizeof(t.host));
		*ret = t;
		return 0;
	}
	if (n > EGRESS_HOST_MAX || !all_of(buf, n, NAME_CHARS)) {
		snprintf(err, errsize, "a host name is 1 to %d of [A-Za-z0-9.-]", EGRESS_HOST_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		t.host[i] = (buf[i] >= 'A' && buf[i] <= 'Z') ? (char)(buf[i] - 'A' + 'a') : buf[i];
	t.host[n] = '\0';
	if (inet_pton(AF_INET, t.host, &t.addr.v4) == 1) {
		t.family = AF_INET;
		*ret = t;
		return 0;
	}
	/* The resolver reads "10.1", "0x7f.1" or "2130706433" as addresses (inet_aton); only
	 * the dotted quad is an IPv4 host here, so no other form can hide one. */
	if (inet_aton(t.host, &legacy) != 0) {
		snprintf(err, errsize,
			 "write an IPv4 address as a dotted quad (a.b.c.d), not \"%s\"", t.host);
		return -EINVAL;
	}
	*ret = t;
	return 0;
}

int egress_request_parse(const char *line, size_t len, EgressTarget *ret, char *err, size_t errsize)
{
	_cleanup_(json_decrefp) json_t *o = NULL;
	json_t *port;
	const char *op, *host;
	json_int_t p;
	int r;

	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		snprintf(err, errsize, "the request is not a JSON object");
		return -EINVAL;
	}
	op = json_string_value(json_object_get(o, "op"));
	if (!op || !streq(op, "dial")) {
		snprintf(err, errsize, "\"op\" must be \"dial\"");
		return -EINVAL;
	}
	host = json_string_value(json_object_get(o, "host"));
	if (!host) {
		snprintf(err, errsize, "\"host\" must be a string");
		return -EINVAL;
	}
	port = json_object_get(o, "port");
	p = json_is_integer(port) ? json_integer_value(port) : 0;
	if (p < 1 || p > 65535) {
		snprintf(err, errsize, "\"port\" must be a whole number from 1 to 65535");
		return -EINVAL;
	}
	r = egress_target_parse_host(host, ret, err, errsize);
	if (r < 0)
		return r;
	ret->port = (uint16_t)p;
	return 0;
}
