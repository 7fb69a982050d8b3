/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "manifest.h"

/*
 * The MCP face of an app (SPEC §3.3): one tool per export, the JSON Schema of its input,
 * argument checking with the texts MCP clients already know, and the shapes of results.
 * Pure functions: the session (cmd-mcp.c) does the I/O.
 */

#define MCP_LATEST_PROTOCOL_VERSION "2025-11-25"

/* The protocol version to answer a client that asked for @requested (may be NULL). */
const char *mcp_negotiate_version(const char *requested);

/* The tools/list result for @m's exports named in @only (NULL: all), in manifest order. */
json_t *mcp_tools_list(const char *app, const Manifest *m, char *const *only);

/*
 * mcp_check_only() - NULL when every name in @only is an export of @m, else the error of
 * SPEC §3.2 (`--only names export(s) not declared in ...`), newly allocated.
 */
char *mcp_check_only(const char *app, const Manifest *m, char *const *only);

/*
 * mcp_check_arguments() - check @args (may be NULL: no arguments) against @e's input.
 * Returns 0 with *@ret_input = the arguments with undeclared keys stripped; or -EINVAL
 * with *@ret_issues = one line per problem ("Invalid input: expected string, received
 * undefined at text"), as the reference SDK words them.
 */
int mcp_check_arguments(const ManifestExport *e, json_t *args, json_t **ret_input,
			char **ret_issues);

/* {"content":[{"type":"text","text":@text}]} plus "isError":true when @is_error. */
json_t *mcp_text_result(const char *text, bool is_error);
