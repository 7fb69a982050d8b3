/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * berth mcp's standard input (SPEC §3.3): newline-delimited JSON-RPC 2.0 messages from the
 * MCP client, one per line. The session reads the lines with a LineConn capped at
 * MCP_MESSAGE_MAX (a longer one is dropped and answered with a parse error); this tells
 * what each line is. Pure.
 */

#include <jansson.h>
#include <stddef.h>

/* One JSON-RPC message from the client. */
#define MCP_MESSAGE_MAX (4u * 1024 * 1024)

typedef enum McpLineKind {
	MCP_LINE_EMPTY,	      /* nothing but trailing CRs and spaces: ignored */
	MCP_LINE_PARSE_ERROR, /* not JSON: -32700, @error says why */
	MCP_LINE_INVALID,     /* JSON but not one JSON-RPC 2.0 object: -32600 */
	MCP_LINE_REQUEST,     /* a request or a notification (it has "method") */
	MCP_LINE_RESPONSE,    /* anything else: berth sends no requests, nothing to match */
	_MCP_LINE_KIND_MAX,
} McpLineKind;

/*
 * mcp_line_parse() - one line from the client, without its '\n'. *@ret_msg gets the parsed
 * JSON for every kind but EMPTY and PARSE_ERROR (for INVALID, so that an "id" can be
 * answered). Duplicate keys are a parse error.
 */
McpLineKind mcp_line_parse(const char *line, size_t len, json_t **ret_msg, char *error,
			   size_t errlen);
