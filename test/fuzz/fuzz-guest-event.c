/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz what berth-vmm makes of the guest's boot events on the control port (which a
 * compromised guest writes as it likes): the input cut into lines as the line reader cuts
 * them, each line read as an event, kept as evidence within the caps, copied into vmm.log
 * within its budget. The first byte picks the real caps or small ones, so that they are
 * reached; a line that is one 0x1e byte stands for a new session (the evidence restarts).
 * Never a crash or a leak, and the invariants below hold (abort() if not); above all,
 * evidence.json holds no more than the bytes counted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest-event.h"
#include "macros.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static unsigned depth_of(const json_t *j)
{
	unsigned deepest = 0, d;
	const char *k;
	json_t *v;
	size_t i;

	/* Not MAX(deepest, depth_of(v)): that would walk every subtree twice. */
	if (json_is_object(j)) {
		json_object_foreach((json_t *)j, k, v)
			if ((d = depth_of(v)) > deepest)
				deepest = d;
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if ((d = depth_of(v)) > deepest)
				deepest = d;
	} else
		return 0;
	return deepest + 1;
}

static int add_len(const char *buf, size_t size, void *userdata)
{
	*(size_t *)userdata += size;
	return 0;
}

/* The "events" member as write_evidence() writes it. */
static size_t evidence_json_bytes(json_t *evidence)
{
	json_t *doc = json_pack("{s:O}", "events", evidence);
	size_t n = 0;

	check(doc != NULL);
	check(json_dump_callback(doc, add_len, &n, JSON_INDENT(2) | JSON_SORT_KEYS) == 0);
	json_decref(doc);
	return n;
}

static void read_line(GuestEvents *e, const char *line, size_t len)
{
	size_t kept = json_array_size(e->evidence), bytes = e->evidence_bytes;
	size_t dropped = e->dropped, logged = e->logged;
	size_t log_max = e->log_max ?: GUEST_LOG_BYTES_MAX;
	json_t *o, *code;
	GuestEvent ev;
	GuestEventKind kind = guest_event_read(e, line, len, &ev);
	const char *event;

	check(kind == ev.kind && kind < _GUEST_EVENT_KIND_MAX);
	if (kind == GUEST_EVENT_REFUSED) {
		check(json_array_size(e->evidence) == kept && e->evidence_bytes == bytes);
		check(e->dropped == dropped && e->logged == logged);
		check(ev.log_len == 0 && !ev.log_full && !ev.first_dropped && ev.exit_code == 0);
		return;
	}
	/* Only an object with a string "event", not nested too deep, is an event. */
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	check(json_is_object(o) && depth_of(o) <= GUEST_EVENT_DEPTH_MAX);
	event = json_string_value(json_object_get(o, "event"));
	check(event != NULL);
	check((kind == GUEST_EVENT_BOOT_COMPLETE) == streq(event, "boot_complete"));
	check((kind == GUEST_EVENT_BOOT_FAILED) == streq(event, "boot_failed"));
	check((kind == GUEST_EVENT_POWER_OFF) == streq(event, "power_off"));
	code = json_object_get(o, "exitCode");
	/* 0 (success) only for an exitCode of 0 itself; never outside 0..255. */
	if (kind == GUEST_EVENT_POWER_OFF)
		check(ev.exit_code >= 0 && ev.exit_code <= 255 &&
		      (ev.exit_code != 0 || (json_is_integer(code) && json_integer_value(code) == 0)));

	/* vmm.log: at most GUEST_LOG_LINE_MAX a line, nothing once the budget is spent. */
	check(ev.log_len <= MIN(len, (size_t)GUEST_LOG_LINE_MAX));
	check(e->logged == logged + ev.log_len);
	check(logged < log_max ? ev.log_len > 0 : ev.log_len == 0);
	check(ev.log_full == (logged < log_max && e->logged >= log_max));

	/* Kept, as it was sent, or counted. */
	if (json_array_size(e->evidence) == kept + 1) {
		check(json_equal(json_array_get(e->evidence, kept), o));
		check(e->evidence_bytes > bytes && e->dropped == dropped && !ev.first_dropped);
	} else {
		check(json_array_size(e->evidence) == kept && e->evidence_bytes == bytes);
		check(e->dropped == dropped + 1 && ev.first_dropped == (dropped == 0));
	}
	json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	GuestEvents e = {.evidence = json_array()};
	const char *in = (const char *)data + 1, *end = (const char *)data + size;
	size_t events_max, bytes_max, n;

	check(e.evidence != NULL);
	if (size == 0) {
		guest_events_done(&e);
		return 0;
	}
	/* Odd: the real caps; even: small ones. */
	if (!(data[0] & 1)) {
		e.events_max = 1 + (data[0] >> 1 & 7);
		e.bytes_max = 8 + (size_t)(data[0] >> 4) * 48;
		e.log_max = 1 + (size_t)(data[0] >> 4) * 16;
	}
	events_max = e.events_max ?: GUEST_EVIDENCE_EVENTS_MAX;
	bytes_max = e.bytes_max ?: GUEST_EVIDENCE_BYTES_MAX;
	while (in < end) {
		const char *nl = memchr(in, '\n', (size_t)(end - in));
		char *line;

		/* The line reader hands out complete lines only, and closes the stream at one
		 * over GUEST_EVENT_LINE_MAX. */
		if (!nl || (size_t)(nl - in) > GUEST_EVENT_LINE_MAX)
			break;
		n = (size_t)(nl - in);
		if (n == 1 && in[0] == 0x1e) {
			guest_events_restart(&e);
			check(json_array_size(e.evidence) == 0 && e.evidence_bytes == 0);
			check(e.dropped == 0);
		} else {
			/* NUL-terminated, as the line reader hands it out. */
			line = malloc(n + 1);
			check(line != NULL);
			memcpy(line, in, n);
			line[n] = '\0';
			read_line(&e, line, n);
			free(line);
		}
		check(json_array_size(e.evidence) <= events_max && e.evidence_bytes <= bytes_max);
		in = nl + 1;
	}
	/* What evidence.json holds of the events is what was counted, give or take the
	 * array's own brackets. */
	n = evidence_json_bytes(e.evidence);
	check(n <= e.evidence_bytes + 32);
	check(json_array_size(e.evidence) == 0 || n >= e.evidence_bytes);
	guest_events_done(&e);
	return 0;
}
