/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tool calls (SPEC §3.3, docs/mcp.md): a call waits while the session's VM boots or a
 * boot is recorded, then gets its own connection to the app's RPC socket and its own
 * timer; the app's answer becomes the MCP result for the protocol version the call came
 * under. Nothing here waits: every step is a callback of the session's event loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "framing.h"
#include "log.h"
#include "mcp.h"
#include "random-util.h"
#include "time-util.h"
#include "tools.h"
#include "vm-client.h"

#define REASON_MAX 300
#define BOOT_STAGES _VM_LAUNCH_STAGE_MAX

struct Call {
	Mcp *mcp;
	json_t *id; /* the client's request id */
	const char *version;
	char *tool;
	const ManifestExport *export;
	json_t *input;
	json_t *progress_token; /* NULL: the client asked for no progress */
	char *client;		/* who asked, when the request said so itself (2026-07-28) */
	int progress_sent;	/* the last boot stage told (c->stage), 0 for none */
	char rpc_id[64];
	LineConn *conn; /* NULL while the call waits */
	EvSource *timer;
	long long started_ms;
	unsigned timeout_ms;
	Call *next;
};

/* --- audit ---------------------------------------------------------------------------- */

/* The first line of @text, without control characters, at most REASON_MAX characters. */
static char *audit_reason(const char *text)
{
	size_t n = strcspn(text, "\n"), keep = MIN(n, (size_t)REASON_MAX);
	char *r = NULL;
	char *s = strndup(text, keep);

	if (!s)
		return NULL;
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	if (n > keep) {
		if (asprintf(&r, "%s… (%zu more chars not recorded)", s, n - keep) < 0)
			r = NULL;
		free(s);
		return r;
	}
	return s;
}

static void audit_call(Call *call, const char *decision, const char *reason_text, json_t *output,
		       json_t *extra_meta)
{
	Mcp *c = call->mcp;
	_cleanup_free_ char *target = NULL,
			    *reason = reason_text ? audit_reason(reason_text) : NULL;
	json_auto_t *ev = NULL;
	json_t *meta = mcp_audit_meta(c);

	if (asprintf(&target, "%s.%s", c->l.name, call->tool) < 0)
		target = NULL;
	if (extra_meta && meta)
		json_object_update(meta, extra_meta);
	ev = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s*, s:s, s:s*, s:I, s:o}", "actor", "kind",
		       "agent", "id", call->client ?: c->state.client ?: "mcp-client", "verifiedBy",
		       "self-asserted", "action", "tool.call", "target", target, "decision",
		       decision, "reason", reason, "durationMs",
		       (json_int_t)(now_ms() - call->started_ms), "meta", meta);
	if (!ev) {
		log_warning("could not build the audit record of a call to \"%s\"", call->tool);
		return;
	}
	if (call->input)
		json_object_set(ev, "input", call->input);
	if (output)
		json_object_set(ev, "output", output);
	mcp_audit(c, ev);
}

/* --- one call ----------------------------------------------------------------------- */

static void call_free(Call *call)
{
	Mcp *c = call->mcp;

	for (Call **p = &c->calls; *p; p = &(*p)->next)
		if (*p == call) {
			*p = call->next;
			c->n_calls--;
			break;
		}
	line_conn_free(call->conn);
	ev_source_free(call->timer);
	json_decref(call->id);
	json_decref(call->input);
	json_decref(call->progress_token);
	free(call->tool);
	free(call->client);
	free(call);
	if (c->input_closed && !c->calls && c->loop)
		mcp_stop_serving(c);
}

static void answer(Call *call, json_t *result)
{
	mcp_send_result(call->mcp, call->id, call->version, result);
}

static void answer_text(Call *call, const char *text, bool is_error)
{
	answer(call, mcp_text_result(text, is_error));
}

static void call_no_answer(Call *call, const char *why)
{
	_cleanup_free_ char *text = NULL;
	json_auto_t *meta = json_pack("{s:b, s:s}", "failed", 1, "outcome", "unknown");

	if (asprintf(&text,
		     "no answer from \"%s\": %s. The request may have reached the app, so it may "
		     "have run — check before retrying anything that isn't safe to repeat.",
		     call->tool, why) < 0)
		text = NULL;
	answer_text(call, text ?: "no answer", true);
	audit_call(call, "allowed", text, NULL, meta);
	call_free(call);
}

static void answer_error(Call *call, json_t *error)
{
	Mcp *c = call->mcp;
	_cleanup_free_ char *raw = json_is_string(error) ? strdup(json_string_value(error))
							 : json_dumps(error, JSON_COMPACT);
	_cleanup_free_ char *text = denial_explain_at(raw ?: "", c->l.name, c->l.manifest,
						      c->manifest_path, c->enforcement, c->app_cwd);
	bool denied = text && denial_text_is_denial(text);
	json_auto_t *meta = json_pack("{s:b}", "failed", 1);

	answer_text(call, text ?: raw ?: "error", true);
	audit_call(call, denied ? "denied" : "allowed", text ?: raw, NULL, meta);
}

/* A result whose export declares an output that it does not match: clients of the
 * revisions with structured output would reject it, so it is an error that says why. */
static void answer_mismatch(Call *call, json_t *result, const char *issues, const char *json)
{
	_cleanup_free_ char *text = NULL;
	json_auto_t *meta = json_pack("{s:b}", "failed", 1);
	json_t *reply;

	if (asprintf(&text,
		     "\"%s\" returned a result that does not match the output its berth.yml "
		     "declares (%s). The call ran; fix the export's result or its output: in "
		     "berth.yml. What it returned follows.",
		     call->tool, issues) < 0)
		text = NULL;
	reply = mcp_text_result(text ?: "result does not match berth.yml's output", true);
	json_array_append_new(json_object_get(reply, "content"),
			      json_pack("{s:s, s:s}", "type", "text", "text", json));
	answer(call, reply);
	audit_call(call, "allowed", text, result, meta);
}

static void answer_success(Call *call, json_t *result)
{
	Mcp *c = call->mcp;
	_cleanup_free_ char *text = json_dumps(result ?: json_null(),
					       JSON_COMPACT | JSON_ENCODE_ANY),
			    *issues = NULL;
	_cleanup_free_ char *refusal =
		denial_possible_refusal(c->l.manifest, call->tool, result, c->enforcement);
	bool structured = call->export->output &&
			  mcp_version_has(call->version, MCP_FEATURE_STRUCTURED_OUTPUT);
	json_auto_t *meta = NULL;
	json_t *reply;

	if (structured && mcp_check_output(call->export, result, &issues) < 0)
		return answer_mismatch(call, result, issues ?: "out of memory", text ?: "null");
	reply = mcp_text_result(text ?: "null", false);
	/* The same result, as the outputSchema that tools/list gave describes it. */
	if (structured && reply)
		json_object_set(reply, "structuredContent", result);
	/* An export that reports refusals it caught passes them on, as its own word. */
	if (refusal && reply) {
		json_array_append_new(json_object_get(reply, "content"),
				      json_pack("{s:s, s:s}", "type", "text", "text", refusal));
		meta = json_pack("{s:o}", "reportedDeniedPaths", denial_reported_paths(result));
	}
	answer(call, reply);
	audit_call(call, "allowed", NULL, result ?: json_null(), meta);
}

static void on_rpc_line(LineConn *conn, char *line, size_t len, void *userdata)
{
	Call *call = userdata;
	json_auto_t *msg = json_loadb(line, len, JSON_ALLOW_NUL, NULL); /* an app may answer \u0000 */
	json_t *id = json_object_get(msg, "id");

	if (!json_is_string(id) || !streq(json_string_value(id), call->rpc_id))
		return; /* not ours (or not JSON): the app's business, keep waiting */
	if (json_object_get(msg, "error"))
		answer_error(call, json_object_get(msg, "error"));
	else
		answer_success(call, json_object_get(msg, "result"));
	call_free(call);
}

static void on_rpc_close(LineConn *conn, int error, void *userdata)
{
	Call *call = userdata;
	char why[160];

	call->conn = NULL; /* freed by LineConn right after this */
	if (error == -EMSGSIZE)
		snprintf(why, sizeof(why), "the app's answer was over %u bytes",
			 (unsigned)MCP_RPC_ANSWER_MAX);
	else if (error < 0)
		snprintf(why, sizeof(why), "the connection to the app failed (%s)",
			 strerror(-error));
	else
		snprintf(why, sizeof(why), "the connection to the app closed before it answered");
	call_no_answer(call, why);
}

static int on_call_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	Call *call = userdata;
	char why[96];

	snprintf(why, sizeof(why), "it did not answer within %u s", call->timeout_ms / 1000);
	call_no_answer(call, why);
	return 0;
}

/* Send @call to the app: its own connection to the VM's rpc socket, and its timer. */
static void call_send(Call *call)
{
	Mcp *c = call->mcp;
	_cleanup_free_ char *text = NULL, *line = NULL;
	json_auto_t *request = NULL;
	char rnd[9];
	int fd, r;

	random_hex(rnd, 4);
	snprintf(call->rpc_id, sizeof(call->rpc_id), "mcp-%lld-%s", (long long)time(NULL) * 1000,
		 rnd);
	request = json_pack("{s:s, s:s, s:O}", "id", call->rpc_id, "export", call->tool, "input",
			    call->input);
	line = request ? json_dumps(request, JSON_COMPACT) : NULL;
	fd = vm_socket_connect(c->run_dir, c->rpc_socket);
	if (fd < 0) {
		json_auto_t *meta = json_pack("{s:b}", "failed", 1);

		if (asprintf(
			    &text,
			    "\"%s\" was not sent: cannot reach \"%s\" in VM %s (%s). Check it with "
			    "'berth vm status'; restart this MCP server once the VM runs again.",
			    call->tool, c->l.name, c->vm_name, strerror(-fd)) < 0)
			text = NULL;
		answer_text(call, text ?: "not sent", true);
		audit_call(call, "unavailable", text, NULL, meta);
		return call_free(call);
	}
	r = line_conn_new(c->loop, fd, MCP_RPC_ANSWER_MAX, MCP_MESSAGE_MAX + 1024, on_rpc_line,
			  on_rpc_close, call, &call->conn);
	if (r >= 0 && line)
		r = line_conn_write(call->conn, line, strlen(line));
	if (r >= 0)
		r = ev_add_time_relative(c->loop, &call->timer,
					 (uint64_t)call->timeout_ms * USEC_PER_MSEC,
					 on_call_timeout, call);
	if (r < 0 || !line) {
		mcp_send_error(c, call->id, MCP_INTERNAL_ERROR,
			       "could not send the call to the app", NULL);
		call_free(call);
	}
}

/* --- the boot's progress ------------------------------------------------------------- */

static void call_progress(Call *call)
{
	Mcp *c = call->mcp;
	json_auto_t *msg = NULL;

	if (!call->progress_token || call->conn || c->stage <= call->progress_sent)
		return;
	call->progress_sent = c->stage;
	msg = json_pack("{s:s, s:s, s:{s:O, s:i, s:i}}", "jsonrpc", "2.0", "method",
			"notifications/progress", "params", "progressToken", call->progress_token,
			"progress", c->stage, "total", BOOT_STAGES);
	if (msg && *c->stage_text && mcp_version_has(call->version, MCP_FEATURE_PROGRESS_MESSAGE))
		json_object_set_new(json_object_get(msg, "params"), "message",
				    json_string(c->stage_text));
	if (msg)
		mcp_send(c, msg);
}

void calls_progress(Mcp *c)
{
	for (Call *call = c->calls; call; call = call->next)
		call_progress(call);
}

/* --- the session's calls ------------------------------------------------------------- */

/* Oldest first, as they came: the list is newest first. */
static size_t waiting(Mcp *c, Call **ret, size_t max)
{
	size_t n = 0;

	for (Call *call = c->calls; call && n < max; call = call->next)
		if (!call->conn)
			ret[n++] = call;
	for (size_t i = 0; i < n / 2; i++) {
		Call *t = ret[i];

		ret[i] = ret[n - 1 - i];
		ret[n - 1 - i] = t;
	}
	return n;
}

void calls_send_waiting(Mcp *c)
{
	Call *w[MCP_CALLS_MAX];
	size_t n = waiting(c, w, ELEMENTSOF(w));

	/* A reboot seen before the first of them: they wait for its record (boot-record.c
	 * sends them when it is done). */
	if (n > 0 && boot_record_follow(c))
		return;
	for (size_t i = 0; i < n; i++)
		call_send(w[i]);
}

void calls_refuse_waiting(Mcp *c)
{
	Call *w[MCP_CALLS_MAX];
	size_t n = waiting(c, w, ELEMENTSOF(w));

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *text = NULL;

		if (asprintf(&text,
			     "\"%s\" was not sent: the VM for \"%s\" did not start. berth mcp's "
			     "standard error (the MCP client's server log) says why.",
			     w[i]->tool, c->l.name) < 0)
			text = NULL;
		answer_text(w[i], text ?: "not sent", true);
		call_free(w[i]);
	}
}

void calls_add(Mcp *c, McpReply *r)
{
	const char *name = r->export->name;
	json_int_t timeout_arg;
	Call *call;

	if (c->phase == MCP_PHASE_FAILED) {
		mcp_send_result(
			c, r->id, r->version,
			mcp_text_result("the VM did not start; see berth mcp's standard error",
					true));
		return;
	}
	if (c->n_calls >= MCP_CALLS_MAX) {
		_cleanup_free_ char *text = NULL;

		if (asprintf(&text,
			     "\"%s\" was not sent: %d calls are already waiting for the app; wait "
			     "for some to finish",
			     name, MCP_CALLS_MAX) < 0)
			text = NULL;
		mcp_send_result(c, r->id, r->version,
				mcp_text_result(text ?: "too many calls", true));
		return;
	}
	call = calloc(1, sizeof(*call));
	if (!call || !(call->tool = strdup(name))) {
		free(call);
		mcp_send_error(c, r->id, MCP_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	call->mcp = c;
	call->id = json_incref(r->id);
	call->version = r->version;
	call->export = r->export;
	call->input = json_incref(r->input);
	call->progress_token = json_incref(r->progress_token);
	call->client = TAKE_PTR(r->client);
	call->started_ms = now_ms();
	call->timeout_ms = c->call_timeout_ms;
	call->next = c->calls;
	c->calls = call;
	c->n_calls++;
	/* An app told to work longer gets longer (SPEC §3.3). */
	timeout_arg = json_integer_value(json_object_get(r->arguments, "timeout_ms"));
	if (timeout_arg > 0 && timeout_arg < 24 * 3600 * 1000 &&
	    (unsigned)timeout_arg + MCP_CALL_TIMEOUT_GRACE_MS > call->timeout_ms)
		call->timeout_ms = (unsigned)timeout_arg + MCP_CALL_TIMEOUT_GRACE_MS;
	if (c->phase == MCP_PHASE_READY) {
		if (!boot_record_follow(c))
			call_send(call);
		return;
	}
	mcp_say("\"%s\" waits for the VM%s", name,
		c->phase == MCP_PHASE_BOOTING ? " to be ready" : "'s boot to be recorded");
	/* Told at once how far the boot is, then at every later stage. */
	call_progress(call);
}

void calls_cancel(Mcp *c, json_t *request_id)
{
	for (Call *call = c->calls; call; call = call->next) {
		_cleanup_free_ char *text = NULL;
		json_auto_t *meta = NULL;

		if (!json_equal(call->id, request_id))
			continue;
		if (!call->conn || line_conn_pending(call->conn) > 0) {
			/* Not (entirely) written yet: it never reached the app. */
			if (asprintf(&text, "\"%s\" was cancelled by the client before it was sent",
				     call->tool) < 0)
				text = NULL;
			answer_text(call, text ?: "cancelled", true);
			meta = json_pack("{s:b, s:b}", "failed", 1, "cancelled", 1);
			audit_call(call, "allowed", text, NULL, meta);
		} else {
			/* MCP: no answer to a cancelled request. It may still run in the app. */
			meta = json_pack("{s:b, s:b, s:s}", "failed", 1, "cancelled", 1, "outcome",
					 "unknown");
			audit_call(
				call, "allowed",
				"cancelled by the client after it was sent — the call may have run",
				NULL, meta);
		}
		call_free(call);
		return;
	}
}

void calls_end(Mcp *c)
{
	/* Calls still in flight when the session ends may have run (§3.5). */
	while (c->calls) {
		json_auto_t *meta = NULL;

		if (!c->calls->conn) {
			meta = json_pack("{s:b}", "failed", 1);
			audit_call(
				c->calls, "unavailable",
				"the session ended before the VM was ready; the call was not sent",
				NULL, meta);
		} else {
			meta = json_pack("{s:b, s:s, s:b}", "failed", 1, "outcome", "unknown",
					 "interrupted", 1);
			audit_call(
				c->calls, "allowed",
				"the session ended before the app answered — the call may have run",
				NULL, meta);
		}
		call_free(c->calls);
	}
}
