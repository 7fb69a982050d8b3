/* SPDX-License-Identifier: Apache-2.0 */
/* The egress broker's rules (patterns, globs, IPv4 literals) and its HTTP parsing. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http-head.h"
#include "policy.h"
#include "macros.h"
#include "rules.h"
#include "tests.h"

/* The rules of a policy declaring the capabilities in the JSON array @caps_json. */
static EgressRules rules_of(const char *caps_json)
{
	json_t *caps = json_loads(caps_json, 0, NULL), *v;
	CapabilityPolicy p = {};
	EgressRules r = {};
	size_t i;

	json_array_foreach(caps, i, v)
		ASSERT_OK(policy_strings_add(&p.declared, json_string_value(v),
					     json_string_length(v)));
	if (egress_rules_from_policy(&p, &r) < 0)
		TEST_FAIL("egress_rules_from_policy(%s) failed", caps_json);
	policy_strings_done(&p.declared);
	json_decref(caps);
	return r;
}

TEST(pattern_split_at_the_last_colon_only_for_digits_or_star)
{
	EgressPattern p;

	ASSERT_OK(egress_pattern_parse("example.com", 11, &p));
	ASSERT_STREQ(p.host, "example.com");
	ASSERT_EQ(p.port, EGRESS_PORT_DEFAULT);
	free(p.host);
	ASSERT_OK(egress_pattern_parse("Example.COM:5432", 16, &p));
	ASSERT_STREQ(p.host, "example.com");
	ASSERT_EQ(p.port, 5432);
	free(p.host);
	ASSERT_OK(egress_pattern_parse("*.example.com:*", 15, &p));
	ASSERT_STREQ(p.host, "*.example.com");
	ASSERT_EQ(p.port, EGRESS_PORT_ANY);
	free(p.host);
	/* The suffix is not a port: the whole scope is the host glob. */
	ASSERT_OK(egress_pattern_parse("a:b", 3, &p));
	ASSERT_STREQ(p.host, "a:b");
	ASSERT_EQ(p.port, EGRESS_PORT_DEFAULT);
	free(p.host);
	ASSERT_OK(egress_pattern_parse("x:99999", 7, &p));
	ASSERT_STREQ(p.host, "x");
	ASSERT_TRUE(p.port > 0xffff);
	free(p.host);
	/* IPv6 in brackets, as the host dialer takes it too. */
	ASSERT_OK(egress_pattern_parse("[::FFFF:10.0.0.1]", 17, &p));
	ASSERT_STREQ(p.host, "::ffff:10.0.0.1");
	ASSERT_EQ(p.port, EGRESS_PORT_DEFAULT);
	free(p.host);
	ASSERT_OK(egress_pattern_parse("[2001:db8::1]:8443", 18, &p));
	ASSERT_STREQ(p.host, "2001:db8::1");
	ASSERT_EQ(p.port, 8443);
	free(p.host);
	ASSERT_ERROR(egress_pattern_parse("[]", 2, &p), EINVAL);
	ASSERT_ERROR(egress_pattern_parse(":443", 4, &p), EINVAL);
	ASSERT_ERROR(egress_pattern_parse("", 0, &p), EINVAL);
}

TEST(rules_follow_the_acceptance_cases)
{
	EgressRules r = rules_of("[\"browser:navigate:example.com\",\"network:connect:8090\"]");

	ASSERT_TRUE(egress_rules_allow(&r, "example.com", 443));
	ASSERT_TRUE(egress_rules_allow(&r, "example.com", 80));
	ASSERT_FALSE(egress_rules_allow(&r, "example.com", 5432));
	ASSERT_FALSE(egress_rules_allow(&r, "evil-not-declared.test", 443));
	ASSERT_FALSE(r.github);
	egress_rules_done(&r);

	r = rules_of("[\"network:host:example.com:5432\"]");
	ASSERT_TRUE(egress_rules_allow(&r, "example.com", 5432));
	ASSERT_FALSE(egress_rules_allow(&r, "example.com", 443));
	egress_rules_done(&r);

	r = rules_of("[\"github:read:repos\",\"browser:navigate:*\",\"filesystem:write:/tmp\"]");
	ASSERT_TRUE(r.github);
	ASSERT_EQ(r.n_patterns, 1);
	ASSERT_TRUE(egress_rules_allow(&r, "github.com", 443));
	egress_rules_done(&r);

	r = rules_of("[\"network:host:*:*\"]");
	ASSERT_TRUE(egress_rules_allow(&r, "x.test", 1));
	ASSERT_TRUE(egress_rules_allow(&r, "x.test", 65535));
	egress_rules_done(&r);

	/* Nothing declared: nothing allowed. */
	r = rules_of("[]");
	ASSERT_FALSE(egress_rules_allow(&r, "example.com", 443));
	egress_rules_done(&r);
}

/* Write @doc to a temporary file and load the rules from it. */
static int load_doc(const char *doc, EgressRules *r, char **err)
{
	char path[] = "/tmp/test-egress-policy.XXXXXX";
	int fd = mkstemp(path), k;

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
	close(fd);
	k = egress_rules_load(path, r, err);
	unlink(path);
	return k;
}

TEST(rules_refuse_a_document_that_is_not_a_policy)
{
	EgressRules r = {};
	char *err = NULL;

	ASSERT_TRUE(egress_rules_load("/nonexistent/policy.json", &r, &err) < 0);
	ASSERT_EQ(r.n_patterns, 0);
	/* Not the policy file's shape: the one reader refuses it whole, with a reason. */
	ASSERT_TRUE(load_doc("{\"declaredCapabilities\":[5]}", &r, &err) < 0);
	ASSERT_TRUE(err != NULL);
	ASSERT_EQ(r.n_patterns, 0);
	free(err);
	err = NULL;
	ASSERT_TRUE(load_doc("{}", &r, &err) < 0);
	free(err);
}

/* A policy file as the one writer makes it (capability_policy_encode()). */
TEST(rules_load_from_a_file)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	_cleanup_free_ char *text = NULL, *dup = NULL, *err = NULL;
	json_t *caps = json_pack("[s, s]", "network:host:a.test", "filesystem:write:/tmp/x");
	PolicyInput in = {.app_name = "egress", .cwd = "/app/egress", .capabilities = caps};
	EgressRules r = {};
	size_t len;

	ASSERT_OK(capability_policy_compile(&in, NULL, NULL, &p));
	json_decref(caps);
	ASSERT_OK(capability_policy_encode(p, &text, &len));
	ASSERT_OK(load_doc(text, &r, &err));
	ASSERT_TRUE(egress_rules_allow(&r, "a.test", 443));
	ASSERT_FALSE(egress_rules_allow(&r, "b.test", 443));
	egress_rules_done(&r);
	/* Duplicate keys are refused. */
	ASSERT_TRUE(asprintf(&dup, "{\"schema\":2,%s", text + 1) > 0);
	ASSERT_TRUE(load_doc(dup, &r, &err) < 0);
	ASSERT_EQ(r.n_patterns, 0);
}

static EgressHostKind classify(const char *host, char *out)
{
	strcpy(out, host);
	return egress_host_normalize(out);
}

TEST(host_classification)
{
	char h[300];

	ASSERT_EQ(classify("Example.COM", h), EGRESS_HOST_NAME);
	ASSERT_STREQ(h, "example.com");
	ASSERT_EQ(classify("93.184.215.14", h), EGRESS_HOST_IPV4);
	ASSERT_EQ(classify("198.51.100.2", h), EGRESS_HOST_IPV4);
	/* SPEC 6.1's blocked list, at the edges of each range. */
	ASSERT_EQ(classify("0.1.2.3", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("10.0.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("127.0.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("169.254.169.254", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("172.16.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("172.31.255.255", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("172.32.0.1", h), EGRESS_HOST_IPV4);
	ASSERT_EQ(classify("172.15.255.255", h), EGRESS_HOST_IPV4);
	ASSERT_EQ(classify("192.168.1.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("100.64.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("100.127.255.255", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("100.128.0.1", h), EGRESS_HOST_IPV4);
	ASSERT_EQ(classify("224.0.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("255.255.255.255", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("223.255.255.255", h), EGRESS_HOST_IPV4);
	/* Forms a resolver reads as an address but a person may not. */
	ASSERT_EQ(classify("2130706433", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("0x7f.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("010.0.0.1", h), EGRESS_HOST_IPV4_BLOCKED);
	ASSERT_EQ(classify("93.184.215", h), EGRESS_HOST_IPV4_BLOCKED);
	/* IPv6 literals, all refused, mapped ones included. */
	ASSERT_EQ(classify("[::1]", h), EGRESS_HOST_IPV6);
	ASSERT_STREQ(h, "::1");
	ASSERT_EQ(classify("[::FFFF:10.0.0.1]", h), EGRESS_HOST_IPV6);
	ASSERT_STREQ(h, "::ffff:10.0.0.1");
	ASSERT_EQ(classify("[2001:db8::1]", h), EGRESS_HOST_IPV6);
	ASSERT_EQ(classify("[not-v6]", h), EGRESS_HOST_INVALID);
	/* Not host names. */
	ASSERT_EQ(classify("", h), EGRESS_HOST_INVALID);
	ASSERT_EQ(classify("a_b.test", h), EGRESS_HOST_INVALID);
	ASSERT_EQ(classify("a b", h), EGRESS_HOST_INVALID);
	memset(h, 'a', 254);
	h[254] = '\0';
	ASSERT_EQ(egress_host_normalize(h), EGRESS_HOST_INVALID);
	memset(h, 'a', 253);
	h[253] = '\0';
	ASSERT_EQ(egress_host_normalize(h), EGRESS_HOST_NAME);
}

static HttpHeadStatus parse(const char *text, HttpRequest *req, char *err)
{
	return http_request_parse(text, strlen(text), req, err, 256);
}

TEST(connect_heads)
{
	HttpRequest req = {};
	char err[256];

	ASSERT_EQ(parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nTLS",
			&req, err),
		  HTTP_HEAD_OK);
	ASSERT_TRUE(req.connect);
	ASSERT_STREQ(req.host, "example.com");
	ASSERT_EQ(req.port, 443);
	ASSERT_EQ(req.head_size,
		  strlen("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"));
	http_request_done(&req);

	ASSERT_EQ(parse("CONNECT example.com HTTP/1.0\n\n", &req, err), HTTP_HEAD_OK);
	ASSERT_EQ(req.port, 443);
	ASSERT_EQ(req.minor, 0);
	http_request_done(&req);

	ASSERT_EQ(parse("CONNECT [::ffff:10.0.0.1]:8443 HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_OK);
	ASSERT_STREQ(req.host, "[::ffff:10.0.0.1]");
	ASSERT_EQ(req.port, 8443);
	http_request_done(&req);

	ASSERT_EQ(parse("CONNECT example.com:0 HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("CONNECT example.com:65536 HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("CONNECT example.com:44x HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("CONNECT :443 HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("CONNECT example.com:443 HTTP/2.0\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("CONNECT example.com:443 HTTP/1.1\r\n", &req, err), HTTP_HEAD_INCOMPLETE);
	ASSERT_EQ(parse("CONNECT example.com:443 HTTP/1.1\r\nX: 1\r\n", &req, err),
		  HTTP_HEAD_INCOMPLETE);
}

TEST(plain_http_heads)
{
	HttpRequest req = {};
	char err[256];

	ASSERT_EQ(
		parse("GET http://Example.com/a/b?c=d#frag HTTP/1.1\r\nX-A: 1\r\n\r\n", &req, err),
		HTTP_HEAD_OK);
	ASSERT_FALSE(req.connect);
	ASSERT_STREQ(req.method, "GET");
	ASSERT_STREQ(req.host, "Example.com");
	ASSERT_EQ(req.port, 80);
	ASSERT_STREQ(req.path, "/a/b?c=d");
	ASSERT_EQ(req.n_headers, 1);
	ASSERT_STREQ(req.headers[0].name, "X-A");
	ASSERT_STREQ(req.headers[0].value, "1");
	http_request_done(&req);

	ASSERT_EQ(parse("GET HTTP://h.test:8080 HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_OK);
	ASSERT_EQ(req.port, 8080);
	ASSERT_STREQ(req.path, "/");
	http_request_done(&req);

	ASSERT_EQ(parse("GET http://h.test?q=1 HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_OK);
	ASSERT_STREQ(req.path, "/?q=1");
	http_request_done(&req);

	ASSERT_EQ(parse("GET /relative HTTP/1.1\r\nHost: h.test\r\n\r\n", &req, err),
		  HTTP_HEAD_NOT_ABSOLUTE);
	ASSERT_EQ(parse("GET https://h.test/ HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("GET http://user:pw@h.test/ HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("GET http:///x HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("G@T http://h.test/ HTTP/1.1\r\n\r\n", &req, err), HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("GET http://h.test/ HTTP/1.1\r\n folded\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("GET http://h.test/ HTTP/1.1\r\nNo colon\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("GET http://h.test/ HTTP/1.1\r\nX: a\x01\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("\r\nGET http://h.test/ HTTP/1.1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
}

TEST(body_framing_and_smuggling)
{
	HttpRequest req = {};
	char err[256];

	ASSERT_EQ(
		parse("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
		      &req, err),
		HTTP_HEAD_OK);
	ASSERT_EQ(req.content_length, 5);
	ASSERT_FALSE(req.chunked);
	http_request_done(&req);
	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &req,
			err),
		  HTTP_HEAD_OK);
	ASSERT_TRUE(req.chunked);
	http_request_done(&req);
	ASSERT_EQ(
		parse("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
		      &req, err),
		HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(
		parse("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		      &req, err),
		HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
			&req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", &req, err),
		  HTTP_HEAD_BAD_REQUEST);
}

/* A header Connection names is dropped on the way (it is hop-by-hop); a framing header must
 * never be, or the body the broker forwards would reach the server as a request of its own. */
TEST(connection_may_not_name_a_framing_header)
{
	static const char *const heads[] = {
		"POST http://h.test/ HTTP/1.1\r\nConnection: content-length\r\n"
		"Content-Length: 34\r\n\r\n",
		"POST http://h.test/ HTTP/1.1\r\nConnection: close, Content-Length\r\n"
		"Content-Length: 34\r\n\r\n",
		"POST http://h.test/ HTTP/1.1\r\nContent-Length: 34\r\nConnection: x\r\n"
		"connection: keep-alive ,\tCONTENT-LENGTH \r\n\r\n",
		"POST http://h.test/ HTTP/1.1\r\nConnection: transfer-encoding\r\n"
		"Transfer-Encoding: chunked\r\n\r\n",
		"GET http://h.test/ HTTP/1.1\r\nConnection: host\r\nHost: h.test\r\n\r\n",
		/* Naming it is refused even when the header itself is absent. */
		"GET http://h.test/ HTTP/1.1\r\nConnection: Content-Length\r\n\r\n",
	};
	static const char smuggle[] =
		"POST http://h.test/ HTTP/1.1\r\nConnection: content-length\r\nContent-Length: 34\r\n"
		"\r\nGET /admin HTTP/1.1\r\nHost: h\r\n\r\n";
	HttpRequest req = {};
	char err[256];

	for (size_t i = 0; i < ELEMENTSOF(heads); i++) {
		err[0] = '\0';
		if (parse(heads[i], &req, err) != HTTP_HEAD_BAD_REQUEST)
			TEST_FAIL("accepted: %s", heads[i]);
		ASSERT_TRUE(strstr(err, "Connection") != NULL);
	}
	ASSERT_EQ(parse(smuggle, &req, err), HTTP_HEAD_BAD_REQUEST);
	ASSERT_STREQ(
		err,
		"the Connection header names Content-Length, which frames the request: a proxy that "
		"dropped it would pass the body on as a request of its own; remove it from Connection");
	/* Other names are still fine, and still dropped. */
	ASSERT_EQ(parse("GET http://h.test/ HTTP/1.1\r\nConnection: close, x-content-length, "
			"content-lengths\r\nX-Content-Length: 1\r\n\r\n",
			&req, err),
		  HTTP_HEAD_OK);
	http_request_done(&req);
	/* CONNECT forwards no header: nothing is dropped, nothing to refuse. */
	ASSERT_EQ(parse("CONNECT h.test:443 HTTP/1.1\r\nConnection: content-length\r\n\r\n", &req,
			err),
		  HTTP_HEAD_OK);
	http_request_done(&req);
}

/* RFC 9112 6.1: an HTTP/1.0 server does not know chunked framing, and reads the chunks as
 * whatever it likes, a second request included. */
TEST(http_1_0_may_not_be_chunked)
{
	HttpRequest req = {};
	char err[256];

	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", &req,
			err),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_TRUE(strstr(err, "HTTP/1.0") != NULL);
	ASSERT_EQ(parse("POST http://h.test/ HTTP/1.0\r\nContent-Length: 3\r\n\r\n", &req, err),
		  HTTP_HEAD_OK);
	http_request_done(&req);
}

TEST(head_caps)
{
	HttpRequest req = {};
	char err[256];
	char *big = malloc(HTTP_HEAD_MAX + 64);
	size_t n;

	/* One byte over the cap without an end: too large, not incomplete. */
	n = (size_t)sprintf(big, "GET http://h.test/ HTTP/1.1\r\nX: ");
	memset(big + n, 'a', HTTP_HEAD_MAX - n);
	ASSERT_EQ(http_request_parse(big, HTTP_HEAD_MAX, &req, err, sizeof(err)),
		  HTTP_HEAD_TOO_LARGE);
	/* Too many header lines. */
	n = (size_t)sprintf(big, "GET http://h.test/ HTTP/1.1\r\n");
	for (int i = 0; i < HTTP_HEADERS_MAX + 1; i++)
		n += (size_t)sprintf(big + n, "X%d: y\r\n", i);
	n += (size_t)sprintf(big + n, "\r\n");
	ASSERT_EQ(http_request_parse(big, n, &req, err, sizeof(err)), HTTP_HEAD_TOO_LARGE);
	/* Exactly HTTP_HEADERS_MAX is fine. */
	n = (size_t)sprintf(big, "GET http://h.test/ HTTP/1.1\r\n");
	for (int i = 0; i < HTTP_HEADERS_MAX; i++)
		n += (size_t)sprintf(big + n, "X%d: y\r\n", i);
	n += (size_t)sprintf(big + n, "\r\n");
	ASSERT_EQ(http_request_parse(big, n, &req, err, sizeof(err)), HTTP_HEAD_OK);
	http_request_done(&req);
	free(big);
}

TEST(forward_head_strips_hop_by_hop_and_forces_host)
{
	HttpRequest req = {};
	char err[256], *out = NULL;
	ssize_t n;

	ASSERT_EQ(
		parse("POST http://allowed.test:8080/p?q HTTP/1.1\r\n"
		      "Host: evil.test\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: 5\r\n"
		      "Proxy-Authorization: Basic Zm9v\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
		      "Trailer: X\r\nUpgrade: h2c\r\nX-Secret: 1\r\nTransfer-Encoding: chunked\r\n"
		      "Accept: */*\r\nhost: evil2.test\r\n\r\n",
		      &req, err),
		HTTP_HEAD_OK);
	n = http_request_forward_head(&req, "allowed.test", &out);
	ASSERT_TRUE(n > 0);
	ASSERT_STREQ(out, "POST /p?q HTTP/1.1\r\nAccept: */*\r\nHost: allowed.test:8080\r\n"
			  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	free(out);
	http_request_done(&req);

	ASSERT_EQ(parse("GET http://a.test/ HTTP/1.0\r\nUser-Agent: t\r\n\r\n", &req, err),
		  HTTP_HEAD_OK);
	n = http_request_forward_head(&req, "a.test", &out);
	ASSERT_STREQ(
		out,
		"GET / HTTP/1.0\r\nUser-Agent: t\r\nHost: a.test\r\nConnection: close\r\n\r\n");
	free(out);
	http_request_done(&req);
}

/* A string literal, NULs included. */
#define FEED(b, lit) http_body_feed(b, lit, sizeof(lit) - 1)

static void body_of(const char *head, HttpBody *b)
{
	HttpRequest req = {};
	char err[256];

	if (parse(head, &req, err) != HTTP_HEAD_OK)
		TEST_FAIL("parse: %s", err);
	http_body_init(b, &req);
	http_request_done(&req);
}

TEST(content_length_body_ends_where_it_says)
{
	HttpBody b;

	body_of("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &b);
	ASSERT_EQ(http_body_feed(&b, "abc", 3), 3);
	ASSERT_FALSE(http_body_done(&b));
	ASSERT_EQ(http_body_feed(&b, "deGET /next", 11), 2);
	ASSERT_TRUE(http_body_done(&b));
	ASSERT_EQ(http_body_feed(&b, "more", 4), 0);

	body_of("GET http://h.test/ HTTP/1.1\r\n\r\n", &b);
	ASSERT_TRUE(http_body_done(&b));
	ASSERT_EQ(http_body_feed(&b, "GET /smuggled", 13), 0);
}

TEST(chunked_body_ends_after_the_trailer)
{
	static const char body[] = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
	HttpBody b;

	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_EQ(http_body_feed(&b, body, strlen(body)), (ssize_t)strlen(body));
	ASSERT_TRUE(http_body_done(&b));

	/* Byte by byte, with what follows left out. */
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	for (size_t i = 0; i < strlen(body); i++)
		ASSERT_EQ(http_body_feed(&b, body + i, 1), 1);
	ASSERT_TRUE(http_body_done(&b));
	ASSERT_EQ(http_body_feed(&b, "GET", 3), 0);

	/* Bare LF line ends and no trailer. */
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_EQ(http_body_feed(&b, "3\nabc\n0\n\nGET", 12), 9);
	ASSERT_TRUE(http_body_done(&b));

	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(http_body_feed(&b, "zz\r\n", 4), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(http_body_feed(&b, "\r\n", 2), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(http_body_feed(&b, "3\r\nabcX", 7), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(http_body_feed(&b, "fffffffffffffffff\r\n", 19), EBADMSG);
	/* A CR is a line end's only: one elsewhere is where another parser would end the line
	 * (and the chunk size, and so the body) and this one would not. */
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "0\r1\r\nx\r\n0\r\n\r\n"), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "1;a=\rb\r\n"), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "0\r\nX: 1\r2\r\n\r\n"), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "0\r\n\r\r\n"), EBADMSG);
	/* Nor a control character in an extension or a trailer. */
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "1;a\0\r\nx\r\n"), EBADMSG);
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_ERROR(FEED(&b, "0\r\nX: \x01\r\n\r\n"), EBADMSG);
	/* Split anywhere, a CRLF is still one line end; a tab in an extension is fine. */
	body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
	ASSERT_EQ(FEED(&b, "1\t;e\r"), 5);
	ASSERT_EQ(FEED(&b, "\nx\r\n0\r"), 6);
	ASSERT_EQ(FEED(&b, "\nT: 1\r"), 6);
	ASSERT_EQ(FEED(&b, "\n\r"), 2);
	ASSERT_EQ(FEED(&b, "\nGET"), 1);
	ASSERT_TRUE(http_body_done(&b));
	{
		char line[HTTP_CHUNK_LINE_MAX + 8];

		body_of("POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b);
		memset(line, ' ', sizeof(line));
		line[0] = '1';
		ASSERT_ERROR(http_body_feed(&b, line, sizeof(line)), EBADMSG);
	}
}

int main(void)
{
	return tests_run();
}
