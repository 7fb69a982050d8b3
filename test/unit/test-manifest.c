/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "manifest.h"
#include "tests.h"

#define HEAD "name: app\nversion: 1.0.0\n"

static Manifest *parse_ok(const char *yaml)
{
	ManifestError e = {};
	Manifest *m = NULL;
	int r = manifest_parse(yaml, strlen(yaml), NULL, &m, &e);

	if (r < 0)
		TEST_FAIL("refused (%d):\n%s\n---\n%s", r, yaml, e.text ? e.text : "");
	ASSERT_TRUE(e.text == NULL && e.n_issues == 0);
	return m;
}

/* The report for an invalid @yaml (@file names it), malloc()ed. */
static char *report_for(const char *yaml, size_t len, const char *file)
{
	ManifestError e = {};
	Manifest *m = NULL;
	char *text;
	int r = manifest_parse(yaml, len, file, &m, &e);

	if (r >= 0)
		TEST_FAIL("accepted:\n%s", yaml);
	ASSERT_EQ(r, -EBADMSG);
	ASSERT_TRUE(m == NULL);
	ASSERT_NOT_NULL(e.text);
	ASSERT_TRUE(e.n_issues > 0);
	text = strdup(e.text);
	manifest_error_done(&e);
	return text;
}

#define ASSERT_REPORT(yaml, want)                                               \
	do {                                                                    \
		_cleanup_free_ char *_t = report_for(yaml, strlen(yaml), NULL); \
		ASSERT_STREQ(_t, want);                                         \
	} while (0)

/* One issue, so the report is the heading and one line. */
#define ASSERT_ISSUE(yaml, line) ASSERT_REPORT(yaml, "invalid berth.yml:\n" line)

static char *normalised(const char *yaml)
{
	_cleanup_(manifest_freep) Manifest *m = parse_ok(yaml);
	_cleanup_(json_decrefp) json_t *doc = manifest_to_json(m);

	return json_dumps(doc, JSON_COMPACT);
}

#define ASSERT_NORMALISED(yaml, want)                       \
	do {                                                \
		_cleanup_free_ char *_t = normalised(yaml); \
		ASSERT_STREQ(_t, want);                     \
	} while (0)

#define DEFAULTS_AFTER_VERSION                                                                     \
	"\"description\":\"\",\"capabilities\":[],\"exports\":[],\"on_install\":[],"               \
	"\"on_agent_ready\":[],\"expose\":{\"browser\":true,\"terminal\":true,\"preview\":false}," \
	"\"governs\":false,\"governance\":{\"exempt\":false},\"resources\":{},\"secrets\":[],"     \
	"\"runtime\":\"node\"}"

TEST(minimal_gets_every_default)
{
	ASSERT_NORMALISED(HEAD, "{\"name\":\"app\",\"version\":\"1.0.0\"," DEFAULTS_AFTER_VERSION);
}

TEST(unknown_keys_are_dropped)
{
	ASSERT_NORMALISED(HEAD "future_field:\n  anything: [1, 2]\nx: null\n",
			  "{\"name\":\"app\",\"version\":\"1.0.0\"," DEFAULTS_AFTER_VERSION);
}

TEST(full_manifest_and_accessors)
{
	static const char yaml[] = "name: my-app\n"
				   "version: 12.0.3\n"
				   "description: Does things\n"
				   "runtime: python\n"
				   "capabilities:\n"
				   "  - github:read:repos\n"
				   "  - network:connect:127.0.0.1:8080\n"
				   "  - github:read:repos\n"
				   "  - filesystem:write:/workspace/*\n"
				   "exports:\n"
				   "  - name: evaluate_action\n"
				   "    input: {action: object}\n"
				   "    output: {allowed: boolean, why: string}\n"
				   "  - name: ping\n"
				   "on_install: [\"apt-get install -y jq\"]\n"
				   "on_agent_ready: [\"echo hi\"]\n"
				   "expose: {browser: false}\n"
				   "governs: true\n"
				   "governance: {exempt: true}\n"
				   "resources: {cpu: 0.5, memory_mb: 512, gpu: 1, pids: 64.0}\n"
				   "secrets: [GITHUB_TOKEN, _x1]\n";
	_cleanup_(manifest_freep) Manifest *m = parse_ok(yaml);
	const char *const *caps, *const *secrets, *const *install, *const *ready;
	const ManifestExport *exports, *e;
	const ManifestResources *res;
	ManifestExpose expose;

	ASSERT_STREQ(manifest_name(m), "my-app");
	ASSERT_STREQ(manifest_version(m), "12.0.3");
	ASSERT_STREQ(manifest_description(m), "Does things");
	ASSERT_EQ(manifest_runtime(m), MANIFEST_RUNTIME_PYTHON);
	ASSERT_STREQ(manifest_runtime_to_string(manifest_runtime(m)), "python");
	/* A repeated capability is one grant. */
	ASSERT_EQ(manifest_capabilities(m, &caps), 3);
	ASSERT_STREQ(caps[0], "github:read:repos");
	ASSERT_STREQ(caps[1], "network:connect:127.0.0.1:8080");
	ASSERT_STREQ(caps[2], "filesystem:write:/workspace/*");
	ASSERT_EQ(manifest_exports(m, &exports), 2);
	ASSERT_STREQ(exports[0].name, "evaluate_action");
	ASSERT_STREQ(json_string_value(json_object_get(exports[0].input, "action")), "object");
	ASSERT_EQ(json_object_size(exports[0].output), 2);
	ASSERT_STREQ(exports[1].name, "ping");
	ASSERT_TRUE(exports[1].input == NULL && exports[1].output == NULL);
	e = manifest_find_export(m, "ping");
	ASSERT_TRUE(e == &exports[1]);
	ASSERT_TRUE(manifest_find_export(m, "pong") == NULL);
	ASSERT_EQ(manifest_on_install(m, &install), 1);
	ASSERT_STREQ(install[0], "apt-get install -y jq");
	ASSERT_EQ(manifest_on_agent_ready(m, &ready), 1);
	ASSERT_STREQ(ready[0], "echo hi");
	ASSERT_EQ(manifest_secrets(m, &secrets), 2);
	ASSERT_STREQ(secrets[1], "_x1");
	expose = manifest_expose(m);
	ASSERT_TRUE(!expose.browser && expose.terminal && !expose.preview);
	ASSERT_TRUE(manifest_governs(m));
	ASSERT_TRUE(manifest_governance_exempt(m));
	res = manifest_resources(m);
	ASSERT_TRUE(res->has_cpu && res->cpu == 0.5);
	ASSERT_TRUE(res->has_memory_mb && res->memory_mb == 512);
	ASSERT_TRUE(res->has_gpu && res->gpu == 1);
	ASSERT_TRUE(res->has_pids && res->pids == 64);
}

TEST(normalised_full)
{
	/* Capabilities stay as written in the normalised form; integral counts become
	 * integers; export keys other than name/input/output are dropped. */
	ASSERT_NORMALISED(HEAD "capabilities: [a:b:c, a:b:c]\n"
			       "exports:\n  - {name: f, extra: 1, output: {}}\n"
			       "resources: {memory_mb: 2e3, cpu: 2}\nschema_version: 1\n",
			  "{\"name\":\"app\",\"version\":\"1.0.0\",\"description\":\"\","
			  "\"capabilities\":[\"a:b:c\",\"a:b:c\"],"
			  "\"exports\":[{\"name\":\"f\",\"output\":{}}],\"on_install\":[],"
			  "\"on_agent_ready\":[],"
			  "\"expose\":{\"browser\":true,\"terminal\":true,\"preview\":false},"
			  "\"governs\":false,\"governance\":{\"exempt\":false},"
			  "\"resources\":{\"cpu\":2,\"memory_mb\":2000},\"secrets\":[],"
			  "\"runtime\":\"node\"}");
}

TEST(name_and_version)
{
	ASSERT_ISSUE("name: My_App\nversion: 1.0.0\n",
		     "berth.yml:1 name: name must be lowercase alphanumeric with dashes");
	ASSERT_ISSUE("name: ''\nversion: 1.0.0\n",
		     "berth.yml:1 name: name must be lowercase alphanumeric with dashes");
	ASSERT_ISSUE("name: my_app\nversion: 1.0.0\n",
		     "berth.yml:1 name: name must be lowercase alphanumeric with dashes");
	ASSERT_ISSUE("name: 7\nversion: 1.0.0\n",
		     "berth.yml:1 name: Expected string, received number");
	ASSERT_ISSUE("name: app\nversion: '1.0'\n",
		     "berth.yml:2 version: version must be semver (x.y.z)");
	ASSERT_ISSUE("name: app\nversion: 1.0.0-rc.1\n",
		     "berth.yml:2 version: version must be semver (x.y.z)");
	ASSERT_ISSUE("name: app\nversion: 1.0.0+build\n",
		     "berth.yml:2 version: version must be semver (x.y.z)");
	ASSERT_ISSUE("name: app\nversion: v1.0.0\n",
		     "berth.yml:2 version: version must be semver (x.y.z)");
	/* 1.0 is a float in YAML 1.2. */
	ASSERT_ISSUE("name: app\nversion: 1.0\n",
		     "berth.yml:2 version: Expected string, received number");
	/* A missing key is placed at the mapping it is missing from. */
	ASSERT_ISSUE("\n\nversion: 1.0.0\n", "berth.yml:3 name: Required");
	ASSERT_ISSUE("name: app\n", "berth.yml:1 version: Required");
	ASSERT_REPORT("description: x\n", "invalid berth.yml:\n"
					  "berth.yml:1 name: Required\n"
					  "berth.yml:1 version: Required");
}

TEST(root_must_be_a_mapping)
{
	ASSERT_ISSUE("not a mapping\n", "berth.yml:1 (root): Expected object, received string");
	ASSERT_ISSUE("", "berth.yml:1 (root): Expected object, received null");
	ASSERT_ISSUE("# only a comment\n", "berth.yml:1 (root): Expected object, received null");
	ASSERT_ISSUE("- a\n- b\n", "berth.yml:1 (root): Expected object, received array");
}

TEST(explicit_null_is_not_absent)
{
	ASSERT_ISSUE(HEAD "capabilities: null\n",
		     "berth.yml:3 capabilities: Expected array, received null");
	ASSERT_ISSUE(HEAD "description: ~\n",
		     "berth.yml:3 description: Expected string, received null");
	ASSERT_ISSUE(HEAD "exports:\n", "berth.yml:3 exports: Expected array, received null");
	ASSERT_ISSUE(HEAD "on_install:\n", "berth.yml:3 on_install: Expected array, received null");
	ASSERT_ISSUE(HEAD "on_agent_ready: null\n",
		     "berth.yml:3 on_agent_ready: Expected array, received null");
	ASSERT_ISSUE(HEAD "expose: null\n", "berth.yml:3 expose: Expected object, received null");
	ASSERT_ISSUE(HEAD "expose: {preview: null}\n",
		     "berth.yml:3 expose.preview: Expected boolean, received null");
	ASSERT_ISSUE(HEAD "governs: null\n",
		     "berth.yml:3 governs: Expected boolean, received null");
	ASSERT_ISSUE(HEAD "governance: null\n",
		     "berth.yml:3 governance: Expected object, received null");
	ASSERT_ISSUE(HEAD "resources: null\n",
		     "berth.yml:3 resources: Expected object, received null");
	ASSERT_ISSUE(HEAD "resources: {cpu: null}\n",
		     "berth.yml:3 resources.cpu: Expected number, received null");
	ASSERT_ISSUE(HEAD "secrets: null\n", "berth.yml:3 secrets: Expected array, received null");
	ASSERT_ISSUE(HEAD "runtime: null\n",
		     "berth.yml:3 runtime: Expected 'node' | 'python', received null");
	ASSERT_ISSUE("name: null\nversion: 1.0.0\n",
		     "berth.yml:1 name: Expected string, received null");
	ASSERT_ISSUE(HEAD "exports:\n  - name: f\n    input: null\n",
		     "berth.yml:5 exports.0.input: Expected object, received null");
	ASSERT_ISSUE(HEAD "exports:\n  - name: ~\n",
		     "berth.yml:4 exports.0.name: Expected string, received null");
}

TEST(capability_grammar_with_index_and_line)
{
	ASSERT_ISSUE(HEAD "capabilities:\n  - github:read:repos\n  - github:read\n",
		     "berth.yml:5 capabilities.1: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [\"github:read:\"]\n",
		     "berth.yml:3 capabilities.0: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [\":read:repos\"]\n",
		     "berth.yml:3 capabilities.0: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [GitHub:read:repos]\n",
		     "berth.yml:3 capabilities.0: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [git hub:read:repos]\n",
		     "berth.yml:3 capabilities.0: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [\"a:b:c\\nd\"]\n",
		     "berth.yml:3 capabilities.0: capability must be 'namespace:action:scope'");
	ASSERT_ISSUE(HEAD "capabilities: [7]\n",
		     "berth.yml:3 capabilities.0: Expected string, received number");
	ASSERT_ISSUE(HEAD "capabilities: github:read:repos\n",
		     "berth.yml:3 capabilities: Expected array, received string");
	ASSERT_ISSUE(HEAD "capabilities: [\"browser:navigate:*\\0x\"]\n",
		     "berth.yml:3 capabilities.0: capability must not contain a NUL byte");
}

TEST(capabilities_accepted)
{
	_cleanup_(manifest_freep) Manifest *m = parse_ok(
		HEAD "capabilities:\n"
		     "  - github:read:repos\n  - filesystem:read:/workspace\n"
		     "  - filesystem:write:/workspace/out\n  - filesystem:write:/tmp/scratch\n"
		     "  - filesystem:read:/context\n  - filesystem:write:/app\n"
		     "  - network:connect:443\n  - network:connect:*\n  - network:peer:db\n"
		     "  - app:invoke:indexer\n  - browser:navigate:*.github.com\n"
		     "  - terminal:attach:*\n  - quantum:entangle:everything\n"
		     "  - filesystem:execute:/etc\n  - network:connect:127.0.0.1:8080\n"
		     "  - a_b-9:c:d\n");
	const char *const *caps;

	ASSERT_EQ(manifest_capabilities(m, &caps), 16);
}

/* Every filesystem message through the manifest, with the line and index it names. */
TEST(filesystem_messages_in_manifest)
{
	ASSERT_REPORT(
		HEAD "capabilities:\n"
		     "  - filesystem:write:/workspace/a\\0b\n" /* a literal backslash: no NUL */
		     "  - \"filesystem:write:/workspace/a\\0b\"\n"
		     "  - filesystem:read:workspace\n"
		     "  - filesystem:write:/workspace/*/src\n"
		     "  - filesystem:write:/\n"
		     "  - filesystem:read:/workspace/../etc\n"
		     "  - filesystem:write:/etc\n"
		     "  - filesystem:read:/*\n",
		"invalid berth.yml:\n"
		"berth.yml:5 capabilities.1: filesystem path must not contain a null byte\n"
		"berth.yml:6 capabilities.2: filesystem path must be absolute (start with \"/\"), got \"workspace\"\n"
		"berth.yml:7 capabilities.3: filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got \"/workspace/*/src\"\n"
		"berth.yml:8 capabilities.4: filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead\n"
		"berth.yml:9 capabilities.5: filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace/../etc\"\n"
		"berth.yml:10 capabilities.6: filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc\"\n"
		"berth.yml:11 capabilities.7: filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead");
}

static char *scope_issue(const char *scope)
{
	char *msg = NULL;
	int r = capability_fs_scope_issue(scope, strlen(scope), &msg);

	ASSERT_EQ(r, 0);
	return msg;
}

TEST(filesystem_scope_accepted)
{
	static const char *const ok[] = {
		"/workspace",
		"/workspace/*",
		"/workspace/packages/examples/boundary-app-a",
		"/context",
		"/tmp/my-app",
		"/app",
		"/tmp",
		"/app/*",
		"/workspace/a b/ü",
		"/workspace/.hidden",
		"/workspace/...",
	};

	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		_cleanup_free_ char *msg = scope_issue(ok[i]);

		if (msg)
			TEST_FAIL("%s refused: %s", ok[i], msg);
	}
}

#define OUTSIDE \
	"filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got "
#define NOT_CANONICAL \
	"filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got "
#define GLOB \
	"filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got "
#define RELATIVE "filesystem path must be absolute (start with \"/\"), got "
#define ROOT \
	"filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead"

TEST(filesystem_scope_rejected)
{
	static const struct {
		const char *scope, *message;
	} cases[] = {
		{"/etc", OUTSIDE "\"/etc\""},
		{"/etc/passwd", OUTSIDE "\"/etc/passwd\""},
		{"/root", OUTSIDE "\"/root\""},
		{"/usr/local/bin", OUTSIDE "\"/usr/local/bin\""},
		{"/workspacex", OUTSIDE "\"/workspacex\""},
		{"/tmpfoo", OUTSIDE "\"/tmpfoo\""},
		{"/apps/x", OUTSIDE "\"/apps/x\""},
		{"/Workspace", OUTSIDE "\"/Workspace\""},
		{"*", RELATIVE "\"*\""},
		{"workspace", RELATIVE "\"workspace\""},
		{"", RELATIVE "\"\""},
		{"./workspace", RELATIVE "\"./workspace\""},
		{"/workspace/../etc", NOT_CANONICAL "\"/workspace/../etc\""},
		{"/workspace/./x", NOT_CANONICAL "\"/workspace/./x\""},
		{"/workspace//x", NOT_CANONICAL "\"/workspace//x\""},
		{"/workspace/", NOT_CANONICAL "\"/workspace/\""},
		{"//workspace", NOT_CANONICAL "\"//workspace\""},
		{"/workspace/..", NOT_CANONICAL "\"/workspace/..\""},
		{"/workspace//*", NOT_CANONICAL "\"/workspace//*\""},
		{"/*",
		 "filesystem:*:/ would grant the entire container filesystem — declare a path "
		 "under /workspace, /context, /tmp, /app instead"},
		{"/workspace/*/src", GLOB "\"/workspace/*/src\""},
		{"/workspace/**", GLOB "\"/workspace/**\""},
		{"/workspace*", GLOB "\"/workspace*\""},
		{"/*/*", GLOB "\"/*/*\""},
		{"/", ROOT},
		{"//*", ROOT},
		/* Quoting is JSON's. */
		{"/etc/\"q\"\\\t", OUTSIDE "\"/etc/\\\"q\\\"\\\\\\t\""},
		{"/etc/\x01", OUTSIDE "\"/etc/\\u0001\""},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ char *msg = scope_issue(cases[i].scope);

		if (!msg)
			TEST_FAIL("%s accepted", cases[i].scope);
		ASSERT_STREQ(msg, cases[i].message);
	}
}

TEST(filesystem_scope_nul)
{
	char *msg = NULL;

	ASSERT_EQ(capability_fs_scope_issue("/workspace/a\0b", 14, &msg), 0);
	ASSERT_NOT_NULL(msg);
	ASSERT_STREQ(msg, "filesystem path must not contain a null byte");
	free(msg);
	/* NUL comes first, before the relative check. */
	ASSERT_EQ(capability_fs_scope_issue("x\0", 2, &msg), 0);
	ASSERT_NOT_NULL(msg);
	ASSERT_STREQ(msg, "filesystem path must not contain a null byte");
	free(msg);
}

TEST(non_filesystem_scopes_are_not_paths)
{
	static const char *const ok[] = {
		"browser:navigate:*", "network:connect:*", "network:peer:*",
		"terminal:attach:*",  "github:read:repos", "filesystem:execute:etc",
	};

	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		char *msg = NULL;

		ASSERT_EQ(capability_issue(ok[i], strlen(ok[i]), &msg), 0);
		ASSERT_TRUE(msg == NULL);
		ASSERT_TRUE(capability_is_well_formed(ok[i], strlen(ok[i])));
	}
}

TEST(capability_issue_messages)
{
	char *msg = NULL;

	ASSERT_EQ(capability_issue("github:read", 11, &msg), 0);
	ASSERT_NOT_NULL(msg);
	ASSERT_STREQ(
		msg,
		"invalid capability string \"github:read\": expected 'namespace:action:scope'");
	free(msg);
	ASSERT_EQ(capability_issue("filesystem:write:/etc", 21, &msg), 0);
	ASSERT_NOT_NULL(msg);
	ASSERT_STREQ(msg, OUTSIDE "\"/etc\"");
	free(msg);
	ASSERT_EQ(capability_issue("filesystem:read:/workspace", 26, &msg), 0);
	ASSERT_TRUE(msg == NULL);
}

TEST(capability_parse_and_grammar)
{
	_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

	ASSERT_OK(capability_parse("network:connect:127.0.0.1:8080", &ns, &action, &scope));
	ASSERT_STREQ(ns, "network");
	ASSERT_STREQ(action, "connect");
	ASSERT_STREQ(scope, "127.0.0.1:8080");
	ASSERT_ERROR(capability_parse("github:read", NULL, NULL, NULL), EINVAL);
	ASSERT_ERROR(capability_parse("githubread", NULL, NULL, NULL), EINVAL);
	ASSERT_OK(capability_parse("a:b:", NULL, NULL, NULL));
	ASSERT_TRUE(capability_is_well_formed("a:b::", 5));
	ASSERT_FALSE(capability_is_well_formed("a:b:", 4));
	ASSERT_FALSE(capability_is_well_formed("a:B:c", 5));
	ASSERT_FALSE(capability_is_well_formed("a:b:c\r", 6));
	ASSERT_FALSE(capability_is_well_formed("a:b:x\xe2\x80\xa8y", 9));
	ASSERT_TRUE(capability_is_well_formed("a:b:x\xe2\x80\xa7y", 9));
}

TEST(capability_matches_cases)
{
	static const struct {
		const char *id, *granted, *requested;
		bool matches;
	} cases[] = {
		{"match-exact", "github:read:repos", "github:read:repos", true},
		{"match-ns-differs", "github:read:repos", "gitlab:read:repos", false},
		{"match-action-differs", "github:read:repos", "github:write:repos", false},
		{"match-action-no-glob", "github:*:repos", "github:read:repos", false},
		{"match-ns-no-glob", "*:read:repos", "github:read:repos", false},
		{"match-scope-glob-prefix", "browser:navigate:*.github.com",
		 "browser:navigate:api.github.com", true},
		{"match-scope-glob-no-bare", "browser:navigate:*.github.com",
		 "browser:navigate:github.com", false},
		{"match-scope-star-all", "browser:navigate:*", "browser:navigate:anything/at.all",
		 true},
		{"match-scope-glob-crosses-slash", "filesystem:read:/workspace/*",
		 "filesystem:read:/workspace/a/b/c", true},
		{"match-scope-literal-question", "browser:navigate:a?c.com",
		 "browser:navigate:abc.com", false},
		{"match-scope-literal-question-itself", "browser:navigate:a?c.com",
		 "browser:navigate:a?c.com", true},
		{"match-scope-literal-question-optional", "browser:navigate:ab?c.com",
		 "browser:navigate:ac.com", false},
		{"match-scope-literal-bracket", "browser:navigate:a[b].com",
		 "browser:navigate:a[b].com", true},
		{"match-scope-bracket-not-a-class", "browser:navigate:a[b].com",
		 "browser:navigate:ab.com", false},
		{"match-scope-dot-is-literal", "browser:navigate:a.com", "browser:navigate:axcom",
		 false},
		{"match-not-symmetric", "browser:navigate:api.github.com", "browser:navigate:*",
		 false},
		{"match-scope-with-colon", "network:connect:127.0.0.1:8080",
		 "network:connect:127.0.0.1:8080", true},
		{"match-scope-glob-over-colon", "network:connect:127.0.0.1:*",
		 "network:connect:127.0.0.1:8080", true},
		{"match-scope-star-crosses-colon", "network:host:*", "network:host:a.b:443", true},
		{"match-malformed-granted", "github:read", "github:read:repos", false},
		{"match-malformed-requested", "github:read:repos", "githubread", false},
		{"match-multi-star", "browser:navigate:*.github.*",
		 "browser:navigate:api.github.io", true},
		{"match-star-empty", "browser:navigate:a*b", "browser:navigate:ab", true},
		{"match-anchored-end", "browser:navigate:a*b", "browser:navigate:abc", false},
		{"match-anchored-start", "browser:navigate:b*", "browser:navigate:ab", false},
		{"match-backtrack", "x:y:*a*a*b", "x:y:aaaaaaab", true},
		{"match-backtrack-fail", "x:y:*a*a*b", "x:y:aaaaaaa", false},
		{"match-star-no-line-break", "x:y:a*b", "x:y:a\nb", false},
		/* a scope holding a line break is malformed: nothing matches it */
		{"match-literal-line-break", "x:y:a*\n*b", "x:y:aq\nqb", false},
		{"match-regex-metachars", "x:y:a+b(c)|^$\\", "x:y:a+b(c)|^$\\", true},
		{"match-regex-metachars-literal", "x:y:a+", "x:y:aa", false},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		if (capability_matches(cases[i].granted, cases[i].requested) != cases[i].matches)
			TEST_FAIL("%s: %s vs %s should be %s", cases[i].id, cases[i].granted,
				  cases[i].requested, cases[i].matches ? "true" : "false");
	ASSERT_FALSE(capability_matches(NULL, "a:b:c"));
	ASSERT_FALSE(capability_matches("a:b:c", NULL));
}

TEST(exports)
{
	ASSERT_ISSUE(HEAD "exports:\n  - input: {a: string}\n",
		     "berth.yml:4 exports.0.name: Required");
	ASSERT_ISSUE(
		HEAD "exports:\n  - name: f\n    input: {a: int}\n",
		"berth.yml:5 exports.0.input.a: Invalid enum value. Expected 'string' | 'number' | 'boolean' | 'object' | 'array', received 'int'");
	ASSERT_ISSUE(
		HEAD "exports:\n  - name: f\n    output:\n      a: 5\n",
		"berth.yml:6 exports.0.output.a: Expected 'string' | 'number' | 'boolean' | 'object' | 'array', received number");
	ASSERT_ISSUE(HEAD "exports:\n  - name: f\n    input: [a]\n",
		     "berth.yml:5 exports.0.input: Expected object, received array");
	ASSERT_ISSUE(HEAD "exports:\n  - f\n",
		     "berth.yml:4 exports.0: Expected object, received string");
	ASSERT_ISSUE(HEAD "exports: {name: f}\n",
		     "berth.yml:3 exports: Expected array, received object");
	ASSERT_ISSUE(HEAD "exports:\n  - name: \"f\\0\"\n",
		     "berth.yml:4 exports.0.name: export name must not contain a NUL byte");
	/* Every IOSpec type name. */
	manifest_free(parse_ok(
		HEAD
		"exports:\n  - name: f\n    input: {a: string, b: number, c: boolean, d: object, e: array}\n    output: {}\n"));
}

TEST(governs_needs_evaluate_action)
{
	ASSERT_ISSUE(
		HEAD "governs: true\nexports:\n  - name: other\n",
		"berth.yml:3 governs: an app declaring governs: true must also declare an 'evaluate_action' export");
	ASSERT_ISSUE(
		HEAD "governs: true\n",
		"berth.yml:3 governs: an app declaring governs: true must also declare an 'evaluate_action' export");
	manifest_free(parse_ok(HEAD "governs: true\nexports:\n  - name: evaluate_action\n"));
	manifest_free(parse_ok(HEAD "governs: false\n"));
	ASSERT_ISSUE(HEAD "governs: yes\n",
		     "berth.yml:3 governs: Expected boolean, received string");
}

TEST(on_install_and_on_agent_ready)
{
	ASSERT_ISSUE(HEAD "on_install:\n  - make\n  - ''\n",
		     "berth.yml:5 on_install.1: on_install command must not be empty");
	ASSERT_ISSUE(HEAD "on_install: [\"  \\t \"]\n",
		     "berth.yml:3 on_install.0: on_install command must not be empty");
	ASSERT_ISSUE(HEAD "on_install: [\"\\u00a0\\u3000\"]\n",
		     "berth.yml:3 on_install.0: on_install command must not be empty");
	ASSERT_ISSUE(HEAD "on_install: [\"make\\0rm -rf /\"]\n",
		     "berth.yml:3 on_install.0: on_install command must not contain a NUL byte");
	ASSERT_ISSUE(HEAD "on_install: [1]\n",
		     "berth.yml:3 on_install.0: Expected string, received number");
	ASSERT_ISSUE(
		HEAD "on_agent_ready: [\"a\\0\"]\n",
		"berth.yml:3 on_agent_ready.0: on_agent_ready command must not contain a NUL byte");
	/* on_agent_ready may be blank: it is never run. */
	manifest_free(parse_ok(HEAD "on_agent_ready: ['']\n"));
}

TEST(expose_and_governance)
{
	ASSERT_NORMALISED(
		HEAD "expose: {browser: false}\ngovernance: {exempt: true}\n",
		"{\"name\":\"app\",\"version\":\"1.0.0\",\"description\":\"\","
		"\"capabilities\":[],\"exports\":[],\"on_install\":[],\"on_agent_ready\":[],"
		"\"expose\":{\"browser\":false,\"terminal\":true,\"preview\":false},"
		"\"governs\":false,\"governance\":{\"exempt\":true},\"resources\":{},"
		"\"secrets\":[],\"runtime\":\"node\"}");
	ASSERT_ISSUE(HEAD "expose: true\n",
		     "berth.yml:3 expose: Expected object, received boolean");
	ASSERT_ISSUE(HEAD "expose:\n  browser: yes\n",
		     "berth.yml:4 expose.browser: Expected boolean, received string");
	ASSERT_ISSUE(HEAD "governance: {exempt: 1}\n",
		     "berth.yml:3 governance.exempt: Expected boolean, received number");
	ASSERT_ISSUE(HEAD "governance: [exempt]\n",
		     "berth.yml:3 governance: Expected object, received array");
}

TEST(resources)
{
	ASSERT_ISSUE(HEAD "resources: {cpu: '0.5'}\n",
		     "berth.yml:3 resources.cpu: Expected number, received string");
	ASSERT_ISSUE(HEAD "resources: {cpu: 0}\n",
		     "berth.yml:3 resources.cpu: Number must be greater than 0");
	ASSERT_ISSUE(HEAD "resources: {cpu: -1}\n",
		     "berth.yml:3 resources.cpu: Number must be greater than 0");
	ASSERT_ISSUE(HEAD "resources: {memory_mb: 1.5}\n",
		     "berth.yml:3 resources.memory_mb: Expected integer, received float");
	ASSERT_REPORT(HEAD "resources:\n  memory_mb: -1.5\n",
		      "invalid berth.yml:\n"
		      "berth.yml:4 resources.memory_mb: Expected integer, received float\n"
		      "berth.yml:4 resources.memory_mb: Number must be greater than 0");
	ASSERT_ISSUE(HEAD "resources: {gpu: 0}\n",
		     "berth.yml:3 resources.gpu: Number must be greater than 0");
	ASSERT_ISSUE(HEAD "resources: {pids: 0}\n",
		     "berth.yml:3 resources.pids: Number must be greater than 0");
	ASSERT_ISSUE(HEAD "resources: {pids: 1.5}\n",
		     "berth.yml:3 resources.pids: Expected integer, received float");
	ASSERT_ISSUE(
		HEAD "resources: {pids: 1e20}\n",
		"berth.yml:3 resources.pids: Number must be less than or equal to 9007199254740991");
	ASSERT_ISSUE(HEAD "resources: 4\n",
		     "berth.yml:3 resources: Expected object, received number");
	/* Unknown keys inside resources are dropped like any other. */
	ASSERT_NORMALISED(
		HEAD "resources: {disk: 5, cpu: 1.5}\n",
		"{\"name\":\"app\",\"version\":\"1.0.0\",\"description\":\"\","
		"\"capabilities\":[],\"exports\":[],\"on_install\":[],\"on_agent_ready\":[],"
		"\"expose\":{\"browser\":true,\"terminal\":true,\"preview\":false},"
		"\"governs\":false,\"governance\":{\"exempt\":false},"
		"\"resources\":{\"cpu\":1.5},\"secrets\":[],\"runtime\":\"node\"}");
}

TEST(secrets_and_runtime)
{
	ASSERT_ISSUE(
		HEAD "secrets: [GOOD, 1BAD]\n",
		"berth.yml:3 secrets.1: secrets entries must be valid environment variable names");
	ASSERT_ISSUE(
		HEAD "secrets: [A-B]\n",
		"berth.yml:3 secrets.0: secrets entries must be valid environment variable names");
	ASSERT_ISSUE(
		HEAD "secrets: ['']\n",
		"berth.yml:3 secrets.0: secrets entries must be valid environment variable names");
	ASSERT_ISSUE(
		HEAD "runtime: ruby\n",
		"berth.yml:3 runtime: Invalid enum value. Expected 'node' | 'python', received 'ruby'");
	ASSERT_ISSUE(
		HEAD "runtime: \"node\\0\"\n",
		"berth.yml:3 runtime: Invalid enum value. Expected 'node' | 'python', received 'node\\0'");
	ASSERT_ISSUE(HEAD "runtime: 3\n",
		     "berth.yml:3 runtime: Expected 'node' | 'python', received number");
	{
		_cleanup_(manifest_freep) Manifest *m = parse_ok(HEAD);

		ASSERT_EQ(manifest_runtime(m), MANIFEST_RUNTIME_NODE);
	}
	ASSERT_EQ(manifest_runtime_from_string("python"), MANIFEST_RUNTIME_PYTHON);
	ASSERT_EQ(manifest_runtime_from_string("Python"), _MANIFEST_RUNTIME_INVALID);
	ASSERT_TRUE(manifest_runtime_to_string(_MANIFEST_RUNTIME_INVALID) == NULL);
}

TEST(description)
{
	ASSERT_ISSUE(HEAD "description: 5\n",
		     "berth.yml:3 description: Expected string, received number");
	ASSERT_ISSUE(HEAD "description: \"a\\0b\"\n",
		     "berth.yml:3 description: description must not contain a NUL byte");
	/* `no` stays a string. */
	{
		_cleanup_(manifest_freep) Manifest *m = parse_ok(HEAD "description: no\n");

		ASSERT_STREQ(manifest_description(m), "no");
	}
}

TEST(all_issues_are_collected)
{
	ASSERT_REPORT(
		"name: My_App\n"
		"version: 1.0\n"
		"capabilities:\n"
		"  - ok:ok:ok\n"
		"  - bad\n"
		"  - filesystem:write:/etc\n"
		"on_install: ['']\n"
		"governs: true\n"
		"runtime: go\n",
		"invalid berth.yml:\n"
		"berth.yml:1 name: name must be lowercase alphanumeric with dashes\n"
		"berth.yml:2 version: Expected string, received number\n"
		"berth.yml:5 capabilities.1: capability must be 'namespace:action:scope'\n"
		"berth.yml:6 capabilities.2: " OUTSIDE "\"/etc\"\n"
		"berth.yml:7 on_install.0: on_install command must not be empty\n"
		"berth.yml:9 runtime: Invalid enum value. Expected 'node' | 'python', received 'go'\n"
		"berth.yml:8 governs: an app declaring governs: true must also declare an 'evaluate_action' export");
}

TEST(issue_list_is_capped)
{
	size_t n = MANIFEST_ISSUES_MAX + 50, len = 0;
	_cleanup_free_ char *yaml = malloc(64 + n * 8), *text = NULL;
	const char *tail;

	ASSERT_NOT_NULL(yaml);
	len += (size_t)sprintf(yaml, HEAD "capabilities:\n");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(yaml + len, "  - x\n");
	text = report_for(yaml, len, NULL);
	tail = strrchr(text, '\n') + 1;
	ASSERT_STREQ(tail, "berth.yml (root): 50 more issues not shown");
}

TEST(file_name_in_messages)
{
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
	static const char bad_name[] = "name: A\nversion: 1.0.0\n";
	static const char bad_sv[] = HEAD "schema_version: x\n";

	a = report_for(bad_name, strlen(bad_name), "apps/x/berth.yml");
	ASSERT_STREQ(
		a,
		"invalid berth.yml:\napps/x/berth.yml:1 name: name must be lowercase alphanumeric with dashes");
	b = report_for(bad_sv, strlen(bad_sv), "apps/x/berth.yml");
	ASSERT_STREQ(
		b,
		"invalid berth.yml (apps/x/berth.yml): schema_version must be a non-negative integer, got \"x\"");
	c = report_for(bad_sv, strlen(bad_sv), NULL);
	ASSERT_STREQ(c,
		     "invalid berth.yml: schema_version must be a non-negative integer, got \"x\"");
}

TEST(schema_version)
{
	/* Absent, or current: validated as it is. */
	manifest_free(parse_ok(HEAD));
	manifest_free(parse_ok(HEAD "schema_version: 1\n"));
	manifest_free(parse_ok(HEAD "schema_version: 1.0\n"));
	ASSERT_REPORT(
		HEAD "schema_version: latest\n",
		"invalid berth.yml: schema_version must be a non-negative integer, got \"latest\"");
	ASSERT_REPORT(
		HEAD "schema_version: '1'\n",
		"invalid berth.yml: schema_version must be a non-negative integer, got \"1\"");
	ASSERT_REPORT(HEAD "schema_version: -1\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got -1");
	ASSERT_REPORT(HEAD "schema_version: 1.5\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got 1.5");
	ASSERT_REPORT(HEAD "schema_version: 0.1\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got 0.1");
	ASSERT_REPORT(HEAD "schema_version: 1e-7\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got 1e-7");
	ASSERT_REPORT(
		HEAD "schema_version: 0.000001\n",
		"invalid berth.yml: schema_version must be a non-negative integer, got 0.000001");
	ASSERT_REPORT(
		HEAD "schema_version: 123.456\n",
		"invalid berth.yml: schema_version must be a non-negative integer, got 123.456");
	ASSERT_REPORT(HEAD "schema_version: null\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got null");
	ASSERT_REPORT(HEAD "schema_version: true\n",
		      "invalid berth.yml: schema_version must be a non-negative integer, got true");
	ASSERT_REPORT(
		HEAD "schema_version: {a: [1, 'x']}\n",
		"invalid berth.yml: schema_version must be a non-negative integer, got {\"a\":[1,\"x\"]}");
	ASSERT_REPORT(
		HEAD "schema_version: 2\n",
		"invalid berth.yml: declares schema_version: 2, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.");
	ASSERT_REPORT(
		HEAD "schema_version: 2.0\n",
		"invalid berth.yml: declares schema_version: 2, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.");
	ASSERT_REPORT(
		HEAD "schema_version: 1e21\n",
		"invalid berth.yml: declares schema_version: 1e+21, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.");
	ASSERT_REPORT(
		HEAD "schema_version: 1e20\n",
		"invalid berth.yml: declares schema_version: 100000000000000000000, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.");
	/* A fatal schema_version is reported alone, whatever else is wrong. */
	ASSERT_REPORT(
		"name: BAD\nschema_version: 7\n",
		"invalid berth.yml: declares schema_version: 7, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.");
}

TEST(schema_version_issue_has_its_line)
{
	static const char yaml[] = HEAD "\nschema_version: -1\n";
	ManifestError e = {};
	Manifest *m = NULL;

	ASSERT_ERROR(manifest_parse(yaml, strlen(yaml), NULL, &m, &e), EBADMSG);
	ASSERT_EQ(e.n_issues, 1);
	ASSERT_EQ(e.issues[0].line, 4);
	ASSERT_STREQ(e.issues[0].path, "schema_version");
	ASSERT_STREQ(e.issues[0].message, "schema_version must be a non-negative integer, got -1");
	manifest_error_done(&e);
}

TEST(schema_version_0_migrates_boolean_expose)
{
	static const char *const want_true =
		"\"expose\":{\"browser\":true,\"terminal\":true,\"preview\":false}";
	static const char *const want_false =
		"\"expose\":{\"browser\":false,\"terminal\":false,\"preview\":false}";
	_cleanup_free_ char *t = normalised(HEAD "schema_version: 0\nexpose: true\n");
	_cleanup_free_ char *f = normalised(HEAD "schema_version: 0\nexpose: false\n");
	_cleanup_free_ char *o = normalised(HEAD "schema_version: 0\nexpose: {preview: true}\n");
	_cleanup_free_ char *none = normalised(HEAD "schema_version: 0\n");
	_cleanup_(manifest_freep) Manifest *m = parse_ok(HEAD "schema_version: 0\nexpose: false\n");

	ASSERT_NOT_NULL(strstr(t, want_true));
	ASSERT_NOT_NULL(strstr(f, want_false));
	ASSERT_NOT_NULL(
		strstr(o, "\"expose\":{\"browser\":true,\"terminal\":true,\"preview\":true}"));
	ASSERT_NOT_NULL(strstr(none, want_true));
	/* schema_version itself never reaches the normalised manifest. */
	ASSERT_TRUE(strstr(t, "schema_version") == NULL);
	ASSERT_FALSE(manifest_expose(m).browser);
	/* At version 1 a boolean expose is the old shape, and wrong. */
	ASSERT_ISSUE(HEAD "expose: false\n",
		     "berth.yml:3 expose: Expected object, received boolean");
	/* The migrated value is checked like any other: no line of its own, its key's. */
	ASSERT_ISSUE(HEAD "schema_version: 0\nexpose: 1\n",
		     "berth.yml:4 expose: Expected object, received number");
}

TEST(migration_walk)
{
	_cleanup_(json_decrefp) json_t *raw = json_pack("{s:b}", "expose", 1);
	char *why = NULL;

	ASSERT_OK(manifest_migrate(raw, 0, 1, &why));
	ASSERT_TRUE(json_is_object(json_object_get(raw, "expose")));
	ASSERT_OK(manifest_migrate(raw, 1, 1, &why));
	ASSERT_ERROR(manifest_migrate(raw, 0, 3, &why), ENOENT);
	ASSERT_STREQ(
		why,
		"no migration registered from schema_version 1 to 2 — this berth.yml declares schema_version: 0, but this installed @berth/manifest-schema (current version 3) doesn't know how to bring it forward. Upgrade @berth/manifest-schema, or migrate this berth.yml to schema_version: 3 by hand.");
	free(why);
}

TEST(yaml_refusals_are_reported_with_their_line)
{
	ASSERT_ISSUE(
		HEAD "description: &d text\n",
		"berth.yml:3 description: anchors (&d) are not allowed; write the value out in full");
	ASSERT_ISSUE(
		HEAD "capabilities:\n  - *cap\n",
		"berth.yml:4 capabilities.0: aliases (*cap) are not allowed; write the value out in full");
	ASSERT_ISSUE(
		HEAD "governs: !!bool true\n",
		"berth.yml:3 governs: tags (!!bool) are not allowed; write a plain value, quoted if it must be a string");
	ASSERT_ISSUE(
		HEAD "expose:\n  <<: {browser: false}\n",
		"berth.yml:4 expose: merge keys (<<) are not allowed; write the keys out in full");
	ASSERT_ISSUE("name: a\nversion: 1.0.0\nname: b\n",
		     "berth.yml:3 name: duplicate key \"name\"");
	ASSERT_ISSUE(
		HEAD "---\n" HEAD,
		"berth.yml:3 (root): a second document (---) is not allowed; keep one document per file");
	ASSERT_ISSUE(
		HEAD "description: .nan\n",
		"berth.yml:3 description: .nan is not a finite number, which JSON cannot hold; quote it if it is meant as a string");
	ASSERT_ISSUE(
		HEAD "description: \"unterminated\n",
		"berth.yml:4 description: invalid YAML: found unexpected end of stream while scanning a quoted scalar");
}

TEST(size_cap)
{
	size_t n = MANIFEST_SIZE_MAX + 1;
	_cleanup_free_ char *big = malloc(n), *text = NULL;

	ASSERT_NOT_NULL(big);
	memset(big, '#', n);
	memcpy(big, HEAD, strlen(HEAD));
	{
		ManifestError e = {};
		Manifest *m = NULL;

		ASSERT_ERROR(manifest_parse(big, n, NULL, &m, &e), EFBIG);
		ASSERT_STREQ(
			e.text,
			"invalid berth.yml:\nberth.yml (root): the file is larger than 1024 KiB");
		manifest_error_done(&e);
	}
	manifest_free(parse_ok(HEAD));
}

TEST(load_at)
{
	char dir[] = "/tmp/test-manifest-XXXXXX";
	_cleanup_free_ char *path = NULL, *big = NULL;
	_cleanup_(manifest_freep) Manifest *m = NULL;
	ManifestError e = {};
	int dfd;

	ASSERT_NOT_NULL(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_TRUE(dfd >= 0);
	ASSERT_ERROR(manifest_load_at(dfd, "berth.yml", &m, &e), ENOENT);
	ASSERT_TRUE(e.text == NULL);
	ASSERT_TRUE(asprintf(&path, "%s/berth.yml", dir) > 0);
	ASSERT_OK(write_file_atomic(path, "name: x\nversion: 0.0.1\n", 23, 0644));
	ASSERT_OK(manifest_load_at(dfd, "berth.yml", &m, &e));
	ASSERT_STREQ(manifest_name(m), "x");
	ASSERT_OK(write_file_atomic(path, "name: X\nversion: 0.0.1\n", 23, 0644));
	ASSERT_ERROR(manifest_load_at(AT_FDCWD, path, &m, &e), EBADMSG);
	ASSERT_TRUE(strstr(e.text, ":1 name: name must be lowercase alphanumeric with dashes") !=
		    NULL);
	ASSERT_TRUE(strneq(e.text + strlen("invalid berth.yml:\n"), path, strlen(path)));
	manifest_error_done(&e);
	big = calloc(1, MANIFEST_SIZE_MAX + 10);
	ASSERT_NOT_NULL(big);
	memset(big, '#', MANIFEST_SIZE_MAX + 9);
	ASSERT_OK(write_file_atomic(path, big, MANIFEST_SIZE_MAX + 9, 0644));
	ASSERT_ERROR(manifest_load_at(dfd, "berth.yml", &m, &e), EFBIG);
	ASSERT_STREQ(e.text,
		     "invalid berth.yml:\nberth.yml (root): the file is larger than 1024 KiB");
	manifest_error_done(&e);
	unlink(path);
	rmdir(dir);
	close(dfd);
}

TEST(validate_json_directly)
{
	_cleanup_(json_decrefp) json_t *raw = json_pack("{s:s,s:s,s:[s]}", "name", "app", "version",
							"1.0.0", "capabilities", "github:read");
	_cleanup_(json_decrefp) json_t *before = json_deep_copy(raw);
	ManifestError e = {};
	Manifest *m = NULL;

	ASSERT_ERROR(manifest_validate_json(raw, NULL, NULL, &m, &e), EBADMSG);
	/* No positions: no line. */
	ASSERT_STREQ(
		e.text,
		"invalid berth.yml:\nberth.yml capabilities.0: capability must be 'namespace:action:scope'");
	manifest_error_done(&e);
	ASSERT_TRUE(json_equal(raw, before));
	ASSERT_ERROR(manifest_validate_json(NULL, NULL, NULL, &m, &e), EINVAL);
}

int main(void)
{
	return tests_run();
}
