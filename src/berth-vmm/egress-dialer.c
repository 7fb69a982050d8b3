/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host egress dialer (egress-dialer.h). Each guest stream to port 1026 is bridged by
 * the MuxIo to one end of a socketpair; the dialer serves the other end: it reads the
 * request line, decides, and then splices that end with the TCP connection (fd-splice.h),
 * counting bytes each way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress-dialer.h"
#include "fd-splice.h"
#include "log.h"
#include "macros.h"

#define REQUEST_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define RESOLVE_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define CONNECT_TIMEOUT_USEC (10 * USEC_PER_SEC)
/* After an error line: how long the guest's unread bytes are drained before closing. */
#define DRAIN_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define ADDRESSES_MAX 8
/* Streams in any state at once, tunnels and refusals alike (the mux caps the guest's
 * streams at 256 too). */
#define DIALS_MAX 1024
#define RESOLVER_STACK (512 * 1024)
#define ERROR_MAX 1024

typedef enum DialState {
	DIAL_REQUEST,	 /* reading the request line */
	DIAL_RESOLVING,	 /* a worker thread runs getaddrinfo() */
	DIAL_CONNECTING, /* a non-blocking connect() to addrs[next_addr - 1] */
	DIAL_TUNNEL,	 /* bytes flow both ways */
	DIAL_CLOSING,	 /* an error line was sent; draining what the guest still sends */
} DialState;

/* One name resolution, shared by the loop and its worker thread; whoever drops the last
 * reference frees it. */
typedef struct Resolve {
	int refs;
	int efd; /* the worker writes 1 when done */
	bool done;
	char host[EGRESS_HOST_MAX + 1];
	int gai_error;
	int sys_errno;
	struct addrinfo *res;
} Resolve;

typedef struct Dial Dial;

struct EgressDialer {
	EvLoop *loop;
	MuxIo *io;
	const EgressConfig *cfg;
	uint64_t next_id;
	unsigned n_dials;
	unsigned n_active; /* resolving, connecting or tunnelling: what --egress-max-conns caps */
	Dial *dials;
};

struct Dial {
	EgressDialer *d;
	Dial *prev, *next;
	uint64_t id;
	DialState state;
	bool active;
	int guest_fd;
	EvSource *guest_src, *timer;
	char req[EGRESS_REQUEST_MAX];
	size_t req_len;
	bool parsed;
	EgressTarget target;
	Resolve *resolve;
	EvSource *resolve_src;
	struct sockaddr_storage addrs[ADDRESSES_MAX];
	socklen_t addr_lens[ADDRESSES_MAX];
	size_t n_addrs, next_addr;
	char address[INET6_ADDRSTRLEN];
	int tcp_fd;
	EvSource *tcp_src;
	size_t first_len;  /* what followed the request line in @req: the first payload */
	FdSplice *splice;  /* the tunnel, which owns both fds then */
	uint64_t bytes[2]; /* guest → remote, remote → guest */
};

/* Worker threads alive, including those whose dial gave up on them. */
static unsigned resolvers_running;

static void resolve_unref(Resolve *r)
{
	if (!r || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	if (r->res)
		freeaddrinfo(r->res);
	safe_close(r->efd);
	free(r);
}

static void *resolve_thread(void *p)
{
	Resolve *r = p;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	uint64_t one = 1;

	r->gai_error = getaddrinfo(r->host, NULL, &hints, &r->res);
	r->sys_errno = errno;
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	(void)!write(r->efd, &one, sizeof(one));
	__atomic_sub_fetch(&resolvers_running, 1, __ATOMIC_ACQ_REL);
	resolve_unref(r);
	return NULL;
}

void egress_resolver_warm_up(void)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;

	if (getaddrinfo("localhost", NULL, &hints, &res) == 0)
		freeaddrinfo(res);
}

/* --- log lines and replies --------------------------------------------------------- */

static void log_json(EgressDialer *d, json_t *o)
{
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	if (!text)
		return;
	/* One line in vmm.log, within its cap (the guest provokes these). */
	log_record(text);
}

static void log_decision(Dial *c, const char *decision, const char *code, const char *reason)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "source", "berth-vmm", "event", "egress",
			      "id", (json_int_t)c->id, "decision", decision);

	if (!o)
		return;
	json_object_set_new(o, "host", c->parsed ? json_string(c->target.host) : json_null());
	json_object_set_new(o, "port", c->parsed ? json_integer(c->target.port) : json_null());
	json_object_set_new(o, "address", c->address[0] ? json_string(c->address) : json_null());
	if (code)
		json_object_set_new(o, "code", json_string(code));
	json_object_set_new(o, "reason", json_string(reason));
	log_json(c->d, o);
}

static void dial_free(Dial *c)
{
	EgressDialer *d = c->d;

	if (c->splice)
		fd_splice_bytes(c->splice, c->bytes);
	c->splice = fd_splice_free(c->splice);
	if (c->state == DIAL_TUNNEL)
		log_json(d,
			 json_pack("{s:s, s:s, s:I, s:I, s:I}", "source", "berth-vmm", "event",
				   "egress_closed", "id", (json_int_t)c->id, "bytesUp",
				   (json_int_t)c->bytes[0], "bytesDown", (json_int_t)c->bytes[1]));
	if (c->active)
		d->n_active--;
	d->n_dials--;
	if (c->prev)
		c->prev->next = c->next;
	else
		d->dials = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ev_source_free(c->guest_src);
	ev_source_free(c->tcp_src);
	ev_source_free(c->timer);
	ev_source_free(c->resolve_src);
	resolve_unref(c->resolve);
	safe_close(c->guest_fd);
	safe_close(c->tcp_fd);
	free(c);
}

static int on_drain(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Dial *c = userdata;
	char buf[16 * 1024];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		dial_free(c);
	return 0;
}

static void set_timer(Dial *c, uint64_t usec)
{
	(void)ev_source_set_time_relative(c->timer, usec);
	(void)ev_source_set_enabled(c->timer, EV_ONESHOT);
}

/*
 * Refuse: log the decision, send {"ok":false,...}, half-close, and drain whatever the
 * guest still sends until it closes too (or DRAIN_TIMEOUT_USEC), so that the error line
 * is read before the stream ends.
 */
static void dial_refuse(Dial *c, const char *decision, const char *code, const char *error)
{
	_cleanup_free_ char *line = NULL;
	json_t *o;
	ssize_t n;

	log_decision(c, decision, code, error);
	o = json_pack("{s:b, s:s, s:s}", "ok", 0, "code", code, "error", error);
	line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (c->active) {
		c->active = false;
		c->d->n_active--;
	}
	c->resolve_src = ev_source_free(c->resolve_src);
	c->tcp_src = ev_source_free(c->tcp_src);
	c->tcp_fd = safe_close(c->tcp_fd);
	c->state = DIAL_CLOSING;
	if (!line) {
		dial_free(c);
		return;
	}
	/* The socketpair is fresh and the line short: it fits at once or the guest is gone. */
	n = send(c->guest_fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == (ssize_t)strlen(line))
		n = send(c->guest_fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n != 1) {
		dial_free(c);
		return;
	}
	(void)shutdown(c->guest_fd, SHUT_WR);
	c->guest_src = ev_source_free(c->guest_src);
	if (ev_add_io(c->d->loop, &c->guest_src, c->guest_fd, EPOLLIN, on_drain, c) < 0) {
		dial_free(c);
		return;
	}
	set_timer(c, DRAIN_TIMEOUT_USEC);
}

/* --- the tunnel ------------------------------------------------------------------- */

static void watch(EvSource *s, uint32_t events)
{
	(void)ev_source_set_io_events(s, events);
	(void)ev_source_set_enabled(s, events ? EV_ON : EV_OFF);
}

static void on_tunnel_done(FdSplice *s, int error, void *userdata)
{
	Dial *c = userdata;

	fd_splice_bytes(s, c->bytes);
	c->splice = NULL;
	dial_free(c);
}

static void tunnel_start(Dial *c, const EgressPattern *p)
{
	char reply[128], reason[EGRESS_HOST_MAX + 64];
	ssize_t n;
	int r;

	c->tcp_src = ev_source_free(c->tcp_src);
	c->timer = ev_source_free(c->timer);
	snprintf(reply, sizeof(reply), "{\"ok\":true,\"address\":\"%s\"}\n", c->address);
	n = send(c->guest_fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
	snprintf(reason, sizeof(reason), "matches --egress-allow %s", p ? p->text : "?");
	log_decision(c, "allowed", NULL, reason);
	c->state = DIAL_TUNNEL;
	if (n != (ssize_t)strlen(reply)) {
		dial_free(c);
		return;
	}
	c->guest_src = ev_source_free(c->guest_src);
	/* Bytes the guest sent right behind its request line go first. */
	r = fd_splice_new(c->d->loop, TAKE_FD(c->guest_fd), TAKE_FD(c->tcp_fd),
			  &(FdSpliceConfig){.first = c->req + c->req_len - c->first_len,
					    .first_len = c->first_len,
					    .done = on_tunnel_done,
					    .userdata = c},
			  &c->splice);
	if (r < 0)
		dial_free(c);
}

/* --- connecting --------------------------------------------------------------------- */

static void connect_next(Dial *c, int last_error);

static int on_connected(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Dial *c = userdata;
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == 0) {
		tunnel_start(c, egress_allowlist_match(&c->d->cfg->allow, c->target.host,
						       c->target.port));
		return 0;
	}
	connect_next(c, err);
	return 0;
}

static void address_text(const struct sockaddr *sa, char *buf, size_t size)
{
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, size);
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, size);
}

/* Try the next checked address; only addresses that passed the check are ever dialed. */
static void connect_next(Dial *c, int last_error)
{
	char error[ERROR_MAX];

	c->tcp_src = ev_source_free(c->tcp_src);
	c->tcp_fd = safe_close(c->tcp_fd);
	while (c->next_addr < c->n_addrs) {
		struct sockaddr *sa = (struct sockaddr *)&c->addrs[c->next_addr];

		address_text(sa, c->address, sizeof(c->address));
		c->tcp_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->tcp_fd < 0) {
			last_error = errno;
			c->next_addr++;
			continue;
		}
		if (connect(c->tcp_fd, sa, c->addr_lens[c->next_addr++]) == 0 ||
		    errno == EINPROGRESS) {
			if (ev_add_io(c->d->loop, &c->tcp_src, c->tcp_fd, EPOLLOUT, on_connected,
				      c) >= 0)
				return;
		}
		last_error = errno;
		c->tcp_fd = safe_close(c->tcp_fd);
	}
	snprintf(
		error, sizeof(error),
		"egress failed: could not connect to %s port %u at %s: %s; the host may be down or not listen on that port",
		c->target.host, c->target.port, c->address, strerror(last_error ?: EHOSTUNREACH));
	dial_refuse(c, "failed", "unreachable", error);
}

static void freeifaddrsp(struct ifaddrs **p)
{
	if (*p)
		freeifaddrs(*p);
}

/* Check every address; refuse the dial if any one is internal or the host's own. */
static void dial_addresses(Dial *c, const struct addrinfo *res)
{
	static const char *const never[_EGRESS_ADDRESS_CLASS_MAX] = {
		[EGRESS_ADDRESS_INTERNAL] =
			"the dialer never connects to loopback, private, link-local or otherwise internal addresses",
		[EGRESS_ADDRESS_OWN] =
			"the dialer never connects to the host it runs on, whose services are not the guest's to reach",
	};
	_cleanup_(freeifaddrsp) struct ifaddrs *own = NULL;
	const EgressConfig *cfg = c->d->cfg;
	char error[ERROR_MAX], why[EGRESS_REASON_MAX];

	/* Listed now, right before connecting, so an address the host got since it started
	 * counts. berth-vmm's seccomp filter lets the dialer have NETLINK_ROUTE sockets. */
	if (getifaddrs(&own) < 0) {
		snprintf(
			error, sizeof(error),
			"egress failed: the dialer cannot list this host's own addresses (%s), and connects to no address it cannot check",
			strerror(errno));
		dial_refuse(c, "failed", "unreachable", error);
		return;
	}
	c->n_addrs = c->next_addr = 0;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		EgressAddressClass class;
		const void *raw;

		if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in))
			raw = &((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		else if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(struct sockaddr_in6))
			raw = &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		else
			continue;
		class = egress_address_check(ai->ai_family, raw, &cfg->test_cidr, own, why,
					     sizeof(why));
		if (class != EGRESS_ADDRESS_OK) {
			address_text(ai->ai_addr, c->address, sizeof(c->address));
			if (c->target.family == AF_UNSPEC)
				snprintf(error, sizeof(error),
					 "egress denied: \"%s\" resolves to %s, which is %s; %s",
					 c->target.host, c->address, why, never[class]);
			else
				snprintf(error, sizeof(error), "egress denied: %s is %s; %s",
					 c->address, why, never[class]);
			dial_refuse(c, "denied", "denied", error);
			return;
		}
		if (c->n_addrs < ADDRESSES_MAX) {
			memcpy(&c->addrs[c->n_addrs], ai->ai_addr, ai->ai_addrlen);
			if (ai->ai_family == AF_INET)
				((struct sockaddr_in *)&c->addrs[c->n_addrs])->sin_port =
					htons(c->target.port);
			else
				((struct sockaddr_in6 *)&c->addrs[c->n_addrs])->sin6_port =
					htons(c->target.port);
			c->addr_lens[c->n_addrs++] = ai->ai_addrlen;
		}
	}
	if (c->n_addrs == 0) {
		snprintf(error, sizeof(error),
			 "egress failed: \"%s\" has no IPv4 or IPv6 address; check the name",
			 c->target.host);
		dial_refuse(c, "failed", "unresolved", error);
		return;
	}
	c->state = DIAL_CONNECTING;
	set_timer(c, CONNECT_TIMEOUT_USEC);
	connect_next(c, 0);
}

/* --- resolving ----------------------------------------------------------------------- */

static int on_resolved(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Dial *c = userdata;
	Resolve *r = c->resolve;
	char error[ERROR_MAX];
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
	if (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
		return 0;
	c->resolve_src = ev_source_free(c->resolve_src);
	if (r->gai_error != 0) {
		snprintf(
			error, sizeof(error),
			"egress failed: could not resolve \"%s\": %s; check the name, and that the host has working DNS",
			c->target.host,
			r->gai_error == EAI_SYSTEM ? strerror(r->sys_errno)
						   : gai_strerror(r->gai_error));
		dial_refuse(c, "failed", "unresolved", error);
		return 0;
	}
	dial_addresses(c, r->res);
	return 0;
}

static void resolve_start(Dial *c)
{
	char error[ERROR_MAX];
	pthread_attr_t attr;
	pthread_t thread;
	Resolve *r;
	int e;

	if (__atomic_load_n(&resolvers_running, __ATOMIC_ACQUIRE) >= c->d->cfg->max_conns) {
		snprintf(
			error, sizeof(error),
			"egress busy: %u name resolutions are still running (berth-vmm --egress-max-conns); retry shortly",
			c->d->cfg->max_conns);
		dial_refuse(c, "failed", "busy", error);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		dial_refuse(c, "failed", "busy", "egress busy: out of memory; retry shortly");
		return;
	}
	r->refs = 2; /* the dial and the thread */
	memcpy(r->host, c->target.host, sizeof(r->host));
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->resolve = r;
	if (r->efd < 0 ||
	    ev_add_io(c->d->loop, &c->resolve_src, r->efd, EPOLLIN, on_resolved, c) < 0) {
		r->refs = 1;
		dial_refuse(c, "failed", "busy",
			    "egress busy: cannot start a name resolution; retry shortly");
		return;
	}
	__atomic_add_fetch(&resolvers_running, 1, __ATOMIC_ACQ_REL);
	e = pthread_attr_init(&attr);
	if (e == 0) {
		(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		(void)pthread_attr_setstacksize(&attr, RESOLVER_STACK);
		e = pthread_create(&thread, &attr, resolve_thread, r);
		pthread_attr_destroy(&attr);
	}
	if (e != 0) {
		__atomic_sub_fetch(&resolvers_running, 1, __ATOMIC_ACQ_REL);
		r->refs = 1;
		snprintf(error, sizeof(error),
			 "egress busy: cannot start a name resolution (%s); retry shortly",
			 strerror(e));
		dial_refuse(c, "failed", "busy", error);
		return;
	}
	c->state = DIAL_RESOLVING;
	set_timer(c, RESOLVE_TIMEOUT_USEC);
}

/* --- the request ------------------------------------------------------------------- */

static void dial_request(Dial *c, size_t line_len)
{
	const EgressConfig *cfg = c->d->cfg;
	char error[ERROR_MAX], why[256];

	if (egress_request_parse(c->req, line_len, &c->target, why, sizeof(why)) < 0) {
		snprintf(
			error, sizeof(error),
			"bad request: %s; send one line {\"op\":\"dial\",\"host\":\"example.com\",\"port\":443} of at most %d bytes within 5 s",
			why, EGRESS_REQUEST_MAX);
		dial_refuse(c, "failed", "bad_request", error);
		return;
	}
	c->parsed = true;
	/* What followed the newline is the guest's first payload. */
	c->first_len = c->req_len - line_len - 1;
	if (!egress_allowlist_match(&cfg->allow, c->target.host, c->target.port)) {
		snprintf(
			error, sizeof(error),
			"egress denied: \"%s:%u\" is not covered by this VM's egress allowlist; declare it as a network:host: capability in the app's berth.yml (the allowlist comes only from berth-vmm --egress-allow)",
			c->target.host, c->target.port);
		dial_refuse(c, "denied", "denied", error);
		return;
	}
	if (c->d->n_active >= cfg->max_conns) {
		snprintf(
			error, sizeof(error),
			"egress busy: this VM already has %u egress connections open (berth-vmm --egress-max-conns); close one and retry",
			cfg->max_conns);
		dial_refuse(c, "failed", "busy", error);
		return;
	}
	c->active = true;
	c->d->n_active++;
	/* The request is done with: the guest's further bytes wait until the tunnel is up. */
	watch(c->guest_src, 0);
	if (c->target.family != AF_UNSPEC) {
		/* An IP literal is used as it is: never resolved. */
		struct addrinfo ai = {.ai_family = c->target.family};
		struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr = c->target.addr.v4};
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6,
					    .sin6_addr = c->target.addr.v6};

		ai.ai_addr = c->target.family == AF_INET ? (struct sockaddr *)&sin
							 : (struct sockaddr *)&sin6;
		ai.ai_addrlen = c->target.family == AF_INET ? sizeof(sin) : sizeof(sin6);
		dial_addresses(c, &ai);
		return;
	}
	resolve_start(c);
}

static int on_request(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Dial *c = userdata;
	char error[ERROR_MAX];
	ssize_t n;
	char *nl;

	n = read(fd, c->req + c->req_len, sizeof(c->req) - c->req_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0) {
		dial_free(c);
		return 0;
	}
	if (n == 0) {
		snprintf(
			error, sizeof(error),
			"bad request: the stream ended before a request line; send {\"op\":\"dial\",\"host\":\"example.com\",\"port\":443} and a newline");
		dial_refuse(c, "failed", "bad_request", error);
		return 0;
	}
	c->req_len += (size_t)n;
	nl = memchr(c->req, '\n', c->req_len);
	if (nl) {
		dial_request(c, (size_t)(nl - c->req));
		return 0;
	}
	if (c->req_len >= sizeof(c->req)) {
		snprintf(
			error, sizeof(error),
			"bad request: no newline in the first %d bytes; the request line is at most %d bytes, newline included",
			EGRESS_REQUEST_MAX, EGRESS_REQUEST_MAX);
		dial_refuse(c, "failed", "bad_request", error);
	}
	return 0;
}

static int on_timer(EvSource *src, uint64_t usec, void *userdata)
{
	Dial *c = userdata;
	char error[ERROR_MAX];

	switch (c->state) {
	case DIAL_REQUEST:
		snprintf(
			error, sizeof(error),
			"bad request: no request line within 5 s; send {\"op\":\"dial\",\"host\":\"example.com\",\"port\":443} and a newline right after opening the stream");
		dial_refuse(c, "failed", "bad_request", error);
		break;
	case DIAL_RESOLVING:
		snprintf(
			error, sizeof(error),
			"egress failed: resolving \"%s\" took longer than 5 s; check the name, and the host's DNS",
			c->target.host);
		dial_refuse(c, "failed", "unresolved", error);
		break;
	case DIAL_CONNECTING:
		snprintf(
			error, sizeof(error),
			"egress failed: connecting to %s port %u at %s took longer than 10 s; the host may be down or filtered",
			c->target.host, c->target.port, c->address);
		dial_refuse(c, "failed", "unreachable", error);
		break;
	case DIAL_TUNNEL:
		break;
	case DIAL_CLOSING:
		dial_free(c);
		break;
	}
	return 0;
}

/* A guest stream to port 1026: bridge it to one end of a socketpair and serve the other. */
static int on_open(MuxIo *io, uint32_t port, void *userdata)
{
	EgressDialer *d = userdata;
	_cleanup_close_ int mine = -EBADF;
	int sp[2], r;
	Dial *c;

	if (d->n_dials >= DIALS_MAX)
		return -EMFILE;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0)
		return -errno;
	mine = sp[0];
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(sp[1]);
		return -ENOMEM;
	}
	*c = (Dial){.d = d, .id = ++d->next_id, .guest_fd = TAKE_FD(mine), .tcp_fd = -EBADF};
	c->next = d->dials;
	if (d->dials)
		d->dials->prev = c;
	d->dials = c;
	d->n_dials++;
	r = ev_add_io(d->loop, &c->guest_src, c->guest_fd, EPOLLIN, on_request, c);
	if (r >= 0)
		r = ev_add_time_relative(d->loop, &c->timer, REQUEST_TIMEOUT_USEC, on_timer, c);
	if (r < 0) {
		dial_free(c);
		close(sp[1]);
		return r;
	}
	return sp[1];
}

int egress_dialer_new(EvLoop *loop, MuxIo *io, const EgressConfig *cfg, EgressDialer **ret)
{
	EgressDialer *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return -ENOMEM;
	*d = (EgressDialer){.loop = loop, .io = io, .cfg = cfg};
	r = mux_io_listen(io, MUX_PORT_EGRESS, on_open, d);
	if (r < 0) {
		free(d);
		return r;
	}
	*ret = d;
	return 0;
}

EgressDialer *egress_dialer_free(EgressDialer *d)
{
	if (!d)
		return NULL;
	(void)mux_io_unlisten(d->io, MUX_PORT_EGRESS);
	while (d->dials)
		dial_free(d->dials);
	free(d);
	return NULL;
}

/* --- configuration ------------------------------------------------------------------ */

int egress_config_test_cidr_from_env(EgressConfig *cfg)
{
	const char *v = getenv(EGRESS_TEST_CIDR_ENV);

	if (!v || !*v)
		return 0;
	if (egress_cidr_parse(v, &cfg->test_cidr) < 0)
		return log_error("%s=%s is not an address block (a.b.c.d/n or v6/n); unset it",
				 EGRESS_TEST_CIDR_ENV, v);
	if (cfg->test_cidr.prefix < (cfg->test_cidr.family == AF_INET ? 16u : 48u)) {
		cfg->test_cidr = (EgressCidr){};
		return log_error(
			"%s=%s is wider than /16 (IPv4) or /48 (IPv6): this test-only setting admits a test network, never whole address ranges; unset it",
			EGRESS_TEST_CIDR_ENV, v);
	}
	cfg->test_cidr_text = strdup(v);
	if (!cfg->test_cidr_text)
		return log_error_errno(-ENOMEM, "out of memory");
	log_warning("WARNING: %s=%s is set: the egress dialer connects to addresses in %s even "
		    "though they are internal. This setting is for tests only (docs/egress.md); "
		    "it is recorded in vm.json and the boot evidence. Never set it in normal use.",
		    EGRESS_TEST_CIDR_ENV, v, v);
	return 0;
}

void egress_config_done(EgressConfig *cfg)
{
	egress_allowlist_done(&cfg->allow);
	free(cfg->test_cidr_text);
	cfg->test_cidr_text = NULL;
}

json_t *egress_config_to_json(const EgressConfig *cfg)
{
	json_t *allow, *o;

	if (cfg->allow.n == 0 && !cfg->test_cidr_text)
		return json_null();
	allow = json_array();
	for (size_t i = 0; i < cfg->allow.n; i++)
		json_array_append_new(allow, json_string(cfg->allow.patterns[i].text));
	o = json_pack("{s:i, s:o, s:i}", "port", (int)MUX_PORT_EGRESS, "allow", allow, "maxConns",
		      (int)cfg->max_conns);
	if (o && cfg->test_cidr_text)
		json_object_set_new(o, "testAllowCidr", json_string(cfg->test_cidr_text));
	return o ?: json_null();
}
