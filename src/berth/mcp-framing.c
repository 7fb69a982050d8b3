/* SPDX-License-Identifier: Apache-2.0 */
/* berth mcp's standard input, as lines and messages (mcp-framing.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "mcp-framing.h"

static void drop(McpFraming *f)
{
	f->overlong = true;
	f->in_len = 0;
}

void mcp_framing_feed(McpFraming *f, const char *data, size_t size, McpLineFn fn, void *userdata)
{
	size_t max = f->max ?: MCP_MESSAGE_MAX;

	for (size_t i = 0; i < size;) {
		const char *nl = memchr(data + i, '\n', size - i);
		size_t chunk = nl ? (size_t)(nl - (data + i)) : size - i;

		/* Checked before anything is allocated: a client controls how long a line is. */
		if (!f->overlong && chunk > max - f->in_len)
			drop(f);
		if (!f->overlong) {
			char *p = realloc(f->in, f->in_len + chunk + 1);

			if (!p)
				drop(f);
			else {
				f->in = p;
				memcpy(f->in + f->in_len, data + i, chunk);
				f->in_len += chunk;
				f->in[f->in_len] = '\0';
			}
		}
		i += chunk;
		if (!nl)
			break;
		i++;
		if (f->overlong)
			fn(NULL, 0, userdata);
		else
			fn(f->in ?: "", f->in_len, userdata);
		f->overlong = false;
		f->in_len = 0;
	}
}

void mcp_framing_end(McpFraming *f, McpLineFn fn, void *userdata)
{
	if (f->in_len > 0 && !f->overlong)
		fn(f->in, f->in_len, userdata);
	f->overlong = false;
	f->in_len = 0;
}

void mcp_framing_done(McpFraming *f)
{
	free(f->in);
	*f = (McpFraming){.max = f->max};
}

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
