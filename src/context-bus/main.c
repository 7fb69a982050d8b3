/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context-bus: the guest's publish/subscribe bus between apps (SPEC 5, docs/context-bus.md).
 *
 * A unix stream socket ($BERTH_CONTEXT_BUS_SOCKET, default /tmp/berth-context-bus.sock,
 * group $BERTH_SHARED_GID, mode 0660) carrying frames of a 4-byte big-endian length and
 * one protobuf Envelope (sdk/context_bus.proto). Who a connection is comes from
 * SO_PEERCRED and the uid table berth-init writes ($BERTH_CONTEXT_BUS_APPS), never from
 * what the client claims. It runs under agent-init as uid 9001 and needs no network.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus.h"
#include "evloop.h"
#include "listen-fd.h"
#include "identity.h"
#include "macros.h"
#include "parse-util.h"

#define SOCKET_DEFAULT "/tmp/berth-context-bus.sock"
#define SHARED_GID_DEFAULT 9999u

typedef struct Server {
	EvLoop *loop;
	Bus *bus;
	int fd;
} Server;

static unsigned env_uint(const char *name, unsigned def, unsigned min, unsigned max)
{
	const char *v = getenv(name);
	unsigned n;

	if (!v || !*v)
		return def;
	if (parse_uint_range(v, min, max, &n) < 0) {
		bus_log("WARNING: ignoring %s=%s (expected %u to %u)", name, v, min, max);
		return def;
	}
	return n;
}

static int on_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Server *srv = userdata;

	/* A few at a time, so that one busy client cannot hold the loop. */
	for (int i = 0; i < 16; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0)
			break;
		(void)bus_add_conn(srv->bus, cfd);
	}
	return 0;
}

static int on_signal(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	Server *srv = userdata;

	ev_exit(srv->loop, 0);
	return 0;
}

/* Bind @path: a stale socket left by an earlier bus goes; anything else there is not ours
 * to remove. Created 0660 through the umask, so it is never open to all even briefly. */
static int listen_unix(const char *path, unsigned gid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(path) < 0)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	old = umask(0117);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	/* SPEC 5: these only warn; the socket is 0660 either way. */
	if (gid != 0 && chown(path, (uid_t)-1, (gid_t)gid) < 0)
		bus_log("WARNING: cannot give %s to group %u: %m", path, gid);
	if (chmod(path, 0660) < 0)
		bus_log("WARNING: cannot chmod 0660 %s: %m", path);
	return fd;
}

int main(int argc, char *argv[])
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	_cleanup_free_ char *id_err = NULL;
	BusIdentity identity = {};
	const char *path, *apps;
	Server srv = {.fd = -EBADF};
	unsigned gid;
	int r;

	if (argc > 1) {
		dprintf(STDERR_FILENO,
			"usage: %s (configured by BERTH_CONTEXT_BUS_SOCKET, BERTH_CONTEXT_BUS_APPS, BERTH_SHARED_GID, BERTH_CONTEXT_BUS_MAX_CONNS; see docs/context-bus.md)\n",
			argv[0]);
		return 2;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	path = getenv("BERTH_CONTEXT_BUS_SOCKET");
	if (!path || !*path)
		path = SOCKET_DEFAULT;
	gid = env_uint("BERTH_SHARED_GID", SHARED_GID_DEFAULT, 0, 0x7fffffff);

	/* Read once, before serving: a table that is there but wrong is berth-init's bug, and
	 * naming every app "uid-<n>" would hide it. */
	apps = getenv("BERTH_CONTEXT_BUS_APPS");
	if (apps && *apps) {
		r = bus_identity_load(apps, &identity, &id_err);
		if (r < 0) {
			bus_log("FATAL: the app table %s is unusable: %s", apps,
				id_err ?: strerror(-r));
			return 1;
		}
		bus_log("app table %s: %zu app%s", apps, identity.n, identity.n == 1 ? "" : "s");
	} else
		bus_log("no app table (BERTH_CONTEXT_BUS_APPS unset): peers are named uid-<n>");

	r = ev_loop_new(&loop);
	if (r >= 0)
		r = bus_new(loop, &identity,
			    env_uint("BERTH_CONTEXT_BUS_MAX_CONNS", BUS_CONNS_MAX_DEFAULT, 1,
				     BUS_CONNS_MAX_LIMIT),
			    &srv.bus);
	if (r < 0) {
		bus_log("FATAL: cannot set up the event loop: %s", strerror(-r));
		return 1;
	}
	srv.loop = loop;
	/* berth-init may have bound the socket for us, so that apps could connect before we
	 * were up (listen-fd.h); otherwise we bind it. */
	srv.fd = listen_fd_take();
	if (srv.fd == -EBADF) {
		bus_log("FATAL: BERTH_LISTEN_FD does not name a listening unix socket on fd 3");
		bus_free(srv.bus);
		return 1;
	}
	if (srv.fd < 0)
		srv.fd = listen_unix(path, gid);
	if (srv.fd < 0) {
		bus_log("FATAL: cannot listen on %s: %s", path,
			srv.fd == -EEXIST ? "something that is not a socket is there"
					  : strerror(-srv.fd));
		bus_free(srv.bus);
		return 1;
	}
	if (ev_add_io(loop, NULL, srv.fd, EPOLLIN, on_accept, &srv) < 0 ||
	    ev_add_signal(loop, NULL, SIGTERM, on_signal, &srv) < 0 ||
	    ev_add_signal(loop, NULL, SIGINT, on_signal, &srv) < 0) {
		bus_log("FATAL: cannot set up the event loop");
		bus_free(srv.bus);
		return 1;
	}
	bus_log("listening on %s", path);
	r = ev_loop(loop);
	bus_free(srv.bus);
	(void)unlink(path);
	safe_close(srv.fd);
	bus_identity_done(&identity);
	return r < 0 ? 1 : 0;
}
