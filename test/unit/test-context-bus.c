/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The context bus in one process (src/context-bus/bus.c): clients on socketpairs with the
 * credentials the kernel would have given, the loop run by hand. Fan-out to exactly the
 * topic's other subscribers, no echo, unsubscribe and disconnect, the identity table and
 * a contradicted claim, the 256-frame queue, and oversized or undecodable frames that
 * cost only themselves. test/e2e/context-bus.py runs the binary with real uids.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "context_bus.pb-c.h"
#include "evloop.h"
#include "frame.h"
#include "tests.h"

typedef struct Client {
	int fd;
	FrameReader rd;
} Client;

typedef struct Got {
	int kind;
	char topic[256];
	char payload[256];
	bool ok;
	char error[256];
} Got;

static EvLoop *loop;
static Bus *bus;
static BusIdentity ids;

static void setup(void)
{
	static const char table[] =
		"{\"schema\":1,\"apps\":[{\"uid\":10000,\"name\":\"notes\"},"
		"{\"uid\":10001,\"name\":\"feed\"},{\"uid\":10002,\"name\":\"editor\"}]}";
	char *err = NULL;

	bus_log_fd = -1;
	ASSERT_OK(bus_identity_parse(table, strlen(table), &ids, &err));
	ASSERT_OK(ev_loop_new(&loop));
	ASSERT_OK(bus_new(loop, &ids, 0, &bus));
}

static void spin(void)
{
	for (int i = 0; i < 1000 && ev_run(loop, 0) > 0; i++)
		;
}

static Client client(uid_t uid)
{
	int sv[2];
	Client c = {.rd = FRAME_READER_INIT(FRAME_SIZE_MAX)};

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv));
	ASSERT_OK(bus_add_conn_creds(bus, sv[1], true, uid, 4242));
	c.fd = sv[0];
	return c;
}

static void send_env(Client *c, Berth__Contextbus__Envelope *env)
{
	size_t len = berth__contextbus__envelope__get_packed_size(env);
	uint8_t *buf = malloc(len + 4);

	ASSERT_NOT_NULL(buf);
	frame_header_put(buf, (uint32_t)len);
	berth__contextbus__envelope__pack(env, buf + 4);
	ASSERT_EQ(send(c->fd, buf, len + 4, MSG_NOSIGNAL), (ssize_t)(len + 4));
	free(buf);
	spin();
}

static void sub(Client *c, const char *topic, bool on)
{
	Berth__Contextbus__Envelope env = BERTH__CONTEXTBUS__ENVELOPE__INIT;
	Berth__Contextbus__SubscribeRequest s = BERTH__CONTEXTBUS__SUBSCRIBE_REQUEST__INIT;
	Berth__Contextbus__UnsubscribeRequest u = BERTH__CONTEXTBUS__UNSUBSCRIBE_REQUEST__INIT;

	if (on) {
		s.topic = (char *)topic;
		env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_SUBSCRIBE;
		env.subscribe = &s;
	} else {
		u.topic = (char *)topic;
		env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_UNSUBSCRIBE;
		env.unsubscribe = &u;
	}
	send_env(c, &env);
}

static void pub(Client *c, const char *topic, const char *payload)
{
	Berth__Contextbus__Envelope env = BERTH__CONTEXTBUS__ENVELOPE__INIT;
	Berth__Contextbus__PublishRequest p = BERTH__CONTEXTBUS__PUBLISH_REQUEST__INIT;

	p.topic = (char *)topic;
	p.payload.data = (uint8_t *)payload;
	p.payload.len = strlen(payload);
	env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_PUBLISH;
	env.publish = &p;
	send_env(c, &env);
}

static void reg(Client *c, const char *name)
{
	Berth__Contextbus__Envelope env = BERTH__CONTEXTBUS__ENVELOPE__INIT;
	Berth__Contextbus__RegisterRequest r = BERTH__CONTEXTBUS__REGISTER_REQUEST__INIT;

	r.app = (char *)name;
	env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_REGISTER;
	env.register_ = &r;
	send_env(c, &env);
}

/* The frames @c has been sent, up to @max, acks left out unless @acks. */
static size_t recv_all(Client *c, Got *got, size_t max, bool acks)
{
	uint8_t buf[65536];
	size_t n = 0;
	ssize_t r;

	spin();
	while ((r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		size_t off = 0;

		while (off < (size_t)r) {
			size_t used, len;
			int res = frame_reader_feed(&c->rd, buf + off, (size_t)r - off, &used);
			const uint8_t *body;
			Berth__Contextbus__Envelope *env;

			off += used;
			if (res != FRAME_READY)
				continue;
			body = frame_reader_body(&c->rd, &len);
			env = berth__contextbus__envelope__unpack(NULL, len, body);
			ASSERT_NOT_NULL(env);
			if (env->kind_case == BERTH__CONTEXTBUS__ENVELOPE__KIND_ACK && !acks) {
				berth__contextbus__envelope__free_unpacked(env, NULL);
				continue;
			}
			if (n < max) {
				memset(&got[n], 0, sizeof(got[n]));
				got[n].kind = env->kind_case;
				if (env->kind_case == BERTH__CONTEXTBUS__ENVELOPE__KIND_EVENT) {
					snprintf(got[n].topic, sizeof(got[n].topic), "%s",
						 env->event->topic);
					snprintf(got[n].payload, sizeof(got[n].payload), "%.*s",
						 (int)env->event->payload.len,
						 (const char *)env->event->payload.data);
				} else if (env->kind_case ==
					   BERTH__CONTEXTBUS__ENVELOPE__KIND_ACK) {
					got[n].ok = env->ack->ok;
					snprintf(got[n].error, sizeof(got[n].error), "%s",
						 env->ack->error);
				}
			}
			n++;
			berth__contextbus__envelope__free_unpacked(env, NULL);
		}
		spin();
	}
	return n;
}

TEST(fan_out_exact_topic_no_echo)
{
	Got got[8];
	Client a, b, c, d;

	setup();
	a = client(10000);
	b = client(10001);
	c = client(10002);
	d = client(12345);
	sub(&a, "notes.added", true);
	sub(&b, "notes.added", true);
	sub(&d, "notes.added.x", true); /* no wildcards, no prefixes */
	pub(&a, "notes.added", "{\"id\":\"1\"}");
	ASSERT_EQ(recv_all(&a, got, 8, false), 0); /* no echo */
	ASSERT_EQ(recv_all(&b, got, 8, false), 1);
	ASSERT_EQ(got[0].kind, BERTH__CONTEXTBUS__ENVELOPE__KIND_EVENT);
	ASSERT_STREQ(got[0].topic, "notes.added");
	ASSERT_STREQ(got[0].payload, "{\"id\":\"1\"}");
	ASSERT_EQ(recv_all(&d, got, 8, false), 0);
	pub(&c, "notes.added", "2");
	ASSERT_EQ(recv_all(&a, got, 8, false), 1);
	ASSERT_EQ(recv_all(&b, got, 8, false), 1);
	ASSERT_EQ(recv_all(&c, got, 8, false), 0);
	ASSERT_EQ(bus_stats(bus)->published, 2);
	ASSERT_EQ(bus_stats(bus)->delivered, 3);
}

TEST(acks_and_unsubscribe)
{
	Got got[8];
	Client a, b;

	setup();
	a = client(10000);
	b = client(10001);
	sub(&b, "t", true);
	sub(&b, "t", true); /* twice is once */
	ASSERT_EQ(recv_all(&b, got, 8, true), 2);
	ASSERT_TRUE(got[0].ok && got[1].ok);
	pub(&a, "t", "1");
	ASSERT_EQ(recv_all(&a, got, 8, true), 1);
	ASSERT_EQ(got[0].kind, BERTH__CONTEXTBUS__ENVELOPE__KIND_ACK);
	ASSERT_TRUE(got[0].ok);
	ASSERT_EQ(recv_all(&b, got, 8, false), 1);
	sub(&b, "t", false);
	pub(&a, "t", "2");
	ASSERT_EQ(recv_all(&b, got, 8, false), 0);
}

TEST(disconnect_drops_subscriptions)
{
	Got got[8];
	Client a, b;

	setup();
	a = client(10000);
	b = client(10001);
	sub(&b, "t", true);
	close(b.fd);
	spin();
	ASSERT_EQ(bus_n_conns(bus), 1);
	pub(&a, "t", "1");
	ASSERT_EQ(bus_stats(bus)->delivered, 0);
	ASSERT_EQ(recv_all(&a, got, 8, true), 1);
	ASSERT_TRUE(got[0].ok);
}

TEST(identity_from_credentials_not_claims)
{
	Client a, r;
	char name[BUS_NAME_MAX];

	setup();
	ASSERT_TRUE(bus_identity_name(&ids, 10001, true, name));
	ASSERT_STREQ(name, "feed");
	ASSERT_FALSE(bus_identity_name(&ids, 4321, true, name));
	ASSERT_STREQ(name, "uid-4321");
	ASSERT_FALSE(bus_identity_name(&ids, 0, true, name));
	ASSERT_STREQ(name, "root");
	ASSERT_FALSE(bus_identity_name(&ids, 10000, false, name));
	ASSERT_STREQ(name, "uid-4294967295");
	a = client(10000);
	reg(&a, "feed");
	ASSERT_EQ(bus_stats(bus)->overrides, 1);
	reg(&a, "notes");
	ASSERT_EQ(bus_stats(bus)->overrides, 1);
	r = client(0);
	reg(&r, "governor"); /* root's claim stands: no contradiction */
	ASSERT_EQ(bus_stats(bus)->overrides, 1);
}

TEST(identity_table_is_checked)
{
	static const char *const bad[] = {
		"{\"schema\":2,\"apps\":[]}",
		"{\"schema\":1}",
		"{\"schema\":1,\"apps\":[],\"x\":1}",
		"{\"schema\":1,\"apps\":[{\"uid\":0,\"name\":\"a\"}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"A\"}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"a\",\"x\":1}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"a\"},{\"uid\":5,\"name\":\"b\"}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"a\"},{\"uid\":6,\"name\":\"a\"}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"a\",\"name\":\"b\"}]}",
		"{\"schema\":1,\"apps\":[{\"uid\":4294967295,\"name\":\"a\"}]}",
		"[]",
		"",
	};
	BusIdentity id = {};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		char *err = NULL;

		ASSERT_ERROR(bus_identity_parse(bad[i], strlen(bad[i]), &id, &err), EINVAL);
		ASSERT_NOT_NULL(err);
		free(err);
	}
}

TEST(queue_cap_drops_newest_and_the_connection_lives)
{
	static Got got[4096];
	char payload[64];
	Client a, b;
	size_t n;
	int slow = 4096;

	setup();
	a = client(10000);
	b = client(10001);
	/* Small socket buffers, so that the bus's own queue is what fills. */
	ASSERT_OK(setsockopt(b.fd, SOL_SOCKET, SO_RCVBUF, &slow, sizeof(slow)));
	sub(&b, "flood", true);
	(void)recv_all(&b, got, 1, true);
	for (int i = 0; i < 3000; i++) {
		snprintf(payload, sizeof(payload), "%d", i);
		pub(&a, "flood", payload);
		(void)recv_all(&a, got, 1, true); /* a reads its acks */
	}
	ASSERT_TRUE(bus_stats(bus)->dropped_queue_full > 0);
	ASSERT_EQ(bus_stats(bus)->delivered + bus_stats(bus)->dropped_queue_full, 3000);
	n = recv_all(&b, got, ELEMENTSOF(got), false);
	ASSERT_EQ(n, bus_stats(bus)->delivered);
	/* What was queued arrives in order from the first; the drops are the newest. */
	for (size_t i = 0; i < n; i++) {
		snprintf(payload, sizeof(payload), "%zu", i);
		ASSERT_STREQ(got[i].payload, payload);
	}
	ASSERT_TRUE(n >= 256);
	pub(&a, "flood", "after");
	ASSERT_EQ(recv_all(&b, got, 4, false), 1);
	ASSERT_STREQ(got[0].payload, "after");
}

static void send_raw(Client *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			ASSERT_TRUE(errno == EAGAIN);
			spin();
			continue;
		}
		p += w;
		len -= (size_t)w;
		spin();
	}
}

TEST(oversized_frame_is_skipped_and_the_connection_lives)
{
	static uint8_t junk[65536];
	uint8_t head[4];
	size_t left = FRAME_SIZE_MAX + 1;
	Got got[4];
	Client a, b;

	setup();
	a = client(10000);
	b = client(10001);
	sub(&b, "t", true);
	(void)recv_all(&b, got, 4, true);
	frame_header_put(head, FRAME_SIZE_MAX + 1);
	send_raw(&a, head, 4);
	memset(junk, 0x0a, sizeof(junk));
	while (left > 0) {
		size_t n = left < sizeof(junk) ? left : sizeof(junk);

		send_raw(&a, junk, n);
		left -= n;
		(void)recv_all(&a, got, 4, true);
	}
	ASSERT_EQ(bus_stats(bus)->frames_oversized, 1);
	pub(&a, "t", "still here");
	ASSERT_EQ(recv_all(&b, got, 4, false), 1);
	ASSERT_STREQ(got[0].payload, "still here");
}

TEST(read_budget_refuses_frames_past_it)
{
	static uint8_t junk[65536];
	Client c[5];
	uint8_t head[5];
	size_t left = FRAME_SIZE_MAX - 1;
	Got got[4];

	setup();
	/* Four 8 MiB frames begun (one byte each) take the 32 MiB budget; the fifth is
	 * refused as it arrives, and skipped. */
	for (int i = 0; i < 5; i++) {
		c[i] = client(10000 + (uid_t)i);
		frame_header_put(head, FRAME_SIZE_MAX);
		head[4] = 0x0a;
		send_raw(&c[i], head, sizeof(head));
	}
	while (left > 0) {
		size_t n = left < sizeof(junk) ? left : sizeof(junk);

		send_raw(&c[4], junk, n);
		left -= n;
	}
	ASSERT_EQ(recv_all(&c[4], got, 4, true), 1);
	ASSERT_FALSE(got[0].ok);
	ASSERT_TRUE(strstr(got[0].error, "no memory for this frame") != NULL);
	ASSERT_EQ(bus_stats(bus)->frames_refused, 1);
	/* The refused connection goes on. */
	pub(&c[4], "t", "1");
	ASSERT_EQ(recv_all(&c[4], got, 4, true), 1);
	ASSERT_TRUE(got[0].ok);
}

TEST(undecodable_frame_gets_an_error_ack)
{
	static const uint8_t bad[] = {0, 0, 0, 3, 0x0a, 0x05, 'x'}; /* truncated field */
	Got got[4];
	Client a;

	setup();
	a = client(10000);
	send_raw(&a, bad, sizeof(bad));
	ASSERT_EQ(recv_all(&a, got, 4, true), 1);
	ASSERT_FALSE(got[0].ok);
	ASSERT_TRUE(strstr(got[0].error, "not a context bus Envelope") != NULL);
	ASSERT_EQ(bus_stats(bus)->frames_undecodable, 1);
	pub(&a, "t", "1");
	ASSERT_EQ(recv_all(&a, got, 4, true), 1);
	ASSERT_TRUE(got[0].ok);
}

TEST(topic_cap)
{
	char topic[BUS_TOPIC_MAX + 2];
	Got got[4];
	Client a;

	setup();
	a = client(10000);
	memset(topic, 'a', sizeof(topic) - 1);
	topic[sizeof(topic) - 1] = '\0';
	sub(&a, topic, true);
	ASSERT_EQ(recv_all(&a, got, 4, true), 1);
	ASSERT_FALSE(got[0].ok);
	ASSERT_TRUE(strstr(got[0].error, "topic longer") != NULL);
}

TEST(connection_cap)
{
	int sv[2];

	bus_log_fd = -1;
	ASSERT_OK(ev_loop_new(&loop));
	ASSERT_OK(bus_new(loop, NULL, 2, &bus));
	for (int i = 0; i < 2; i++) {
		ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
		ASSERT_OK(bus_add_conn_creds(bus, sv[1], true, 10000, 1));
	}
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_ERROR(bus_add_conn_creds(bus, sv[1], true, 10000, 1), EMFILE);
	ASSERT_EQ(bus_stats(bus)->conns_refused, 1);
}

int main(void)
{
	return tests_run();
}
