/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "manifest.h"

/*
 * The MCP face of an app (SPEC §3.3, docs/mcp.md): one tool per export, its description,
 * JSON Schemas and annotations from berth.yml, shaped for the protocol version of the
 * request; argument and result checks with the texts MCP clients already know. Pure
 * functions: the session does the I/O.
 */

/* The tools/list result under @version for @m's exports named in @only (NULL: all), in
 * manifest order. */
json_t *mcp_tools_list(const char *app, const Manifest *m, char *const *only, const char *version);

/*
 * mcp_tool_annotations() - the MCP annotations of @e: readOnlyHint and openWorldHint as
 * berth.yml states them, else as the app's capabilities say (sdk/capability-model.json:
 * an app declaring no capability that writes or reaches out is read-only, one declaring
 * none that reaches out is closed-world); destructiveHint and idempotentHint only as
 * stated.
 */
json_t *mcp_tool_annotations(const Manifest *m, const ManifestExport *e);

/* The outputSchema of @e, NULL when berth.yml declares no output. */
json_t *mcp_output_schema(const ManifestExport *e);

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

/*
 * mcp_check_output() - whether @result (what the app returned) is a structuredContent
 * that validates against mcp_output_schema(@e): an object whose declared fields, where
 * present, have their declared types. Returns 0, or -EINVAL with *@ret_issues saying what
 * does not match ("content: expected string, received number").
 */
int mcp_check_output(const ManifestExport *e, json_t *result, char **ret_issues);

/* {"content":[{"type":"text","text":@text}]} plus "isError":true when @is_error. */
json_t *mcp_text_result(const char *text, bool is_error);
