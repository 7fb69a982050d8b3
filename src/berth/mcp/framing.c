/* SPDX-License-Identifier: Apache-2.0 */
/* What a line of berth mcp's standard input is (framing.h). */
#include <stdio.h>
#include <string.h>

#include "macros.h"
#include "framing.h"

McpLineKind mcp_line_parse(const char *line, size_t len, json_t **ret_msg, char *error,
			   size_t errlen)
{
	json_error_t err;
	json_t *msg, *version;

	*ret_msg = NULL;
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0)
		return MCP_LINE_EMPTY;
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
	if (!msg) {
		snprintf(error, errlen, "Parse error: %s", err.text);
		return MCP_LINE_PARSE_ERROR;
	}
	*ret_msg = msg;
	version = json_object_get(msg, "jsonrpc");
	/* Batches are not part of MCP since 2025-06-18. */
	if (!json_is_object(msg) || !json_is_string(version) ||
	    !streq(json_string_value(version), "2.0"))
		return MCP_LINE_INVALID;
	if (json_object_get(msg, "method"))
		return MCP_LINE_REQUEST;
	return MCP_LINE_RESPONSE;
}
