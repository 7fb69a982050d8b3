/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The proxy side of HTTP/1.x the egress broker needs: the request head an app sends
 * (CONNECT host:port, or a plain-HTTP request with an absolute http:// URI), the head it
 * forwards for plain HTTP (hop-by-hop headers dropped, Host set to the checked target,
 * Connection: close), and where a request body ends. Pure functions over buffers; every
 * size the app controls has a cap.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rules.h"

#define HTTP_HEAD_MAX (16 * 1024) /* request line and headers together */
#define HTTP_HEADERS_MAX 100
#define HTTP_CHUNK_LINE_MAX 1024 /* a chunk-size line, or one trailer line */
/* A response head from upstream (the GitHub broker's): status line and headers together. */
#define HTTP_RESPONSE_HEAD_MAX (64 * 1024)
#define HTTP_RESPONSE_HEADERS_MAX 200

typedef enum HttpHeadStatus {
	HTTP_HEAD_OK,
	HTTP_HEAD_INCOMPLETE,	/* no end of head yet: read more */
	HTTP_HEAD_TOO_LARGE,	/* over HTTP_HEAD_MAX or HTTP_HEADERS_MAX: 431 */
	HTTP_HEAD_BAD_REQUEST,	/* malformed: 400 with @error */
	HTTP_HEAD_NOT_ABSOLUTE, /* a plain request without an absolute http:// URI: 400 */
	_HTTP_HEAD_STATUS_MAX,
} HttpHeadStatus;

typedef struct HttpHeader {
	const char *name, *value; /* point into HttpRequest.buf, NUL-terminated */
} HttpHeader;

typedef struct HttpRequest {
	char *buf;	  /* a private copy of the head, cut into strings */
	size_t head_size; /* bytes of the input the head took, line ends included */
	bool connect;
	const char *method;
	const char *path; /* plain HTTP: path and query, "/" when the URI had none; origin-form:
			     the target as written */
	int minor;			/* HTTP/1.<minor> */
	char host[EGRESS_HOST_MAX + 3]; /* as written (an IPv6 literal keeps its brackets) */
	unsigned port;
	HttpHeader headers[HTTP_HEADERS_MAX];
	size_t n_headers;
	/* Plain HTTP body framing, from Content-Length / Transfer-Encoding. */
	bool chunked;
	uint64_t content_length; /* when !chunked; 0 without a body */
} HttpRequest;

void http_request_done(HttpRequest *req);

/*
 * http_request_parse() - parse the head at the start of @data (@size bytes so far).
 * Lines end in CRLF or a bare LF; the head ends at the first empty line.
 * @ret: filled on HTTP_HEAD_OK; release with http_request_done().
 * @error, @errlen: for HTTP_HEAD_BAD_REQUEST, what was wrong (a sentence for the app).
 * The request line is METHOD SP target SP HTTP/1.0|HTTP/1.1. CONNECT takes host:port,
 * [v6]:port or a bare host (port 443); anything else needs http://host[:port][/path] (port
 * 80) without userinfo; https:// is refused (use CONNECT). Header names are tokens, values
 * hold no control characters but tab, folded lines are refused. A body framed both by
 * Content-Length and Transfer-Encoding, a Transfer-Encoding other than "chunked" (or any in
 * HTTP/1.0), Content-Length values that disagree, and a Connection header naming
 * Content-Length, Transfer-Encoding or Host (which would have the forwarded head drop it)
 * are refused: they are how requests are smuggled.
 */
HttpHeadStatus http_request_parse(const char *data, size_t size, HttpRequest *ret, char *error,
				  size_t errlen);

/*
 * http_origin_request_parse() - the same, for the server's side of a request: what arrives
 * inside a tunnel (the GitHub broker's). The target must be origin-form, a path starting
 * with '/' (CONNECT, absolute URIs and "*" are refused), kept in ->path exactly as written;
 * ->host and ->port are not set. Every other rule is http_request_parse()'s, framing and
 * smuggling checks included.
 */
HttpHeadStatus http_origin_request_parse(const char *data, size_t size, HttpRequest *ret,
					 char *error, size_t errlen);

/* How http_request_forward() writes the head it sends upstream. */
typedef struct HttpForward {
	const char *host;	/* the Host header's value: the checked target */
	const char *path;	/* the request target; NULL: the request's own ->path */
	const char *const *drop; /* more header names to drop (NULL-terminated), or NULL */
	const char *extra;	/* header lines to add, each ending in CRLF, or NULL */
} HttpForward;

/*
 * http_request_forward() - "METHOD path HTTP/1.x", every header except Host, the hop-by-hop
 * ones (below), the ones Connection names and @fw->drop, then Host: @fw->host, @fw->extra,
 * "Transfer-Encoding: chunked" again when the body is chunked, and Connection: close.
 * Returns the length and a malloc()ed string in *@ret, or -ENOMEM.
 */
ssize_t http_request_forward(const HttpRequest *req, const HttpForward *fw, char **ret);

/*
 * http_request_forward_head() - the head to send upstream for a plain-HTTP request:
 * "METHOD path HTTP/1.1", every header except Host, the hop-by-hop ones (connection,
 * keep-alive, proxy-authenticate, proxy-authorization, proxy-connection, te, trailer,
 * transfer-encoding, upgrade) and the ones Connection names, then Host: @host[:port]
 * (the checked target), "Transfer-Encoding: chunked" again when the body is chunked (its
 * bytes are passed on as they are), and Connection: close (one request per connection,
 * so a second request cannot ride on a checked one).
 * Returns the length and a malloc()ed string in *@ret, or -ENOMEM.
 */
ssize_t http_request_forward_head(const HttpRequest *req, const char *host, char **ret);

/*
 * Where a request body ends. http_body_feed() takes bytes as they come from the app and
 * says how many of them belong to the body; once *done, the rest is not the body's.
 */
typedef enum HttpBodyState {
	HTTP_BODY_LENGTH,     /* counting down @left */
	HTTP_BODY_CHUNK_SIZE, /* in a chunk-size line */
	HTTP_BODY_CHUNK_DATA, /* @left bytes of chunk data */
	HTTP_BODY_CHUNK_CRLF, /* the line end after chunk data */
	HTTP_BODY_TRAILER,    /* trailer lines, up to the empty one */
	HTTP_BODY_DONE,
	_HTTP_BODY_STATE_MAX,
} HttpBodyState;

typedef struct HttpBody {
	HttpBodyState state;
	uint64_t left;
	size_t line_len; /* bytes of the current line so far */
	bool line_empty; /* the current trailer line has had nothing but CR so far */
	bool cr;	 /* the current line's last byte was a CR: only LF may follow */
	uint64_t size;	 /* chunk size being parsed */
	bool size_digits;
	bool size_ext; /* past the digits: ";ext" or whitespace */
} HttpBody;

void http_body_init(HttpBody *b, const HttpRequest *req);
/* Returns how many bytes of @data are body (<= @size), or -EBADMSG for a malformed chunked
 * body (bad size, a line over HTTP_CHUNK_LINE_MAX, missing CRLF, a CR not right before its
 * LF, a control character in a chunk-size or trailer line). */
ssize_t http_body_feed(HttpBody *b, const char *data, size_t size);
static inline bool http_body_done(const HttpBody *b)
{
	return b->state == HTTP_BODY_DONE;
}

/*
 * http_response_head_close() - one response head at the start of @data (@size bytes so
 * far), as it goes on to a client that gets one response per connection: the status line
 * and headers as they came, except Connection, Keep-Alive and Proxy-Connection, and then
 * "Connection: close" (so the client does not send another request on a connection that
 * ends). A 1xx head (100 Continue) is passed on unchanged: the final head follows it.
 * Caps: HTTP_RESPONSE_HEAD_MAX bytes, HTTP_RESPONSE_HEADERS_MAX header lines.
 * Returns HTTP_HEAD_OK with the head in *@ret (malloc()ed, *@ret_len bytes), how much of
 * @data it took in *@ret_consumed and the status code in *@ret_status;
 * HTTP_HEAD_INCOMPLETE; HTTP_HEAD_TOO_LARGE; or HTTP_HEAD_BAD_REQUEST for a status line
 * that is not HTTP/1.x NNN, a header without a token name, a control character, or OOM.
 */
HttpHeadStatus http_response_head_close(const char *data, size_t size, char **ret,
					size_t *ret_len, size_t *ret_consumed, int *ret_status);
