/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP face of an app: schemas, annotations, --only, argument and result checks, and
 * what each request gets in each era (SPEC §3.2, §3.3; docs/mcp.md). */
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "manifest.h"
#include "methods.h"
#include "protocol.h"
#include "tools.h"
#include "tests.h"

static const char notes_yml[] = "name: notes\n"
				"version: 0.3.0\n"
				"exports:\n"
				"  - name: add_note\n"
				"    input:\n"
				"      text: string\n"
				"      tags: array\n"
				"      meta: object\n"
				"      pinned: boolean\n"
				"      priority: number\n"
				"  - name: list_notes\n"
				"    output:\n"
				"      notes: array\n";

static Manifest *notes(void)
{
	Manifest *m = NULL;

	ASSERT_OK(manifest_parse(notes_yml, strlen(notes_yml), NULL, &m, NULL));
	return m;
}

static char *dump(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);

	json_decref(v);
	return s;
}

TEST(tools_follow_the_manifest)
{
	Manifest *m = notes();
	_cleanup_free_ char *s = dump(mcp_tools_list("notes", m, NULL, "2025-11-25"));

	/* 2025-11-25: annotations, outputSchema and execution too; the rest as SPEC §3.3. */
	ASSERT_STREQ(s,
		     "{\"tools\":[{\"annotations\":{\"openWorldHint\":false,\"readOnlyHint\":true}"
		     ",\"description\":\"Berth resident app export \\\"add_note\\\" (from notes's "
		     "berth.yml)\",\"execution\":{\"taskSupport\":\"forbidden\"},\"inputSchema\":{"
		     "\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"properties\":{\"me"
		     "ta\":{\"additionalProperties\":{},\"propertyNames\":{\"type\":\"string\"},\""
		     "type\":\"object\"},\"pinned\":{\"type\":\"boolean\"},\"priority\":{\"type\":"
		     "\"number\"},\"tags\":{\"items\":{},\"type\":\"array\"},\"text\":{\"type\":\""
		     "string\"}},\"required\":[\"text\",\"tags\",\"meta\",\"pinned\",\"priority\"]"
		     ",\"type\":\"object\"},\"name\":\"add_note\"},{\"annotations\":{\"openWorldHi"
		     "nt\":false,\"readOnlyHint\":true},\"description\":\"Berth resident app expor"
		     "t \\\"list_notes\\\" (from notes's berth.yml)\",\"execution\":{\"taskSupport"
		     "\":\"forbidden\"},\"inputSchema\":{\"$schema\":\"http://json-schema.org/draf"
		     "t-07/schema#\",\"properties\":{},\"type\":\"object\"},\"name\":\"list_notes\""
		     ",\"outputSchema\":{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\""
		     "properties\":{\"notes\":{\"items\":{},\"type\":\"array\"}},\"type\":\"object"
		     "\"}}]}");
	manifest_free(m);
}

TEST(only_filters_and_names_unknown_exports)
{
	Manifest *m = notes();
	char *only[] = {"list_notes", NULL}, *bad[] = {"list_notes", "nope", "gone", NULL};
	json_t *list = mcp_tools_list("notes", m, only, "2024-11-05");
	_cleanup_free_ char *err = NULL;

	ASSERT_EQ(json_array_size(json_object_get(list, "tools")), 1u);
	ASSERT_STREQ(json_string_value(json_object_get(
			     json_array_get(json_object_get(list, "tools"), 0), "name")),
		     "list_notes");
	json_decref(list);
	ASSERT_TRUE(mcp_check_only("notes", m, only) == NULL);
	err = mcp_check_only("notes", m, bad);
	ASSERT_STREQ(err, "--only names export(s) not declared in \"notes\"'s berth.yml: nope, "
			  "gone — declared exports: add_note, list_notes");
	manifest_free(m);
}

TEST(arguments_are_checked_like_the_reference_sdk)
{
	Manifest *m = notes();
	const ManifestExport *e = manifest_find_export(m, "add_note");
	json_t *args = json_loads("{\"text\":1,\"tags\":{},\"meta\":[],\"pinned\":null}", 0, NULL);
	json_t *input = NULL;
	_cleanup_free_ char *issues = NULL;

	ASSERT_ERROR(mcp_check_arguments(e, args, &input, &issues), EINVAL);
	ASSERT_TRUE(input == NULL);
	ASSERT_STREQ(issues, "Invalid input: expected string, received number at text\n"
			     "Invalid input: expected array, received object at tags\n"
			     "Invalid input: expected record, received array at meta\n"
			     "Invalid input: expected boolean, received null at pinned\n"
			     "Invalid input: expected number, received undefined at priority");
	json_decref(args);
	free(issues);
	issues = NULL;

	args = json_string("x");
	ASSERT_ERROR(mcp_check_arguments(e, args, &input, &issues), EINVAL);
	ASSERT_STREQ(issues, "Invalid input: expected object, received string");
	json_decref(args);
	manifest_free(m);
}

TEST(extra_keys_are_stripped)
{
	Manifest *m = notes();
	const ManifestExport *e = manifest_find_export(m, "list_notes");
	json_t *args = json_loads("{\"surprise\":true}", 0, NULL), *input = NULL;
	char *issues = NULL, *s;

	ASSERT_OK(mcp_check_arguments(e, args, &input, &issues));
	s = dump(input);
	ASSERT_STREQ(s, "{}");
	free(s);
	/* No arguments at all is an empty object. */
	ASSERT_OK(mcp_check_arguments(e, NULL, &input, &issues));
	s = dump(input);
	ASSERT_STREQ(s, "{}");
	free(s);
	json_decref(args);
	manifest_free(m);
}

TEST(protocol_versions)
{
	ASSERT_STREQ(mcp_negotiate_legacy("2025-06-18"), "2025-06-18");
	ASSERT_STREQ(mcp_negotiate_legacy("2024-11-05"), "2024-11-05");
	ASSERT_STREQ(mcp_negotiate_legacy("1999-01-01"), MCP_LATEST_LEGACY_VERSION);
	ASSERT_STREQ(mcp_negotiate_legacy(NULL), MCP_LATEST_LEGACY_VERSION);
	/* The stateless revision is never negotiated by a handshake. */
	ASSERT_STREQ(mcp_negotiate_legacy(MCP_MODERN_VERSION), MCP_LATEST_LEGACY_VERSION);
	ASSERT_STREQ(mcp_modern_version("2026-07-28"), "2026-07-28");
	ASSERT_TRUE(mcp_modern_version("2025-11-25") == NULL);
	ASSERT_TRUE(!mcp_version_has("2024-11-05", MCP_FEATURE_TOOL_ANNOTATIONS));
	ASSERT_TRUE(mcp_version_has("2025-03-26", MCP_FEATURE_TOOL_ANNOTATIONS));
	ASSERT_TRUE(!mcp_version_has("2025-03-26", MCP_FEATURE_STRUCTURED_OUTPUT));
	ASSERT_TRUE(mcp_version_has("2025-06-18", MCP_FEATURE_STRUCTURED_OUTPUT));
	ASSERT_TRUE(mcp_version_has("2025-11-25", MCP_FEATURE_TASKS));
	ASSERT_TRUE(!mcp_version_has("2026-07-28", MCP_FEATURE_TASKS));
	ASSERT_TRUE(mcp_version_has("2026-07-28", MCP_FEATURE_RESULT_TYPE));
	ASSERT_TRUE(!mcp_version_has("2025-11-25", MCP_FEATURE_RESULT_TYPE));
}

static const char rich_yml[] = "name: rich\n"
			       "version: 1.2.3\n"
			       "capabilities: [filesystem:write:/workspace]\n"
			       "exports:\n"
			       "  - name: add\n"
			       "    title: Add a note\n"
			       "    description: Add a note and return its id.\n"
			       "    input:\n"
			       "      text: {type: string, description: what it says}\n"
			       "    output: {id: string, n: number}\n"
			       "  - name: list\n"
			       "    annotations: {readOnlyHint: true, idempotentHint: true}\n";

static json_t *tool(Manifest *m, const char *version, size_t i)
{
	json_t *list = mcp_tools_list("rich", m, NULL, version);
	json_t *t = json_incref(json_array_get(json_object_get(list, "tools"), i));

	json_decref(list);
	return t;
}

TEST(each_version_gets_its_own_tool_fields)
{
	Manifest *m = NULL;
	_cleanup_free_ char *v2024 = NULL, *v2025_03 = NULL, *v2025_06 = NULL, *v2026 = NULL,
			    *list = NULL;

	ASSERT_OK(manifest_parse(rich_yml, strlen(rich_yml), NULL, &m, NULL));
	v2024 = dump(tool(m, "2024-11-05", 0));
	ASSERT_STREQ(v2024,
		     "{\"description\":\"Add a note and return its id.\",\"inputSchema\":{"
		     "\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"properties\":{"
		     "\"text\":{\"description\":\"what it says\",\"type\":\"string\"}},"
		     "\"required\":[\"text\"],\"type\":\"object\"},\"name\":\"add\"}");
	v2025_03 = dump(tool(m, "2025-03-26", 0));
	ASSERT_TRUE(strstr(v2025_03, "\"annotations\":{\"openWorldHint\":false,\"readOnlyHint\":"
				     "false,\"title\":\"Add a note\"}") != NULL);
	ASSERT_TRUE(strstr(v2025_03, "outputSchema") == NULL);
	v2025_06 = dump(tool(m, "2025-06-18", 0));
	ASSERT_TRUE(strstr(v2025_06, "\"title\":\"Add a note\"") != NULL);
	ASSERT_TRUE(strstr(v2025_06,
			   "\"outputSchema\":{\"$schema\":\"http://json-schema.org/"
			   "draft-07/schema#\",\"properties\":{\"id\":{\"type\":\"string\"},"
			   "\"n\":{\"type\":\"number\"}},\"type\":\"object\"}") != NULL);
	ASSERT_TRUE(strstr(v2025_06, "execution") == NULL);
	v2026 = dump(tool(m, MCP_MODERN_VERSION, 0));
	ASSERT_TRUE(strstr(v2026, "outputSchema") != NULL);
	ASSERT_TRUE(strstr(v2026, "execution") == NULL);
	/* berth.yml's word for one export beats what the capabilities say of the app. */
	list = dump(tool(m, "2025-11-25", 1));
	ASSERT_TRUE(strstr(list, "\"annotations\":{\"idempotentHint\":true,\"openWorldHint\":false,"
				 "\"readOnlyHint\":true}") != NULL);
	ASSERT_TRUE(strstr(list, "\"description\":\"Berth resident app export \\\"list\\\"") !=
		    NULL);
	manifest_free(m);
}

static json_t *hints_for(const char *caps)
{
	_cleanup_free_ char *yml = NULL;
	Manifest *m = NULL;
	json_t *a;

	ASSERT_TRUE(asprintf(&yml,
			     "name: x\nversion: 1.0.0\ncapabilities: [%s]\nexports:\n  - name: e\n",
			     caps) > 0);
	ASSERT_OK(manifest_parse(yml, strlen(yml), NULL, &m, NULL));
	a = mcp_tool_annotations(m, manifest_find_export(m, "e"));
	manifest_free(m);
	return a;
}

TEST(hints_follow_the_declared_capabilities)
{
	static const struct {
		const char *caps;
		bool read_only, open_world;
	} cases[] = {
		{"", true, false},
		{"filesystem:read:/workspace", true, false},
		{"filesystem:write:/workspace", false, false},
		{"network:connect:8080", false, true},
		{"network:host:api.example.com", false, true},
		{"browser:navigate:*", false, true},
		{"github:read:repos", true, true},
		{"github:write:repos", false, true},
		{"terminal:attach:*", false, false},
		{"app:invoke:other", false, false},
		{"custom:thing:x", true, false},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		json_t *a = hints_for(cases[i].caps);

		ASSERT_EQ(json_is_true(json_object_get(a, "readOnlyHint")), cases[i].read_only);
		ASSERT_EQ(json_is_true(json_object_get(a, "openWorldHint")), cases[i].open_world);
		ASSERT_TRUE(!json_object_get(a, "destructiveHint"));
		json_decref(a);
	}
}

TEST(results_are_checked_against_the_declared_output)
{
	Manifest *m = NULL;
	const ManifestExport *e;
	json_t *r;
	char *issues = NULL;

	ASSERT_OK(manifest_parse(rich_yml, strlen(rich_yml), NULL, &m, NULL));
	e = manifest_find_export(m, "add");
	r = json_loads("{\"id\":\"a\",\"extra\":1}", 0, NULL);
	ASSERT_OK(mcp_check_output(e, r, &issues));
	json_decref(r);
	/* Output fields are optional: berth.yml has always described, never required them. */
	r = json_loads("{}", 0, NULL);
	ASSERT_OK(mcp_check_output(e, r, &issues));
	json_decref(r);
	r = json_loads("{\"id\":1,\"n\":\"x\"}", 0, NULL);
	ASSERT_ERROR(mcp_check_output(e, r, &issues), EINVAL);
	ASSERT_STREQ(issues,
		     "id: expected string, received number; n: expected number, received string");
	free(issues);
	json_decref(r);
	ASSERT_ERROR(mcp_check_output(e, json_null(), &issues), EINVAL);
	ASSERT_STREQ(issues, "expected an object, received null");
	free(issues);
	manifest_free(m);
}

/* One request through the methods table; the reply as compact JSON. */
static char *request(const McpServer *s, McpState *st, const char *text, McpReply *r)
{
	json_t *msg = json_loads(text, 0, NULL);
	char *out;

	ASSERT_NOT_NULL(msg);
	mcp_dispatch(s, st, msg, r);
	json_decref(msg);
	if (r->kind == MCP_REPLY_RESULT)
		out = json_dumps(r->result, JSON_COMPACT | JSON_SORT_KEYS);
	else if (r->kind == MCP_REPLY_ERROR) {
		json_t *e = json_pack("{s:i, s:s, s:O*}", "code", r->code, "message", r->message,
				      "data", r->data);

		out = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(e);
	} else
		out = strdup(r->kind == MCP_REPLY_CALL	   ? "call"
			     : r->kind == MCP_REPLY_CANCEL ? "cancel"
							   : "none");
	return out;
}

#define MODERN_META \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}"

TEST(both_eras_on_one_stream)
{
	Manifest *m = notes();
	McpServer s = {.app = "notes", .manifest = m};
	McpState st = {};
	McpReply r;
	char *out;

	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2026-07-28\",\"clientInfo\":{\"name\":\"c1\"}}}",
		&r);
	ASSERT_STREQ(
		out,
		"{\"capabilities\":{\"tools\":{\"listChanged\":true}},\"protocolVersion\":\"2025-11-25\",\"serverInfo\":{\"name\":\"berth-notes\",\"version\":\"0.3.0\"}}");
	ASSERT_STREQ(st.client, "c1");
	free(out);
	mcp_reply_done(&r);

	/* Stateless: no initialize needed, and resultType with the server in _meta. */
	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\",\"params\":{" MODERN_META
		"}}",
		&r);
	ASSERT_STREQ(
		out,
		"{\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"berth-notes\",\"version\":\"0.3.0\"}},\"cacheScope\":\"private\",\"capabilities\":{\"tools\":{}},\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],\"ttlMs\":0}");
	free(out);
	mcp_reply_done(&r);

	out = request(&s, &st, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server/discover\"}", &r);
	ASSERT_EQ(r.code, MCP_INVALID_PARAMS);
	free(out);
	mcp_reply_done(&r);

	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2030-01-01\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
		&r);
	ASSERT_STREQ(
		out,
		"{\"code\":-32022,\"data\":{\"requested\":\"2030-01-01\",\"supported\":[\"2026-07-28\"]},\"message\":\"Unsupported protocol version\"}");
	free(out);
	mcp_reply_done(&r);

	/* Each era only its own methods. */
	out = request(&s, &st,
		      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{" MODERN_META
		      "}}",
		      &r);
	ASSERT_EQ(r.code, MCP_METHOD_NOT_FOUND);
	free(out);
	mcp_reply_done(&r);
	out = request(&s, &st, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}", &r);
	ASSERT_STREQ(out, "{}");
	free(out);
	mcp_reply_done(&r);

	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{" MODERN_META
		"}}",
		&r);
	ASSERT_TRUE(strstr(out, "\"resultType\":\"complete\"") && strstr(out, "\"ttlMs\":0") &&
		    !strstr(out, "execution"));
	free(out);
	mcp_reply_done(&r);
	out = request(&s, &st, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}", &r);
	ASSERT_TRUE(!strstr(out, "resultType") && strstr(out, "execution"));
	free(out);
	mcp_reply_done(&r);

	/* An unknown tool: the modern protocol error, the legacy result. */
	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"," MODERN_META
		"}}",
		&r);
	ASSERT_STREQ(out, "{\"code\":-32602,\"message\":\"Unknown tool: nope\"}");
	free(out);
	mcp_reply_done(&r);
	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}",
		&r);
	ASSERT_STREQ(
		out,
		"{\"content\":[{\"text\":\"MCP error -32602: Tool nope not found\",\"type\":\"text\"}],\"isError\":true}");
	free(out);
	mcp_reply_done(&r);

	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":\"list_notes\",\"_meta\":{\"progressToken\":\"p\",\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
		&r);
	ASSERT_STREQ(out, "call");
	ASSERT_STREQ(json_string_value(r.progress_token), "p");
	ASSERT_STREQ(r.version, MCP_MODERN_VERSION);
	ASSERT_TRUE(r.client == NULL);
	free(out);
	mcp_reply_done(&r);

	/* Who asks is each modern request's own word; initialize's stays for the legacy ones. */
	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"list_notes\",\"_meta\":{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c2\",\"version\":\"1\"},\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
		&r);
	ASSERT_STREQ(out, "call");
	ASSERT_STREQ(r.client, "c2");
	ASSERT_STREQ(st.client, "c1");
	free(out);
	mcp_reply_done(&r);

	out = request(
		&s, &st,
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":11}}",
		&r);
	ASSERT_STREQ(out, "cancel");
	free(out);
	mcp_reply_done(&r);
	mcp_state_done(&st);
	manifest_free(m);
}

TEST(result_shapes)
{
	_cleanup_free_ char *ok = dump(mcp_text_result("{\"id\":\"1\"}", false));
	_cleanup_free_ char *err = dump(mcp_text_result("boom", true));

	ASSERT_STREQ(ok, "{\"content\":[{\"text\":\"{\\\"id\\\":\\\"1\\\"}\",\"type\":\"text\"}]}");
	ASSERT_STREQ(err, "{\"content\":[{\"text\":\"boom\",\"type\":\"text\"}],\"isError\":true}");
}

int main(void)
{
	return tests_run();
}
