/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

/*
 * What berth-init tells the host: boot events (for the control port) and log lines (for
 * the log port). Both are kept for replay to a reader that attaches late, within a byte
 * cap, and mirrored to the console so that console.log tells the story even when nobody
 * is attached.
 */

#define JOURNAL_EVENTS_MAX_BYTES (1024 * 1024)
#define JOURNAL_LOGS_MAX_BYTES (1024 * 1024)
#define JOURNAL_LINE_MAX (64 * 1024)
/* App lines mirrored to the console (a file on the host) per boot. */
#define JOURNAL_CONSOLE_APP_MAX (16u * 1024 * 1024)

typedef void (*JournalSink)(const char *line, size_t len, void *userdata);

int journal_init(void);
/* Milliseconds since the guest kernel booted. */
long long journal_uptime_ms(void);

/* Record event @event with the members of @fields (consumed; may be NULL). */
void journal_event(const char *event, json_t *fields);
/* Record one log line from @src ("berth-init", an app's name, ...) on @stream. */
void journal_log(const char *src, const char *stream, const char *line, size_t len);
/* printf-style journal_log() for berth-init's own lines. */
void journal_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Event subscribers (control connections): replay is up to the caller. */
int journal_subscribe_events(JournalSink sink, void *userdata);
void journal_unsubscribe_events(JournalSink sink, void *userdata);
void journal_replay_events(JournalSink sink, void *userdata);

/* The log reader: one at a time, a new one replaces the old (whose @on_replaced is called). */
void journal_set_log_reader(JournalSink sink, void *userdata, void (*on_replaced)(void *userdata));
void journal_clear_log_reader(void *userdata);
void journal_replay_logs(JournalSink sink, void *userdata);
/* Forget the events and lines kept so far (a restored VM's start from the template's). */
void journal_restart(void);
