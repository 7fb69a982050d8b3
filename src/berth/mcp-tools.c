/* SPDX-License-Identifier: Apache-2.0 */
/* One MCP tool per app export (mcp-tools.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "mcp-tools.h"

/* What clients speak; the first is what we answer anything else with. */
static const char *const protocol_versions[] = {
	MCP_LATEST_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07",
};

const char *mcp_negotiate_version(const char *requested)
{
	for (size_t i = 0; requested && i < ELEMENTSOF(protocol_versions); i++)
		if (streq(requested, protocol_versions[i]))
			return protocol_versions[i];
	return protocol_versions[0];
}

static json_t *field_schema(const char *type)
{
	if (streq(type, "object"))
		return json_pack("{s:s, s:{s:s}, s:{}}", "type", "object", "propertyNames", "type",
				 "string", "additionalProperties");
	if (streq(type, "array"))
		return json_pack("{s:s, s:{}}", "type", "array", "items");
	return json_pack("{s:s}", "type", type);
}

/* The inputSchema of @e. */
static json_t *mcp_input_schema(const ManifestExport *e)
{
	json_t *schema =
		json_pack("{s:s, s:s, s:{}}", "$schema", "http://json-schema.org/draft-07/schema#",
			  "type", "object", "properties");
	json_t *props = json_object_get(schema, "properties"), *required, *type;
	const char *field;

	if (!e->input)
		return schema;
	required = json_array();
	json_object_foreach(e->input, field, type) {
		json_object_set_new(props, field,
				    field_schema(json_string_value(type) ?: "string"));
		json_array_append_new(required, json_string(field));
	}
	json_object_set_new(schema, "required", required);
	return schema;
}

static bool listed(char *const *only, const char *name)
{
	if (!only)
		return true;
	for (size_t i = 0; only[i]; i++)
		if (streq(only[i], name))
			return true;
	return false;
}

json_t *mcp_tools_list(const char *app, const Manifest *m, char *const *only)
{
	const ManifestExport *ex;
	size_t n = manifest_exports(m, &ex);
	json_t *tools = json_array();

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *desc = NULL;

		if (!listed(only, ex[i].name))
			continue;
		if (asprintf(&desc, "Berth resident app export \"%s\" (from %s's berth.yml)",
			     ex[i].name, app) < 0)
			desc = NULL;
		json_array_append_new(tools, json_pack("{s:s, s:s?, s:o, s:{s:s}}", "name",
						       ex[i].name, "description", desc,
						       "inputSchema", mcp_input_schema(&ex[i]),
						       "execution", "taskSupport", "forbidden"));
	}
	return json_pack("{s:o}", "tools", tools);
}

char *mcp_check_only(const char *app, const Manifest *m, char *const *only)
{
	const ManifestExport *ex;
	size_t n = manifest_exports(m, &ex);
	char *unknown = NULL, *declared = NULL, *msg = NULL;
	size_t ul = 0, dl = 0;
	FILE *u, *d;

	if (!only)
		return NULL;
	u = open_memstream(&unknown, &ul);
	d = open_memstream(&declared, &dl);
	if (!u || !d) {
		if (u)
			fclose(u);
		free(unknown);
		return strdup("out of memory");
	}
	for (size_t i = 0; only[i]; i++)
		if (!manifest_find_export(m, only[i]))
			fprintf(u, "%s%s", ftell(u) > 0 ? ", " : "", only[i]);
	for (size_t i = 0; i < n; i++)
		fprintf(d, "%s%s", i > 0 ? ", " : "", ex[i].name);
	fclose(u);
	fclose(d);
	if (ul > 0 && asprintf(&msg,
			       "--only names export(s) not declared in \"%s\"'s berth.yml: %s — "
			       "declared exports: %s",
			       app, unknown, dl > 0 ? declared : "(none)") < 0)
		msg = strdup("out of memory");
	free(unknown);
	free(declared);
	return msg;
}

/* How the reference SDK's validator names a JSON value's type. */
static const char *received(json_t *v)
{
	if (!v)
		return "undefined";
	switch (json_typeof(v)) {
	case JSON_NULL:
		return "null";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_STRING:
		return "string";
	case JSON_ARRAY:
		return "array";
	case JSON_OBJECT:
		return "object";
	}
	return "unknown";
}

static bool has_type(json_t *v, const char *type)
{
	if (streq(type, "string"))
		return json_is_string(v);
	if (streq(type, "number"))
		return json_is_number(v);
	if (streq(type, "boolean"))
		return json_is_boolean(v);
	if (streq(type, "object"))
		return json_is_object(v);
	if (streq(type, "array"))
		return json_is_array(v);
	return false;
}

int mcp_check_arguments(const ManifestExport *e, json_t *args, json_t **ret_input,
			char **ret_issues)
{
	_cleanup_(json_decrefp) json_t *input = json_object();
	char *issues = NULL;
	size_t len = 0;
	const char *field;
	json_t *type;
	FILE *f;

	*ret_input = NULL;
	*ret_issues = NULL;
	if (!input)
		return -ENOMEM;
	if (args && !json_is_object(args)) {
		if (asprintf(ret_issues, "Invalid input: expected object, received %s",
			     received(args)) < 0)
			return -ENOMEM;
		return -EINVAL;
	}
	f = open_memstream(&issues, &len);
	if (!f)
		return -ENOMEM;
	if (e->input)
		json_object_foreach(e->input, field, type) {
			const char *t = json_string_value(type) ?: "string";
			json_t *v = json_object_get(args, field);

			if (has_type(v, t)) {
				json_object_set(input, field, v);
				continue;
			}
			fprintf(f, "%sInvalid input: expected %s, received %s at %s",
				ftell(f) > 0 ? "\n" : "", streq(t, "object") ? "record" : t,
				received(v), field);
		}
	fclose(f);
	if (len > 0) {
		*ret_issues = issues;
		return -EINVAL;
	}
	free(issues);
	*ret_input = TAKE_PTR(input);
	return 0;
}

json_t *mcp_text_result(const char *text, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}
