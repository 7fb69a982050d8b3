/* SPDX-License-Identifier: Apache-2.0 */
/* One MCP tool per app export (tools.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "macros.h"
#include "protocol.h"
#include "tools.h"

/* A field's JSON Schema: its type's, with berth.yml's description of it. */
static json_t *field_schema(json_t *spec)
{
	const char *type = manifest_field_type(spec) ?: "string",
		   *description = manifest_field_description(spec);
	json_t *s;

	if (streq(type, "object"))
		s = json_pack("{s:s, s:{s:s}, s:{}}", "type", "object", "propertyNames", "type",
			      "string", "additionalProperties");
	else if (streq(type, "array"))
		s = json_pack("{s:s, s:{}}", "type", "array", "items");
	else
		s = json_pack("{s:s}", "type", type);
	if (s && description)
		json_object_set_new(s, "description", json_string(description));
	return s;
}

/* {"$schema", "type": "object", "properties"} of @fields; with @required, every field is. */
static json_t *object_schema(json_t *fields, bool required)
{
	json_t *schema =
		json_pack("{s:s, s:s, s:{}}", "$schema", "http://json-schema.org/draft-07/schema#",
			  "type", "object", "properties");
	json_t *props = json_object_get(schema, "properties"), *req = NULL, *spec;
	const char *field;

	if (!schema || !fields)
		return schema;
	if (required)
		req = json_array();
	json_object_foreach(fields, field, spec) {
		json_object_set_new(props, field, field_schema(spec));
		if (req)
			json_array_append_new(req, json_string(field));
	}
	if (req)
		json_object_set_new(schema, "required", req);
	return schema;
}

json_t *mcp_output_schema(const ManifestExport *e)
{
	/* Optional fields: berth.yml's output has always described what a result may hold
	 * (apps leave an "error" out when there is none), never required it. */
	return e->output ? object_schema(e->output, false) : NULL;
}

/* Does the app declare a capability that one of @pairs names ("*": any action)? */
static bool declares_any(const Manifest *m, const char *const (*pairs)[2], size_t n)
{
	const char *const *caps;
	size_t nc = manifest_capabilities(m, &caps);

	for (size_t i = 0; i < nc; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) < 0)
			continue;
		for (size_t k = 0; k < n; k++)
			if (streq(ns, pairs[k][0]) &&
			    (streq(pairs[k][1], "*") || streq(action, pairs[k][1])))
				return true;
	}
	return false;
}

json_t *mcp_tool_annotations(const Manifest *m, const ManifestExport *e)
{
	static const char *const not_read_only[][2] = CAPABILITY_NOT_READ_ONLY_INIT;
	static const char *const open_world[][2] = CAPABILITY_OPEN_WORLD_INIT;
	json_t *a = json_object();

	if (!a)
		return NULL;
	/* What the kernel enforces from berth.yml: an app that may write nothing and reach
	 * nothing outside the VM cannot modify anything or reach the world. */
	json_object_set_new(
		a, "readOnlyHint",
		json_boolean(!declares_any(m, not_read_only, ELEMENTSOF(not_read_only))));
	json_object_set_new(a, "openWorldHint",
			    json_boolean(declares_any(m, open_world, ELEMENTSOF(open_world))));
	/* What the author says about this export comes first: list_notes reads even though
	 * the app writes. */
	for (ManifestHint h = 0; h < _MANIFEST_HINT_MAX; h++)
		if (e->has_hint[h])
			json_object_set_new(a, manifest_hint_to_string(h),
					    json_boolean(e->hint[h]));
	return a;
}

/* One tool as the protocol @version shapes it. */
static json_t *mcp_tool(const char *app, const Manifest *m, const ManifestExport *e,
			const char *version)
{
	_cleanup_free_ char *fallback = NULL;
	json_t *tool, *annotations = NULL;

	/* Without a description in berth.yml, the text clients have always seen. */
	if (!e->description &&
	    asprintf(&fallback, "Berth resident app export \"%s\" (from %s's berth.yml)", e->name,
		     app) < 0)
		return NULL;
	tool = json_pack("{s:s, s:s, s:o}", "name", e->name, "description",
			 e->description ?: fallback, "inputSchema", object_schema(e->input, true));
	if (!tool)
		return NULL;
	if (mcp_version_has(version, MCP_FEATURE_TOOL_ANNOTATIONS))
		annotations = mcp_tool_annotations(m, e);
	if (mcp_version_has(version, MCP_FEATURE_STRUCTURED_OUTPUT)) {
		if (e->title)
			json_object_set_new(tool, "title", json_string(e->title));
		if (e->output)
			json_object_set_new(tool, "outputSchema", mcp_output_schema(e));
	} else if (annotations && e->title)
		/* 2025-03-26 had the title among the annotations only. */
		json_object_set_new(annotations, "title", json_string(e->title));
	if (annotations)
		json_object_set_new(tool, "annotations", annotations);
	if (mcp_version_has(version, MCP_FEATURE_TASKS))
		json_object_set_new(tool, "execution",
				    json_pack("{s:s}", "taskSupport", "forbidden"));
	return tool;
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

json_t *mcp_tools_list(const char *app, const Manifest *m, char *const *only, const char *version)
{
	const ManifestExport *ex;
	size_t n = manifest_exports(m, &ex);
	json_t *tools = json_array();

	for (size_t i = 0; tools && i < n; i++)
		if (listed(only, ex[i].name))
			json_array_append_new(tools, mcp_tool(app, m, &ex[i], version));
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
			const char *t = manifest_field_type(type) ?: "string";
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

int mcp_check_output(const ManifestExport *e, json_t *result, char **ret_issues)
{
	char *issues = NULL;
	size_t len = 0;
	const char *field;
	json_t *spec;
	FILE *f;

	*ret_issues = NULL;
	if (!json_is_object(result))
		return asprintf(ret_issues, "expected an object, received %s", received(result)) < 0
			       ? -ENOMEM
			       : -EINVAL;
	f = open_memstream(&issues, &len);
	if (!f)
		return -ENOMEM;
	json_object_foreach(e->output, field, spec) {
		const char *t = manifest_field_type(spec) ?: "string";
		json_t *v = json_object_get(result, field);

		if (v && !has_type(v, t))
			fprintf(f, "%s%s: expected %s, received %s", ftell(f) > 0 ? "; " : "",
				field, t, received(v));
	}
	fclose(f);
	if (len > 0) {
		*ret_issues = issues;
		return -EINVAL;
	}
	free(issues);
	return 0;
}

json_t *mcp_text_result(const char *text, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}
