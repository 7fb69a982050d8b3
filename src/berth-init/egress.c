/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "policy.h"

#define DIAL_SOCKET EGRESS_DIR "/dial.sock"
#define POLICY_COPY EGRESS_DIR "/policy.json"
#define BROKER_POLICY EGRESS_DIR "/broker-policy.json"
#define BROKER_TMP "/tmp/" EGRESS_USER
#define BROKER_PORT 8090
#define AGENT_INIT "/usr/sbin/agent-init"
#define LINE_MAX_BYTES (16 * 1024)
#define READY_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define READY_LINE "[egress-broker] listening on "

typedef enum BrokerState {
	BROKER_NONE,
	BROKER_STARTING,
	BROKER_READY,
	BROKER_EXITED,
	_BROKER_STATE_MAX,
} BrokerState;

static const char *const broker_state_names[_BROKER_STATE_MAX] = {
	[BROKER_NONE] = "none",
	[BROKER_STARTING] = "starting",
	[BROKER_READY] = "ready",
	[BROKER_EXITED] = "exited",
};

typedef struct Stream {
	const char *name; /* "stdout" or "stderr" */
	int fd;
	EvSource *source;
	char buf[LINE_MAX_BYTES];
	size_t len;
} Stream;

static struct {
	EvLoop *loop;
	MuxIo *io;
	char app[33];
	int listen_fd;
	EvSource *listen_source;
	BrokerState state;
	pid_t pid;
	Stream out, err;
	EvSource *timer;
	egress_ready_t cb;
	void *userdata;
	unsigned long dials;
} eg = {.listen_fd = -EBADF, .out.fd = -EBADF, .err.fd = -EBADF};

bool egress_policy_declares(const CapabilityPolicy *policy)
{
	for (size_t i = 0; policy && i < policy->declared.n; i++) {
		const char *s = policy->declared.v[i];

		if (strneq(s, "network:host:", 13) || strneq(s, "browser:navigate:", 17))
			return true;
	}
	return false;
}

/* Call the ready callback once. */
static void ready_done(bool ok, const char *why)
{
	egress_ready_t cb = eg.cb;

	eg.cb = NULL;
	eg.timer = ev_source_free(eg.timer);
	if (cb)
		cb(ok, why, eg.userdata);
}

/* --- the dial socket ------------------------------------------------------------- */

static int on_dial_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int c, r;

	c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0)
		return 0;
	/* The socket's mode already keeps everyone but root and the broker out; this says
	 * so again where it cannot be chmod-ed away. */
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != 0 && cred.uid != EGRESS_UID)) {
		close(c);
		return 0;
	}
	/* One connection, one stream to the host's dialer; mux_io owns the fd from here and
	 * closes it if the stream cannot be opened (no channel, the stream cap). */
	r = mux_io_open_bridge(eg.io, MUX_PORT_EGRESS, c);
	if (r >= 0)
		eg.dials++;
	return 0;
}

static int listen_dial_socket(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", DIAL_SOCKET);
	(void)unlink(DIAL_SOCKET);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chown(DIAL_SOCKET, 0, EGRESS_UID) < 0 || chmod(DIAL_SOCKET, 0660) < 0 ||
	    listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	eg.listen_fd = fd;
	return ev_add_io(eg.loop, &eg.listen_source, fd, EPOLLIN, on_dial_accept, NULL);
}

/* --- setup ------------------------------------------------------------------------ */

static _printf_(3, 4) int fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EIO;
}

/* The broker's own policy (SPEC 6.3): write /tmp/berth-egress, bind 8090, no TCP connect;
 * reads only its binary's tree and its directory. */
static int write_broker_policy(void)
{
	_cleanup_(json_decrefp) json_t *doc = json_pack(
		"{s:i, s:s, s:[], s:[s, s], s:[s, s], s:[], s:b, s:[], s:[i], s:{}}", "schema",
		POLICY_SCHEMA, "appName", EGRESS_USER, "declaredCapabilities", "writePaths",
		"/dev/null", BROKER_TMP, "readPaths", "/usr", EGRESS_DIR, "networkPorts",
		"networkUnrestricted", 0, "meshPeers", "bindPorts", BROKER_PORT, "cgroupLimits");
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	_cleanup_free_ char *err = NULL;
	int r;

	if (!doc)
		return -ENOMEM;
	/* Through the one reader and the one writer, like every app's policy. */
	r = capability_policy_from_json(doc, &p, &err);
	return r < 0 ? r : capability_policy_write(BROKER_POLICY, p, EGRESS_UID);
}

int egress_setup(EvLoop *loop, MuxIo *io, const char *app, const char *policy_path, char *why,
		 size_t whylen)
{
	_cleanup_free_ char *policy = NULL;
	size_t size;
	int r;

	eg.loop = loop;
	eg.io = io;
	snprintf(eg.app, sizeof(eg.app), "%s", app);
	if (mkdir(EGRESS_DIR, 0750) < 0 && errno != EEXIST)
		return fail(why, whylen, "cannot create %s: %s", EGRESS_DIR, strerror(errno));
	if (chown(EGRESS_DIR, 0, EGRESS_UID) < 0 || chmod(EGRESS_DIR, 0750) < 0)
		return fail(why, whylen, "cannot give %s to the broker: %s", EGRESS_DIR,
			    strerror(errno));
	/* A copy the broker reads once: root's, so nothing the broker does can change it. */
	r = read_full_file(policy_path, POLICY_FILE_SIZE_MAX, &policy, &size);
	if (r >= 0)
		r = write_file_atomic(POLICY_COPY, policy, size, 0640);
	if (r >= 0 && chown(POLICY_COPY, 0, EGRESS_UID) < 0)
		r = -errno;
	if (r < 0)
		return fail(why, whylen, "cannot copy %s to %s: %s", policy_path, POLICY_COPY,
			    strerror(-r));
	r = write_broker_policy();
	if (r < 0)
		return fail(why, whylen, "cannot write %s: %s", BROKER_POLICY, strerror(-r));
	if ((mkdir(BROKER_TMP, 0700) < 0 && errno != EEXIST) ||
	    chown(BROKER_TMP, EGRESS_UID, EGRESS_UID) < 0 || chmod(BROKER_TMP, 0700) < 0)
		return fail(why, whylen, "cannot create %s: %s", BROKER_TMP, strerror(errno));
	r = listen_dial_socket();
	if (r < 0)
		return fail(why, whylen, "cannot serve %s: %s", DIAL_SOCKET, strerror(-r));
	return 0;
}

/* --- the process ------------------------------------------------------------------- */

static void stream_line(Stream *s, const char *line, size_t len)
{
	journal_log("egress-broker", s->name, line, len);
	if (eg.state == BROKER_STARTING && streq(s->name, "stderr") && len > strlen(READY_LINE) &&
	    strneq(line, READY_LINE, strlen(READY_LINE))) {
		eg.state = BROKER_READY;
		journal_event("daemon_started",
			      json_pack("{s:s, s:i, s:i, s:s, s:s}", "daemon", "egress-broker",
					"pid", (int)eg.pid, "uid", EGRESS_UID, "app", eg.app,
					"listen", "127.0.0.1:8090"));
		ready_done(true, NULL);
	}
}

static int on_stream(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Stream *s = userdata;
	ssize_t n = read(fd, s->buf + s->len, sizeof(s->buf) - s->len);
	size_t start = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (s->len > 0)
			stream_line(s, s->buf, s->len);
		s->len = 0;
		s->source = ev_source_free(s->source);
		s->fd = safe_close(s->fd);
		return 0;
	}
	s->len += (size_t)n;
	for (size_t i = 0; i < s->len; i++)
		if (s->buf[i] == '\n') {
			stream_line(s, s->buf + start, i - start);
			start = i + 1;
		}
	if (start == 0 && s->len == sizeof(s->buf)) {
		stream_line(s, s->buf, s->len);
		s->len = 0;
		return 0;
	}
	memmove(s->buf, s->buf + start, s->len - start);
	s->len -= start;
	return 0;
}

static void build_env(char **env, size_t max)
{
	const char *boot = getenv("BERTH_BOOT_ID");
	char uid[16];
	size_t n = 0;

	snprintf(uid, sizeof(uid), "%u", EGRESS_UID);
#define ADD(k, v)                                                         \
	do {                                                              \
		if (n + 1 < max && asprintf(&env[n], "%s=%s", k, v) >= 0) \
			n++;                                              \
	} while (0)
	ADD("PATH", "/usr/sbin:/usr/bin:/bin");
	ADD("LANG", "C.UTF-8");
	ADD("HOME", BROKER_TMP);
	ADD("TMPDIR", BROKER_TMP);
	ADD("BERTH_BOOT_ID", boot ? boot : "unknown");
	ADD("BERTH_REQUIRE_ENFORCEMENT", "1");
	ADD("BERTH_CAPABILITY_POLICY", BROKER_POLICY);
	ADD("BERTH_APP_UID", uid);
	ADD("BERTH_APP_GID", uid);
	ADD("BERTH_EGRESS_POLICY", POLICY_COPY);
	ADD("BERTH_EGRESS_DIALER_SOCKET", DIAL_SOCKET);
	ADD("BERTH_EGRESS_BROKER_PORT", "8090");
#undef ADD
	env[n] = NULL;
}

static _noreturn_ void exec_broker(int out_fd, int err_fd)
{
	char *env[16];
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* berth-init blocks the signals its loop reads through a signalfd; a child must not
	 * inherit that. */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	build_env(env, ELEMENTSOF(env));
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0)
		_exit(126);
	setsid();
	if (chdir("/") < 0)
		_exit(126);
	execle(AGENT_INIT, "agent-init", EGRESS_BROKER, (char *)NULL, env);
	dprintf(STDERR_FILENO, "[berth-init] cannot exec %s: %m\n", AGENT_INIT);
	_exit(127);
}

static int on_ready_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	if (eg.state != BROKER_STARTING)
		return 0;
	(void)kill(eg.pid, SIGKILL);
	ready_done(false, "the egress broker did not say it was listening within 30 s");
	return 0;
}

void egress_start(egress_ready_t cb, void *userdata)
{
	int out[2] = {-EBADF, -EBADF}, err[2] = {-EBADF, -EBADF};
	pid_t pid;

	eg.cb = cb;
	eg.userdata = userdata;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		safe_close(out[0]);
		safe_close(out[1]);
		ready_done(false, "cannot make pipes for the egress broker");
		return;
	}
	pid = fork();
	if (pid < 0) {
		safe_close(out[0]);
		safe_close(out[1]);
		safe_close(err[0]);
		safe_close(err[1]);
		ready_done(false, "cannot fork the egress broker");
		return;
	}
	if (pid == 0)
		exec_broker(out[1], err[1]);
	close(out[1]);
	close(err[1]);
	eg.pid = pid;
	eg.state = BROKER_STARTING;
	eg.out = (Stream){.name = "stdout", .fd = out[0]};
	eg.err = (Stream){.name = "stderr", .fd = err[0]};
	(void)fcntl(out[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(err[0], F_SETFL, O_NONBLOCK);
	(void)ev_add_io(eg.loop, &eg.out.source, out[0], EPOLLIN, on_stream, &eg.out);
	(void)ev_add_io(eg.loop, &eg.err.source, err[0], EPOLLIN, on_stream, &eg.err);
	(void)ev_add_time_relative(eg.loop, &eg.timer, READY_TIMEOUT_USEC, on_ready_timeout, NULL);
}

bool egress_child_exited(pid_t pid, int status)
{
	json_t *ev;

	if (eg.pid <= 0 || pid != eg.pid || eg.state == BROKER_EXITED)
		return false;
	eg.state = BROKER_EXITED;
	ev = json_pack("{s:s, s:i}", "daemon", "egress-broker", "pid", (int)pid);
	if (WIFEXITED(status))
		json_object_set_new(ev, "exitCode", json_integer(WEXITSTATUS(status)));
	else
		json_object_set_new(ev, "signal", json_integer(WTERMSIG(status)));
	journal_event("daemon_exited", ev);
	/* Nothing dials any more; a dial socket left open would only collect connections. */
	eg.listen_source = ev_source_free(eg.listen_source);
	eg.listen_fd = safe_close(eg.listen_fd);
	ready_done(false, "the egress broker exited before it was listening (its log says why)");
	return true;
}

json_t *egress_status(void)
{
	if (eg.state == BROKER_NONE)
		return NULL;
	return json_pack("{s:s, s:s, s:i, s:I}", "app", eg.app, "state",
			 broker_state_names[eg.state], "pid", (int)eg.pid, "dials",
			 (json_int_t)eg.dials);
}
