/* SPDX-License-Identifier: Apache-2.0 */
/* What each request from the client gets back, in its era (methods.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "methods.h"
#include "tools.h"

typedef void (*McpHandler)(const McpServer *s, McpState *st, json_t *params, McpReply *r);

#define ERA_LEGACY (1u << MCP_ERA_LEGACY)
#define ERA_MODERN (1u << MCP_ERA_MODERN)

static void set_result(McpReply *r, json_t *result)
{
	r->kind = MCP_REPLY_RESULT;
	r->result = result;
}

static void set_error(McpReply *r, int code, const char *message)
{
	r->kind = MCP_REPLY_ERROR;
	r->code = code;
	free(r->message);
	r->message = strdup(message);
}

static json_t *server_info(const McpServer *s)
{
	_cleanup_free_ char *name = NULL;

	if (asprintf(&name, "berth-%s", s->app) < 0)
		return NULL;
	return json_pack("{s:s, s:s}", "name", name, "version",
			 manifest_version(s->manifest) ?: "0.0.0");
}

/* The client's name in an Implementation object (clientInfo), for the audit; NULL if none. */
static char *client_name(json_t *info)
{
	const char *name = json_string_value(json_object_get(info, "name"));

	return name && *name ? strndup(name, MCP_CLIENT_NAME_MAX) : NULL;
}

/* --- the handlers ---------------------------------------------------------------------- */

static void on_initialize(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

	if (!st->client)
		st->client = client_name(json_object_get(params, "clientInfo"));
	/* Version negotiation as the handshake revisions have it: the client's version when
	 * we speak it, else our newest; the client decides whether to go on. A client asking
	 * for 2026-07-28 this way gets 2025-11-25: that revision has no handshake. */
	st->legacy_version = mcp_negotiate_legacy(asked);
	r->version = st->legacy_version;
	set_result(r, json_pack("{s:s, s:{s:{s:b}}, s:o}", "protocolVersion", st->legacy_version,
				"capabilities", "tools", "listChanged", 1, "serverInfo",
				server_info(s)));
}

static void on_ping(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	set_result(r, json_object());
}

static void on_discover(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	/* The tool list never changes during a session (berth.yml is read once), and no
	 * list-changed notification is sent: the capability says only that there are tools.
	 * ttlMs 0: a restarted session may serve an edited berth.yml. */
	set_result(r, json_pack("{s:o, s:{s:{}}, s:i, s:s}", "supportedVersions",
				mcp_modern_versions_json(), "capabilities", "tools", "ttlMs", 0,
				"cacheScope", "private"));
}

static void on_tools_list(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	json_t *list = mcp_tools_list(s->app, s->manifest, s->only, r->version);

	if (list && r->era == MCP_ERA_MODERN) {
		json_object_set_new(list, "ttlMs", json_integer(0));
		json_object_set_new(list, "cacheScope", json_string("private"));
	}
	set_result(r, list);
}

static bool served(const McpServer *s, const char *name)
{
	if (!s->only)
		return true;
	for (size_t i = 0; s->only[i]; i++)
		if (streq(s->only[i], name))
			return true;
	return false;
}

static void on_tools_call(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	const ManifestExport *e = name ? manifest_find_export(s->manifest, name) : NULL;
	_cleanup_free_ char *issues = NULL, *text = NULL;
	json_t *input = NULL;

	if (!name)
		return set_error(r, MCP_INVALID_PARAMS, "tools/call needs params.name (a string)");
	if (!e || !served(s, name)) {
		/* The revision without a handshake answers an unknown tool with the protocol
		 * error its tools page names; the older ones with the result their clients
		 * know. */
		if (r->era == MCP_ERA_MODERN) {
			if (asprintf(&text, "Unknown tool: %s", name) < 0)
				return set_error(r, MCP_INTERNAL_ERROR, "out of memory");
			return set_error(r, MCP_INVALID_PARAMS, text);
		}
		if (asprintf(&text, "MCP error -32602: Tool %s not found", name) < 0)
			return set_error(r, MCP_INTERNAL_ERROR, "out of memory");
		return set_result(r, mcp_text_result(text, true));
	}
	if (json_is_null(args))
		args = NULL;
	/* A problem with the arguments is a result the model can read and correct. */
	if (mcp_check_arguments(e, args, &input, &issues) < 0) {
		if (asprintf(&text,
			     "MCP error -32602: Input validation error: Invalid arguments for tool "
			     "%s: %s",
			     name, issues ?: "") < 0)
			return set_error(r, MCP_INTERNAL_ERROR, "out of memory");
		return set_result(r, mcp_text_result(text, true));
	}
	r->kind = MCP_REPLY_CALL;
	r->export = e;
	r->input = input;
	r->arguments = json_incref(args);
	r->progress_token = json_incref(mcp_progress_token(params));
}

static void on_cancelled(const McpServer *s, McpState *st, json_t *params, McpReply *r)
{
	json_t *rid = json_object_get(params, "requestId");

	if (!json_is_string(rid) && !json_is_integer(rid))
		return;
	r->kind = MCP_REPLY_CANCEL;
	r->request_id = json_incref(rid);
}

static const struct {
	const char *method;
	unsigned eras;
	bool notification;
	McpHandler handler; /* NULL: accepted, nothing to do */
} methods[] = {
	{"initialize", ERA_LEGACY, false, on_initialize},
	{"ping", ERA_LEGACY, false, on_ping},
	{"server/discover", ERA_MODERN, false, on_discover},
	{"tools/list", ERA_LEGACY | ERA_MODERN, false, on_tools_list},
	{"tools/call", ERA_LEGACY | ERA_MODERN, false, on_tools_call},
	{"notifications/initialized", ERA_LEGACY, true, NULL},
	{"notifications/cancelled", ERA_LEGACY | ERA_MODERN, true, on_cancelled},
};

/* --- the eras -------------------------------------------------------------------------- */

/* A modern request's _meta: the version it names, checked, in r->version. */
static bool check_modern_meta(McpState *st, json_t *params, McpReply *r)
{
	json_t *meta = json_object_get(params, "_meta");
	json_t *version = json_object_get(meta, MCP_META_PROTOCOL_VERSION);

	if (!json_is_string(version) ||
	    !json_is_object(json_object_get(meta, MCP_META_CLIENT_CAPABILITIES))) {
		set_error(r, MCP_INVALID_PARAMS,
			  "Invalid params: a request without initialize needs "
			  "_meta[\"" MCP_META_PROTOCOL_VERSION "\"] (a string) and "
			  "_meta[\"" MCP_META_CLIENT_CAPABILITIES "\"] (an object)");
		return false;
	}
	r->version = mcp_modern_version(json_string_value(version));
	if (!r->version) {
		set_error(r, MCP_UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version");
		r->data = json_pack("{s:o, s:O}", "supported", mcp_modern_versions_json(),
				    "requested", version);
		return false;
	}
	/* Who asks is the request's to say, never an earlier request's (stateless). */
	r->client = client_name(json_object_get(meta, MCP_META_CLIENT_INFO));
	return true;
}

void mcp_dispatch(const McpServer *s, McpState *st, json_t *msg, McpReply *ret)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
	bool notification = !id;
	McpReply *r = ret;

	*r = (McpReply){.kind = MCP_REPLY_NONE, .era = MCP_ERA_LEGACY};
	if (id && !json_is_string(id) && !json_is_integer(id))
		return set_error(r, MCP_INVALID_REQUEST,
				 "Invalid Request: id must be a string or number");
	r->id = json_incref(id);
	/* A malformed notification gets no answer: there is no id to give one to. */
	if (!method) {
		if (!notification)
			set_error(r, MCP_INVALID_REQUEST, "Invalid Request: no method");
		return;
	}
	if (params && !json_is_object(params)) {
		if (!notification)
			set_error(r, MCP_INVALID_PARAMS, "Invalid params: expected an object");
		return;
	}
	if ((params && mcp_params_are_modern(params)) || streq(method, "server/discover"))
		r->era = MCP_ERA_MODERN;
	r->version = r->era == MCP_ERA_MODERN ? MCP_MODERN_VERSION
					      : st->legacy_version ?: MCP_LATEST_LEGACY_VERSION;
	/* Each request of the revision without a handshake is checked on its own. */
	if (!notification && r->era == MCP_ERA_MODERN && !check_modern_meta(st, params, r))
		return;
	for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
		if (!streq(methods[i].method, method) || methods[i].notification != notification)
			continue;
		if (!(methods[i].eras & (1u << r->era)))
			break;
		if (methods[i].handler)
			methods[i].handler(s, st, params, r);
		if (r->kind == MCP_REPLY_RESULT)
			r->result = mcp_result_for(s, r->version, r->result);
		if (r->kind == MCP_REPLY_RESULT && !r->result)
			set_error(r, MCP_INTERNAL_ERROR, "out of memory");
		return;
	}
	/* An unknown notification is nothing to answer (notifications/initialized among the
	 * modern era's, which has no handshake). */
	if (!notification)
		set_error(r, MCP_METHOD_NOT_FOUND, "Method not found");
}

json_t *mcp_result_for(const McpServer *s, const char *version, json_t *result)
{
	json_t *meta;

	if (!result || !mcp_version_has(version, MCP_FEATURE_RESULT_TYPE))
		return result;
	json_object_set_new(result, "resultType", json_string("complete"));
	meta = json_object_get(result, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(result, "_meta", meta);
	}
	json_object_set_new(meta, MCP_META_SERVER_INFO, server_info(s));
	return result;
}

void mcp_reply_done(McpReply *r)
{
	json_decref(r->id);
	json_decref(r->result);
	json_decref(r->data);
	json_decref(r->input);
	json_decref(r->arguments);
	json_decref(r->progress_token);
	json_decref(r->request_id);
	free(r->message);
	free(r->client);
	*r = (McpReply){};
}

void mcp_state_done(McpState *st)
{
	free(st->client);
	*st = (McpState){};
}
