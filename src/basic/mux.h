/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The channel multiplexer: any number of byte streams over one ordered byte stream
 * (a virtio-serial port). docs/channel-protocol.md is the specification; this is the
 * sans-IO core. It never touches an fd:
 *
 *   - bytes from the transport go in with mux_input_space()/mux_input_commit() (or mux_feed());
 *   - mux_next_event() turns them into events, one per call;
 *   - frames to send collect in an output queue read with mux_output()/mux_output_advance().
 *
 * mux-io.h attaches a Mux to an EvLoop, a transport fd and local fds.
 *
 * SECURITY: every size the peer controls has a hard cap (frame payload, streams per side,
 * window, port number). A malformed frame, a credit overrun, a frame for a stream that was
 * never opened, or a breach of a cap resets the whole session: every stream fails with an
 * error and the peers handshake again under a new epoch. Nothing is read beyond a cap and
 * nothing the peer sends can make the input buffer grow.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macros.h"

/* Wire constants (docs/channel-protocol.md). All integers are little-endian. */
#define MUX_MAGIC 0x4D42 /* bytes 'B' 'M' */
#define MUX_VERSION 1
#define MUX_HEADER_SIZE 16
#define MUX_HELLO_SIZE 40
#define MUX_TOKEN_SIZE 16
#define MUX_FRAME_PAYLOAD_MAX (64u * 1024u) /* largest payload of any frame */
#define MUX_FRAME_PAYLOAD_MIN 1024u	    /* smallest max_frame a peer may announce */
#define MUX_STREAMS_MAX 256u		    /* streams one side may have open at once */
#define MUX_WINDOW_DEFAULT (128u * 1024u)
#define MUX_WINDOW_MIN 1024u
#define MUX_WINDOW_MAX (16u * 1024u * 1024u) /* cap on any stream's send credit */
#define MUX_PORT_MAX 65535u
/* While this many bytes wait in the output queue the core stops parsing input, so a peer
 * that sends requests but never reads the replies cannot make us queue without bound. */
#define MUX_OUTPUT_PAUSE (1024u * 1024u)

/* Well-known ports. */
#define MUX_PORT_CONTROL 1024u
#define MUX_PORT_LOG 1025u
#define MUX_PORT_EGRESS 1026u
#define MUX_PORT_PUBLISH_BASE 2000u /* + published port index */
#define MUX_PORT_RPC_BASE 5000u	    /* + app index */

typedef enum MuxKind {
	MUX_KIND_HELLO = 1,
	MUX_KIND_OPEN = 2,
	MUX_KIND_OPEN_OK = 3,
	MUX_KIND_OPEN_FAIL = 4,
	MUX_KIND_DATA = 5,
	MUX_KIND_CLOSE = 6,
	MUX_KIND_WINDOW = 7,
	MUX_KIND_RESET = 8,
	_MUX_KIND_MAX,
} MuxKind;

/* Error codes carried by OPEN_FAIL and RESET payloads (mapped to errno locally). */
typedef enum MuxWireError {
	MUX_ERR_INTERNAL = 1,	 /* EIO */
	MUX_ERR_REFUSED = 2,	 /* ECONNREFUSED: nobody listens on the port */
	MUX_ERR_LIMIT = 3,	 /* EMFILE: a resource limit was hit */
	MUX_ERR_ABORTED = 4,	 /* ECONNABORTED: the endpoint went away */
	MUX_ERR_PROTOCOL = 5,	 /* EPROTO: the peer broke the protocol */
	MUX_ERR_UNREACHABLE = 6, /* EHOSTUNREACH */
	MUX_ERR_TIMEOUT = 7,	 /* ETIMEDOUT */
} MuxWireError;

typedef enum MuxRole {
	MUX_ROLE_HOST = 1,  /* picks the epoch and starts every handshake */
	MUX_ROLE_GUEST = 2, /* answers handshakes */
} MuxRole;

typedef enum MuxState {
	MUX_STATE_SYNC,	 /* handshaking: input is scanned for the peer's HELLO */
	MUX_STATE_READY, /* session established */
} MuxState;

typedef struct MuxFrameHeader {
	uint8_t kind;
	uint8_t flags;
	uint32_t epoch;
	uint32_t stream;
	uint32_t length;
} MuxFrameHeader;

/* Encode @h into MUX_HEADER_SIZE bytes at @out. */
void mux_header_encode(const MuxFrameHeader *h, uint8_t *out);
/*
 * mux_header_decode() - parse and check a header: magic, kind, flags, the payload length
 * against MUX_FRAME_PAYLOAD_MAX and against the exact length each kind requires, and the
 * stream id rules of each kind. Reads exactly MUX_HEADER_SIZE bytes.
 * Returns 0, or -EBADMSG for any violation.
 */
int mux_header_decode(const uint8_t *in, MuxFrameHeader *ret);

int mux_error_to_wire(int error);
int mux_error_from_wire(uint32_t code);

typedef struct Mux Mux;
typedef struct MuxStream MuxStream;

typedef struct MuxConfig {
	MuxRole role;
	uint32_t max_frame;   /* largest DATA payload we accept; 0: MUX_FRAME_PAYLOAD_MAX */
	uint32_t window;      /* initial credit we grant each stream; 0: MUX_WINDOW_DEFAULT */
	uint32_t max_streams; /* streams the peer may open at once; 0: MUX_STREAMS_MAX */
	/* Link token: a per-VM secret both sides know (e.g. from the boot plan), checked in every
	 * HELLO, so bytes from an old session can never pose as a handshake. All zero: none. */
	uint8_t token[MUX_TOKEN_SIZE];
	/* Tests and fuzzing only: first epoch the host uses (then +1 per session). 0: random. */
	uint32_t test_epoch;
} MuxConfig;

typedef enum MuxEventType {
	MUX_EVENT_READY,	 /* handshake complete; a new session (epoch) starts */
	MUX_EVENT_SESSION_RESET, /* session lost; every stream already got STREAM_RESET */
	MUX_EVENT_OPEN,		 /* peer opens @stream to @port: mux_stream_accept() or _refuse() */
	MUX_EVENT_OPEN_OK,	 /* our open was accepted */
	MUX_EVENT_OPEN_FAIL,	 /* our open was refused (@error); release the stream */
	MUX_EVENT_DATA,		 /* @data/@size arrived; mux_stream_ack() once delivered */
	MUX_EVENT_CLOSE,	 /* peer will send no more data (half-close) */
	MUX_EVENT_WINDOW,	 /* send credit grew */
	MUX_EVENT_STREAM_RESET,	 /* stream aborted (@error); release the stream */
} MuxEventType;

typedef struct MuxEvent {
	MuxEventType type;
	MuxStream *stream; /* NULL for READY and SESSION_RESET */
	uint32_t port;	   /* OPEN */
	int error;	   /* negative errno: OPEN_FAIL, STREAM_RESET, SESSION_RESET */
	/* DATA: borrowed from the input buffer, valid until the next mux_next_event(),
	 * mux_input_space() or mux_feed() call. */
	const uint8_t *data;
	size_t size;
} MuxEvent;

typedef struct MuxStats {
	uint64_t frames_in;
	uint64_t frames_out;
	uint64_t stale_frames;	 /* well-formed frames of another epoch, dropped */
	uint64_t sync_discarded; /* bytes skipped while looking for a HELLO */
	uint64_t resets;	 /* session resets of any cause */
	uint64_t protocol_errors;
} MuxStats;

/*
 * mux_new() - create a session endpoint. Call mux_start() to begin a handshake.
 * Returns 0 and the Mux in *@ret, or -EINVAL (bad @cfg) / -ENOMEM.
 */
int mux_new(const MuxConfig *cfg, Mux **ret);
/* Free the Mux and every stream, released or not. Accepts NULL; returns NULL. */
Mux *mux_free(Mux *m);
static inline void mux_freep(Mux **m)
{
	mux_free(*m);
}

/*
 * mux_start() - begin a fresh session on a fresh transport connection: every stream of the
 * old session fails (STREAM_RESET, then SESSION_RESET with @error if one was up), buffered
 * input and output are dropped, and a handshake starts: the host queues a HELLO under a new
 * epoch, the guest waits for one. Call it whenever the transport (re)connects or is lost.
 */
void mux_start(Mux *m, int error);
/* Host, during a handshake: queue the HELLO again (the first may have been eaten by stale
 * bytes). No-op in READY state or while output is queued. */
/*
 * mux_notify_reset() - the guest lost its session on its own (an EOF on its port) while the
 * host may still think it is up: queue a RESET under the session's epoch, which makes a
 * host still in it start a new one and which a new host ignores as stale. Guest only, and
 * only after a session that was up.
 */
void mux_notify_reset(Mux *m);
void mux_resend_hello(Mux *m);

MuxState mux_get_state(Mux *m);
uint32_t mux_get_epoch(Mux *m);
MuxRole mux_get_role(Mux *m);
/* Largest payload we may put in one DATA frame (negotiated). */
uint32_t mux_get_max_frame_out(Mux *m);
void mux_get_stats(Mux *m, MuxStats *ret);

/*
 * mux_input_space() - where the next transport bytes go: returns how many bytes may be
 * written at *@ret_buf (0 while the output queue is over MUX_OUTPUT_PAUSE: drain it first).
 * mux_input_commit() - declare that @n of them were filled.
 * mux_feed() - the copying variant; returns how many bytes of @buf were taken.
 */
size_t mux_input_space(Mux *m, uint8_t **ret_buf);
void mux_input_commit(Mux *m, size_t n);
size_t mux_feed(Mux *m, const void *buf, size_t len);

/*
 * mux_next_event() - process input until one event is ready.
 * Returns 1 with *@ret filled, or 0 when more input is needed (or output must drain).
 * Never fails: protocol errors become STREAM_RESET/SESSION_RESET events.
 * An OPEN event must be answered with mux_stream_accept() or mux_stream_refuse() before
 * the next call; otherwise the stream is refused.
 */
int mux_next_event(Mux *m, MuxEvent *ret);

/* mux_output() - bytes to write to the transport; mux_output_advance() - @n were written. */
size_t mux_output(Mux *m, const uint8_t **ret_buf);
void mux_output_advance(Mux *m, size_t n);

/*
 * mux_open() - open a stream to the peer's @port (1..MUX_PORT_MAX). Data may be written at
 * once; OPEN_OK or OPEN_FAIL follows. The caller holds the stream until mux_stream_release().
 * Returns 0, -ENOTCONN (no session), -EMFILE (cap on open streams), -EINVAL, -ENOMEM.
 */
int mux_open(Mux *m, uint32_t port, MuxStream **ret);

/* Answer an OPEN event. After accept the caller holds the stream; after refuse it is gone. */
int mux_stream_accept(MuxStream *s);
int mux_stream_refuse(MuxStream *s, int error);

/*
 * mux_stream_write() - queue up to @len bytes as DATA frames, no more than the send credit.
 * Returns the number of bytes taken (> 0), -EAGAIN with no credit, -EPIPE after
 * mux_stream_close(), the stream's error once it failed, or -ENOMEM.
 */
ssize_t mux_stream_write(MuxStream *s, const void *buf, size_t len);
size_t mux_stream_get_credit(MuxStream *s);
/* Half-close: we send no more data. The other direction stays open. */
int mux_stream_close(MuxStream *s);
/*
 * mux_stream_ack() - @n received bytes were delivered; grant the peer that much credit
 * again (WINDOW frames are batched). -EINVAL if more than was received and not acked.
 */
int mux_stream_ack(MuxStream *s, size_t n);
/* Abort the stream (RESET with @error, a negative errno). The caller still releases it. */
int mux_stream_abort(MuxStream *s, int error);
/* Drop the caller's hold. A stream not closed both ways is aborted first. Accepts NULL. */
void mux_stream_release(MuxStream *s);

uint32_t mux_stream_get_id(MuxStream *s);
uint32_t mux_stream_get_port(MuxStream *s);
/* True when the stream was opened by the peer. */
bool mux_stream_is_incoming(MuxStream *s);
/* Bytes received and not yet acked. */
size_t mux_stream_get_unacked(MuxStream *s);
void *mux_stream_get_userdata(MuxStream *s);
void mux_stream_set_userdata(MuxStream *s, void *userdata);
