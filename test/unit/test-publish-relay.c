/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-init's relay of published ports (src/berth-init/publish-relay.c): the listener
 * check over the kernel's TCP tables, the boot plan's "publish", and the relay itself
 * between two MuxIos on one event loop, in a network namespace of the test's own (root
 * only) so that port 7681 and the TCP tables are the test's alone.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "journal.h"
#include "macros.h"
#include "mux.h"
#include "publish-relay.h"
#include "tests.h"

#define HEADER_V4                                                                             \
	"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  " \
	"timeout inode\n"
#define HEADER_V6                                                                               \
	"  sl  local_address                         remote_address                        st " \
	"tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
/* 127.0.0.1:7681, listening, uid 10000; an established connection to it, uid 0; another
 * port's listener, uid 10001. */
#define LISTEN_V4                                                                                   \
	"   0: 0100007F:1E01 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10000        " \
	"0 4242 1 0000000000000000 100 0 0 10 0\n"
#define CONN_V4                                                                                     \
	"   1: 0100007F:9C40 0100007F:1E01 01 00000000:00000000 00:00000000 00000000     0        " \
	"0 4243 1 0000000000000000 20 4 30 10 -1\n"
#define OTHER_PORT_V4                                                                               \
	"   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        " \
	"0 4244 1 0000000000000000 100 0 0 10 0\n"
/* [::]:7681 listening, uid 10001. */
#define LISTEN_V6_OTHER                                                                             \
	"   0: 00000000000000000000000000000000:1E01 00000000000000000000000000000000:0000 0A "     \
	"00000000:00000000 00:00000000 00000000 10001        0 4245 1 0000000000000000 100 0 0 10 " \
	"0\n"

static int check(const char *text, uid_t uid, uid_t *other)
{
	return publish_relay_listeners_check(text, strlen(text), 7681, uid, other);
}

TEST(listeners)
{
	uid_t other = 0;

	ASSERT_EQ(check("", 10000, &other), 0);
	ASSERT_EQ(check(HEADER_V4, 10000, &other), 0);
	ASSERT_EQ(check(HEADER_V4 LISTEN_V4, 10000, &other), 1);
	/* Connections to the port and listeners of other ports do not count. */
	ASSERT_EQ(check(HEADER_V4 LISTEN_V4 CONN_V4 OTHER_PORT_V4, 10000, &other), 1);
	ASSERT_EQ(check(HEADER_V4 CONN_V4 OTHER_PORT_V4, 10000, &other), 0);
	/* Another uid's listener, wherever it is bound, refuses the port. */
	ASSERT_ERROR(check(HEADER_V4 LISTEN_V4, 10002, &other), EPERM);
	ASSERT_EQ(other, 10000);
	ASSERT_ERROR(check(HEADER_V6 LISTEN_V6_OTHER, 10000, &other), EPERM);
	ASSERT_EQ(other, 10001);
	/* No final newline. */
	ASSERT_EQ(publish_relay_listeners_check(HEADER_V4 LISTEN_V4,
						strlen(HEADER_V4 LISTEN_V4) - 1, 7681, 10000,
						&other),
		  1);
}

TEST(listeners_malformed)
{
	uid_t other = 0;

	ASSERT_ERROR(check(HEADER_V4 "   0: 0100007F:1E01 00000000:0000 0A\n", 10000, &other),
		     EBADMSG);
	ASSERT_ERROR(check(HEADER_V4 "   0: 0100007F 00000000:0000 0A 0:0 0:0 0 10000 0 1\n", 10000,
			   &other),
		     EBADMSG);
	ASSERT_ERROR(check(HEADER_V4 "   0: 0100007F:1E0G 00000000:0000 0A 0:0 0:0 0 10000 0 1\n",
			   10000, &other),
		     EBADMSG);
	ASSERT_ERROR(check(HEADER_V4 "   0: 0100007F:1E01 00000000:0000 0A 0:0 0:0 0 -1 0 1\n",
			   10000, &other),
		     EBADMSG);
	ASSERT_ERROR(check(HEADER_V4
			   "   0: 0100007F:1E01 00000000:0000 0A 0:0 0:0 0 99999999999 0 1\n",
			   10000, &other),
		     EBADMSG);
}

/* --- the plan, and the relay ------------------------------------------------------------ */

typedef struct Rig {
	EvLoop *loop;
	MuxIo *host, *guest;
	CapabilityPolicy *terminal, *other;
} Rig;

static CapabilityPolicy *compile(const char *name, const char *capabilities)
{
	json_t *caps = json_loads(capabilities, 0, NULL);
	PolicyInput in = {.app_name = name, .capabilities = caps, .cwd = "/app"};
	CapabilityPolicy *p = NULL;

	ASSERT_NOT_NULL(caps);
	ASSERT_OK(capability_policy_compile(&in, NULL, NULL, &p));
	json_decref(caps);
	return p;
}

static void rig_new(Rig *r)
{
	MuxIoConfig host = {.mux.role = MUX_ROLE_HOST};
	MuxIoConfig guest = {.mux.role = MUX_ROLE_GUEST};
	int fd;

	/* The journal mirrors every line to the console, fd 1: keep TAP apart from it. */
	fflush(stdout);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	stdout = fdopen(dup(STDOUT_FILENO), "w");
	ASSERT_NOT_NULL(stdout);
	ASSERT_OK(dup2(fd, STDOUT_FILENO));
	signal(SIGPIPE, SIG_IGN);
	memset(r, 0, sizeof(*r));
	ASSERT_OK(journal_init());
	ASSERT_OK(ev_loop_new(&r->loop));
	ASSERT_OK(mux_io_new(r->loop, &host, &r->host));
	ASSERT_OK(mux_io_new(r->loop, &guest, &r->guest));
	r->terminal = compile("terminal", "[\"terminal:attach:*\"]");
	r->other = compile("notes", "[\"filesystem:write:/workspace\"]");
}

static int setup(Rig *r, const char *plan, const PublishRelayApp *apps, size_t n)
{
	json_t *ports = json_loads(plan, JSON_DECODE_ANY, NULL);
	int ret;

	ASSERT_NOT_NULL(ports);
	ret = publish_relay_setup(r->guest, ports, apps, n);
	/* The routes keep no reference to the plan. */
	json_decref(ports);
	return ret;
}

static int accept_nothing(MuxIo *io, uint32_t port, void *userdata)
{
	return -ECONNREFUSED;
}

/* Is the guest's channel port @port routed already? */
static bool routed(Rig *r, uint32_t port)
{
	int ret = mux_io_listen(r->guest, port, accept_nothing, NULL);

	if (ret == 0)
		ASSERT_OK(mux_io_unlisten(r->guest, port));
	return ret == -EEXIST;
}

TEST(plan_refused)
{
	PublishRelayApp apps[] = {{"terminal", 10000, NULL}};
	Rig r;

	rig_new(&r);
	apps[0].policy = r.terminal;
	ASSERT_ERROR(setup(&r, "{}", apps, 1), EINVAL);
	ASSERT_ERROR(setup(&r, "[9222]", apps, 1), EINVAL);
	ASSERT_ERROR(setup(&r, "[\"7681\"]", apps, 1), EINVAL);
	ASSERT_ERROR(setup(&r, "[0]", apps, 1), EINVAL);
	ASSERT_ERROR(setup(&r, "[7681, 7681]", apps, 1), EINVAL);
	ASSERT_ERROR(setup(&r, "[1,2,3,4,5,6,7,8,9]", apps, 1), EINVAL);
}

TEST(plan_routes)
{
	PublishRelayApp apps[] = {{"notes", 10000, NULL}, {"terminal", 10001, NULL}};
	Rig r;

	rig_new(&r);
	apps[0].policy = r.other;
	apps[1].policy = r.terminal;
	ASSERT_OK(setup(&r, "[]", apps, 2));
	ASSERT_FALSE(routed(&r, MUX_PORT_PUBLISH_BASE));
	ASSERT_OK(setup(&r, "[7681]", apps, 2));
	ASSERT_TRUE(routed(&r, MUX_PORT_PUBLISH_BASE));
}

TEST(plan_no_serving_app)
{
	PublishRelayApp apps[] = {{"notes", 10000, NULL}, {"terminal", 10001, NULL}};
	Rig r;

	/* The terminal was refused: nothing serves 7681, and the VM goes on. */
	rig_new(&r);
	apps[0].policy = r.other;
	ASSERT_OK(setup(&r, "[7681]", apps, 2));
	ASSERT_FALSE(routed(&r, MUX_PORT_PUBLISH_BASE));
}

TEST(plan_two_serving_apps)
{
	PublishRelayApp apps[] = {{"terminal", 10000, NULL}, {"terminal2", 10001, NULL}};
	Rig r;

	rig_new(&r);
	apps[0].policy = r.terminal;
	apps[1].policy = compile("terminal2", "[\"terminal:attach:*\"]");
	ASSERT_OK(setup(&r, "[7681]", apps, 2));
	ASSERT_FALSE(routed(&r, MUX_PORT_PUBLISH_BASE));
}

/* A network namespace of our own, with lo up: only as root. Returns false to skip. */
static bool own_network(void)
{
	struct ifreq ifr = {};
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		return false;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(fd >= 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ASSERT_OK(ioctl(fd, SIOCGIFFLAGS, &ifr));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	ASSERT_OK(ioctl(fd, SIOCSIFFLAGS, &ifr));
	close(fd);
	return true;
}

static int listen_7681(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(7681)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_OK(listen(fd, 8));
	return fd;
}

static void connect_session(Rig *r)
{
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	ASSERT_OK(mux_io_set_transport(r->guest, sp[1]));
	ASSERT_OK(mux_io_set_transport(r->host, sp[0]));
	for (int i = 0; i < 200 && mux_io_get_state(r->host) != MUX_IO_READY; i++)
		(void)ev_run(r->loop, 10 * USEC_PER_MSEC);
	ASSERT_EQ(mux_io_get_state(r->host), MUX_IO_READY);
}

/* The host opens a stream to the published port: our end of it. */
static int open_stream(Rig *r)
{
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp));
	ASSERT_OK(mux_io_open_bridge(r->host, MUX_PORT_PUBLISH_BASE, sp[1]));
	return sp[0];
}

/* Run the loop until @fd has something (or EOF); returns what read() returned. */
static ssize_t read_some(Rig *r, int fd, char *buf, size_t size)
{
	for (int i = 0; i < 300; i++) {
		ssize_t n = read(fd, buf, size);

		if (n >= 0 || errno != EAGAIN)
			return n;
		(void)ev_run(r->loop, 10 * USEC_PER_MSEC);
	}
	return -1;
}

TEST(relay)
{
	PublishRelayApp apps[1] = {{"terminal", 0, NULL}};
	char buf[64];
	int lfd, c, s, guest_side;
	ssize_t n;
	Rig r;

	if (!own_network()) {
		printf("# skipped: no network namespace of our own (not root)\n");
		return;
	}
	rig_new(&r);
	apps[0].uid = getuid();
	apps[0].policy = r.terminal;
	ASSERT_OK(setup(&r, "[7681]", apps, 1));
	connect_session(&r);

	/* Nobody listens yet: the stream is refused, which the host's end sees as EOF. */
	c = open_stream(&r);
	ASSERT_EQ(read_some(&r, c, buf, sizeof(buf)), 0);
	close(c);

	/* The app's own listener: bytes go both ways. */
	lfd = listen_7681();
	c = open_stream(&r);
	ASSERT_EQ(write(c, "GET / HTTP/1.1\r\n", 16), 16);
	for (int i = 0; i < 300 && (s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0; i++)
		(void)ev_run(r.loop, 10 * USEC_PER_MSEC);
	ASSERT_TRUE(s >= 0);
	guest_side = s;
	(void)fcntl(guest_side, F_SETFL, O_NONBLOCK);
	n = read_some(&r, guest_side, buf, sizeof(buf));
	ASSERT_EQ(n, 16);
	ASSERT_TRUE(memcmp(buf, "GET / HTTP/1.1\r\n", 16) == 0);
	ASSERT_EQ(write(guest_side, "HTTP/1.1 401", 12), 12);
	n = read_some(&r, c, buf, sizeof(buf));
	ASSERT_EQ(n, 12);
	close(guest_side);
	close(c);
	close(lfd);
}

TEST(relay_other_uid)
{
	PublishRelayApp apps[1] = {{"terminal", 0, NULL}};
	char buf[64];
	int lfd, c;
	Rig r;

	if (!own_network()) {
		printf("# skipped: no network namespace of our own (not root)\n");
		return;
	}
	rig_new(&r);
	/* The terminal is uid 12345; we hold the port, as another app that bound it first. */
	apps[0].uid = 12345;
	apps[0].policy = r.terminal;
	ASSERT_OK(setup(&r, "[7681]", apps, 1));
	connect_session(&r);
	lfd = listen_7681();
	c = open_stream(&r);
	ASSERT_EQ(read_some(&r, c, buf, sizeof(buf)), 0);
	close(c);
	/* And nothing connected to the impostor. */
	ASSERT_TRUE(accept4(lfd, NULL, NULL, SOCK_CLOEXEC) < 0 && errno == EAGAIN);
	close(lfd);
}

int main(void)
{
	return tests_run();
}
