/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP revisions berth mcp speaks (protocol.h). */
#include <string.h>

#include "macros.h"
#include "protocol.h"

/* Newest first: an initialize asking for anything else gets the first. */
static const char *const legacy_versions[] = {
	MCP_LATEST_LEGACY_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07",
};
static const char *const modern_versions[] = {MCP_MODERN_VERSION};

/* The first version that has each feature; versions are dates, so they compare as text. */
static const char *const feature_since[_MCP_FEATURE_MAX] = {
	[MCP_FEATURE_TOOL_ANNOTATIONS] = "2025-03-26",
	[MCP_FEATURE_PROGRESS_MESSAGE] = "2025-03-26",
	[MCP_FEATURE_STRUCTURED_OUTPUT] = "2025-06-18",
	[MCP_FEATURE_TASKS] = "2025-11-25",
	[MCP_FEATURE_RESULT_TYPE] = MCP_MODERN_VERSION,
};

const char *mcp_negotiate_legacy(const char *requested)
{
	for (size_t i = 0; requested && i < ELEMENTSOF(legacy_versions); i++)
		if (streq(requested, legacy_versions[i]))
			return legacy_versions[i];
	return legacy_versions[0];
}

const char *mcp_modern_version(const char *requested)
{
	for (size_t i = 0; requested && i < ELEMENTSOF(modern_versions); i++)
		if (streq(requested, modern_versions[i]))
			return modern_versions[i];
	return NULL;
}

bool mcp_version_has(const char *version, McpFeature f)
{
	if (!version || f < 0 || f >= _MCP_FEATURE_MAX)
		return false;
	/* Tasks became an extension in 2026-07-28: Tool.execution is 2025-11-25's alone. */
	if (f == MCP_FEATURE_TASKS)
		return streq(version, "2025-11-25");
	return strcmp(version, feature_since[f]) >= 0;
}

json_t *mcp_modern_versions_json(void)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < ELEMENTSOF(modern_versions); i++)
		json_array_append_new(a, json_string(modern_versions[i]));
	return a;
}

bool mcp_params_are_modern(json_t *params)
{
	return json_object_get(json_object_get(params, "_meta"), MCP_META_PROTOCOL_VERSION);
}

json_t *mcp_progress_token(json_t *params)
{
	json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");

	return json_is_string(t) || json_is_integer(t) ? t : NULL;
}
