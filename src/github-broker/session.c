/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "http-head.h"
#include "routes.h"
#include "rules.h"
#include "session.h"
#include "tls.h"

#define IO_BUF_SIZE (64 * 1024)
#define LINGER_MS 1000

void broker_log(const char *fmt, ...)
{
	char buf[BROKER_LOG_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = MIN(n, (int)sizeof(buf) - 2);
	buf[n++] = '\n';
	dprintf(STDERR_FILENO, BROKER_LOG_PREFIX "%.*s", n, buf);
}

void broker_log_json(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s)
		broker_log("%s", s);
	free(s);
	json_decref(o);
}

/* At most BROKER_LOG_PATH_MAX bytes of @path for a log line, with control bytes as '?'
 * (a target holds none, but a log line must never be split by one). */
static void log_path(char *out, size_t size, const char *path)
{
	size_t n = 0, max = MIN(size - 1, (size_t)BROKER_LOG_PATH_MAX);

	for (; path && *path && n < max; path++)
		out[n++] = ((unsigned char)*path < 0x20 || *path == 0x7f) ? '?' : *path;
	out[n] = '\0';
}

static void log_decision(bool allowed, const char *method, const char *path, const char *req)
{
	char shown[BROKER_LOG_PATH_MAX + 1];

	log_path(shown, sizeof(shown), path);
	broker_log_json(json_pack("{s:s, s:s, s:s, s:s}", "event", allowed ? "allowed" : "denied",
				  "method", method, "path", shown, "requested", req));
}

static void set_timeout(int fd, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int send_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int ssl_write_all(SSL *ssl, const char *data, size_t len)
{
	while (len > 0) {
		int n = SSL_write(ssl, data, (int)MIN(len, (size_t)IO_BUF_SIZE));

		if (n <= 0)
			return -EIO;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Closing with unread input resets the connection and can lose what was just written:
 * half-close, and read what is left for a moment. */
static void linger_close(int fd)
{
	char sink[4096];

	(void)shutdown(fd, SHUT_WR);
	set_timeout(fd, LINGER_MS);
	for (int i = 0; i < 64 && recv(fd, sink, sizeof(sink), 0) > 0; i++)
		;
	close(fd);
}

static const char *reason_of(int status)
{
	switch (status) {
	case 200:
		return "Connection Established";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

/* Before the tunnel: plain text, and for a CONNECT the bare status line (as SPEC 6.1/6.2
 * answer a refused CONNECT). */
static void reply_plain(int fd, int status, const char *text)
{
	char head[256];
	int n;

	if (text)
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			     status, reason_of(status), strlen(text));
	else
		n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n\r\n", status, reason_of(status));
	if (send_all(fd, head, (size_t)n) == 0 && text)
		(void)send_all(fd, text, strlen(text));
}

/* Inside the tunnel: a JSON body, as GitHub's own errors are. */
static void reply_json(SSL *ssl, int status, const char *body)
{
	char head[256];
	const char *b = body ?: "{\"message\":\"the GitHub broker ran out of memory\"}";
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, reason_of(status), strlen(b));

	if (ssl_write_all(ssl, head, (size_t)n) == 0)
		(void)ssl_write_all(ssl, b, strlen(b));
}

static void reply_message(SSL *ssl, int status, const char *fmt, ...) _printf_(3, 4);
static void reply_message(SSL *ssl, int status, const char *fmt, ...)
{
	char text[1024];
	json_t *o;
	char *body;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	o = json_pack("{s:s}", "message", text);
	body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	reply_json(ssl, status, body);
	free(body);
}

/* --- the CONNECT ------------------------------------------------------------------------ */

typedef struct Session {
	const BrokerConfig *cfg;
	int cfd, ufd;
	SSL *client, *upstream; /* the app's side (we are the server), GitHub's side */
	char buf[HTTP_HEAD_MAX];
	size_t len;
	HttpRequest req;
	GithubRoute route;
} Session;

static void session_done(Session *s)
{
	SSL_free(s->client);
	SSL_free(s->upstream);
	safe_close(s->ufd);
	http_request_done(&s->req);
	github_route_done(&s->route);
}

/* Read the CONNECT head; the bytes after it (a TLS hello) stay in s->buf. */
static bool read_connect(Session *s)
{
	char err[256] = "", host[EGRESS_HOST_MAX + 3];
	HttpHeadStatus st = HTTP_HEAD_INCOMPLETE;

	while (st == HTTP_HEAD_INCOMPLETE) {
		ssize_t n = recv(s->cfd, s->buf + s->len, sizeof(s->buf) - s->len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			reply_plain(s->cfd, 400, "bad request: the request head did not arrive in time");
			return false;
		}
		if (n <= 0)
			return false;
		s->len += (size_t)n;
		st = http_request_parse(s->buf, s->len, &s->req, err, sizeof(err));
	}
	/* Anything but CONNECT, parsed or not, gets SPEC 6.2's one answer. */
	if (!strneq(s->buf, "CONNECT ", 8) || (st == HTTP_HEAD_OK && !s->req.connect)) {
		reply_plain(s->cfd, 400, "this broker only accepts CONNECT requests");
		return false;
	}
	if (st == HTTP_HEAD_TOO_LARGE) {
		reply_plain(s->cfd, 431, NULL);
		return false;
	}
	if (st != HTTP_HEAD_OK) {
		reply_plain(s->cfd, 400, NULL);
		return false;
	}
	snprintf(host, sizeof(host), "%s", s->req.host);
	if (egress_host_normalize(host) != EGRESS_HOST_NAME || !streq(host, GITHUB_API_HOST) ||
	    s->req.port != GITHUB_API_PORT) {
		char shown[BROKER_LOG_PATH_MAX + 1];

		log_path(shown, sizeof(shown), host);
		broker_log_json(json_pack("{s:s, s:s, s:i}", "event", "connect_denied", "host",
					  shown, "port", (int)s->req.port));
		reply_plain(s->cfd, 403, NULL);
		return false;
	}
	return true;
}

/* The app's TLS, answered with the leaf for api.github.com. */
static bool accept_tls(Session *s)
{
	static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	size_t head = s->req.head_size;
	char why[256];
	int r;

	if (send_all(s->cfd, ok, sizeof(ok) - 1) < 0)
		return false;
	s->client = tls_server_new(s->cfg->server, s->cfd, s->buf + head, s->len - head);
	if (!s->client)
		return false;
	r = SSL_accept(s->client);
	if (r != 1) {
		/* Most often an app that was not told to trust the broker's CA. */
		broker_log_json(json_pack("{s:s, s:s}", "event", "client_tls_failed", "reason",
					  tls_error(s->client, r, why, sizeof(why))));
		return false;
	}
	return true;
}

/* --- the request inside the tunnel ------------------------------------------------------- */

static bool read_request(Session *s)
{
	char err[256] = "";
	HttpHeadStatus st = HTTP_HEAD_INCOMPLETE;

	http_request_done(&s->req);
	s->len = 0;
	while (st == HTTP_HEAD_INCOMPLETE) {
		int n = SSL_read(s->client, s->buf + s->len, (int)(sizeof(s->buf) - s->len));

		if (n <= 0)
			return false;
		s->len += (size_t)n;
		st = http_origin_request_parse(s->buf, s->len, &s->req, err, sizeof(err));
	}
	switch (st) {
	case HTTP_HEAD_OK:
		return true;
	case HTTP_HEAD_TOO_LARGE:
		reply_message(s->client, 431,
			      "bad request: the request head is over %d bytes or %d header lines",
			      HTTP_HEAD_MAX, HTTP_HEADERS_MAX);
		return false;
	case HTTP_HEAD_BAD_REQUEST:
	case HTTP_HEAD_NOT_ABSOLUTE:
	case HTTP_HEAD_INCOMPLETE:
	case _HTTP_HEAD_STATUS_MAX:
		break;
	}
	broker_log_json(json_pack("{s:s, s:s}", "event", "bad_request", "reason", err));
	reply_message(s->client, 400, "bad request: %s", err);
	return false;
}

/* Classify and decide (SPEC 6.2); one log line either way. True when allowed. */
static bool decide(Session *s)
{
	const char *method = s->req.method, *target = s->req.path;
	char *body;
	int r = github_route_classify(method, target, &s->route);

	if (r == -ENOMEM) {
		reply_json(s->client, 503, NULL);
		return false;
	}
	if (r < 0) {
		log_decision(false, method, target, "(no route)");
		body = github_denial_no_route(method, target);
		reply_json(s->client, 403, body);
		free(body);
		return false;
	}
	if (!github_policy_allows(s->cfg->policy, s->route.requested)) {
		log_decision(false, method, s->route.path, s->route.requested);
		body = github_denial_not_covered(s->route.requested);
		reply_json(s->client, 403, body);
		free(body);
		return false;
	}
	log_decision(true, method, s->route.path, s->route.requested);
	return true;
}

/* --- upstream ------------------------------------------------------------------------- */

/* The dialer said no: its code says how, its text why (docs/egress.md). */
static void dial_refused(Session *s, const char *code, const char *error)
{
	char why[512];
	int status = streq(code, "denied") ? 403 : streq(code, "busy") ? 503 : 502;

	log_path(why, sizeof(why), error ?: "no reason given");
	broker_log_json(json_pack("{s:s, s:s, s:i, s:s, s:s}", "event", "dial_refused", "host",
				  GITHUB_API_HOST, "port", GITHUB_API_PORT, "code", code, "error",
				  why));
	reply_message(s->client, status, "%s", why);
}

/* One tunnel to api.github.com:443 through the dial socket; what the dialer sent after its
 * reply line is left in @pending. */
static bool dial(Session *s, char *pending, size_t *n_pending)
{
	static const char line[] = "{\"op\":\"dial\",\"host\":\"" GITHUB_API_HOST "\",\"port\":443}\n";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char reply[BROKER_DIAL_REPLY_MAX];
	size_t len = 0;
	char *nl = NULL;
	json_t *o;
	bool ok;

	s->ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->cfg->dial_path);
	if (s->ufd < 0 || connect(s->ufd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		reply_message(s->client, 502,
			      "the GitHub broker cannot reach the host dialer (%s)", strerror(errno));
		return false;
	}
	set_timeout(s->ufd, BROKER_DIAL_TIMEOUT_MS);
	if (send_all(s->ufd, line, sizeof(line) - 1) < 0) {
		reply_message(s->client, 502, "the host dialer is not available");
		return false;
	}
	while (!nl && len < sizeof(reply)) {
		ssize_t n = recv(s->ufd, reply + len, sizeof(reply) - len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno == EAGAIN)
				reply_message(s->client, 504,
					      "the host dialer did not answer within %d s",
					      BROKER_DIAL_TIMEOUT_MS / 1000);
			else
				reply_message(s->client, 502, "the host dialer is not available");
			return false;
		}
		len += (size_t)n;
		nl = memchr(reply, '\n', len);
	}
	o = nl ? json_loadb(reply, (size_t)(nl - reply), JSON_REJECT_DUPLICATES, NULL) : NULL;
	ok = json_is_true(json_object_get(o, "ok"));
	if (!ok && json_is_false(json_object_get(o, "ok")) &&
	    json_string_value(json_object_get(o, "code")))
		dial_refused(s, json_string_value(json_object_get(o, "code")),
			     json_string_value(json_object_get(o, "error")));
	else if (!ok)
		reply_message(s->client, 502, "the host dialer sent a malformed reply");
	json_decref(o);
	if (!ok)
		return false;
	*n_pending = len - (size_t)(nl - reply) - 1;
	memcpy(pending, nl + 1, *n_pending);
	return true;
}

static bool connect_upstream(Session *s)
{
	char pending[BROKER_DIAL_REPLY_MAX], why[256];
	size_t n_pending = 0;
	int r;

	if (!dial(s, pending, &n_pending))
		return false;
	set_timeout(s->ufd, s->cfg->idle_timeout_ms);
	s->upstream = tls_client_new(s->cfg->client, s->ufd, GITHUB_API_HOST, pending, n_pending);
	if (!s->upstream) {
		reply_json(s->client, 503, NULL);
		return false;
	}
	r = SSL_connect(s->upstream);
	if (r != 1) {
		tls_error(s->upstream, r, why, sizeof(why));
		broker_log_json(json_pack("{s:s, s:s, s:s}", "event", "upstream_tls_failed",
					  "host", GITHUB_API_HOST, "reason", why));
		reply_message(
			s->client, 502,
			"the GitHub broker refused the connection to %s: %s; nothing was sent there",
			GITHUB_API_HOST, why);
		return false;
	}
	return true;
}

/* The head as it goes to GitHub (the normalised path, the broker's credential in place of
 * whatever the app sent), then the body as the app frames it. */
static bool forward_request(Session *s)
{
	static const char *const drop[] = {"authorization", NULL};
	_cleanup_free_ char *auth = NULL, *head = NULL;
	const char *rest = s->buf + s->req.head_size;
	size_t rest_len = s->len - s->req.head_size;
	HttpBody body;
	ssize_t n;

	if (s->cfg->token && asprintf(&auth, "Authorization: Bearer %s\r\n", s->cfg->token) < 0)
		return false;
	n = http_request_forward(&s->req,
				 &(HttpForward){.host = GITHUB_API_HOST,
						.path = s->route.path,
						.drop = drop,
						.extra = auth},
				 &head);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	if (n < 0)
		return false;
	if (ssl_write_all(s->upstream, head, (size_t)n) < 0)
		return false;
	explicit_bzero(head, (size_t)n);
	http_body_init(&body, &s->req);
	for (;;) {
		ssize_t took = http_body_feed(&body, rest, rest_len);

		if (took < 0 || ssl_write_all(s->upstream, rest, (size_t)took) < 0)
			return false;
		if (http_body_done(&body))
			return true;
		/* What follows the body is not sent: one request per connection. */
		int m = SSL_read(s->client, s->buf, sizeof(s->buf));

		if (m <= 0)
			return false;
		rest = s->buf;
		rest_len = (size_t)m;
	}
}

/* GitHub's response to the app: its head with "Connection: close", then the rest as it
 * comes, until GitHub closes. */
static void relay_response(Session *s)
{
	_cleanup_free_ char *buf = malloc(HTTP_RESPONSE_HEAD_MAX);
	size_t len = 0;
	bool head_done = false, clean = false;
	char why[256];

	if (!buf)
		return;
	while (!head_done) {
		int n = SSL_read(s->upstream, buf + len, (int)(HTTP_RESPONSE_HEAD_MAX - len));
		size_t used = 0;

		if (n <= 0) {
			broker_log_json(json_pack("{s:s, s:s}", "event", "upstream_failed", "reason",
						  tls_error(s->upstream, n, why, sizeof(why))));
			reply_message(s->client, 502, "api.github.com closed the connection before it answered");
			return;
		}
		len += (size_t)n;
		/* 1xx heads pass first; the final one ends the loop. */
		while (!head_done) {
			_cleanup_free_ char *head = NULL;
			size_t head_len, consumed;
			int status;
			HttpHeadStatus st = http_response_head_close(buf + used, len - used, &head,
								     &head_len, &consumed, &status);

			if (st == HTTP_HEAD_INCOMPLETE)
				break;
			if (st != HTTP_HEAD_OK || status == 101) {
				broker_log_json(json_pack("{s:s, s:s}", "event", "upstream_failed",
							  "reason", "a malformed response head"));
				reply_message(s->client, 502,
					      "api.github.com sent a response the broker cannot read");
				return;
			}
			if (ssl_write_all(s->client, head, head_len) < 0)
				return;
			used += consumed;
			head_done = status >= 200;
		}
		memmove(buf, buf + used, len - used);
		len -= used;
	}
	if (len > 0 && ssl_write_all(s->client, buf, len) < 0)
		return;
	for (;;) {
		int n = SSL_read(s->upstream, buf, HTTP_RESPONSE_HEAD_MAX);

		if (n <= 0) {
			clean = SSL_get_error(s->upstream, n) == SSL_ERROR_ZERO_RETURN;
			break;
		}
		if (ssl_write_all(s->client, buf, (size_t)n) < 0)
			return;
	}
	/* An upstream that ended without close_notify may have been cut short: the app's TLS
	 * ends the same way, so it can tell. */
	if (clean)
		(void)SSL_shutdown(s->client);
	else
		SSL_set_quiet_shutdown(s->client, 1);
}

void session_run(const BrokerConfig *cfg, int fd)
{
	_cleanup_(session_done) Session s = {.cfg = cfg, .cfd = fd, .ufd = -EBADF};

	set_timeout(fd, cfg->head_timeout_ms);
	if (!read_connect(&s) || !accept_tls(&s)) {
		linger_close(fd);
		return;
	}
	if (read_request(&s) && decide(&s)) {
		set_timeout(fd, cfg->idle_timeout_ms);
		if (connect_upstream(&s)) {
			if (forward_request(&s))
				relay_response(&s);
			linger_close(fd);
			return;
		}
	}
	(void)SSL_shutdown(s.client);
	linger_close(fd);
}
