/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm's log fanout against the guest's real log port: berth-init's control.c and
 * journal.c on one MuxIo, berth-vmm's log-fanout.c on another, a socketpair between them
 * and real unix-socket clients on logs.sock, all on one event loop.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "journal.h"
#include "log-fanout.h"
#include "macros.h"
#include "tests.h"

typedef struct Rig {
	EvLoop *loop;
	MuxIo *host, *guest;
	LogFanout *fanout;
	char dir[64], path[108];
	unsigned readies;
} Rig;

typedef struct Client {
	int fd;
	char *buf;
	size_t len;
	bool eof;
} Client;

static void on_host_state(MuxIo *io, MuxIoState state, int error, void *userdata)
{
	Rig *r = userdata;

	if (state == MUX_IO_READY) {
		r->readies++;
		log_fanout_session_ready(r->fanout);
	}
}

static void rig_new(Rig *r)
{
	MuxIoConfig host = {.mux.role = MUX_ROLE_HOST, .on_state = on_host_state, .userdata = r};
	MuxIoConfig guest = {.mux.role = MUX_ROLE_GUEST};
	ControlHandlers handlers = {};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, devnull, tap;

	/* The journal mirrors every line to the console, fd 1: keep TAP apart from it. */
	fflush(stdout);
	tap = dup(STDOUT_FILENO);
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ASSERT_TRUE(tap >= 0 && devnull >= 0);
	ASSERT_OK(dup2(devnull, STDOUT_FILENO));
	stdout = fdopen(tap, "w");
	ASSERT_NOT_NULL(stdout);

	/* The guest's LineConns write() too; berth-init is PID 1, which SIGPIPE never kills. */
	signal(SIGPIPE, SIG_IGN);
	memset(r, 0, sizeof(*r));
	ASSERT_OK(journal_init());
	ASSERT_OK(ev_loop_new(&r->loop));
	ASSERT_OK(mux_io_new(r->loop, &host, &r->host));
	ASSERT_OK(mux_io_new(r->loop, &guest, &r->guest));
	ASSERT_OK(control_listen(r->loop, r->guest, &handlers));
	snprintf(r->dir, sizeof(r->dir), "/tmp/test-log-fanout.XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(r->dir));
	snprintf(r->path, sizeof(r->path), "%s/logs.sock", r->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_OK(listen(fd, 64));
	ASSERT_OK(log_fanout_new(r->loop, r->host, fd, &r->fanout));
}

/* A new session on a fresh transport: the first one, or a reset of the one before. */
static void rig_connect(Rig *r)
{
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	ASSERT_OK(mux_io_set_transport(r->guest, sp[1]));
	ASSERT_OK(mux_io_set_transport(r->host, sp[0]));
}

static void rig_free(Rig *r)
{
	log_fanout_free(r->fanout);
	mux_io_free(r->host);
	mux_io_free(r->guest);
	unlink(r->path);
	rmdir(r->dir);
}

static void client_connect(Rig *r, Client *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(c, 0, sizeof(*c));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ASSERT_TRUE(c->fd >= 0);
	ASSERT_OK(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)));
}

static void client_read(Client *c)
{
	for (;;) {
		char chunk[65536];
		ssize_t n = read(c->fd, chunk, sizeof(chunk));

		if (n == 0)
			c->eof = true;
		if (n <= 0)
			return;
		c->buf = realloc(c->buf, c->len + (size_t)n + 1);
		ASSERT_NOT_NULL(c->buf);
		memcpy(c->buf + c->len, chunk, (size_t)n);
		c->len += (size_t)n;
		c->buf[c->len] = '\0';
	}
}

static void client_close(Client *c)
{
	close(c->fd);
	free(c->buf);
	*c = (Client){.fd = -1};
}

static unsigned count(const Client *c, const char *needle)
{
	unsigned n = 0;

	for (const char *p = c->buf; p && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Run the loop, reading @c, until @needle arrived (or EOF with @needle NULL); 5 s at most. */
static bool wait_for(Rig *r, Client *c, const char *needle)
{
	for (int i = 0; i < 500; i++) {
		client_read(c);
		if (needle ? count(c, needle) > 0 : c->eof)
			return true;
		(void)ev_run(r->loop, 10 * USEC_PER_MSEC);
	}
	return false;
}

static void spin(Rig *r, unsigned iterations)
{
	for (unsigned i = 0; i < iterations; i++)
		(void)ev_run(r->loop, 5 * USEC_PER_MSEC);
}

#define MARKER(n) "{\"event\":\"log_replay_end\",\"lines\":" #n ",\"source\":\"berth-init\"}\n"

TEST(readers_get_the_replay_then_the_same_live_lines)
{
	Rig r;
	Client a, b;

	rig_new(&r);
	for (int i = 0; i < 3; i++)
		journal_logf("before the host %d", i);
	/* A reader that comes before the guest is up waits for it. */
	client_connect(&r, &a);
	spin(&r, 20);
	client_read(&a);
	ASSERT_EQ(a.len, 0);
	rig_connect(&r);
	ASSERT_TRUE(wait_for(&r, &a, "log_replay_end"));
	ASSERT_TRUE(strncmp(a.buf, "log stream attached\n", 20) == 0);
	ASSERT_EQ(count(&a, "before the host "), 3);
	ASSERT_EQ(count(&a, MARKER(3)), 1);
	ASSERT_TRUE(strstr(a.buf, "before the host 2") < strstr(a.buf, "log_replay_end"));

	/* A second reader does not take the stream away from the first. */
	client_connect(&r, &b);
	ASSERT_TRUE(wait_for(&r, &b, "log_replay_end"));
	ASSERT_TRUE(strncmp(b.buf, "log stream attached\n", 20) == 0);
	ASSERT_EQ(count(&b, "before the host "), 3);
	ASSERT_EQ(count(&b, MARKER(3)), 1);
	journal_log("app", "stdout", "live line", 9);
	ASSERT_TRUE(wait_for(&r, &a, "live line"));
	ASSERT_TRUE(wait_for(&r, &b, "live line"));
	ASSERT_TRUE(
		strstr(a.buf, "\"src\":\"app\",\"stream\":\"stdout\",\"line\":\"live line\"}\n"));
	spin(&r, 10);
	client_read(&a);
	client_read(&b);
	ASSERT_EQ(count(&a, "live line"), 1);
	ASSERT_EQ(count(&b, "live line"), 1);
	ASSERT_FALSE(a.eof || b.eof);

	/* One leaving changes nothing for the other; a late one gets all four lines. */
	client_close(&b);
	journal_logf("after b left");
	ASSERT_TRUE(wait_for(&r, &a, "after b left"));
	client_connect(&r, &b);
	ASSERT_TRUE(wait_for(&r, &b, "log_replay_end"));
	ASSERT_EQ(count(&b, MARKER(5)), 1);
	ASSERT_TRUE(strstr(b.buf, "live line") && strstr(b.buf, "after b left"));
	client_close(&a);
	client_close(&b);
	rig_free(&r);
}

TEST(past_the_cap_a_reader_is_refused_with_a_line)
{
	Client c[LOG_FANOUT_CLIENTS_MAX], extra;
	Rig r;

	rig_new(&r);
	rig_connect(&r);
	journal_logf("hello");
	for (size_t i = 0; i < ELEMENTSOF(c); i++) {
		client_connect(&r, &c[i]);
		ASSERT_TRUE(wait_for(&r, &c[i], "log_replay_end"));
	}
	client_connect(&r, &extra);
	ASSERT_TRUE(wait_for(&r, &extra, NULL));
	ASSERT_TRUE(strncmp(extra.buf, "log stream refused: 16 readers are attached", 43) == 0);
	ASSERT_TRUE(strstr(extra.buf, "try again\n"));
	client_close(&extra);

	/* A freed place is taken again. */
	client_close(&c[3]);
	spin(&r, 10);
	client_connect(&r, &extra);
	ASSERT_TRUE(wait_for(&r, &extra, "log_replay_end"));
	journal_logf("everyone");
	for (size_t i = 0; i < ELEMENTSOF(c); i++)
		if (i != 3)
			ASSERT_TRUE(wait_for(&r, &c[i], "everyone"));
	ASSERT_TRUE(wait_for(&r, &extra, "everyone"));
	rig_free(&r);
}

TEST(a_reader_that_stops_reading_is_dropped_alone)
{
	static char line[1000];
	Client a, stalled;
	unsigned last = 0;
	Rig r;

	rig_new(&r);
	rig_connect(&r);
	client_connect(&r, &stalled);
	client_connect(&r, &a);
	ASSERT_TRUE(wait_for(&r, &a, "log_replay_end"));
	/* 4 MiB: more than a client's buffer and its socket's together. */
	memset(line, 'x', sizeof(line));
	for (unsigned i = 0; i < 4096; i++) {
		int n = snprintf(line, sizeof(line), "bulk %u ", i);

		line[n] = 'x';
		journal_log("app", "stdout", line, sizeof(line));
		if (i % 64 == 63) {
			spin(&r, 4);
			client_read(&a);
		}
	}
	ASSERT_TRUE(wait_for(&r, &a, "bulk 4095 "));
	/* Every line, in order, to the reader that reads. */
	for (const char *p = a.buf; (p = strstr(p, "\"line\":\"bulk ")); p++) {
		unsigned n = (unsigned)strtoul(p + 13, NULL, 10);

		ASSERT_EQ(n, last);
		last++;
	}
	ASSERT_EQ(last, 4096);
	/* The stalled one got what fit and then its end. */
	ASSERT_TRUE(wait_for(&r, &stalled, NULL));
	ASSERT_TRUE(stalled.len < 4 * 1024 * 1024);
	ASSERT_TRUE(stalled.len > 0);
	/* The guest stream itself is still there. */
	journal_logf("still here");
	ASSERT_TRUE(wait_for(&r, &a, "still here"));
	ASSERT_FALSE(a.eof);
	rig_free(&r);
}

TEST(readers_stay_across_a_session_reset_and_see_each_line_once)
{
	Client a, late;
	Rig r;

	rig_new(&r);
	rig_connect(&r);
	journal_logf("first");
	client_connect(&r, &a);
	ASSERT_TRUE(wait_for(&r, &a, "first"));
	ASSERT_TRUE(wait_for(&r, &a, MARKER(1)));
	/* The channel resets; a line is logged while no stream is open. */
	rig_connect(&r);
	journal_logf("during the reset");
	ASSERT_TRUE(wait_for(&r, &a, "during the reset"));
	journal_logf("after the reset");
	ASSERT_TRUE(wait_for(&r, &a, "after the reset"));
	spin(&r, 10);
	client_read(&a);
	ASSERT_EQ(r.readies, 2);
	ASSERT_FALSE(a.eof);
	ASSERT_EQ(count(&a, "log stream attached"), 1);
	ASSERT_EQ(count(&a, "log_replay_end"), 1);
	ASSERT_EQ(count(&a, "\"first\""), 1);
	ASSERT_EQ(count(&a, "\"during the reset\""), 1);
	ASSERT_EQ(count(&a, "\"after the reset\""), 1);
	client_connect(&r, &late);
	ASSERT_TRUE(wait_for(&r, &late, MARKER(3)));
	rig_free(&r);
}

TEST(when_the_vm_is_gone_readers_keep_their_lines_and_new_ones_are_turned_away)
{
	Client a, b;
	Rig r;

	rig_new(&r);
	rig_connect(&r);
	client_connect(&r, &a);
	ASSERT_TRUE(wait_for(&r, &a, "log_replay_end"));
	journal_logf("last words");
	spin(&r, 10);
	log_fanout_finish(r.fanout);
	client_connect(&r, &b);
	ASSERT_TRUE(wait_for(&r, &b, NULL));
	ASSERT_EQ(b.len, 0);
	ASSERT_TRUE(wait_for(&r, &a, "last words"));
	ASSERT_FALSE(a.eof);
	r.fanout = log_fanout_free(r.fanout);
	ASSERT_TRUE(wait_for(&r, &a, NULL));
	rig_free(&r);
}

int main(void)
{
	return tests_run();
}
