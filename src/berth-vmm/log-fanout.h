/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The VM's log for any number of readers (docs/vm.md, "The log socket"). The guest's log
 * port (1025) serves one reader at a time, so berth-vmm is that reader: it holds the one
 * guest stream, keeps the last LOG_FANOUT_KEPT_MAX bytes of lines, and serves every
 * client of logs.sock the same protocol the guest speaks: "log stream attached", a
 * replay of what it kept, the log_replay_end marker, then live lines.
 *
 * At most LOG_FANOUT_CLIENTS_MAX clients at once; one more gets a LOG_STREAM_REFUSED
 * line and is closed. Each client has its own output buffer of LOG_FANOUT_CLIENT_OUT_MAX
 * bytes; a client that lets it fill is dropped, so a reader that stops reading never
 * holds up the others or the guest.
 *
 * The guest stream is opened on every new session, and reopened a little later if it ends
 * while the session is up. The guest replays its journal on every open; lines the clients
 * already have are not sent to them twice.
 */

#include "evloop.h"
#include "mux-io.h"

#define LOG_FANOUT_CLIENTS_MAX 16
#define LOG_FANOUT_KEPT_MAX (1024 * 1024)
/* The replay (at most LOG_FANOUT_KEPT_MAX bytes plus a newline per line) always fits. */
#define LOG_FANOUT_CLIENT_OUT_MAX (2 * 1024 * 1024)

typedef struct LogFanout LogFanout;

/*
 * log_fanout_new() - serve the clients of the listening socket @listen_fd (taken, also on
 * failure) from the guest's log port on @io. @loop and @io must outlive the fanout.
 */
int log_fanout_new(EvLoop *loop, MuxIo *io, int listen_fd, LogFanout **ret);
/* The session is (again) READY: open the guest stream. */
void log_fanout_session_ready(LogFanout *f);
/*
 * The VM is gone: refuse new clients. The others keep what is still on its way to them;
 * they see the end when berth-vmm exits, so whoever sees it finds the VM gone too.
 */
void log_fanout_finish(LogFanout *f);
/* Close everything. Accepts NULL; returns NULL. */
LogFanout *log_fanout_free(LogFanout *f);
