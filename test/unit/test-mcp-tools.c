/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP face of an app: schemas, --only and argument checks (SPEC §3.2, §3.3). */
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "manifest.h"
#include "mcp-tools.h"
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
	_cleanup_free_ char *s = dump(mcp_tools_list("notes", m, NULL));

	ASSERT_STREQ(
		s,
		"{\"tools\":[{\"description\":\"Berth resident app export \\\"add_note\\\" (from "
		"notes's berth.yml)\",\"execution\":{\"taskSupport\":\"forbidden\"},"
		"\"inputSchema\":{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
		"\"properties\":{\"meta\":{\"additionalProperties\":{},\"propertyNames\":{\"type\":"
		"\"string\"},\"type\":\"object\"},\"pinned\":{\"type\":\"boolean\"},\"priority\":{"
		"\"type\":\"number\"},\"tags\":{\"items\":{},\"type\":\"array\"},\"text\":{\"type\":"
		"\"string\"}},\"required\":[\"text\",\"tags\",\"meta\",\"pinned\",\"priority\"],"
		"\"type\":\"object\"},\"name\":\"add_note\"},{\"description\":\"Berth resident app "
		"export \\\"list_notes\\\" (from notes's berth.yml)\",\"execution\":{"
		"\"taskSupport\":\"forbidden\"},\"inputSchema\":{\"$schema\":\"http://"
		"json-schema.org/draft-07/schema#\",\"properties\":{},\"type\":\"object\"},"
		"\"name\":\"list_notes\"}]}");
	manifest_free(m);
}

TEST(only_filters_and_names_unknown_exports)
{
	Manifest *m = notes();
	char *only[] = {"list_notes", NULL}, *bad[] = {"list_notes", "nope", "gone", NULL};
	json_t *list = mcp_tools_list("notes", m, only);
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
	ASSERT_STREQ(mcp_negotiate_version("2025-06-18"), "2025-06-18");
	ASSERT_STREQ(mcp_negotiate_version("2024-11-05"), "2024-11-05");
	ASSERT_STREQ(mcp_negotiate_version("1999-01-01"), MCP_LATEST_PROTOCOL_VERSION);
	ASSERT_STREQ(mcp_negotiate_version(NULL), MCP_LATEST_PROTOCOL_VERSION);
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
