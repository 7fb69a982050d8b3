/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The terminal's web view on libwebsockets (server.h). One protocol serves the page and
 * the websocket: lws parses HTTP and the websocket framing, and every request reaches
 * on_http() or on_upgrade() first, which check the login before anything is answered.
 * Each websocket has a session: the attach command on a pseudo-terminal whose master lws
 * polls as a raw file (the "berth-pty" protocol), a child of the websocket's wsi so that
 * it goes when the websocket does. Output is read one chunk at a time and only once the
 * previous chunk went out, so a slow browser stalls its own terminal and nothing else.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "fileio.h"
#include "macros.h"
#include "message.h"
#include "pty.h"
#include "server.h"

#define PROTOCOL "berth-terminal"
#define PTY_PROTOCOL "berth-pty"
#define HEADERS_MAX 2048 /* of a response's headers */
#define BODY_CHUNK (16 * 1024)

/* The page's files: the only paths served, each loaded once at start. */
typedef struct Asset {
	const char *path, *file, *type;
	char *data;
	size_t len;
} Asset;

static const char placeholder[] = "<!doctype html><title>Berth terminal</title>\n";

typedef struct ViewSession ViewSession;

struct ViewServer {
	ViewConfig cfg;
	struct lws_context *ctx;
	struct lws_vhost *vhost;
	Asset assets[6];
	unsigned sessions;
};

/* Per connection (lws allocates it): the HTTP response in progress, or the websocket's
 * terminal. */
struct ViewSession {
	ViewServer *server;
	/* HTTP */
	const Asset *asset;
	size_t sent;
	/* websocket */
	bool is_session;
	struct lws *ws, *pty;
	int master;
	pid_t child;
	bool closing; /* the terminal ended: close the websocket once its output is out */
	uint8_t out[LWS_PRE + VIEW_OUTPUT_CHUNK];
	size_t out_len;
	uint8_t *in; /* keys the terminal did not take yet (VIEW_INPUT_PENDING_MAX) */
	size_t in_len;
	ViewAssembler *rx;
};

static ViewServer *server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

/* --- HTTP responses ------------------------------------------------------------------------ */

static int add_header(struct lws *wsi, const char *name, const char *value, unsigned char **p,
		      unsigned char *end)
{
	return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
					   (const unsigned char *)value, (int)strlen(value), p,
					   end);
}

/* What every answer carries: nothing is cached (the page sits behind a login), nothing
 * may frame it (a page could trick a person into typing into the shell), scripts come
 * from here only. */
static int add_common_headers(struct lws *wsi, unsigned char **p, unsigned char *end)
{
	static const char *const h[][2] = {
		{"cache-control:", "no-store"},
		{"x-content-type-options:", "nosniff"},
		{"x-frame-options:", "DENY"},
		{"referrer-policy:", "no-referrer"},
		{"content-security-policy:",
		 "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
		 "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
		 "base-uri 'none'; form-action 'none'"},
	};

	for (size_t i = 0; i < ELEMENTSOF(h); i++)
		if (add_header(wsi, h[i][0], h[i][1], p, end))
			return -1;
	return 0;
}

/* A whole answer with a short text body. Returns what the callback returns: 0 to keep the
 * connection for the next request, -1 to close it. */
static int send_status(struct lws *wsi, unsigned status, const char *body)
{
	uint8_t buf[LWS_PRE + HEADERS_MAX + 512];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	size_t len = strlen(body);

	if (len > 512 ||
	    lws_add_http_common_headers(wsi, status, "text/plain; charset=utf-8", len, &p, end) ||
	    add_common_headers(wsi, &p, end))
		return -1;
	if (status == HTTP_STATUS_UNAUTHORIZED &&
	    add_header(wsi, "www-authenticate:",
		       "Basic realm=\"Berth terminal\", charset=\"UTF-8\"", &p, end))
		return -1;
	if (status == HTTP_STATUS_METHOD_NOT_ALLOWED &&
	    add_header(wsi, "allow:", "GET, HEAD", &p, end))
		return -1;
	if (lws_finalize_http_header(wsi, &p, end) || (size_t)(end - p) < len)
		return -1;
	memcpy(p, body, len);
	p += len;
	if (lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP_HEADERS) != (int)(p - start))
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Copy header @h into @buf (VIEW_HEADER_MAX + 1); false when absent or longer. */
static bool header(struct lws *wsi, enum lws_token_indexes h, char *buf, size_t size, bool *absent)
{
	int n;

	*absent = lws_hdr_total_length(wsi, h) <= 0;
	if (*absent)
		return false;
	n = lws_hdr_copy(wsi, buf, (int)size, h);
	return n >= 0;
}

static bool authorized(struct lws *wsi, const ViewServer *s)
{
	char value[VIEW_HEADER_MAX + 1];
	bool absent;

	if (!header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, value, sizeof(value), &absent))
		return false;
	return view_auth_ok(value, strlen(value), s->cfg.credential);
}

static const Asset *find_asset(const ViewServer *s, const char *path)
{
	for (size_t i = 0; i < ELEMENTSOF(s->assets); i++)
		if (s->assets[i].path && streq(s->assets[i].path, path))
			return &s->assets[i];
	return NULL;
}

static int on_http(struct lws *wsi, ViewSession *pss, const char *uri)
{
	ViewServer *s = server_of(wsi);
	uint8_t buf[LWS_PRE + HEADERS_MAX];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	bool head = lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0;
	const Asset *a;

	/* The login first: nothing, not even whether a path exists, is told without it. */
	if (!authorized(wsi, s))
		return send_status(wsi, HTTP_STATUS_UNAUTHORIZED,
				   "This terminal needs its login: berth dev printed it.\n");
	if (!head && lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) <= 0)
		return send_status(wsi, HTTP_STATUS_METHOD_NOT_ALLOWED, "GET or HEAD only.\n");
	a = find_asset(s, uri ?: "");
	if (!a)
		return send_status(wsi, HTTP_STATUS_NOT_FOUND, "Not found.\n");
	if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, a->type, a->len, &p, end) ||
	    add_common_headers(wsi, &p, end) || lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	if (head)
		return lws_http_transaction_completed(wsi) ? -1 : 0;
	pss->asset = a;
	pss->sent = 0;
	lws_callback_on_writable(wsi);
	return 0;
}

static int on_http_writeable(struct lws *wsi, ViewSession *pss)
{
	uint8_t buf[LWS_PRE + BODY_CHUNK];
	const Asset *a = pss->asset;
	size_t n;
	bool last;

	if (!a)
		return 0;
	n = MIN(a->len - pss->sent, (size_t)BODY_CHUNK);
	last = pss->sent + n == a->len;
	memcpy(buf + LWS_PRE, a->data + pss->sent, n);
	if (lws_write(wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) !=
	    (int)n)
		return -1;
	pss->sent += n;
	if (!last) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	pss->asset = NULL;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* A websocket upgrade: the same login, from this page only, within the cap. Returns 0 to
 * let it proceed, 1 once it was refused with an answer. */
static int on_upgrade(struct lws *wsi, const char *what)
{
	ViewServer *s = server_of(wsi);
	char origin[VIEW_HEADER_MAX + 1], host[VIEW_HEADER_MAX + 1];
	bool no_origin, no_host, origin_read, host_read;

	if (!what || !streq(what, "websocket"))
		return send_status(wsi, HTTP_STATUS_FORBIDDEN, "Websockets only.\n") < 0 ? -1 : 1;
	if (!authorized(wsi, s))
		return send_status(wsi, HTTP_STATUS_UNAUTHORIZED,
				   "This terminal needs its login: berth dev printed it.\n") < 0
			       ? -1
			       : 1;
	origin_read = header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin), &no_origin);
	host_read = header(wsi, WSI_TOKEN_HOST, host, sizeof(host), &no_host);
	if ((!no_origin && !origin_read) || (!no_host && !host_read) ||
	    !view_origin_ok(no_origin ? NULL : origin, no_host ? NULL : host))
		return send_status(wsi, HTTP_STATUS_FORBIDDEN,
				   "A websocket from another site's page is refused.\n") < 0
			       ? -1
			       : 1;
	if (s->sessions >= s->cfg.max_clients)
		return send_status(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE,
				   "Too many browser tabs show this terminal; close one.\n") < 0
			       ? -1
			       : 1;
	return 0;
}

/* --- the websocket's terminal ---------------------------------------------------------- */

static void session_end(ViewSession *pss)
{
	if (pss->pty)
		lws_set_opaque_user_data(pss->pty, NULL);
	pss->pty = NULL;
	/* The tmux client detaches on a hangup; the shell it shows goes on. */
	if (pss->child > 0)
		(void)kill(pss->child, SIGHUP);
	pss->child = 0;
	free(pss->in);
	pss->in = NULL;
	pss->in_len = 0;
	free(pss->rx);
	pss->rx = NULL;
}

static int on_established(struct lws *wsi, ViewSession *pss)
{
	ViewServer *s = server_of(wsi);
	lws_sock_file_fd_type fd;
	int r;

	*pss = (ViewSession){.server = s, .is_session = true, .ws = wsi, .master = -EBADF};
	pss->rx = malloc(sizeof(*pss->rx));
	if (!pss->rx)
		return -1;
	pss->rx->len = 0;
	pss->rx->complete = false;
	s->sessions++;
	if (!s->cfg.attach_argv)
		return 0;
	r = view_pty_spawn(s->cfg.attach_argv, s->cfg.attach_envp, 80, 24, &pss->master,
			   &pss->child);
	if (r < 0) {
		lwsl_err("cannot start %s on a terminal: %s\n", s->cfg.attach_argv[0],
			 strerror(-r));
		return -1;
	}
	fd.filefd = pss->master;
	pss->pty = lws_adopt_descriptor_vhost(s->vhost, LWS_ADOPT_RAW_FILE_DESC, fd, PTY_PROTOCOL,
					      wsi);
	if (!pss->pty) {
		/* lws closed the descriptor. */
		pss->master = -EBADF;
		return -1;
	}
	lws_set_opaque_user_data(pss->pty, pss);
	return 0;
}

/* Keys to the terminal: what it does not take now waits, and the websocket stops being
 * read until it is taken. */
static int write_keys(ViewSession *pss, const uint8_t *data, size_t len)
{
	ssize_t n = 0;

	if (pss->master < 0 || len == 0)
		return 0;
	if (pss->in_len == 0) {
		n = write(pss->master, data, len);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n < 0)
			n = 0;
	}
	if ((size_t)n == len)
		return 0;
	if (!pss->in && !(pss->in = malloc(VIEW_INPUT_PENDING_MAX)))
		return -1;
	/* A page that sends faster than the terminal reads, past the cap: it is not a person
	 * typing. */
	if (len - (size_t)n > VIEW_INPUT_PENDING_MAX - pss->in_len)
		return -1;
	memcpy(pss->in + pss->in_len, data + n, len - (size_t)n);
	pss->in_len += len - (size_t)n;
	lws_rx_flow_control(pss->ws, 0);
	if (pss->pty)
		lws_callback_on_writable(pss->pty);
	return 0;
}

static int on_message(ViewSession *pss)
{
	ViewMessage m;

	if (view_message_parse(pss->rx->buf, pss->rx->len, &m) < 0) {
		lws_close_reason(pss->ws, LWS_CLOSE_STATUS_POLICY_VIOLATION, NULL, 0);
		return -1;
	}
	switch (m.kind) {
	case VIEW_MESSAGE_INPUT:
		return write_keys(pss, m.data, m.len);
	case VIEW_MESSAGE_RESIZE:
		if (pss->master >= 0)
			(void)view_pty_resize(pss->master, m.cols, m.rows);
		return 0;
	case _VIEW_MESSAGE_KIND_MAX:
	case _VIEW_MESSAGE_KIND_INVALID:
		break;
	}
	return -1;
}

static int on_receive(struct lws *wsi, ViewSession *pss, const void *in, size_t len)
{
	bool final = lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0;
	int r;

	if (!pss->rx)
		return -1;
	r = view_assembler_add(pss->rx, in, len, final);
	if (r == -EMSGSIZE) {
		lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, NULL, 0);
		return -1;
	}
	return r == 1 ? on_message(pss) : 0;
}

static int on_ws_writeable(struct lws *wsi, ViewSession *pss)
{
	if (pss->out_len > 0) {
		if (lws_write(wsi, pss->out + LWS_PRE, pss->out_len, LWS_WRITE_BINARY) <
		    (int)pss->out_len)
			return -1;
		pss->out_len = 0;
		if (pss->pty)
			lws_rx_flow_control(pss->pty, 1);
	}
	if (pss->closing) {
		lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
		return -1;
	}
	return 0;
}

/* The terminal has output: one chunk, then wait until the browser took it. */
static int on_pty_readable(struct lws *wsi, ViewSession *pss)
{
	ssize_t n;

	if (pss->out_len > 0) {
		lws_rx_flow_control(wsi, 0);
		return 0;
	}
	n = read(pss->master, pss->out + LWS_PRE, VIEW_OUTPUT_CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		/* EIO: the attach command ended and closed the terminal. */
		pss->closing = true;
		lws_callback_on_writable(pss->ws);
		return -1;
	}
	pss->out_len = (size_t)n;
	lws_rx_flow_control(wsi, 0);
	lws_callback_on_writable(pss->ws);
	return 0;
}

static int on_pty_writeable(ViewSession *pss)
{
	ssize_t n;

	if (pss->in_len == 0)
		return 0;
	n = write(pss->master, pss->in, pss->in_len);
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		return -1;
	if (n > 0) {
		memmove(pss->in, pss->in + n, pss->in_len - (size_t)n);
		pss->in_len -= (size_t)n;
	}
	if (pss->in_len > 0)
		lws_callback_on_writable(pss->pty);
	else
		lws_rx_flow_control(pss->ws, 1);
	return 0;
}

static int on_pty(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		  size_t len)
{
	ViewSession *pss = lws_get_opaque_user_data(wsi);

	/* lws has some hundred reasons; these are the ones that matter here. */
	switch ((int)reason) {
	case LWS_CALLBACK_RAW_RX_FILE:
		return pss ? on_pty_readable(wsi, pss) : -1;
	case LWS_CALLBACK_RAW_WRITEABLE_FILE:
		return pss ? on_pty_writeable(pss) : -1;
	case LWS_CALLBACK_RAW_CLOSE_FILE:
		if (pss) {
			pss->pty = NULL;
			pss->master = -EBADF;
			pss->closing = true;
			lws_callback_on_writable(pss->ws);
		}
		return 0;
	default:
		return 0;
	}
}

static int on_view(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		   size_t len)
{
	ViewSession *pss = user;

	/* lws has some hundred reasons; these are the ones that matter here. */
	switch ((int)reason) {
	case LWS_CALLBACK_HTTP:
		return on_http(wsi, pss, in);
	case LWS_CALLBACK_HTTP_WRITEABLE:
		return on_http_writeable(wsi, pss);
	case LWS_CALLBACK_HTTP_BODY:
		/* No request has a body worth reading: it is dropped. */
		return 0;
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return on_upgrade(wsi, in);
	case LWS_CALLBACK_ESTABLISHED:
		return on_established(wsi, pss);
	case LWS_CALLBACK_RECEIVE:
		return on_receive(wsi, pss, in, len);
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return on_ws_writeable(wsi, pss);
	case LWS_CALLBACK_CLOSED:
		if (pss && pss->is_session) {
			pss->server->sessions--;
			session_end(pss);
			pss->is_session = false;
		}
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

static const struct lws_protocols protocols[] = {
	{PROTOCOL, on_view, sizeof(ViewSession), 4096, 0, NULL, 0},
	{PTY_PROTOCOL, on_pty, 0, 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

/* A browser tab that went away without closing is noticed and dropped. */
static const lws_retry_bo_t keepalive = {
	.secs_since_valid_ping = 30,
	.secs_since_valid_hangup = 60,
};

/* --- the server --------------------------------------------------------------------------- */

static int load_assets(ViewServer *s, char *err, size_t errlen)
{
	static const Asset table[] = {
		{"/", "index.html", "text/html; charset=utf-8", NULL, 0},
		{"/terminal.js", "terminal.js", "text/javascript; charset=utf-8", NULL, 0},
		{"/terminal.css", "terminal.css", "text/css; charset=utf-8", NULL, 0},
		{"/xterm.js", "xterm.js", "text/javascript; charset=utf-8", NULL, 0},
		{"/xterm.css", "xterm.css", "text/css; charset=utf-8", NULL, 0},
		{"/addon-fit.js", "addon-fit.js", "text/javascript; charset=utf-8", NULL, 0},
	};

	static_assert(ELEMENTSOF(table) == ELEMENTSOF(((ViewServer *)NULL)->assets),
		      "one slot per file");
	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		_cleanup_free_ char *path = NULL;
		Asset *a = &s->assets[i];
		int r;

		*a = table[i];
		if (!s->cfg.assets_dir) {
			/* Tests: one placeholder page, the rest absent. */
			if (i > 0) {
				a->path = NULL;
				continue;
			}
			a->data = strdup(placeholder);
			a->len = strlen(placeholder);
			if (!a->data)
				return -ENOMEM;
			continue;
		}
		if (asprintf(&path, "%s/%s", s->cfg.assets_dir, a->file) < 0)
			return -ENOMEM;
		r = read_full_file(path, VIEW_ASSET_MAX, &a->data, &a->len);
		if (r < 0) {
			snprintf(err, errlen, "cannot read %s, a file of the web view: %s", path,
				 strerror(-r));
			return r;
		}
	}
	return 0;
}

static void log_line(int level, const char *line)
{
	size_t n = strlen(line);

	fprintf(stderr, "[terminal-view] %.*s\n", (int)(n && line[n - 1] == '\n' ? n - 1 : n),
		line);
}

int view_server_new(const ViewConfig *c, ViewServer **ret, char *err, size_t errlen)
{
	struct lws_context_creation_info info = {};
	ViewServer *s;
	int r;

	if (!view_credential_valid(c->credential, c->credential ? strlen(c->credential) : 0)) {
		snprintf(err, errlen, "no valid login: expected berth:<secret of base64url>");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *c;
	if (s->cfg.max_clients == 0)
		s->cfg.max_clients = VIEW_CLIENTS_MAX;
	r = load_assets(s, err, errlen);
	if (r < 0) {
		view_server_free(s);
		return r;
	}
	lws_set_log_level(LLL_ERR | LLL_WARN, log_line);
	/* 127.0.0.1 and nothing else: the host reaches it through berth-init's relay. */
	info.iface = "127.0.0.1";
	info.port = c->port > 0 ? c->port : CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.options = LWS_SERVER_OPTION_DISABLE_IPV6 | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
	info.user = s;
	info.server_string = "berth-terminal-view";
	/* Caps on what a peer makes the server hold: headers, connections, idle time. */
	info.max_http_header_data = 4096;
	info.max_http_header_pool = 16;
	info.fd_limit_per_thread = 64;
	info.timeout_secs = 10;
	info.keepalive_timeout = 10;
	info.timeout_secs_ah_idle = 10;
	info.retry_and_idle_policy = &keepalive;
	info.gid = -1;
	info.uid = -1;
	s->ctx = lws_create_context(&info);
	if (!s->ctx) {
		snprintf(err, errlen, "cannot start libwebsockets");
		view_server_free(s);
		return -ENOMEM;
	}
	s->vhost = lws_create_vhost(s->ctx, &info);
	if (!s->vhost) {
		snprintf(err, errlen, "cannot listen on 127.0.0.1:%d (is it taken?)", c->port);
		view_server_free(s);
		return -EADDRINUSE;
	}
	*ret = s;
	return 0;
}

ViewServer *view_server_free(ViewServer *s)
{
	if (!s)
		return NULL;
	if (s->ctx)
		lws_context_destroy(s->ctx);
	for (size_t i = 0; i < ELEMENTSOF(s->assets); i++)
		free(s->assets[i].data);
	free(s);
	return NULL;
}

int view_server_service(ViewServer *s, int timeout_ms)
{
	return lws_service(s->ctx, timeout_ms);
}

int view_server_run(ViewServer *s, volatile sig_atomic_t *stop)
{
	while (!*stop)
		if (lws_service(s->ctx, 0) < 0)
			return -EIO;
	return 0;
}

void view_server_wake(ViewServer *s)
{
	lws_cancel_service(s->ctx);
}

int view_server_adopt(ViewServer *s, int fd)
{
	lws_sock_file_fd_type desc = {.sockfd = fd};

	return lws_adopt_descriptor_vhost(s->vhost, LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP, desc,
					  PROTOCOL, NULL)
		       ? 0
		       : -EIO;
}

unsigned view_server_sessions(const ViewServer *s)
{
	return s->sessions;
}
