/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The guest's boot events as berth-vmm reads them on the control port: one JSON object a
 * line, from berth-init, which a compromised guest writes as it likes. Pure: a line in, what
 * it is and what to keep out; serve.c logs it, reports the state and writes evidence.json.
 * An event is evidence, never a command: it chooses nothing but the state berth-vmm reports.
 *
 * What a guest can make berth-vmm keep is capped: a line by GUEST_EVENT_LINE_MAX (the line
 * reader closes the stream past it), an event's nesting by GUEST_EVENT_DEPTH_MAX, the kept
 * events by count and by the bytes they take in evidence.json, and their copy in vmm.log by
 * bytes. What is past the caps is counted, not kept.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define GUEST_EVENT_LINE_MAX (1024 * 1024) /* bytes of one line, its newline not counted */
/* Nesting of [ and {, the event's own object counting 1; berth-init's deepest is 5
 * (power_off's apps[].cgroup.limits). */
#define GUEST_EVENT_DEPTH_MAX 32
#define GUEST_EVIDENCE_EVENTS_MAX 4096
/* Bytes of evidence.json, not of the lines: written indented, a nested line grows there
 * with its depth (a 200 KB line nested 1000 deep would take 200 MB). */
#define GUEST_EVIDENCE_BYTES_MAX (4u * 1024 * 1024)
#define GUEST_LOG_BYTES_MAX (4u * 1024 * 1024) /* guest events copied into vmm.log */
#define GUEST_LOG_LINE_MAX 4096		       /* bytes of one event copied there */

typedef enum GuestEventKind {
	GUEST_EVENT_REFUSED, /* not one JSON object with a string "event", or too deep: ignored */
	GUEST_EVENT_OTHER,   /* kept as evidence, nothing more */
	GUEST_EVENT_BOOT_COMPLETE,
	GUEST_EVENT_BOOT_FAILED,
	GUEST_EVENT_POWER_OFF,
	_GUEST_EVENT_KIND_MAX,
} GuestEventKind;

/* What the guest's events left behind. */
typedef struct GuestEvents {
	/* The caps; 0 means GUEST_EVIDENCE_EVENTS_MAX, GUEST_EVIDENCE_BYTES_MAX and
	 * GUEST_LOG_BYTES_MAX. */
	size_t events_max, bytes_max, log_max;
	json_t *evidence;      /* a json_array() the caller makes: the events kept, in order */
	size_t evidence_bytes; /* what they take in evidence.json */
	size_t dropped;	       /* events past the caps since the last restart */
	size_t logged;	       /* bytes copied into vmm.log, restarts or not */
} GuestEvents;

/* What to do about one line. */
typedef struct GuestEvent {
	GuestEventKind kind;
	int exit_code;	    /* POWER_OFF: its "exitCode", or 1 without an integer one */
	size_t log_len;	    /* copy the line's first @log_len bytes into vmm.log; 0: none */
	bool log_full;	    /* this line used up the vmm.log budget: say so, once */
	bool first_dropped; /* the first event past the evidence caps since the restart */
} GuestEvent;

/*
 * guest_event_read() - one line from the control port, without its newline (@len bytes,
 * NULs included). Keeps the event in @e->evidence when the caps allow and counts what it
 * took; *@ret says what the line is and what to log. A REFUSED line changes nothing.
 * Duplicate keys are refused.
 * Returns ret->kind.
 */
GuestEventKind guest_event_read(GuestEvents *e, const char *line, size_t len, GuestEvent *ret);

/* The guest replays all its events on each new session: the evidence starts over (what
 * was copied into vmm.log stays counted). */
void guest_events_restart(GuestEvents *e);
void guest_events_done(GuestEvents *e);
