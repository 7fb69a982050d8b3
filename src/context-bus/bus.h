/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The context bus (SPEC 5): connections carrying framed protobuf Envelopes, exact-topic
 * fan-out to every other subscribed connection, at most once. What is dropped, and why,
 * is in docs/context-bus.md; every limit below is a peer-controlled size with a hard cap.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evloop.h"
#include "identity.h"

#define BUS_CONNS_MAX_DEFAULT 128u
#define BUS_CONNS_MAX_LIMIT 1024u
/* SPEC 5: a connection's outgoing queue holds 256 frames; a frame that does not fit is
 * dropped (the newest: what is queued already is delivered in order). */
#define BUS_QUEUE_FRAMES_MAX 256u
/* ... and, as the frames may be large, no more than this many bytes. */
#define BUS_QUEUE_BYTES_MAX (16u * 1024u * 1024u)
/* All connections' frames being read, together; a frame past it is refused. */
#define BUS_READ_BUDGET (32u * 1024u * 1024u)
/* All events and acks waiting in queues, together (an event fanned out is counted once). */
#define BUS_OUT_BUDGET (32u * 1024u * 1024u)
#define BUS_TOPIC_MAX 1024u
#define BUS_SUBSCRIPTIONS_MAX 1024u /* per connection */
#define BUS_CLAIM_MAX 64u	    /* of a claimed name; longer ones are cut in the logs */

typedef struct Bus Bus;

typedef struct BusStats {
	uint64_t conns_accepted, conns_refused;
	uint64_t published, delivered;
	uint64_t dropped_queue_full; /* events and acks a full queue had no room for */
	uint64_t dropped_budget;     /* publishes refused: the bus's memory budget was spent */
	uint64_t frames_oversized, frames_refused, frames_undecodable;
	uint64_t overrides; /* registers whose claimed name the kernel contradicted */
} BusStats;

/*
 * bus_new() - a bus on @loop. @identity (borrowed; it must outlive the bus) maps uids to
 * apps, or NULL for none. Returns 0 or -errno.
 */
int bus_new(EvLoop *loop, const BusIdentity *identity, unsigned conns_max, Bus **ret);
/* Close every connection and free the bus. Accepts NULL; returns NULL. */
Bus *bus_free(Bus *b);
static inline void bus_freep(Bus **b)
{
	bus_free(*b);
}

/*
 * bus_add_conn() - serve @fd (a connected unix stream socket; taken over, also on
 * failure). Its identity is read with SO_PEERCRED here. Returns 0, -EMFILE when the bus
 * has its conns_max connections already (the fd is closed and the refusal logged), or
 * another -errno.
 */
int bus_add_conn(Bus *b, int fd);

/* The same with credentials given, for a caller that holds them already (tests). */
int bus_add_conn_creds(Bus *b, int fd, bool have_creds, uid_t uid, pid_t pid);

const BusStats *bus_stats(const Bus *b);
unsigned bus_n_conns(const Bus *b);

/* Where log lines go (stderr); -1 for nowhere. */
extern int bus_log_fd;

/* A log line on stderr, "[context-bus] " first. bus_log_json() consumes @o. */
void bus_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bus_log_json(json_t *o);
