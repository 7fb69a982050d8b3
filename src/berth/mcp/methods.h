/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "manifest.h"
#include "protocol.h"

/*
 * The methods berth mcp answers, one table for both eras (protocol.h): what each request
 * from the client gets back. Pure: the session (session.c) sends what mcp_dispatch()
 * decides, and runs the tool calls it hands over.
 */

/* What is being served. */
typedef struct McpServer {
	const char *app; /* the manifest's name */
	const Manifest *manifest;
	char *const *only; /* --only, NULL: every export */
} McpServer;

/* What the legacy handshake leaves behind for the requests after it. A 2026-07-28
 * request neither reads nor changes it. */
typedef struct McpState {
	const char *legacy_version; /* negotiated by initialize; NULL before one */
	char *client;		    /* the client's name, as initialize gave it (for the audit) */
} McpState;

#define MCP_CLIENT_NAME_MAX 128

typedef enum McpReplyKind {
	MCP_REPLY_NONE,	  /* a notification, or nothing to answer */
	MCP_REPLY_RESULT, /* @result */
	MCP_REPLY_ERROR,  /* @code, @message, @data */
	MCP_REPLY_CALL,	  /* tools/call with valid arguments: the session runs it */
	MCP_REPLY_CANCEL, /* notifications/cancelled of @request_id */
	_MCP_REPLY_KIND_MAX,
} McpReplyKind;

typedef struct McpReply {
	McpReplyKind kind;
	json_t *id; /* the request's id; NULL for a notification */
	McpEra era;
	const char *version; /* the protocol version the request is answered under */
	json_t *result;	     /* RESULT, shaped for @version */
	int code;	     /* ERROR */
	char *message;
	json_t *data;
	const ManifestExport *export; /* CALL */
	json_t *input;		      /* CALL: the arguments, checked and stripped */
	json_t *arguments;	      /* CALL: the arguments as sent */
	json_t *progress_token;	      /* CALL: params._meta.progressToken, or NULL */
	char *client;		      /* CALL: who asks, from a 2026-07-28 request's _meta */
	json_t *request_id;	      /* CANCEL */
} McpReply;

/*
 * mcp_dispatch() - the answer to @msg, a request or notification (MCP_LINE_REQUEST) from
 * the client. Every member of *@ret it sets is a new reference or allocation; free them
 * with mcp_reply_done(). Never fails: out of memory is an internal error reply.
 */
void mcp_dispatch(const McpServer *s, McpState *st, json_t *msg, McpReply *ret);
void mcp_reply_done(McpReply *r);

/* @result (taken) as @version gives it: a modern result carries resultType and the
 * server's name in _meta; a legacy one is as it is. */
json_t *mcp_result_for(const McpServer *s, const char *version, json_t *result);

void mcp_state_done(McpState *st);
