/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session's loop: standard input, a line at a time (a LineConn capped at
 * MCP_MESSAGE_MAX, whose over-long line is dropped and answered with a parse error), each
 * line answered as methods.c decides, tool calls handed to calls.c, signals, and the own
 * VM's boot.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "framing.h"
#include "log.h"
#include "mcp.h"

void mcp_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void mcp_stop_serving(Mcp *c)
{
	if (c->loop && !ev_is_exiting(c->loop))
		ev_exit(c->loop, 0);
}

/* A blocking write: the client reads its stream, and one that stops reading stalls only
 * its own session. */
void mcp_send(Mcp *c, json_t *msg)
{
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

	if (!text || loop_write(c->out_fd, text, strlen(text)) < 0 ||
	    loop_write(c->out_fd, "\n", 1) < 0)
		/* The client is gone: nothing to answer any more. */
		mcp_stop_serving(c);
}

void mcp_send_result(Mcp *c, json_t *id, const char *version, json_t *result)
{
	json_auto_t *msg = NULL;

	result = mcp_result_for(&c->server, version, result);
	msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ?: json_null(), "result",
			result ?: json_object());
	mcp_send(c, msg);
}

void mcp_send_error(Mcp *c, json_t *id, int code, const char *message, json_t *data)
{
	json_auto_t *msg = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
				     id ?: json_null(), "error", "code", code, "message", message);

	if (msg && data)
		json_object_set(json_object_get(msg, "error"), "data", data);
	mcp_send(c, msg);
}

static void answer(Mcp *c, McpReply *r)
{
	switch (r->kind) {
	case MCP_REPLY_RESULT: {
		json_auto_t *msg = json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", r->id,
					     "result", r->result);

		mcp_send(c, msg);
		break;
	}
	case MCP_REPLY_ERROR:
		mcp_send_error(c, r->id, r->code, r->message ?: "error", r->data);
		break;
	case MCP_REPLY_CALL:
		calls_add(c, r);
		break;
	case MCP_REPLY_CANCEL:
		calls_cancel(c, r->request_id);
		break;
	case MCP_REPLY_NONE:
	case _MCP_REPLY_KIND_MAX:
		break;
	}
}

static void on_line(LineConn *conn, char *line, size_t len, void *userdata)
{
	Mcp *c = userdata;
	json_auto_t *msg = NULL;
	McpReply r;
	char text[256];
	json_t *id;

	switch (mcp_line_parse(line, len, &msg, text, sizeof(text))) {
	case MCP_LINE_PARSE_ERROR:
		return mcp_send_error(c, NULL, MCP_PARSE_ERROR, text, NULL);
	case MCP_LINE_INVALID:
		id = json_object_get(msg, "id");
		return mcp_send_error(c, json_is_string(id) || json_is_integer(id) ? id : NULL,
				      MCP_INVALID_REQUEST,
				      "Invalid Request: expected one JSON-RPC 2.0 object per line",
				      NULL);
	case MCP_LINE_REQUEST:
		mcp_dispatch(&c->server, &c->state, msg, &r);
		answer(c, &r);
		mcp_reply_done(&r);
		return;
	case MCP_LINE_EMPTY:
	case MCP_LINE_RESPONSE: /* we send the client no requests: nothing to match */
	case _MCP_LINE_KIND_MAX:
		return;
	}
}

static void on_overlong(LineConn *conn, void *userdata)
{
	char text[96];

	snprintf(text, sizeof(text), "Parse error: a message over %u bytes was dropped",
		 (unsigned)MCP_MESSAGE_MAX);
	mcp_send_error(userdata, NULL, MCP_PARSE_ERROR, text, NULL);
}

static void on_input_end(LineConn *conn, int error, void *userdata)
{
	Mcp *c = userdata;

	c->in = NULL; /* freed by LineConn right after */
	/* The client is done sending: answer what it asked, then end (a client that wants
	 * out now sends a signal, as the SDK does after closing stdin). */
	c->input_closed = true;
	if (!c->calls)
		mcp_stop_serving(c);
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	mcp_stop_serving(userdata);
	return 0;
}

static int on_start(EvSource *s, void *userdata)
{
	return mcp_start_own_boot(userdata);
}

static void on_attached_recorded(Mcp *c)
{
	c->phase = MCP_PHASE_READY;
	calls_send_waiting(c);
}

static void on_attach_ready(Mcp *c, int r)
{
	if (r < 0) {
		c->phase = MCP_PHASE_FAILED;
		calls_refuse_waiting(c);
		c->exit_code = 1;
		mcp_stop_serving(c);
		return;
	}
	if (boot_record_start(c, on_attached_recorded) < 0)
		on_attached_recorded(c);
}

static int on_record_attached(EvSource *s, void *userdata)
{
	Mcp *c = userdata;

	if (mcp_attach_wait_start(c, on_attach_ready) < 0)
		on_attach_ready(c, -ENOMEM);
	return 0;
}

static int watch_input(Mcp *c)
{
	int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3), r;

	if (fd < 0)
		return -errno;
	/* Room for a message, its line end and a CR; past that the line is dropped. */
	r = line_conn_new(c->loop, fd, MCP_MESSAGE_MAX + 2, 1, on_line, on_input_end, c, &c->in);
	if (r == -EPERM)
		return log_error("standard input must be a pipe or a socket from an MCP client, "
				 "not a regular file"),
		       r;
	if (r < 0)
		return r;
	line_conn_set_skip_overlong(c->in, on_overlong);
	line_conn_set_last_line(c->in, true);
	return 0;
}

int mcp_serve(Mcp *c)
{
	int r;

	r = ev_loop_new(&c->loop);
	if (r >= 0)
		r = ev_add_signal(c->loop, NULL, SIGINT, on_signal, c);
	if (r >= 0)
		r = ev_add_signal(c->loop, NULL, SIGTERM, on_signal, c);
	if (r >= 0)
		r = ev_add_signal(c->loop, NULL, SIGHUP, on_signal, c);
	if (r >= 0) {
		r = watch_input(c);
		if (r == -EPERM)
			return r;
	}
	/* Both on the loop, so that the client is answered from the start. */
	if (r >= 0)
		r = ev_add_defer(c->loop, NULL, c->owned ? on_start : on_record_attached, c);
	if (r < 0)
		return log_error_errno(r, "cannot serve MCP: %m");
	mcp_say("serving %s's exports as MCP tools on standard input/output (run %s)%s", c->l.name,
		c->run_id, c->owned ? "; calls wait for the VM" : "");
	r = ev_loop(c->loop);
	if (vm_launch_booting(&c->l)) {
		mcp_say("the session ended during the VM's boot; stopping the VM");
		vm_launch_boot_cancel(&c->l);
	}
	calls_end(c);
	mcp_attach_wait_cancel(c);
	boot_record_free(c);
	c->in = line_conn_free(c->in);
	return r < 0 ? r : c->exit_code ? -EIO : 0;
}
