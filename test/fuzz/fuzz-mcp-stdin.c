/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what berth mcp reads from the MCP client on its standard input, through the code
 * the session runs: the LineConn it reads with (over-long lines dropped, a last line
 * without '\n' kept), fed in uneven pieces over a socket, each line as a JSON-RPC
 * message, and each message through the methods table of both eras (methods.c), with
 * one handshake state across the input as on a real stream. The first byte picks the
 * line cap (the real one or a small one) and the piece sizes. Never a crash or a leak,
 * and the invariants below hold (abort() if not).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evloop.h"
#include "framing.h"
#include "line-conn.h"
#include "macros.h"
#include "manifest.h"
#include "methods.h"
#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char app_yml[] = "name: notes\n"
			      "version: 0.3.0\n"
			      "capabilities: [filesystem:write:/workspace]\n"
			      "exports:\n"
			      "  - name: add_note\n"
			      "    description: Add a note.\n"
			      "    input:\n"
			      "      text: {type: string, description: the note}\n"
			      "      tags: array\n"
			      "      meta: object\n"
			      "      pinned: boolean\n"
			      "      priority: number\n"
			      "    output: {id: string}\n"
			      "    annotations: {idempotentHint: false}\n"
			      "  - name: list_notes\n";

typedef struct Seen {
	size_t max;
	McpServer server;
	McpState state;
	char *joined; /* every line with its '\n', to compare with the input */
	size_t joined_len;
	bool dropped, closed;
} Seen;

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_reply(json_t *msg, const McpReply *r)
{
	json_t *id = json_object_get(msg, "id");

	check(r->kind < _MCP_REPLY_KIND_MAX);
	switch (r->kind) {
	case MCP_REPLY_RESULT:
		check(id && json_is_object(r->result));
		/* Each era only its own fields. */
		check(!json_object_get(r->result, "resultType") == (r->era == MCP_ERA_LEGACY));
		break;
	case MCP_REPLY_ERROR:
		check(r->message && r->message[0] && r->code < 0);
		check(r->code != MCP_UNSUPPORTED_PROTOCOL_VERSION ||
		      (r->era == MCP_ERA_MODERN &&
		       json_is_array(json_object_get(r->data, "supported"))));
		break;
	case MCP_REPLY_CALL:
		check(id && r->export && json_is_object(r->input) && r->version);
		break;
	case MCP_REPLY_CANCEL:
		check(!id && (json_is_string(r->request_id) || json_is_integer(r->request_id)));
		break;
	case MCP_REPLY_NONE:
		check(!id);
		break;
	case _MCP_REPLY_KIND_MAX:
		break;
	}
}

static void on_line(LineConn *c, char *line, size_t len, void *userdata)
{
	Seen *s = userdata;
	json_t *msg = NULL;
	char error[256] = "";
	McpLineKind kind;

	check(len <= s->max && line[len] == '\0' && !memchr(line, '\n', len));
	s->joined = realloc(s->joined, s->joined_len + len + 1);
	check(s->joined != NULL);
	memcpy(s->joined + s->joined_len, line, len);
	s->joined_len += len;
	s->joined[s->joined_len++] = '\n';

	kind = mcp_line_parse(line, len, &msg, error, sizeof(error));
	check(kind < _MCP_LINE_KIND_MAX);
	check((kind == MCP_LINE_EMPTY || kind == MCP_LINE_PARSE_ERROR) == !msg);
	if (kind == MCP_LINE_PARSE_ERROR)
		check(strncmp(error, "Parse error: ", 13) == 0);
	if (kind == MCP_LINE_REQUEST || kind == MCP_LINE_RESPONSE)
		check(json_is_object(msg) &&
		      streq(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0"));
	if (kind == MCP_LINE_REQUEST) {
		McpReply r;

		mcp_dispatch(&s->server, &s->state, msg, &r);
		check_reply(msg, &r);
		mcp_reply_done(&r);
	}
	json_decref(msg);
}

static void on_overlong(LineConn *c, void *userdata)
{
	((Seen *)userdata)->dropped = true;
}

static void on_close(LineConn *c, int error, void *userdata)
{
	Seen *s = userdata;

	check(error == 0);
	s->closed = true;
}

static void run_until_idle(EvLoop *loop)
{
	while (ev_run(loop, 0) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static Manifest *m;
	EvLoop *loop = NULL;
	LineConn *conn = NULL;
	Seen s = {};
	const char *in = (const char *)data + 1;
	size_t left, piece;
	int fds[2];
	uint8_t b0;

	if (!m)
		check(manifest_parse(app_yml, strlen(app_yml), NULL, &m, NULL) >= 0);
	if (size == 0)
		return 0;
	b0 = data[0];
	left = size - 1;
	/* Odd: the session's cap; even: a small one, so that over-long lines are reached. */
	s.max = b0 & 1 ? MCP_MESSAGE_MAX + 2 : 8u + (b0 >> 1);
	s.server = (McpServer){.app = "notes", .manifest = m};
	piece = (b0 >> 4) + 1;
	check(ev_loop_new(&loop) >= 0);
	check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) >= 0);
	check(line_conn_new(loop, fds[0], s.max, 1, on_line, on_close, &s, &conn) >= 0);
	line_conn_set_skip_overlong(conn, on_overlong);
	line_conn_set_last_line(conn, true);
	while (left > 0) {
		size_t n = MIN(piece, left);

		check(write(fds[1], in, n) == (ssize_t)n);
		run_until_idle(loop);
		in += n;
		left -= n;
		piece = piece * 7 % 23 + 1;
	}
	check(shutdown(fds[1], SHUT_WR) >= 0);
	run_until_idle(loop);
	check(s.closed);
	/* Nothing dropped: the lines are the input, line ends restored (the last one maybe
	 * not there); an over-long last line without its '\n' is dropped without a word. */
	if (!s.dropped && size > 1) {
		const char *all = (const char *)data + 1, *nl = memrchr(all, '\n', size - 1);
		size_t head = nl ? (size_t)(nl - all) + 1 : 0, tail = size - 1 - head;

		if (tail > s.max)
			check(s.joined_len == head && memcmp(s.joined ?: "", all, head) == 0);
		else
			check(s.joined_len == size - 1 + (tail > 0) &&
			      memcmp(s.joined, all, size - 1) == 0);
	}
	close(fds[1]);
	free(s.joined);
	mcp_state_done(&s.state);
	ev_loop_free(loop);
	return 0;
}
