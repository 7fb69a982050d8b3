/* SPDX-License-Identifier: Apache-2.0 */
/* A published guest port served on the host (publish-host.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-splice.h"
#include "macros.h"
#include "publish-host.h"

typedef struct Conn {
	struct PublishHost *owner;
	FdSplice *splice; /* NULL: the slot is free */
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

static void on_splice_done(FdSplice *s, int error, void *userdata)
{
	Conn *c = userdata;

	c->splice = NULL;
	c->owner->n_conns--;
}

static int on_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	PublishHost *p = userdata;
	int client, guest;
	Conn *slot = NULL;

	client = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (client < 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(p->conns) && !slot; i++)
		if (!p->conns[i].splice)
			slot = &p->conns[i];
	/* Past the cap, or no VM to reach right now (it reboots): closed, and the browser
	 * tries again. berth-vmm's socket accepts at once, even before the guest is up. */
	guest = slot ? connect_socket(p) : -EMFILE;
	if (guest < 0) {
		close(client);
		return 0;
	}
	slot->owner = p;
	if (fd_splice_new(p->loop, client, guest,
			  &(FdSpliceConfig){.done = on_splice_done, .userdata = slot},
			  &slot->splice) < 0)
		return 0; /* both closed */
	p->n_conns++;
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
	for (size_t i = 0; i < ELEMENTSOF(p->conns); i++)
		p->conns[i].splice = fd_splice_free(p->conns[i].splice);
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
