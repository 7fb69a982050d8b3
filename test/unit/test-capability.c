/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capability model (src/capability): the grammar and scope rules, the paths a policy
 * may grant, the policy compiler (SPEC 4.3, with reads confined for every app), the one
 * encoder and decoder, and the query the denial explainer asks.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capability.h"
#include "macros.h"
#include "policy.h"
#include "tests.h"

/* What every schema 2 policy reads, in order, as JSON list items and as summary text. */
#define BASELINE_JSON "\"/usr\",\"/bin\",\"/sbin\",\"/lib\",\"/etc\",\"/proc\",\"/dev\""
#define BASELINE_TEXT "/usr, /bin, /sbin, /lib, /etc, /proc, /dev"
#define NO_NETWORK "networkPorts=(none — network denied by default)"
#define WARNING "[berth:capability-policy] WARNING: "

static char warnings[16384];

static void collect(const char *line, void *userdata)
{
	size_t n = strlen(warnings);

	(void)userdata;
	snprintf(warnings + n, sizeof(warnings) - n, "%s\n", line);
}

/* Compile @caps_json (a JSON array, \u0000 allowed) with @in's other fields; cwd defaults
 * to /app. @resources_json may be NULL. */
static CapabilityPolicy *compile_in(PolicyInput in, const char *caps_json,
				    const char *resources_json)
{
	json_t *caps = json_loads(caps_json, JSON_ALLOW_NUL, NULL), *res = NULL;
	CapabilityPolicy *p = NULL;

	ASSERT_NOT_NULL(caps);
	if (resources_json) {
		res = json_loads(resources_json, JSON_DECODE_ANY, NULL);
		ASSERT_NOT_NULL(res);
	}
	in.capabilities = caps;
	in.resources = res;
	if (!in.cwd)
		in.cwd = "/app";
	ASSERT_OK(capability_policy_compile(&in, collect, NULL, &p));
	ASSERT_NOT_NULL(p);
	json_decref(caps);
	json_decref(res);
	return p;
}

static CapabilityPolicy *compile(const char *app, const char *caps_json, const char *resources_json)
{
	return compile_in((PolicyInput){.app_name = app}, caps_json, resources_json);
}

static char *encode(const CapabilityPolicy *p)
{
	char *text = NULL;
	size_t len = 0;

	ASSERT_OK(capability_policy_encode(p, &text, &len));
	ASSERT_NOT_NULL(text);
	ASSERT_EQ(len, strlen(text));
	return text;
}

/* One key of the policy's JSON, compact, objects' keys sorted. */
static char *key_json(const CapabilityPolicy *p, const char *key)
{
	json_t *doc = capability_policy_to_json(p);
	char *d;

	ASSERT_NOT_NULL(doc);
	d = json_dumps(json_object_get(doc, key), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	json_decref(doc);
	return d;
}

#define ASSERT_KEY(policy, key, json)                 \
	do {                                          \
		char *_d = key_json((policy), (key)); \
		ASSERT_STREQ(_d, (json));             \
		free(_d);                             \
	} while (0)

#define ASSERT_SUMMARY(policy, text)                          \
	do {                                                  \
		char *_s = capability_policy_summary(policy); \
		ASSERT_STREQ(_s, (text));                     \
		free(_s);                                     \
	} while (0)

/* --- the compiler ----------------------------------------------------------------------- */

TEST(notes_policy_bytes)
{
	CapabilityPolicy *p;
	char *text;

	warnings[0] = '\0';
	p = compile("notes", "[\"filesystem:write:/workspace\"]", NULL);
	text = encode(p);
	ASSERT_STREQ(text, "{\"appName\":\"notes\",\"bindPorts\":[],"
			   "\"cgroupLimits\":{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"},"
			   "\"declaredCapabilities\":[\"filesystem:write:/workspace\"],"
			   "\"meshPeers\":[],\"networkPorts\":[],\"networkUnrestricted\":false,"
			   "\"readPaths\":[" BASELINE_JSON ",\"/run/berth/notes\",\"/app\","
			   "\"/dev/null\",\"/tmp/notes\",\"/workspace\"],"
			   "\"schema\":2,"
			   "\"writePaths\":[\"/dev/null\",\"/tmp/notes\",\"/run/berth/notes\","
			   "\"/workspace\"]}");
	ASSERT_SUMMARY(p, "writePaths=/dev/null, /tmp/notes, /run/berth/notes, /workspace; "
			  "readPaths=" BASELINE_TEXT ", /run/berth/notes, /app, /dev/null, "
			  "/tmp/notes, /workspace; " NO_NETWORK);
	ASSERT_STREQ(warnings, "");
	ASSERT_STREQ(p->app_name, "notes");
	ASSERT_FALSE(p->network_unrestricted);
	free(text);
	capability_policy_free(p);
}

TEST(trailing_glob_stripped_and_duplicates_once)
{
	CapabilityPolicy *p;

	p = compile("a",
		    "[\"filesystem:write:/workspace/*\", \"filesystem:write:/workspace\","
		    " \"filesystem:write:/workspace/*\", \"filesystem:write:/tmp/a\","
		    " \"filesystem:read:/context/*\", \"filesystem:read:/context\"]",
		    NULL);
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\",\"/workspace\"]");
	ASSERT_KEY(p, "declaredCapabilities",
		   "[\"filesystem:write:/workspace/*\",\"filesystem:write:/workspace\","
		   "\"filesystem:write:/tmp/a\",\"filesystem:read:/context/*\","
		   "\"filesystem:read:/context\"]");
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/context\",\"/dev/null\","
		   "\"/tmp/a\",\"/workspace\"]");
	capability_policy_free(p);
}

TEST(reads_confined_for_every_app)
{
	CapabilityPolicy *p;

	/* No filesystem:read: at all: reads are still confined (schema 2). */
	p = compile("a", "[]", NULL);
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/dev/null\",\"/tmp/a\"]");
	ASSERT_SUMMARY(p, "writePaths=/dev/null, /tmp/a, /run/berth/a; readPaths=" BASELINE_TEXT
			  ", /run/berth/a, /app, /dev/null, /tmp/a; " NO_NETWORK);
	capability_policy_free(p);

	p = compile("a", "[\"github:read:repos\", \"filesystem:write:/workspace\"]", NULL);
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/run/berth/github-api-broker\","
		   "\"/dev/null\",\"/tmp/a\",\"/workspace\"]");
	capability_policy_free(p);

	p = compile("a", "[\"filesystem:read:/context/*\", \"filesystem:read:/workspace/docs\"]",
		    NULL);
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/context\",\"/workspace/docs\","
		   "\"/dev/null\",\"/tmp/a\"]");
	ASSERT_SUMMARY(
		p,
		"writePaths=/dev/null, /tmp/a, /run/berth/a; readPaths=" BASELINE_TEXT
		", /run/berth/a, /app, /context, /workspace/docs, /dev/null, /tmp/a; " NO_NETWORK);
	capability_policy_free(p);

	/* github:* adds the broker's directory after the working directory; /tmp is not in
	 * the baseline, only a declared read or the app's own /tmp/<app>. */
	p = compile("a", "[\"filesystem:read:/tmp\", \"github:read:repos\"]", NULL);
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/run/berth/github-api-broker\","
		   "\"/tmp\",\"/dev/null\",\"/tmp/a\"]");
	capability_policy_free(p);

	/* Another cwd, and the extra readable paths the caller adds. */
	p = compile_in((PolicyInput){.app_name = "b",
				     .cwd = "/app/b",
				     .extra_read = (const char *const[]){"/opt/share", NULL}},
		       "[\"filesystem:write:/workspace/b\"]", NULL);
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/b\",\"/app/b\",\"/opt/share\",\"/dev/null\","
		   "\"/tmp/b\",\"/workspace/b\"]");
	capability_policy_free(p);
}

TEST(network_ports)
{
	CapabilityPolicy *p;

	warnings[0] = '\0';
	p = compile("a",
		    "[\"network:connect:8090\", \"network:connect:443\", \"network:connect:8090\","
		    " \"network:connect:0\", \"network:connect:65536\", \"network:connect:http\","
		    " \"network:connect:127.0.0.1:8080\", \"network:connect:65535\","
		    " \"network:connect:-1\", \"network:connect:123456\"]",
		    NULL);
	ASSERT_KEY(p, "networkPorts", "[8090,443,65535]");
	ASSERT_KEY(p, "networkUnrestricted", "false");
	ASSERT_KEY(p, "bindPorts", "[]");
	ASSERT_SUMMARY(p, "writePaths=/dev/null, /tmp/a, /run/berth/a; readPaths=" BASELINE_TEXT
			  ", /run/berth/a, /app, /dev/null, /tmp/a; networkPorts=8090, 443, 65535");
	ASSERT_STREQ(
		warnings, WARNING
		"ignoring invalid network:connect scope \"0\" (expected a port 1-65535, or \"*\")\n" WARNING
		"ignoring invalid network:connect scope \"65536\" (expected a port 1-65535, or \"*\")\n" WARNING
		"ignoring invalid network:connect scope \"http\" (expected a port 1-65535, or \"*\")\n" WARNING
		"ignoring invalid network:connect scope \"127.0.0.1:8080\" (expected a port 1-65535, or \"*\")\n" WARNING
		"ignoring invalid network:connect scope \"-1\" (expected a port 1-65535, or \"*\")\n" WARNING
		"ignoring invalid network:connect scope \"123456\" (expected a port 1-65535, or \"*\")\n");
	/* An invalid scope is still a declared capability; it just widens nothing. */
	ASSERT_EQ(p->declared.n, 9);
	ASSERT_EQ(p->network_ports.n, 3);
	ASSERT_EQ(p->network_ports.v[0], 8090);
	capability_policy_free(p);
}

TEST(network_unrestricted)
{
	CapabilityPolicy *p;

	p = compile("browser", "[\"network:connect:*\", \"network:connect:443\"]", NULL);
	ASSERT_KEY(p, "networkUnrestricted", "true");
	ASSERT_KEY(p, "networkPorts", "[443]");
	ASSERT_TRUE(p->network_unrestricted);
	ASSERT_SUMMARY(
		p,
		"writePaths=/dev/null, /tmp/browser, /run/berth/browser; readPaths=" BASELINE_TEXT
		", /run/berth/browser, /app, /dev/null, /tmp/browser; "
		"networkPorts=* (unrestricted)");
	capability_policy_free(p);
}

TEST(terminal_and_bind_ports)
{
	CapabilityPolicy *p;

	p = compile("terminal", "[\"filesystem:write:/workspace\", \"terminal:attach:*\"]", NULL);
	ASSERT_KEY(p, "writePaths",
		   "[\"/dev/null\",\"/tmp/terminal\",\"/run/berth/terminal\",\"/workspace\","
		   "\"/dev/pts\",\"/dev/ptmx\"]");
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/terminal\",\"/app\",\"/dev/null\","
		   "\"/tmp/terminal\",\"/workspace\",\"/dev/pts\",\"/dev/ptmx\"]");
	ASSERT_KEY(p, "bindPorts", "[7681]");
	ASSERT_SUMMARY(
		p, "writePaths=/dev/null, /tmp/terminal, /run/berth/terminal, /workspace, "
		   "/dev/pts, /dev/ptmx; readPaths=" BASELINE_TEXT ", /run/berth/terminal, "
		   "/app, /dev/null, /tmp/terminal, /workspace, /dev/pts, /dev/ptmx; " NO_NETWORK
		   "; bindPorts=7681");
	capability_policy_free(p);

	/* Any terminal: capability, once. */
	p = compile("t", "[\"terminal:open:x\", \"terminal:attach:*\"]", NULL);
	ASSERT_KEY(p, "writePaths",
		   "[\"/dev/null\",\"/tmp/t\",\"/run/berth/t\",\"/dev/pts\",\"/dev/ptmx\"]");
	ASSERT_KEY(p, "bindPorts", "[7681]");
	capability_policy_free(p);

	p = compile_in((PolicyInput){.app_name = "a", .http_rpc_port = 8787}, "[]", NULL);
	ASSERT_KEY(p, "bindPorts", "[8787]");
	capability_policy_free(p);
	p = compile_in((PolicyInput){.app_name = "a", .http_rpc_port = 8787, .http_rpc_app = ""},
		       "[]", NULL);
	ASSERT_KEY(p, "bindPorts", "[8787]");
	capability_policy_free(p);
	p = compile_in((PolicyInput){.app_name = "a", .http_rpc_port = 8787, .http_rpc_app = "a"},
		       "[\"terminal:attach:*\"]", NULL);
	ASSERT_KEY(p, "bindPorts", "[8787,7681]");
	capability_policy_free(p);
	p = compile_in(
		(PolicyInput){.app_name = "a", .http_rpc_port = 8787, .http_rpc_app = "other"},
		"[]", NULL);
	ASSERT_KEY(p, "bindPorts", "[]");
	capability_policy_free(p);
	/* The terminal's own port, named by the RPC setting too, is bound once. */
	p = compile_in((PolicyInput){.app_name = "a", .http_rpc_port = 7681},
		       "[\"terminal:attach:*\"]", NULL);
	ASSERT_KEY(p, "bindPorts", "[7681]");
	capability_policy_free(p);
}

TEST(mesh_peers)
{
	CapabilityPolicy *p;

	p = compile("a",
		    "[\"network:peer:laptop-*\", \"network:connect:8090\", \"network:peer:x\"]",
		    NULL);
	ASSERT_KEY(p, "meshPeers", "[\"laptop-*\",\"x\"]");
	ASSERT_KEY(p, "networkPorts", "[4875,8090]");
	ASSERT_SUMMARY(p, "writePaths=/dev/null, /tmp/a, /run/berth/a; readPaths=" BASELINE_TEXT
			  ", /run/berth/a, /app, /dev/null, /tmp/a; networkPorts=4875, 8090; "
			  "meshPeers=laptop-*, x");
	capability_policy_free(p);
	p = compile_in((PolicyInput){.app_name = "a", .mesh_port = 5000}, "[\"network:peer:x\"]",
		       NULL);
	ASSERT_KEY(p, "networkPorts", "[5000]");
	capability_policy_free(p);
}

TEST(malformed_capabilities_skipped_with_a_warning)
{
	CapabilityPolicy *p;

	warnings[0] = '\0';
	p = compile("a",
		    "[\"Filesystem:write:/workspace\", \"filesystem:write\", 42, \"a:b:c\\nd\","
		    " \"a::c\", \"x:y:z\", null, {\"k\": 1}, \"a:b:c\\rd\", \"a:b:\\u2028\"]",
		    NULL);
	ASSERT_KEY(p, "declaredCapabilities", "[\"x:y:z\"]");
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\"]");
	ASSERT_STREQ(
		warnings, WARNING
		"ignoring malformed capability string \"Filesystem:write:/workspace\" (capability must be 'namespace:action:scope')\n" WARNING
		"ignoring malformed capability string \"filesystem:write\" (capability must be 'namespace:action:scope')\n" WARNING
		"ignoring malformed capability string 42 (capability must be a string)\n" WARNING
		"ignoring malformed capability string \"a:b:c\\nd\" (capability must be 'namespace:action:scope')\n" WARNING
		"ignoring malformed capability string \"a::c\" (capability must be 'namespace:action:scope')\n" WARNING
		"ignoring malformed capability string null (capability must be a string)\n" WARNING
		"ignoring malformed capability string {\"k\":1} (capability must be a string)\n" WARNING
		"ignoring malformed capability string \"a:b:c\\rd\" (capability must be 'namespace:action:scope')\n" WARNING
		"ignoring malformed capability string \"a:b:\xe2\x80\xa8\" (capability must be 'namespace:action:scope')\n");
	capability_policy_free(p);
}

TEST(filesystem_scopes_revalidated)
{
	CapabilityPolicy *p;

	warnings[0] = '\0';
	p = compile("a",
		    "[\"filesystem:write:/etc\", \"filesystem:write:/workspace/../etc\","
		    " \"filesystem:read:/\", \"filesystem:write:/workspace/*/src\","
		    " \"filesystem:write:workspace\", \"filesystem:write:/work\\u0000space\","
		    " \"filesystem:write:/workspace/\", \"filesystem:read:/*\","
		    " \"filesystem:write:/*\", \"filesystem:read:/etc\","
		    " \"filesystem:read:/run/berth/other\", \"filesystem:delete:/etc\"]",
		    NULL);
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\"]");
	ASSERT_KEY(p, "readPaths",
		   "[" BASELINE_JSON ",\"/run/berth/a\",\"/app\",\"/dev/null\",\"/tmp/a\"]");
	/* Only filesystem:read and filesystem:write scopes are checked. */
	ASSERT_KEY(p, "declaredCapabilities", "[\"filesystem:delete:/etc\"]");
	ASSERT_STREQ(
		warnings, WARNING
		"ignoring capability \"filesystem:write:/etc\" — filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc\"\n" WARNING
		"ignoring capability \"filesystem:write:/workspace/../etc\" — filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace/../etc\"\n" WARNING
		"ignoring capability \"filesystem:read:/\" — filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead\n" WARNING
		"ignoring capability \"filesystem:write:/workspace/*/src\" — filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got \"/workspace/*/src\"\n" WARNING
		"ignoring capability \"filesystem:write:workspace\" — filesystem path must be absolute (start with \"/\"), got \"workspace\"\n" WARNING
		"ignoring capability \"filesystem:write:/work\\u0000space\" (capability must not contain a NUL byte)\n" WARNING
		"ignoring capability \"filesystem:write:/workspace/\" — filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace/\"\n" WARNING
		"ignoring capability \"filesystem:read:/*\" — filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead\n" WARNING
		"ignoring capability \"filesystem:write:/*\" — filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead\n" WARNING
		"ignoring capability \"filesystem:read:/etc\" — filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc\"\n" WARNING
		"ignoring capability \"filesystem:read:/run/berth/other\" — filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/run/berth/other\"\n");
	capability_policy_free(p);
}

/* The issue for a filesystem scope, or NULL when acceptable. */
static char *scope_issue(const char *s, size_t len)
{
	char *issue = NULL;

	ASSERT_OK(capability_fs_scope_issue(s, len, &issue));
	return issue;
}

TEST(fs_scope_examples_of_spec_1_4)
{
	static const char *const accepted[] = {
		"/workspace",	  "/workspace/*", "/workspace/packages/x/boundary-app-a",
		"/context",	  "/tmp/my-app",  "/app",
		"/tmp/*",	  "/app/a b",	  "/workspace/.hidden",
		"/workspace/...",
	};
	static const char *const rejected[] = {
		"/etc",
		"/etc/passwd",
		"/root",
		"/usr/local/bin",
		"/workspacex",
		"/tmpfoo",
		"*",
		"workspace",
		"/workspace/../etc",
		"/workspace/./x",
		"/workspace//x",
		"/workspace/",
		"/workspace/*/src",
		"/",
		"/*",
		"",
		"//*",
		"/workspace/**",
		"/workspace/a*",
		"/run/berth/a",
		"/workspace/*/",
		"/workspace/..",
	};

	for (size_t i = 0; i < ELEMENTSOF(accepted); i++) {
		char *issue = scope_issue(accepted[i], strlen(accepted[i]));

		if (issue)
			TEST_FAIL("%s should be accepted, got: %s", accepted[i], issue);
	}
	for (size_t i = 0; i < ELEMENTSOF(rejected); i++) {
		char *issue = scope_issue(rejected[i], strlen(rejected[i]));

		if (!issue)
			TEST_FAIL("%s should be rejected", rejected[i]);
		free(issue);
	}
}

TEST(fs_scope_messages_in_order)
{
	static const struct {
		const char *scope;
		size_t len;
		const char *issue;
	} cases[] = {
		{"/work\0space", 11, "filesystem path must not contain a null byte"},
		/* NUL is checked first, before "absolute". */
		{"x\0", 2, "filesystem path must not contain a null byte"},
		{"", 0, "filesystem path must be absolute (start with \"/\"), got \"\""},
		{"tmp/\"q\"", 7,
		 "filesystem path must be absolute (start with \"/\"), got \"tmp/\\\"q\\\"\""},
		{"/a*/b", 5,
		 "filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got \"/a*/b\""},
		/* The glob is checked before "/". */
		{"*", 1, "filesystem path must be absolute (start with \"/\"), got \"*\""},
		{"/**", 3,
		 "filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got \"/**\""},
		{"/", 1,
		 "filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead"},
		{"/*", 2,
		 "filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead"},
		{"/etc/../workspace", 17,
		 "filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/etc/../workspace\""},
		{"/workspace//*", 13,
		 "filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace//*\""},
		{"/workspacex", 11,
		 "filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/workspacex\""},
		{"/etc/*", 6,
		 "filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc/*\""},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *issue = scope_issue(cases[i].scope, cases[i].len);

		ASSERT_STREQ(issue, cases[i].issue);
		free(issue);
	}
}

TEST(capability_issue_messages)
{
	char *issue = NULL;

	ASSERT_OK(capability_issue("a:b", 3, &issue));
	ASSERT_STREQ(issue, "invalid capability string \"a:b\": expected 'namespace:action:scope'");
	free(issue);
	ASSERT_OK(capability_issue("a\0b", 3, &issue));
	ASSERT_STREQ(issue,
		     "invalid capability string \"a\\0b\": expected 'namespace:action:scope'");
	free(issue);
	ASSERT_OK(capability_issue("", 0, &issue));
	ASSERT_STREQ(issue, "invalid capability string \"\": expected 'namespace:action:scope'");
	free(issue);
	ASSERT_OK(capability_issue("filesystem:write:/etc", 21, &issue));
	ASSERT_STREQ(issue, "filesystem path must be /workspace, /context, /tmp, /app or a path "
			    "beneath one of them, got \"/etc\"");
	free(issue);
	/* Only filesystem:read: and filesystem:write: scopes are checked (SPEC 1.4). */
	static const char *const fine[] = {
		"browser:navigate:*",  "network:connect:*", "network:peer:*",
		"terminal:attach:*",   "github:read:repos", "filesystem:delete:/etc",
		"filesystem:writex:/",
	};
	for (size_t i = 0; i < ELEMENTSOF(fine); i++) {
		ASSERT_OK(capability_issue(fine[i], strlen(fine[i]), &issue));
		if (issue)
			TEST_FAIL("%s: %s", fine[i], issue);
	}
}

TEST(capability_regex)
{
	ASSERT_TRUE(capability_is_well_formed("a:b:c", 5));
	ASSERT_TRUE(capability_is_well_formed("network:connect:127.0.0.1:8080", 30));
	ASSERT_TRUE(capability_is_well_formed("my_ns-1:act_2:*", 15));
	ASSERT_TRUE(capability_is_well_formed("a:b::", 5));
	ASSERT_TRUE(capability_is_well_formed("a:b:\xe2\x80\xa7", 7)); /* not a line break */
	ASSERT_FALSE(capability_is_well_formed("a:b:", 4));
	ASSERT_FALSE(capability_is_well_formed(":b:c", 4));
	ASSERT_FALSE(capability_is_well_formed("a::c", 4));
	ASSERT_FALSE(capability_is_well_formed("a:B:c", 5));
	ASSERT_FALSE(capability_is_well_formed("a:b:c\r", 6));
	ASSERT_FALSE(capability_is_well_formed("a:b:c\nd", 7));
	ASSERT_FALSE(capability_is_well_formed("a:b:\xe2\x80\xa8", 7));
	ASSERT_FALSE(capability_is_well_formed("a:b:x\xe2\x80\xa9y", 9));
	ASSERT_FALSE(capability_is_well_formed("a.b:c:d", 7));
	ASSERT_FALSE(capability_is_well_formed("a b:c:d", 7));
	ASSERT_FALSE(capability_is_well_formed("a:b", 3));
	ASSERT_FALSE(capability_is_well_formed("", 0));
	ASSERT_FALSE(capability_is_well_formed(NULL, 0));
}

TEST(capability_split_and_parse)
{
	CapabilityParts cp;
	char *ns = NULL, *action = NULL, *scope = NULL;

	ASSERT_TRUE(capability_split("network:connect:127.0.0.1:8080", 30, &cp));
	ASSERT_EQ(cp.ns_len, 7);
	ASSERT_EQ(cp.action_len, 7);
	ASSERT_EQ(cp.scope_len, 14);
	ASSERT_TRUE(strncmp(cp.scope, "127.0.0.1:8080", 14) == 0);
	ASSERT_FALSE(capability_split("a:b", 3, &cp));
	/* Only @len bytes count. */
	ASSERT_FALSE(capability_split("a:b:c", 3, &cp));
	ASSERT_TRUE(capability_part_is("read", 4, "read"));
	ASSERT_FALSE(capability_part_is("read", 3, "read"));
	ASSERT_FALSE(capability_part_is("reads", 5, "read"));

	ASSERT_OK(capability_parse("network:connect:127.0.0.1:8080", &ns, &action, &scope));
	ASSERT_STREQ(ns, "network");
	ASSERT_STREQ(action, "connect");
	ASSERT_STREQ(scope, "127.0.0.1:8080");
	free(ns);
	free(action);
	free(scope);
	ASSERT_OK(capability_parse("a:b:c", NULL, NULL, &scope));
	ASSERT_STREQ(scope, "c");
	free(scope);
	ASSERT_ERROR(capability_parse("a:b", &ns, &action, &scope), EINVAL);
	ASSERT_ERROR(capability_parse(NULL, &ns, &action, &scope), EINVAL);
}

TEST(capability_values)
{
	ASSERT_TRUE(capability_path_beneath("/tmp", 4, "/tmp"));
	ASSERT_TRUE(capability_path_beneath("/tmp/x", 6, "/tmp"));
	ASSERT_TRUE(capability_path_beneath("/tmp/", 5, "/tmp"));
	ASSERT_FALSE(capability_path_beneath("/tmpx", 5, "/tmp"));
	ASSERT_FALSE(capability_path_beneath("/tm", 3, "/tmp"));
	ASSERT_FALSE(capability_path_beneath("/tmp/x", 3, "/tmp"));
	ASSERT_TRUE(capability_path_beneath("/tmp/x", 4, "/tmp"));
	ASSERT_FALSE(capability_path_beneath("/run/berth/notesx", 17, "/run/berth/notes"));

	char name64[65], name65[66];
	memset(name64, 'a', 64);
	name64[64] = '\0';
	memset(name65, 'a', 65);
	name65[65] = '\0';
	ASSERT_TRUE(capability_app_name_valid("a"));
	ASSERT_TRUE(capability_app_name_valid("notes-2"));
	ASSERT_TRUE(capability_app_name_valid("0"));
	ASSERT_TRUE(capability_app_name_valid(name64));
	ASSERT_FALSE(capability_app_name_valid(name65));
	ASSERT_FALSE(capability_app_name_valid(""));
	ASSERT_FALSE(capability_app_name_valid(NULL));
	ASSERT_FALSE(capability_app_name_valid("Notes"));
	ASSERT_FALSE(capability_app_name_valid("a_b"));
	ASSERT_FALSE(capability_app_name_valid("a.b"));
	ASSERT_FALSE(capability_app_name_valid("a/b"));
	ASSERT_FALSE(capability_app_name_valid(".."));
	ASSERT_FALSE(capability_app_name_valid("a b"));
	ASSERT_FALSE(capability_app_name_valid("a\n"));
}

TEST(cgroup_limits)
{
	CapabilityPolicy *p;

	warnings[0] = '\0';
	p = compile("a", "[]", "{\"cpu\": 0.5, \"memory_mb\": 512, \"pids\": 64, \"gpu\": 1}");
	ASSERT_KEY(
		p, "cgroupLimits",
		"{\"cpu.max\":\"50000 100000\",\"cpu.weight\":\"100\",\"memory.max\":\"536870912\","
		"\"memory.swap.max\":\"0\",\"pids.max\":\"64\"}");
	ASSERT_EQ(p->n_limits, 5);
	ASSERT_STREQ(warnings, "");
	capability_policy_free(p);
	p = compile("a", "[]", "{\"cpu\": 0.001}");
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.max\":\"1000 100000\",\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	capability_policy_free(p);
	p = compile("a", "[]", "{\"cpu\": 2, \"memory_mb\": -1}");
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.max\":\"200000 100000\",\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	ASSERT_STREQ(warnings,
		     WARNING "ignoring invalid resources.memory_mb (expected an integer > 0)\n");
	capability_policy_free(p);
	p = compile("a", "[]", "{\"cpu\": 0.000004}");
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.max\":\"1000 100000\",\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	capability_policy_free(p);
	p = compile("a", "[]", "{\"cpu\": 1000000}");
	ASSERT_KEY(
		p, "cgroupLimits",
		"{\"cpu.max\":\"100000000000 100000\",\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	capability_policy_free(p);

	warnings[0] = '\0';
	p = compile("a", "[]", "{\"cpu\": 0, \"memory_mb\": 1.5, \"pids\": 0}");
	ASSERT_KEY(p, "cgroupLimits", "{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	ASSERT_STREQ(warnings, WARNING
		     "ignoring invalid resources.cpu (expected a number > 0)\n" WARNING
		     "ignoring invalid resources.memory_mb (expected an integer > 0)\n" WARNING
		     "ignoring invalid resources.pids (expected an integer > 0)\n");
	capability_policy_free(p);
	warnings[0] = '\0';
	p = compile("a", "[]", "{\"cpu\": \"1\", \"memory_mb\": \"512\", \"pids\": -5}");
	ASSERT_KEY(p, "cgroupLimits", "{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	ASSERT_STREQ(warnings, WARNING
		     "ignoring invalid resources.cpu (expected a number > 0)\n" WARNING
		     "ignoring invalid resources.memory_mb (expected an integer > 0)\n" WARNING
		     "ignoring invalid resources.pids (expected an integer > 0)\n");
	ASSERT_TRUE(strstr(warnings, "memory.high") == NULL);
	capability_policy_free(p);
	p = compile("a", "[]", "{\"cpu\": 1000001}");
	ASSERT_KEY(p, "cgroupLimits", "{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}");
	capability_policy_free(p);
}

TEST(compile_refuses_bad_arguments)
{
	json_t *caps = json_array(), *obj = json_object(), *many = json_array();
	CapabilityPolicy *p = NULL;
	char long_cwd[PATH_MAX + 8];

#define COMPILE_ERR(err, ...)                                                          \
	do {                                                                           \
		PolicyInput _in = {__VA_ARGS__};                                       \
		ASSERT_ERROR(capability_policy_compile(&_in, collect, NULL, &p), err); \
		ASSERT_TRUE(p == NULL);                                                \
	} while (0)

	COMPILE_ERR(EINVAL, .app_name = "Bad_Name", .capabilities = caps, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "../x", .capabilities = caps, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "", .capabilities = caps, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = NULL, .capabilities = caps, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = obj, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = NULL, .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .resources = caps,
		    .cwd = "/app");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = "app");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = NULL);
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = "/");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = "/app/");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = "/app/../etc");
	COMPILE_ERR(EINVAL, .app_name = "a", .capabilities = caps, .cwd = "/app/*");

	long_cwd[0] = '/';
	memset(long_cwd + 1, 'a', PATH_MAX);
	long_cwd[PATH_MAX] = '\0'; /* PATH_MAX bytes: one more than a path may have */
	COMPILE_ERR(E2BIG, .app_name = "a", .capabilities = caps, .cwd = long_cwd);

	for (int i = 0; i <= POLICY_LIST_MAX; i++)
		json_array_append_new(many, json_string("x:y:z"));
	COMPILE_ERR(E2BIG, .app_name = "a", .capabilities = many, .cwd = "/app");
	json_array_remove(many, 0);
	PolicyInput in = {.app_name = "a", .capabilities = many, .cwd = "/app"};
	ASSERT_OK(capability_policy_compile(&in, collect, NULL, &p));
	ASSERT_EQ(p->declared.n, 1);
	capability_policy_free(p);
	json_decref(caps);
	json_decref(obj);
	json_decref(many);
#undef COMPILE_ERR
}

/* @n distinct filesystem:write: capabilities. */
static json_t *many_writes(size_t n)
{
	json_t *caps = json_array();

	for (size_t i = 0; i < n; i++) {
		char cap[64];

		snprintf(cap, sizeof(cap), "filesystem:write:/workspace/d%zu", i);
		json_array_append_new(caps, json_string(cap));
	}
	return caps;
}

TEST(compile_lists_never_exceed_the_cap)
{
	/* readPaths holds 7 + /run/berth/a + /app + /dev/null + /tmp/a + each write: 1013
	 * writes make it exactly POLICY_LIST_MAX long; one more is too many. */
	json_t *caps = many_writes(1013);
	PolicyInput in = {.app_name = "a", .capabilities = caps, .cwd = "/app"};
	CapabilityPolicy *p = NULL, *q = NULL;
	char *text, *err = NULL;

	ASSERT_OK(capability_policy_compile(&in, collect, NULL, &p));
	ASSERT_EQ(p->read_paths.n, POLICY_LIST_MAX);
	ASSERT_EQ(p->write_paths.n, 1016);
	text = encode(p);
	ASSERT_OK(capability_policy_decode(text, strlen(text), &q, &err));
	free(text);
	capability_policy_free(p);
	capability_policy_free(q);
	json_decref(caps);

	caps = many_writes(1014);
	in.capabilities = caps;
	p = NULL;
	ASSERT_ERROR(capability_policy_compile(&in, collect, NULL, &p), E2BIG);
	ASSERT_TRUE(p == NULL);
	json_decref(caps);
}

TEST(strings_set)
{
	PolicyStrings s = {};

	ASSERT_OK(policy_strings_add(&s, "/a", 2));
	ASSERT_OK(policy_strings_add(&s, "/b/c", 2)); /* "/b" */
	ASSERT_OK(policy_strings_add(&s, "/a", 2));
	ASSERT_EQ(s.n, 2);
	ASSERT_STREQ(s.v[0], "/a");
	ASSERT_STREQ(s.v[1], "/b");
	for (int i = 0; s.n < POLICY_LIST_MAX; i++) {
		char v[16];

		snprintf(v, sizeof(v), "/x%d", i);
		ASSERT_OK(policy_strings_add(&s, v, strlen(v)));
	}
	ASSERT_ERROR(policy_strings_add(&s, "/new", 4), E2BIG);
	ASSERT_OK(policy_strings_add(&s, "/a", 2)); /* already there */
	ASSERT_EQ(s.n, POLICY_LIST_MAX);
	policy_strings_done(&s);
	ASSERT_EQ(s.n, 0);
	ASSERT_TRUE(s.v == NULL);
	policy_strings_done(&s);
}

/* --- the paths a policy may grant ------------------------------------------------------- */

TEST(write_path_allowlist)
{
	static const char *const allowed[] = {
		"/dev/null",	      "/dev/pts",	"/dev/ptmx",	  "/run/berth/notes",
		"/run/berth/notes/x", "/workspace",	"/workspace/a/b", "/tmp/notes",
		"/context",	      "/app",		"/tmp",		  "/app/x/y",
		"/workspace/.x",      "/workspace/...",
	};
	static const char *const refused[] = {
		"/dev",
		"/dev/pts/0",
		"/dev/tty",
		"/dev/null/x",
		"/dev/nullx",
		"/run/berth",
		"/run/berth/other",
		"/run/berth/other/x",
		"/run",
		"/workspacex",
		"/",
		"//",
		"workspace",
		"/workspace/",
		"/workspace/../etc",
		"/workspace/..",
		"/workspace/.",
		"/..",
		"/.",
		"/workspace/./x",
		"/workspace//x",
		"/workspace/*",
		"/tmp/*",
		"/*",
		"*",
		"/etc",
		"/etc/passwd",
		"/usr/bin",
		"/run/berth/notesx",
		"/run/berth/notes/../other",
		"/run/berth/github-api-broker",
		"",
	};

	for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
		if (!capability_write_path_allowed(allowed[i], strlen(allowed[i]), "notes"))
			TEST_FAIL("%s should be allowed", allowed[i]);
	for (size_t i = 0; i < ELEMENTSOF(refused); i++)
		if (capability_write_path_allowed(refused[i], strlen(refused[i]), "notes"))
			TEST_FAIL("%s should be refused", refused[i]);
	ASSERT_FALSE(capability_write_path_allowed("/workspace\0/x", 13, "notes"));
	ASSERT_FALSE(capability_write_path_allowed("/dev/null\0", 10, "notes"));
	ASSERT_FALSE(capability_write_path_allowed(NULL, 0, "notes"));
	/* Only @len bytes count. */
	ASSERT_TRUE(capability_write_path_allowed("/workspace/../etc", 10, "notes"));
	ASSERT_FALSE(capability_write_path_allowed("/workspace", 5, "notes"));
	/* A name that is not one valid segment grants no run directory at all. */
	ASSERT_FALSE(capability_write_path_allowed("/run/berth/a/b", 14, "a/b"));
	ASSERT_FALSE(capability_write_path_allowed("/run/berth/..", 13, ".."));
	ASSERT_FALSE(capability_write_path_allowed("/run/berth/", 11, ""));
	ASSERT_FALSE(capability_write_path_allowed("/run/berth/Notes", 16, "Notes"));
	ASSERT_FALSE(capability_write_path_allowed("/run/berth/notes", 16, NULL));
	ASSERT_TRUE(capability_write_path_allowed("/workspace", 10, NULL));
	ASSERT_TRUE(capability_write_path_allowed("/dev/null", 9, NULL));

	char name[80], path[128];
	memset(name, 'n', 64);
	name[64] = '\0';
	snprintf(path, sizeof(path), "/run/berth/%s/x", name);
	ASSERT_TRUE(capability_write_path_allowed(path, strlen(path), name));
	name[64] = 'n';
	name[65] = '\0';
	snprintf(path, sizeof(path), "/run/berth/%s", name);
	ASSERT_FALSE(capability_write_path_allowed(path, strlen(path), name));
}

TEST(read_path_allowlist)
{
	static const char *const allowed[] = {
		"/usr",	    "/a",   "/run/berth/other", "/opt/x y", "/etc/passwd", "/workspace/...",
		"/.hidden", "/a*b", "/proc/1/root",
	};
	static const char *const refused[] = {
		"/",  "",    "usr", "/usr/",  "//usr", "/usr//lib", "/usr/./lib", "/usr/../etc",
		"/.", "/..", "/*",  "/usr/*", "./usr", "/usr/.",    "/usr/..",
	};

	for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
		if (!capability_read_path_allowed(allowed[i], strlen(allowed[i])))
			TEST_FAIL("%s should be allowed", allowed[i]);
	for (size_t i = 0; i < ELEMENTSOF(refused); i++)
		if (capability_read_path_allowed(refused[i], strlen(refused[i])))
			TEST_FAIL("%s should be refused", refused[i]);
	ASSERT_FALSE(capability_read_path_allowed("/usr\0x", 6));
	ASSERT_FALSE(capability_read_path_allowed(NULL, 0));
}

/* The generated tables are sdk/capability-model.json's (which both SDKs read). */
TEST(tables_are_the_model_file)
{
	const char *root = getenv("BERTH_SOURCE_ROOT");
	char path[PATH_MAX];
	json_t *model, *a;

	ASSERT_NOT_NULL(root);
	snprintf(path, sizeof(path), "%s/sdk/capability-model.json", root);
	model = json_load_file(path, 0, NULL);
	ASSERT_NOT_NULL(model);
	a = json_object_get(model, "filesystemPrefixes");
	ASSERT_EQ(json_array_size(a), ELEMENTSOF(capability_fs_prefixes));
	for (size_t i = 0; i < ELEMENTSOF(capability_fs_prefixes); i++)
		ASSERT_STREQ(json_string_value(json_array_get(a, i)), capability_fs_prefixes[i]);
	a = json_object_get(model, "readBaseline");
	ASSERT_EQ(json_array_size(a), ELEMENTSOF(capability_read_baseline));
	for (size_t i = 0; i < ELEMENTSOF(capability_read_baseline); i++)
		ASSERT_STREQ(json_string_value(json_array_get(a, i)), capability_read_baseline[i]);
	a = json_object_get(model, "deviceWritePaths");
	for (size_t i = 0; i < json_array_size(a); i++) {
		const char *d = json_string_value(json_array_get(a, i));

		ASSERT_TRUE(capability_write_path_allowed(d, strlen(d), NULL));
	}
	ASSERT_EQ(json_integer_value(json_object_get(model, "meshCoordinatorPortDefault")),
		  CAPABILITY_MESH_COORDINATOR_PORT_DEFAULT);
	ASSERT_EQ(json_integer_value(json_object_get(model, "terminalBindPort")),
		  CAPABILITY_TERMINAL_BIND_PORT);
	ASSERT_STREQ(json_string_value(json_object_get(model, "githubBrokerDir")),
		     CAPABILITY_GITHUB_BROKER_DIR);
	json_decref(model);
}

/* --- matching ------------------------------------------------------------------------- */

TEST(capability_matching)
{
	static const struct {
		const char *granted, *requested;
		bool match;
	} cases[] = {
		{"a:b:c", "a:b:c", true},
		{"a:b:c", "a:b:cd", false},
		{"a:b:cd", "a:b:c", false},
		{"a:b:c*", "a:b:c", true},
		{"a:b:*", "a:b:x", true},
		/* Not symmetric. */
		{"a:b:x", "a:b:*", false},
		{"a:b:*", "a:b:*", true},
		/* "*" crosses "/", "." and ":". */
		{"filesystem:write:/workspace/*", "filesystem:write:/workspace/a/b", true},
		{"filesystem:write:/workspace/*", "filesystem:write:/workspacex", false},
		{"network:connect:*", "network:connect:127.0.0.1:8080", true},
		{"network:host:*.example.com", "network:host:api.example.com", true},
		{"network:host:*.example.com", "network:host:example.com", false},
		{"network:host:*.example.com", "network:host:api.example.com.evil", false},
		/* Namespaces and actions are exact: "*" is not a wildcard there. */
		{"network:connect:*", "network:host:x", false},
		{"network:*:x", "network:connect:x", false},
		{"*:connect:x", "network:connect:x", false},
		{"network:connect:x", "filesystem:connect:x", false},
		/* "?" and "[" are literal, as is every other regex metacharacter. */
		{"a:b:x?", "a:b:xy", false},
		{"a:b:x?", "a:b:x", false},
		{"a:b:x?", "a:b:x?", true},
		{"a:b:[ab]", "a:b:a", false},
		{"a:b:[ab]", "a:b:[ab]", true},
		{"a:b:x[", "a:b:x[", true},
		{"a:b:x.y", "a:b:xzy", false},
		{"a:b:x+", "a:b:xx", false},
		{"a:b:^x$", "a:b:^x$", true},
		{"a:b:(x|y)", "a:b:x", false},
		{"a:b:a\\b", "a:b:a\\b", true},
		{"a:b:a\\b", "a:b:ab", false},
		{"a:b:x{2}", "a:b:xx", false},
		/* Several stars, and backtracking. */
		{"a:b:*x*y*", "a:b:..x..y..", true},
		{"a:b:*x*y", "a:b:yx", false},
		{"a:b:*ab", "a:b:aab", true},
		{"a:b:a*a*a", "a:b:aa", false},
		{"a:b:a*a*a", "a:b:aaa", true},
		{"a:b:**", "a:b:z", true},
		/* "*" does not cross a line break: a requested scope holding one is malformed. */
		{"a:b:*", "a:b:x\ny", false},
		{"a:b:*", "a:b:x\ry", false},
		{"a:b:*", "a:b:x\xe2\x80\xa8y", false},
		{"a:b:*", "a:b:x\xe2\x80\xa9", false},
		{"a:b:x*", "a:b:x\xe2\x80\xa7", true},
		/* A malformed capability on either side never matches. */
		{"a:b:x\n*", "a:b:x\ny", false},
		{"A:b:*", "A:b:x", false},
		{"a:b:", "a:b:", false},
		{"a:b", "a:b", false},
		{"a:b:*", "a:b:", false},
		{"a:b:*", "a:b", false},
		{"a::*", "a::x", false},
		{"", "", false},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		if (capability_matches(cases[i].granted, cases[i].requested) != cases[i].match)
			TEST_FAIL("matches(\"%s\", \"%s\") should be %s", cases[i].granted,
				  cases[i].requested, cases[i].match ? "true" : "false");
	ASSERT_FALSE(capability_matches(NULL, "a:b:c"));
	ASSERT_FALSE(capability_matches("a:b:*", NULL));
	ASSERT_FALSE(capability_matches(NULL, NULL));
}

TEST(capability_matching_is_linear)
{
	/* A pattern that makes a naive backtracking glob exponential. */
	char granted[256] = "a:b:", requested[8192] = "a:b:";

	for (int i = 0; i < 40; i++)
		strcat(granted, "*a");
	strcat(granted, "b");
	memset(requested + 4, 'a', 8000);
	requested[8004] = '\0';
	ASSERT_FALSE(capability_matches(granted, requested));
	requested[8003] = 'b';
	ASSERT_TRUE(capability_matches(granted, requested));
}

/* --- the policy file -------------------------------------------------------------------- */

/* encode → decode → encode: the same bytes, compact JSON with sorted keys, no newline. */
static void assert_round_trip(const CapabilityPolicy *p)
{
	CapabilityPolicy *q = NULL, *j = NULL;
	char *a = encode(p), *b, *c, *err = NULL;
	json_t *doc;
	int r;

	ASSERT_TRUE(a[0] == '{' && a[strlen(a) - 1] == '}');
	ASSERT_TRUE(strchr(a, '\n') == NULL);
	r = capability_policy_decode(a, strlen(a), &q, &err);
	if (r < 0)
		TEST_FAIL("decode refused the encoding of a compiled policy (%.60s...): %d %s", a,
			  r, err ?: "(no reason)");
	ASSERT_TRUE(err == NULL);
	b = encode(q);
	ASSERT_STREQ(a, b);
	/* What jansson prints compact and sorted is the same text. */
	doc = json_loads(a, JSON_REJECT_DUPLICATES, NULL);
	ASSERT_NOT_NULL(doc);
	c = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	ASSERT_STREQ(a, c);
	free(c);
	/* The JSON object route is the same. */
	ASSERT_OK(capability_policy_from_json(doc, &j, &err));
	c = encode(j);
	ASSERT_STREQ(a, c);
	free(c);
	json_decref(doc);
	/* The decoded policy is the one encoded. */
	ASSERT_STREQ(q->app_name, p->app_name);
	ASSERT_EQ(q->write_paths.n, p->write_paths.n);
	ASSERT_EQ(q->read_paths.n, p->read_paths.n);
	ASSERT_EQ(q->network_ports.n, p->network_ports.n);
	ASSERT_EQ(q->bind_ports.n, p->bind_ports.n);
	ASSERT_EQ(q->n_limits, p->n_limits);
	ASSERT_EQ(q->network_unrestricted, p->network_unrestricted);
	for (size_t i = 0; i < p->write_paths.n; i++)
		ASSERT_STREQ(q->write_paths.v[i], p->write_paths.v[i]);
	for (size_t i = 0; i < p->read_paths.n; i++)
		ASSERT_STREQ(q->read_paths.v[i], p->read_paths.v[i]);
	free(a);
	free(b);
	capability_policy_free(q);
	capability_policy_free(j);
}

TEST(encode_decode_encode_same_bytes)
{
	static const struct {
		const char *app, *caps, *resources, *cwd;
	} cases[] = {
		{"notes", "[\"filesystem:write:/workspace\"]", NULL, "/app"},
		{"a", "[]", NULL, "/app"},
		{"terminal", "[\"filesystem:write:/workspace\", \"terminal:attach:*\"]",
		 "{\"cpu\": 1.5, \"memory_mb\": 256, \"pids\": 100}", "/app/terminal"},
		{"browser", "[\"network:connect:*\", \"browser:navigate:*.example.com\"]", NULL,
		 "/app"},
		{"mesh", "[\"network:peer:laptop-*\", \"network:connect:443\", \"network:peer:b\"]",
		 "{\"cpu\": 0.25}", "/app"},
		{"gh", "[\"github:read:repos\", \"filesystem:read:/context/*\", \"x:y:\\\"q\\\"\"]",
		 NULL, "/app/gh"},
		{"junk",
		 "[\"filesystem:write:/etc\", 1, \"network:connect:http\", \"a:b:caf\\u00e9\"]",
		 "{\"cpu\": -1}", "/app"},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		CapabilityPolicy *p = compile_in((PolicyInput){.app_name = cases[i].app,
							       .cwd = cases[i].cwd,
							       .http_rpc_port = i % 2 ? 8787 : 0},
						 cases[i].caps, cases[i].resources);

		assert_round_trip(p);
		/* What it may write, it may read back. */
		for (size_t k = 0; k < p->write_paths.n; k++)
			if (!capability_policy_grants(p, p->write_paths.v[k], POLICY_ACCESS_READ))
				TEST_FAIL("%s: %s is writable but not readable", cases[i].app,
					  p->write_paths.v[k]);
		capability_policy_free(p);
	}
}

/* Whatever the compiler returns, the decoder accepts (one compiler, one reader). */
TEST(compiled_policy_always_decodes_long_paths)
{
	char *cap = malloc(PATH_MAX + 64);
	json_t *arr = json_array();
	CapabilityPolicy *p = NULL;
	int r;

	strcpy(cap, "filesystem:write:/workspace/");
	memset(cap + strlen(cap), 'a', PATH_MAX);
	cap[strlen("filesystem:write:/workspace/") + PATH_MAX] = '\0';
	json_array_append_new(arr, json_string(cap));
	warnings[0] = '\0';
	PolicyInput in = {.app_name = "a", .capabilities = arr, .cwd = "/app"};
	r = capability_policy_compile(&in, collect, NULL, &p);
	/* Refusing to compile, or skipping the capability, would both be fine. */
	if (r >= 0)
		assert_round_trip(p);
	capability_policy_free(p);
	free(cap);
	json_decref(arr);
}

/* The compiler records each capability as declared, or skips it: never a different one.
 * A C string stops at a NUL, so "network:connect:8090\0x" must not become a declared
 * "network:connect:8090" (the manifest validator refuses a NUL for this very reason). */
TEST(compiled_declarations_are_what_was_declared)
{
	static const char *const never[] = {"network:connect:8090", "network:peer:laptop",
					    "browser:navigate:*"};
	char found[512] = "";
	CapabilityPolicy *p;

	warnings[0] = '\0';
	p = compile("a",
		    "[\"network:connect:8090\\u0000x\", \"network:peer:laptop\\u0000-x\","
		    " \"browser:navigate:*\\u0000.evil\"]",
		    NULL);
	for (size_t i = 0; i < p->declared.n; i++)
		for (size_t k = 0; k < ELEMENTSOF(never); k++)
			if (streq(p->declared.v[i], never[k])) {
				size_t n = strlen(found);

				snprintf(found + n, sizeof(found) - n,
					 "\n#   declaredCapabilities holds \"%s\"", never[k]);
			}
	for (size_t i = 0; i < p->mesh_peers.n; i++)
		if (streq(p->mesh_peers.v[i], "laptop")) {
			size_t n = strlen(found);

			snprintf(found + n, sizeof(found) - n, "\n#   meshPeers holds \"laptop\"");
		}
	if (found[0])
		TEST_FAIL("the policy holds what was never declared:%s", found);
	capability_policy_free(p);
}

TEST(policy_write_mode_owner_bytes)
{
	char dir[] = "/tmp/test-capability.XXXXXX", path[PATH_MAX], buf[8192];
	CapabilityPolicy *p;
	struct stat st;
	struct dirent *de;
	char *text;
	ssize_t n;
	DIR *d;
	int fd, entries = 0;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notes.json", dir);
	p = compile("notes", "[\"network:connect:8090\"]", NULL);
	text = encode(p);
	ASSERT_OK(capability_policy_write(path, p, getgid()));
	/* A second write replaces the file. */
	ASSERT_OK(capability_policy_write(path, p, geteuid() == 0 ? 12345 : getgid()));
	ASSERT_OK(stat(path, &st));
	ASSERT_TRUE(S_ISREG(st.st_mode));
	ASSERT_EQ(st.st_mode & 07777, 0640);
	if (geteuid() == 0) {
		ASSERT_EQ(st.st_uid, 0);
		ASSERT_EQ(st.st_gid, 12345);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_OK(fd);
	n = read(fd, buf, sizeof(buf) - 1);
	ASSERT_TRUE(n > 0);
	buf[n] = '\0';
	close(fd);
	ASSERT_STREQ(buf, text);
	ASSERT_STREQ(buf,
		     "{\"appName\":\"notes\",\"bindPorts\":[],\"cgroupLimits\":{\"cpu.weight\":"
		     "\"100\",\"pids.max\":\"1024\"},\"declaredCapabilities\":[\"network:"
		     "connect:8090\"],\"meshPeers\":[],\"networkPorts\":[8090],"
		     "\"networkUnrestricted\":false,\"readPaths\":[" BASELINE_JSON
		     ",\"/run/berth/notes\",\"/app\",\"/dev/null\",\"/tmp/notes\"],\"schema\":2,"
		     "\"writePaths\":[\"/dev/null\",\"/tmp/notes\",\"/run/berth/notes\"]}");
	/* No temporary file is left beside it. */
	d = opendir(dir);
	ASSERT_NOT_NULL(d);
	while ((de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
			entries++;
	closedir(d);
	ASSERT_EQ(entries, 1);
	unlink(path);
	snprintf(path, sizeof(path), "%s/missing/notes.json", dir);
	ASSERT_ERROR(capability_policy_write(path, p, getgid()), ENOENT);
	rmdir(dir);
	free(text);
	capability_policy_free(p);
}

/* --- the decoder's refusals ------------------------------------------------------------- */

static const char base_policy[] =
	"{\"appName\":\"notes\",\"bindPorts\":[],\"cgroupLimits\":{\"cpu.weight\":\"100\","
	"\"pids.max\":\"1024\"},\"declaredCapabilities\":[],\"meshPeers\":[],"
	"\"networkPorts\":[],\"networkUnrestricted\":false,\"readPaths\":[\"/usr\"],"
	"\"schema\":2,\"writePaths\":[\"/dev/null\"]}";

/* The reason the decoder gives for base_policy with @key set to @value (stolen; NULL:
 * removed), or NULL when it accepts it. The text and the JSON object readers agree. */
static char *refusal_j(const char *key, json_t *value)
{
	json_t *doc = json_loads(base_policy, 0, NULL);
	CapabilityPolicy *p = NULL, *q = NULL;
	char *text, *err1 = NULL, *err2 = NULL;
	int r1, r2;

	ASSERT_NOT_NULL(doc);
	if (value)
		ASSERT_OK(json_object_set_new(doc, key, value));
	else
		json_object_del(doc, key);
	text = json_dumps(doc, JSON_COMPACT);
	ASSERT_NOT_NULL(text);
	r1 = capability_policy_from_json(doc, &p, &err1);
	r2 = capability_policy_decode(text, strlen(text), &q, &err2);
	ASSERT_EQ(r1, r2);
	free(text);
	json_decref(doc);
	if (r1 >= 0) {
		ASSERT_TRUE(err1 == NULL && err2 == NULL);
		capability_policy_free(p);
		capability_policy_free(q);
		return NULL;
	}
	ASSERT_EQ(r1, -EINVAL);
	ASSERT_STREQ(err1, err2);
	free(err2);
	return err1;
}

static char *refusal(const char *key, const char *value_json)
{
	json_t *v = NULL;

	if (value_json) {
		v = json_loads(value_json, JSON_DECODE_ANY, NULL);
		ASSERT_NOT_NULL(v);
	}
	return refusal_j(key, v);
}

#define ASSERT_REFUSED(key, value, reason)          \
	do {                                        \
		char *_e = refusal((key), (value)); \
		ASSERT_STREQ(_e, (reason));         \
		free(_e);                           \
	} while (0)
#define ASSERT_ACCEPTED(key, value)                                         \
	do {                                                                \
		char *_e = refusal((key), (value));                         \
		if (_e)                                                     \
			TEST_FAIL("%s=%s refused: %s", (key), (value), _e); \
	} while (0)

static int decode_text(const char *text, char **err)
{
	CapabilityPolicy *p = NULL;
	int r = capability_policy_decode(text, strlen(text), &p, err);

	capability_policy_free(p);
	return r;
}

#define BAD_WRITE(i) "writePaths[" #i "] is not a path the policy may grant writes to"
#define BAD_READ(i) "readPaths[" #i "] is not an absolute, canonical path"

TEST(decoder_accepts_the_base_policy)
{
	CapabilityPolicy *p = NULL;
	char *err = NULL, *text;

	ASSERT_OK(capability_policy_decode(base_policy, strlen(base_policy), &p, &err));
	ASSERT_TRUE(err == NULL);
	ASSERT_STREQ(p->app_name, "notes");
	ASSERT_EQ(p->read_paths.n, 1);
	ASSERT_EQ(p->write_paths.n, 1);
	ASSERT_EQ(p->n_limits, 2);
	text = encode(p);
	ASSERT_STREQ(text, base_policy);
	free(text);
	capability_policy_free(p);
	ASSERT_ACCEPTED("schema", "2");
	ASSERT_ACCEPTED("writePaths", "[\"/run/berth/notes/x\",\"/dev/ptmx\",\"/tmp/other\"]");
	ASSERT_ACCEPTED("readPaths", "[\"/run/berth/other\",\"/opt\"]");
	ASSERT_ACCEPTED("networkPorts", "[1,65535]");
	ASSERT_ACCEPTED("cgroupLimits", "{}");
	ASSERT_ACCEPTED("cgroupLimits",
			"{\"cpu.max\":\"max 100000\",\"cpu.weight\":\"1\",\"memory.max\":\"max\","
			"\"memory.swap.max\":\"0\",\"pids.max\":\"1\"}");
	ASSERT_ACCEPTED("declaredCapabilities", "[\"anything: at all\"]");
	ASSERT_ACCEPTED("networkUnrestricted", "true");
}

TEST(decoder_refuses_keys_and_schema)
{
	static const char schema_other[] =
		"schema is not 2: this policy was written for another version of agent-init";
	static const char schema_missing[] =
		"schema is missing: this policy was written for another version of agent-init (schema 2 needed)";
	CapabilityPolicy *p = NULL;
	char *err = NULL;

	ASSERT_REFUSED("extra", "1", "unknown key \"extra\"");
	ASSERT_REFUSED("readpaths", "[]", "unknown key \"readpaths\"");
	ASSERT_REFUSED("schema", NULL, schema_missing);
	ASSERT_REFUSED("schema", "1", schema_other);
	ASSERT_REFUSED("schema", "3", schema_other);
	ASSERT_REFUSED("schema", "0", schema_other);
	/* A schema 1 file: no "schema" key, reads left open. */
	ASSERT_ERROR(
		decode_text("{\"appName\":\"notes\",\"declaredCapabilities\":[],"
			    "\"writePaths\":[\"/dev/null\"],\"readPaths\":[],\"networkPorts\":[],"
			    "\"networkUnrestricted\":false,\"meshPeers\":[],\"bindPorts\":[],"
			    "\"cgroupLimits\":{}}",
			    &err),
		EINVAL);
	ASSERT_STREQ(err, schema_missing);
	free(err);
	ASSERT_ERROR(capability_policy_decode("[]", 2, &p, &err), EINVAL);
	ASSERT_STREQ(err, "not a JSON object");
	free(err);
	json_t *s = json_string("x");
	ASSERT_ERROR(capability_policy_from_json(s, &p, &err), EINVAL);
	ASSERT_STREQ(err, "not a JSON object");
	free(err);
	json_decref(s);
	ASSERT_ERROR(capability_policy_from_json(NULL, &p, &err), EINVAL);
	ASSERT_STREQ(err, "not a JSON object");
	free(err);
	/* An unknown key is named, cut at 40 characters. */
	char key[64], want[80];
	memset(key, 'k', 58);
	key[58] = '\0';
	snprintf(want, sizeof(want), "unknown key \"%.40s\"", key);
	ASSERT_EQ(strlen(want), strlen("unknown key \"\"") + 40);
	ASSERT_REFUSED(key, "1", want);
	ASSERT_TRUE(p == NULL);
}

TEST(decoder_refuses_bad_app_names)
{
	static const char *const bad[] = {
		NULL,	   "\"\"",    "\"Notes\"", "\"a/b\"", "\"..\"",	 "\"a\\nb\"",
		"\"a b\"", "\"a_b\"", "42",	   "null",    "[\"a\"]",
	};
	char name[80];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ASSERT_REFUSED("appName", bad[i], "appName is missing or not a valid name");
	/* 64 characters, and 65. */
	name[0] = '"';
	memset(name + 1, 'a', 64);
	strcpy(name + 65, "\"");
	ASSERT_ACCEPTED("appName", name);
	strcpy(name + 65, "a\"");
	ASSERT_REFUSED("appName", name, "appName is missing or not a valid name");
}

/* A JSON object can hold a NUL in a string, which a C string would cut short: such a
 * policy is refused, never read as another one ("a\0b" as the app "a"). */
TEST(decoder_refuses_strings_a_nul_would_cut)
{
	static const struct {
		const char *key, *value;
		size_t len;
		const char *reason;
	} cases[] = {
		{"appName", "a\0b", 3, "appName is missing or not a valid name"},
		{"meshPeers", "laptop\0-x", 9, NULL},
		{"declaredCapabilities", "network:connect:8090\0x", 22, NULL},
	};
	char accepted[512] = "";

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		json_t *doc = json_loads(base_policy, 0, NULL), *v;
		CapabilityPolicy *p = NULL;
		char *e = NULL;
		int r;

		v = json_stringn(cases[i].value, cases[i].len);
		ASSERT_OK(json_object_set_new(
			doc, cases[i].key,
			streq(cases[i].key, "appName") ? v : json_pack("[o]", v)));
		r = capability_policy_from_json(doc, &p, &e);
		if (r >= 0) {
			size_t n = strlen(accepted);

			snprintf(accepted + n, sizeof(accepted) - n,
				 "\n#   %s with a NUL read as \"%s\"", cases[i].key,
				 streq(cases[i].key, "appName")	    ? p->app_name
				 : streq(cases[i].key, "meshPeers") ? p->mesh_peers.v[0]
								    : p->declared.v[0]);
			capability_policy_free(p);
			json_decref(doc);
			continue;
		}
		ASSERT_EQ(r, -EINVAL);
		if (cases[i].reason)
			ASSERT_STREQ(e, cases[i].reason);
		else
			ASSERT_NOT_NULL(e);
		free(e);
		json_decref(doc);
	}
	if (accepted[0])
		TEST_FAIL("accepted, and cut short:%s", accepted);
}

TEST(decoder_refuses_write_paths_the_app_may_not_write)
{
	ASSERT_REFUSED("writePaths", "[\"/etc\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/dev/null\",\"/run/berth/other\"]", BAD_WRITE(1));
	ASSERT_REFUSED("writePaths", "[\"/run/berth/other/x\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/run/berth\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/run/berth/notesx\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/workspace/../etc\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/workspace/..\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/workspace/*\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/tmp/*/x\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"*\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"workspace\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/workspace/\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/dev\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/dev/pts/0\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"/usr/bin\"]", BAD_WRITE(0));
	ASSERT_REFUSED("writePaths", "[\"\"]", "writePaths[0] is not a path");
	ASSERT_REFUSED("writePaths", "[\"/tmp\",1]", "writePaths[1] is not a path");
	ASSERT_REFUSED("writePaths", "[null]", "writePaths[0] is not a path");
	ASSERT_REFUSED("writePaths", "\"/tmp\"", "writePaths is missing or not an array");
	ASSERT_REFUSED("writePaths", NULL, "writePaths is missing or not an array");
	/* A NUL inside a path: only a JSON object can hold one. */
	char *e = NULL;
	json_t *doc = json_loads(base_policy, 0, NULL);
	CapabilityPolicy *p = NULL;
	json_object_set_new(doc, "writePaths", json_pack("[s%]", "/tmp/a\0/x", (size_t)9));
	ASSERT_ERROR(capability_policy_from_json(doc, &p, &e), EINVAL);
	ASSERT_STREQ(e, "writePaths[0] holds a NUL byte");
	free(e);
	/* The run directory is the policy's own app's. */
	json_object_set_new(doc, "appName", json_string("other"));
	json_object_set_new(doc, "writePaths", json_pack("[s]", "/run/berth/notes"));
	ASSERT_ERROR(capability_policy_from_json(doc, &p, &e), EINVAL);
	ASSERT_STREQ(e, BAD_WRITE(0));
	free(e);
	json_decref(doc);
}

TEST(decoder_refuses_bad_read_paths)
{
	static const char *const bad[] = {
		"[\"/usr/../etc\"]", "[\"usr\"]", "[\"/usr/\"]",  "[\"//usr\"]", "[\"/usr//lib\"]",
		"[\"/./usr\"]",	     "[\"/*\"]",  "[\"/usr/*\"]", "[\"/\"]",	 "[\"/..\"]",
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ASSERT_REFUSED("readPaths", bad[i], BAD_READ(0));
	ASSERT_REFUSED("readPaths", "[\"/usr\",\"/etc\",\"/etc/\"]", BAD_READ(2));
	ASSERT_REFUSED("readPaths", "[]", "readPaths is empty: reads are confined for every app");
	ASSERT_REFUSED("readPaths", NULL, "readPaths is missing or not an array");
	ASSERT_REFUSED("readPaths", "{}", "readPaths is missing or not an array");
	ASSERT_REFUSED("readPaths", "[\"\"]", "readPaths[0] is not a path");
	ASSERT_REFUSED("readPaths", "[true]", "readPaths[0] is not a path");
	/* A NUL inside a path: only a JSON object can hold one. */
	json_t *doc = json_loads(base_policy, 0, NULL);
	CapabilityPolicy *p = NULL;
	char *e = NULL;
	json_object_set_new(doc, "readPaths", json_pack("[s%]", "/usr\0/x", (size_t)7));
	ASSERT_ERROR(capability_policy_from_json(doc, &p, &e), EINVAL);
	ASSERT_STREQ(e, "readPaths[0] holds a NUL byte");
	free(e);
	json_decref(doc);
}

TEST(decoder_refuses_bad_lists_and_ports)
{
	ASSERT_REFUSED("networkPorts", "[0]", "networkPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", "[443,65536]", "networkPorts[1] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", "[-1]", "networkPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", "[\"80\"]", "networkPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", "[80.0]", "networkPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", "[4294967376]", "networkPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("bindPorts", "[7681,0]", "bindPorts[1] is not a port 1-65535");
	ASSERT_REFUSED("bindPorts", "[null]", "bindPorts[0] is not a port 1-65535");
	ASSERT_REFUSED("networkPorts", NULL, "networkPorts is missing or not an array");
	ASSERT_REFUSED("bindPorts", "80", "bindPorts is missing or not an array");
	ASSERT_REFUSED("networkUnrestricted", "1",
		       "networkUnrestricted is missing or not a boolean");
	ASSERT_REFUSED("networkUnrestricted", NULL,
		       "networkUnrestricted is missing or not a boolean");
	ASSERT_REFUSED("networkUnrestricted", "\"true\"",
		       "networkUnrestricted is missing or not a boolean");
	ASSERT_REFUSED("declaredCapabilities", "[1]", "declaredCapabilities[0] is not a string");
	ASSERT_REFUSED("declaredCapabilities", NULL,
		       "declaredCapabilities is missing or not an array");
	ASSERT_REFUSED("meshPeers", "[\"x\",{}]", "meshPeers[1] is not a string");
	ASSERT_REFUSED("meshPeers", "{}", "meshPeers is missing or not an array");
}

TEST(decoder_refuses_bad_limits)
{
	char value47[64] = "{\"pids.max\":\"", value48[64];

	ASSERT_REFUSED("cgroupLimits", "{\"memory.high\":\"1\"}",
		       "cgroupLimits has an unknown limit \"memory.high\"");
	ASSERT_REFUSED("cgroupLimits", "{\"cpu.weight\":\"100\",\"io.max\":\"1\"}",
		       "cgroupLimits has an unknown limit \"io.max\"");
	ASSERT_REFUSED("cgroupLimits", "{\"pids.max\":\"1;rm\"}",
		       "cgroupLimits.pids.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "{\"pids.max\":\"MAX\"}",
		       "cgroupLimits.pids.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "{\"cpu.max\":\"1\\n2\"}",
		       "cgroupLimits.cpu.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "{\"memory.max\":\"-1\"}",
		       "cgroupLimits.memory.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "{\"pids.max\":\"\"}",
		       "cgroupLimits.pids.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "{\"pids.max\":5}",
		       "cgroupLimits.pids.max is not a value of [0-9a-z ]");
	ASSERT_REFUSED("cgroupLimits", "[]", "cgroupLimits is missing or not an object");
	ASSERT_REFUSED("cgroupLimits", NULL, "cgroupLimits is missing or not an object");
	/* A value fits PolicyLimit.value: 47 characters, not 48. */
	memset(value47 + strlen(value47), '1', 47);
	strcpy(value47 + 13 + 47, "\"}");
	strcpy(value48, value47);
	memmove(value48 + 14, value48 + 13, strlen(value48 + 13) + 1);
	ASSERT_ACCEPTED("cgroupLimits", value47);
	ASSERT_REFUSED("cgroupLimits", value48,
		       "cgroupLimits.pids.max is not a value of [0-9a-z ]");
}

static json_t *array_of(size_t n, bool ports)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		char v[32];

		snprintf(v, sizeof(v), "/tmp/x%zu", i);
		json_array_append_new(a, ports ? json_integer((json_int_t)(i % 65535) + 1)
					       : json_string(v));
	}
	return a;
}

TEST(decoder_refuses_long_lists)
{
	static const char *const string_keys[] = {"declaredCapabilities", "writePaths", "readPaths",
						  "meshPeers"};
	static const char *const port_keys[] = {"networkPorts", "bindPorts"};

	for (size_t i = 0; i < ELEMENTSOF(string_keys); i++) {
		char want[80], *e;

		e = refusal_j(string_keys[i], array_of(POLICY_LIST_MAX, false));
		if (e)
			TEST_FAIL("%s with %d entries refused: %s", string_keys[i], POLICY_LIST_MAX,
				  e);
		snprintf(want, sizeof(want), "%s has more than 1024 entries", string_keys[i]);
		e = refusal_j(string_keys[i], array_of(POLICY_LIST_MAX + 1, false));
		ASSERT_STREQ(e, want);
		free(e);
	}
	for (size_t i = 0; i < ELEMENTSOF(port_keys); i++) {
		char want[80], *e;

		e = refusal_j(port_keys[i], array_of(POLICY_LIST_MAX, true));
		if (e)
			TEST_FAIL("%s with %d entries refused: %s", port_keys[i], POLICY_LIST_MAX,
				  e);
		snprintf(want, sizeof(want), "%s has more than 1024 entries", port_keys[i]);
		e = refusal_j(port_keys[i], array_of(POLICY_LIST_MAX + 1, true));
		ASSERT_STREQ(e, want);
		free(e);
	}
}

TEST(decoder_refuses_duplicate_keys_and_bad_json)
{
	char *err = NULL, *text;

	/* The base policy with "appName" given twice. */
	text = malloc(sizeof(base_policy) + 32);
	strcpy(text, "{\"appName\":\"other\",");
	strcat(text, base_policy + 1);
	ASSERT_ERROR(decode_text(text, &err), EINVAL);
	ASSERT_TRUE(strneq(err, "line 1 column ", strlen("line 1 column ")));
	ASSERT_TRUE(strstr(err, "duplicate object key") != NULL);
	free(err);
	free(text);
	ASSERT_ERROR(decode_text("{\"appName\":\"a\",\"appName\":\"b\"}", &err), EINVAL);
	ASSERT_STREQ(err, "line 1 column 24: duplicate object key near '\"appName\"'");
	free(err);
	/* Twice inside cgroupLimits. */
	ASSERT_ERROR(
		decode_text("{\"cgroupLimits\":{\"pids.max\":\"1\",\"pids.max\":\"2\"}}", &err),
		EINVAL);
	ASSERT_TRUE(strstr(err, "duplicate object key") != NULL);
	free(err);
	/* Trailing text, truncated text, NUL escapes, not JSON at all. */
	text = malloc(sizeof(base_policy) + 8);
	strcpy(text, base_policy);
	strcat(text, " x");
	ASSERT_ERROR(decode_text(text, &err), EINVAL);
	ASSERT_TRUE(strneq(err, "line 1 column ", strlen("line 1 column ")));
	free(err);
	text[sizeof(base_policy) - 10] = '\0';
	ASSERT_ERROR(decode_text(text, &err), EINVAL);
	ASSERT_TRUE(strneq(err, "line 1 column ", strlen("line 1 column ")));
	free(err);
	free(text);
	ASSERT_ERROR(decode_text("{\"appName\":\"no\\u0000tes\"}", &err), EINVAL);
	ASSERT_TRUE(strneq(err, "line 1 column ", strlen("line 1 column ")));
	free(err);
	ASSERT_ERROR(decode_text("", &err), EINVAL);
	ASSERT_NOT_NULL(err);
	free(err);
	CapabilityPolicy *p = NULL;
	ASSERT_ERROR(capability_policy_decode("{}", 1, &p, &err), EINVAL); /* only @len bytes */
	free(err);
}

TEST(decoder_refuses_files_over_the_cap)
{
	size_t blen = strlen(base_policy);
	char *text = malloc(POLICY_FILE_SIZE_MAX + 2), *err = NULL;
	CapabilityPolicy *p = NULL;

	/* Exactly the cap (the policy, then blanks) is fine; one byte more is not. */
	memcpy(text, base_policy, blen);
	memset(text + blen, ' ', POLICY_FILE_SIZE_MAX + 1 - blen);
	text[POLICY_FILE_SIZE_MAX + 1] = '\0';
	ASSERT_OK(capability_policy_decode(text, POLICY_FILE_SIZE_MAX, &p, &err));
	ASSERT_TRUE(err == NULL);
	capability_policy_free(p);
	p = NULL;
	ASSERT_ERROR(capability_policy_decode(text, POLICY_FILE_SIZE_MAX + 1, &p, &err), EFBIG);
	ASSERT_STREQ(err, "larger than 1048576 bytes");
	ASSERT_TRUE(p == NULL);
	free(err);
	free(text);
}

/* --- the query -------------------------------------------------------------------------- */

#define ASSERT_GRANTS(p, path, access, rule) \
	ASSERT_STREQ(capability_policy_grants((p), (path), (access)), (rule))
#define ASSERT_DENIES(p, path, access)                                                           \
	do {                                                                                     \
		const char *_r = capability_policy_grants((p), (path), (access));                \
		if (_r)                                                                          \
			TEST_FAIL("%s (%s) granted by \"%s\"", (path) ?: "(null)", #access, _r); \
	} while (0)
#define R POLICY_ACCESS_READ
#define W POLICY_ACCESS_WRITE

TEST(grants_reads)
{
	CapabilityPolicy *p = compile(
		"notes", "[\"filesystem:write:/workspace\", \"filesystem:read:/context/docs\"]",
		NULL);

	/* The baseline. */
	ASSERT_GRANTS(p, "/usr/bin/node", R, "/usr");
	ASSERT_GRANTS(p, "/usr", R, "/usr");
	ASSERT_GRANTS(p, "/bin/sh", R, "/bin");
	ASSERT_GRANTS(p, "/sbin/agent-init", R, "/sbin");
	ASSERT_GRANTS(p, "/lib/x86_64-linux-gnu/libc.so.6", R, "/lib");
	ASSERT_GRANTS(p, "/etc/passwd", R, "/etc");
	ASSERT_GRANTS(p, "/proc/self/status", R, "/proc");
	ASSERT_GRANTS(p, "/dev/urandom", R, "/dev");
	/* Its own directories, its cwd, what it declared. */
	ASSERT_GRANTS(p, "/run/berth/notes", R, "/run/berth/notes");
	ASSERT_GRANTS(p, "/run/berth/notes/rpc.sock", R, "/run/berth/notes");
	ASSERT_GRANTS(p, "/app/main.js", R, "/app");
	ASSERT_GRANTS(p, "/context/docs/a.md", R, "/context/docs");
	/* Write implies read. */
	ASSERT_GRANTS(p, "/workspace", R, "/workspace");
	ASSERT_GRANTS(p, "/workspace/a/b", R, "/workspace");
	ASSERT_GRANTS(p, "/tmp/notes/x", R, "/tmp/notes");
	ASSERT_GRANTS(p, "/dev/null", R, "/dev");
	/* Beneath, not beside. */
	ASSERT_DENIES(p, "/workspacex", R);
	ASSERT_DENIES(p, "/workspacex/a", R);
	ASSERT_DENIES(p, "/context/docsx", R);
	ASSERT_DENIES(p, "/context", R);
	ASSERT_DENIES(p, "/context/other", R);
	ASSERT_DENIES(p, "/apps", R);
	ASSERT_DENIES(p, "/usrx", R);
	/* Another app's data, and everything else. */
	ASSERT_DENIES(p, "/run/berth/other", R);
	ASSERT_DENIES(p, "/run/berth/other/secret", R);
	ASSERT_DENIES(p, "/run/berth/notesx", R);
	ASSERT_DENIES(p, "/run/berth", R);
	ASSERT_DENIES(p, "/run/berth/github-api-broker/token", R);
	ASSERT_DENIES(p, "/tmp/other", R);
	ASSERT_DENIES(p, "/tmp/other/x", R);
	ASSERT_DENIES(p, "/tmp/notesx", R);
	ASSERT_DENIES(p, "/tmp", R);
	ASSERT_DENIES(p, "/tmp/x", R);
	ASSERT_DENIES(p, "/root/.ssh/id_ed25519", R);
	ASSERT_DENIES(p, "/var/lib/x", R);
	ASSERT_DENIES(p, "/home", R);
	ASSERT_DENIES(p, "/", R);
	ASSERT_DENIES(p, "usr/bin", R);
	ASSERT_DENIES(p, "", R);
	ASSERT_DENIES(p, NULL, R);
	ASSERT_DENIES(p, "/usr", (PolicyAccess)7);
	ASSERT_DENIES(p, "/usr", _POLICY_ACCESS_INVALID);
	capability_policy_free(p);

	/* github: reads the broker's directory. */
	p = compile("a", "[\"github:read:repos\"]", NULL);
	ASSERT_GRANTS(p, "/run/berth/github-api-broker/ca.pem", R, "/run/berth/github-api-broker");
	ASSERT_DENIES(p, "/run/berth/github-api-broker/ca.pem", W);
	capability_policy_free(p);
}

TEST(grants_writes)
{
	CapabilityPolicy *p =
		compile("notes",
			"[\"filesystem:write:/workspace\", \"filesystem:read:/context/docs\","
			" \"terminal:attach:*\"]",
			NULL);

	ASSERT_GRANTS(p, "/workspace", W, "/workspace");
	ASSERT_GRANTS(p, "/workspace/a/b", W, "/workspace");
	ASSERT_GRANTS(p, "/tmp/notes", W, "/tmp/notes");
	ASSERT_GRANTS(p, "/tmp/notes/f", W, "/tmp/notes");
	ASSERT_GRANTS(p, "/run/berth/notes/state", W, "/run/berth/notes");
	ASSERT_DENIES(p, "/workspacex", W);
	ASSERT_DENIES(p, "/workspacex/a", W);
	ASSERT_DENIES(p, "/usr/bin/node", W);
	ASSERT_DENIES(p, "/etc/passwd", W);
	/* Readable is not writable. */
	ASSERT_DENIES(p, "/app/main.js", W);
	ASSERT_DENIES(p, "/context/docs/a", W);
	ASSERT_DENIES(p, "/proc/self/mem", W);
	/* Another app's. */
	ASSERT_DENIES(p, "/tmp/other/f", W);
	ASSERT_DENIES(p, "/tmp/notesx", W);
	ASSERT_DENIES(p, "/tmp/f", W);
	ASSERT_DENIES(p, "/tmp", W);
	ASSERT_DENIES(p, "/run/berth/other", W);
	ASSERT_DENIES(p, "/run/berth/other/x", W);
	ASSERT_DENIES(p, "/run/berth", W);
	/* Device paths: exactly these. */
	ASSERT_GRANTS(p, "/dev/null", W, "/dev/null");
	ASSERT_GRANTS(p, "/dev/ptmx", W, "/dev/ptmx");
	ASSERT_GRANTS(p, "/dev/pts", W, "/dev/pts");
	ASSERT_GRANTS(p, "/dev/pts/0", W, "/dev/pts");
	ASSERT_DENIES(p, "/dev/tty", W);
	ASSERT_DENIES(p, "/dev/zero", W);
	ASSERT_DENIES(p, "/dev/nullx", W);
	ASSERT_DENIES(p, "/dev", W);
	ASSERT_DENIES(p, "/", W);
	ASSERT_DENIES(p, NULL, W);
	/* Every write path is readable. */
	for (size_t i = 0; i < p->write_paths.n; i++)
		if (!capability_policy_grants(p, p->write_paths.v[i], R))
			TEST_FAIL("%s is writable but not readable", p->write_paths.v[i]);
	capability_policy_free(p);

	/* Without terminal:, the pseudo-terminals are readable (/dev) but not writable. */
	p = compile("other", "[]", NULL);
	ASSERT_DENIES(p, "/dev/pts/0", W);
	ASSERT_DENIES(p, "/dev/ptmx", W);
	ASSERT_GRANTS(p, "/dev/pts/0", R, "/dev");
	ASSERT_GRANTS(p, "/dev/null", W, "/dev/null");
	ASSERT_GRANTS(p, "/tmp/other/x", W, "/tmp/other");
	ASSERT_DENIES(p, "/tmp/notes/x", W);
	ASSERT_DENIES(p, "/tmp/notes/x", R);
	ASSERT_DENIES(p, "/run/berth/notes", R);
	ASSERT_DENIES(p, "/workspace", W);
	ASSERT_DENIES(p, "/workspace", R);
	capability_policy_free(p);
}

TEST(grants_what_a_decoded_policy_names)
{
	CapabilityPolicy *p = NULL;
	char *err = NULL;
	static const char text[] =
		"{\"appName\":\"x\",\"bindPorts\":[],\"cgroupLimits\":{},\"declaredCapabilities\":[],"
		"\"meshPeers\":[],\"networkPorts\":[],\"networkUnrestricted\":false,"
		"\"readPaths\":[\"/opt/data\"],\"schema\":2,\"writePaths\":[\"/workspace/out\"]}";

	ASSERT_OK(capability_policy_decode(text, strlen(text), &p, &err));
	ASSERT_GRANTS(p, "/opt/data/f", R, "/opt/data");
	ASSERT_DENIES(p, "/usr/bin/node", R); /* only what the file names */
	ASSERT_DENIES(p, "/workspace/out/f", R);
	ASSERT_GRANTS(p, "/workspace/out/f", W, "/workspace/out");
	ASSERT_DENIES(p, "/workspace/outx", W);
	ASSERT_DENIES(p, "/workspace", W);
	capability_policy_free(p);
}

int main(void)
{
	return tests_run();
}
