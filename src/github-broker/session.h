/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * One connection to the GitHub broker, from the app's CONNECT to the end of the one
 * response it gets (docs/github.md). It runs in a child process of its own, with blocking
 * I/O bounded by socket timeouts: whatever one connection does to that process (a parser
 * bug, a hang) touches no other connection's plaintext, and ends with the process.
 */

#include <jansson.h>
#include <openssl/ssl.h>
#include <stdint.h>

#include "macros.h"
#include "policy.h"

#define BROKER_LOG_PREFIX "[github-api-broker] "
/* Lines the broker writes stay shorter than PIPE_BUF, so the children's lines on the one
 * stderr pipe never interleave; a longer path is cut in the log (never in the request). */
#define BROKER_LOG_LINE_MAX 4000
#define BROKER_LOG_PATH_MAX 1024
#define BROKER_DIAL_REPLY_MAX 4096
#define BROKER_DIAL_TIMEOUT_MS 30000 /* the dialer resolves (5 s) and connects (10 s) */
#define BROKER_TOKEN_MAX 1024

typedef struct BrokerConfig {
	const CapabilityPolicy *policy; /* the app's; NULL (unreadable) denies everything */
	SSL_CTX *server;		/* answers the app as api.github.com */
	SSL_CTX *client;		/* reaches api.github.com, verifying its certificate */
	const char *dial_path;		/* the dial socket (berth-init's bridge to the host) */
	const char *token;		/* the real GITHUB_TOKEN, or NULL */
	unsigned head_timeout_ms, idle_timeout_ms;
} BrokerConfig;

/* Handle the app's connection @fd to its end, then return; @fd is closed. */
void session_run(const BrokerConfig *cfg, int fd);

/* A line on stderr with the broker's prefix. */
_printf_(1, 2) void broker_log(const char *fmt, ...);
/* One JSON object as a log line; @o is consumed. */
void broker_log_json(json_t *o);
