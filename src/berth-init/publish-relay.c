/* SPDX-License-Identifier: Apache-2.0 */
/* Published ports: the host's streams relayed to the guest's 127.0.0.1 (publish-relay.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "publish-relay.h"

/* The kernel's TCP_LISTEN, as the st column of /proc/net/tcp prints it. */
#define TCP_STATE_LISTEN 0x0A
/* Of /proc/net/tcp and tcp6 together: some thousands of sockets. A table larger than this
 * cannot be checked, and the stream is refused. */
#define TCP_TABLE_MAX (4u * 1024 * 1024)
#define LINE_FIELDS 8 /* sl, local, remote, st, queues, timer, retransmits, uid */

typedef struct Route {
	uint16_t port;
	const PublishPort *row;
	const PublishRelayApp *app;
	unsigned long streams, refused;
} Route;

static Route routes[PUBLISH_PORTS_MAX];
static size_t n_routes;

/* Split @line (@len bytes) at blanks into up to @max fields. Returns how many. */
static size_t split_fields(const char *line, size_t len, const char **f, size_t *flen, size_t max)
{
	size_t n = 0, i = 0;

	while (i < len && n < max) {
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == len)
			break;
		f[n] = line + i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		flen[n] = (size_t)(line + i - f[n]);
		n++;
	}
	return n;
}

/* Hexadecimal digits only, at most 8 of them (a port, a state). */
static int parse_hex(const char *s, size_t len, unsigned *ret)
{
	unsigned v = 0;

	if (len == 0 || len > 8)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
						    : 16;

		if (d > 15)
			return -EBADMSG;
		v = v << 4 | d;
	}
	*ret = v;
	return 0;
}

static int parse_decimal(const char *s, size_t len, unsigned *ret)
{
	unsigned long v = 0;

	if (len == 0 || len > 10)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return -EBADMSG;
	*ret = (unsigned)v;
	return 0;
}

/* One socket's line: is it a listener on @port, and whose? Returns 1 (yes, *@ret_uid),
 * 0 (another socket), or -EBADMSG. */
static int listener_of(const char *line, size_t len, uint16_t port, uid_t *ret_uid)
{
	const char *f[LINE_FIELDS], *colon;
	size_t flen[LINE_FIELDS];
	unsigned local_port, state, uid;

	if (split_fields(line, len, f, flen, LINE_FIELDS) < LINE_FIELDS)
		return -EBADMSG;
	/* local_address: the address in hex, a colon, the port in hex. */
	colon = memrchr(f[1], ':', flen[1]);
	if (!colon || parse_hex(colon + 1, (size_t)(f[1] + flen[1] - colon - 1), &local_port) < 0 ||
	    parse_hex(f[3], flen[3], &state) < 0 || parse_decimal(f[7], flen[7], &uid) < 0)
		return -EBADMSG;
	if (state != TCP_STATE_LISTEN || local_port != port)
		return 0;
	*ret_uid = (uid_t)uid;
	return 1;
}

int publish_relay_listeners_check(const char *text, size_t len, uint16_t port, uid_t uid,
				  uid_t *ret_other)
{
	const char *end = text + len, *p = text;
	bool header = true;
	int n = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
		uid_t owner;
		int r;

		/* The first line names the columns. */
		if (header || eol == p) {
			header = false;
			p = eol + 1;
			continue;
		}
		r = listener_of(p, (size_t)(eol - p), port, &owner);
		if (r < 0)
			return r;
		if (r > 0 && owner != uid) {
			*ret_other = owner;
			return -EPERM;
		}
		n += r;
		p = eol + 1;
	}
	return n;
}

/* Every listener on @port, IPv4 and IPv6 (a dual-stack one takes 127.0.0.1 too). */
static int check_listeners(uint16_t port, uid_t uid, uid_t *ret_other)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	int total = 0;

	for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
		_cleanup_free_ char *text = NULL;
		size_t len;
		int r;

		r = read_full_file(tables[i], TCP_TABLE_MAX, &text, &len);
		if (r == -ENOENT && i > 0)
			continue; /* a kernel without IPv6 */
		if (r < 0)
			return r;
		r = publish_relay_listeners_check(text, len, port, uid, ret_other);
		if (r < 0)
			return r;
		total += r;
	}
	return total;
}

static int publish_accept(MuxIo *io, uint32_t mux_port, void *userdata)
{
	Route *rt = userdata;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(rt->port)};
	uid_t other = 0;
	int fd, r;

	uid_t owner = rt->row->listener_uid ? (uid_t)rt->row->listener_uid : rt->app->uid;

	r = check_listeners(rt->port, owner, &other);
	if (r == 0)
		return -ECONNREFUSED; /* not listening yet */
	if (r < 0) {
		/* Counted, and said once: the host may retry at will. */
		if (rt->refused++ == 0)
			journal_event(
				"publish_refused",
				r == -EPERM ? json_pack("{s:i, s:s, s:s, s:i}", "port", rt->port,
							"app", rt->app->name, "reason",
							"another uid listens on the port",
							"listenerUid", (int)other)
					    : json_pack("{s:i, s:s, s:s}", "port", rt->port, "app",
							rt->app->name, "reason", strerror(-r)));
		return -ECONNREFUSED;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Non-blocking, as for an app's RPC socket: a listener whose backlog is full must not
	 * stall PID 1. The bridge writes once the connection is up. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		r = -errno;
		close(fd);
		return r;
	}
	rt->streams++;
	return fd;
}

/* The one app whose policy declares @row's capability, or NULL with @why saying why not. */
static const PublishRelayApp *serving_app(const PublishPort *row, const PublishRelayApp *apps,
					  size_t n_apps, char *why, size_t whylen)
{
	const PublishRelayApp *found = NULL;
	unsigned n = 0;

	for (size_t i = 0; i < n_apps; i++)
		if (apps[i].policy && publish_policy_declares(apps[i].policy, row->ns)) {
			found = &apps[i];
			n++;
		}
	if (n == 1)
		return found;
	if (n == 0)
		snprintf(why, whylen, "no app that runs declares a %s: capability", row->ns);
	else
		snprintf(why, whylen, "%u apps declare a %s: capability; at most one may", n,
			 row->ns);
	return NULL;
}

int publish_relay_setup(MuxIo *io, const json_t *ports, const PublishRelayApp *apps, size_t n_apps)
{
	const json_t *v;
	size_t k;

	if (!ports)
		return 0;
	if (!json_is_array(ports) || json_array_size(ports) > PUBLISH_PORTS_MAX) {
		journal_logf("boot plan: \"publish\" is not a list of at most %d ports",
			     PUBLISH_PORTS_MAX);
		return -EINVAL;
	}
	json_array_foreach(ports, k, v) {
		json_int_t port = json_integer_value(v);
		const PublishPort *row = json_is_integer(v) && port > 0 && port <= UINT16_MAX
						 ? publish_port_lookup((uint16_t)port)
						 : NULL;

		for (size_t i = 0; row && i < n_routes; i++)
			if (routes[i].port == port)
				row = NULL;
		if (!row) {
			journal_logf("boot plan: \"publish\" entry %zu is not a port that may be "
				     "published, or is there twice",
				     k);
			return -EINVAL;
		}
		routes[n_routes++] = (Route){.port = (uint16_t)port, .row = row};
	}
	for (size_t i = 0; i < n_routes; i++) {
		Route *rt = &routes[i];
		uint32_t mux_port = MUX_PORT_PUBLISH_BASE + (uint32_t)i;
		char why[128];
		int r;

		rt->app = serving_app(rt->row, apps, n_apps, why, sizeof(why));
		if (!rt->app) {
			journal_event("publish_refused",
				      json_pack("{s:i, s:s}", "port", rt->port, "reason", why));
			continue;
		}
		r = mux_io_listen(io, mux_port, publish_accept, rt);
		if (r < 0)
			return r;
		journal_event("published", json_pack("{s:i, s:i, s:s, s:i}", "port", rt->port,
						     "muxPort", (int)mux_port, "app", rt->app->name,
						     "uid", (int)rt->app->uid));
	}
	return 0;
}
