/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Downloading one pinned file through libcurl (http, https and file URLs only).
 *
 * The bytes go to "<path>.part" beside the destination. They are checked against the
 * pinned size while they stream and against the pinned sha256 before an atomic rename,
 * so nothing unverified is ever at @path. A transfer that receives nothing for the stall
 * time is aborted and retried; an http(s) retry asks for the rest with a Range request
 * and keeps the prefix it has when the server answers 206, or starts over when it
 * answers 200.
 */

#define FETCH_ATTEMPTS_DEFAULT 4
#define FETCH_STALL_MS_DEFAULT 30000
/* Overrides FETCH_STALL_MS_DEFAULT: milliseconds without a byte before a retry. */
#define FETCH_STALL_ENV "BERTH_VM_DOWNLOAD_STALL_MS"

/* Called as bytes arrive: @done of @total bytes are in the .part file. */
typedef void (*FetchProgressFn)(void *userdata, uint64_t done, uint64_t total);

typedef struct FetchRequest {
	const char *url;
	const char *path;	  /* final path; its directory must exist */
	const char *sha256;	  /* expected, 64 lowercase hex digits */
	uint64_t size;		  /* expected, bytes */
	mode_t mode;		  /* of the final file */
	unsigned max_attempts;	  /* 0: FETCH_ATTEMPTS_DEFAULT */
	uint64_t stall_ms;	  /* 0: $BERTH_VM_DOWNLOAD_STALL_MS, else FETCH_STALL_MS_DEFAULT */
	FetchProgressFn progress; /* may be NULL */
	void *userdata;
} FetchRequest;

/* What happened, for messages and tests. */
typedef struct FetchReport {
	unsigned attempts; /* transfers started */
	unsigned stalls;   /* transfers aborted for receiving nothing */
	unsigned resumes;  /* range requests answered 206: the prefix was kept */
	unsigned restarts; /* range requests answered 200: started over */
	uint64_t received; /* body bytes received over all attempts */
} FetchReport;

/* The stall time: $BERTH_VM_DOWNLOAD_STALL_MS when it is a positive integer, else 30 s. */
uint64_t fetch_stall_ms(void);

/*
 * fetch_file() - download @req->url to @req->path, verified against @req->size and
 * @req->sha256.
 * @ret_report: may be NULL; filled on success and failure.
 * @err, @errlen: on failure, a one-line reason (no "kind:" prefix; the caller knows it).
 * Returns 0 once the verified file is at @req->path with @req->mode. On failure nothing is
 * at @req->path and:
 *   -EFBIG    the server sent, or announced, more bytes than the pin; .part removed
 *   -EBADMSG  the file is not the pinned one (sha256, or an announced size below the pin);
 *             .part removed
 *   -ENOENT   HTTP 404/410, or a file:// URL naming no file
 *   -EACCES   HTTP 401/403, or an unreadable file:// file
 *   -ETIMEDOUT every attempt stalled; .part kept for a later resume
 *   -EPROTONOSUPPORT a scheme other than http, https or file
 *   -EBUSY    another process is downloading to the same .part
 *   other -errno on network or local failures after the last attempt; .part kept
 * SECURITY: only the pins are trusted; the server, any proxy and any redirect are not.
 */
int fetch_file(const FetchRequest *req, FetchReport *ret_report, char *err, size_t errlen);
