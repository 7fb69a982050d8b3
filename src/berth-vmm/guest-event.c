/* SPDX-License-Identifier: Apache-2.0 */
/* The guest's boot events: what one line is and what of it is kept (guest-event.h). */
#include <stdint.h>
#include <string.h>

#include "guest-event.h"
#include "macros.h"

/* Where write_evidence() puts an event: an element of the document's "events" array,
 * dumped with these flags, so each of its lines is indented EVIDENCE_INDENT more. */
#define EVIDENCE_FLAGS (JSON_INDENT(2) | JSON_SORT_KEYS)
#define EVIDENCE_INDENT 4

static const struct {
	const char *name;
	GuestEventKind kind;
} kinds[] = {
	{"boot_complete", GUEST_EVENT_BOOT_COMPLETE},
	{"boot_failed", GUEST_EVENT_BOOT_FAILED},
	{"power_off", GUEST_EVENT_POWER_OFF},
};

/*
 * Whether no [ or { in @line, outside strings, is nested deeper than @max. Checked on the
 * bytes, before jansson builds a tree of them (it would go 2048 deep). For valid JSON this
 * is the depth of that tree; a malformed line is refused by the parser anyway.
 */
static bool nesting_within(const char *line, size_t len, unsigned max)
{
	unsigned depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = line[i];

		if (in_string) {
			if (c == '\\')
				i++; /* what is escaped cannot end the string */
			else if (c == '"')
				in_string = false;
		} else if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{') {
			if (++depth > max)
				return false;
		} else if ((c == ']' || c == '}') && depth > 0)
			depth--;
	}
	return true;
}

typedef struct Cost {
	size_t bytes, limit;
} Cost;

static int add_cost(const char *buf, size_t size, void *userdata)
{
	Cost *c = userdata;

	c->bytes += size;
	for (size_t i = 0; i < size; i++)
		if (buf[i] == '\n')
			c->bytes += EVIDENCE_INDENT;
	/* Past the budget the event is not kept: stop dumping it. */
	return c->bytes > c->limit ? -1 : 0;
}

/*
 * The bytes @o takes in evidence.json, its separators included; or SIZE_MAX when that is
 * more than @limit. A line's own length would say little: indentation grows nested input
 * with its depth, and numbers grow when written back ("1e-5" is 1.0000000000000001e-05).
 */
static size_t evidence_cost(const json_t *o, size_t limit)
{
	/* "\n" and the first line's indent before it, "," after it. */
	const size_t around = 1 + EVIDENCE_INDENT + 1;
	Cost c = {.bytes = around, .limit = limit};

	if (c.bytes > limit || json_dump_callback(o, add_cost, &c, EVIDENCE_FLAGS) < 0)
		return SIZE_MAX;
	return c.bytes;
}

static GuestEventKind kind_of(const char *event)
{
	for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
		if (streq(event, kinds[i].name))
			return kinds[i].kind;
	return GUEST_EVENT_OTHER;
}

/* Keep @o as evidence if the caps allow; what is past them is counted. */
static void keep(GuestEvents *e, json_t *o, GuestEvent *ret)
{
	size_t events_max = e->events_max ?: GUEST_EVIDENCE_EVENTS_MAX;
	size_t bytes_max = e->bytes_max ?: GUEST_EVIDENCE_BYTES_MAX;
	size_t cost = SIZE_MAX;

	if (json_array_size(e->evidence) < events_max && e->evidence_bytes < bytes_max)
		cost = evidence_cost(o, bytes_max - e->evidence_bytes);
	if (cost != SIZE_MAX && json_array_append(e->evidence, o) == 0) {
		e->evidence_bytes += cost;
		return;
	}
	ret->first_dropped = e->dropped++ == 0;
}

GuestEventKind guest_event_read(GuestEvents *e, const char *line, size_t len, GuestEvent *ret)
{
	size_t log_max = e->log_max ?: GUEST_LOG_BYTES_MAX;
	_cleanup_(json_decrefp) json_t *o = NULL;
	const char *event;

	*ret = (GuestEvent){.kind = GUEST_EVENT_REFUSED};
	/* The line reader never hands out more; a caller that did gets no bigger tree. */
	if (len > GUEST_EVENT_LINE_MAX || !nesting_within(line, len, GUEST_EVENT_DEPTH_MAX))
		return ret->kind;
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	event = json_string_value(json_object_get(o, "event"));
	/* Shape-check only: the guest's output is recorded, it never picks an action. */
	if (!json_is_object(o) || !event)
		return ret->kind;
	ret->kind = kind_of(event);
	/* vmm.log is a file on the host: the guest fills it only so far. */
	if (e->logged < log_max) {
		ret->log_len = MIN(len, (size_t)GUEST_LOG_LINE_MAX);
		e->logged += ret->log_len;
		ret->log_full = e->logged >= log_max;
	}
	keep(e, o, ret);
	if (ret->kind == GUEST_EVENT_POWER_OFF) {
		json_t *code = json_object_get(o, "exitCode");

		json_int_t v = json_is_integer(code) ? json_integer_value(code) : 1;

		/* An exit status is 0..255; anything else is no success (2^32 must not read
		 * as 0). */
		ret->exit_code = v >= 0 && v <= 255 ? (int)v : 1;
	}
	return ret->kind;
}

void guest_events_restart(GuestEvents *e)
{
	json_array_clear(e->evidence);
	e->evidence_bytes = e->dropped = 0;
}

void guest_events_done(GuestEvents *e)
{
	json_decref(e->evidence);
	e->evidence = NULL;
}
