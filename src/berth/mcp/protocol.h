/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/*
 * The MCP revisions berth mcp speaks, and what each has (docs/mcp.md, "Protocol
 * versions"). Two eras share one stdio stream:
 *
 *  - legacy, 2024-10-07 ... 2025-11-25: an `initialize` handshake negotiates the version
 *    for the rest of the stream;
 *  - modern, 2026-07-28: no handshake; every request names its version and the client's
 *    capabilities in _meta, and is answered on its own (stateless), with `resultType`.
 *
 * A request belongs to the modern era when its params._meta names a protocol version, or
 * when it is `server/discover` (a method only that era has); anything else is legacy.
 * Pure: no I/O.
 */

#define MCP_LATEST_LEGACY_VERSION "2025-11-25"
#define MCP_MODERN_VERSION "2026-07-28"

#define MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

/* JSON-RPC and MCP error codes. */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_INTERNAL_ERROR (-32603)
#define MCP_UNSUPPORTED_PROTOCOL_VERSION (-32022) /* 2026-07-28 */

typedef enum McpEra {
	MCP_ERA_LEGACY,
	MCP_ERA_MODERN,
	_MCP_ERA_MAX,
	_MCP_ERA_INVALID = -22,
} McpEra;

/* What a protocol version has, beyond the 2024-11-05 base. */
typedef enum McpFeature {
	MCP_FEATURE_TOOL_ANNOTATIONS,  /* 2025-03-26: Tool.annotations */
	MCP_FEATURE_PROGRESS_MESSAGE,  /* 2025-03-26: notifications/progress carry a message */
	MCP_FEATURE_STRUCTURED_OUTPUT, /* 2025-06-18: outputSchema, title, structuredContent */
	MCP_FEATURE_TASKS,	       /* 2025-11-25: Tool.execution (tasks; an extension later) */
	MCP_FEATURE_RESULT_TYPE,       /* 2026-07-28: resultType, ttlMs/cacheScope, serverInfo */
	_MCP_FEATURE_MAX,
	_MCP_FEATURE_INVALID = -22,
} McpFeature;

/* The version to answer an `initialize` asking for @requested (NULL: none): that one when
 * it is a legacy version this server speaks, else the newest legacy one. */
const char *mcp_negotiate_legacy(const char *requested);

/* Whether a request under @version has @f. @version is one mcp_negotiate_legacy() or
 * mcp_modern_version() returned. */
bool mcp_version_has(const char *version, McpFeature f);

/* @requested when it is a modern version this server speaks, else NULL. */
const char *mcp_modern_version(const char *requested);

/* The modern versions, as server/discover and the unsupported-version error list them. */
json_t *mcp_modern_versions_json(void);

/* Whether @params (may be NULL) carries a modern request's _meta (a protocol version). */
bool mcp_params_are_modern(json_t *params);

/* params._meta.progressToken when it is a string or an integer (borrowed), else NULL. */
json_t *mcp_progress_token(json_t *params);
