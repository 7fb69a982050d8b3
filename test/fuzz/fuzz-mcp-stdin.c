/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what berth mcp reads from the MCP client on its standard input: the line framing
 * (fed in uneven pieces, with a small cap or the real one), each line as a JSON-RPC
 * message, and for tools/call the arguments checked against an app's exports, as the
 * session does before anything reaches the app. The first byte picks the cap and the
 * piece sizes. Never a crash or a leak, and the invariants below hold (abort() if not).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "manifest.h"
#include "mcp-framing.h"
#include "mcp-tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char app_yml[] = "name: notes\n"
			      "version: 0.3.0\n"
			      "exports:\n"
			      "  - name: add_note\n"
			      "    input:\n"
			      "      text: string\n"
			      "      tags: array\n"
			      "      meta: object\n"
			      "      pinned: boolean\n"
			      "      priority: number\n"
			      "  - name: list_notes\n";

typedef struct Seen {
	McpFraming *f;
	const Manifest *m;
	char *joined; /* every line with its '\n', to compare with the input */
	size_t joined_len;
	bool dropped;
} Seen;

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void tools_call(const Manifest *m, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	const ManifestExport *e = name ? manifest_find_export(m, name) : NULL;
	json_t *input = NULL;
	char *issues = NULL;
	int r;

	if (!e)
		return;
	r = mcp_check_arguments(e, json_object_get(params, "arguments"), &input, &issues);
	check(r == 0 || r == -EINVAL);
	if (r == 0)
		check(json_is_object(input) && !issues);
	else
		check(!input && issues && issues[0]);
	json_decref(input);
	free(issues);
}

static void on_line(const char *line, size_t len, void *userdata)
{
	Seen *s = userdata;
	size_t max = s->f->max ?: MCP_MESSAGE_MAX;
	json_t *msg = NULL;
	char error[256] = "";
	McpLineKind kind;

	if (!line) {
		s->dropped = true;
		return;
	}
	check(len <= max && line[len] == '\0' && !memchr(line, '\n', len));
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
		const char *method = json_string_value(json_object_get(msg, "method"));
		json_t *params = json_object_get(msg, "params");

		check(json_object_get(msg, "method") != NULL);
		if (method && streq(method, "initialize"))
			check(mcp_negotiate_version(json_string_value(
				      json_object_get(params, "protocolVersion"))) != NULL);
		if (method && streq(method, "tools/call") && json_is_object(params))
			tools_call(s->m, params);
	}
	json_decref(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static Manifest *m;
	McpFraming f = {};
	Seen s = {.f = &f};
	const char *in = (const char *)data + 1;
	size_t left, piece;
	uint8_t b0;

	if (!m)
		check(manifest_parse(app_yml, strlen(app_yml), NULL, &m, NULL) >= 0);
	if (size == 0)
		return 0;
	b0 = data[0];
	left = size - 1;
	/* Odd: the real cap; even: a small one, so that over-long lines are reached. */
	f.max = b0 & 1 ? 0 : 8u + (b0 >> 1);
	piece = (b0 >> 4) + 1;
	s.m = m;
	while (left > 0) {
		size_t n = MIN(piece, left);

		mcp_framing_feed(&f, in, n, on_line, &s);
		in += n;
		left -= n;
		piece = piece * 7 % 23 + 1;
	}
	/* An over-long last line without its '\n' is dropped without a word. */
	s.dropped |= f.overlong;
	mcp_framing_end(&f, on_line, &s);
	/* Nothing dropped: the lines are the input, line ends restored (the last one maybe
	 * not there). */
	if (!s.dropped && size > 1) {
		size_t want = size - 1;

		check(s.joined_len == want || s.joined_len == want + 1);
		check(memcmp(s.joined, data + 1, want) == 0);
	}
	free(s.joined);
	mcp_framing_done(&f);
	return 0;
}
