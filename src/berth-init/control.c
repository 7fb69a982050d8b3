/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "journal.h"
#include "line-conn.h"
#include "macros.h"

#define CONNS_MAX 16

static EvLoop *control_loop;
static ControlHandlers handlers;
static LineConn *conns[CONNS_MAX];
static LineConn *log_conn;
/* The connection waiting for a deferred answer, and the request's op. */
static LineConn *deferred_conn;
static bool deferred_busy;

static void conn_forget(LineConn *c)
{
	for (size_t i = 0; i < CONNS_MAX; i++)
		if (conns[i] == c)
			conns[i] = NULL;
	if (deferred_conn == c)
		deferred_conn = NULL;
}

static void send_line(const char *line, size_t len, void *userdata)
{
	LineConn *c = userdata;

	/* A host that does not read its events loses them, not us our memory. */
	if (line_conn_write(c, line, len) == -ENOBUFS) {
		journal_unsubscribe_events(send_line, c);
		conn_forget(c);
		line_conn_free(c);
	}
}

static void reply(LineConn *c, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);

	if (text)
		send_line(text, strlen(text), c);
	free(text);
	json_decref(o);
}

static void control_on_line(LineConn *c, char *line, size_t len, void *userdata)
{
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *op = json_string_value(json_object_get(req, "op"));

	if (!json_is_object(req) || !op) {
		json_decref(req);
		reply(c, json_pack("{s:s, s:b, s:s}", "op", "error", "ok", 0, "error",
				   "expected a JSON object with \"op\""));
		return;
	}
	if (streq(op, "status")) {
		json_t *r = json_pack("{s:s, s:b}", "op", "status", "ok", 1);

		if (handlers.status)
			handlers.status(r, handlers.userdata);
		reply(c, r);
	} else if (streq(op, "resume") && handlers.resume) {
		char err[256] = "";
		int r = handlers.resume(req, err, sizeof(err), handlers.userdata);

		reply(c, r < 0 ? json_pack("{s:s, s:b, s:s}", "op", "resume", "ok", 0, "error", err)
			       : json_pack("{s:s, s:b}", "op", "resume", "ok", 1));
	} else if ((streq(op, "app_stop") || streq(op, "app_start")) && handlers.reload) {
		char err[256] = "";
		int r = -EBUSY;

		/* One at a time: the host sends the next step once this one is answered. */
		if (deferred_busy)
			snprintf(err, sizeof(err), "another reload step is under way");
		else {
			/* Set first: a step with nothing to wait for answers from within. */
			deferred_busy = true;
			deferred_conn = c;
			r = handlers.reload(op, req, err, sizeof(err), handlers.userdata);
			if (r < 0) {
				deferred_busy = false;
				deferred_conn = NULL;
			}
		}
		if (r < 0)
			reply(c, json_pack("{s:s, s:b, s:s}", "op", op, "ok", 0, "error", err));
	} else if (streq(op, "shutdown")) {
		reply(c, json_pack("{s:s, s:b}", "op", "shutdown", "ok", 1));
		if (handlers.shutdown)
			handlers.shutdown(handlers.userdata);
	} else
		reply(c, json_pack("{s:s, s:b, s:s}", "op", op, "ok", 0, "error", "unknown op"));
	json_decref(req);
}

void control_reply_deferred(json_t *o)
{
	LineConn *c = deferred_conn;

	deferred_busy = false;
	deferred_conn = NULL;
	if (c)
		reply(c, o);
	else
		json_decref(o);
}

static void control_on_close(LineConn *c, int error, void *userdata)
{
	journal_unsubscribe_events(send_line, c);
	conn_forget(c);
}

static int control_accept(MuxIo *io, uint32_t port, void *userdata)
{
	LineConn *c;
	int sp[2], r;
	size_t slot;
	json_t *hello;

	for (slot = 0; slot < CONNS_MAX && conns[slot]; slot++)
		;
	if (slot == CONNS_MAX)
		return -EMFILE;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	r = line_conn_new(control_loop, sp[0], CONTROL_LINE_MAX, CONTROL_OUT_MAX, control_on_line,
			  control_on_close, NULL, &c);
	if (r < 0) {
		close(sp[1]);
		return r;
	}
	conns[slot] = c;
	hello = json_pack("{s:s, s:s, s:i, s:I}", "source", "berth-init", "event", "hello",
			  "protocol", 1, "t", (json_int_t)journal_uptime_ms());
	reply(c, hello);
	if (conns[slot] != c)
		return sp[1];
	journal_replay_events(send_line, c);
	if (conns[slot] == c)
		journal_subscribe_events(send_line, c);
	return sp[1];
}

static void log_on_line(LineConn *c, char *line, size_t len, void *userdata)
{
	/* The log port is one-way; whatever the host sends is ignored. */
}

static void log_send(const char *line, size_t len, void *userdata)
{
	LineConn *c = userdata;

	if (line_conn_write(c, line, len) == -ENOBUFS) {
		journal_clear_log_reader(c);
		if (log_conn == c)
			log_conn = NULL;
		line_conn_free(c);
	}
}

static void log_replaced(void *userdata)
{
	LineConn *c = userdata;

	if (log_conn == c)
		log_conn = NULL;
	line_conn_close_after_flush(c);
}

static void log_on_close(LineConn *c, int error, void *userdata)
{
	journal_clear_log_reader(c);
	if (log_conn == c)
		log_conn = NULL;
}

static void count_line(const char *line, size_t len, void *userdata)
{
	(*(unsigned *)userdata)++;
}

static int log_accept(MuxIo *io, uint32_t port, void *userdata)
{
	static const char attached[] = "log stream attached";
	LineConn *c;
	unsigned lines = 0;
	char marker[128];
	int sp[2], r, n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	r = line_conn_new(control_loop, sp[0], CONTROL_LINE_MAX, CONTROL_OUT_MAX, log_on_line,
			  log_on_close, NULL, &c);
	if (r < 0) {
		close(sp[1]);
		return r;
	}
	(void)line_conn_write(c, attached, sizeof(attached) - 1);
	journal_replay_logs(log_send, c);
	journal_replay_logs(count_line, &lines);
	n = snprintf(marker, sizeof(marker),
		     "{\"event\":\"log_replay_end\",\"lines\":%u,\"source\":\"berth-init\"}",
		     lines);
	(void)line_conn_write(c, marker, (size_t)n);
	log_conn = c;
	journal_set_log_reader(log_send, c, log_replaced);
	return sp[1];
}

int control_listen(EvLoop *loop, MuxIo *io, const ControlHandlers *h)
{
	int r;

	control_loop = loop;
	handlers = *h;
	r = mux_io_listen(io, MUX_PORT_CONTROL, control_accept, NULL);
	if (r < 0)
		return r;
	return mux_io_listen(io, MUX_PORT_LOG, log_accept, NULL);
}

size_t control_pending(void)
{
	size_t n = log_conn ? line_conn_pending(log_conn) : 0;

	for (size_t i = 0; i < CONNS_MAX; i++)
		if (conns[i])
			n += line_conn_pending(conns[i]);
	return n;
}
