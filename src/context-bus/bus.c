/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "context_bus.pb-c.h"
#include "frame.h"
#include "macros.h"

#define LOG_PREFIX "[context-bus] "
#define READ_CHUNK (64u * 1024u)
#define TOPIC_BUCKETS 4096u
/* What decoding one frame may allocate: its strings and bytes once, the messages, and the
 * unknown fields a hostile frame may be made of (protobuf-c keeps a record of each). */
#define DECODE_BUDGET(len) (2 * (size_t)(len) + 64u * 1024u)

typedef struct Conn Conn;

/* One encoded frame (header included), shared by every queue it is in. */
typedef struct Out {
	unsigned ref;
	size_t len;
	uint8_t data[];
} Out;

typedef struct Topic Topic;
struct Topic {
	Topic *next;
	uint64_t hash;
	Conn **conns;
	size_t n, cap;
	char name[];
};

struct Conn {
	Bus *bus;
	Conn *prev, *next;
	Conn *dead_next;
	unsigned long id;
	int fd;
	EvSource *src;
	bool have_creds, from_table, dead;
	uid_t uid;
	pid_t pid;
	char name[BUS_NAME_MAX];
	FrameReader rd;
	size_t reserved; /* of the read budget, for the frame being read */
	Out *q[BUS_QUEUE_FRAMES_MAX];
	size_t q_head, q_n, q_bytes, q_off;
	bool dropping;
	uint64_t dropped;
	Topic **subs;
	size_t n_subs, cap_subs;
};

struct Bus {
	EvLoop *loop;
	const BusIdentity *identity;
	unsigned conns_max, n_conns;
	unsigned long next_id;
	Conn *conns, *dead;
	EvSource *reaper;
	size_t read_reserved, out_bytes;
	Topic *topics[TOPIC_BUCKETS];
	BusStats stats;
};

/* ---- logging ---- */

int bus_log_fd = STDERR_FILENO;

void bus_log(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	if (bus_log_fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = MIN(n, (int)sizeof(buf) - 2);
	buf[n++] = '\n';
	dprintf(bus_log_fd, LOG_PREFIX "%.*s", n, buf);
}

void bus_log_json(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	if (s)
		bus_log("%s", s);
	free(s);
	json_decref(o);
}

/* At most @max bytes of @in (@len), control characters and quotes made '?', "..." when cut:
 * what a text log line may take from a peer. */
static void clip(char *out, size_t size, const char *in, size_t len, size_t max)
{
	size_t n = 0, i;

	for (i = 0; i < len && i < max && n + 4 < size; i++) {
		unsigned char ch = (unsigned char)in[i];

		out[n++] = (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') ? '?' : (char)ch;
	}
	if (i < len && n + 4 <= size) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* A peer's string for a JSON log line: cut at @max bytes (jansson escapes the rest; bytes
 * that are not UTF-8 become '?'). */
static json_t *json_clip(const char *s, size_t max)
{
	char buf[BUS_TOPIC_MAX + 4];
	size_t n = strnlen(s, MIN(max, sizeof(buf) - 4));
	json_t *j;

	memcpy(buf, s, n);
	buf[n] = '\0';
	j = json_stringn(buf, n);
	if (j)
		return j;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] >= 0x80)
			buf[i] = '?';
	return json_stringn(buf, n);
}

/* ---- protobuf-c with a budget ---- */

typedef struct Budget {
	size_t left;
} Budget;

typedef struct BudgetHead {
	size_t size;
	max_align_t align[];
} BudgetHead;

static void *budget_alloc(void *data, size_t size)
{
	Budget *b = data;
	BudgetHead *h;

	if (size > b->left || size > SIZE_MAX - sizeof(BudgetHead))
		return NULL;
	h = malloc(sizeof(BudgetHead) + size);
	if (!h)
		return NULL;
	h->size = size;
	b->left -= size;
	return h->align;
}

static void budget_free(void *data, void *p)
{
	Budget *b = data;
	BudgetHead *h;

	if (!p)
		return;
	h = (BudgetHead *)((char *)p - offsetof(BudgetHead, align));
	b->left += h->size;
	free(h);
}

/* ---- outgoing frames ---- */

static Out *out_new(Bus *b, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	Out *o;

	if (len > FRAME_SIZE_MAX || b->out_bytes + len + FRAME_HEADER_SIZE > BUS_OUT_BUDGET)
		return NULL;
	o = malloc(sizeof(*o) + FRAME_HEADER_SIZE + len);
	if (!o)
		return NULL;
	o->ref = 1;
	o->len = FRAME_HEADER_SIZE + len;
	frame_header_put(o->data, (uint32_t)len);
	(void)protobuf_c_message_pack(msg, o->data + FRAME_HEADER_SIZE);
	b->out_bytes += o->len;
	return o;
}

static void out_unref(Bus *b, Out *o)
{
	if (!o || --o->ref > 0)
		return;
	b->out_bytes -= o->len;
	free(o);
}

static void conn_kill(Conn *c);

static void conn_update_events(Conn *c)
{
	if (!c->dead)
		(void)ev_source_set_io_events(c->src, EPOLLIN | (c->q_n ? EPOLLOUT : 0));
}

static void conn_flush(Conn *c)
{
	Bus *b = c->bus;

	while (c->q_n > 0 && !c->dead) {
		Out *o = c->q[c->q_head];
		ssize_t w = send(c->fd, o->data + c->q_off, o->len - c->q_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_kill(c);
			return;
		}
		c->q_off += (size_t)w;
		if (c->q_off < o->len)
			continue;
		c->q_off = 0;
		c->q_bytes -= o->len;
		c->q[c->q_head] = NULL;
		c->q_head = (c->q_head + 1) % BUS_QUEUE_FRAMES_MAX;
		c->q_n--;
		out_unref(b, o);
	}
	if (c->q_n == 0 && c->dropping) {
		bus_log_json(json_pack("{s:s, s:I, s:s, s:I}", "event", "queue_drained", "conn",
				       (json_int_t)c->id, "app", c->name, "dropped",
				       (json_int_t)c->dropped));
		c->dropping = false;
	}
	conn_update_events(c);
}

/* Queue @o for @c (a reference of its own), or drop it when the queue is full: SPEC 5's
 * at-most-once. @what names it in the log. */
static bool conn_send(Conn *c, Out *o, const char *what, const char *topic)
{
	Bus *b = c->bus;

	if (c->dead)
		return false;
	if (c->q_n >= BUS_QUEUE_FRAMES_MAX || c->q_bytes + o->len > BUS_QUEUE_BYTES_MAX) {
		c->dropped++;
		b->stats.dropped_queue_full++;
		/* One line when a queue starts dropping, one when it drains: a subscriber that
		 * stopped reading must not flood the log with a line per event. */
		if (!c->dropping)
			bus_log_json(json_pack(
				"{s:s, s:I, s:s, s:s, s:o, s:i, s:I}", "event", "queue_full",
				"conn", (json_int_t)c->id, "app", c->name, "dropping", what,
				"topic", topic ? json_clip(topic, 128) : json_null(), "queued",
				(int)c->q_n, "queuedBytes", (json_int_t)c->q_bytes));
		c->dropping = true;
		return false;
	}
	o->ref++;
	c->q[(c->q_head + c->q_n) % BUS_QUEUE_FRAMES_MAX] = o;
	c->q_n++;
	c->q_bytes += o->len;
	conn_flush(c);
	return true;
}

static void conn_ack(Conn *c, bool ok, const char *error)
{
	Berth__Contextbus__Envelope env = BERTH__CONTEXTBUS__ENVELOPE__INIT;
	Berth__Contextbus__Ack ack = BERTH__CONTEXTBUS__ACK__INIT;
	Out *o;

	ack.ok = ok;
	ack.error = (char *)(error ?: "");
	env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_ACK;
	env.ack = &ack;
	o = out_new(c->bus, &env.base);
	if (!o)
		return; /* acks are advisory (SPEC 2.8): none is better than an unbounded queue */
	(void)conn_send(c, o, "ack", NULL);
	out_unref(c->bus, o);
}

/* ---- topics ---- */

static uint64_t topic_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static Topic *topic_find(Bus *b, const char *name, uint64_t h, Topic ***ret_link)
{
	Topic **link = &b->topics[h % TOPIC_BUCKETS];

	for (; *link; link = &(*link)->next)
		if ((*link)->hash == h && streq((*link)->name, name))
			break;
	if (ret_link)
		*ret_link = link;
	return *link;
}

static void topic_drop_conn(Bus *b, Topic *t, Conn *c)
{
	Topic **link;

	for (size_t i = 0; i < t->n; i++)
		if (t->conns[i] == c) {
			t->conns[i] = t->conns[--t->n];
			break;
		}
	if (t->n > 0)
		return;
	(void)topic_find(b, t->name, t->hash, &link);
	*link = t->next;
	free(t->conns);
	free(t);
}

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap * 2 : 4;
	void *p;

	if (n < *cap)
		return 0;
	p = reallocarray(*v, c, size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

static const char *conn_subscribe(Conn *c, const char *name)
{
	Bus *b = c->bus;
	uint64_t h = topic_hash(name);
	Topic **link, *t = topic_find(b, name, h, &link);
	bool fresh = !t;

	if (t)
		for (size_t i = 0; i < c->n_subs; i++)
			if (c->subs[i] == t)
				return NULL; /* one subscription per topic per connection */
	if (c->n_subs >= BUS_SUBSCRIPTIONS_MAX)
		return "too many subscriptions on this connection";
	if (grow((void **)&c->subs, &c->cap_subs, c->n_subs, sizeof(*c->subs)) < 0)
		return "out of memory";
	if (fresh) {
		size_t len = strlen(name);

		t = calloc(1, sizeof(*t) + len + 1);
		if (!t)
			return "out of memory";
		memcpy(t->name, name, len + 1);
		t->hash = h;
	}
	if (grow((void **)&t->conns, &t->cap, t->n, sizeof(*t->conns)) < 0) {
		if (fresh)
			free(t);
		return "out of memory";
	}
	if (fresh) {
		t->next = NULL;
		*link = t;
	}
	t->conns[t->n++] = c;
	c->subs[c->n_subs++] = t;
	return NULL;
}

static void conn_unsubscribe(Conn *c, const char *name)
{
	Topic *t = topic_find(c->bus, name, topic_hash(name), NULL);

	for (size_t i = 0; t && i < c->n_subs; i++)
		if (c->subs[i] == t) {
			c->subs[i] = c->subs[--c->n_subs];
			topic_drop_conn(c->bus, t, c);
			return;
		}
}

/* ---- connections ---- */

static void conn_free(Conn *c)
{
	Bus *b = c->bus;

	for (size_t i = 0; i < c->n_subs; i++)
		topic_drop_conn(b, c->subs[i], c);
	free(c->subs);
	while (c->q_n > 0) {
		out_unref(b, c->q[c->q_head]);
		c->q_head = (c->q_head + 1) % BUS_QUEUE_FRAMES_MAX;
		c->q_n--;
	}
	b->read_reserved -= c->reserved;
	frame_reader_done(&c->rd);
	ev_source_free(c->src);
	safe_close(c->fd);
	free(c);
}

/* Take @c off the bus now (no more events reach it) and free it after this iteration:
 * it may be in the middle of a fan-out's list or of its own read. */
static void conn_kill(Conn *c)
{
	Bus *b = c->bus;

	if (c->dead)
		return;
	/* Its subscriptions stay until the reaper frees it: conn_send() skips a dead
	 * connection, and a topic list must not change under a fan-out walking it. */
	c->dead = true;
	(void)ev_source_set_enabled(c->src, EV_OFF);
	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	b->n_conns--;
	bus_log("conn %lu (\"%s\") closed", c->id, c->name);
	if (c->dropped)
		bus_log_json(json_pack("{s:s, s:I, s:s, s:I}", "event", "conn_dropped_total",
				       "conn", (json_int_t)c->id, "app", c->name, "dropped",
				       (json_int_t)c->dropped));
	c->dead_next = b->dead;
	b->dead = c;
	(void)ev_source_set_enabled(b->reaper, EV_ONESHOT);
}

static int on_reap(EvSource *s, void *userdata)
{
	Bus *b = userdata;

	while (b->dead) {
		Conn *c = b->dead;

		b->dead = c->dead_next;
		conn_free(c);
	}
	return 0;
}

/* ---- envelopes ---- */

static bool topic_ok(Conn *c, const char *topic)
{
	if (strlen(topic) <= BUS_TOPIC_MAX)
		return true;
	conn_ack(c, false, "topic longer than 1024 bytes");
	return false;
}

static void on_register(Conn *c, const char *claim)
{
	char shown[BUS_CLAIM_MAX + 8];
	size_t len = strlen(claim);

	clip(shown, sizeof(shown), claim, len, BUS_CLAIM_MAX);
	if (c->have_creds && c->uid == 0) {
		/* SPEC 5: root is privileged, its claim stands. */
		if (len > BUS_CLAIM_MAX) {
			conn_ack(c, false, "app name longer than 64 bytes");
			return;
		}
		snprintf(c->name, sizeof(c->name), "%s", len ? shown : "root");
		bus_log("conn %lu registered as \"%s\" (uid 0, pid %d: privileged, its claim stands)",
			c->id, c->name, (int)c->pid);
	} else if (len > 0 && !streq(claim, c->name)) {
		c->bus->stats.overrides++;
		bus_log_json(json_pack("{s:s, s:I, s:i, s:i, s:o, s:s}", "event",
				       "register_name_overridden", "conn", (json_int_t)c->id, "uid",
				       c->have_creds ? (int)c->uid : -1, "pid", (int)c->pid,
				       "claimed", json_clip(claim, BUS_CLAIM_MAX), "app", c->name));
		bus_log("conn %lu registered as \"%s\" (uid %u, pid %d; it claimed \"%s\")", c->id,
			c->name, (unsigned)c->uid, (int)c->pid, shown);
	} else
		bus_log("conn %lu registered as \"%s\" (uid %u, pid %d)", c->id, c->name,
			(unsigned)c->uid, (int)c->pid);
	conn_ack(c, true, NULL);
}

static void on_publish(Conn *c, const Berth__Contextbus__PublishRequest *p)
{
	Berth__Contextbus__Envelope env = BERTH__CONTEXTBUS__ENVELOPE__INIT;
	Berth__Contextbus__Event ev = BERTH__CONTEXTBUS__EVENT__INIT;
	char shown[140];
	Bus *b = c->bus;
	Topic *t;
	Out *o;

	if (!topic_ok(c, p->topic))
		return;
	clip(shown, sizeof(shown), p->topic, strlen(p->topic), 128);
	bus_log("\"%s\" published to \"%s\"", c->name, shown);
	b->stats.published++;
	t = topic_find(b, p->topic, topic_hash(p->topic), NULL);
	if (t && (t->n > 1 || t->conns[0] != c)) {
		ev.topic = p->topic;
		ev.payload = p->payload;
		env.kind_case = BERTH__CONTEXTBUS__ENVELOPE__KIND_EVENT;
		env.event = &ev;
		o = out_new(b, &env.base);
		if (!o) {
			b->stats.dropped_budget++;
			bus_log_json(json_pack("{s:s, s:I, s:s, s:o, s:I}", "event",
					       "publish_dropped", "conn", (json_int_t)c->id, "app",
					       c->name, "topic", json_clip(p->topic, 128), "bytes",
					       (json_int_t)p->payload.len));
			conn_ack(c, false,
				 "the bus has no room for this event now; it was dropped");
			return;
		}
		for (size_t i = 0; i < t->n; i++)
			if (t->conns[i] != c && conn_send(t->conns[i], o, "event", p->topic))
				b->stats.delivered++;
		out_unref(b, o);
	}
	conn_ack(c, true, NULL);
}

static void conn_handle(Conn *c, const uint8_t *data, size_t len)
{
	Budget budget = {DECODE_BUDGET(len)};
	ProtobufCAllocator alloc = {budget_alloc, budget_free, &budget};
	Berth__Contextbus__Envelope *env;
	const char *err;

	env = berth__contextbus__envelope__unpack(&alloc, len, data);
	if (!env) {
		c->bus->stats.frames_undecodable++;
		bus_log_json(json_pack("{s:s, s:I, s:s, s:I}", "event", "frame_undecodable", "conn",
				       (json_int_t)c->id, "app", c->name, "bytes",
				       (json_int_t)len));
		conn_ack(c, false, "frame is not a context bus Envelope; skipped");
		return;
	}
	switch ((int)env->kind_case) {
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_REGISTER:
		on_register(c, env->register_->app);
		break;
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_PUBLISH:
		on_publish(c, env->publish);
		break;
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_SUBSCRIBE:
		if (!topic_ok(c, env->subscribe->topic))
			break;
		err = conn_subscribe(c, env->subscribe->topic);
		if (!err) {
			char shown[140];

			clip(shown, sizeof(shown), env->subscribe->topic,
			     strlen(env->subscribe->topic), 128);
			bus_log("\"%s\" subscribed to \"%s\"", c->name, shown);
		}
		conn_ack(c, !err, err);
		break;
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_UNSUBSCRIBE:
		if (!topic_ok(c, env->unsubscribe->topic))
			break;
		conn_unsubscribe(c, env->unsubscribe->topic);
		conn_ack(c, true, NULL);
		break;
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_EVENT:
	case BERTH__CONTEXTBUS__ENVELOPE__KIND_ACK:
		/* SPEC 5: only the bus sends these; logged and ignored, no ack. */
		bus_log("conn %lu (\"%s\") sent an %s, which only the bus sends; ignored", c->id,
			c->name,
			env->kind_case == BERTH__CONTEXTBUS__ENVELOPE__KIND_EVENT ? "Event"
										  : "Ack");
		break;
	case BERTH__CONTEXTBUS__ENVELOPE__KIND__NOT_SET:
	default:
		conn_ack(c, false, "envelope carries no known message");
		break;
	}
	berth__contextbus__envelope__free_unpacked(env, &alloc);
}

static void conn_frame_event(Conn *c, int res)
{
	Bus *b = c->bus;
	const uint8_t *body;
	size_t len;
	char why[128];

	switch (res) {
	case FRAME_READY:
		body = frame_reader_body(&c->rd, &len);
		conn_handle(c, body, len);
		break;
	case FRAME_OVERSIZED:
		b->stats.frames_oversized++;
		bus_log_json(json_pack("{s:s, s:I, s:s, s:I, s:i}", "event", "frame_oversized",
				       "conn", (json_int_t)c->id, "app", c->name, "bytes",
				       (json_int_t)c->rd.len, "max", (int)FRAME_SIZE_MAX));
		snprintf(why, sizeof(why),
			 "frame of %u bytes is over the 8 MiB limit; it is being skipped",
			 (unsigned)c->rd.len);
		conn_ack(c, false, why);
		break;
	case -ENOMEM:
	case FRAME_REFUSED:
		b->stats.frames_refused++;
		bus_log_json(json_pack("{s:s, s:I, s:s}", "event", "frame_refused", "conn",
				       (json_int_t)c->id, "app", c->name));
		conn_ack(c, false, "the bus had no memory for this frame; it was skipped");
		break;
	default:
		break;
	}
}

/* The read budget: a frame's announced length is reserved once its header is in. */
static void conn_budget(Conn *c)
{
	Bus *b = c->bus;
	uint32_t p = frame_reader_pending(&c->rd);

	if (p == 0 || c->reserved)
		return;
	if (b->read_reserved + p > BUS_READ_BUDGET) {
		frame_reader_refuse(&c->rd);
		return;
	}
	c->reserved = p;
	b->read_reserved += p;
}

static void conn_unreserve(Conn *c)
{
	c->bus->read_reserved -= c->reserved;
	c->reserved = 0;
}

static int on_conn_io(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	static uint8_t buf[READ_CHUNK];
	Conn *c = userdata;
	size_t off = 0;
	ssize_t n;

	if (revents & EPOLLOUT)
		conn_flush(c);
	if (c->dead || !(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		conn_kill(c);
		return 0;
	}
	while (off < (size_t)n && !c->dead) {
		size_t used;
		int res = frame_reader_feed(&c->rd, buf + off, (size_t)n - off, &used);

		off += used;
		if (res == FRAME_READY || res == FRAME_REFUSED || res == FRAME_SKIPPED ||
		    res == -ENOMEM)
			conn_unreserve(c);
		conn_frame_event(c, res);
		conn_budget(c);
		if (res == FRAME_MORE && used == 0)
			break;
	}
	return 0;
}

int bus_add_conn_creds(Bus *b, int fd, bool have_creds, uid_t uid, pid_t pid)
{
	Conn *c;
	int r;

	if (b->n_conns >= b->conns_max) {
		b->stats.conns_refused++;
		bus_log_json(json_pack("{s:s, s:i, s:i}", "event", "too_many_connections", "max",
				       (int)b->conns_max, "uid", have_creds ? (int)uid : -1));
		safe_close(fd);
		return -EMFILE;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		safe_close(fd);
		return -ENOMEM;
	}
	c->bus = b;
	c->fd = fd;
	c->id = ++b->next_id;
	c->have_creds = have_creds;
	c->uid = have_creds ? uid : BUS_UID_UNKNOWN;
	c->pid = have_creds ? pid : 0;
	c->rd = FRAME_READER_INIT(FRAME_SIZE_MAX);
	c->from_table = bus_identity_name(b->identity, uid, have_creds, c->name);
	r = ev_add_io(b->loop, &c->src, fd, EPOLLIN, on_conn_io, c);
	if (r < 0) {
		safe_close(fd);
		free(c);
		return r;
	}
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	b->n_conns++;
	b->stats.conns_accepted++;
	bus_log("conn %lu from uid %d pid %d is \"%s\"", c->id, have_creds ? (int)uid : -1,
		(int)c->pid, c->name);
	return 0;
}

int bus_add_conn(Bus *b, int fd)
{
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	bool have =
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred);

	return bus_add_conn_creds(b, fd, have, cred.uid, cred.pid);
}

int bus_new(EvLoop *loop, const BusIdentity *identity, unsigned conns_max, Bus **ret)
{
	Bus *b = calloc(1, sizeof(*b));
	int r;

	if (!b)
		return -ENOMEM;
	b->loop = loop;
	b->identity = identity;
	b->conns_max = conns_max ? MIN(conns_max, BUS_CONNS_MAX_LIMIT) : BUS_CONNS_MAX_DEFAULT;
	r = ev_add_defer(loop, &b->reaper, on_reap, b);
	if (r < 0) {
		free(b);
		return r;
	}
	(void)ev_source_set_enabled(b->reaper, EV_OFF);
	*ret = b;
	return 0;
}

Bus *bus_free(Bus *b)
{
	if (!b)
		return NULL;
	while (b->conns)
		conn_kill(b->conns);
	on_reap(NULL, b);
	ev_source_free(b->reaper);
	free(b);
	return NULL;
}

const BusStats *bus_stats(const Bus *b)
{
	return &b->stats;
}

unsigned bus_n_conns(const Bus *b)
{
	return b->n_conns;
}
