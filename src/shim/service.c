/* SPDX-License-Identifier: Apache-2.0 */
/* The Task service over ttrpc (shim.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "shim.h"
#include "shim.pb-c.h"
#include "ttrpc-frame.h"

#define SERVICE "containerd.task.v2.Task"
#define CONNS_MAX 16
#define WAITS_MAX 64
#define READ_CHUNK (64 * 1024)

/* gRPC status codes, as ttrpc carries them. */
enum {
	CODE_UNKNOWN = 2,
	CODE_INVALID_ARGUMENT = 3,
	CODE_NOT_FOUND = 5,
	CODE_ALREADY_EXISTS = 6,
	CODE_FAILED_PRECONDITION = 9,
	CODE_UNIMPLEMENTED = 12,
};

typedef struct Conn {
	Shim *shim;
	int fd;
	EvSource *src;
	TtrpcReader reader;
} Conn;

typedef struct PendingWait {
	Conn *conn;
	uint32_t stream_id;
} PendingWait;

struct Shim {
	EvLoop *loop;
	Task task;
	const char *ns, *id, *events;
	Conn *conns[CONNS_MAX];
	PendingWait waits[WAITS_MAX];
	size_t n_waits;
	bool shutting_down;
};

/* A reply: a packed message or an error status. */
typedef struct Reply {
	uint8_t *payload;
	size_t len;
	int code; /* 0: success */
	char message[1024];
	bool deferred; /* Wait: answered when the task exits */
} Reply;

#define PACK(reply, kind, msg)                                              \
	do {                                                                \
		(reply)->len = berthshim__##kind##__get_packed_size(msg);   \
		(reply)->payload = malloc((reply)->len ? (reply)->len : 1); \
		if ((reply)->payload)                                       \
			berthshim__##kind##__pack(msg, (reply)->payload);   \
	} while (0)

static int error_reply(Reply *r, int code, const char *fmt, ...) _printf_(3, 4);
static int error_reply(Reply *r, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	r->code = code;
	log_warning("%s", r->message);
	return 0;
}

static int errno_code(int r)
{
	switch (-r) {
	case EINVAL:
	case EPERM:
	case E2BIG:
		return CODE_INVALID_ARGUMENT;
	case ENOENT:
	case ESRCH:
		return CODE_NOT_FOUND;
	case EEXIST:
		return CODE_ALREADY_EXISTS;
	case EBUSY:
		return CODE_FAILED_PRECONDITION;
	default:
		return CODE_UNKNOWN;
	}
}

static void send_frame(Conn *c, uint32_t stream_id, const Reply *r)
{
	Berthshim__Response resp = BERTHSHIM__RESPONSE__INIT;
	Berthshim__Status status = BERTHSHIM__STATUS__INIT;
	_cleanup_free_ uint8_t *buf = NULL;
	uint8_t head[TTRPC_HEADER_SIZE];
	TtrpcHeader h = {.stream_id = stream_id, .type = TTRPC_RESPONSE};

	if (r->code) {
		status.code = r->code;
		status.message = (char *)r->message;
		resp.status = &status;
	} else {
		resp.payload.data = r->payload;
		resp.payload.len = r->len;
	}
	h.length = (uint32_t)berthshim__response__get_packed_size(&resp);
	buf = malloc(h.length ? h.length : 1);
	if (!buf)
		return;
	berthshim__response__pack(&resp, buf);
	ttrpc_header_encode(&h, head);
	if (loop_write(c->fd, head, sizeof(head)) < 0 || loop_write(c->fd, buf, h.length) < 0)
		log_warning("cannot answer containerd: %m");
}

static Berthshim__Timestamp *exited_at(Shim *s, Berthshim__Timestamp *ts)
{
	ts->seconds = s->task.exited_at.tv_sec;
	ts->nanos = (int32_t)s->task.exited_at.tv_nsec;
	return s->task.state >= TASK_STOPPED ? ts : NULL;
}

static void publish(Shim *s, const char *topic, const char *type, const uint8_t *ev, size_t len)
{
	shim_publish(s->events, s->ns, topic, type, ev, len);
}

static void publish_exit(Shim *s)
{
	Berthshim__TaskExit ev = BERTHSHIM__TASK_EXIT__INIT;
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n;

	ev.container_id = s->task.id;
	ev.id = s->task.id;
	ev.pid = (uint32_t)s->task.pid;
	ev.exit_status = s->task.exit_status;
	ev.exited_at = exited_at(s, &ts);
	n = berthshim__task_exit__get_packed_size(&ev);
	if ((buf = malloc(n ? n : 1))) {
		berthshim__task_exit__pack(&ev, buf);
		publish(s, "/tasks/exit", "containerd.events.TaskExit", buf, n);
	}
}

static void task_stopped(Shim *s);

static int on_task_exit(EvSource *src, const siginfo_t *si, void *userdata)
{
	Shim *s = userdata;
	int status = si->si_code == CLD_EXITED ? W_EXITCODE(si->si_status, 0) : si->si_status;

	(void)waitpid(si->si_pid, NULL, WNOHANG);
	task_exited(&s->task, status);
	log_info("task %s: berth-vmm exited (%u)", s->task.id, s->task.exit_status);
	task_stopped(s);
	return 0;
}

/* The task is stopped: say so to containerd and to every Wait. */
static void task_stopped(Shim *s)
{
	publish_exit(s);
	for (size_t i = 0; i < s->n_waits; i++) {
		Berthshim__WaitResponse w = BERTHSHIM__WAIT_RESPONSE__INIT;
		Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;
		Reply r = {};

		w.exit_status = s->task.exit_status;
		w.exited_at = exited_at(s, &ts);
		PACK(&r, wait_response, &w);
		if (s->waits[i].conn)
			send_frame(s->waits[i].conn, s->waits[i].stream_id, &r);
		free(r.payload);
	}
	s->n_waits = 0;
}

/* --- the task's output ---------------------------------------------------------------- */

typedef struct Relay {
	const char *fifo; /* containerd's, "" for none */
	int fd;		  /* open on it, or -1 */
} Relay;

static Relay relays[2];

/* Forward what berth-vmm wrote to containerd's fifo, never blocking: with no reader (or a
 * full fifo) the bytes are dropped; the run dir's console.log and vmm.log keep them. */
static int on_output(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Relay *r = userdata;
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			ev_source_free(src);
		return 0;
	}
	/* ctr run --log-uri file:///PATH hands the shim a file to append to; otherwise it is
	 * containerd's fifo. (A binary:// logger is not supported: nothing is written.) */
	if (r->fd < 0 && strneq(r->fifo, "file://", 7))
		r->fd = open(r->fifo + 7, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			     0600);
	else if (r->fd < 0 && r->fifo[0] == '/')
		r->fd = open(r->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (r->fd >= 0 && write(r->fd, buf, (size_t)n) < 0 && errno != EAGAIN) {
		close(r->fd);
		r->fd = -1;
	}
	return 0;
}

static void relay_output(Shim *s)
{
	relays[0] = (Relay){s->task.stdout_path, -1};
	relays[1] = (Relay){s->task.stderr_path, -1};
	int fds[2] = {s->task.out_fd, s->task.err_fd};

	for (size_t i = 0; i < 2; i++) {
		EvSource *src;

		if (ev_add_io(s->loop, &src, fds[i], EPOLLIN, on_output, &relays[i]) < 0)
			close(fds[i]);
		else
			(void)ev_source_set_io_fd_own(src, true);
	}
	s->task.out_fd = s->task.err_fd = -EBADF;
}

/* --- the methods --------------------------------------------------------------------- */

static void do_create(Shim *s, const ProtobufCBinaryData *in, Reply *r)
{
	Berthshim__CreateTaskRequest *req =
		berthshim__create_task_request__unpack(NULL, in->len, in->data);
	Berthshim__CreateTaskResponse resp = BERTHSHIM__CREATE_TASK_RESPONSE__INIT;
	TaskMount mounts[4];
	char err[900] = "";
	int k;

	if (!req) {
		error_reply(r, CODE_INVALID_ARGUMENT, "Create: the request does not decode");
		return;
	}
	if (req->terminal || (req->checkpoint && *req->checkpoint)) {
		error_reply(r, CODE_INVALID_ARGUMENT,
			    "Create: a Berth sandbox has no terminal and no checkpoint to restore; "
			    "its app is reached over RPC (docs/kubernetes.md)");
		goto out;
	}
	for (size_t i = 0; i < req->n_rootfs && i < ELEMENTSOF(mounts); i++)
		mounts[i] = (TaskMount){req->rootfs[i]->type, req->rootfs[i]->source,
					req->rootfs[i]->options, req->rootfs[i]->n_options};
	k = task_create(&s->task, req->id, s->ns, req->bundle, mounts,
			MIN(req->n_rootfs, ELEMENTSOF(mounts)) +
				(req->n_rootfs > ELEMENTSOF(mounts)),
			req->stdout, req->stderr, err, sizeof(err));
	if (k < 0) {
		error_reply(r, errno_code(k), "Create %s: %s", req->id,
			    err[0] ? err : strerror(-k));
		goto out;
	}
	log_info("task %s: %zu app(s) from %s, %u vCPUs, %u MiB", req->id, s->task.n_apps,
		 s->task.rootfs, s->task.cpus, s->task.mem_mib);
	{
		Berthshim__TaskCreate ev = BERTHSHIM__TASK_CREATE__INIT;
		_cleanup_free_ uint8_t *buf = NULL;
		size_t n;

		ev.container_id = req->id;
		ev.bundle = req->bundle;
		n = berthshim__task_create__get_packed_size(&ev);
		if ((buf = malloc(n ? n : 1))) {
			berthshim__task_create__pack(&ev, buf);
			publish(s, "/tasks/create", "containerd.events.TaskCreate", buf, n);
		}
	}
	PACK(r, create_task_response, &resp);
out:
	berthshim__create_task_request__free_unpacked(req, NULL);
}

static void do_start(Shim *s, Reply *r)
{
	Berthshim__StartResponse resp = BERTHSHIM__START_RESPONSE__INIT;
	char err[512] = "";
	int k = task_start(&s->task, err, sizeof(err));

	if (k < 0) {
		error_reply(r, errno_code(k), "Start: %s", err[0] ? err : strerror(-k));
		return;
	}
	relay_output(s);
	k = ev_add_child_pidfd(s->loop, NULL, s->task.pidfd, on_task_exit, s);
	if (k < 0)
		k = ev_add_child(s->loop, NULL, s->task.pid, on_task_exit, s);
	if (k < 0) {
		/* Nothing would see it exit: it must not run. */
		(void)task_kill(&s->task, SIGKILL);
		error_reply(r, CODE_UNKNOWN, "Start: cannot watch berth-vmm (%s)", strerror(-k));
		return;
	}
	s->task.pidfd = -EBADF; /* the loop owns it */
	resp.pid = (uint32_t)s->task.pid;
	{
		Berthshim__TaskStart ev = BERTHSHIM__TASK_START__INIT;
		_cleanup_free_ uint8_t *buf = NULL;
		size_t n;

		ev.container_id = s->task.id;
		ev.pid = resp.pid;
		n = berthshim__task_start__get_packed_size(&ev);
		if ((buf = malloc(n ? n : 1))) {
			berthshim__task_start__pack(&ev, buf);
			publish(s, "/tasks/start", "containerd.events.TaskStart", buf, n);
		}
	}
	PACK(r, start_response, &resp);
}

static void do_state(Shim *s, Reply *r)
{
	static const Berthshim__TaskStatus map[] = {
		[TASK_NONE] = BERTHSHIM__TASK_STATUS__UNKNOWN,
		[TASK_CREATED] = BERTHSHIM__TASK_STATUS__CREATED,
		[TASK_RUNNING] = BERTHSHIM__TASK_STATUS__RUNNING,
		[TASK_STOPPED] = BERTHSHIM__TASK_STATUS__STOPPED,
		[TASK_DELETED] = BERTHSHIM__TASK_STATUS__STOPPED,
	};
	Berthshim__StateResponse resp = BERTHSHIM__STATE_RESPONSE__INIT;
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;

	if (s->task.state == TASK_NONE) {
		error_reply(r, CODE_NOT_FOUND, "State: no task has been created");
		return;
	}
	resp.id = s->task.id;
	resp.bundle = s->task.bundle;
	resp.pid = (uint32_t)s->task.pid;
	resp.status = map[s->task.state];
	resp.stdout = s->task.stdout_path;
	resp.stderr = s->task.stderr_path;
	resp.exit_status = s->task.exit_status;
	resp.exited_at = exited_at(s, &ts);
	PACK(r, state_response, &resp);
}

static void do_kill(Shim *s, const ProtobufCBinaryData *in, Reply *r)
{
	Berthshim__KillRequest *req = berthshim__kill_request__unpack(NULL, in->len, in->data);
	Berthshim__Empty empty = BERTHSHIM__EMPTY__INIT;
	int k;

	if (!req) {
		error_reply(r, CODE_INVALID_ARGUMENT, "Kill: the request does not decode");
		return;
	}
	if (s->task.state == TASK_CREATED) {
		/* Never started: it is stopped now, as if killed. */
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		s->task.state = TASK_STOPPED;
		s->task.exit_status = 128 + req->signal;
		s->task.exited_at = now;
		task_stopped(s);
		k = 0;
	} else
		k = task_kill(&s->task, (int)req->signal);
	berthshim__kill_request__free_unpacked(req, NULL);
	if (k < 0) {
		error_reply(r, errno_code(k), "Kill: %s",
			    k == -ESRCH ? "process already finished" : strerror(-k));
		return;
	}
	PACK(r, empty, &empty);
}

static void do_wait(Shim *s, Conn *c, uint32_t stream_id, Reply *r)
{
	Berthshim__WaitResponse resp = BERTHSHIM__WAIT_RESPONSE__INIT;
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;

	if (s->task.state == TASK_NONE) {
		error_reply(r, CODE_NOT_FOUND, "Wait: no task has been created");
		return;
	}
	if (s->task.state < TASK_STOPPED) {
		if (s->n_waits >= WAITS_MAX) {
			error_reply(r, CODE_FAILED_PRECONDITION, "Wait: %d waits at most",
				    WAITS_MAX);
			return;
		}
		s->waits[s->n_waits++] = (PendingWait){c, stream_id};
		r->deferred = true;
		return;
	}
	resp.exit_status = s->task.exit_status;
	resp.exited_at = exited_at(s, &ts);
	PACK(r, wait_response, &resp);
}

static void do_delete(Shim *s, Reply *r)
{
	Berthshim__DeleteResponse resp = BERTHSHIM__DELETE_RESPONSE__INIT;
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;

	if (s->task.state == TASK_RUNNING) {
		error_reply(r, CODE_FAILED_PRECONDITION,
			    "Delete: task %s is running; kill it first (ctr task kill)",
			    s->task.id);
		return;
	}
	if (s->task.state == TASK_NONE) {
		error_reply(r, CODE_NOT_FOUND, "Delete: no task has been created");
		return;
	}
	task_cleanup(&s->task);
	resp.pid = (uint32_t)s->task.pid;
	resp.exit_status = s->task.exit_status;
	resp.exited_at = exited_at(s, &ts);
	s->task.state = TASK_DELETED;
	{
		Berthshim__TaskDelete ev = BERTHSHIM__TASK_DELETE__INIT;
		_cleanup_free_ uint8_t *buf = NULL;
		size_t n;

		ev.container_id = s->task.id;
		ev.id = s->task.id;
		ev.pid = resp.pid;
		ev.exit_status = resp.exit_status;
		ev.exited_at = resp.exited_at;
		n = berthshim__task_delete__get_packed_size(&ev);
		if ((buf = malloc(n ? n : 1))) {
			berthshim__task_delete__pack(&ev, buf);
			publish(s, "/tasks/delete", "containerd.events.TaskDelete", buf, n);
		}
	}
	PACK(r, delete_response, &resp);
}

static void do_pids(Shim *s, Reply *r)
{
	Berthshim__PidsResponse resp = BERTHSHIM__PIDS_RESPONSE__INIT;
	Berthshim__ProcessInfo info = BERTHSHIM__PROCESS_INFO__INIT, *list[1] = {&info};

	info.pid = (uint32_t)s->task.pid;
	if (s->task.state == TASK_RUNNING) {
		resp.n_processes = 1;
		resp.processes = list;
	}
	PACK(r, pids_response, &resp);
}

static void do_connect(Shim *s, Reply *r)
{
	Berthshim__ConnectResponse resp = BERTHSHIM__CONNECT_RESPONSE__INIT;

	resp.shim_pid = (uint32_t)getpid();
	resp.task_pid = (uint32_t)s->task.pid;
	resp.version = SHIM_VERSION;
	PACK(r, connect_response, &resp);
}

static void do_shutdown(Shim *s, Reply *r)
{
	Berthshim__Empty empty = BERTHSHIM__EMPTY__INIT;

	if (s->task.state == TASK_RUNNING || s->task.state == TASK_CREATED) {
		/* containerd asks again once the task is deleted. */
		PACK(r, empty, &empty);
		return;
	}
	s->shutting_down = true;
	PACK(r, empty, &empty);
}

static void dispatch(Shim *s, Conn *c, uint32_t stream_id, const Berthshim__Request *req, Reply *r)
{
	const char *m = req->method;
	Berthshim__Empty empty = BERTHSHIM__EMPTY__INIT;

	if (!req->service || !streq(req->service, SERVICE)) {
		error_reply(r, CODE_UNIMPLEMENTED, "service %s: this shim serves %s only",
			    req->service ?: "", SERVICE);
		return;
	}
	if (streq(m, "Create"))
		do_create(s, &req->payload, r);
	else if (streq(m, "Start"))
		do_start(s, r);
	else if (streq(m, "State"))
		do_state(s, r);
	else if (streq(m, "Kill"))
		do_kill(s, &req->payload, r);
	else if (streq(m, "Wait"))
		do_wait(s, c, stream_id, r);
	else if (streq(m, "Delete"))
		do_delete(s, r);
	else if (streq(m, "Pids"))
		do_pids(s, r);
	else if (streq(m, "Connect"))
		do_connect(s, r);
	else if (streq(m, "Shutdown"))
		do_shutdown(s, r);
	else if (streq(m, "CloseIO"))
		PACK(r, empty, &empty); /* no stdin: nothing to close */
	else if (streq(m, "Exec") || streq(m, "ResizePty"))
		error_reply(r, CODE_UNIMPLEMENTED,
			    "%s: a Berth sandbox runs its apps only, with no shell to exec or tty "
			    "to resize; call the app over its RPC socket, or use apps/terminal",
			    m);
	else if (streq(m, "Pause") || streq(m, "Resume") || streq(m, "Checkpoint") ||
		 streq(m, "Update"))
		error_reply(r, CODE_UNIMPLEMENTED,
			    "%s: not supported by the Berth shim; a sandbox's size is fixed at "
			    "create from the spec's resources",
			    m);
	else if (streq(m, "Stats"))
		error_reply(r, CODE_UNIMPLEMENTED,
			    "Stats: not supported by the Berth shim yet; berth vm status shows "
			    "each app's cgroup limits");
	else
		error_reply(r, CODE_UNIMPLEMENTED, "%s: no such method", m);
}

/* --- connections ------------------------------------------------------------------------ */

static void conn_free(Conn *c)
{
	Shim *s = c->shim;

	for (size_t i = 0; i < CONNS_MAX; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	/* Its Waits go with it: a closed connection keeps no slot. */
	for (size_t i = 0; i < s->n_waits;)
		if (s->waits[i].conn == c)
			s->waits[i] = s->waits[--s->n_waits];
		else
			i++;
	ev_source_free(c->src);
	close(c->fd);
	ttrpc_reader_done(&c->reader);
	free(c);
}

static int on_conn(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Conn *c = userdata;
	Shim *s = c->shim;
	uint8_t buf[READ_CHUNK];
	ssize_t n = read(fd, buf, sizeof(buf));
	TtrpcHeader h;
	const uint8_t *payload;
	int k;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0 || ttrpc_reader_feed(&c->reader, buf, (size_t)n) < 0) {
		conn_free(c);
		return 0;
	}
	while ((k = ttrpc_reader_next(&c->reader, &h, &payload)) > 0) {
		Berthshim__Request *req;
		Reply r = {};

		if (h.type != TTRPC_REQUEST)
			continue;
		req = berthshim__request__unpack(NULL, h.length, payload);
		if (!req)
			error_reply(&r, CODE_INVALID_ARGUMENT, "the request does not decode");
		else
			dispatch(s, c, h.stream_id, req, &r);
		if (!r.deferred)
			send_frame(c, h.stream_id, &r);
		free(r.payload);
		if (req)
			berthshim__request__free_unpacked(req, NULL);
	}
	if (k < 0) {
		log_warning("dropping a connection: %s", strerror(-k));
		conn_free(c);
		return 0;
	}
	if (s->shutting_down)
		ev_exit(s->loop, 0);
	return 0;
}

static int on_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Shim *s = userdata;
	int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	Conn *c;
	size_t i;

	if (cfd < 0)
		return 0;
	for (i = 0; i < CONNS_MAX && s->conns[i]; i++)
		;
	c = i < CONNS_MAX ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		close(cfd);
		return 0;
	}
	c->shim = s;
	c->fd = cfd;
	if (ev_add_io(s->loop, &c->src, cfd, EPOLLIN, on_conn, c) < 0) {
		close(cfd);
		free(c);
		return 0;
	}
	s->conns[i] = c;
	return 0;
}

static int on_term(EvSource *src, const struct signalfd_siginfo *si, void *userdata)
{
	Shim *s = userdata;

	/* containerd is the one that stops us (Shutdown); a signal stops the task first. */
	if (s->task.state == TASK_RUNNING)
		(void)task_kill(&s->task, SIGTERM);
	else
		ev_exit(s->loop, 0);
	return 0;
}

int shim_serve(int listen_fd, const char *ns, const char *id, const char *events_address)
{
	Shim s = {.ns = ns, .id = id, .events = events_address};
	int r;

	s.task.pidfd = -EBADF;
	r = ev_loop_new(&s.loop);
	if (r < 0)
		return r;
	r = ev_add_io(s.loop, NULL, listen_fd, EPOLLIN, on_accept, &s);
	if (r >= 0)
		r = ev_add_signal(s.loop, NULL, SIGTERM, on_term, &s);
	if (r >= 0)
		r = ev_loop(s.loop);
	for (size_t i = 0; i < CONNS_MAX; i++)
		if (s.conns[i])
			conn_free(s.conns[i]);
	if (s.task.state == TASK_RUNNING)
		(void)task_kill(&s.task, SIGKILL);
	ev_loop_free(s.loop);
	return r;
}
