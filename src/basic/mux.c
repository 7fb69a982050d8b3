/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mux.h"
#include "random-util.h"

/* Room for two of the largest frames, so one whole frame always fits after compaction. */
#define MUX_INPUT_SIZE (2 * (MUX_HEADER_SIZE + MUX_FRAME_PAYLOAD_MAX))
#define MUX_ID_MAX UINT32_C(0x7fffffff)

static const uint8_t hello_magic[8] = {'B', 'E', 'R', 'T', 'H', 'M', 'U', 'X'};

typedef enum StreamPhase {
	PHASE_OPENING,	 /* we sent OPEN and wait for OPEN_OK */
	PHASE_ACCEPTING, /* the peer's OPEN was handed out; the user has not answered yet */
	PHASE_OPEN,
} StreamPhase;

struct MuxStream {
	Mux *mux;
	uint32_t id, port;
	bool incoming;
	StreamPhase phase;
	bool local_closed, remote_closed;
	bool attached; /* in the session table: the id is live on the wire */
	bool held;     /* the user holds it */
	bool doomed;   /* a STREAM_RESET event is queued for it */
	int error;
	uint32_t credit;      /* bytes we may still send */
	uint32_t recv_window; /* bytes the peer may still send (mirrors its credit) */
	uint32_t unacked;     /* received, not yet delivered by the user */
	uint32_t grant;	      /* delivered, not yet announced in a WINDOW frame */
	size_t table_idx;
	MuxStream *prev, *next;	  /* every stream of this Mux */
	MuxStream *dprev, *dnext; /* the doomed queue */
	void *userdata;
};

struct Mux {
	MuxConfig cfg;
	MuxState state;
	uint32_t epoch;
	uint32_t last_epoch; /* guest: the session we left, never re-entered */
	uint32_t sessions;

	/* What the peer announced in its HELLO. */
	uint32_t peer_max_frame, peer_window, peer_max_streams;

	uint32_t next_local_id;
	uint32_t last_remote_id;
	MuxStream *table[2 * MUX_STREAMS_MAX];
	size_t n_table;
	unsigned n_local, n_remote;
	MuxStream *streams;
	MuxStream *pending_open;
	MuxStream *doomed_head, *doomed_tail;
	bool reset_pending, ready_pending;
	int reset_error;

	uint8_t *in;
	size_t in_head, in_tail;

	uint8_t *out;
	size_t out_head, out_tail, out_alloc;
	size_t out_frame_left; /* unsent bytes of the frame at out_head that is partly written */

	MuxStats stats;
};

/* ---- little-endian helpers ---- */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- frame header ---- */

void mux_header_encode(const MuxFrameHeader *h, uint8_t *out)
{
	put_le16(out, MUX_MAGIC);
	out[2] = h->kind;
	out[3] = h->flags;
	put_le32(out + 4, h->epoch);
	put_le32(out + 8, h->stream);
	put_le32(out + 12, h->length);
}

/* The exact payload length each kind requires; -1: variable (DATA). */
static const int kind_length[_MUX_KIND_MAX] = {
	[MUX_KIND_HELLO] = MUX_HELLO_SIZE,
	[MUX_KIND_OPEN] = 4,
	[MUX_KIND_OPEN_OK] = 0,
	[MUX_KIND_OPEN_FAIL] = 4,
	[MUX_KIND_DATA] = -1,
	[MUX_KIND_CLOSE] = 0,
	[MUX_KIND_WINDOW] = 4,
	[MUX_KIND_RESET] = 4,
};

int mux_header_decode(const uint8_t *in, MuxFrameHeader *ret)
{
	MuxFrameHeader h = {
		.kind = in[2],
		.flags = in[3],
		.epoch = get_le32(in + 4),
		.stream = get_le32(in + 8),
		.length = get_le32(in + 12),
	};

	if (get_le16(in) != MUX_MAGIC || h.kind == 0 || h.kind >= _MUX_KIND_MAX || h.flags != 0)
		return -EBADMSG;
	if (h.length > MUX_FRAME_PAYLOAD_MAX)
		return -EBADMSG;
	if (kind_length[h.kind] >= 0 ? h.length != (uint32_t)kind_length[h.kind] : h.length == 0)
		return -EBADMSG;
	/* HELLO lives on stream 0, RESET may (a session reset), everything else may not. */
	if ((h.kind == MUX_KIND_HELLO) != (h.stream == 0) && h.kind != MUX_KIND_RESET)
		return -EBADMSG;
	if (h.stream > MUX_ID_MAX)
		return -EBADMSG;
	*ret = h;
	return 0;
}

static const struct {
	int error;
	MuxWireError wire;
} error_map[] = {
	{EIO, MUX_ERR_INTERNAL},       {ECONNREFUSED, MUX_ERR_REFUSED},
	{EMFILE, MUX_ERR_LIMIT},       {ECONNABORTED, MUX_ERR_ABORTED},
	{EPROTO, MUX_ERR_PROTOCOL},    {EHOSTUNREACH, MUX_ERR_UNREACHABLE},
	{ETIMEDOUT, MUX_ERR_TIMEOUT},  {ENFILE, MUX_ERR_LIMIT},
	{ENOMEM, MUX_ERR_LIMIT},       {ENETUNREACH, MUX_ERR_UNREACHABLE},
	{ECONNRESET, MUX_ERR_ABORTED}, {EPIPE, MUX_ERR_ABORTED},
	{ENOENT, MUX_ERR_REFUSED},
};

int mux_error_to_wire(int error)
{
	error = abs(error);
	for (size_t i = 0; i < ELEMENTSOF(error_map); i++)
		if (error_map[i].error == error)
			return error_map[i].wire;
	return MUX_ERR_INTERNAL;
}

int mux_error_from_wire(uint32_t code)
{
	/* The first entry for each code is its canonical errno. */
	for (size_t i = 0; i < ELEMENTSOF(error_map); i++)
		if ((uint32_t)error_map[i].wire == code)
			return -error_map[i].error;
	return -EIO;
}

/* ---- output queue ---- */

static size_t out_size(Mux *m)
{
	return m->out_tail - m->out_head;
}

static int out_reserve(Mux *m, size_t need)
{
	size_t used = out_size(m), want;
	uint8_t *p;

	if (m->out_alloc - m->out_tail >= need)
		return 0;
	if (m->out_head > 0) {
		memmove(m->out, m->out + m->out_head, used);
		m->out_head = 0;
		m->out_tail = used;
		if (m->out_alloc - used >= need)
			return 0;
	}
	want = MAX(m->out_alloc * 2, used + need);
	want = MAX(want, (size_t)4096);
	p = realloc(m->out, want);
	if (!p)
		return -ENOMEM;
	m->out = p;
	m->out_alloc = want;
	return 0;
}

static int queue_frame(Mux *m, uint8_t kind, uint32_t stream, const void *payload, size_t len)
{
	MuxFrameHeader h = {
		.kind = kind,
		.epoch = m->epoch,
		.stream = stream,
		.length = (uint32_t)len,
	};
	int r;

	r = out_reserve(m, MUX_HEADER_SIZE + len);
	if (r < 0)
		return r;
	mux_header_encode(&h, m->out + m->out_tail);
	if (len > 0)
		memcpy(m->out + m->out_tail + MUX_HEADER_SIZE, payload, len);
	m->out_tail += MUX_HEADER_SIZE + len;
	m->stats.frames_out++;
	return 0;
}

static int queue_u32(Mux *m, uint8_t kind, uint32_t stream, uint32_t value)
{
	uint8_t b[4];

	put_le32(b, value);
	return queue_frame(m, kind, stream, b, sizeof(b));
}

static int queue_hello(Mux *m)
{
	uint8_t p[MUX_HELLO_SIZE] = {};

	memcpy(p, hello_magic, sizeof(hello_magic));
	put_le16(p + 8, MUX_VERSION);
	p[10] = (uint8_t)m->cfg.role;
	put_le32(p + 12, m->cfg.max_frame);
	put_le32(p + 16, m->cfg.window);
	put_le32(p + 20, m->cfg.max_streams);
	memcpy(p + 24, m->cfg.token, MUX_TOKEN_SIZE);
	return queue_frame(m, MUX_KIND_HELLO, 0, p, sizeof(p));
}

/* Drop queued output. With @keep_partial the rest of a frame the transport has already
 * begun to carry stays, so the peer's framing survives. */
static void out_clear(Mux *m, bool keep_partial)
{
	if (keep_partial && m->out_frame_left > 0) {
		m->out_tail = m->out_head + m->out_frame_left;
		return;
	}
	m->out_head = m->out_tail = 0;
	m->out_frame_left = 0;
}

size_t mux_output(Mux *m, const uint8_t **ret_buf)
{
	*ret_buf = m->out ? m->out + m->out_head : NULL;
	return out_size(m);
}

void mux_output_advance(Mux *m, size_t n)
{
	n = MIN(n, out_size(m));
	while (n > 0) {
		size_t k;

		if (m->out_frame_left == 0)
			m->out_frame_left = MUX_HEADER_SIZE + get_le32(m->out + m->out_head + 12);
		k = MIN(n, m->out_frame_left);
		m->out_head += k;
		m->out_frame_left -= k;
		n -= k;
	}
	if (m->out_head == m->out_tail)
		m->out_head = m->out_tail = 0;
}

/* ---- stream bookkeeping ---- */

static bool id_is_local(Mux *m, uint32_t id)
{
	return (id & 1) == (m->cfg.role == MUX_ROLE_HOST ? 1u : 0u);
}

static MuxStream *stream_lookup(Mux *m, uint32_t id)
{
	for (size_t i = 0; i < m->n_table; i++)
		if (m->table[i]->id == id)
			return m->table[i];
	return NULL;
}

/* Was @id ever opened in this session? Frames for such ids that are gone from the table
 * are late (the stream was aborted or closed meanwhile) and are ignored. */
static bool id_was_used(Mux *m, uint32_t id)
{
	if (id_is_local(m, id))
		return id < m->next_local_id;
	return id <= m->last_remote_id;
}

static MuxStream *stream_new(Mux *m, uint32_t id, uint32_t port, bool incoming)
{
	MuxStream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->mux = m;
	s->id = id;
	s->port = port;
	s->incoming = incoming;
	s->credit = m->peer_window;
	s->recv_window = m->cfg.window;
	s->next = m->streams;
	if (m->streams)
		m->streams->prev = s;
	m->streams = s;
	s->attached = true;
	s->table_idx = m->n_table;
	m->table[m->n_table++] = s;
	if (incoming)
		m->n_remote++;
	else
		m->n_local++;
	return s;
}

static void stream_maybe_free(MuxStream *s)
{
	Mux *m = s->mux;

	if (s->held || s->attached || s->doomed)
		return;
	if (s->prev)
		s->prev->next = s->next;
	else
		m->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

static void stream_detach(MuxStream *s)
{
	Mux *m = s->mux;
	size_t i = s->table_idx;

	if (!s->attached)
		return;
	s->attached = false;
	m->table[i] = m->table[--m->n_table];
	m->table[i]->table_idx = i;
	if (s->incoming)
		m->n_remote--;
	else
		m->n_local--;
	if (m->pending_open == s)
		m->pending_open = NULL;
}

static void doom_push(Mux *m, MuxStream *s)
{
	s->doomed = true;
	s->dnext = NULL;
	s->dprev = m->doomed_tail;
	if (m->doomed_tail)
		m->doomed_tail->dnext = s;
	else
		m->doomed_head = s;
	m->doomed_tail = s;
}

static void doom_remove(Mux *m, MuxStream *s)
{
	if (!s->doomed)
		return;
	s->doomed = false;
	if (s->dprev)
		s->dprev->dnext = s->dnext;
	else
		m->doomed_head = s->dnext;
	if (s->dnext)
		s->dnext->dprev = s->dprev;
	else
		m->doomed_tail = s->dprev;
	s->dprev = s->dnext = NULL;
}

/* ---- sessions ---- */

static uint32_t epoch_new(Mux *m)
{
	uint32_t e = 0;

	if (m->cfg.test_epoch != 0)
		e = m->cfg.test_epoch + m->sessions;
	else
		random_bytes(&e, sizeof(e)); /* it only has to differ from the last ones */
	if (e == 0 || e == m->epoch)
		e = m->epoch + 1 ? m->epoch + 1 : 1;
	m->sessions++;
	return e;
}

/* Fail every stream of the session; the events come out of mux_next_event(). */
static void session_fail(Mux *m, int error)
{
	bool was_ready = m->state == MUX_STATE_READY;

	if (m->pending_open) {
		MuxStream *s = m->pending_open;

		stream_detach(s);
		stream_maybe_free(s);
	}
	while (m->n_table > 0) {
		MuxStream *s = m->table[m->n_table - 1];

		stream_detach(s);
		if (s->error == 0)
			s->error = -ECONNRESET;
		if (s->held)
			doom_push(m, s);
		else
			stream_maybe_free(s);
	}
	if (was_ready) {
		m->reset_pending = true;
		m->reset_error = error < 0 ? error : -ECONNRESET;
		m->stats.resets++;
		m->last_epoch = m->epoch;
	}
	m->ready_pending = false;
	m->state = MUX_STATE_SYNC;
}

static void handshake_begin(Mux *m)
{
	m->state = MUX_STATE_SYNC;
	if (m->cfg.role == MUX_ROLE_HOST) {
		m->epoch = epoch_new(m);
		/* On allocation failure the retry timer (mux_resend_hello) tries again. */
		(void)queue_hello(m);
	}
}

void mux_start(Mux *m, int error)
{
	session_fail(m, error);
	m->in_head = m->in_tail = 0;
	out_clear(m, false);
	handshake_begin(m);
}

static void protocol_error(Mux *m, int error)
{
	uint32_t old_epoch = m->epoch;

	m->stats.protocol_errors++;
	session_fail(m, error);
	out_clear(m, true);
	if (m->cfg.role == MUX_ROLE_GUEST) {
		/* Tell the host, under the old epoch, so it starts a new session; if this cannot
		 * be queued the host's own checks or its handshake retry get there anyway. */
		m->epoch = old_epoch;
		(void)queue_u32(m, MUX_KIND_RESET, 0, MUX_ERR_PROTOCOL);
	}
	handshake_begin(m);
}

void mux_notify_reset(Mux *m)
{
	if (m->cfg.role != MUX_ROLE_GUEST || m->last_epoch == 0 || m->state == MUX_STATE_READY)
		return;
	uint32_t epoch = m->epoch;

	m->epoch = m->last_epoch;
	(void)queue_u32(m, MUX_KIND_RESET, 0, MUX_ERR_ABORTED);
	m->epoch = epoch;
}

void mux_resend_hello(Mux *m)
{
	if (m->cfg.role == MUX_ROLE_HOST && m->state == MUX_STATE_SYNC && out_size(m) == 0)
		(void)queue_hello(m);
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	/* Constant time: the token is a secret. */
	for (size_t i = 0; i < MUX_TOKEN_SIZE; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

/* Is this HELLO from the peer one we would enter a session on? */
static int hello_check(Mux *m, const MuxFrameHeader *h, const uint8_t *p)
{
	uint32_t max_frame = get_le32(p + 12), window = get_le32(p + 16),
		 max_streams = get_le32(p + 20);
	MuxRole want = m->cfg.role == MUX_ROLE_HOST ? MUX_ROLE_GUEST : MUX_ROLE_HOST;

	if (memcmp(p, hello_magic, sizeof(hello_magic)) != 0 || get_le16(p + 8) != MUX_VERSION ||
	    p[10] != want || p[11] != 0)
		return -EBADMSG;
	if (max_frame < MUX_FRAME_PAYLOAD_MIN || max_frame > MUX_FRAME_PAYLOAD_MAX ||
	    window < MUX_WINDOW_MIN || window > MUX_WINDOW_MAX || max_streams == 0 ||
	    max_streams > MUX_STREAMS_MAX)
		return -EBADMSG;
	if (!token_equal(p + 24, m->cfg.token))
		return -EACCES;
	if (m->cfg.role == MUX_ROLE_HOST)
		return h->epoch == m->epoch ? 0 : -ESTALE;
	return h->epoch == 0 || h->epoch == m->last_epoch ? -ESTALE : 0;
}

/* Enter the session a checked HELLO announces. */
static int hello_enter(Mux *m, const MuxFrameHeader *h, const uint8_t *p)
{
	if (m->cfg.role == MUX_ROLE_GUEST) {
		m->epoch = h->epoch;
		if (queue_hello(m) < 0)
			return -ENOMEM;
	}
	m->peer_max_frame = get_le32(p + 12);
	m->peer_window = get_le32(p + 16);
	m->peer_max_streams = get_le32(p + 20);
	m->next_local_id = m->cfg.role == MUX_ROLE_HOST ? 1 : 2;
	m->last_remote_id = 0;
	m->state = MUX_STATE_READY;
	m->ready_pending = true;
	return 0;
}

/* SYNC: skip bytes until a HELLO we accept starts at the head of the input. */
static void sync_scan(Mux *m)
{
	while (m->in_tail - m->in_head >= MUX_HEADER_SIZE) {
		const uint8_t *p = m->in + m->in_head, *b;
		size_t avail = m->in_tail - m->in_head;
		MuxFrameHeader h;

		if (p[0] != (MUX_MAGIC & 0xff)) {
			b = memchr(p, MUX_MAGIC & 0xff, avail);
			avail = b ? (size_t)(b - p) : avail;
			m->in_head += avail;
			m->stats.sync_discarded += avail;
			continue;
		}
		if (mux_header_decode(p, &h) == 0 && h.kind == MUX_KIND_RESET && h.stream == 0 &&
		    m->cfg.role == MUX_ROLE_HOST && h.epoch == m->epoch) {
			if (avail < MUX_HEADER_SIZE + h.length)
				return;
			/* The guest entered the session we offer and left it before its answer
			 * reached us (a restored VM's port reopening under it, mux-io.c): it will
			 * never enter that epoch again, so offer a new one. */
			m->in_head += MUX_HEADER_SIZE + h.length;
			m->stats.frames_in++;
			handshake_begin(m);
			continue;
		}
		if (mux_header_decode(p, &h) == 0 && h.kind == MUX_KIND_HELLO) {
			if (avail < MUX_HEADER_SIZE + MUX_HELLO_SIZE)
				return; /* wait for the rest of this candidate */
			if (hello_check(m, &h, p + MUX_HEADER_SIZE) == 0) {
				m->in_head += MUX_HEADER_SIZE + MUX_HELLO_SIZE;
				m->stats.frames_in++;
				/* On -ENOMEM the host's HELLO retry brings another chance. */
				(void)hello_enter(m, &h, p + MUX_HEADER_SIZE);
				return;
			}
		}
		m->in_head++;
		m->stats.sync_discarded++;
	}
}

/* ---- frame handling (READY) ---- */

/* Find the stream a frame is for. Returns 1 with *ret set, 0 if the frame is late and must be
 * ignored, or -EPROTO if the id was never opened. */
static int frame_stream(Mux *m, uint32_t id, MuxStream **ret)
{
	*ret = stream_lookup(m, id);
	if (*ret)
		return 1;
	return id_was_used(m, id) ? 0 : -EPROTO;
}

static int handle_hello(Mux *m, const MuxFrameHeader *h, const uint8_t *p)
{
	int r;

	/* A repeat of this session's HELLO (the host retries), or the peer's HELLO of an older
	 * session: nothing to do. */
	if (h->epoch == m->epoch || m->cfg.role == MUX_ROLE_HOST)
		return 0;
	/* The guest sees a new host HELLO: the host reconnected without our seeing EOF. */
	r = hello_check(m, h, p);
	if (r == -ESTALE) {
		m->stats.stale_frames++;
		return 0;
	}
	if (r < 0)
		return r;
	session_fail(m, -ECONNRESET);
	out_clear(m, false);
	return hello_enter(m, h, p);
}

static int handle_open(Mux *m, const MuxFrameHeader *h, const uint8_t *p, MuxEvent *ev)
{
	uint32_t port = get_le32(p);
	MuxStream *s;

	if (id_is_local(m, h->stream) || h->stream <= m->last_remote_id)
		return -EPROTO;
	if (port == 0 || port > MUX_PORT_MAX)
		return -EPROTO;
	if (m->n_remote >= m->cfg.max_streams)
		return -EMFILE; /* the peer ignores the cap it was told */
	m->last_remote_id = h->stream;
	s = stream_new(m, h->stream, port, true);
	if (!s)
		return queue_u32(m, MUX_KIND_OPEN_FAIL, h->stream, MUX_ERR_LIMIT);
	s->phase = PHASE_ACCEPTING;
	m->pending_open = s;
	*ev = (MuxEvent){.type = MUX_EVENT_OPEN, .stream = s, .port = port};
	return 1;
}

static int handle_stream_frame(Mux *m, const MuxFrameHeader *h, const uint8_t *p, MuxEvent *ev)
{
	MuxStream *s;
	int r;

	r = frame_stream(m, h->stream, &s);
	if (r <= 0)
		return r;
	*ev = (MuxEvent){.stream = s};
	switch ((MuxKind)h->kind) {
	case MUX_KIND_OPEN_OK:
	case MUX_KIND_OPEN_FAIL:
		if (s->incoming || s->phase != PHASE_OPENING)
			return -EPROTO;
		if (h->kind == MUX_KIND_OPEN_OK) {
			s->phase = PHASE_OPEN;
			ev->type = MUX_EVENT_OPEN_OK;
			return 1;
		}
		s->error = mux_error_from_wire(get_le32(p));
		stream_detach(s);
		ev->type = MUX_EVENT_OPEN_FAIL;
		ev->error = s->error;
		return 1;
	case MUX_KIND_DATA:
		if (s->phase != PHASE_OPEN || s->remote_closed)
			return -EPROTO;
		if (h->length > s->recv_window)
			return -EPROTO; /* credit overrun */
		s->recv_window -= h->length;
		s->unacked += h->length;
		ev->type = MUX_EVENT_DATA;
		ev->data = p;
		ev->size = h->length;
		return 1;
	case MUX_KIND_CLOSE:
		if (s->phase != PHASE_OPEN || s->remote_closed)
			return -EPROTO;
		s->remote_closed = true;
		if (s->local_closed)
			stream_detach(s);
		ev->type = MUX_EVENT_CLOSE;
		return 1;
	case MUX_KIND_WINDOW: {
		uint32_t inc = get_le32(p);

		if (inc == 0 || inc > MUX_WINDOW_MAX - s->credit)
			return -EPROTO;
		if (s->local_closed)
			return 0;
		s->credit += inc;
		ev->type = MUX_EVENT_WINDOW;
		return 1;
	}
	case MUX_KIND_RESET:
		s->error = mux_error_from_wire(get_le32(p));
		stream_detach(s);
		ev->type = MUX_EVENT_STREAM_RESET;
		ev->error = s->error;
		return 1;
	case MUX_KIND_HELLO:
	case MUX_KIND_OPEN:
	case _MUX_KIND_MAX:
		break;
	}
	return -EPROTO;
}

static int handle_frame(Mux *m, const MuxFrameHeader *h, const uint8_t *p, MuxEvent *ev)
{
	if (h->kind == MUX_KIND_HELLO)
		return handle_hello(m, h, p);
	if (h->epoch != m->epoch) {
		m->stats.stale_frames++;
		return 0;
	}
	if (h->kind == MUX_KIND_OPEN)
		return handle_open(m, h, p, ev);
	if (h->kind == MUX_KIND_RESET && h->stream == 0) {
		/* The peer reset the session. */
		session_fail(m, -ECONNRESET);
		out_clear(m, true);
		handshake_begin(m);
		return 0;
	}
	return handle_stream_frame(m, h, p, ev);
}

/* Hand out queued events: stream failures first, then the session reset, then READY. */
static bool pop_event(Mux *m, MuxEvent *ev)
{
	MuxStream *s = m->doomed_head;

	if (s) {
		doom_remove(m, s);
		*ev = (MuxEvent){.type = MUX_EVENT_STREAM_RESET, .stream = s, .error = s->error};
		return true;
	}
	if (m->reset_pending) {
		m->reset_pending = false;
		*ev = (MuxEvent){.type = MUX_EVENT_SESSION_RESET, .error = m->reset_error};
		return true;
	}
	if (m->ready_pending) {
		m->ready_pending = false;
		*ev = (MuxEvent){.type = MUX_EVENT_READY};
		return true;
	}
	return false;
}

int mux_next_event(Mux *m, MuxEvent *ret)
{
	if (m->pending_open)
		(void)mux_stream_refuse(m->pending_open, -ECONNREFUSED);

	for (;;) {
		size_t avail;
		MuxFrameHeader h;
		const uint8_t *p;
		int r;

		if (pop_event(m, ret))
			return 1;
		if (out_size(m) >= MUX_OUTPUT_PAUSE)
			return 0;
		if (m->state == MUX_STATE_SYNC) {
			sync_scan(m);
			if (m->state == MUX_STATE_SYNC)
				return 0;
			continue;
		}
		avail = m->in_tail - m->in_head;
		if (avail < MUX_HEADER_SIZE)
			return 0;
		p = m->in + m->in_head;
		r = mux_header_decode(p, &h);
		if (r == 0 && h.kind == MUX_KIND_DATA && h.length > m->cfg.max_frame)
			r = -EMSGSIZE;
		if (r < 0) {
			/* Stop at the header: never wait for (or read) a payload beyond the caps.
			 */
			protocol_error(m, r);
			continue;
		}
		if (avail < MUX_HEADER_SIZE + h.length)
			return 0;
		m->in_head += MUX_HEADER_SIZE + h.length;
		m->stats.frames_in++;
		r = handle_frame(m, &h, p + MUX_HEADER_SIZE, ret);
		if (r < 0) {
			protocol_error(m, r);
			continue;
		}
		if (r > 0)
			return 1;
	}
}

/* ---- input ---- */

size_t mux_input_space(Mux *m, uint8_t **ret_buf)
{
	if (m->in_head > 0) {
		memmove(m->in, m->in + m->in_head, m->in_tail - m->in_head);
		m->in_tail -= m->in_head;
		m->in_head = 0;
	}
	*ret_buf = m->in + m->in_tail;
	if (out_size(m) >= MUX_OUTPUT_PAUSE)
		return 0;
	return MUX_INPUT_SIZE - m->in_tail;
}

void mux_input_commit(Mux *m, size_t n)
{
	m->in_tail += MIN(n, MUX_INPUT_SIZE - m->in_tail);
}

size_t mux_feed(Mux *m, const void *buf, size_t len)
{
	uint8_t *p;
	size_t n = MIN(len, mux_input_space(m, &p));

	if (n == 0)
		return 0;
	memcpy(p, buf, n);
	mux_input_commit(m, n);
	return n;
}

/* ---- lifecycle ---- */

int mux_new(const MuxConfig *cfg, Mux **ret)
{
	Mux *m;

	if (!cfg || (cfg->role != MUX_ROLE_HOST && cfg->role != MUX_ROLE_GUEST))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = *cfg;
	if (m->cfg.max_frame == 0)
		m->cfg.max_frame = MUX_FRAME_PAYLOAD_MAX;
	if (m->cfg.window == 0)
		m->cfg.window = MUX_WINDOW_DEFAULT;
	if (m->cfg.max_streams == 0)
		m->cfg.max_streams = MUX_STREAMS_MAX;
	if (m->cfg.max_frame < MUX_FRAME_PAYLOAD_MIN || m->cfg.max_frame > MUX_FRAME_PAYLOAD_MAX ||
	    m->cfg.window < MUX_WINDOW_MIN || m->cfg.window > MUX_WINDOW_MAX ||
	    m->cfg.max_streams > MUX_STREAMS_MAX) {
		free(m);
		return -EINVAL;
	}
	m->in = malloc(MUX_INPUT_SIZE);
	if (!m->in) {
		free(m);
		return -ENOMEM;
	}
	m->state = MUX_STATE_SYNC;
	*ret = m;
	return 0;
}

Mux *mux_free(Mux *m)
{
	if (!m)
		return NULL;
	while (m->streams) {
		MuxStream *s = m->streams;

		m->streams = s->next;
		free(s);
	}
	free(m->in);
	free(m->out);
	free(m);
	return NULL;
}

MuxState mux_get_state(Mux *m)
{
	return m->state;
}

uint32_t mux_get_epoch(Mux *m)
{
	return m->epoch;
}

MuxRole mux_get_role(Mux *m)
{
	return m->cfg.role;
}

uint32_t mux_get_max_frame_out(Mux *m)
{
	return m->state == MUX_STATE_READY ? m->peer_max_frame : 0;
}

void mux_get_stats(Mux *m, MuxStats *ret)
{
	*ret = m->stats;
}

/* ---- streams ---- */

int mux_open(Mux *m, uint32_t port, MuxStream **ret)
{
	MuxStream *s;
	int r;

	if (!m || !ret || port == 0 || port > MUX_PORT_MAX)
		return -EINVAL;
	if (m->state != MUX_STATE_READY)
		return -ENOTCONN;
	if (m->n_local >= m->peer_max_streams || m->next_local_id > MUX_ID_MAX)
		return -EMFILE;
	r = queue_u32(m, MUX_KIND_OPEN, m->next_local_id, port);
	if (r < 0)
		return r;
	s = stream_new(m, m->next_local_id, port, false);
	if (!s) {
		/* The OPEN is queued already; answer it with a RESET so the id dies cleanly. */
		(void)queue_u32(m, MUX_KIND_RESET, m->next_local_id, MUX_ERR_LIMIT);
		m->next_local_id += 2;
		return -ENOMEM;
	}
	m->next_local_id += 2;
	s->phase = PHASE_OPENING;
	s->held = true;
	*ret = s;
	return 0;
}

int mux_stream_accept(MuxStream *s)
{
	Mux *m;
	int r;

	if (!s || s->mux->pending_open != s)
		return -EINVAL;
	m = s->mux;
	r = queue_frame(m, MUX_KIND_OPEN_OK, s->id, NULL, 0);
	if (r < 0)
		return r;
	m->pending_open = NULL;
	s->phase = PHASE_OPEN;
	s->held = true;
	return 0;
}

int mux_stream_refuse(MuxStream *s, int error)
{
	Mux *m;
	int r;

	if (!s || s->mux->pending_open != s)
		return -EINVAL;
	m = s->mux;
	r = queue_u32(m, MUX_KIND_OPEN_FAIL, s->id, (uint32_t)mux_error_to_wire(error));
	stream_detach(s);
	stream_maybe_free(s);
	return r;
}

ssize_t mux_stream_write(MuxStream *s, const void *buf, size_t len)
{
	Mux *m = s->mux;
	size_t n, done = 0;

	if (s->error < 0)
		return s->error;
	if (s->local_closed)
		return -EPIPE;
	if (!s->attached || s->phase == PHASE_ACCEPTING)
		return -ENOTCONN;
	if (len == 0)
		return 0;
	if (s->credit == 0)
		return -EAGAIN;
	n = MIN(len, (size_t)s->credit);
	while (done < n) {
		size_t k = MIN(n - done, (size_t)m->peer_max_frame);
		int r = queue_frame(m, MUX_KIND_DATA, s->id, (const uint8_t *)buf + done, k);

		if (r < 0) {
			if (done == 0)
				return r;
			break;
		}
		done += k;
	}
	s->credit -= (uint32_t)done;
	return (ssize_t)done;
}

size_t mux_stream_get_credit(MuxStream *s)
{
	return s->attached && !s->local_closed ? s->credit : 0;
}

int mux_stream_close(MuxStream *s)
{
	int r;

	if (s->error < 0)
		return s->error;
	if (s->local_closed)
		return -EALREADY;
	if (!s->attached || s->phase == PHASE_ACCEPTING)
		return -ENOTCONN;
	r = queue_frame(s->mux, MUX_KIND_CLOSE, s->id, NULL, 0);
	if (r < 0)
		return r;
	s->local_closed = true;
	if (s->remote_closed)
		stream_detach(s);
	return 0;
}

int mux_stream_ack(MuxStream *s, size_t n)
{
	Mux *m = s->mux;
	int r;

	if (n > s->unacked)
		return -EINVAL;
	s->unacked -= (uint32_t)n;
	if (!s->attached || s->remote_closed)
		return 0;
	s->grant += (uint32_t)n;
	/* Batch the grants: a WINDOW frame per quarter window keeps the pipe full without a
	 * frame for every small read. */
	if (s->grant < m->cfg.window / 4)
		return 0;
	r = queue_u32(m, MUX_KIND_WINDOW, s->id, s->grant);
	if (r < 0)
		return r;
	s->recv_window += s->grant;
	s->grant = 0;
	return 0;
}

int mux_stream_abort(MuxStream *s, int error)
{
	if (s->phase == PHASE_ACCEPTING)
		return -EINVAL; /* answer an OPEN with mux_stream_refuse() */
	if (!s->attached)
		return 0;
	(void)queue_u32(s->mux, MUX_KIND_RESET, s->id, (uint32_t)mux_error_to_wire(error));
	s->error = error < 0 ? error : -ECONNABORTED;
	stream_detach(s);
	return 0;
}

void mux_stream_release(MuxStream *s)
{
	if (!s)
		return;
	if (s->mux->pending_open == s) {
		(void)mux_stream_refuse(s, -ECONNREFUSED);
		return;
	}
	doom_remove(s->mux, s);
	s->held = false;
	if (s->attached)
		(void)mux_stream_abort(s, -ECONNABORTED);
	stream_maybe_free(s);
}

uint32_t mux_stream_get_id(MuxStream *s)
{
	return s->id;
}

uint32_t mux_stream_get_port(MuxStream *s)
{
	return s->port;
}

bool mux_stream_is_incoming(MuxStream *s)
{
	return s->incoming;
}

size_t mux_stream_get_unacked(MuxStream *s)
{
	return s->unacked;
}

void *mux_stream_get_userdata(MuxStream *s)
{
	return s->userdata;
}

void mux_stream_set_userdata(MuxStream *s, void *userdata)
{
	s->userdata = userdata;
}
