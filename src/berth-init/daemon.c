/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "journal.h"
#include "listen-fd.h"
#include "parse-util.h"
#include "policy.h"
#include "macros.h"

static const char *const state_names[_DAEMON_STATE_MAX] = {
	[DAEMON_NONE] = "none",	  [DAEMON_HELD] = "held",     [DAEMON_STARTING] = "starting",
	[DAEMON_READY] = "ready", [DAEMON_EXITED] = "exited",
};

const char *daemon_state_name(DaemonState s)
{
	return s >= 0 && s < _DAEMON_STATE_MAX ? state_names[s] : "unknown";
}

/* Call the ready callback once. */
static void ready_done(Daemon *d, bool ok, const char *why)
{
	daemon_ready_t cb = d->cb;

	d->cb = NULL;
	d->timer = ev_source_free(d->timer);
	d->probe = ev_source_free(d->probe);
	if (cb)
		cb(ok, why, d->userdata);
	else if (!ok && d->socket)
		/* Activated: the apps started already; with the daemon gone, so is its socket,
		 * and they are refused at connect. */
		journal_logf("%s; its socket %s is closed", why, d->socket);
}

/* Bind and listen on @d->socket as root, for the daemon to take over (listen-fd.h). */
static int bind_socket(const Daemon *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(d->socket) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, d->socket);
	/* A stale socket from the template or a crashed daemon goes; nothing else may be
	 * there. */
	if (lstat(d->socket, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(d->socket) < 0))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chown(d->socket, 0, d->socket_gid) < 0 || chmod(d->socket, 0660) < 0 ||
	    listen(fd, 128) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Set the nice value of every thread of @pid (each thread has its own). */
static int renice_threads(pid_t pid, int nice)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int r = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.' &&
		    setpriority(PRIO_PROCESS, (id_t)atoi(e->d_name), nice) < 0)
			r = -errno;
	closedir(dir);
	return r;
}

static void now_ready(Daemon *d)
{
	int start_nice = 0, r;

	d->state = DAEMON_READY;
	/* Started: a held daemon serves at the apps' priority from now on. */
	if (d->hold) {
		errno = 0;
		start_nice = getpriority(PRIO_PROCESS, d->pid);
		if (errno != 0)
			start_nice = 0;
		r = renice_threads(d->pid, 0);
		if (r < 0)
			journal_logf("cannot give the %s its priority back: %s", d->title,
				     strerror(-r));
	}
	/* activated: on the socket berth-init bound, which apps could connect to before. */
	journal_event("daemon_started",
		      json_pack("{s:s, s:i, s:i, s:s, s:s, s:b, s:i}", "daemon", d->name, "pid",
				(int)d->pid, "uid", (int)d->uid, "app", d->app, "listen", d->listen,
				"activated", d->socket != NULL, "startNice", start_nice));
	ready_done(d, true, NULL);
}

static void stream_line(Daemon *d, DaemonStream *s, const char *line, size_t len)
{
	size_t n = d->ready_line ? strlen(d->ready_line) : 0;

	journal_log(d->name, s->name, line, len);
	if (d->state == DAEMON_STARTING && n > 0 && streq(s->name, "stderr") && len > n &&
	    strneq(line, d->ready_line, n))
		now_ready(d);
}

/* Does a connection to @target (a unix socket path, or 127.0.0.1:<port>) succeed now? */
static bool connects(const char *target)
{
	_cleanup_close_ int fd = -EBADF;
	uint16_t port;

	if (target[0] == '/') {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		if (strlen(target) >= sizeof(sa.sun_path))
			return false;
		strcpy(sa.sun_path, target);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	}
	if (!strneq(target, "127.0.0.1:", 10) ||
	    parse_port(target + 10, strlen(target + 10), &port) < 0)
		return false;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
}

static int on_probe(EvSource *s, uint64_t usec, void *userdata)
{
	Daemon *d = userdata;

	if (d->state != DAEMON_STARTING)
		return 0;
	if (connects(d->ready_connect)) {
		now_ready(d);
		return 0;
	}
	d->probe = ev_source_free(d->probe);
	(void)ev_add_time_relative(d->loop, &d->probe, DAEMON_PROBE_USEC, on_probe, d);
	return 0;
}

static int on_stream(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	DaemonStream *s = userdata;
	Daemon *d = s->owner;
	ssize_t n = read(fd, s->buf + s->len, sizeof(s->buf) - s->len);
	size_t start = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (s->len > 0)
			stream_line(d, s, s->buf, s->len);
		s->len = 0;
		s->source = ev_source_free(s->source);
		s->fd = safe_close(s->fd);
		return 0;
	}
	s->len += (size_t)n;
	for (size_t i = 0; i < s->len; i++)
		if (s->buf[i] == '\n') {
			stream_line(d, s, s->buf + start, i - start);
			start = i + 1;
		}
	/* A line longer than the buffer is cut, not allowed to grow without bound. */
	if (start == 0 && s->len == sizeof(s->buf)) {
		stream_line(d, s, s->buf, s->len);
		s->len = 0;
		return 0;
	}
	memmove(s->buf, s->buf + start, s->len - start);
	s->len -= start;
	return 0;
}

typedef struct Env {
	char *v[DAEMON_ENV_MAX + 1];
	size_t n;
} Env;

static void env_add(Env *e, const char *k, const char *v)
{
	if (e->n < DAEMON_ENV_MAX && asprintf(&e->v[e->n], "%s=%s", k, v) >= 0)
		e->n++;
}

static void build_env(const Daemon *d, const char *const *extra, const json_t *secrets, Env *e)
{
	char uid[16], home[64];
	const char *name;
	json_t *v;

	snprintf(uid, sizeof(uid), "%u", (unsigned)d->uid);
	snprintf(home, sizeof(home), "/tmp/%s", d->user);
	env_add(e, "PATH", "/usr/sbin:/usr/bin:/bin");
	env_add(e, "LANG", "C.UTF-8");
	env_add(e, "HOME", home);
	env_add(e, "TMPDIR", home);
	env_add(e, "BERTH_BOOT_ID", getenv("BERTH_BOOT_ID") ?: "unknown");
	env_add(e, "BERTH_REQUIRE_ENFORCEMENT", "1");
	env_add(e, "BERTH_CAPABILITY_POLICY", d->policy);
	env_add(e, "BERTH_APP_UID", uid);
	env_add(e, "BERTH_APP_GID", uid);
	if (d->listen_fd >= 0)
		env_add(e, LISTEN_FD_ENV, "3");
	for (size_t i = 0; extra && extra[i] && e->n < DAEMON_ENV_MAX; i++)
		if ((e->v[e->n] = strdup(extra[i])))
			e->n++;
	/* The daemon's secrets last; a name set above is not overridden (as for an app). */
	json_object_foreach((json_t *)secrets, name, v) {
		bool taken = false;

		for (size_t i = 0; i < e->n && !taken; i++)
			taken = strneq(e->v[i], name, strlen(name)) && e->v[i][strlen(name)] == '=';
		if (!taken && json_is_string(v))
			env_add(e, name, json_string_value(v));
	}
	e->v[e->n] = NULL;
}

static _noreturn_ void exec_daemon(const Daemon *d, const char *const *extra, const json_t *secrets,
				   int out_fd, int err_fd)
{
	Env env = {};
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* berth-init blocks the signals its loop reads through a signalfd; a child must not
	 * inherit that. */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	build_env(d, extra, secrets, &env);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0)
		_exit(126);
	setsid();
	if (chdir("/") < 0)
		_exit(126);
	if (d->hold)
		(void)setpriority(PRIO_PROCESS, 0, DAEMON_START_NICE);
	const char *argv[DAEMON_ARGS_MAX + 3] = {"agent-init", d->binary};
	size_t n = 2;

	for (size_t i = 0; d->args && d->args[i] && n < DAEMON_ARGS_MAX + 2; i++)
		argv[n++] = d->args[i];
	argv[n] = NULL;
	/* Its socket, if berth-init bound it, is fd 3 and the one agent-init lets through. */
	if (d->listen_fd >= 0 &&
	    (dup2(d->listen_fd, LISTEN_FD) < 0 || fcntl(LISTEN_FD, F_SETFD, 0) < 0))
		_exit(126);
	execve(DAEMON_AGENT_INIT, (char *const *)argv, env.v);
	dprintf(STDERR_FILENO, "[berth-init] cannot exec %s: %m\n", DAEMON_AGENT_INIT);
	_exit(127);
}

static int on_ready_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	Daemon *d = userdata;
	char why[128];

	if (d->state != DAEMON_STARTING)
		return 0;
	(void)kill(d->pid, SIGKILL);
	snprintf(why, sizeof(why), "the %s did not say it was listening within %d s", d->title,
		 (int)(DAEMON_READY_TIMEOUT_USEC / USEC_PER_SEC));
	ready_done(d, false, why);
	return 0;
}

static void spawn(Daemon *d, const char *const *extra, const json_t *secrets);

void daemon_start(Daemon *d, EvLoop *loop, const char *const *extra, const json_t *secrets,
		  daemon_ready_t cb, void *userdata)
{
	d->loop = loop;
	d->cb = cb;
	d->userdata = userdata;
	d->listen_fd = -EBADF;
	if (d->socket) {
		int r = bind_socket(d);

		if (r < 0) {
			char why[256];

			snprintf(why, sizeof(why), "cannot bind the %s's socket %s: %s", d->title,
				 d->socket, strerror(-r));
			ready_done(d, false, why);
			return;
		}
		d->listen_fd = r;
	}
	/* Held: bound and answered for now, run on daemon_release(). */
	if (d->hold && d->socket) {
		daemon_ready_t early = d->cb;

		d->held_extra = extra;
		d->held_secrets = secrets;
		d->state = DAEMON_HELD;
		d->cb = NULL;
		if (early)
			early(true, NULL, userdata);
		return;
	}
	spawn(d, extra, secrets);
}

void daemon_release(Daemon *d)
{
	if (d->state != DAEMON_HELD)
		return;
	d->state = DAEMON_NONE;
	spawn(d, d->held_extra, d->held_secrets);
}

static void spawn(Daemon *d, const char *const *extra, const json_t *secrets)
{
	int out[2] = {-EBADF, -EBADF}, err[2] = {-EBADF, -EBADF};
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		safe_close(out[0]);
		safe_close(out[1]);
		d->listen_fd = safe_close(d->listen_fd);
		ready_done(d, false, "cannot make pipes for the daemon");
		return;
	}
	pid = fork();
	if (pid < 0) {
		safe_close(out[0]);
		safe_close(out[1]);
		safe_close(err[0]);
		safe_close(err[1]);
		d->listen_fd = safe_close(d->listen_fd);
		ready_done(d, false, "cannot fork the daemon");
		return;
	}
	if (pid == 0)
		exec_daemon(d, extra, secrets, out[1], err[1]);
	close(out[1]);
	close(err[1]);
	/* Only the daemon holds its socket: when it dies, connecting to it fails at once. */
	d->listen_fd = safe_close(d->listen_fd);
	d->pid = pid;
	d->state = DAEMON_STARTING;
	d->out = (DaemonStream){.owner = d, .name = "stdout", .fd = out[0]};
	d->err = (DaemonStream){.owner = d, .name = "stderr", .fd = err[0]};
	(void)fcntl(out[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(err[0], F_SETFL, O_NONBLOCK);
	(void)ev_add_io(d->loop, &d->out.source, out[0], EPOLLIN, on_stream, &d->out);
	(void)ev_add_io(d->loop, &d->err.source, err[0], EPOLLIN, on_stream, &d->err);
	(void)ev_add_time_relative(d->loop, &d->timer, DAEMON_READY_TIMEOUT_USEC, on_ready_timeout,
				   d);
	if (d->ready_connect)
		(void)ev_add_time_relative(d->loop, &d->probe, DAEMON_PROBE_USEC, on_probe, d);
	/* Activated: listening already, in the kernel's queue; the apps need not wait. The
	 * timer stays, and a daemon that never takes its socket is still killed. */
	if (d->socket) {
		daemon_ready_t early = d->cb;

		d->cb = NULL;
		if (early)
			early(true, NULL, d->userdata);
	}
}

bool daemon_child_exited(Daemon *d, pid_t pid, int status)
{
	json_t *ev;
	char why[128];

	if (d->pid <= 0 || pid != d->pid || d->state == DAEMON_EXITED)
		return false;
	d->state = DAEMON_EXITED;
	ev = json_pack("{s:s, s:i}", "daemon", d->name, "pid", (int)pid);
	if (WIFEXITED(status))
		json_object_set_new(ev, "exitCode", json_integer(WEXITSTATUS(status)));
	else
		json_object_set_new(ev, "signal", json_integer(WTERMSIG(status)));
	journal_event("daemon_exited", ev);
	snprintf(why, sizeof(why), "the %s exited before it was listening (its log says why)",
		 d->title);
	ready_done(d, false, why);
	return true;
}

/* --- the dial socket ----------------------------------------------------------------- */

static int on_dial_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	DialSocket *s = userdata;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int c;

	c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0)
		return 0;
	/* The socket's mode already keeps everyone but root and the daemon out; this says
	 * so again where it cannot be chmod-ed away. */
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != 0 && cred.uid != s->uid)) {
		close(c);
		return 0;
	}
	/* One connection, one stream to the host's dialer; mux_io owns the fd from here and
	 * closes it if the stream cannot be opened (no channel, the stream cap). */
	if (mux_io_open_bridge(s->io, MUX_PORT_EGRESS, c) >= 0)
		s->dials++;
	return 0;
}

int dial_socket_listen(EvLoop *loop, MuxIo *io, const char *path, uid_t uid, DialSocket *ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, r;

	*ret = (DialSocket){.io = io, .uid = uid, .fd = -EBADF};
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	(void)unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chown(path, 0, uid) < 0 ||
	    chmod(path, 0660) < 0 || listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	ret->fd = fd;
	return ev_add_io(loop, &ret->source, fd, EPOLLIN, on_dial_accept, ret);
}

void dial_socket_close(DialSocket *s)
{
	s->source = ev_source_free(s->source);
	s->fd = safe_close(s->fd);
}

/* --- what the daemons' modules share ------------------------------------------------ */

int daemon_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EIO;
}

int daemon_make_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	_cleanup_close_ int fd = -EBADF;

	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
		return -errno;
	return 0;
}

int daemon_write_policy(const char *path, json_t *doc, uid_t uid)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	_cleanup_free_ char *err = NULL;
	int r;

	if (!doc)
		return -ENOMEM;
	r = capability_policy_from_json(doc, &p, &err);
	return r < 0 ? r : capability_policy_write(path, p, uid);
}
