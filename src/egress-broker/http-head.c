/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http-head.h"
#include "macros.h"
#include "parse-util.h"

/* Hop-by-hop headers (SPEC 6.1): never forwarded. Host is replaced, not forwarded. */
static const char *const hop_by_hop[] = {
	"connection",
	"keep-alive",
	"proxy-authenticate",
	"proxy-authorization",
	"proxy-connection",
	"te",
	"trailer",
	"transfer-encoding",
	"upgrade",
	"host",
};

void http_request_done(HttpRequest *req)
{
	free(req->buf);
	*req = (HttpRequest){};
}

static _printf_(3, 4) HttpHeadStatus bad(char *error, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(error, errlen, fmt, ap);
	va_end(ap);
	return HTTP_HEAD_BAD_REQUEST;
}

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_tchar(*s))
			return false;
	return true;
}

/* Find the end of the head: the offset just past the empty line, 0 if not there yet, or
 * -E2BIG when the head or its number of lines is over a cap. */
static ssize_t find_head_end(const char *data, size_t size, size_t max, size_t max_lines)
{
	size_t line_start = 0, lines = 0;

	for (size_t i = 0; i < size && i < max; i++) {
		size_t len;

		if (data[i] != '\n')
			continue;
		len = i - line_start;
		if (len > 0 && data[i - 1] == '\r')
			len--;
		if (len == 0 && lines > 0)
			return (ssize_t)(i + 1);
		/* The first line and @max_lines headers. */
		if (++lines > max_lines + 1)
			return -E2BIG;
		line_start = i + 1;
	}
	return size >= max ? -E2BIG : 0;
}

/* "host", "host:port", "[v6]" or "[v6]:port" (@len bytes at @s) into req->host and req->port. */
static HttpHeadStatus parse_authority(HttpRequest *req, const char *s, size_t len,
				      unsigned default_port, char *error, size_t errlen)
{
	size_t host_len;
	uint16_t port;
	const char *colon;

	if (len == 0)
		return bad(error, errlen, "the request names no host");
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return bad(error, errlen, "an IPv6 address without its closing ']'");
		host_len = (size_t)(close - s) + 1;
		colon = host_len < len ? s + host_len : NULL;
		if (colon && *colon != ':')
			return bad(error, errlen, "unexpected characters after an IPv6 address");
	} else {
		colon = memrchr(s, ':', len);
		host_len = colon ? (size_t)(colon - s) : len;
	}
	if (host_len == 0)
		return bad(error, errlen, "the request names no host");
	if (host_len > EGRESS_HOST_MAX + 2)
		return bad(error, errlen, "the host name is longer than %d characters",
			   EGRESS_HOST_MAX);
	memcpy(req->host, s, host_len);
	req->host[host_len] = '\0';
	if (!colon) {
		req->port = default_port;
		return HTTP_HEAD_OK;
	}
	if (parse_port(colon + 1, len - host_len - 1, &port) < 0)
		return bad(error, errlen, "the port is not a number from 1 to 65535");
	req->port = port;
	return HTTP_HEAD_OK;
}

static HttpHeadStatus parse_target(HttpRequest *req, char *target, bool origin, char *error,
				   size_t errlen)
{
	static const char http[] = "http://", https[] = "https://";
	char *auth, *end;
	HttpHeadStatus st;

	for (const char *c = target; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return bad(error, errlen,
				   "the request target holds a control or non-ASCII character");
	/* A server's side of the request (inside a tunnel): the path as it was written. */
	if (origin) {
		if (req->connect)
			return bad(error, errlen, "CONNECT is not a request this server answers");
		if (target[0] != '/')
			return bad(error, errlen,
				   "the request target is not a path (origin-form, \"/...\")");
		req->path = target;
		return HTTP_HEAD_OK;
	}
	if (req->connect)
		return parse_authority(req, target, strlen(target), 443, error, errlen);
	if (strncasecmp(target, https, sizeof(https) - 1) == 0)
		return bad(
			error, errlen,
			"https:// URIs are not fetched by the proxy: send CONNECT host:443 and speak TLS through the tunnel");
	if (strncasecmp(target, http, sizeof(http) - 1) != 0)
		return HTTP_HEAD_NOT_ABSOLUTE;
	auth = target + sizeof(http) - 1;
	end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth)))
		return bad(error, errlen, "user information in the URI (user@host) is not allowed");
	st = parse_authority(req, auth, (size_t)(end - auth), 80, error, errlen);
	if (st != HTTP_HEAD_OK)
		return st;
	/* The host was copied out: the authority's bytes are free for the path's leading '/'
	 * ("http://host?q" means "/?q", "http://host" means "/"). */
	end[strcspn(end, "#")] = '\0';
	if (*end != '/')
		*--end = '/';
	req->path = end;
	return HTTP_HEAD_OK;
}

static HttpHeadStatus parse_request_line(HttpRequest *req, char *line, bool origin, char *error,
					 size_t errlen)
{
	char *sp1 = strchr(line, ' '), *sp2, *version;

	if (!sp1)
		return bad(error, errlen, "the request line is not METHOD TARGET HTTP/1.x");
	*sp1 = '\0';
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2)
		return bad(error, errlen, "the request line is not METHOD TARGET HTTP/1.x");
	*sp2 = '\0';
	version = sp2 + 1;
	req->method = line;
	if (!is_token(req->method) || strlen(req->method) > 32)
		return bad(error, errlen, "the method is not an HTTP token");
	if (streq(version, "HTTP/1.1"))
		req->minor = 1;
	else if (streq(version, "HTTP/1.0"))
		req->minor = 0;
	else
		return bad(error, errlen, "only HTTP/1.0 and HTTP/1.1 are spoken here");
	req->connect = streq(req->method, "CONNECT");
	return parse_target(req, sp1 + 1, origin, error, errlen);
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

/* Is @name listed in any Connection header (comma-separated, case-insensitive)? */
static bool named_by_connection(const HttpRequest *req, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < req->n_headers; i++) {
		const char *v = req->headers[i].value;

		if (strcasecmp(req->headers[i].name, "connection") != 0)
			continue;
		while (*v) {
			size_t len;

			v += strspn(v, " \t,");
			len = strcspn(v, ",");
			while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
				len--;
			if (len == n && strncasecmp(v, name, n) == 0)
				return true;
			v += strcspn(v, ",");
		}
	}
	return false;
}

/*
 * What Connection names is dropped on the way as hop-by-hop. A header that frames the
 * request must reach the server as the broker read it: with Content-Length dropped the
 * body it forwards would be read as a second request, unchecked. No client has a reason to
 * name one, so such a request is refused rather than half-honoured.
 */
static const char *const framing[] = {"Content-Length", "Transfer-Encoding", "Host"};

static HttpHeadStatus parse_framing(HttpRequest *req, char *error, size_t errlen)
{
	bool have_length = false, have_te = false;

	for (size_t i = 0; i < ELEMENTSOF(framing); i++)
		if (named_by_connection(req, framing[i]))
			return bad(
				error, errlen,
				"the Connection header names %s, which frames the request: a proxy that dropped it would pass the body on as a request of its own; remove it from Connection",
				framing[i]);
	for (size_t i = 0; i < req->n_headers; i++) {
		const HttpHeader *h = &req->headers[i];

		if (strcasecmp(h->name, "content-length") == 0) {
			uint64_t v = 0;

			if (!*h->value || strlen(h->value) > 18 ||
			    strspn(h->value, "0123456789") != strlen(h->value))
				return bad(error, errlen, "Content-Length is not a decimal number");
			for (const char *c = h->value; *c; c++)
				v = v * 10 + (uint64_t)(*c - '0');
			if (have_length && v != req->content_length)
				return bad(error, errlen, "two Content-Length headers disagree");
			req->content_length = v;
			have_length = true;
		} else if (strcasecmp(h->name, "transfer-encoding") == 0) {
			if (have_te || strcasecmp(h->value, "chunked") != 0)
				return bad(error, errlen,
					   "only Transfer-Encoding: chunked is supported");
			have_te = true;
		}
	}
	if (have_length && have_te)
		return bad(error, errlen,
			   "a request may not carry both Content-Length and Transfer-Encoding");
	/* RFC 9112 6.1: an HTTP/1.0 server does not know chunked framing, and may read the
	 * chunks as anything, another request included. */
	if (have_te && req->minor == 0)
		return bad(
			error, errlen,
			"Transfer-Encoding is HTTP/1.1: an HTTP/1.0 request frames its body with Content-Length");
	req->chunked = have_te;
	if (have_te)
		req->content_length = 0;
	return HTTP_HEAD_OK;
}

static HttpHeadStatus parse_head(const char *data, size_t size, bool origin, HttpRequest *ret,
				 char *error, size_t errlen)
{
	_cleanup_(http_request_done) HttpRequest req = {};
	ssize_t end = find_head_end(data, size, HTTP_HEAD_MAX, HTTP_HEADERS_MAX);
	char *line, *next;
	HttpHeadStatus st;

	if (end == -E2BIG)
		return HTTP_HEAD_TOO_LARGE;
	if (end == 0)
		return HTTP_HEAD_INCOMPLETE;
	if (memchr(data, '\0', (size_t)end))
		return bad(error, errlen, "the request head holds a NUL byte");
	req.head_size = (size_t)end;
	req.buf = strndup(data, (size_t)end);
	if (!req.buf)
		return bad(error, errlen, "out of memory");

	line = req.buf;
	next = strchr(line, '\n');
	*next = '\0';
	if (next > line && next[-1] == '\r')
		next[-1] = '\0';
	st = parse_request_line(&req, line, origin, error, errlen);
	if (st != HTTP_HEAD_OK)
		return st;
	for (line = next + 1; *line; line = next + 1) {
		char *colon, *name;

		next = strchr(line, '\n');
		*next = '\0';
		if (next > line && next[-1] == '\r')
			next[-1] = '\0';
		if (!*line)
			break;
		if (*line == ' ' || *line == '\t')
			return bad(error, errlen, "folded header lines are not allowed");
		colon = strchr(line, ':');
		if (!colon)
			return bad(error, errlen, "a header line without a colon");
		*colon = '\0';
		name = line;
		if (!is_token(name))
			return bad(error, errlen, "a header name is not an HTTP token");
		for (const char *c = colon + 1; *c; c++)
			if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
				return bad(error, errlen,
					   "a header value holds a control character");
		if (req.n_headers >= HTTP_HEADERS_MAX)
			return HTTP_HEAD_TOO_LARGE;
		req.headers[req.n_headers++] = (HttpHeader){name, trim(colon + 1)};
	}
	if (!req.connect) {
		st = parse_framing(&req, error, errlen);
		if (st != HTTP_HEAD_OK)
			return st;
	}
	*ret = req;
	req = (HttpRequest){};
	return HTTP_HEAD_OK;
}

HttpHeadStatus http_request_parse(const char *data, size_t size, HttpRequest *ret, char *error,
				  size_t errlen)
{
	return parse_head(data, size, false, ret, error, errlen);
}

HttpHeadStatus http_origin_request_parse(const char *data, size_t size, HttpRequest *ret,
					 char *error, size_t errlen)
{
	return parse_head(data, size, true, ret, error, errlen);
}

static bool in_list(const char *const *list, const char *name)
{
	for (size_t i = 0; list && list[i]; i++)
		if (strcasecmp(name, list[i]) == 0)
			return true;
	return false;
}

static bool dropped(const HttpRequest *req, const char *name, const char *const *also)
{
	for (size_t i = 0; i < ELEMENTSOF(hop_by_hop); i++)
		if (strcasecmp(name, hop_by_hop[i]) == 0)
			return true;
	return in_list(also, name) || named_by_connection(req, name);
}

ssize_t http_request_forward(const HttpRequest *req, const HttpForward *fw, char **ret)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return -ENOMEM;
	fprintf(f, "%s %s HTTP/1.%d\r\n", req->method, fw->path ?: req->path, req->minor);
	for (size_t i = 0; i < req->n_headers; i++)
		if (!dropped(req, req->headers[i].name, fw->drop))
			fprintf(f, "%s: %s\r\n", req->headers[i].name, req->headers[i].value);
	fprintf(f, "Host: %s\r\n", fw->host);
	if (fw->extra)
		fputs(fw->extra, f);
	if (req->chunked)
		fputs("Transfer-Encoding: chunked\r\n", f);
	fputs("Connection: close\r\n\r\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	*ret = buf;
	return (ssize_t)size;
}

ssize_t http_request_forward_head(const HttpRequest *req, const char *host, char **ret)
{
	_cleanup_free_ char *host_port = NULL;

	if (req->port != 80 && asprintf(&host_port, "%s:%u", host, req->port) < 0)
		return -ENOMEM;
	return http_request_forward(req, &(HttpForward){.host = host_port ?: host}, ret);
}

void http_body_init(HttpBody *b, const HttpRequest *req)
{
	*b = (HttpBody){};
	if (req->chunked)
		b->state = HTTP_BODY_CHUNK_SIZE;
	else if (req->content_length > 0) {
		b->state = HTTP_BODY_LENGTH;
		b->left = req->content_length;
	} else
		b->state = HTTP_BODY_DONE;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A byte of a chunk-size or trailer line other than its LF. A CR may only come right before
 * the LF: a server that ends the line at a lone CR would read another chunk size there, and
 * so another end of the body. No other control character but tab.
 * Returns -EBADMSG, 1 for a CR, 0 for any other byte.
 */
static int line_byte(HttpBody *b, char c)
{
	if (b->cr)
		return -EBADMSG;
	if (c == '\r') {
		b->cr = true;
		return 1;
	}
	if (((unsigned char)c < 0x20 && c != '\t') || c == 0x7f)
		return -EBADMSG;
	return 0;
}

/* One byte of a chunk-size line. */
static int feed_size_byte(HttpBody *b, char c)
{
	int d = hex_digit(c), r;

	if (++b->line_len > HTTP_CHUNK_LINE_MAX)
		return -EBADMSG;
	if (c == '\n') {
		b->cr = false;
		if (!b->size_digits)
			return -EBADMSG;
		if (b->size == 0) {
			b->state = HTTP_BODY_TRAILER;
			b->line_empty = true;
		} else {
			b->state = HTTP_BODY_CHUNK_DATA;
			b->left = b->size;
		}
		b->line_len = 0;
		b->size = 0;
		b->size_digits = b->size_ext = false;
		return 0;
	}
	r = line_byte(b, c);
	if (r != 0)
		return r < 0 ? r : 0;
	if (b->size_ext)
		return 0;
	if (d >= 0) {
		if (b->size >> 56)
			return -EBADMSG;
		b->size = b->size * 16 + (uint64_t)d;
		b->size_digits = true;
		return 0;
	}
	if ((c == ';' || c == ' ' || c == '\t') && b->size_digits) {
		b->size_ext = true;
		return 0;
	}
	return -EBADMSG;
}

ssize_t http_body_feed(HttpBody *b, const char *data, size_t size)
{
	size_t i = 0;

	while (i < size && b->state != HTTP_BODY_DONE) {
		char c = data[i];
		size_t take;
		int r;

		switch (b->state) {
		case HTTP_BODY_LENGTH:
		case HTTP_BODY_CHUNK_DATA:
			take = (size_t)MIN((uint64_t)(size - i), b->left);
			b->left -= take;
			i += take;
			if (b->left == 0)
				b->state = b->state == HTTP_BODY_LENGTH ? HTTP_BODY_DONE
									: HTTP_BODY_CHUNK_CRLF;
			break;
		case HTTP_BODY_CHUNK_SIZE:
			r = feed_size_byte(b, c);
			if (r < 0)
				return r;
			i++;
			break;
		case HTTP_BODY_CHUNK_CRLF:
			if (c == '\r' && b->line_len == 0)
				b->line_len = 1;
			else if (c == '\n') {
				b->state = HTTP_BODY_CHUNK_SIZE;
				b->line_len = 0;
			} else
				return -EBADMSG;
			i++;
			break;
		case HTTP_BODY_TRAILER:
			if (++b->line_len > HTTP_CHUNK_LINE_MAX)
				return -EBADMSG;
			if (c == '\n') {
				if (b->line_empty)
					b->state = HTTP_BODY_DONE;
				b->cr = false;
				b->line_empty = true;
				b->line_len = 0;
			} else {
				r = line_byte(b, c);
				if (r < 0)
					return r;
				if (r == 0)
					b->line_empty = false;
			}
			i++;
			break;
		case HTTP_BODY_DONE:
		case _HTTP_BODY_STATE_MAX:
			break;
		}
	}
	return (ssize_t)i;
}

/* Hop-by-hop headers of a response: what must not reach a client that gets one response
 * per connection, since "Connection: close" is said instead. */
static const char *const response_hop_by_hop[] = {"connection", "keep-alive", "proxy-connection"};

static bool response_header_dropped(const char *name, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(response_hop_by_hop); i++)
		if (strlen(response_hop_by_hop[i]) == len &&
		    strncasecmp(name, response_hop_by_hop[i], len) == 0)
			return true;
	return false;
}

HttpHeadStatus http_response_head_close(const char *data, size_t size, char **ret,
					size_t *ret_len, size_t *ret_consumed, int *ret_status)
{
	ssize_t end = find_head_end(data, size, HTTP_RESPONSE_HEAD_MAX, HTTP_RESPONSE_HEADERS_MAX);
	const char *line = data, *stop;
	char *buf = NULL;
	size_t bsize = 0;
	int status, first = 1;
	FILE *f;

	if (end == -E2BIG)
		return HTTP_HEAD_TOO_LARGE;
	if (end == 0)
		return HTTP_HEAD_INCOMPLETE;
	stop = data + end;
	f = open_memstream(&buf, &bsize);
	if (!f)
		return HTTP_HEAD_BAD_REQUEST;
	status = -1;
	while (line < stop) {
		const char *nl = memchr(line, '\n', (size_t)(stop - line));
		size_t len = (size_t)(nl - line);
		const char *colon;

		if (len > 0 && line[len - 1] == '\r')
			len--;
		for (size_t i = 0; i < len; i++)
			if (((unsigned char)line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f)
				goto bad;
		if (first) {
			/* HTTP/1.x NNN[ reason] */
			if (len < 12 || !(strneq(line, "HTTP/1.1 ", 9) || strneq(line, "HTTP/1.0 ", 9)) ||
			    strspn(line + 9, "0123456789") < 3 || (len > 12 && line[12] != ' '))
				goto bad;
			status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
			if (status < 100)
				goto bad;
			fprintf(f, "%.*s\r\n", (int)len, line);
			first = 0;
		} else if (len > 0) {
			colon = memchr(line, ':', len);
			if (!colon || colon == line || line[0] == ' ' || line[0] == '\t')
				goto bad;
			for (const char *c = line; c < colon; c++)
				if (!is_tchar(*c))
					goto bad;
			/* A 1xx head goes on as it came: the final response follows it. */
			if (status < 200 ||
			    !response_header_dropped(line, (size_t)(colon - line)))
				fprintf(f, "%.*s\r\n", (int)len, line);
		}
		line = nl + 1;
	}
	if (status >= 200)
		fputs("Connection: close\r\n", f);
	fputs("\r\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return HTTP_HEAD_BAD_REQUEST;
	}
	*ret = buf;
	*ret_len = bsize;
	*ret_consumed = (size_t)end;
	*ret_status = status;
	return HTTP_HEAD_OK;
bad:
	fclose(f);
	free(buf);
	return HTTP_HEAD_BAD_REQUEST;
}
