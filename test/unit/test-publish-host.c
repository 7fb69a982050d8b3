/* SPDX-License-Identifier: Apache-2.0 */
/* A published port served on the host (src/shared/publish-host.c): the address, the URL,
 * the warning off loopback, and the splice to the run dir's socket, on a real event loop. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "publish-host.h"
#include "tests.h"

typedef struct Rig {
	EvLoop *loop;
	char dir[64];
	int guest; /* publish-7681.sock, as berth-vmm listens on it */
} Rig;

static void rig_new(Rig *r)
{
	memset(r, 0, sizeof(*r));
	r->guest = -1;
	ASSERT_OK(ev_loop_new(&r->loop));
	snprintf(r->dir, sizeof(r->dir), "/tmp/test-publish-host.XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(r->dir));
}

static void rig_listen(Rig *r)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/publish-7681.sock", r->dir);
	r->guest = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ASSERT_TRUE(r->guest >= 0);
	ASSERT_OK(bind(r->guest, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_OK(listen(r->guest, 128));
}

static void rig_free(Rig *r)
{
	char path[128];

	if (r->guest >= 0)
		close(r->guest);
	snprintf(path, sizeof(path), "%s/publish-7681.sock", r->dir);
	(void)unlink(path);
	(void)rmdir(r->dir);
	ev_loop_free(r->loop);
}

static int tcp_connect(const PublishHost *p, int family)
{
	struct sockaddr_storage ss = {};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	if (family == AF_INET) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(publish_host_port(p));
		in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(publish_host_port(p));
		in6->sin6_addr = in6addr_loopback;
	}
	ASSERT_OK(connect(fd, (struct sockaddr *)&ss, sizeof(ss)));
	ASSERT_OK(fcntl(fd, F_SETFL, O_NONBLOCK));
	return fd;
}

/* Run the loop until read() on @fd gives something other than EAGAIN. */
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

static int accept_guest(Rig *r)
{
	for (int i = 0; i < 300; i++) {
		int fd = accept4(r->guest, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd >= 0)
			return fd;
		(void)ev_run(r->loop, 10 * USEC_PER_MSEC);
	}
	return -1;
}

TEST(default_address)
{
	PublishHost *p = NULL;
	char *warning = (char *)"unset", err[256] = "", want[64];
	Rig r;

	rig_new(&r);
	unsetenv("BERTH_PUBLISH_HOST");
	ASSERT_OK(publish_host_new(r.loop, r.dir, 7681, NULL, &p, &warning, err, sizeof(err)));
	ASSERT_TRUE(warning == NULL);
	ASSERT_TRUE(publish_host_port(p) > 0);
	snprintf(want, sizeof(want), "http://127.0.0.1:%u", publish_host_port(p));
	ASSERT_STREQ(publish_host_url(p), want);
	publish_host_free(p);
	rig_free(&r);
}

TEST(other_addresses)
{
	PublishHost *p = NULL;
	char *warning = NULL, err[256] = "", want[64];
	Rig r;

	rig_new(&r);
	/* IPv6 loopback, with or without brackets: no warning. */
	if (publish_host_new(r.loop, r.dir, 7681, "[::1]", &p, &warning, err, sizeof(err)) >= 0) {
		ASSERT_TRUE(warning == NULL);
		snprintf(want, sizeof(want), "http://[::1]:%u", publish_host_port(p));
		ASSERT_STREQ(publish_host_url(p), want);
		p = publish_host_free(p);
	} else
		printf("# no IPv6 loopback here: %s\n", err);
	/* Another 127.x address is loopback too. */
	setenv("BERTH_PUBLISH_HOST", "127.0.0.2", 1);
	ASSERT_OK(publish_host_new(r.loop, r.dir, 7681, NULL, &p, &warning, err, sizeof(err)));
	ASSERT_TRUE(warning == NULL);
	p = publish_host_free(p);
	/* Every address: served, with a warning that names the variable. */
	setenv("BERTH_PUBLISH_HOST", "0.0.0.0", 1);
	ASSERT_OK(publish_host_new(r.loop, r.dir, 7681, NULL, &p, &warning, err, sizeof(err)));
	ASSERT_NOT_NULL(warning);
	ASSERT_TRUE(strstr(warning, "BERTH_PUBLISH_HOST=0.0.0.0") != NULL);
	ASSERT_TRUE(strstr(warning, publish_host_url(p)) != NULL);
	free(warning);
	p = publish_host_free(p);
	/* Not an address. */
	ASSERT_ERROR(
		publish_host_new(r.loop, r.dir, 7681, "localhost", &p, &warning, err, sizeof(err)),
		EINVAL);
	ASSERT_TRUE(strstr(err, "BERTH_PUBLISH_HOST must be an IPv4 or IPv6 address") != NULL);
	ASSERT_ERROR(
		publish_host_new(r.loop, r.dir, 7681, "[127.0.0.1", &p, &warning, err, sizeof(err)),
		EINVAL);
	unsetenv("BERTH_PUBLISH_HOST");
	rig_free(&r);
}

TEST(splice)
{
	PublishHost *p = NULL;
	char *warning = NULL, err[256] = "", buf[64];
	int c, g;
	Rig r;

	rig_new(&r);
	ASSERT_OK(
		publish_host_new(r.loop, r.dir, 7681, "127.0.0.1", &p, &warning, err, sizeof(err)));
	/* No VM (no socket yet, or a reload in between): once the request is in, the
	 * connection is closed. */
	c = tcp_connect(p, AF_INET);
	ASSERT_EQ(write(c, "GET / HTTP/1.1\r\n\r\n", 18), 18);
	ASSERT_EQ(read_some(&r, c, buf, sizeof(buf)), 0);
	close(c);
	ASSERT_EQ(publish_host_connections(p), 0);

	rig_listen(&r);
	c = tcp_connect(p, AF_INET);
	ASSERT_EQ(write(c, "GET / HTTP/1.1\r\n\r\n", 18), 18);
	g = accept_guest(&r);
	ASSERT_TRUE(g >= 0);
	ASSERT_EQ(read_some(&r, g, buf, sizeof(buf)), 18);
	ASSERT_TRUE(memcmp(buf, "GET / HTTP/1.1\r\n\r\n", 18) == 0);
	ASSERT_EQ(publish_host_connections(p), 1);
	ASSERT_EQ(write(g, "HTTP/1.1 401 ", 13), 13);
	ASSERT_EQ(read_some(&r, c, buf, sizeof(buf)), 13);
	/* The guest's side closes: so does the browser's, and the slot is free again. */
	close(g);
	ASSERT_EQ(read_some(&r, c, buf, sizeof(buf)), 0);
	close(c);
	for (int i = 0; i < 100 && publish_host_connections(p) > 0; i++)
		(void)ev_run(r.loop, 10 * USEC_PER_MSEC);
	ASSERT_EQ(publish_host_connections(p), 0);
	publish_host_free(p);
	rig_free(&r);
}

TEST(origin_check)
{
	const char *url = "http://127.0.0.1:41234";
	static const char ok_none[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1:41234\r\n\r\n";
	static const char ok_same[] =
		"GET /websockify HTTP/1.1\r\norigin:  http://127.0.0.1:41234 \r\n\r\n";
	static const char ok_local[] = "GET / HTTP/1.1\r\nOrigin: http://LOCALHOST:41234\r\n\r\n";
	static const char bad[] =
		"GET /websockify HTTP/1.1\r\nOrigin: https://evil.example\r\n\r\n";
	static const char bad_port[] = "GET / HTTP/1.1\r\nOrigin: http://127.0.0.1:4123\r\n\r\n";
	static const char bad_null[] = "GET / HTTP/1.1\r\nOrigin: null\r\n\r\n";
	static const char partial[] = "GET / HTTP/1.1\r\nOrigin: https://evil.exa";
	/* The word in a value or a longer header name is not the Origin header. */
	static const char other[] =
		"GET /?Origin:x HTTP/1.1\r\nX-Origin: https://evil.example\r\n\r\n";
	char *big = malloc(PUBLISH_HOST_HEAD_MAX);

	ASSERT_EQ(publish_host_origin_check(ok_none, strlen(ok_none), url, 41234), 1);
	ASSERT_EQ(publish_host_origin_check(ok_same, strlen(ok_same), url, 41234), 1);
	ASSERT_EQ(publish_host_origin_check(ok_local, strlen(ok_local), url, 41234), 1);
	ASSERT_EQ(publish_host_origin_check(bad, strlen(bad), url, 41234), 0);
	ASSERT_EQ(publish_host_origin_check(bad_port, strlen(bad_port), url, 41234), 0);
	ASSERT_EQ(publish_host_origin_check(bad_null, strlen(bad_null), url, 41234), 0);
	ASSERT_EQ(publish_host_origin_check(partial, strlen(partial), url, 41234), -EAGAIN);
	ASSERT_EQ(publish_host_origin_check(other, strlen(other), url, 41234), 1);
	ASSERT_TRUE(big != NULL);
	memset(big, 'a', PUBLISH_HOST_HEAD_MAX);
	ASSERT_EQ(publish_host_origin_check(big, PUBLISH_HOST_HEAD_MAX, url, 41234), -E2BIG);
	free(big);
}

/* A request from another site's page never reaches the guest: the host answers 403. */
TEST(foreign_origin_refused)
{
	PublishHost *p = NULL;
	char *warning = NULL, err[256] = "", buf[64] = "";
	static const char req[] =
		"GET /websockify HTTP/1.1\r\nOrigin: https://evil.example\r\n\r\n";
	int c;
	Rig r;

	rig_new(&r);
	rig_listen(&r);
	ASSERT_OK(
		publish_host_new(r.loop, r.dir, 6080, "127.0.0.1", &p, &warning, err, sizeof(err)));
	c = tcp_connect(p, AF_INET);
	ASSERT_EQ(write(c, req, strlen(req)), (ssize_t)strlen(req));
	ASSERT_TRUE(read_some(&r, c, buf, sizeof(buf) - 1) > 0);
	ASSERT_TRUE(strncmp(buf, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
	ASSERT_EQ(accept4(r.guest, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), -1);
	close(c);
	ASSERT_EQ(publish_host_connections(p), 0);
	publish_host_free(p);
	rig_free(&r);
}

TEST(connection_cap)
{
	PublishHost *p = NULL;
	char *warning = NULL, err[256] = "", buf[8];
	int c[PUBLISH_HOST_CONNS_MAX + 1];
	Rig r;

	rig_new(&r);
	rig_listen(&r);
	ASSERT_OK(
		publish_host_new(r.loop, r.dir, 7681, "127.0.0.1", &p, &warning, err, sizeof(err)));
	for (size_t i = 0; i < ELEMENTSOF(c); i++) {
		c[i] = tcp_connect(p, AF_INET);
		for (int k = 0;
		     k < 100 && publish_host_connections(p) < MIN(i + 1, PUBLISH_HOST_CONNS_MAX);
		     k++)
			(void)ev_run(r.loop, 5 * USEC_PER_MSEC);
	}
	ASSERT_EQ(publish_host_connections(p), PUBLISH_HOST_CONNS_MAX);
	/* The one past the cap was closed; the others stay open. */
	ASSERT_EQ(read_some(&r, c[PUBLISH_HOST_CONNS_MAX], buf, sizeof(buf)), 0);
	ASSERT_TRUE(read(c[0], buf, sizeof(buf)) < 0 && errno == EAGAIN);
	for (size_t i = 0; i < ELEMENTSOF(c); i++)
		close(c[i]);
	publish_host_free(p);
	rig_free(&r);
}

int main(void)
{
	return tests_run();
}
