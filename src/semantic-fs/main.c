/* SPDX-License-Identifier: Apache-2.0 */
/*
 * semantic-fs: the /context index of a VM (SPEC 2.9; docs/context.md).
 *
 * Serves the control socket that apps' SDKs speak (frames of a 4-byte big-endian length
 * and JSON): "register" says who the kernel thinks the caller is, "tag" sets a file's task
 * and related apps, "query" ranks the files of the context root by keyword with SQLite
 * FTS5's bm25. Who a caller is comes from SO_PEERCRED and who made a file from its owner
 * uid, both mapped to app names through the file berth-init writes; what a client says it
 * is is logged and never used.
 *
 * It runs under agent-init as its own uid (berth-semantic-fs, 9005, in group berth): read
 * the context root, write only its own directory (the socket and the index), no network.
 * One thread and one event loop: each request is answered before the next is read, and a
 * connection's answer must be taken before it is read again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "apps.h"
#include "evloop.h"
#include "listen-fd.h"
#include "index.h"
#include "macros.h"
#include "parse-util.h"
#include "request.h"

#define SOCKET_DEFAULT "/tmp/berth-semantic-fs.sock"
#define CONTEXT_DEFAULT "/context"
#define INDEX_DEFAULT "/run/berth/semantic-fs/index"
#define APPS_DEFAULT "/run/berth/semantic-fs-config/apps.json"
#define SHARED_GID_DEFAULT 9999
#define CONNS_MAX 64
/* So that one app holding connections open cannot keep the others out. */
#define CONNS_PER_UID_MAX 16
/* One answer; a query's (SFS_LIMIT_MAX entries within the request caps) fits many times. */
#define ANSWER_MAX (4 * 1024 * 1024)

typedef struct Server Server;

typedef struct Conn {
	Server *srv;
	unsigned long n;
	int fd;
	EvSource *source;
	SfsCaller caller;
	pid_t pid;
	unsigned char head[4];
	size_t head_len;
	char *body;
	size_t body_len, body_want;
	unsigned long long skip; /* bytes of an over-cap frame still to drop */
	char *out;
	size_t out_len, out_off;
	struct Conn *next;
} Conn;

struct Server {
	EvLoop *loop;
	SfsIndex *index;
	SfsApps apps;
	int context_fd;
	const char *context;
	Conn *conns;
	unsigned n_conns;
	unsigned long next_conn;
};

static _printf_(1, 2) void say(const char *fmt, ...)
{
	va_list ap;

	fputs("[semantic-fs] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void conn_free(Conn *c)
{
	Server *s = c->srv;

	for (Conn **p = &s->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	s->n_conns--;
	ev_source_free(c->source);
	safe_close(c->fd);
	free(c->body);
	free(c->out);
	free(c);
}

/* Read when there is no answer waiting to go out, write when there is. */
static void conn_arm(Conn *c)
{
	(void)ev_source_set_io_events(c->source, c->out ? EPOLLOUT : EPOLLIN);
}

static int conn_queue(Conn *c, json_t *answer)
{
	_cleanup_(json_decrefp) json_t *a = answer;
	_cleanup_(json_decrefp) json_t *big = NULL;
	int k;

	if (!a)
		return -ENOMEM;
	k = sfs_frame_encode(a, ANSWER_MAX, &c->out, &c->out_len);
	if (k == -E2BIG) {
		big = sfs_answer_error(json_object_get(a, "id"), "the answer is over the cap");
		k = big ? sfs_frame_encode(big, ANSWER_MAX, &c->out, &c->out_len) : -ENOMEM;
	}
	if (k < 0)
		return k;
	c->out_off = 0;
	conn_arm(c);
	return 0;
}

static json_t *do_register(Conn *c, const SfsRequest *rq)
{
	json_t *a = sfs_answer_ok(rq->id);

	if (rq->claimed_app && *rq->claimed_app && !streq(rq->claimed_app, c->caller.name))
		say("conn %lu claims to be \"%s\"; the kernel says uid %u, recorded as \"%s\"",
		    c->n, rq->claimed_app, (unsigned)c->caller.uid, c->caller.name);
	else
		say("conn %lu registered as \"%s\" (uid %u)", c->n, c->caller.name,
		    (unsigned)c->caller.uid);
	if (a)
		json_object_set_new(a, "app", json_string(c->caller.name));
	return a;
}

static json_t *do_tag(Conn *c, const SfsRequest *rq)
{
	json_t *entry = NULL, *a;
	char err[SFS_PATH_MAX + 256];
	int k;

	k = sfs_index_tag(c->srv->index, &c->caller, rq->path, rq->task, rq->related, rq->n_related,
			  rq->has_related, &entry, err, sizeof(err));
	if (k < 0) {
		if (k == -ENOMEM)
			snprintf(err, sizeof(err), "out of memory");
		return sfs_answer_error(rq->id, err);
	}
	say("\"%s\" tagged \"%s\"", c->caller.name, rq->path);
	a = sfs_answer_ok(rq->id);
	if (a)
		json_object_set_new(a, "file", entry);
	else
		json_decref(entry);
	return a;
}

static json_t *do_query(Conn *c, const SfsRequest *rq)
{
	_cleanup_free_ char *match = sfs_query_match(rq->text);
	json_t *results = NULL, *a;
	int k;

	if (!match)
		return sfs_answer_error(rq->id, "out of memory");
	/* The files are the truth: what any app wrote since the last call is found now. */
	k = sfs_index_sync(c->srv->index, NULL);
	if (k < 0)
		say("WARNING: cannot bring the index up to date: %s", strerror(-k));
	k = sfs_index_query(c->srv->index, &c->caller, match, rq->limit, &results);
	if (k < 0)
		return sfs_answer_error(rq->id, "the index failed to answer");
	a = sfs_answer_ok(rq->id);
	if (a) {
		json_object_set_new(a, "ranking", json_string("keyword"));
		json_object_set_new(a, "results", results);
	} else
		json_decref(results);
	return a;
}

static int conn_frame(Conn *c)
{
	_cleanup_(sfs_request_done) SfsRequest rq = {};
	char err[512];
	json_t *a;
	int k;

	k = sfs_request_parse(c->body, c->body_len, &rq, err, sizeof(err));
	c->body = (free(c->body), NULL);
	c->body_len = c->body_want = 0;
	if (k == -ENOMEM)
		return k;
	if (k < 0)
		return conn_queue(c, sfs_answer_error(rq.id, err));
	switch (rq.op) {
	case SFS_OP_REGISTER:
		a = do_register(c, &rq);
		break;
	case SFS_OP_TAG:
		a = do_tag(c, &rq);
		break;
	case SFS_OP_QUERY:
		a = do_query(c, &rq);
		break;
	case _SFS_OP_MAX:
	case _SFS_OP_INVALID:
	default:
		a = sfs_answer_error(rq.id, "unknown op");
		break;
	}
	return conn_queue(c, a);
}

/* One read of what the connection is waiting for. 0 to go on, 1 at EOF, or -errno. */
static int conn_read(Conn *c)
{
	char scratch[64 * 1024];
	ssize_t n;

	if (c->skip > 0) {
		n = read(c->fd, scratch, (size_t)MIN(c->skip, (unsigned long long)sizeof(scratch)));
		if (n > 0)
			c->skip -= (unsigned long long)n;
	} else if (c->body) {
		n = read(c->fd, c->body + c->body_len, c->body_want - c->body_len);
		if (n > 0 && (c->body_len += (size_t)n) == c->body_want)
			return conn_frame(c);
	} else {
		n = read(c->fd, c->head + c->head_len, 4 - c->head_len);
		if (n > 0 && (c->head_len += (size_t)n) == 4) {
			uint32_t len = (uint32_t)c->head[0] << 24 | (uint32_t)c->head[1] << 16 |
				       (uint32_t)c->head[2] << 8 | c->head[3];
			char msg[128];

			c->head_len = 0;
			if (len > SFS_REQUEST_MAX) {
				/* Dropped unread, never allocated; the connection goes on. */
				c->skip = len;
				snprintf(msg, sizeof(msg),
					 "request of %u bytes is over the cap of %d", len,
					 SFS_REQUEST_MAX);
				return conn_queue(c, sfs_answer_error(NULL, msg));
			}
			c->body = malloc(MAX(len, 1u));
			if (!c->body)
				return -ENOMEM;
			c->body_want = len;
			c->body_len = 0;
			if (len == 0)
				return conn_frame(c);
		}
	}
	if (n == 0)
		return 1;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return 0;
}

static int conn_write(Conn *c)
{
	ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	c->out_off += (size_t)n;
	if (c->out_off == c->out_len) {
		c->out = (free(c->out), NULL);
		c->out_len = c->out_off = 0;
		conn_arm(c);
	}
	return 0;
}

static int on_conn(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Conn *c = userdata;
	int k = 0;

	if (c->out)
		k = conn_write(c);
	else if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
		k = conn_read(c);
	if (k != 0) {
		if (k < 0 && k != -ECONNRESET && k != -EPIPE)
			say("conn %lu closed: %s", c->n, strerror(-k));
		conn_free(c);
	}
	return 0;
}

static void peer_identity(Server *s, Conn *c)
{
	struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	socklen_t len = sizeof(cred);
	socklen_t glen = sizeof(c->caller.groups);
	const SfsApp *app;

	/* No credentials, no identity: the connection is nobody and may read nothing. */
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		cred.uid = (uid_t)-1;
		cred.gid = (gid_t)-1;
	}
	c->pid = cred.pid;
	c->caller.uid = cred.uid;
	c->caller.gid = cred.gid;
	/* The supplementary groups, also as the kernel had them at connect(); more than we
	 * keep (ERANGE) is taken as none, which only ever grants less. */
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, c->caller.groups, &glen) == 0)
		c->caller.n_groups = glen / sizeof(gid_t);
	app = sfs_apps_find(&s->apps, cred.uid);
	c->caller.may_read = cred.uid != (uid_t)-1 && (!app || app->read);
	sfs_apps_identity(&s->apps, cred.uid, c->caller.name);
}

static unsigned conns_of(const Server *s, uid_t uid)
{
	unsigned n = 0;

	for (const Conn *c = s->conns; c; c = c->next)
		n += c->caller.uid == uid;
	return n;
}

static int on_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Server *s = userdata;
	Conn *c;
	int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (cfd < 0)
		return 0;
	if (s->n_conns >= CONNS_MAX) {
		say("WARNING: %d connections open, the cap: refusing one", CONNS_MAX);
		close(cfd);
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(cfd);
		return 0;
	}
	*c = (Conn){.srv = s, .n = ++s->next_conn, .fd = cfd};
	if (ev_add_io(s->loop, &c->source, cfd, EPOLLIN, on_conn, c) < 0) {
		close(cfd);
		free(c);
		return 0;
	}
	c->next = s->conns;
	s->conns = c;
	s->n_conns++;
	peer_identity(s, c);
	if (conns_of(s, c->caller.uid) > CONNS_PER_UID_MAX) {
		say("WARNING: \"%s\" has %d connections open, the cap: refusing one",
		    c->caller.name, CONNS_PER_UID_MAX);
		conn_free(c);
		return 0;
	}
	say("conn %lu from uid %u pid %d is \"%s\"", c->n, (unsigned)c->caller.uid, (int)c->pid,
	    c->caller.name);
	return 0;
}

static int on_signal(EvSource *src, const struct signalfd_siginfo *si, void *userdata)
{
	Server *s = userdata;

	say("signal %u: stopping", si->ssi_signo);
	ev_exit(s->loop, 0);
	return 0;
}

static int listen_on(const char *path, gid_t gid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket from the last run goes; anything else at the path is not ours. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		(void)unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (gid != 0 && chown(path, (uid_t)-1, gid) < 0)
		say("WARNING: cannot give %s to group %u: %m", path, (unsigned)gid);
	if (chmod(path, 0660) < 0)
		say("WARNING: cannot chmod %s: %m", path);
	if (listen(fd, 64) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static const char *opt_or_env(const char *opt, const char *env, const char *def)
{
	const char *v = getenv(env);

	return opt ?: (v && *v ? v : def);
}

static void usage(FILE *f)
{
	fputs("usage: semantic-fs [--socket PATH] [--context DIR] [--index DIR] [--apps FILE]\n"
	      "                   [--socket-group GID]\n"
	      "Defaults (or BERTH_SEMANTIC_FS_SOCKET, BERTH_CONTEXT_MOUNT, BERTH_SEMANTIC_FS_INDEX,\n"
	      "BERTH_SEMANTIC_FS_APPS, BERTH_SHARED_GID): " SOCKET_DEFAULT ", " CONTEXT_DEFAULT
	      ",\n" INDEX_DEFAULT ", " APPS_DEFAULT ", 9999 (0: keep the group).\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"context", required_argument, NULL, 'c'},
		{"index", required_argument, NULL, 'i'},
		{"apps", required_argument, NULL, 'a'},
		{"socket-group", required_argument, NULL, 'g'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	const char *o_socket = NULL, *o_context = NULL, *o_index = NULL, *o_apps = NULL,
		   *o_gid = NULL;
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	Server s = {.context_fd = -EBADF};
	SfsSyncStats st = {};
	char err[512];
	unsigned gid = SHARED_GID_DEFAULT;
	const char *sock, *gidtext;
	int c, k, lfd;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
		switch (c) {
		case 's':
			o_socket = optarg;
			break;
		case 'c':
			o_context = optarg;
			break;
		case 'i':
			o_index = optarg;
			break;
		case 'a':
			o_apps = optarg;
			break;
		case 'g':
			o_gid = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	umask(077);
	sock = opt_or_env(o_socket, "BERTH_SEMANTIC_FS_SOCKET", SOCKET_DEFAULT);
	s.context = opt_or_env(o_context, "BERTH_CONTEXT_MOUNT", CONTEXT_DEFAULT);
	gidtext = opt_or_env(o_gid, "BERTH_SHARED_GID", NULL);
	if (gidtext && parse_uint_range(gidtext, 0, 0xfffffffeu, &gid) < 0) {
		say("FATAL: not a group id: %s", gidtext);
		return 1;
	}
	/* Attribution is the daemon's point: without the map it would be wrong, so no start. */
	k = sfs_apps_load(opt_or_env(o_apps, "BERTH_SEMANTIC_FS_APPS", APPS_DEFAULT), &s.apps, err,
			  sizeof(err));
	if (k < 0) {
		say("FATAL: cannot read the apps file %s: %s",
		    opt_or_env(o_apps, "BERTH_SEMANTIC_FS_APPS", APPS_DEFAULT), err);
		return 1;
	}
	s.context_fd = open(s.context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.context_fd < 0) {
		say("FATAL: cannot open the context root %s: %m", s.context);
		return 1;
	}
	k = sfs_index_open(opt_or_env(o_index, "BERTH_SEMANTIC_FS_INDEX", INDEX_DEFAULT),
			   s.context_fd, &s.apps, &s.index, err, sizeof(err));
	if (k < 0) {
		say("FATAL: %s", err);
		return 1;
	}
	k = sfs_index_sync(s.index, &st);
	if (k < 0)
		say("WARNING: cannot index %s: %s", s.context, strerror(-k));
	else
		say("indexed %s: %u files, %u updated, %u removed", s.context, st.files, st.updated,
		    st.removed);
	if (ev_loop_new(&loop) < 0) {
		say("FATAL: cannot make the event loop");
		return 1;
	}
	s.loop = loop;
	/* berth-init may have bound the socket for us, so that apps could connect while we
	 * indexed (listen-fd.h); otherwise we bind it. */
	lfd = listen_fd_take();
	if (lfd == -EBADF) {
		say("FATAL: BERTH_LISTEN_FD does not name a listening unix socket on fd 3");
		return 1;
	}
	if (lfd < 0)
		lfd = listen_on(sock, (gid_t)gid);
	if (lfd < 0) {
		say("FATAL: cannot listen on %s: %s", sock, strerror(-lfd));
		return 1;
	}
	if (ev_add_io(loop, NULL, lfd, EPOLLIN, on_accept, &s) < 0 ||
	    ev_add_signal(loop, NULL, SIGTERM, on_signal, &s) < 0 ||
	    ev_add_signal(loop, NULL, SIGINT, on_signal, &s) < 0) {
		say("FATAL: cannot watch the socket");
		return 1;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	say("%zu apps known; ranking: keyword (SQLite FTS5 bm25)", s.apps.n);
	/* berth-init waits for this line (daemon.c's ready_line). */
	say("listening on %s", sock);
	k = ev_loop(loop);
	while (s.conns)
		conn_free(s.conns);
	sfs_index_close(s.index);
	close(lfd);
	(void)unlink(sock);
	safe_close(s.context_fd);
	return k < 0 ? 1 : 0;
}
