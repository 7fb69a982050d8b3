/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The terminal's web view (docs/terminal.md): an HTTP and websocket server on libwebsockets
 * that serves xterm.js and, for each websocket, runs the attach command (tmux attach) on a
 * pseudo-terminal of its own and carries its bytes both ways. Every request and every
 * websocket needs the login (auth.h); the server listens on 127.0.0.1 only.
 */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#define VIEW_PORT_DEFAULT 7681
#define VIEW_CLIENTS_MAX 8
#define VIEW_ASSET_MAX (4 * 1024 * 1024)    /* of one file the page loads */
#define VIEW_OUTPUT_CHUNK (16 * 1024)	    /* of terminal output per websocket message */
#define VIEW_INPUT_PENDING_MAX (128 * 1024) /* keys the terminal has not taken yet */

typedef struct ViewServer ViewServer;

typedef struct ViewConfig {
	int port;		  /* on 127.0.0.1; 0: no listener (view_server_adopt() only) */
	const char *credential;	  /* "berth:<secret>", view_credential_valid() */
	const char *assets_dir;	  /* the page's files; NULL: a placeholder page (tests) */
	char *const *attach_argv; /* run on a new terminal per websocket; NULL: none (tests) */
	char *const *attach_envp; /* its environment */
	unsigned max_clients;	  /* websockets at once; 0: VIEW_CLIENTS_MAX */
} ViewConfig;

/*
 * view_server_new() - load the page's files and start listening. On failure returns
 * -errno with @err saying what went wrong (a file missing, the port taken).
 */
int view_server_new(const ViewConfig *c, ViewServer **ret, char *err, size_t errlen);
ViewServer *view_server_free(ViewServer *s);

/* Serve until *@stop is set (by a signal handler, which then calls view_server_wake()). */
int view_server_run(ViewServer *s, volatile sig_atomic_t *stop);
void view_server_wake(ViewServer *s);

/* One round of service; @timeout_ms -1 does not wait (libwebsockets 4 otherwise waits for
 * its next timer, however small @timeout_ms: the fuzzer passes -1). */
int view_server_service(ViewServer *s, int timeout_ms);

/* Take @fd (a connected stream socket) as if it had been accepted (the fuzzer). */
int view_server_adopt(ViewServer *s, int fd);

/* Websockets open. */
unsigned view_server_sessions(const ViewServer *s);
