/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * MuxIo: runs a Mux session (mux.h) on an EvLoop over a transport fd (the virtio-serial
 * port in the guest, the QEMU chardev socket on the host, a socketpair in tests) and
 * bridges streams to local fds.
 *
 * Host side (berth-vmm):
 *     MuxIoConfig c = { .mux.role = MUX_ROLE_HOST, .on_state = ..., };
 *     mux_io_new(loop, &c, &io);
 *     mux_io_set_transport(io, connected_chardev_socket);
 *     mux_io_listen(io, MUX_PORT_EGRESS, dial_cb, ctx);        (guest→host streams)
 *     ... once on_state reports MUX_IO_READY:
 *     mux_io_open_bridge(io, MUX_PORT_RPC_BASE + i, accepted_client_fd);
 *
 * Guest side (berth-init):
 *     MuxIoConfig c = { .mux.role = MUX_ROLE_GUEST, .tolerate_eof = true, };
 *     mux_io_new(loop, &c, &io);
 *     mux_io_set_transport(io, open("/dev/vportNpM", O_RDWR | O_CLOEXEC | O_NONBLOCK));
 *     mux_io_listen(io, MUX_PORT_RPC_BASE + i, connect_app_cb, app);
 *
 * A bridge copies bytes both ways between a stream and a local fd (a socket, a pipe, a
 * tty). What it buffers towards the local fd is bounded by the stream's receive window:
 * credit goes back to the peer only as the local fd accepts bytes, so a local reader that
 * stops reading stalls its own stream and nothing else. A local EOF becomes a half-close
 * (CLOSE); the peer's CLOSE becomes shutdown(SHUT_WR) on a socket once everything was
 * written. A stream reset, a session reset or a local error closes the local fd.
 *
 * Transport EOF: on the guest with @tolerate_eof, read() == 0 means no host client is
 * connected to the chardev right now. The session resets (every stream fails, buffered
 * bytes are dropped), the fd is kept, and it is polled again every @eof_poll_usec until
 * the host's HELLO arrives. Otherwise EOF or a write error drops the transport
 * (MUX_IO_DISCONNECTED) and mux_io_set_transport() starts again with a new one.
 *
 * Callbacks may call any mux_io_*() function except mux_io_free().
 */

#include <stdbool.h>
#include <stdint.h>

#include "evloop.h"
#include "mux.h"

/* Ports a MuxIo may listen on at once. */
#define MUX_IO_LISTEN_MAX 64u

typedef struct MuxIo MuxIo;

typedef enum MuxIoState {
	MUX_IO_IDLE,	     /* no transport yet */
	MUX_IO_HANDSHAKE,    /* transport attached, waiting for the peer's HELLO */
	MUX_IO_READY,	     /* session up: streams may be opened */
	MUX_IO_RESET,	     /* the session was reset (error given); handshaking again */
	MUX_IO_HOST_ABSENT,  /* guest with tolerate_eof: no host client; polling */
	MUX_IO_DISCONNECTED, /* the transport fd was dropped (error given) */
} MuxIoState;

typedef void (*mux_io_state_handler_t)(MuxIo *io, MuxIoState state, int error, void *userdata);
/* Return an fd to bridge the new stream to (ownership passes to the MuxIo), or a negative
 * errno to refuse it (-ECONNREFUSED, -EMFILE, ... travel to the opener). */
typedef int (*mux_io_accept_handler_t)(MuxIo *io, uint32_t port, void *userdata);

typedef struct MuxIoConfig {
	MuxConfig mux;
	bool tolerate_eof;	   /* guest: EOF on the transport means "host absent" */
	uint64_t eof_poll_usec;	   /* 0: 100 ms */
	uint64_t hello_retry_usec; /* host: HELLO resent while no answer; 0: 500 ms */
	mux_io_state_handler_t on_state;
	void *userdata;
} MuxIoConfig;

/*
 * mux_io_new() - create a MuxIo on @loop (which must outlive it).
 * Returns 0 and *@ret, or -errno.
 */
int mux_io_new(EvLoop *loop, const MuxIoConfig *cfg, MuxIo **ret);
/* Close the transport and every bridged fd, free everything. Accepts NULL; returns NULL. */
MuxIo *mux_io_free(MuxIo *io);
static inline void mux_io_freep(MuxIo **io)
{
	mux_io_free(*io);
}

/*
 * mux_io_set_transport() - use @fd as the transport (made non-blocking). Takes ownership
 * of @fd, also on failure. A previous transport is closed and its session reset first;
 * a fresh handshake starts (the host sends HELLO under a new epoch).
 */
int mux_io_set_transport(MuxIo *io, int fd);

/* Route the peer's opens of @port to @cb. -EEXIST if taken, -ENOSPC past MUX_IO_LISTEN_MAX. */
int mux_io_listen(MuxIo *io, uint32_t port, mux_io_accept_handler_t cb, void *userdata);
int mux_io_unlisten(MuxIo *io, uint32_t port);

/*
 * mux_io_open_bridge() - open a stream to the peer's @port and bridge it to @fd.
 * Takes ownership of @fd, also on failure (it is closed then). If the peer refuses, or the
 * session resets, @fd is closed. Returns 0, -ENOTCONN before MUX_IO_READY, -EMFILE, or -errno.
 */
int mux_io_open_bridge(MuxIo *io, uint32_t port, int fd);

MuxIoState mux_io_get_state(MuxIo *io);
Mux *mux_io_get_mux(MuxIo *io);
/* Number of live bridges. */
unsigned mux_io_get_n_bridges(MuxIo *io);
