/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"
#include "linebuf.h"
#include "macros.h"

#define SUBSCRIBERS_MAX 16

typedef struct Subscriber {
	JournalSink sink;
	void *userdata;
} Subscriber;

static LineBuffer *events, *logs;
static Subscriber subscribers[SUBSCRIBERS_MAX];
static Subscriber log_reader;
static void (*log_reader_replaced)(void *userdata);

int journal_init(void)
{
	events = linebuf_new(JOURNAL_EVENTS_MAX_BYTES);
	logs = linebuf_new(JOURNAL_LOGS_MAX_BYTES);
	return events && logs ? 0 : -ENOMEM;
}

long long journal_uptime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The console is the record of last resort; a short write there is not worth failing for.
 * It is a file on the host, so what an app prints may fill it only so far: past
 * JOURNAL_CONSOLE_APP_MAX bytes of app lines in a boot, they stop being mirrored there
 * (logs.sock still carries them) and berth-init's own lines go on.
 */
static void console_line(const char *prefix, const char *line, size_t len, bool from_app)
{
	static size_t app_bytes;
	static bool app_stopped;

	len = MIN(len, (size_t)JOURNAL_LINE_MAX);
	if (from_app) {
		if (app_stopped)
			return;
		app_bytes += len;
		if (app_bytes > JOURNAL_CONSOLE_APP_MAX) {
			app_stopped = true;
			dprintf(STDOUT_FILENO,
				"[berth-init] the apps printed more than %u bytes this boot: further app "
				"lines are not mirrored to the console (berth vm logs still has them)\n",
				JOURNAL_CONSOLE_APP_MAX);
			return;
		}
	}
	dprintf(STDOUT_FILENO, "[%s] %.*s\n", prefix, (int)len, line);
}

void journal_event(const char *event, json_t *fields)
{
	json_t *o = fields ? fields : json_object();
	char *text;

	if (!o)
		return;
	json_object_set_new(o, "source", json_string("berth-init"));
	json_object_set_new(o, "event", json_string(event));
	json_object_set_new(o, "t", json_integer(journal_uptime_ms()));
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!text)
		return;
	if (events)
		(void)linebuf_append(events, text, strlen(text));
	console_line("event", text, strlen(text), false);
	for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
		if (subscribers[i].sink)
			subscribers[i].sink(text, strlen(text), subscribers[i].userdata);
	free(text);
}

void journal_log(const char *src, const char *stream, const char *line, size_t len)
{
	json_t *o;
	char *text;

	if (len > JOURNAL_LINE_MAX)
		len = JOURNAL_LINE_MAX;
	console_line(src, line, len, !streq(src, "berth-init"));
	o = json_pack("{s:I, s:s, s:s, s:s%}", "t", (json_int_t)journal_uptime_ms(), "src", src,
		      "stream", stream, "line", line, len);
	if (!o)
		return;
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return;
	if (logs)
		(void)linebuf_append(logs, text, strlen(text));
	if (log_reader.sink)
		log_reader.sink(text, strlen(text), log_reader.userdata);
	free(text);
}

void journal_logf(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	journal_log("berth-init", "init", buf, MIN((size_t)n, sizeof(buf) - 1));
}

int journal_subscribe_events(JournalSink sink, void *userdata)
{
	for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
		if (!subscribers[i].sink) {
			subscribers[i] = (Subscriber){sink, userdata};
			return 0;
		}
	return -EMFILE;
}

void journal_unsubscribe_events(JournalSink sink, void *userdata)
{
	for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
		if (subscribers[i].sink == sink && subscribers[i].userdata == userdata)
			subscribers[i] = (Subscriber){};
}

void journal_replay_events(JournalSink sink, void *userdata)
{
	if (events)
		linebuf_foreach(events, sink, userdata);
}

void journal_set_log_reader(JournalSink sink, void *userdata, void (*on_replaced)(void *userdata))
{
	Subscriber old = log_reader;
	void (*old_replaced)(void *) = log_reader_replaced;

	log_reader = (Subscriber){sink, userdata};
	log_reader_replaced = on_replaced;
	if (old.sink && old_replaced)
		old_replaced(old.userdata);
}

void journal_clear_log_reader(void *userdata)
{
	if (log_reader.userdata == userdata) {
		log_reader = (Subscriber){};
		log_reader_replaced = NULL;
	}
}

void journal_restart(void)
{
	linebuf_free(events);
	linebuf_free(logs);
	(void)journal_init();
}

void journal_replay_logs(JournalSink sink, void *userdata)
{
	if (logs)
		linebuf_foreach(logs, sink, userdata);
}
