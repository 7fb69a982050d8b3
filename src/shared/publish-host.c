/* SPDX-License-Identifier: Apache-2.0 */
/* A published guest port served on the host (publish-host.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-splice.h"
#include "macros.h"
#include "publish-host.h"

typedef struct Conn {
	struct PublishHost *owner;
	FdSplice *splice; /* the connection spliced to the guest */
	/* Before that: the client, its first request head so far, and its deadline. */
	int client;
	char *head;
	size_t head_len;
	EvSource *source, *timer;
} Conn;

struct PublishHost {
	EvLoop *loop;
	char *run_dir;
	char socket[32]; /* publish-<port>.sock */
	int listen_fd;
	EvSource *listen_source;
	Conn conns[PUBLISH_HOST_CONNS_MAX];
	unsigned n_conns;
	uint16_t port;
	char url[80];
};

/* Non-blocking: a berth-vmm whose backlog is full (it is stuck, or flooded) answers EAGAIN
 * rather than stall the command's loop. */
static int connect_socket(const PublishHost *p)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, n, r;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", p->run_dir, p->socket);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static bool slot_free(const Conn *c)
{
	return !c->splice && c->client < 0;
}

/* Forget the connection's head and close the client (if it still has it). */
static void conn_reset(Conn *c)
{
	c->source = ev_source_free(c->source);
	c->timer = ev_source_free(c->timer);
	free(c->head);
	c->head = NULL;
	c->head_len = 0;
	if (c->client >= 0) {
		close(c->client);
		c->client = -EBADF;
		c->owner->n_conns--;
	}
}

static void on_splice_done(FdSplice *s, int error, void *userdata)
{
	Conn *c = userdata;

	c->splice = NULL;
	c->owner->n_conns--;
}

/* An answer of the host's own, best effort (the socket is non-blocking), then close. */
static void conn_refuse(Conn *c, const char *status)
{
	char reply[160];
	int n = snprintf(reply, sizeof(reply),
			 "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);

	(void)!write(c->client, reply, (size_t)n);
	conn_reset(c);
}

static int on_head_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	conn_reset(userdata);
	return 0;
}

static int on_head(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Conn *c = userdata;
	PublishHost *p = c->owner;
	ssize_t n = read(fd, c->head + c->head_len, PUBLISH_HOST_HEAD_MAX - c->head_len);
	int client, guest, r;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		conn_reset(c);
		return 0;
	}
	c->head_len += (size_t)n;
	r = publish_host_origin_check(c->head, c->head_len, p->url, p->port);
	if (r == -EAGAIN)
		return 0;
	if (r == -E2BIG) {
		conn_refuse(c, "431 Request Header Fields Too Large");
		return 0;
	}
	if (r == 0) {
		conn_refuse(c, "403 Forbidden");
		return 0;
	}
	/* No VM to reach right now (it reboots): closed, and the browser tries again.
	 * berth-vmm's socket accepts at once, even before the guest is up. */
	guest = connect_socket(p);
	if (guest < 0) {
		conn_reset(c);
		return 0;
	}
	client = c->client;
	c->client = -EBADF;
	c->source = ev_source_free(c->source);
	c->timer = ev_source_free(c->timer);
	r = fd_splice_new(p->loop, client, guest,
			  &(FdSpliceConfig){.first = c->head,
					    .first_len = c->head_len,
					    .done = on_splice_done,
					    .userdata = c},
			  &c->splice);
	free(c->head);
	c->head = NULL;
	c->head_len = 0;
	if (r < 0) /* both closed */
		p->n_conns--;
	return 0;
}

static int on_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	PublishHost *p = userdata;
	Conn *slot = NULL;
	int client;

	client = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (client < 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(p->conns) && !slot; i++)
		if (slot_free(&p->conns[i]))
			slot = &p->conns[i];
	/* Past the cap: closed, and the browser tries again. */
	if (!slot || !(slot->head = malloc(PUBLISH_HOST_HEAD_MAX))) {
		close(client);
		return 0;
	}
	slot->owner = p;
	slot->client = client;
	slot->head_len = 0;
	p->n_conns++;
	if (ev_add_io(p->loop, &slot->source, client, EPOLLIN, on_head, slot) < 0 ||
	    ev_add_time_relative(p->loop, &slot->timer, PUBLISH_HOST_HEAD_TIMEOUT_USEC,
				 on_head_timeout, slot) < 0)
		conn_reset(slot);
	return 0;
}

/* The value of header @name in the head @buf (@len bytes, lines ending \r\n), or NULL. */
static const char *header_value(const char *buf, size_t len, const char *name, size_t *ret_len)
{
	size_t n = strlen(name);
	const char *end = buf + len;

	/* Skip the request line. */
	for (const char *line = memchr(buf, '\n', len); line && line + 1 < end;) {
		const char *start = line + 1, *eol = memchr(start, '\n', (size_t)(end - start));
		size_t l = eol ? (size_t)(eol - start) : (size_t)(end - start);

		if (l > n && strncasecmp(start, name, n) == 0 && start[n] == ':') {
			const char *v = start + n + 1, *ve = start + l;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*ret_len = (size_t)(ve - v);
			return v;
		}
		line = eol;
	}
	return NULL;
}

static bool origin_is(const char *v, size_t len, const char *want)
{
	return strlen(want) == len && strncasecmp(v, want, len) == 0;
}

int publish_host_origin_check(const char *buf, size_t len, const char *url, uint16_t port)
{
	const char *end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
	char loopback[3][48];
	const char *origin;
	size_t olen;

	if (!end)
		return len >= PUBLISH_HOST_HEAD_MAX ? -E2BIG : -EAGAIN;
	origin = header_value(buf, (size_t)(end - buf) + 2, "Origin", &olen);
	if (!origin)
		return 1;
	snprintf(loopback[0], sizeof(loopback[0]), "http://127.0.0.1:%u", port);
	snprintf(loopback[1], sizeof(loopback[1]), "http://localhost:%u", port);
	snprintf(loopback[2], sizeof(loopback[2]), "http://[::1]:%u", port);
	if (origin_is(origin, olen, url))
		return 1;
	for (size_t i = 0; i < ELEMENTSOF(loopback); i++)
		if (origin_is(origin, olen, loopback[i]))
			return 1;
	return 0;
}

static bool is_loopback(int family, const void *addr)
{
	const struct in6_addr *a6 = addr;
	const uint8_t *b = addr;

	if (family == AF_INET)
		return b[0] == 127;
	if (IN6_IS_ADDR_LOOPBACK(a6))
		return true;
	return IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127;
}

/* The socket, bound and listening on @host at a free port. */
static int listen_on(const char *host, char *url, size_t urlsize, uint16_t *ret_port,
		     bool *ret_loopback, char *err, size_t errlen)
{
	struct sockaddr_storage ss = {};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	char bare[INET6_ADDRSTRLEN + 2];
	size_t n = strlen(host);
	int fd, family, r, one = 1;

	/* An IPv6 address may come in brackets, as in a URL. */
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(bare)) {
		memcpy(bare, host + 1, n - 2);
		bare[n - 2] = '\0';
	} else
		snprintf(bare, sizeof(bare), "%s", host);
	if (n < sizeof(bare) && inet_pton(AF_INET, bare, &in4->sin_addr) == 1) {
		family = AF_INET;
		in4->sin_family = AF_INET;
		len = sizeof(*in4);
		*ret_loopback = is_loopback(AF_INET, &in4->sin_addr);
	} else if (n < sizeof(bare) && inet_pton(AF_INET6, bare, &in6->sin6_addr) == 1) {
		family = AF_INET6;
		in6->sin6_family = AF_INET6;
		len = sizeof(*in6);
		*ret_loopback = is_loopback(AF_INET6, &in6->sin6_addr);
	} else {
		snprintf(
			err, errlen,
			"BERTH_PUBLISH_HOST must be an IPv4 or IPv6 address (127.0.0.1, ::1), not '%.64s'",
			host);
		return -EINVAL;
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot listen on %s: %s", host, strerror(-r));
		close(fd);
		return r;
	}
	*ret_port = ntohs(family == AF_INET ? in4->sin_port : in6->sin6_port);
	if (family == AF_INET6)
		snprintf(url, urlsize, "http://[%s]:%u", bare, *ret_port);
	else
		snprintf(url, urlsize, "http://%s:%u", bare, *ret_port);
	return fd;
}

int publish_host_new(EvLoop *loop, const char *run_dir, uint16_t port, const char *host,
		     PublishHost **ret, char **ret_warning, char *err, size_t errlen)
{
	PublishHost *p;
	bool loopback = true;
	int r;

	*ret_warning = NULL;
	if (!host)
		host = getenv("BERTH_PUBLISH_HOST");
	if (!host || !*host)
		host = PUBLISH_HOST_DEFAULT;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->run_dir = strdup(run_dir))) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->loop = loop;
	for (size_t i = 0; i < ELEMENTSOF(p->conns); i++)
		p->conns[i].client = -EBADF;
	snprintf(p->socket, sizeof(p->socket), "publish-%u.sock", port);
	p->listen_fd = listen_on(host, p->url, sizeof(p->url), &p->port, &loopback, err, errlen);
	if (p->listen_fd < 0) {
		r = p->listen_fd;
		publish_host_free(p);
		return r;
	}
	r = ev_add_io(loop, &p->listen_source, p->listen_fd, EPOLLIN, on_accept, p);
	if (r < 0) {
		snprintf(err, errlen, "cannot watch the listener: %s", strerror(-r));
		publish_host_free(p);
		return r;
	}
	if (!loopback &&
	    asprintf(ret_warning,
		     "BERTH_PUBLISH_HOST=%s: %s is served on an address other machines "
		     "may reach, not only on this one's loopback; its login alone keeps "
		     "them out. Unset BERTH_PUBLISH_HOST to serve 127.0.0.1 only",
		     host, p->url) < 0)
		*ret_warning = NULL;
	*ret = p;
	return 0;
}

PublishHost *publish_host_free(PublishHost *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < ELEMENTSOF(p->conns); i++) {
		p->conns[i].splice = fd_splice_free(p->conns[i].splice);
		if (p->conns[i].owner)
			conn_reset(&p->conns[i]);
	}
	ev_source_free(p->listen_source);
	if (p->listen_fd >= 0)
		close(p->listen_fd);
	free(p->run_dir);
	free(p);
	return NULL;
}

const char *publish_host_url(const PublishHost *p)
{
	return p->url;
}

uint16_t publish_host_port(const PublishHost *p)
{
	return p->port;
}

unsigned publish_host_connections(const PublishHost *p)
{
	return p->n_conns;
}
