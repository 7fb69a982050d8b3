/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "evloop.h"
#include "macros.h"
#include "mux-io.h"

/*
 * A broker berth-init starts for one app (the egress broker, the GitHub broker): a binary
 * of the root image run as `agent-init <binary>` with a uid of its own, its own agent-init
 * policy and an environment built from scratch, its output in the journal under its name,
 * and "ready" once it prints its listening line on stderr. The per-broker parts (files,
 * policy, variables) are egress.c's and github.c's.
 */

#define DAEMON_AGENT_INIT "/usr/sbin/agent-init"
#define DAEMON_LINE_MAX (16 * 1024)
#define DAEMON_READY_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define DAEMON_ENV_MAX 48
#define DAEMON_ARGS_MAX 32
#define DAEMON_PROBE_USEC (100 * USEC_PER_MSEC)
/* A held daemon (the context daemons) starts at this nice value, and runs at 0 once it is
 * listening: its start (most of a second of guest CPU under emulation) comes right after
 * the apps', and must not slow the first requests they are sent. */
#define DAEMON_START_NICE 10

typedef enum DaemonState {
	DAEMON_NONE,
	DAEMON_HELD, /* its socket bound, its start waiting for daemon_release() */
	DAEMON_STARTING,
	DAEMON_READY,
	DAEMON_EXITED,
	_DAEMON_STATE_MAX,
} DaemonState;

/* Called once: @ok when the daemon listens; otherwise @why says what went wrong. */
typedef void (*daemon_ready_t)(bool ok, const char *why, void *userdata);

typedef struct DaemonStream {
	struct Daemon *owner;
	const char *name; /* "stdout" or "stderr" */
	int fd;
	EvSource *source;
	char buf[DAEMON_LINE_MAX];
	size_t len;
} DaemonStream;

typedef struct Daemon {
	/* Set by the owner before daemon_start(). */
	const char *name;	/* "egress-broker": the journal's source, the events' daemon */
	const char *title;	/* "egress broker", in messages */
	const char *binary;	/* /usr/sbin/egress-broker */
	const char *user;	/* its user, whose /tmp/<user> is HOME and TMPDIR */
	uid_t uid;		/* and gid */
	const char *policy;	/* its agent-init policy */
	const char *ready_line; /* the start of its stderr line that says it listens */
	/* Or, for a program that prints nothing when it is ready (Xvfb): ready once a
	 * connection to this succeeds, a unix socket path or "127.0.0.1:<port>", tried every
	 * DAEMON_PROBE_USEC. */
	const char *ready_connect;
	const char *const *args; /* its arguments after the binary, NULL-terminated, or NULL */
	const char *listen;	 /* "127.0.0.1:8090", for daemon_started */
	/* Socket activation (listen-fd.h): a unix socket path berth-init binds itself,
	 * root:@socket_gid 0660, and hands the daemon as fd 3. @cb then follows once it is
	 * bound, not once the daemon listens: whoever connects meanwhile is queued. */
	const char *socket;
	gid_t socket_gid;
	/* With @socket: bind it and answer at daemon_start(), but exec the daemon only at
	 * daemon_release(), so that it does not take the CPU from the apps' start. */
	bool hold;
	char app[33]; /* the app it serves */
	/* The daemon's own. */
	EvLoop *loop;
	DaemonState state;
	pid_t pid;
	DaemonStream out, err;
	EvSource *timer, *probe;
	daemon_ready_t cb;
	void *userdata;
	int listen_fd;		       /* the bound socket, until the daemon has it */
	const char *const *held_extra; /* daemon_start()'s, borrowed, while held */
	const json_t *held_secrets;
} Daemon;

/*
 * daemon_start() - fork and exec agent-init with @d's binary. Its environment is PATH,
 * LANG, HOME and TMPDIR (/tmp/<user>), BERTH_BOOT_ID, BERTH_REQUIRE_ENFORCEMENT=1,
 * BERTH_CAPABILITY_POLICY, BERTH_APP_UID and BERTH_APP_GID, then @extra ("K=V",
 * NULL-terminated), then @secrets (an object of NAME: value, or NULL; the daemon's scope of
 * the secrets disk). @cb follows from the event loop, or at once on a failure to start.
 */
void daemon_start(Daemon *d, EvLoop *loop, const char *const *extra, const json_t *secrets,
		  daemon_ready_t cb, void *userdata);
/* Exec a daemon started with @hold (its @extra and @secrets must still be there); a no-op
 * for any other. */
void daemon_release(Daemon *d);

/* The setup every daemon's module shares. daemon_why(): print into @why, return -EIO. */
int daemon_why(char *why, size_t whylen, const char *fmt, ...) _printf_(3, 4);
/* mkdir @path (kept when it exists, never through a link) and give it @uid:@gid @mode. */
int daemon_make_dir(const char *path, mode_t mode, uid_t uid, gid_t gid);
/* Write @doc (a policy document, borrowed) to @path, root:@uid 0640, through the capability
 * module's one reader and one writer, like every app's policy. */
int daemon_write_policy(const char *path, json_t *doc, uid_t uid);

/* The SIGCHLD reaper's hook: true when @pid was @d's process (daemon_exited is logged). */
bool daemon_child_exited(Daemon *d, pid_t pid, int status);

const char *daemon_state_name(DaemonState s);

/*
 * dial_socket_listen() - serve the unix socket @path (root:@uid 0660) of a daemon that
 * reaches the host's egress dialer: every connection from root or @uid becomes a new
 * channel stream to port MUX_PORT_EGRESS on @io, bridged byte for byte (mux_io owns it).
 * @ret->dials counts the streams opened. Returns 0 or -errno.
 */
typedef struct DialSocket {
	MuxIo *io;
	uid_t uid;
	int fd;
	EvSource *source;
	unsigned long dials;
} DialSocket;

int dial_socket_listen(EvLoop *loop, MuxIo *io, const char *path, uid_t uid, DialSocket *ret);
/* Stop serving (the daemon is gone: a socket left open would only collect connections). */
void dial_socket_close(DialSocket *s);
