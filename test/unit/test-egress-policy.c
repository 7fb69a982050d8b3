/* SPDX-License-Identifier: Apache-2.0 */
/* The egress dialer's decisions (src/berth-vmm/egress-policy.c): patterns, globs, default
 * ports, request lines, host names, every internal address range, at its edges, and the
 * host's own addresses. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>
#include <sys/socket.h>

#include "egress-policy.h"
#include "host-glob.h"
#include "macros.h"
#include "tests.h"

static EgressPattern parse_ok(const char *scope)
{
	EgressPattern p;
	char err[512] = "";

	if (egress_pattern_parse(scope, &p, err, sizeof(err)) < 0)
		TEST_FAIL("%s: %s", scope, err);
	return p;
}

static void parse_bad(const char *scope, const char *says)
{
	EgressPattern p;
	char err[512] = "";

	ASSERT_ERROR(egress_pattern_parse(scope, &p, err, sizeof(err)), EINVAL);
	if (!strstr(err, says))
		TEST_FAIL("%s: \"%s\" does not say \"%s\"", scope, err, says);
	if (!strstr(err, "--egress-allow"))
		TEST_FAIL("%s: \"%s\" does not name the flag", scope, err);
}

TEST(pattern_ports)
{
	EgressPattern p = parse_ok("Example.COM");

	ASSERT_STREQ(p.host, "example.com");
	ASSERT_TRUE(p.default_ports);
	ASSERT_FALSE(p.any_port);
	ASSERT_STREQ(p.text, "example.com");
	egress_pattern_done(&p);

	p = parse_ok("example.com:5432");
	ASSERT_STREQ(p.host, "example.com");
	ASSERT_EQ(p.port, 5432);
	ASSERT_FALSE(p.default_ports);
	egress_pattern_done(&p);

	p = parse_ok("*.example.com:*");
	ASSERT_STREQ(p.host, "*.example.com");
	ASSERT_TRUE(p.any_port);
	ASSERT_STREQ(p.text, "*.example.com:*");
	egress_pattern_done(&p);

	p = parse_ok("example.com:0443");
	ASSERT_EQ(p.port, 443);
	ASSERT_STREQ(p.text, "example.com:443");
	egress_pattern_done(&p);

	p = parse_ok("*");
	ASSERT_TRUE(p.default_ports);
	egress_pattern_done(&p);

	p = parse_ok("93.184.215.14:8443");
	ASSERT_STREQ(p.host, "93.184.215.14");
	ASSERT_EQ(p.port, 8443);
	egress_pattern_done(&p);

	p = parse_ok("[2001:DB8:0::1]:443");
	ASSERT_STREQ(p.host, "2001:db8::1");
	ASSERT_EQ(p.port, 443);
	ASSERT_STREQ(p.text, "[2001:db8::1]:443");
	egress_pattern_done(&p);

	p = parse_ok("[2606:4700::1111]");
	ASSERT_TRUE(p.default_ports);
	egress_pattern_done(&p);
}

TEST(pattern_refused)
{
	char long_host[300];

	parse_bad("", "1 to 253");
	parse_bad(":443", "1 to 253");
	parse_bad("example.com:0", "1 to 65535");
	parse_bad("example.com:65536", "1 to 65535");
	parse_bad("example.com:999999", "1 to 65535");
	/* Only digits or '*' make a port: the rest stays in the host, where ':' is refused. */
	parse_bad("example.com:https", "letters, digits");
	parse_bad("example.com:", "letters, digits");
	parse_bad("2001:db8::1", "letters, digits");
	parse_bad("exa mple.com", "letters, digits");
	parse_bad("example.com/path", "letters, digits");
	parse_bad("user@example.com", "letters, digits");
	parse_bad("ex?mple.com", "letters, digits");
	parse_bad("[2001:db8::1", "brackets");
	parse_bad("[2001:db8::1]443", "brackets");
	parse_bad("[not-v6]:443", "not an IPv6 address");
	parse_bad("[2001:db8::1]:0", "1 to 65535");
	memset(long_host, 'a', 254);
	long_host[254] = '\0';
	parse_bad(long_host, "1 to 253");
	long_host[253] = '\0';
	egress_pattern_done(&(EgressPattern){});
	{
		EgressPattern p = parse_ok(long_host);

		egress_pattern_done(&p);
	}
}

TEST(glob)
{
	ASSERT_TRUE(host_glob_match("example.com", "example.com"));
	ASSERT_FALSE(host_glob_match("example.com", "example.com.evil.test"));
	ASSERT_FALSE(host_glob_match("example.com", "www.example.com"));
	ASSERT_TRUE(host_glob_match("*.example.com", "www.example.com"));
	ASSERT_TRUE(host_glob_match("*.example.com", "a.b.example.com"));
	ASSERT_FALSE(host_glob_match("*.example.com", "example.com"));
	ASSERT_FALSE(host_glob_match("*.example.com", "evilexample.com"));
	ASSERT_TRUE(host_glob_match("*example.com", "evilexample.com"));
	ASSERT_TRUE(host_glob_match("*", "anything.at.all"));
	ASSERT_TRUE(host_glob_match("*", "2001:db8::1"));
	ASSERT_TRUE(host_glob_match("api-*.example.com", "api-eu.example.com"));
	ASSERT_FALSE(host_glob_match("api-*.example.com", "api-eu.example.org"));
	ASSERT_TRUE(host_glob_match("a*b*c", "aXXbYYc"));
	ASSERT_TRUE(host_glob_match("a*b*c", "abbbc"));
	ASSERT_FALSE(host_glob_match("a*b*c", "abcd"));
	ASSERT_TRUE(host_glob_match("**", ""));
	/* '?' is literal. */
	ASSERT_FALSE(host_glob_match("ex?mple.com", "example.com"));
	ASSERT_TRUE(host_glob_match("ex?mple.com", "ex?mple.com"));
	ASSERT_FALSE(host_glob_match("[ab].com", "a.com"));
	/* Pathological input stays linear enough to finish. */
	ASSERT_FALSE(host_glob_match("*a*a*a*a*a*a*a*a*b",
				     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

TEST(allowlist)
{
	EgressAllowlist a = {};
	uint16_t ports[16];
	bool any;
	char err[512];
	const EgressPattern *m;

	ASSERT_TRUE(egress_allowlist_match(&a, "example.com", 443) == NULL);
	ASSERT_OK(egress_allowlist_add(&a, "example.com", err, sizeof(err)));
	ASSERT_OK(egress_allowlist_add(&a, "db.example.com:5432", err, sizeof(err)));
	ASSERT_OK(egress_allowlist_add(&a, "EXAMPLE.com", err, sizeof(err))); /* same: once */
	ASSERT_EQ(a.n, 2);
	ASSERT_NOT_NULL(egress_allowlist_match(&a, "example.com", 80));
	ASSERT_NOT_NULL(egress_allowlist_match(&a, "example.com", 443));
	ASSERT_TRUE(egress_allowlist_match(&a, "example.com", 5432) == NULL);
	ASSERT_TRUE(egress_allowlist_match(&a, "example.com", 8080) == NULL);
	m = egress_allowlist_match(&a, "db.example.com", 5432);
	ASSERT_NOT_NULL(m);
	ASSERT_STREQ(m->text, "db.example.com:5432");
	ASSERT_TRUE(egress_allowlist_match(&a, "db.example.com", 443) == NULL);
	ASSERT_TRUE(egress_allowlist_match(&a, "evil-not-declared.test", 443) == NULL);
	ASSERT_EQ(egress_allowlist_ports(&a, ports, ELEMENTSOF(ports), &any), 3);
	ASSERT_EQ(ports[0], 80);
	ASSERT_EQ(ports[1], 443);
	ASSERT_EQ(ports[2], 5432);
	ASSERT_FALSE(any);
	ASSERT_EQ(egress_allowlist_ports(&a, ports, 2, &any), -ERANGE);
	ASSERT_OK(egress_allowlist_add(&a, "*.cdn.test:*", err, sizeof(err)));
	ASSERT_NOT_NULL(egress_allowlist_match(&a, "x.cdn.test", 1));
	ASSERT_NOT_NULL(egress_allowlist_match(&a, "x.cdn.test", 65535));
	ASSERT_EQ(egress_allowlist_ports(&a, ports, ELEMENTSOF(ports), &any), 3);
	ASSERT_TRUE(any);
	ASSERT_ERROR(egress_allowlist_add(&a, "bad host", err, sizeof(err)), EINVAL);
	egress_allowlist_done(&a);

	for (int i = 0; i < EGRESS_PATTERNS_MAX; i++) {
		char s[32];

		snprintf(s, sizeof(s), "h%d.test", i);
		ASSERT_OK(egress_allowlist_add(&a, s, err, sizeof(err)));
	}
	ASSERT_ERROR(egress_allowlist_add(&a, "one-more.test", err, sizeof(err)), EINVAL);
	ASSERT_TRUE(strstr(err, "at most 256") != NULL);
	egress_allowlist_done(&a);
}

static void host_ok(const char *host, const char *want, int family)
{
	EgressTarget t;
	char err[256] = "";

	if (egress_target_parse_host(host, &t, err, sizeof(err)) < 0)
		TEST_FAIL("%s: %s", host, err);
	ASSERT_STREQ(t.host, want);
	ASSERT_EQ(t.family, family);
}

static void host_bad(const char *host)
{
	EgressTarget t;
	char err[256] = "";

	if (egress_target_parse_host(host, &t, err, sizeof(err)) >= 0)
		TEST_FAIL("%s: accepted as %s", host, t.host);
	ASSERT_TRUE(err[0] != '\0');
}

TEST(hosts)
{
	char name[300];

	host_ok("Example.COM", "example.com", AF_UNSPEC);
	host_ok("a-b.c-d.test", "a-b.c-d.test", AF_UNSPEC);
	host_ok("93.184.215.14", "93.184.215.14", AF_INET);
	host_ok("::1", "::1", AF_INET6);
	host_ok("[::1]", "::1", AF_INET6);
	host_ok("[2001:DB8:0:0::1]", "2001:db8::1", AF_INET6);
	host_ok("::ffff:10.0.0.1", "::ffff:10.0.0.1", AF_INET6);
	memset(name, 'a', 253);
	name[253] = '\0';
	host_ok(name, name, AF_UNSPEC);
	name[253] = 'a';
	name[254] = '\0';
	host_bad(name);
	host_bad("");
	host_bad("exa_mple.com");
	host_bad("example.com:443");
	host_bad("exa mple.com");
	host_bad("example.com\n");
	host_bad("fe80::1%eth0");
	host_bad("[fe80::1%eth0]");
	host_bad("[::1");
	host_bad("[]");
	host_bad("1::2::3");
	/* Numeric forms the resolver would read as IPv4 addresses. */
	host_bad("10.1");
	host_bad("127.1");
	host_bad("2130706433");
	host_bad("0x7f.1");
	host_bad("0x7f000001");
	host_bad("010.0.0.1");
	host_bad("127.0.0.01");
	/* Not an address, so a name (it fails to resolve later). */
	host_ok("1.2.3.4.5", "1.2.3.4.5", AF_UNSPEC);
}

static int request(const char *line, EgressTarget *t, char *err, size_t size)
{
	return egress_request_parse(line, strlen(line), t, err, size);
}

static void request_bad(const char *line, const char *says)
{
	EgressTarget t;
	char err[256] = "";

	ASSERT_ERROR(request(line, &t, err, sizeof(err)), EINVAL);
	if (!strstr(err, says))
		TEST_FAIL("%s: \"%s\" does not say \"%s\"", line, err, says);
}

TEST(request_line)
{
	EgressTarget t;
	char err[256];

	ASSERT_OK(request("{\"op\":\"dial\",\"host\":\"Example.com\",\"port\":443}", &t, err,
			  sizeof(err)));
	ASSERT_STREQ(t.host, "example.com");
	ASSERT_EQ(t.port, 443);
	ASSERT_EQ(t.family, AF_UNSPEC);
	ASSERT_OK(request("{\"port\":1,\"host\":\"[::1]\",\"op\":\"dial\",\"extra\":[1]}", &t, err,
			  sizeof(err)));
	ASSERT_EQ(t.family, AF_INET6);
	ASSERT_EQ(t.port, 1);
	ASSERT_OK(request("{\"op\":\"dial\",\"host\":\"10.0.0.1\",\"port\":65535}", &t, err,
			  sizeof(err)));
	ASSERT_EQ(t.family, AF_INET);

	request_bad("", "not a JSON object");
	request_bad("dial example.com 443", "not a JSON object");
	request_bad("[1,2]", "not a JSON object");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":443", "not a JSON object");
	request_bad("{\"op\":\"dial\",\"op\":\"dial\",\"host\":\"a.test\",\"port\":443}",
		    "not a JSON object");
	request_bad("{\"op\":\"connect\",\"host\":\"a.test\",\"port\":443}", "\"op\"");
	request_bad("{\"host\":\"a.test\",\"port\":443}", "\"op\"");
	request_bad("{\"op\":\"dial\",\"port\":443}", "\"host\"");
	request_bad("{\"op\":\"dial\",\"host\":7,\"port\":443}", "\"host\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\"}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":0}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":65536}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":-1}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":443.0}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a.test\",\"port\":\"443\"}", "\"port\"");
	request_bad("{\"op\":\"dial\",\"host\":\"a\\u0000b.test\",\"port\":443}",
		    "not a JSON object");
	request_bad("{\"op\":\"dial\",\"host\":\"a b.test\",\"port\":443}", "[A-Za-z0-9.-]");
	request_bad("{\"op\":\"dial\",\"host\":\"127.1\",\"port\":443}", "dotted quad");
	/* The length given is what is parsed: a line cut short is not an object. */
	ASSERT_ERROR(egress_request_parse("{\"op\":\"dial\"}", 5, &t, err, sizeof(err)), EINVAL);
}

static bool v4_internal(const char *a, char *why)
{
	uint8_t b[4];

	if (inet_pton(AF_INET, a, b) != 1)
		TEST_FAIL("bad test address %s", a);
	return egress_address_internal(AF_INET, b, why, EGRESS_REASON_MAX);
}

static bool v6_internal(const char *a, char *why)
{
	uint8_t b[16];

	if (inet_pton(AF_INET6, a, b) != 1)
		TEST_FAIL("bad test address %s", a);
	return egress_address_internal(AF_INET6, b, why, EGRESS_REASON_MAX);
}

/* @a is internal, and the reason says @says. */
static void in4(const char *a, const char *says)
{
	char why[EGRESS_REASON_MAX] = "";

	if (!v4_internal(a, why))
		TEST_FAIL("%s: not internal", a);
	if (!strstr(why, says))
		TEST_FAIL("%s: \"%s\" does not say \"%s\"", a, why, says);
}

static void out4(const char *a)
{
	char why[EGRESS_REASON_MAX] = "";

	if (v4_internal(a, why))
		TEST_FAIL("%s: internal (%s)", a, why);
}

static void in6(const char *a, const char *says)
{
	char why[EGRESS_REASON_MAX] = "";

	if (!v6_internal(a, why))
		TEST_FAIL("%s: not internal", a);
	if (!strstr(why, says))
		TEST_FAIL("%s: \"%s\" does not say \"%s\"", a, why, says);
}

static void out6(const char *a)
{
	char why[EGRESS_REASON_MAX] = "";

	if (v6_internal(a, why))
		TEST_FAIL("%s: internal (%s)", a, why);
}

TEST(ipv4_ranges)
{
	/* Each range: first and last address inside, the neighbours outside. */
	in4("0.0.0.0", "\"this network\" (0.0.0.0/8)");
	in4("0.255.255.255", "0.0.0.0/8");
	out4("1.0.0.0");
	out4("9.255.255.255");
	in4("10.0.0.0", "private (10.0.0.0/8)");
	in4("10.255.255.255", "private");
	out4("11.0.0.0");
	out4("100.63.255.255");
	in4("100.64.0.0", "carrier-grade NAT (100.64.0.0/10)");
	in4("100.127.255.255", "carrier-grade NAT");
	out4("100.128.0.0");
	out4("126.255.255.255");
	in4("127.0.0.0", "loopback (127.0.0.0/8)");
	in4("127.0.0.1", "loopback");
	in4("127.255.255.255", "loopback");
	out4("128.0.0.0");
	out4("169.253.255.255");
	in4("169.254.0.0", "link-local");
	in4("169.254.169.254", "cloud metadata");
	in4("169.254.255.255", "169.254.0.0/16");
	out4("169.255.0.0");
	out4("172.15.255.255");
	in4("172.16.0.0", "private (172.16.0.0/12)");
	in4("172.17.0.1", "private");
	in4("172.31.255.255", "private");
	out4("172.32.0.0");
	out4("191.255.255.255");
	in4("192.0.0.0", "IETF protocol assignments (192.0.0.0/24)");
	in4("192.0.0.255", "192.0.0.0/24");
	out4("192.0.1.0");
	in4("192.0.2.0", "documentation (192.0.2.0/24)");
	in4("192.0.2.255", "documentation");
	out4("192.0.3.0");
	out4("192.88.98.255");
	in4("192.88.99.1", "6to4 relay");
	out4("192.88.100.0");
	out4("192.167.255.255");
	in4("192.168.0.0", "private (192.168.0.0/16)");
	in4("192.168.1.1", "private");
	in4("192.168.255.255", "private");
	out4("192.169.0.0");
	out4("198.17.255.255");
	in4("198.18.0.0", "benchmarking (198.18.0.0/15)");
	in4("198.19.255.255", "benchmarking");
	out4("198.20.0.0");
	out4("198.51.99.255");
	in4("198.51.100.0", "documentation (198.51.100.0/24)");
	in4("198.51.100.255", "documentation");
	out4("198.51.101.0");
	out4("203.0.112.255");
	in4("203.0.113.0", "documentation (203.0.113.0/24)");
	in4("203.0.113.255", "documentation");
	out4("203.0.114.0");
	out4("223.255.255.255");
	in4("224.0.0.0", "multicast (224.0.0.0/4)");
	in4("239.255.255.255", "multicast");
	in4("240.0.0.0", "reserved (240.0.0.0/4)");
	in4("255.255.255.254", "reserved");
	in4("255.255.255.255", "broadcast");
	out4("93.184.215.14");
	out4("8.8.8.8");
	out4("1.1.1.1");
}

TEST(ipv6_ranges)
{
	in6("::", "unspecified (::/128)");
	in6("::1", "loopback (::1/128)");
	in6("::2", "IPv4-compatible");
	/* IPv4-compatible (deprecated): refused whatever the IPv4 address. */
	in6("::10.0.0.1", "IPv4-compatible");
	in6("::8.8.8.8", "IPv4-compatible");
	in6("::1:0:0", "outside 2000::/3");
	/* IPv4-mapped: judged by the IPv4 address. */
	in6("::ffff:10.0.0.1", "IPv4-mapped private (10.0.0.0/8)");
	in6("::ffff:127.0.0.1", "IPv4-mapped loopback");
	in6("::ffff:169.254.169.254", "IPv4-mapped link-local");
	in6("::ffff:0.0.0.0", "IPv4-mapped");
	in6("::ffff:255.255.255.255", "IPv4-mapped broadcast");
	out6("::ffff:8.8.8.8");
	out6("::ffff:93.184.215.14");
	in6("::fffe:8.8.8.8", "outside 2000::/3");
	/* IPv4-translated (SIIT). */
	in6("::ffff:0:10.0.0.1", "IPv4-translated private");
	out6("::ffff:0:8.8.8.8");
	/* NAT64, well-known prefix and local-use. */
	in6("64:ff9b::10.0.0.1", "NAT64 of private");
	in6("64:ff9b::127.0.0.1", "NAT64 of loopback");
	in6("64:ff9b::169.254.169.254", "NAT64 of link-local");
	out6("64:ff9b::8.8.8.8");
	in6("64:ff9b:0:0:0:1::", "outside 2000::/3");
	in6("64:ff9b:1::", "local-use NAT64 (64:ff9b:1::/48)");
	in6("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "local-use NAT64");
	in6("64:ff9b:1::808:808", "local-use NAT64");
	in6("64:ff9b:2::", "outside 2000::/3");
	/* Discard-only. */
	in6("100::", "discard-only (100::/64)");
	in6("100::ffff:ffff:ffff:ffff", "discard-only");
	in6("100:0:0:1::", "outside 2000::/3");
	/* IETF protocol assignments, Teredo, documentation. */
	out6("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	in6("2001::", "Teredo (2001::/32)");
	in6("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo");
	in6("2001:1::1", "IETF protocol assignments (2001::/23)");
	in6("2001:2::", "IETF protocol assignments");
	in6("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignments");
	out6("2001:200::");
	out6("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff");
	in6("2001:db8::", "documentation (2001:db8::/32)");
	in6("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation");
	out6("2001:db9::");
	/* 6to4: judged by the IPv4 address in bits 16-47. */
	in6("2002:a00:1::", "6to4 of private (10.0.0.0/8)");
	in6("2002:7f00:1::1", "6to4 of loopback");
	in6("2002:a9fe:a9fe::", "6to4 of link-local");
	in6("2002::", "6to4 of \"this network\"");
	out6("2002:808:808::1");
	out6("2001:4860:4860::8888");
	out6("2606:4700:4700::1111");
	out6("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	in6("3fff::", "documentation (3fff::/20)");
	in6("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation");
	out6("3fff:1000::");
	out6("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	in6("4000::", "outside 2000::/3");
	in6("5f00::1", "outside 2000::/3");
	in6("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "outside 2000::/3");
	in6("fc00::", "unique local (fc00::/7)");
	in6("fd12:3456::1", "unique local");
	in6("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local");
	in6("fe00::", "outside 2000::/3");
	in6("fe80::", "link-local (fe80::/10)");
	in6("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local");
	in6("fec0::", "site-local (deprecated) (fec0::/10)");
	in6("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local");
	in6("ff00::", "multicast (ff00::/8)");
	in6("ff02::1", "multicast");
	in6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast");
}

TEST(other_families)
{
	char why[EGRESS_REASON_MAX] = "";
	uint8_t b[16] = {8, 8, 8, 8};

	ASSERT_TRUE(egress_address_internal(AF_UNIX, b, why, sizeof(why)));
	ASSERT_TRUE(strstr(why, "not an IPv4 or IPv6") != NULL);
}

/* A getifaddrs() list as the kernel would give it: a link (AF_PACKET, no address here),
 * an interface without an address, loopback, and public addresses of both families. */
typedef struct FakeIf {
	struct ifaddrs ifa[7];
	struct sockaddr_in v4[3];
	struct sockaddr_in6 v6[2];
	struct sockaddr packet;
} FakeIf;

static void fake_if_init(FakeIf *f)
{
	static const struct {
		const char *name, *addr;
		int family;
	} rows[] = {
		{"eth0", NULL, AF_PACKET},
		{"tun0", NULL, 0},
		{"lo", "127.0.0.1", AF_INET},
		{"eth0", "93.184.215.14", AF_INET},
		{"eth1", "198.51.100.1", AF_INET},
		{"lo", "::1", AF_INET6},
		{"eth0", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", AF_INET6},
	};
	size_t n4 = 0, n6 = 0;

	*f = (FakeIf){};
	f->packet.sa_family = AF_PACKET;
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		struct ifaddrs *a = &f->ifa[i];

		a->ifa_name = (char *)rows[i].name;
		a->ifa_next = i + 1 < ELEMENTSOF(rows) ? &f->ifa[i + 1] : NULL;
		if (rows[i].family == AF_PACKET)
			a->ifa_addr = &f->packet;
		else if (rows[i].family == AF_INET) {
			f->v4[n4].sin_family = AF_INET;
			inet_pton(AF_INET, rows[i].addr, &f->v4[n4].sin_addr);
			a->ifa_addr = (struct sockaddr *)&f->v4[n4++];
		} else if (rows[i].family == AF_INET6) {
			f->v6[n6].sin6_family = AF_INET6;
			inet_pton(AF_INET6, rows[i].addr, &f->v6[n6].sin6_addr);
			a->ifa_addr = (struct sockaddr *)&f->v6[n6++];
		}
	}
}

static bool own(const struct ifaddrs *list, const char *a, char *why)
{
	uint8_t b[16];
	int family = strchr(a, ':') ? AF_INET6 : AF_INET;

	if (inet_pton(family, a, b) != 1)
		TEST_FAIL("bad test address %s", a);
	why[0] = '\0';
	return egress_address_own(list, family, b, why, EGRESS_REASON_MAX);
}

static void own_says(const struct ifaddrs *list, const char *a, const char *says)
{
	char why[EGRESS_REASON_MAX];

	if (!own(list, a, why))
		TEST_FAIL("%s: not one of the host's own", a);
	if (!strstr(why, says))
		TEST_FAIL("%s: \"%s\" does not say \"%s\"", a, why, says);
}

TEST(host_own_addresses)
{
	FakeIf f;
	char why[EGRESS_REASON_MAX];

	fake_if_init(&f);
	own_says(f.ifa, "93.184.215.14", "this host's own address (on eth0)");
	own_says(f.ifa, "198.51.100.1", "this host's own address (on eth1)");
	own_says(f.ifa, "127.0.0.1", "(on lo)");
	own_says(f.ifa, "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
		 "this host's own address (on eth0)");
	own_says(f.ifa, "::1", "(on lo)");
	/* What reaches an IPv4 address of the host by another name is the host too. */
	own_says(f.ifa, "::ffff:93.184.215.14",
		 "IPv4-mapped form of this host's own address 93.184.215.14 (on eth0)");
	own_says(f.ifa, "::ffff:0:93.184.215.14", "IPv4-translated form of this host's own");
	own_says(f.ifa, "64:ff9b::93.184.215.14", "NAT64 form of this host's own");
	own_says(f.ifa, "2002:5db8:d70e::1", "6to4 form of this host's own address 93.184.215.14");
	/* Neighbours are not the host. */
	ASSERT_FALSE(own(f.ifa, "93.184.215.15", why));
	ASSERT_FALSE(own(f.ifa, "93.184.215.13", why));
	ASSERT_FALSE(own(f.ifa, "2606:2800:21f:cb07:6820:80da:af6b:8b2d", why));
	ASSERT_FALSE(own(f.ifa, "::ffff:93.184.215.15", why));
	ASSERT_FALSE(own(f.ifa, "2002:5db8:d70f::1", why));
	/* The IPv6 address's last 4 bytes are not an IPv4 address of the host's. */
	ASSERT_FALSE(own(f.ifa, "2606:2800:21f:cb07:6820:80da:5db8:d70e", why));
	/* No list: nothing is the host's. */
	ASSERT_FALSE(own(NULL, "93.184.215.14", why));
	ASSERT_FALSE(egress_address_own(f.ifa, AF_UNIX, (uint8_t[16]){93, 184, 215, 14}, why,
					sizeof(why)));
}

static EgressAddressClass check(const FakeIf *f, const EgressCidr *cidr, const char *a, char *why)
{
	uint8_t b[16];
	int family = strchr(a, ':') ? AF_INET6 : AF_INET;

	if (inet_pton(family, a, b) != 1)
		TEST_FAIL("bad test address %s", a);
	why[0] = '\0';
	return egress_address_check(family, b, cidr, f ? f->ifa : NULL, why, EGRESS_REASON_MAX);
}

TEST(address_check)
{
	EgressCidr cidr;
	FakeIf f;
	char why[EGRESS_REASON_MAX];

	fake_if_init(&f);
	ASSERT_OK(egress_cidr_parse("198.51.100.0/24", &cidr));
	ASSERT_EQ(check(&f, NULL, "93.184.215.15", why), EGRESS_ADDRESS_OK);
	ASSERT_EQ(check(&f, NULL, "2606:4700::1111", why), EGRESS_ADDRESS_OK);
	ASSERT_EQ(check(&f, NULL, "93.184.215.14", why), EGRESS_ADDRESS_OWN);
	ASSERT_STREQ(why, "this host's own address (on eth0)");
	ASSERT_EQ(check(&f, NULL, "::ffff:93.184.215.14", why), EGRESS_ADDRESS_OWN);
	/* Internal first, for the better reason. */
	ASSERT_EQ(check(&f, NULL, "127.0.0.1", why), EGRESS_ADDRESS_INTERNAL);
	ASSERT_STREQ(why, "loopback (127.0.0.0/8)");
	ASSERT_EQ(check(&f, NULL, "198.51.100.2", why), EGRESS_ADDRESS_INTERNAL);
	/* The test setting admits its block, but never the host's own address in it. */
	ASSERT_EQ(check(&f, &cidr, "198.51.100.2", why), EGRESS_ADDRESS_OK);
	ASSERT_EQ(check(&f, &cidr, "198.51.100.1", why), EGRESS_ADDRESS_OWN);
	ASSERT_STREQ(why, "this host's own address (on eth1)");
	ASSERT_EQ(check(&f, &cidr, "10.0.0.1", why), EGRESS_ADDRESS_INTERNAL);
	ASSERT_EQ(check(&f, &cidr, "::ffff:198.51.100.2", why), EGRESS_ADDRESS_INTERNAL);
	ASSERT_EQ(check(NULL, NULL, "93.184.215.14", why), EGRESS_ADDRESS_OK);
}

TEST(cidr)
{
	EgressCidr c;
	uint8_t a4[4], a6[16];

	ASSERT_OK(egress_cidr_parse("198.51.100.0/24", &c));
	ASSERT_EQ(c.family, AF_INET);
	ASSERT_EQ(c.prefix, 24);
	inet_pton(AF_INET, "198.51.100.2", a4);
	ASSERT_TRUE(egress_cidr_contains(&c, AF_INET, a4));
	inet_pton(AF_INET, "198.51.101.2", a4);
	ASSERT_FALSE(egress_cidr_contains(&c, AF_INET, a4));
	inet_pton(AF_INET6, "::ffff:198.51.100.2", a6);
	ASSERT_FALSE(egress_cidr_contains(&c, AF_INET6, a6));
	ASSERT_OK(egress_cidr_parse("10.1.2.3/32", &c));
	inet_pton(AF_INET, "10.1.2.3", a4);
	ASSERT_TRUE(egress_cidr_contains(&c, AF_INET, a4));
	inet_pton(AF_INET, "10.1.2.2", a4);
	ASSERT_FALSE(egress_cidr_contains(&c, AF_INET, a4));
	ASSERT_OK(egress_cidr_parse("fd00:1::/60", &c));
	ASSERT_EQ(c.family, AF_INET6);
	inet_pton(AF_INET6, "fd00:1:0:f::1", a6);
	ASSERT_TRUE(egress_cidr_contains(&c, AF_INET6, a6));
	inet_pton(AF_INET6, "fd00:1:0:10::1", a6);
	ASSERT_FALSE(egress_cidr_contains(&c, AF_INET6, a6));
	ASSERT_FALSE(egress_cidr_contains(NULL, AF_INET6, a6));
	ASSERT_FALSE(egress_cidr_contains(&(EgressCidr){}, AF_INET, a4));
	ASSERT_ERROR(egress_cidr_parse("198.51.100.0", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("198.51.100.0/", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("198.51.100.0/33", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("198.51.100.0/-1", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("198.51.100.0/24x", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("example.com/24", &c), EINVAL);
	ASSERT_ERROR(egress_cidr_parse("::/129", &c), EINVAL);
}

int main(void)
{
	return tests_run();
}
