/* SPDX-License-Identifier: Apache-2.0 */
/*
 * egress-broker: the egress app's only way out of the VM (SPEC 6.1, 6.3).
 *
 * An HTTP proxy on 127.0.0.1:8090 for CONNECT and for plain-HTTP requests with an absolute
 * URI. It checks each target against the host patterns of the egress app's capabilities
 * and refuses internal IPv4 literals, but it never resolves a name nor opens a TCP
 * connection itself: the guest has no network device. For every request it lets through
 * it connects to the dial socket (berth-init bridges each connection to a channel stream
 * to berth-vmm's dialer, which checks the target again against its own allowlist, resolves
 * it and connects), sends one dial line, and reads one reply line:
 *
 *     -> {"op":"dial","host":"example.com","port":443}
 *     <- {"ok":true,"address":"93.184.215.14"}                 then raw bytes both ways
 *     <- {"ok":false,"code":"denied|unresolved|unreachable|busy|bad_request","error":"..."}
 *
 * It runs under agent-init as uid 9002: it may bind TCP 8090, connect to no TCP port, and
 * write only under /tmp/berth-egress. See docs/egress.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "evloop.h"
#include "flow.h"
#include "http-head.h"
#include "macros.h"
#include "parse-util.h"
#include "rules.h"

#define LOG_PREFIX "[egress-broker] "
#define POLICY_DEFAULT "/run/berth/egress/policy.json"
#define DIAL_SOCKET_DEFAULT "/run/berth/egress/dial.sock"
#define PORT_DEFAULT 8090
#define CONNS_MAX_DEFAULT 64
#define CONNS_MAX_LIMIT 1024
#define CONNS_OVERFLOW 16 /* accepted past the cap only to be refused */
#define BUF_SIZE (64 * 1024)
#define DIAL_REPLY_MAX 4096
#define HEAD_TIMEOUT_MS_DEFAULT 10000
#define DIAL_TIMEOUT_MS 30000 /* the dialer resolves (5 s) and connects (10 s) */
#define IDLE_TIMEOUT_MS_DEFAULT (300 * 1000)
#define REPLY_TIMEOUT_MS 5000
#define ERROR_TEXT_MAX 512 /* of the dialer's error text, in a reply and a log line */

typedef struct Broker Broker;

typedef enum ConnState {
	CONN_HEAD,   /* reading the request head */
	CONN_DIAL,   /* dial line sent (or being sent), waiting for the reply line */
	CONN_TUNNEL, /* bytes both ways */
	CONN_REPLY,  /* writing a refusal, then closing */
	CONN_LINGER, /* refusal written: read what the app still sends, briefly, then close */
	_CONN_STATE_MAX,
} ConnState;

typedef struct Conn Conn;
struct Conn {
	Broker *broker;
	Conn *prev, *next;
	ConnState state;
	int cfd, dfd; /* the app's connection, the dial socket */
	EvSource *csrc, *dsrc, *timer;
	char head[HTTP_HEAD_MAX];
	size_t head_len;
	HttpRequest req;
	char host[EGRESS_HOST_MAX + 3];
	char reply[DIAL_REPLY_MAX];
	size_t reply_len;
	/* app -> dialer, dialer -> app; c2d.shut is the half-close passed on to dfd, d2c.shut
	 * the one passed on to cfd. */
	Flow c2d, d2c;
	HttpBody body;
};

struct Broker {
	EvLoop *loop;
	EgressRules rules;
	const char *dial_path;
	int listen_fd;
	unsigned n_conns, max_conns;
	uint64_t head_timeout, idle_timeout;
	Conn *conns;
};

static _printf_(1, 2) void say(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = MIN(n, (int)sizeof(buf) - 2);
	buf[n++] = '\n';
	dprintf(STDERR_FILENO, LOG_PREFIX "%.*s", n, buf);
}

/* One JSON log line; @o is consumed. */
static void say_json(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s)
		say("%s", s);
	free(s);
	json_decref(o);
}

static void log_navigate(const char *host, unsigned port, bool allowed)
{
	say_json(json_pack("{s:s, s:s, s:i, s:b}", "event",
			   allowed ? "navigate_allowed" : "navigate_denied", "host", host, "port",
			   (int)port, "viaUpstreamProxy", 0));
}

/* At most @size - 1 bytes of @in with control characters (CR and LF above all) made '?':
 * what a reply body and a log line may take from a peer. */
static void sanitize(char *out, size_t size, const char *in)
{
	size_t n = 0;

	for (; in && *in && n + 1 < size; in++)
		out[n++] = ((unsigned char)*in < 0x20 || *in == 0x7f) ? '?' : *in;
	out[n] = '\0';
}

/* ---- connections ---- */

static void conn_free(Conn *c)
{
	Broker *b = c->broker;

	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	b->n_conns--;
	ev_source_free(c->csrc);
	ev_source_free(c->dsrc);
	ev_source_free(c->timer);
	safe_close(c->cfd);
	safe_close(c->dfd);
	http_request_done(&c->req);
	flow_done(&c->c2d);
	flow_done(&c->d2c);
	free(c);
}

static void conn_deadline(Conn *c, uint64_t usec)
{
	(void)ev_source_set_time_relative(c->timer, usec);
	(void)ev_source_set_enabled(c->timer, EV_ONESHOT);
}

/* Cannot fail: both buffers are allocated when the connection is accepted, and what the
 * broker queues itself (a dial line, a reply, a head) fits; a peer's bytes are clipped to
 * the room there is, as the callers ask for no more. */
static void buf_put(Flow *f, const void *data, size_t len)
{
	(void)flow_put(f, data, len);
}

static void conn_update(Conn *c)
{
	uint32_t cev = 0, dev = 0;

	switch (c->state) {
	case CONN_HEAD:
		cev = EPOLLIN;
		break;
	case CONN_DIAL:
		dev = flow_wants_write(&c->c2d) ? EPOLLOUT : EPOLLIN;
		break;
	case CONN_TUNNEL:
		if (flow_wants_read(&c->c2d))
			cev |= EPOLLIN;
		if (flow_wants_write(&c->d2c))
			cev |= EPOLLOUT;
		if (flow_wants_read(&c->d2c))
			dev |= EPOLLIN;
		if (flow_wants_write(&c->c2d))
			dev |= EPOLLOUT;
		break;
	case CONN_REPLY:
		cev = EPOLLOUT;
		break;
	case CONN_LINGER:
		cev = EPOLLIN;
		break;
	case _CONN_STATE_MAX:
		break;
	}
	(void)ev_source_set_io_events(c->csrc, cev);
	(void)ev_source_set_enabled(c->csrc, cev ? EV_ON : EV_OFF);
	if (c->dsrc) {
		(void)ev_source_set_io_events(c->dsrc, dev);
		(void)ev_source_set_enabled(c->dsrc, dev ? EV_ON : EV_OFF);
	}
}

/*
 * Refuse the request: CONNECT gets the bare status line (SPEC 6.1), a plain-HTTP request
 * a text/plain body saying why. The connection closes once it is written.
 */
static void conn_refuse(Conn *c, int status, const char *text)
{
	static const struct {
		int status;
		const char *reason;
	} reasons[] = {
		{400, "Bad Request"},
		{403, "Forbidden"},
		{431, "Request Header Fields Too Large"},
		{502, "Bad Gateway"},
		{503, "Service Unavailable"},
		{504, "Gateway Timeout"},
	};
	const char *reason = "Error";
	char head[256];
	int n;

	for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
		if (reasons[i].status == status)
			reason = reasons[i].reason;
	c->dsrc = ev_source_free(c->dsrc);
	c->dfd = safe_close(c->dfd);
	flow_clear(&c->d2c);
	if (c->req.connect || !text)
		n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n\r\n", status, reason);
	else
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			     status, reason, strlen(text));
	buf_put(&c->d2c, head, (size_t)n);
	if (!c->req.connect && text)
		buf_put(&c->d2c, text, strlen(text));
	c->state = CONN_REPLY;
	conn_deadline(c, REPLY_TIMEOUT_MS * USEC_PER_MSEC);
	conn_update(c);
}

static _printf_(3, 4) void conn_refusef(Conn *c, int status, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	conn_refuse(c, status, text);
}

static int on_dial_io(EvSource *s, int fd, uint32_t revents, void *userdata);

/* Connect to the dial socket and queue the dial line. */
static void conn_dial(Conn *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_free_ char *line = NULL;
	json_t *o;
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		conn_refusef(c, 502, "egress failed: cannot reach the host dialer (%s)",
			     strerror(errno));
		return;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->broker->dial_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		if (e == EAGAIN)
			conn_refuse(
				c, 503,
				"egress failed: the host dialer is busy; try again in a moment");
		else
			conn_refusef(c, 502, "egress failed: cannot reach the host dialer (%s)",
				     strerror(e));
		return;
	}
	c->dfd = fd;
	r = ev_add_io(c->broker->loop, &c->dsrc, fd, EPOLLOUT, on_dial_io, c);
	o = json_pack("{s:s, s:s, s:i}", "op", "dial", "host", c->host, "port", (int)c->req.port);
	line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (r < 0 || !line) {
		conn_refuse(c, 502, "egress failed: out of memory in the broker");
		return;
	}
	buf_put(&c->c2d, line, strlen(line));
	buf_put(&c->c2d, "\n", 1);
	c->state = CONN_DIAL;
	conn_deadline(c, DIAL_TIMEOUT_MS * USEC_PER_MSEC);
	conn_update(c);
}

/* The request head is in: check it against the rules (SPEC 6.1 order), then dial. */
static void conn_decide(Conn *c)
{
	const EgressRules *rules = &c->broker->rules;
	unsigned port = c->req.port;
	EgressHostKind kind;
	char shown[EGRESS_HOST_MAX + 3];

	snprintf(c->host, sizeof(c->host), "%s", c->req.host);
	kind = egress_host_normalize(c->host);
	sanitize(shown, sizeof(shown), c->host);
	if (kind == EGRESS_HOST_INVALID) {
		log_navigate(shown, port, false);
		conn_refusef(c, 400, "bad request: \"%s\" is not a valid host name", shown);
		return;
	}
	if (rules->github && streq(c->host, EGRESS_DEDICATED_HOST)) {
		say_json(json_pack("{s:s, s:s, s:i}", "event", "dedicated_broker_host", "host",
				   c->host, "port", (int)port));
		log_navigate(c->host, port, false);
		conn_refusef(
			c, 403,
			"egress denied: \"%s\" is enforced by a dedicated broker in this container, which is the only route to it",
			c->host);
		return;
	}
	if (!egress_rules_allow(rules, c->host, port)) {
		log_navigate(c->host, port, false);
		conn_refusef(
			c, 403,
			"egress denied: \"%s%s%s:%u\" is not covered by any declared browser:navigate:<pattern>/network:host:<pattern> capability",
			kind == EGRESS_HOST_IPV6 ? "[" : "", c->host,
			kind == EGRESS_HOST_IPV6 ? "]" : "", port);
		return;
	}
	if (kind == EGRESS_HOST_IPV4_BLOCKED || kind == EGRESS_HOST_IPV6) {
		/* IPv6 literals too: the broker's address check is IPv4's (anything that is not
		 * a dotted quad is refused), as in the container. Names that resolve to IPv6
		 * are the host dialer's to check. */
		say_json(json_pack("{s:s, s:s, s:i, s:s}", "event", "blocked_address", "host",
				   c->host, "port", (int)port, "address", c->host));
		log_navigate(c->host, port, false);
		conn_refusef(
			c, 403,
			"egress denied: \"%s\" resolves to %s, which is loopback, private, link-local, or otherwise internal",
			c->host, c->host);
		return;
	}
	log_navigate(c->host, port, true);
	conn_dial(c);
}

/* The dialer said no: map its code to a status (docs/egress.md). Its error text already
 * says what happened and what to do ("egress denied: ...", "egress failed: ..."), so it is
 * the reply's body; a text that does not look like one gets a prefix of ours. */
static void conn_dial_refused(Conn *c, const char *code, const char *error)
{
	char why[ERROR_TEXT_MAX];
	bool own = error && strneq(error, "egress ", 7);

	sanitize(why, sizeof(why), error ? error : "no reason given");
	say_json(json_pack("{s:s, s:s, s:i, s:s, s:s}", "event", "dial_refused", "host", c->host,
			   "port", (int)c->req.port, "code", code, "error", why));
	if (streq(code, "denied"))
		conn_refusef(c, 403, "%s%s", own ? "" : "egress denied by the host: ", why);
	else if (streq(code, "unresolved") && !own)
		conn_refusef(c, 502, "egress failed: could not resolve \"%s\" (%s)", c->host, why);
	else if (streq(code, "unreachable") && !own)
		conn_refusef(c, 502, "egress failed: could not connect to \"%s:%u\" (%s)", c->host,
			     c->req.port, why);
	else if (streq(code, "busy"))
		conn_refusef(c, 503, "%s%s",
			     own ? "" : "egress failed: the host dialer is busy: ", why);
	else if (own)
		conn_refuse(c, 502, why);
	else
		conn_refusef(c, 502, "egress failed: the host dialer refused the request (%s: %s)",
			     code, why);
}

/* Bytes of the app's that belong upstream, from @data: all of them for CONNECT, the
 * request body for plain HTTP (what follows it is dropped). Returns -EBADMSG for a broken
 * chunked body. */
static int conn_take_client(Conn *c, const char *data, size_t len)
{
	ssize_t n = (ssize_t)len;

	if (!c->req.connect) {
		if (http_body_done(&c->body))
			return 0;
		n = http_body_feed(&c->body, data, len);
		if (n < 0)
			return (int)n;
	}
	buf_put(&c->c2d, data, (size_t)n);
	return 0;
}

static void conn_start_tunnel(Conn *c, const char *extra, size_t extra_len)
{
	const char *rest = c->head + c->req.head_size;
	size_t rest_len = c->head_len - c->req.head_size;

	flow_clear(&c->c2d);
	if (c->req.connect) {
		static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";

		buf_put(&c->d2c, ok, sizeof(ok) - 1);
	} else {
		_cleanup_free_ char *head = NULL;
		ssize_t n = http_request_forward_head(&c->req, c->host, &head);

		if (n < 0) {
			conn_refuse(c, 502, "egress failed: out of memory in the broker");
			return;
		}
		buf_put(&c->c2d, head, (size_t)n);
		http_body_init(&c->body, &c->req);
	}
	/* What the app sent after its head (a TLS hello, a body) goes first. */
	if (conn_take_client(c, rest, rest_len) < 0) {
		conn_refuse(c, 400, "bad request: the chunked request body is malformed");
		return;
	}
	buf_put(&c->d2c, extra, extra_len);
	c->state = CONN_TUNNEL;
	conn_deadline(c, c->broker->idle_timeout);
	conn_update(c);
}

/* A complete reply line from the dialer. */
static void conn_on_reply(Conn *c, size_t line_len)
{
	json_t *o = json_loadb(c->reply, line_len, JSON_REJECT_DUPLICATES, NULL);
	json_t *ok = json_object_get(o, "ok");
	const char *code = json_string_value(json_object_get(o, "code"));

	if (json_is_true(ok))
		conn_start_tunnel(c, c->reply + line_len + 1, c->reply_len - line_len - 1);
	else if (json_is_false(ok) && code)
		conn_dial_refused(c, code, json_string_value(json_object_get(o, "error")));
	else
		conn_refuse(c, 502, "egress failed: the host dialer sent a malformed reply");
	json_decref(o);
}

static void conn_read_reply(Conn *c)
{
	ssize_t n = read(c->dfd, c->reply + c->reply_len, sizeof(c->reply) - c->reply_len);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* The stream was refused (no dialer in berth-vmm) or the channel went away. */
		conn_refusef(c, 502, "egress failed: the host dialer is not available (%s)",
			     n == 0 ? "connection closed" : strerror(errno));
		return;
	}
	c->reply_len += (size_t)n;
	nl = memchr(c->reply, '\n', c->reply_len);
	if (nl)
		conn_on_reply(c, (size_t)(nl - c->reply));
	else if (c->reply_len == sizeof(c->reply))
		conn_refuse(c, 502, "egress failed: the host dialer sent a malformed reply");
}

/* After any I/O in the tunnel, from either side: pass each half-close on once its
 * direction is drained, and end the connection when it is done. Plain HTTP ends with the
 * response; a tunnel once both directions have. Returns true when @c was freed. */
static bool conn_tunnel_settle(Conn *c)
{
	(void)flow_pass_eof(&c->d2c, c->cfd);
	/* Plain HTTP never half-closes upstream: some servers take that for an abort. */
	if (c->req.connect)
		(void)flow_pass_eof(&c->c2d, c->dfd);
	if (c->d2c.shut && (!c->req.connect || c->c2d.shut)) {
		conn_free(c);
		return true;
	}
	conn_update(c);
	return false;
}

static int on_dial_io(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Conn *c = userdata;

	if (c->state == CONN_DIAL) {
		if (flow_wants_write(&c->c2d)) {
			if (flow_write(&c->c2d, fd) < 0) {
				conn_refuse(c, 502,
					    "egress failed: the host dialer is not available");
				return 0;
			}
		} else
			conn_read_reply(c);
		if (c->state == CONN_DIAL)
			conn_update(c);
		return 0;
	}
	if (c->state != CONN_TUNNEL)
		return 0;
	if (revents & EPOLLOUT) {
		ssize_t n = flow_write(&c->c2d, fd);

		if (n < 0) {
			conn_free(c);
			return 0;
		}
		if (n > 0)
			conn_deadline(c, c->broker->idle_timeout);
	}
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		ssize_t n = flow_read(&c->d2c, fd);

		if (n < 0) {
			conn_free(c);
			return 0;
		}
		if (n > 0)
			conn_deadline(c, c->broker->idle_timeout);
	}
	/* Push what just arrived towards the app without waiting for another wakeup. */
	if (flow_wants_write(&c->d2c) && flow_write(&c->d2c, c->cfd) < 0) {
		conn_free(c);
		return 0;
	}
	(void)conn_tunnel_settle(c);
	return 0;
}

static void conn_read_head(Conn *c)
{
	ssize_t n = read(c->cfd, c->head + c->head_len, sizeof(c->head) - c->head_len);
	char error[256] = "";

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(c);
		return;
	}
	c->head_len += (size_t)n;
	switch (http_request_parse(c->head, c->head_len, &c->req, error, sizeof(error))) {
	case HTTP_HEAD_INCOMPLETE:
		return;
	case HTTP_HEAD_OK:
		conn_decide(c);
		return;
	case HTTP_HEAD_TOO_LARGE:
		conn_refusef(c, 431,
			     "bad request: the request head is over %d bytes or %d header lines",
			     HTTP_HEAD_MAX, HTTP_HEADERS_MAX);
		return;
	case HTTP_HEAD_NOT_ABSOLUTE:
		conn_refuse(c, 400, "bad request: expected an absolute-URI (proxy request)");
		return;
	case HTTP_HEAD_BAD_REQUEST:
	case _HTTP_HEAD_STATUS_MAX:
		conn_refusef(c, 400, "bad request: %s", error);
		return;
	}
}

static int on_client_io(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Conn *c = userdata;
	char sink[4096];
	ssize_t n;

	switch (c->state) {
	case CONN_HEAD:
		conn_read_head(c);
		return 0;
	case CONN_REPLY:
		if (flow_write(&c->d2c, fd) < 0) {
			conn_free(c);
			return 0;
		}
		if (!flow_wants_write(&c->d2c)) {
			/* Closing with unread input would reset the connection and could
			 * lose the reply: half-close and read what is left, briefly. */
			(void)shutdown(fd, SHUT_WR);
			c->state = CONN_LINGER;
			conn_update(c);
		}
		return 0;
	case CONN_LINGER:
		n = read(fd, sink, sizeof(sink));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_free(c);
		return 0;
	case CONN_DIAL:
	case _CONN_STATE_MAX:
		return 0;
	case CONN_TUNNEL:
		break;
	}

	if (revents & EPOLLOUT) {
		ssize_t w = flow_write(&c->d2c, fd);

		if (w < 0) {
			conn_free(c);
			return 0;
		}
		if (w > 0)
			conn_deadline(c, c->broker->idle_timeout);
	}
	/* Read through @sink rather than flow_read(): a plain-HTTP body is filtered on its
	 * way into c2d (conn_take_client). */
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && flow_wants_read(&c->c2d)) {
		n = read(fd, sink, MIN(flow_room(&c->c2d), sizeof(sink)));
		if (n > 0) {
			if (conn_take_client(c, sink, (size_t)n) < 0) {
				conn_free(c);
				return 0;
			}
			conn_deadline(c, c->broker->idle_timeout);
		} else if (n == 0)
			c->c2d.eof = true;
		else if (errno != EAGAIN && errno != EINTR) {
			conn_free(c);
			return 0;
		}
	}
	if (flow_wants_write(&c->c2d) && flow_write(&c->c2d, c->dfd) < 0) {
		conn_free(c);
		return 0;
	}
	(void)conn_tunnel_settle(c);
	return 0;
}

static int on_conn_timer(EvSource *s, uint64_t usec, void *userdata)
{
	Conn *c = userdata;

	switch (c->state) {
	case CONN_HEAD:
		conn_refuse(c, 400, "bad request: the request head did not arrive in time");
		break;
	case CONN_DIAL:
		say_json(json_pack("{s:s, s:s, s:i}", "event", "dial_timeout", "host", c->host,
				   "port", (int)c->req.port));
		conn_refusef(c, 504, "egress failed: the host dialer did not answer within %d s",
			     DIAL_TIMEOUT_MS / 1000);
		break;
	case CONN_TUNNEL:
	case CONN_REPLY:
	case CONN_LINGER:
	case _CONN_STATE_MAX:
		conn_free(c);
		break;
	}
	return 0;
}

/* ---- accepting ---- */

static int on_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Broker *b = userdata;
	bool over;
	Conn *c;
	int cfd;

	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return 0;
	/* Past the cap a few more are taken only to be told why they are turned away. */
	over = b->n_conns >= b->max_conns;
	if (over && b->n_conns >= b->max_conns + CONNS_OVERFLOW) {
		close(cfd);
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(cfd);
		return 0;
	}
	c->broker = b;
	c->cfd = cfd;
	c->dfd = -EBADF;
	c->c2d = FLOW_INIT(BUF_SIZE);
	c->d2c = FLOW_INIT(BUF_SIZE);
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	b->n_conns++;
	if (flow_alloc(&c->c2d) < 0 || flow_alloc(&c->d2c) < 0 ||
	    ev_add_io(b->loop, &c->csrc, cfd, EPOLLIN, on_client_io, c) < 0 ||
	    ev_add_time_relative(b->loop, &c->timer, b->head_timeout, on_conn_timer, c) < 0) {
		conn_free(c);
		return 0;
	}
	if (over) {
		say_json(json_pack("{s:s, s:i}", "event", "too_many_connections", "max",
				   (int)b->max_conns));
		conn_refusef(
			c, 503,
			"egress failed: %u connections through the broker are open already; close some and try again",
			b->max_conns);
	}
	return 0;
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	Broker *b = userdata;

	ev_exit(b->loop, 0);
	return 0;
}

static unsigned env_uint(const char *name, unsigned def, unsigned min, unsigned max)
{
	const char *v = getenv(name);
	unsigned n;

	if (!v || !*v)
		return def;
	if (parse_uint_range(v, min, max, &n) < 0) {
		say("WARNING: ignoring %s=%s (expected %u to %u)", name, v, min, max);
		return def;
	}
	return n;
}

static int listen_tcp(unsigned port, unsigned *ret_port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

int main(int argc, char *argv[])
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	const char *policy = getenv("BERTH_EGRESS_POLICY") ?: POLICY_DEFAULT;
	_cleanup_free_ char *policy_err = NULL;
	Broker b = {.listen_fd = -EBADF};
	unsigned port = 0;
	int r;

	if (argc > 1) {
		dprintf(STDERR_FILENO,
			"usage: %s (configured by BERTH_EGRESS_POLICY, BERTH_EGRESS_DIALER_SOCKET, BERTH_EGRESS_BROKER_PORT; see docs/egress.md)\n",
			argv[0]);
		return 2;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	b.dial_path = getenv("BERTH_EGRESS_DIALER_SOCKET") ?: DIAL_SOCKET_DEFAULT;
	if (strlen(b.dial_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		say("FATAL: BERTH_EGRESS_DIALER_SOCKET is longer than a unix socket path may be");
		return 1;
	}
	b.max_conns = env_uint("BERTH_EGRESS_MAX_CONNS", CONNS_MAX_DEFAULT, 1, CONNS_MAX_LIMIT);
	b.head_timeout =
		env_uint("BERTH_EGRESS_HEAD_TIMEOUT_MS", HEAD_TIMEOUT_MS_DEFAULT, 100, 600000) *
		USEC_PER_MSEC;
	b.idle_timeout =
		env_uint("BERTH_EGRESS_IDLE_TIMEOUT_MS", IDLE_TIMEOUT_MS_DEFAULT, 100, 86400000) *
		USEC_PER_MSEC;

	/* Read once, before serving anything; a policy that cannot be read denies all. */
	r = egress_rules_load(policy, &b.rules, &policy_err);
	if (r < 0)
		say("WARNING: cannot read the policy %s (%s): every request will be denied", policy,
		    policy_err ?: strerror(-r));
	else
		say("policy %s: %zu host pattern%s%s", policy, b.rules.n_patterns,
		    b.rules.n_patterns == 1 ? "" : "s",
		    b.rules.github ? "; api.github.com is left to the GitHub broker" : "");

	r = ev_loop_new(&loop);
	if (r < 0) {
		say("FATAL: cannot create the event loop: %s", strerror(-r));
		return 1;
	}
	b.loop = loop;
	b.listen_fd =
		listen_tcp(env_uint("BERTH_EGRESS_BROKER_PORT", PORT_DEFAULT, 0, 65535), &port);
	if (b.listen_fd < 0) {
		say("FATAL: cannot listen on 127.0.0.1:%u: %s",
		    env_uint("BERTH_EGRESS_BROKER_PORT", PORT_DEFAULT, 0, 65535),
		    strerror(-b.listen_fd));
		return 1;
	}
	if (ev_add_io(loop, NULL, b.listen_fd, EPOLLIN, on_accept, &b) < 0 ||
	    ev_add_signal(loop, NULL, SIGTERM, on_signal, &b) < 0 ||
	    ev_add_signal(loop, NULL, SIGINT, on_signal, &b) < 0) {
		say("FATAL: cannot set up the event loop");
		return 1;
	}
	say("listening on 127.0.0.1:%u", port);
	r = ev_loop(loop);
	while (b.conns)
		conn_free(b.conns);
	egress_rules_done(&b.rules);
	safe_close(b.listen_fd);
	return r < 0 ? 1 : 0;
}
