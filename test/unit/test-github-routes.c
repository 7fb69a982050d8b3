/* SPDX-License-Identifier: Apache-2.0 */
/* The GitHub broker's pure parts: path normalisation, the route table, the capability a
 * request asks for, the denial bodies, the origin-form head, the head it forwards, the
 * response head it passes back, and the per-boot CA. */
#include <jansson.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#include "http-head.h"
#include "macros.h"
#include "policy.h"
#include "routes.h"
#include "tests.h"
#include "tls.h"

static char *norm(const char *target)
{
	char *p = NULL;
	int r = github_path_normalize(target, &p);

	return r < 0 ? NULL : p;
}

/* The capability @method @target asks for, or "(no route)". */
static char *asks(const char *method, const char *target)
{
	GithubRoute r = {};
	char *out;

	if (github_route_classify(method, target, &r) < 0)
		return strdup("(no route)");
	out = strdup(r.requested);
	github_route_done(&r);
	return out;
}

#define ASSERT_ASKS(method, target, want)                 \
	do {                                              \
		_cleanup_free_ char *_got = asks(method, target); \
		ASSERT_STREQ(_got, want);                 \
	} while (0)

#define ASSERT_NORM(target, want)                      \
	do {                                           \
		_cleanup_free_ char *_got = norm(target); \
		ASSERT_STREQ(_got, want);              \
	} while (0)

#define ASSERT_NO_ROUTE(target)                        \
	do {                                           \
		_cleanup_free_ char *_got = norm(target); \
		if (_got)                              \
			TEST_FAIL("%s normalised to %s", target, _got); \
	} while (0)

TEST(normalise_drops_dot_and_empty_segments_and_resolves_dotdot)
{
	ASSERT_NORM("/repos/o/r", "/repos/o/r");
	ASSERT_NORM("/repos/o/r/", "/repos/o/r");
	ASSERT_NORM("//repos//o/./r", "/repos/o/r");
	ASSERT_NORM("/repos/o/r/issues/../pulls", "/repos/o/r/pulls");
	ASSERT_NORM("/repos/o/r/../../../user/emails", "/user/emails");
	ASSERT_NORM("/repos/o/r?per_page=5&q=a/../b", "/repos/o/r?per_page=5&q=a/../b");
	ASSERT_NORM("/", "/");
	ASSERT_NORM("/a/..", "/");
	/* Encoded dots are dots. */
	ASSERT_NORM("/repos/o/r/%2e%2E/x", "/repos/o/x");
	ASSERT_NORM("/repos/%2e/o", "/repos/o");
	/* What is kept is the segment as written. */
	ASSERT_NORM("/repos/o/r/contents/a%20b", "/repos/o/r/contents/a%20b");
	ASSERT_NORM("/repos/o/r%C3%A9", "/repos/o/r%C3%A9");
}

TEST(normalise_refuses_what_could_be_read_two_ways)
{
	ASSERT_NO_ROUTE("/..");
	ASSERT_NO_ROUTE("/repos/../..");
	ASSERT_NO_ROUTE("/repos/o/r/../../../../user");
	ASSERT_NO_ROUTE("/%2e%2e/user");
	ASSERT_NO_ROUTE("/repos/o%2fr/x");
	ASSERT_NO_ROUTE("/repos/o%2Fr/x");
	ASSERT_NO_ROUTE("/repos/o/r\\..\\..\\user");
	ASSERT_NO_ROUTE("/repos/o/r%5c..%5cuser");
	ASSERT_NO_ROUTE("/repos/o/r/%");
	ASSERT_NO_ROUTE("/repos/o/r/%4");
	ASSERT_NO_ROUTE("/repos/o/r/%zz");
	ASSERT_NO_ROUTE("/repos/o/r/%00");
	ASSERT_NO_ROUTE("/repos/o/r/%0a");
	ASSERT_NO_ROUTE("/repos/o/r/%ff");	   /* not UTF-8 */
	ASSERT_NO_ROUTE("/repos/o/r/%c0%af");	   /* overlong '/' */
	ASSERT_NO_ROUTE("/user/%e2%80%a8x");	   /* U+2028: no declarable scope holds it */
	ASSERT_NO_ROUTE("/user/a%E2%80%A9");	   /* U+2029 */
	ASSERT_NO_ROUTE("/repos/o/r#/../../user"); /* a fragment is never sent */
	ASSERT_NO_ROUTE("repos/o/r");
	ASSERT_NO_ROUTE("");
	ASSERT_NO_ROUTE("*");
}

TEST(route_table_of_spec_6_2)
{
	ASSERT_ASKS("GET", "/repos/o/r", "github:read:repos");
	ASSERT_ASKS("HEAD", "/repos/o/r", "github:read:repos");
	ASSERT_ASKS("GET", "/repos/o/r/issues", "github:read:issues");
	ASSERT_ASKS("POST", "/repos/o/r/issues", "github:write:issues");
	ASSERT_ASKS("GET", "/repos/o/r/issues/1/comments", "github:read:issues");
	ASSERT_ASKS("POST", "/repos/o/r/pulls", "github:write:pulls");
	ASSERT_ASKS("DELETE", "/repos/o/r", "github:write:repos");
	ASSERT_ASKS("get", "/repos/o/r", "github:write:repos"); /* methods are case-sensitive */
	ASSERT_ASKS("GET", "/user", "github:read:user");
	ASSERT_ASKS("GET", "/user/emails", "github:read:user:emails");
	ASSERT_ASKS("GET", "/user/repos/x", "github:read:user:repos");
	ASSERT_ASKS("GET", "/users/x", "github:read:users");
	ASSERT_ASKS("GET", "/users/x/repos", "github:read:users:repos");
	ASSERT_ASKS("GET", "/orgs/x", "github:read:orgs");
	ASSERT_ASKS("GET", "/orgs/x/members", "github:read:orgs:members");
	ASSERT_ASKS("GET", "/gists", "github:read:gists");
	ASSERT_ASKS("POST", "/gists/1/star", "github:write:gists");
	ASSERT_ASKS("GET", "/notifications", "github:read:notifications");
	ASSERT_ASKS("PUT", "/notifications/threads/1", "github:write:notifications");
	ASSERT_ASKS("GET", "/search/code?q=x", "github:read:search:code");
	/* And what no route covers. */
	ASSERT_ASKS("GET", "/emojis", "(no route)");
	ASSERT_ASKS("GET", "/", "(no route)");
	ASSERT_ASKS("GET", "/repos", "(no route)");
	ASSERT_ASKS("GET", "/repos/o", "(no route)");
	ASSERT_ASKS("GET", "/users", "(no route)");
	ASSERT_ASKS("GET", "/orgs", "(no route)");
	ASSERT_ASKS("GET", "/search", "(no route)");
	ASSERT_ASKS("GET", "/search/code/x", "(no route)");
	ASSERT_ASKS("GET", "/gistsx", "(no route)");
	ASSERT_ASKS("GET", "/app/installations", "(no route)");
	/* Traversal resolves before the table, so it asks for where it lands. */
	ASSERT_ASKS("GET", "/repos/o/r/../../../user/emails", "github:read:user:emails");
	ASSERT_ASKS("GET", "/repos/o/r/%2e%2e/%2e%2e/%2e%2e/user", "github:read:user");
	ASSERT_ASKS("GET", "/repos/o/../../../user", "(no route)");
	/* Segments are classified decoded: an escape cannot dodge a scope. */
	ASSERT_ASKS("GET", "/%72epos/o/r/%69ssues", "github:read:issues");
}

static CapabilityPolicy *policy_of(const char *caps_json)
{
	json_t *caps = json_loads(caps_json, 0, NULL), *v;
	CapabilityPolicy *p = calloc(1, sizeof(*p));
	size_t i;

	json_array_foreach(caps, i, v)
		ASSERT_OK(policy_strings_add(&p->declared, json_string_value(v),
					     json_string_length(v)));
	json_decref(caps);
	return p;
}

TEST(declared_capabilities_cover_by_glob)
{
	CapabilityPolicy *p = policy_of("[\"github:read:repos\", \"github:read:issues\", "
					"\"network:host:example.com\", \"github:write:user:*\"]");

	ASSERT_EQ(github_policy_count(p), 3);
	ASSERT_TRUE(github_policy_allows(p, "github:read:repos"));
	ASSERT_TRUE(github_policy_allows(p, "github:read:issues"));
	ASSERT_FALSE(github_policy_allows(p, "github:write:issues"));
	ASSERT_FALSE(github_policy_allows(p, "github:write:pulls"));
	ASSERT_FALSE(github_policy_allows(p, "github:read:user"));
	ASSERT_FALSE(github_policy_allows(p, "github:read:user:emails"));
	ASSERT_TRUE(github_policy_allows(p, "github:write:user:emails"));
	ASSERT_FALSE(github_policy_allows(p, "github:write:user"));
	ASSERT_FALSE(github_policy_allows(p, "network:host:example.com"));
	ASSERT_FALSE(github_policy_allows(NULL, "github:read:repos"));
	capability_policy_free(p);
	p = policy_of("[\"github:read:*\"]");
	ASSERT_TRUE(github_policy_allows(p, "github:read:user:emails"));
	ASSERT_FALSE(github_policy_allows(p, "github:write:repos"));
	capability_policy_free(p);
	/* "*" is not a wildcard in the action. */
	p = policy_of("[\"github:*:repos\"]");
	ASSERT_FALSE(github_policy_allows(p, "github:read:repos"));
	capability_policy_free(p);
}

TEST(denial_bodies_word_for_word)
{
	_cleanup_free_ char *a = github_denial_no_route("GET", "/emojis");
	_cleanup_free_ char *b = github_denial_not_covered("github:read:user:emails");
	_cleanup_free_ char *c = github_denial_no_route("GET", "/a\"b\\c");

	ASSERT_STREQ(a, "{\"message\":\"denied: no route covers GET /emojis — this broker maps paths to capabilities explicitly and denies by default\"}");
	ASSERT_STREQ(b, "{\"message\":\"denied: no declared capability covers github:read:user:emails\"}");
	ASSERT_STREQ(c, "{\"message\":\"denied: no route covers GET /a\\\"b\\\\c — this broker maps paths to capabilities explicitly and denies by default\"}");
}

TEST(origin_form_requests)
{
	static const char in[] = "GET /repos/o/r?x=1 HTTP/1.1\r\nHost: api.github.com\r\n"
				 "Authorization: token app-placeholder\r\nAccept: */*\r\n"
				 "Proxy-Authorization: x\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\r\n";
	static const char *const drop[] = {"authorization", NULL};
	HttpRequest req = {};
	char err[256] = "", *out = NULL;
	ssize_t n;

	ASSERT_EQ(http_origin_request_parse(in, strlen(in), &req, err, sizeof(err)), HTTP_HEAD_OK);
	ASSERT_STREQ(req.path, "/repos/o/r?x=1");
	ASSERT_FALSE(req.connect);
	n = http_request_forward(&req,
				 &(HttpForward){.host = "api.github.com",
						.path = "/repos/o/r?x=1",
						.drop = drop,
						.extra = "Authorization: Bearer real\r\n"},
				 &out);
	ASSERT_TRUE(n > 0);
	ASSERT_STREQ(out, "GET /repos/o/r?x=1 HTTP/1.1\r\nAccept: */*\r\nHost: api.github.com\r\n"
			  "Authorization: Bearer real\r\nConnection: close\r\n\r\n");
	free(out);
	http_request_done(&req);

	ASSERT_EQ(http_origin_request_parse("GET http://api.github.com/ HTTP/1.1\r\n\r\n", 39, &req,
					    err, sizeof(err)),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(http_origin_request_parse("CONNECT a:443 HTTP/1.1\r\n\r\n", 26, &req, err,
					    sizeof(err)),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(http_origin_request_parse("OPTIONS * HTTP/1.1\r\n\r\n", 22, &req, err,
					    sizeof(err)),
		  HTTP_HEAD_BAD_REQUEST);
	/* The smuggling checks are the proxy's. */
	{
		static const char both[] = "POST /repos/o/r/issues HTTP/1.1\r\nContent-Length: 3\r\n"
					   "Transfer-Encoding: chunked\r\n\r\n";

		ASSERT_EQ(http_origin_request_parse(both, strlen(both), &req, err, sizeof(err)),
			  HTTP_HEAD_BAD_REQUEST);
	}
	ASSERT_EQ(http_origin_request_parse("GET / HTTP/1.1\r\n", 16, &req, err, sizeof(err)),
		  HTTP_HEAD_INCOMPLETE);
}

TEST(response_heads_end_the_connection)
{
	static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n"
				 "Keep-Alive: timeout=5\r\nX-GitHub-Request-Id: 1\r\n\r\n{}";
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n\r\n";
	char *out = NULL;
	size_t len, used;
	int status;

	ASSERT_EQ(http_response_head_close(in, strlen(in), &out, &len, &used, &status), HTTP_HEAD_OK);
	ASSERT_EQ(status, 200);
	ASSERT_EQ(used, strlen(in) - 2);
	ASSERT_STREQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-GitHub-Request-Id: 1\r\n"
			  "Connection: close\r\n\r\n");
	free(out);
	ASSERT_EQ(http_response_head_close(cont, strlen(cont), &out, &len, &used, &status),
		  HTTP_HEAD_OK);
	ASSERT_EQ(status, 100);
	ASSERT_STREQ(out, "HTTP/1.1 100 Continue\r\n\r\n");
	free(out);
	ASSERT_EQ(http_response_head_close(cont + used, strlen(cont) - used, &out, &len, &used,
					   &status),
		  HTTP_HEAD_OK);
	ASSERT_EQ(status, 201);
	free(out);
	ASSERT_EQ(http_response_head_close("HTTP/1.1 200 OK\r\n", 17, &out, &len, &used, &status),
		  HTTP_HEAD_INCOMPLETE);
	ASSERT_EQ(http_response_head_close("HTTP/2 200\r\n\r\n", 14, &out, &len, &used, &status),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(http_response_head_close("HTTP/1.1 20 OK\r\n\r\n", 18, &out, &len, &used,
					   &status),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(http_response_head_close("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", 33, &out,
					   &len, &used, &status),
		  HTTP_HEAD_BAD_REQUEST);
	ASSERT_EQ(http_response_head_close("HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n", 26, &out, &len,
					   &used, &status),
		  HTTP_HEAD_BAD_REQUEST);
}

TEST(the_per_boot_ca_is_constrained_to_the_api_host)
{
	TlsCa ca = {};
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	BASIC_CONSTRAINTS *bc;
	char cn[256];

	ASSERT_OK(tls_ca_make("api.github.com", &ca));
	ASSERT_NOT_NULL(ca.ca);
	ASSERT_NOT_NULL(ca.leaf);
	X509_NAME_get_text_by_NID(X509_get_subject_name(ca.ca), NID_commonName, cn, sizeof(cn));
	ASSERT_STREQ(cn, TLS_CA_CN);
	bc = X509_get_ext_d2i(ca.ca, NID_basic_constraints, NULL, NULL);
	ASSERT_TRUE(bc && bc->ca);
	BASIC_CONSTRAINTS_free(bc);
	ASSERT_NOT_NULL(X509_get_ext_d2i(ca.ca, NID_name_constraints, NULL, NULL) ? (void *)1 : NULL);
	ASSERT_EQ(X509_check_host(ca.leaf, "api.github.com", 0, 0, NULL), 1);
	ASSERT_EQ(X509_check_host(ca.leaf, "github.com", 0, 0, NULL), 0);
	/* The leaf verifies under the CA, for TLS servers. */
	X509_STORE_add_cert(store, ca.ca);
	X509_STORE_CTX_init(ctx, store, ca.leaf, NULL);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	ASSERT_EQ(X509_verify_cert(ctx), 1);
	/* Valid for TLS_CA_DAYS days (and an hour before now). */
	ASSERT_TRUE(X509_cmp_time(X509_get0_notAfter(ca.ca), NULL) > 0);
	{
		time_t later = time(NULL) + (TLS_CA_DAYS + 1) * 24 * 3600;

		ASSERT_TRUE(X509_cmp_time(X509_get0_notAfter(ca.ca), &later) < 0);
	}
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	tls_ca_done(&ca);
}

int main(void)
{
	return tests_run();
}
