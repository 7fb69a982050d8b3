/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One guest log stream, any number of readers (log-fanout.h). The guest stream and every
 * client are LineConns on berth-vmm's loop; the guest end is bridged to port 1025 through
 * a socketpair, as the event stream in serve.c is.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "line-conn.h"
#include "linebuf.h"
#include "log-fanout.h"
#include "log.h"
#include "macros.h"
#include "vm-client.h"

/* A guest line of JOURNAL_LINE_MAX bytes, JSON-escaped, stays well under this; readers
 * refuse longer ones too (VM_LINE_MAX). */
#define GUEST_LINE_MAX (1024 * 1024)
/* Journal lines are JSON objects of at least ~45 bytes ({"t":..,"src":..,"stream":..,
 * "line":..}). Shorter lines are dropped: kept lines are counted in bytes, and tiny ones
 * would let the guest make the host allocate per line without bound. */
#define GUEST_LINE_MIN 32
/* Clients never need to send anything; what they do send is read and ignored. */
#define CLIENT_LINE_MAX 4096
#define RETRY_MIN_USEC (250 * USEC_PER_MSEC)
#define RETRY_MAX_USEC (10 * USEC_PER_SEC)

static const char attached_line[] = "log stream attached";
static const char replay_end_prefix[] = "{\"event\":\"log_replay_end\"";

typedef struct LogClient {
	LogFanout *fanout;
	LineConn *conn; /* NULL: a free slot */
	bool live;	/* had its replay; gets every new line */
} LogClient;

struct LogFanout {
	EvLoop *loop;
	MuxIo *io;
	EvSource *listener, *retry;
	uint64_t retry_usec;
	LineConn *guest;
	bool replaying; /* the guest stream is between its open and its log_replay_end */
	bool synced;	/* a guest replay was complete once: new clients get theirs at once */
	bool finishing;
	LineBuffer *kept;     /* what a new client is replayed */
	LineBuffer *incoming; /* the guest's replay while it arrives */
	LogClient clients[LOG_FANOUT_CLIENTS_MAX];
};

static void client_send(LogClient *c, const char *line, size_t len)
{
	size_t pending;

	if (!c->conn)
		return;
	pending = line_conn_pending(c->conn);
	if (line_conn_write(c->conn, line, len) >= 0)
		return;
	log_info("dropped a log reader that stopped reading (%zu bytes were waiting for it)",
		 pending);
	c->conn = line_conn_free(c->conn);
	c->live = false;
}

static void replay_to_client(const char *line, size_t len, void *userdata)
{
	client_send(userdata, line, len);
}

static void client_attach(LogClient *c)
{
	char marker[128];
	int n;

	client_send(c, attached_line, sizeof(attached_line) - 1);
	linebuf_foreach(c->fanout->kept, replay_to_client, c);
	/* The guest's own marker, byte for byte: readers cannot tell who replayed. */
	n = snprintf(marker, sizeof(marker),
		     "{\"event\":\"log_replay_end\",\"lines\":%zu,\"source\":\"berth-init\"}",
		     linebuf_lines(c->fanout->kept));
	client_send(c, marker, (size_t)n);
	c->live = c->conn != NULL;
}

static void broadcast(LogFanout *f, const char *line, size_t len)
{
	for (size_t i = 0; i < LOG_FANOUT_CLIENTS_MAX; i++)
		if (f->clients[i].live)
			client_send(&f->clients[i], line, len);
}

typedef struct CatchUp {
	LogFanout *fanout;
	const char *last; /* the newest line readers have */
	size_t last_len;
	size_t i;
	size_t seen; /* lines of the new replay that readers have: up to the last match */
} CatchUp;

static void find_last(const char *line, size_t len, void *userdata)
{
	CatchUp *cu = userdata;

	cu->last = line;
	cu->last_len = len;
}

static void find_match(const char *line, size_t len, void *userdata)
{
	CatchUp *cu = userdata;

	cu->i++;
	if (cu->last && len == cu->last_len && memcmp(line, cu->last, len) == 0)
		cu->seen = cu->i;
}

static void forward_unseen(const char *line, size_t len, void *userdata)
{
	CatchUp *cu = userdata;

	if (++cu->i > cu->seen)
		broadcast(cu->fanout, line, len);
}

/*
 * The guest's replay is complete. It replaces what was kept; readers get the lines of it
 * that follow the newest one they had (the guest's journal only drops its oldest lines, so
 * when that one is gone, every line is new to them).
 */
static void replay_done(LogFanout *f)
{
	CatchUp cu = {.fanout = f};

	linebuf_foreach(f->kept, find_last, &cu);
	linebuf_foreach(f->incoming, find_match, &cu);
	cu.i = 0;
	linebuf_foreach(f->incoming, forward_unseen, &cu);
	linebuf_free(f->kept);
	f->kept = TAKE_PTR(f->incoming);
	f->replaying = false;
	f->retry_usec = RETRY_MIN_USEC;
	if (!f->synced)
		log_info("following the guest log (%zu lines replayed)", linebuf_lines(f->kept));
	f->synced = true;
	for (size_t i = 0; i < LOG_FANOUT_CLIENTS_MAX; i++)
		if (f->clients[i].conn && !f->clients[i].live)
			client_attach(&f->clients[i]);
}

static void on_guest_line(LineConn *c, char *line, size_t len, void *userdata)
{
	LogFanout *f = userdata;

	if (f->replaying) {
		if (streq(line, attached_line))
			return;
		if (strneq(line, replay_end_prefix, sizeof(replay_end_prefix) - 1)) {
			replay_done(f);
			return;
		}
	}
	if (len < GUEST_LINE_MIN || line[0] != '{')
		return;
	if (f->replaying) {
		(void)linebuf_append(f->incoming, line, len);
		return;
	}
	(void)linebuf_append(f->kept, line, len);
	broadcast(f, line, len);
}

static void arm_retry(LogFanout *f)
{
	ev_source_set_time_relative(f->retry, f->retry_usec);
	ev_source_set_enabled(f->retry, EV_ONESHOT);
	f->retry_usec = MIN(f->retry_usec * 2, RETRY_MAX_USEC);
}

static void on_guest_close(LineConn *c, int error, void *userdata)
{
	LogFanout *f = userdata;

	f->guest = NULL;
	f->incoming = linebuf_free(f->incoming);
	f->replaying = false;
	/* A session reset ends it too; log_fanout_session_ready() opens the next one. */
	if (f->finishing || mux_io_get_state(f->io) != MUX_IO_READY)
		return;
	log_warning("the guest's log stream ended (%s); opening it again in %llu ms",
		    error < 0 ? strerror(-error) : "closed by the guest",
		    (unsigned long long)(f->retry_usec / USEC_PER_MSEC));
	arm_retry(f);
}

static int open_guest(LogFanout *f)
{
	int sp[2], r;

	f->incoming = linebuf_new(LOG_FANOUT_KEPT_MAX);
	if (!f->incoming)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	r = line_conn_new(f->loop, sp[0], GUEST_LINE_MAX, 4096, on_guest_line, on_guest_close, f,
			  &f->guest);
	if (r < 0) {
		close(sp[1]);
		return r;
	}
	f->replaying = true;
	/* On failure sp[1] is closed: the stream ends, and on_guest_close() tries again. */
	r = mux_io_open_bridge(f->io, MUX_PORT_LOG, sp[1]);
	if (r < 0)
		log_debug_errno(r, "cannot open the guest's log port: %m");
	return 0;
}

static void reopen(LogFanout *f)
{
	int r;

	f->guest = line_conn_free(f->guest);
	f->incoming = linebuf_free(f->incoming);
	f->replaying = false;
	if (f->finishing || mux_io_get_state(f->io) != MUX_IO_READY)
		return;
	r = open_guest(f);
	if (r < 0) {
		log_warning_errno(r, "cannot open the guest's log stream: %m; trying again");
		f->incoming = linebuf_free(f->incoming);
		arm_retry(f);
	}
}

static int on_retry(EvSource *s, uint64_t usec, void *userdata)
{
	LogFanout *f = userdata;

	if (!f->guest)
		reopen(f);
	return 0;
}

static void on_client_line(LineConn *c, char *line, size_t len, void *userdata)
{
	/* Like the guest's log port, logs.sock is one-way. */
}

static void on_client_close(LineConn *c, int error, void *userdata)
{
	LogClient *client = userdata;

	client->conn = NULL;
	client->live = false;
}

static void refuse(int fd)
{
	char msg[256];
	ssize_t n;
	int len;

	len = snprintf(
		msg, sizeof(msg),
		LOG_STREAM_REFUSED
		"%d readers are attached to this VM, the most it serves; stop one (berth vm logs --follow, berth dev) and try again\n",
		LOG_FANOUT_CLIENTS_MAX);
	/* A fresh socket's buffer takes the line at once; a lost line is no reason to wait. */
	n = write(fd, msg, (size_t)len);
	(void)n;
	close(fd);
	log_warning("refused a log reader: %d are attached already", LOG_FANOUT_CLIENTS_MAX);
}

static int on_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	LogFanout *f = userdata;
	LogClient *client = NULL;
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), r;

	if (c < 0)
		return 0;
	if (f->finishing) {
		close(c);
		return 0;
	}
	for (size_t i = 0; i < LOG_FANOUT_CLIENTS_MAX && !client; i++)
		if (!f->clients[i].conn)
			client = &f->clients[i];
	if (!client) {
		refuse(c);
		return 0;
	}
	r = line_conn_new(f->loop, c, CLIENT_LINE_MAX, LOG_FANOUT_CLIENT_OUT_MAX, on_client_line,
			  on_client_close, client, &client->conn);
	if (r < 0) {
		log_warning_errno(r, "cannot serve a log reader: %m");
		return 0;
	}
	client->live = false;
	/* Before the first replay arrives, the client waits (as it did for the guest). */
	if (f->synced)
		client_attach(client);
	return 0;
}

int log_fanout_new(EvLoop *loop, MuxIo *io, int listen_fd, LogFanout **ret)
{
	LogFanout *f = calloc(1, sizeof(*f));
	sigset_t pipe;
	int r;

	/* LineConn write()s: a reader that hung up must be an EPIPE here, not a signal that
	 * ends berth-vmm and its VM. QEMU's child clears the mask again (engine-qemu.c). */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	(void)sigprocmask(SIG_BLOCK, &pipe, NULL);
	if (!f || !(f->kept = linebuf_new(LOG_FANOUT_KEPT_MAX))) {
		free(f);
		close(listen_fd);
		return -ENOMEM;
	}
	f->loop = loop;
	f->io = io;
	f->retry_usec = RETRY_MIN_USEC;
	for (size_t i = 0; i < LOG_FANOUT_CLIENTS_MAX; i++)
		f->clients[i].fanout = f;
	r = ev_add_io(loop, &f->listener, listen_fd, EPOLLIN, on_accept, f);
	if (r < 0) {
		close(listen_fd);
		log_fanout_free(f);
		return r;
	}
	ev_source_set_io_fd_own(f->listener, true);
	r = ev_add_time_relative(loop, &f->retry, EV_USEC_INFINITY, on_retry, f);
	if (r < 0) {
		log_fanout_free(f);
		return r;
	}
	ev_source_set_enabled(f->retry, EV_OFF);
	*ret = f;
	return 0;
}

void log_fanout_session_ready(LogFanout *f)
{
	if (!f)
		return;
	ev_source_set_enabled(f->retry, EV_OFF);
	f->retry_usec = RETRY_MIN_USEC;
	reopen(f);
}

void log_fanout_finish(LogFanout *f)
{
	if (!f || f->finishing)
		return;
	f->finishing = true;
	f->guest = line_conn_free(f->guest);
	f->incoming = linebuf_free(f->incoming);
	ev_source_set_enabled(f->retry, EV_OFF);
}

LogFanout *log_fanout_free(LogFanout *f)
{
	if (!f)
		return NULL;
	for (size_t i = 0; i < LOG_FANOUT_CLIENTS_MAX; i++)
		line_conn_free(f->clients[i].conn);
	line_conn_free(f->guest);
	ev_source_free(f->listener);
	ev_source_free(f->retry);
	linebuf_free(f->kept);
	linebuf_free(f->incoming);
	free(f);
	return NULL;
}
