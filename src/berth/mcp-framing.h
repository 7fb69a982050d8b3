/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * berth mcp's standard input (SPEC §3.3): newline-delimited JSON-RPC 2.0 messages from the
 * MCP client, one per line. Pure: bytes in, lines and messages out; the session
 * (cmd-mcp.c) reads and answers.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One JSON-RPC message from the client. */
#define MCP_MESSAGE_MAX (4u * 1024 * 1024)

typedef struct McpFraming {
	size_t max; /* bytes in a line, its '\n' not counted; 0 means MCP_MESSAGE_MAX */
	char *in;   /* the line so far */
	size_t in_len;
	bool overlong; /* the line so far is over @max (or did not fit in memory): dropped */
} McpFraming;

/* A complete line without its '\n', NUL-terminated (valid until the callback returns); or
 * @line NULL when a line over the cap ended and was dropped. */
typedef void (*McpLineFn)(const char *line, size_t len, void *userdata);

/* Take @size bytes as they came, calling @fn for every line they complete. */
void mcp_framing_feed(McpFraming *f, const char *data, size_t size, McpLineFn fn, void *userdata);
/* The input ended: a last line without '\n' goes to @fn too (an over-long one does not). */
void mcp_framing_end(McpFraming *f, McpLineFn fn, void *userdata);
void mcp_framing_done(McpFraming *f);

typedef enum McpLineKind {
	MCP_LINE_EMPTY,	      /* nothing but trailing CRs and spaces: ignored */
	MCP_LINE_PARSE_ERROR, /* not JSON: -32700, @error says why */
	MCP_LINE_INVALID,     /* JSON but not one JSON-RPC 2.0 object: -32600 */
	MCP_LINE_REQUEST,     /* a request or a notification (it has "method") */
	MCP_LINE_RESPONSE,    /* anything else: berth sends no requests, nothing to match */
	_MCP_LINE_KIND_MAX,
} McpLineKind;

/*
 * mcp_line_parse() - one line from mcp_framing_feed(). *@ret_msg gets the parsed JSON for
 * every kind but EMPTY and PARSE_ERROR (for INVALID, so that an "id" can be answered).
 * Duplicate keys are a parse error.
 */
McpLineKind mcp_line_parse(const char *line, size_t len, json_t **ret_msg, char *error,
			   size_t errlen);
