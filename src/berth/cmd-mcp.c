/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth mcp --app NAME [--app-dir DIR]: serve an app's exports as MCP tools over stdio
 * (SPEC §3.2-3.5, docs/mcp.md).
 *
 * The session attaches to a VM that already runs the app (berth dev's, or another
 * session's) and leaves it running, or boots its own and stops it when the client goes.
 * Standard output carries nothing but JSON-RPC: from the start, fds 1 and 2 are a pipe
 * that a thread copies to the real standard error with "[berth:mcp] " before each line,
 * so no log line, child process or library can write anything else to the client.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "attest.h"
#include "audit-log.h"
#include "cli.h"
#include "commands.h"
#include "denial.h"
#include "evloop.h"
#include "fileio.h"
#include "line-conn.h"
#include "log.h"
#include "macros.h"
#include "mcp-framing.h"
#include "mcp-tools.h"
#include "parse-util.h"
#include "paths.h"
#include "random-util.h"
#include "rundir.h"
#include "term-text.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-launch.h"

#define PREFIX "[berth:mcp] "
/* One RPC answer from the app (one message from the client: MCP_MESSAGE_MAX). */
#define RPC_ANSWER_MAX (4u * 1024 * 1024)
#define CALLS_MAX 64
#define CALL_TIMEOUT_MS_DEFAULT (120 * 1000)
#define CALL_TIMEOUT_GRACE_MS 15000
#define REASON_MAX 300
#define BOOT_TIMEOUT_S_DEFAULT 120

static bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (streq(v[i], s))
			return true;
	return false;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* --- standard output and error ------------------------------------------------------- */

static struct {
	int read_fd, quit_fd, err_fd;
	pthread_t thread;
	bool running;
} relay = {.read_fd = -EBADF, .quit_fd = -EBADF, .err_fd = -EBADF};

/* One line to the real standard error, for a person: what goes through the relay includes
 * the guest's and the app's text (berth vm logs after a failed boot, berth-vmm's output). */
static void relay_write(const char *buf, size_t len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return;
	fputs(PREFIX, f);
	term_text_write(f, buf, len, TERM_TEXT_LOG_LINE);
	fputc('\n', f);
	if (fclose(f) == 0)
		(void)loop_write(relay.err_fd, text, size);
	free(text);
}

static void *relay_main(void *arg)
{
	char line[4096];
	size_t len = 0;
	bool quitting = false;

	for (;;) {
		struct pollfd p[2] = {{relay.read_fd, POLLIN, 0}, {relay.quit_fd, POLLIN, 0}};
		ssize_t n;
		int k = poll(p, quitting ? 1 : 2, quitting ? 0 : -1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || (quitting && k == 0))
			break;
		if (!quitting && (p[1].revents & POLLIN)) {
			quitting = true; /* drain what is there, then stop */
			continue;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(relay.read_fd, line + len, sizeof(line) - len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
		for (char *nl; (nl = memchr(line, '\n', len));) {
			relay_write(line, (size_t)(nl - line));
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len);
		}
		if (len == sizeof(line)) { /* a very long line: pass it on in pieces */
			relay_write(line, len);
			len = 0;
		}
	}
	if (len > 0)
		relay_write(line, len);
	return NULL;
}

/* Keep the real standard output for MCP; send everything else through the relay. */
static int relay_start(int *ret_mcp_fd)
{
	int p[2], mcp_fd;

	mcp_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	relay.err_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	relay.quit_fd = eventfd(0, EFD_CLOEXEC);
	if (mcp_fd < 0 || relay.err_fd < 0 || relay.quit_fd < 0 || pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	relay.read_fd = p[0];
	if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(p[1], STDERR_FILENO) < 0)
		return -errno;
	close(p[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The relay never takes a signal: a client's SIGTERM must reach the thread that acts
	 * on it (the handler before serving, the loop's signalfd after), not sit in a flag
	 * nobody reads. The thread inherits this mask. */
	sigset_t all, saved;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	r = pthread_create(&relay.thread, NULL, relay_main, NULL);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (r != 0)
		return -EAGAIN;
	relay.running = true;
	*ret_mcp_fd = mcp_fd;
	return 0;
}

/* Flush what is left and stop the relay. A detached child (berth-vmm) may still hold the
 * pipe, so the thread is told to stop rather than waiting for end of file. */
static void relay_stop(void)
{
	int null_fd;

	if (!relay.running)
		return;
	fflush(stdout);
	fflush(stderr);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd >= 0) {
		dup2(null_fd, STDOUT_FILENO);
		dup2(null_fd, STDERR_FILENO);
		close(null_fd);
	}
	(void)eventfd_write(relay.quit_fd, 1);
	pthread_join(relay.thread, NULL);
	relay.running = false;
	dup2(relay.err_fd, STDERR_FILENO);
}

static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* --- the session ------------------------------------------------------------------------ */

typedef struct Mcp Mcp;

typedef struct Call {
	Mcp *mcp;
	json_t *id; /* the client's request id */
	char *tool;
	json_t *input;
	char rpc_id[64];
	LineConn *conn;
	EvSource *timer;
	long long started_ms;
	unsigned timeout_ms;
	struct Call *next;
} Call;

struct Mcp {
	/* options */
	const char *app, *app_dir, *container, *runtime;
	char *run_id;
	char **only;
	bool warm, no_boot, env_given;
	unsigned boot_timeout_s, call_timeout_ms;
	/* the sandbox */
	VmLaunch l;
	bool owned;
	bool ready; /* the VM answers: calls are sent, not queued */
	char *vm_name, *run_dir, *rpc_socket; /* rpc_socket: its name in run_dir */
	char *manifest_path;
	char app_cwd[300]; /* the app's working directory in the VM */
	EnforcementStatus enforcement;
	/* serving */
	int out_fd;
	EvLoop *loop;
	McpFraming in;
	bool input_closed; /* end of standard input: stop once no call is left */
	Call *calls;
	unsigned n_calls;
	AuditSink *audit;
	char bridge[17];
	char boot_id[64]; /* the boot the last sandbox.boot record describes */
	char *client;
	int exit_code;
};

static void send_message(Mcp *c, json_t *msg)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);

	if (!text || loop_write(c->out_fd, text, strlen(text)) < 0 ||
	    loop_write(c->out_fd, "\n", 1) < 0) {
		/* The client is gone: nothing to answer any more. */
		if (c->loop && !ev_is_exiting(c->loop))
			ev_exit(c->loop, 0);
	}
}

static void send_result(Mcp *c, json_t *id, json_t *result)
{
	json_auto_t *msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ?: json_null(),
				     "result", result ?: json_object());

	send_message(c, msg);
}

static void send_error(Mcp *c, json_t *id, int code, const char *message)
{
	json_auto_t *msg = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
				     id ?: json_null(), "error", "code", code, "message", message);

	send_message(c, msg);
}

/* --- audit -------------------------------------------------------------------------------- */

static json_t *audit_meta(Mcp *c)
{
	/* Before an own VM is adopted, its name is the one it is booting under. */
	return json_pack("{s:s, s:s, s:s, s:s}", "runId", c->run_id, "bridge", c->bridge, "via",
			 "vm", "container", c->vm_name ?: c->l.vm_name ?: "");
}

static void audit(Mcp *c, json_t *event)
{
	int r;

	if (!c->audit)
		return;
	r = audit_append(c->audit, event);
	if (r < 0)
		log_warning("could not append to the audit trail %s: %s; the call itself went on",
			    audit_sink_path(c->audit), strerror(-r));
}

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

static void audit_call(Mcp *c, Call *call, const char *decision, const char *reason_text,
		       json_t *output, json_t *extra_meta)
{
	_cleanup_free_ char *target = NULL,
			    *reason = reason_text ? audit_reason(reason_text) : NULL;
	json_auto_t *ev = NULL;
	json_t *meta = audit_meta(c);

	if (asprintf(&target, "%s.%s", c->l.name, call->tool) < 0)
		target = NULL;
	if (extra_meta)
		json_object_update(meta, extra_meta);
	ev = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s*, s:s, s:s*, s:I, s:o}", "actor", "kind",
		       "agent", "id", c->client ?: "mcp-client", "verifiedBy", "self-asserted",
		       "action", "tool.call", "target", target, "decision", decision, "reason",
		       reason, "durationMs", (json_int_t)(now_ms() - call->started_ms), "meta",
		       meta);
	if (!ev) {
		log_warning("could not build the audit record of a call to \"%s\"", call->tool);
		return;
	}
	if (call->input)
		json_object_set(ev, "input", call->input);
	if (output)
		json_object_set(ev, "output", output);
	audit(c, ev);
}

/* --- calls --------------------------------------------------------------------------------- */

static void stop_serving(Mcp *c);

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
	free(call->tool);
	free(call);
	if (c->input_closed && !c->calls && c->loop)
		stop_serving(c);
}

static void call_no_answer(Call *call, const char *why, json_t *extra_meta)
{
	Mcp *c = call->mcp;
	_cleanup_free_ char *text = NULL;
	json_auto_t *meta = json_pack("{s:b, s:s}", "failed", 1, "outcome", "unknown");

	if (extra_meta)
		json_object_update(meta, extra_meta);
	if (asprintf(&text,
		     "no answer from \"%s\": %s. The request may have reached the app, so it may "
		     "have run — check before retrying anything that isn't safe to repeat.",
		     call->tool, why) < 0)
		text = NULL;
	send_result(c, call->id, mcp_text_result(text ?: "no answer", true));
	audit_call(c, call, "allowed", text, NULL, meta);
	call_free(call);
}

static void on_rpc_line(LineConn *conn, char *line, size_t len, void *userdata)
{
	Call *call = userdata;
	Mcp *c = call->mcp;
	json_auto_t *answer = json_loadb(line, len, 0, NULL);
	json_t *result, *error;

	if (!json_is_object(answer) || !json_is_string(json_object_get(answer, "id")) ||
	    !streq(json_string_value(json_object_get(answer, "id")), call->rpc_id))
		return; /* not ours (or not JSON): the app's business, keep waiting */
	error = json_object_get(answer, "error");
	result = json_object_get(answer, "result");
	if (error) {
		_cleanup_free_ char *raw = json_is_string(error) ? strdup(json_string_value(error))
								 : json_dumps(error, JSON_COMPACT);
		_cleanup_free_ char *text =
			denial_explain_at(raw ?: "", c->l.name, c->l.manifest, c->manifest_path,
					  c->enforcement, c->app_cwd);
		bool denied = text && denial_text_is_denial(text);
		json_auto_t *meta = json_pack("{s:b}", "failed", 1);

		send_result(c, call->id, mcp_text_result(text ?: raw ?: "error", true));
		audit_call(c, call, denied ? "denied" : "allowed", text ?: raw, NULL, meta);
	} else {
		_cleanup_free_ char *text =
			json_dumps(result ?: json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
		_cleanup_free_ char *refusal =
			denial_possible_refusal(c->l.manifest, call->tool, result, c->enforcement);
		json_t *reply = mcp_text_result(text ?: "null", false);
		json_auto_t *meta = NULL;

		/* An export that reports refusals it caught passes them on, as its own word. */
		if (refusal) {
			json_array_append_new(
				json_object_get(reply, "content"),
				json_pack("{s:s, s:s}", "type", "text", "text", refusal));
			meta = json_pack("{s:o}", "reportedDeniedPaths",
					 denial_reported_paths(result));
		}
		send_result(c, call->id, reply);
		audit_call(c, call, "allowed", NULL, result ?: json_null(), meta);
	}
	call_free(call);
}

static void on_rpc_close(LineConn *conn, int error, void *userdata)
{
	Call *call = userdata;
	char why[160];

	call->conn = NULL; /* freed by LineConn right after this */
	if (error == -EMSGSIZE)
		snprintf(why, sizeof(why), "the app's answer was over %u bytes",
			 (unsigned)RPC_ANSWER_MAX);
	else if (error < 0)
		snprintf(why, sizeof(why), "the connection to the app failed (%s)",
			 strerror(-error));
	else
		snprintf(why, sizeof(why), "the connection to the app closed before it answered");
	call_no_answer(call, why, NULL);
}

static int on_call_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	Call *call = userdata;
	char why[96];

	snprintf(why, sizeof(why), "it did not answer within %u s", call->timeout_ms / 1000);
	call_no_answer(call, why, NULL);
	return 0;
}

static void record_boot(Mcp *c);

/* berth dev reboots its VM on every change: a call that would run on a boot the session
 * has not recorded yet records that boot first, so the trail says where each call ran. */
static void follow_reboot(Mcp *c)
{
	json_auto_t *vm = vm_json_load(c->run_dir);
	const char *boot_id = json_string_value(json_object_get(vm, "bootId"));

	if (boot_id && !streq(boot_id, c->boot_id)) {
		say("the VM %s was rebooted (boot %s); recording the new boot", c->vm_name,
		    boot_id);
		record_boot(c);
	}
}

/* Send @call to the app: its own connection to the VM's rpc socket, and its timer. */
static void dispatch_call(Call *call)
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
	follow_reboot(c);
	fd = vm_socket_connect(c->run_dir, c->rpc_socket);
	if (fd < 0) {
		json_auto_t *meta = json_pack("{s:b}", "failed", 1);

		if (asprintf(
			    &text,
			    "\"%s\" was not sent: cannot reach \"%s\" in VM %s (%s). Check it with "
			    "'berth vm status'; restart this MCP server once the VM runs again.",
			    call->tool, c->l.name, c->vm_name, strerror(-fd)) < 0)
			text = NULL;
		send_result(c, call->id, mcp_text_result(text ?: "not sent", true));
		audit_call(c, call, "unavailable", text, NULL, meta);
		return call_free(call);
	}
	r = line_conn_new(c->loop, fd, RPC_ANSWER_MAX, MCP_MESSAGE_MAX + 1024, on_rpc_line,
			  on_rpc_close, call, &call->conn);
	if (r >= 0 && line)
		r = line_conn_write(call->conn, line, strlen(line));
	if (r >= 0)
		r = ev_add_time_relative(c->loop, &call->timer,
					 (uint64_t)call->timeout_ms * USEC_PER_MSEC,
					 on_call_timeout, call);
	if (r < 0 || !line) {
		send_error(c, call->id, -32603, "could not send the call to the app");
		call_free(call);
	}
}

static void tool_call(Mcp *c, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	const ManifestExport *e = name ? manifest_find_export(c->l.manifest, name) : NULL;
	_cleanup_free_ char *issues = NULL, *text = NULL;
	json_auto_t *input = NULL;
	json_int_t timeout_arg;
	Call *call;

	if (!name)
		return send_error(c, id, -32602, "tools/call needs params.name (a string)");
	if (!e || (c->only && !strv_contains(c->only, name))) {
		if (asprintf(&text, "MCP error -32602: Tool %s not found", name) < 0)
			text = NULL;
		return send_result(c, id, mcp_text_result(text ?: "Tool not found", true));
	}
	if (args && json_is_null(args))
		args = NULL;
	if (mcp_check_arguments(e, args, &input, &issues) < 0) {
		if (asprintf(&text,
			     "MCP error -32602: Input validation error: Invalid arguments for tool "
			     "%s: %s",
			     name, issues ?: "") < 0)
			text = NULL;
		return send_result(c, id, mcp_text_result(text ?: "invalid arguments", true));
	}
	if (c->n_calls >= CALLS_MAX) {
		if (asprintf(&text,
			     "\"%s\" was not sent: %d calls are already waiting for the app; wait "
			     "for some to finish",
			     name, CALLS_MAX) < 0)
			text = NULL;
		return send_result(c, id, mcp_text_result(text ?: "too many calls", true));
	}
	call = calloc(1, sizeof(*call));
	if (!call)
		return send_error(c, id, -32603, "out of memory");
	*call = (Call){.mcp = c,
		       .id = json_incref(id),
		       .tool = strdup(name),
		       .input = json_incref(input),
		       .started_ms = now_ms(),
		       .timeout_ms = c->call_timeout_ms,
		       .next = c->calls};
	c->calls = call;
	c->n_calls++;
	/* An app told to work longer gets longer (SPEC §3.3). */
	timeout_arg = json_integer_value(json_object_get(args, "timeout_ms"));
	if (timeout_arg > 0 && timeout_arg < 24 * 3600 * 1000 &&
	    (unsigned)timeout_arg + CALL_TIMEOUT_GRACE_MS > call->timeout_ms)
		call->timeout_ms = (unsigned)timeout_arg + CALL_TIMEOUT_GRACE_MS;
	if (c->ready)
		dispatch_call(call);
	else
		say("\"%s\" waits for the VM to be ready", name);
}

static void cancel_call(Mcp *c, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");

	for (Call *call = c->calls; call; call = call->next) {
		_cleanup_free_ char *text = NULL;
		json_auto_t *meta = NULL;

		if (!json_equal(call->id, rid))
			continue;
		if (!call->conn || line_conn_pending(call->conn) > 0) {
			/* Not (entirely) written yet: it never reached the app. */
			if (asprintf(&text, "\"%s\" was cancelled by the client before it was sent",
				     call->tool) < 0)
				text = NULL;
			send_result(c, call->id, mcp_text_result(text ?: "cancelled", true));
			meta = json_pack("{s:b, s:b}", "failed", 1, "cancelled", 1);
			audit_call(c, call, "allowed", text, NULL, meta);
		} else {
			/* MCP: no answer to a cancelled request. It may still run in the app. */
			meta = json_pack("{s:b, s:b, s:s}", "failed", 1, "cancelled", 1, "outcome",
					 "unknown");
			audit_call(
				c, call, "allowed",
				"cancelled by the client after it was sent — the call may have run",
				NULL, meta);
		}
		call_free(call);
		return;
	}
}

/* --- JSON-RPC ---------------------------------------------------------------------------- */

static void handle_request(Mcp *c, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
	bool notification = !id;

	if (id && !json_is_string(id) && !json_is_integer(id))
		return send_error(c, NULL, -32600,
				  "Invalid Request: id must be a string or number");
	if (!method)
		return notification ? (void)0
				    : send_error(c, id, -32600, "Invalid Request: no method");
	if (params && !json_is_object(params))
		return notification
			       ? (void)0
			       : send_error(c, id, -32602, "Invalid params: expected an object");

	if (notification) {
		if (streq(method, "notifications/cancelled"))
			cancel_call(c, params);
		return; /* notifications/initialized and anything else: nothing to say */
	}
	if (streq(method, "initialize")) {
		const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
		const char *client = json_string_value(
			json_object_get(json_object_get(params, "clientInfo"), "name"));
		_cleanup_free_ char *server = NULL;

		if (client && *client && !c->client)
			c->client = strndup(client, 128);
		if (asprintf(&server, "berth-%s", c->l.name) < 0)
			server = NULL;
		return send_result(c, id,
				   json_pack("{s:s, s:{s:{s:b}}, s:{s:s?, s:s}}", "protocolVersion",
					     mcp_negotiate_version(asked), "capabilities", "tools",
					     "listChanged", 1, "serverInfo", "name", server,
					     "version",
					     manifest_version(c->l.manifest) ?: "0.0.0"));
	}
	if (streq(method, "ping"))
		return send_result(c, id, json_object());
	if (streq(method, "tools/list"))
		return send_result(c, id, mcp_tools_list(c->l.name, c->l.manifest, c->only));
	if (streq(method, "tools/call"))
		return tool_call(c, id, params);
	send_error(c, id, -32601, "Method not found");
}

static void handle_line(const char *line, size_t len, void *userdata)
{
	Mcp *c = userdata;
	json_auto_t *msg = NULL;
	char text[256];
	json_t *id;

	if (!line) {
		snprintf(text, sizeof(text), "Parse error: a message over %u bytes was dropped",
			 (unsigned)MCP_MESSAGE_MAX);
		return send_error(c, NULL, -32700, text);
	}
	switch (mcp_line_parse(line, len, &msg, text, sizeof(text))) {
	case MCP_LINE_PARSE_ERROR:
		return send_error(c, NULL, -32700, text);
	case MCP_LINE_INVALID:
		id = json_object_get(msg, "id");
		return send_error(c, json_is_string(id) || json_is_integer(id) ? id : NULL, -32600,
				  "Invalid Request: expected one JSON-RPC 2.0 object per line");
	case MCP_LINE_REQUEST:
		return handle_request(c, msg);
	case MCP_LINE_EMPTY:
	case MCP_LINE_RESPONSE: /* we send the client no requests: nothing to match */
	case _MCP_LINE_KIND_MAX:
		return;
	}
}

static void stop_serving(Mcp *c)
{
	if (!ev_is_exiting(c->loop))
		ev_exit(c->loop, 0);
}

static int on_stdin(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Mcp *c = userdata;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		mcp_framing_end(&c->in, handle_line, c);
		/* The client is done sending: answer what it asked, then end (a client that
		 * wants out now sends a signal, as the SDK does after closing stdin). */
		c->input_closed = true;
		ev_source_set_enabled(s, EV_OFF);
		if (!c->calls)
			stop_serving(c);
		return 0;
	}
	mcp_framing_feed(&c->in, buf, (size_t)n, handle_line, c);
	return 0;
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	stop_serving(userdata);
	return 0;
}

/* --- finding or booting the VM ------------------------------------------------------ */

/* The app's index among the apps of the VM in @run_dir, or -ENOENT. */
static int app_index_in(const char *run_dir, const char *app, char **ret_apps)
{
	json_auto_t *vm = vm_json_load(run_dir);
	json_t *a;
	size_t i;
	char *list = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&list, &len);
	int found = -ENOENT;

	json_array_foreach(json_object_get(vm, "apps"), i, a) {
		const char *name = json_string_value(json_object_get(a, "name"));

		if (f)
			fprintf(f, "%s%s", i ? ", " : "", name ?: "?");
		if (name && streq(name, app) && found < 0)
			found = (int)i;
	}
	if (f)
		fclose(f);
	if (ret_apps)
		*ret_apps = list;
	else
		free(list);
	return found;
}

static int use_vm(Mcp *c, const char *vm_name)
{
	free(c->vm_name);
	free(c->run_dir);
	c->vm_name = strdup(vm_name);
	c->run_dir = berth_run_dir(vm_name);
	return c->vm_name && c->run_dir ? 0 : -ENOMEM;
}

/* A running VM for this app: --container, berth dev's, or another session's. */
static int find_running(Mcp *c)
{
	const char *prefixes[] = {"berth-dev-", "berth-mcp-"};
	pid_t pid;

	for (size_t i = 0; i < (c->container ? 1 : ELEMENTSOF(prefixes)); i++) {
		_cleanup_free_ char *name = NULL, *dir = NULL;

		if (c->container)
			name = strdup(c->container);
		else if (asprintf(&name, "%s%s", prefixes[i], c->l.name) < 0)
			name = NULL;
		dir = name ? berth_run_dir(name) : NULL;
		if (!dir)
			return -ENOMEM;
		if (rundir_inspect(dir, &pid) == RUNDIR_RUNNING)
			return use_vm(c, name);
	}
	return -ENOENT;
}

static int attach(Mcp *c)
{
	_cleanup_free_ char *apps = NULL;
	json_auto_t *vm = vm_json_load(c->run_dir);
	char reason[512];
	int idx, r;

	idx = app_index_in(c->run_dir, c->l.name, &apps);
	if (idx < 0)
		return log_error("the VM %s runs %s, not \"%s\"; stop it or pick another with "
				 "--container",
				 c->vm_name, apps && *apps ? apps : "no app", c->l.name);
	/* It may still be booting: wait as berth dev does. */
	r = vm_wait_ready(c->run_dir, (unsigned)json_array_size(json_object_get(vm, "apps")),
			  (int)c->boot_timeout_s * 1000, reason, sizeof(reason));
	if (r < 0)
		return log_error("the VM %s is running but not ready: %s", c->vm_name,
				 r == -ETIME ? "it did not get ready in time" : reason);
	if (asprintf(&c->rpc_socket, "rpc-%d.sock", idx) < 0)
		return -ENOMEM;
	if (json_array_size(json_object_get(vm, "apps")) > 1)
		snprintf(c->app_cwd, sizeof(c->app_cwd), "/app/%s", c->l.name);
	say("attached to the running VM \"%s\"", c->vm_name);
	if (c->env_given)
		log_warning("--env and --env-file apply to a VM this command boots; %s keeps the "
			    "values it was booted with (stop it to boot one with yours)",
			    c->vm_name);
	return 0;
}

/* Find berth-vmm and the artifacts, and bundle the app: what a boot needs first. */
static int prepare_own(Mcp *c)
{
	char err[1024];
	int r;

	r = vm_launch_prepare(&c->l);
	if (r < 0)
		return r;
	r = vm_launch_bundle(&c->l, err, sizeof(err));
	if (r < 0)
		return log_error("bundling %s failed: %s", c->l.app_dir, err);
	say("booting \"%s\" in VM %s", c->l.name, c->l.vm_name);
	c->owned = true;
	return 0;
}

/* --warm: boot and wait for it. */
static int boot_own(Mcp *c)
{
	int r = prepare_own(c);

	if (r >= 0)
		r = vm_launch_boot(&c->l);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return log_error("\"%s\" did not start; see above", c->l.name);
	say("VM %s ready in %lld ms (boot %s)", c->l.vm_name, c->l.boot_ms, c->l.boot_id);
	return 0;
}

/* Serve the VM this session booted. */
static int adopt_own_vm(Mcp *c)
{
	int r = use_vm(c, c->l.vm_name);

	if (r >= 0 && !(c->rpc_socket = strdup("rpc-0.sock")))
		r = -ENOMEM;
	return r;
}

/*
 * The boot's evidence while it runs: vm.json and the guest's boot events, which the
 * control port replays to every new connection. The status request's answer comes after
 * the replay, so everything before it is the whole record so far.
 */
static json_t *current_evidence(Mcp *c)
{
	json_auto_t *vm = vm_json_load(c->run_dir), *events = json_array();
	long long deadline = now_ms() + 10000;
	LineReader lr;
	char *line;
	int fd;

	if (!vm || !events)
		return NULL;
	fd = vm_socket_connect(c->run_dir, "control.sock");
	if (fd < 0)
		return NULL;
	line_reader_init(&lr, fd, VM_LINE_MAX);
	if (loop_write(fd, "{\"op\":\"status\"}\n", 16) >= 0)
		while (now_ms() < deadline &&
		       line_reader_next(&lr, (int)(deadline - now_ms()), &line, NULL) > 0) {
			json_t *o = json_loads(line, 0, NULL);

			if (json_is_string(json_object_get(o, "event"))) {
				json_array_append_new(events, o);
				continue;
			}
			if (json_is_string(json_object_get(o, "op"))) {
				json_decref(o);
				break;
			}
			json_decref(o);
		}
	line_reader_done(&lr);
	close(fd);
	return json_pack("{s:i, s:s, s:O*, s:O, s:O}", "schema", 1, "kind", "berth.boot-evidence",
			 "bootId", json_object_get(vm, "bootId"), "vm", vm, "events", events);
}

/* Log the kernel's enforcement for this app, and record the session's boot (§3.5). */
static void record_boot(Mcp *c)
{
	json_auto_t *evidence = current_evidence(c), *rec = NULL, *chain = json_object(),
		    *run = json_object(), *ev = NULL;
	_cleanup_free_ char *error = NULL, *target = NULL;
	struct passwd *pw = getpwuid(getuid());
	json_t *boot, *enf, *meta, *be;
	char now[40];

	snprintf(c->boot_id, sizeof(c->boot_id), "%s",
		 json_string_value(json_object_get(evidence, "bootId")) ?: "");
	/* berth-init took these reports before the app's code ran: the app cannot forge them. */
	c->enforcement = enforcement_from_reports(json_object_get(evidence, "events"), c->l.name);
	say("kernel enforcement in this VM: %s", enforcement_status_to_string(c->enforcement));
	now_rfc3339(now, sizeof(now), false);
	if (!evidence || attest_record_build(evidence, chain, run, now, &rec, &error) < 0) {
		log_warning("could not read the boot evidence of %s%s%s; the session's boot is not "
			    "recorded, calls are",
			    c->vm_name, error ? ": " : "", error ?: "");
		return;
	}
	boot = json_object_get(rec, "boot");
	enf = json_object_get(rec, "enforcement");
	be = json_pack("{s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*}", "bootId",
		       json_object_get(boot, "bootId"), "containerName",
		       json_object_get(boot, "containerName"), "imageTag",
		       json_object_get(boot, "imageTag"), "imageDigest",
		       json_object_get(boot, "imageDigest"), "runtime",
		       json_object_get(boot, "runtime"), "isolation",
		       json_object_get(boot, "isolation"), "rulesetReports",
		       json_object_get(enf, "rulesetReports"), "policies",
		       json_object_get(rec, "policies"), "doctorProbe",
		       json_object_get(enf, "doctorProbe"));
	meta = audit_meta(c);
	json_object_set_new(meta, "evidence", be);
	json_object_set_new(meta, "owned", json_boolean(c->owned));
	if (asprintf(&target, "container:%s", c->vm_name) < 0)
		target = NULL;
	ev = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s*, s:s, s:o}", "actor", "kind", "operator",
		       "id", pw && pw->pw_name ? pw->pw_name : "unknown", "verifiedBy",
		       "self-asserted", "action", "sandbox.boot", "target", target, "decision",
		       "allowed", "meta", meta);
	if (ev)
		audit(c, ev);
}

/* --- options ------------------------------------------------------------------------------- */

static char **split_only(const char *s)
{
	_cleanup_free_ char *copy = strdup(s);
	char **v = calloc(strlen(s) / 2 + 2, sizeof(char *));
	size_t n = 0;

	if (!copy || !v) {
		free(v);
		return NULL;
	}
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		t += strspn(t, " ");
		for (size_t k = strlen(t); k > 0 && t[k - 1] == ' '; k--)
			t[k - 1] = '\0';
		if (*t)
			v[n++] = strdup(t);
	}
	return v;
}

enum {
	O_APP = 0x100,
	O_APP_DIR,
	O_ONLY,
	O_CONTAINER,
	O_BOOT,
	O_NO_BOOT,
	O_WARM,
	O_BOOT_TIMEOUT,
	O_RUNTIME,
	O_RUN_ID,
	O_ENV,
	O_ENV_FILE,
};

static int parse_args(int argc, char **argv, Mcp *c)
{
	static const struct option options[] = {
		{"app", required_argument, NULL, O_APP},
		{"app-dir", required_argument, NULL, O_APP_DIR},
		{"only", required_argument, NULL, O_ONLY},
		{"container", required_argument, NULL, O_CONTAINER},
		{"boot", no_argument, NULL, O_BOOT},
		{"no-boot", no_argument, NULL, O_NO_BOOT},
		{"warm", no_argument, NULL, O_WARM},
		{"boot-timeout", required_argument, NULL, O_BOOT_TIMEOUT},
		{"runtime", required_argument, NULL, O_RUNTIME},
		{"run-id", required_argument, NULL, O_RUN_ID},
		{"env", required_argument, NULL, O_ENV},
		{"env-file", required_argument, NULL, O_ENV_FILE},
		{"help", no_argument, NULL, 'h'},
		{}};
	const char *env = getenv("BERTH_MCP_CALL_TIMEOUT_MS");
	int opt;

	c->app_dir = ".";
	c->boot_timeout_s = BOOT_TIMEOUT_S_DEFAULT;
	c->call_timeout_ms = CALL_TIMEOUT_MS_DEFAULT;
	if (env && parse_uint_range(env, 100, 24 * 3600 * 1000, &c->call_timeout_ms) < 0)
		return log_error("BERTH_MCP_CALL_TIMEOUT_MS must be milliseconds from 100 to "
				 "86400000");
	optind = 0;
	while ((opt = cli_getopt(argc, argv, "", options)) != -1) {
		switch (opt) {
		case O_APP:
			c->app = optarg;
			break;
		case O_APP_DIR:
			c->app_dir = optarg;
			break;
		case O_ONLY:
			strv_free(c->only);
			c->only = split_only(optarg);
			if (!c->only || !c->only[0])
				return cli_usage_error("--only needs a comma-separated list of exports"),
				       -EINVAL;
			break;
		case O_CONTAINER:
			c->container = optarg;
			break;
		case O_BOOT:
			c->no_boot = false;
			break;
		case O_NO_BOOT:
			c->no_boot = true;
			break;
		case O_WARM:
			c->warm = true;
			break;
		case O_BOOT_TIMEOUT:
			if (parse_uint_range(optarg, 1, 3600, &c->boot_timeout_s) < 0)
				return cli_usage_error("--boot-timeout must be seconds from 1 to 3600"),
				       -EINVAL;
			break;
		case O_RUNTIME:
			c->runtime = optarg;
			break;
		case O_RUN_ID:
			if (!attest_run_id_valid(optarg))
				return cli_usage_error("--run-id must be 1-128 of A-Z a-z 0-9 . _ - and "
						       "not start with '.'"),
				       -EINVAL;
			free(c->run_id);
			c->run_id = strdup(optarg);
			break;
		case O_ENV:
			if (vm_launch_add_env(&c->l, optarg) < 0)
				return -EINVAL;
			c->env_given = true;
			break;
		case O_ENV_FILE:
			if (vm_launch_add_env_file(&c->l, optarg) < 0)
				return -EINVAL;
			c->env_given = true;
			break;
		case CLI_OPT_HELP:
			cli_set_help_fd(c->out_fd);
			cli_print_help();
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]), -EINVAL;
	if (!c->app)
		return cli_usage_error("--app NAME is required: the app whose exports to serve"),
		       -EINVAL;
	return 0;
}

static int make_run_id(Mcp *c)
{
	char rnd[7];
	char stamp[32];
	time_t t = time(NULL);
	struct tm tm;

	random_hex(rnd, 3);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (!c->run_id && asprintf(&c->run_id, "mcp-%s-%s-%s", c->l.name, stamp, rnd) < 0)
		return -ENOMEM;
	if (!attest_run_id_valid(c->run_id))
		return log_error("the run id %s is not valid; pass --run-id", c->run_id);
	random_hex(c->bridge, 8);
	return 0;
}

/* A signal while the VM boots: the boot is cut short and what it started is stopped. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	stop_requested = sig;
}

static void catch_stop_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART: waits end */

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* --- the command ---------------------------------------------------------------------------- */

/* The VM booted (or did not): send what waited for it, or tell it why it never will. */
static void on_boot_done(VmLaunch *l, int r, void *userdata)
{
	Mcp *c = userdata;
	Call *waiting[CALLS_MAX];
	size_t n = 0;

	/* Cancelled: the session is ending, and says so for the calls still waiting. */
	if (r == -ECANCELED)
		return;
	for (Call *call = c->calls; call && n < CALLS_MAX; call = call->next)
		if (!call->conn)
			waiting[n++] = call;
	if (r >= 0) {
		say("VM %s ready in %lld ms (boot %s)", l->vm_name, l->boot_ms, l->boot_id);
		r = adopt_own_vm(c);
	} else
		log_error("\"%s\" did not start; see above", l->name);
	if (r < 0) {
		for (size_t i = 0; i < n; i++) {
			_cleanup_free_ char *text = NULL;

			if (asprintf(&text,
				     "\"%s\" was not sent: the VM for \"%s\" did not start. berth "
				     "mcp's standard error (the MCP client's server log) says why.",
				     waiting[i]->tool, c->l.name) < 0)
				text = NULL;
			send_result(c, waiting[i]->id, mcp_text_result(text ?: "not sent", true));
			call_free(waiting[i]);
		}
		c->exit_code = 1;
		stop_serving(c);
		return;
	}
	record_boot(c);
	c->ready = true;
	/* Oldest first: the list is newest first. */
	while (n > 0)
		dispatch_call(waiting[--n]);
}

/* Boot the VM on the loop while it answers initialize and tools/list: a client with a
 * start-up timeout shorter than a boot still gets its session. Run once the loop runs. */
static int on_start_boot(EvSource *s, void *userdata)
{
	Mcp *c = userdata;
	int r = prepare_own(c);

	if (r >= 0)
		r = vm_launch_boot_start(&c->l, c->loop, on_boot_done, c);
	if (r < 0)
		on_boot_done(&c->l, -EIO, c);
	return 0;
}

static int serve(Mcp *c)
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
		int fl = fcntl(STDIN_FILENO, F_GETFL);

		if (fl >= 0)
			(void)fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
		r = ev_add_io(c->loop, NULL, STDIN_FILENO, EPOLLIN, on_stdin, c);
		if (r == -EPERM)
			return log_error("standard input must be a pipe or a socket from an MCP "
					 "client, not a regular file");
	}
	if (r >= 0 && !c->ready)
		r = ev_add_defer(c->loop, NULL, on_start_boot, c);
	if (r < 0)
		return log_error_errno(r, "cannot serve MCP: %m");
	say("serving %s's exports as MCP tools on standard input/output (run %s)%s", c->l.name,
	    c->run_id, c->ready ? "" : "; calls wait for the VM");
	r = ev_loop(c->loop);
	if (vm_launch_booting(&c->l)) {
		say("the session ended during the VM's boot; stopping the VM");
		vm_launch_boot_cancel(&c->l);
	}
	/* Calls still in flight when the session ends may have run (§3.5). */
	while (c->calls) {
		json_auto_t *meta = NULL;

		if (!c->calls->conn) {
			meta = json_pack("{s:b}", "failed", 1);
			audit_call(
				c, c->calls, "unavailable",
				"the session ended before the VM was ready; the call was not sent",
				NULL, meta);
		} else {
			meta = json_pack("{s:b, s:s, s:b}", "failed", 1, "outcome", "unknown",
					 "interrupted", 1);
			audit_call(
				c, c->calls, "allowed",
				"the session ended before the app answered — the call may have run",
				NULL, meta);
		}
		call_free(c->calls);
	}
	return r < 0 ? r : c->exit_code ? -EIO : 0;
}

int cmd_mcp(int argc, char **argv)
{
	Mcp c = {.out_fd = -EBADF,
		 .l.prefix = "", /* the relay prefixes every line */
		 .enforcement = ENFORCEMENT_UNKNOWN,
		 .app_cwd = "/app"};
	const char *capture = getenv("BERTH_AUDIT_CAPTURE_PAYLOADS");
	int r, usage_status = -1;

	/* A client that goes away mid-answer must not kill us before the VM is stopped. */
	signal(SIGPIPE, SIG_IGN);
	catch_stop_signals();
	r = relay_start(&c.out_fd);
	if (r < 0)
		return log_error_errno(r, "cannot set up standard output for MCP: %m"), 1;
	log_setup("berth", LOG_LEVEL_INFO);
	r = parse_args(argc, argv, &c);
	if (r != 0) {
		usage_status = r < 0 ? CLI_EXIT_USAGE : 0;
		goto out;
	}
	c.l.boot_timeout_ms = c.boot_timeout_s * 1000;
	r = vm_launch_load(&c.l, c.app_dir, c.runtime, "berth-mcp-");
	if (r < 0) {
		log_error("couldn't load berth.yml from \"%s\": see above", c.app_dir);
		goto out;
	}
	if (asprintf(&c.manifest_path, "%s/berth.yml", c.l.app_dir) < 0) {
		r = -ENOMEM;
		goto out;
	}
	if (!streq(c.app, c.l.name))
		log_warning("--app %s differs from the name in %s (\"%s\"); serving \"%s\"", c.app,
			    c.manifest_path, c.l.name, c.l.name);
	{
		_cleanup_free_ char *bad = mcp_check_only(c.l.name, c.l.manifest, c.only);

		if (bad) {
			r = log_error("%s", bad);
			goto out;
		}
	}
	r = make_run_id(&c);
	if (r < 0)
		goto out;

	if (!c.warm && find_running(&c) >= 0) {
		r = attach(&c);
		c.ready = r >= 0;
	} else if (c.container && !c.warm)
		r = log_error("no running VM is called %s; see 'berth vm status'", c.container);
	else if (c.no_boot)
		r = log_error("no VM runs \"%s\" and --no-boot was given; start it with 'berth "
			      "dev %s' or drop --no-boot",
			      c.l.name, c.l.app_dir);
	else if (c.warm)
		r = boot_own(&c);
	else
		c.owned = true; /* booted by serve(), in the background */
	if (r < 0)
		goto out;
	if (stop_requested) {
		r = log_error("stopped by signal %d before serving", (int)stop_requested);
		goto out;
	}
	if (c.warm) {
		say("warm: \"%s\" boots; its bundle and the VM artifacts are ready for the next "
		    "session",
		    c.l.name);
		goto out;
	}
	r = audit_sink_open(NULL, capture && streq(capture, "1"), &c.audit);
	if (r < 0)
		log_warning("cannot open the audit trail (%s); tool calls will not be recorded",
			    strerror(-r));
	if (c.ready)
		record_boot(&c);
	r = serve(&c);
out:
	if (c.owned && c.l.vm_name && rundir_inspect(c.l.run_dir, &(pid_t){0}) != RUNDIR_ABSENT) {
		say("stopping the VM %s it booted", c.l.vm_name);
		(void)vm_launch_stop(&c.l);
	}
	ev_loop_free(c.loop);
	audit_sink_free(c.audit);
	vm_launch_done(&c.l);
	strv_free(c.only);
	free(c.run_id);
	free(c.vm_name);
	free(c.run_dir);
	free(c.rpc_socket);
	free(c.manifest_path);
	free(c.client);
	mcp_framing_done(&c.in);
	relay_stop();
	if (usage_status >= 0)
		return usage_status;
	return r < 0 ? 1 : 0;
}
