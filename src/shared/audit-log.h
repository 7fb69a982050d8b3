/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "digest.h"

/*
 * The audit trail (SPEC §8.6, docs/audit.md): one JSON record a line, each chained to the
 * one before it. `berth mcp` writes it through an AuditSink; `berth audit verify|list` and
 * `berth attest` read it through audit_chain_walk().
 *
 * Where: audit_default_path() -- $BERTH_AUDIT_PATH, else <BERTH_HOME>/audit/audit.jsonl.
 * Rotated at AUDIT_ROTATE_BYTES into <path>.1 (newest) … <path>.5 (oldest); older
 * segments are deleted. The chain runs on across segments.
 *
 * A record, in the order its keys are written:
 *
 *   {ts, seq, actor{kind, id, verifiedBy}, action, target?, decision, reason?,
 *    input?, output?, durationMs?, meta?, prevHash, hash}
 *
 *   ts        RFC 3339 UTC with milliseconds ("2026-11-30T02:45:20.123Z"), set on append
 *   seq       1 for the first record of a trail, then the last record's seq + 1
 *   prevHash  the previous record's hash; 64 '0's (AUDIT_GENESIS_HASH) for the first
 *   hash      sha256_hex(prevHash ‖ canonical(record without prevHash and hash)), with
 *             "‖" plain concatenation of the 64 hex characters and the canonical text,
 *             and canonical = attest_canonical_json() (sorted keys, compact, no reals)
 */

#define AUDIT_GENESIS_HASH "0000000000000000000000000000000000000000000000000000000000000000"
/* A segment is rotated before the append that would take it past this size. */
#define AUDIT_ROTATE_BYTES (16u * 1024 * 1024)
/* Rotated segments kept: <path>.1 … <path>.5. */
#define AUDIT_ROTATED_MAX 5
/* One record's line, without its newline. A longer line in a trail is a broken record. */
#define AUDIT_LINE_MAX (1024u * 1024)
/* Redaction (audit_redact()). */
#define AUDIT_REDACT_STRING_MAX 2048 /* characters */
#define AUDIT_REDACT_ARRAY_MAX 50
#define AUDIT_REDACT_DEPTH_MAX 8

/* $BERTH_AUDIT_PATH if set and not empty, else <BERTH_HOME>/audit/audit.jsonl. malloc()ed;
 * NULL on OOM or when no home is known. */
char *audit_default_path(void);

typedef struct AuditSink AuditSink;

/*
 * audit_sink_open() - get ready to append to the trail at @path (NULL: the default path).
 * Creates the file's directory (mode 0700) and the file (mode 0600) when missing, sets the
 * file back to 0600 when it is looser, and newline-terminates a torn last line (a crash in
 * the middle of an append) so that the next record starts on a line of its own; the torn
 * line is left where it is, and readers skip it.
 * @capture_payloads: keep the events' input and output (redacted); otherwise they are
 * dropped before anything is written.
 * Returns 0 or -errno (e.g. -EACCES, -ENOTDIR; -EBADFD when @path is not a regular file,
 * -ELOOP when it is a symlink, which is never followed).
 */
int audit_sink_open(const char *path, bool capture_payloads, AuditSink **ret);
AuditSink *audit_sink_free(AuditSink *s);
static inline void audit_sink_freep(AuditSink **s)
{
	if (*s)
		audit_sink_free(*s);
}
/* The trail this sink appends to. */
const char *audit_sink_path(const AuditSink *s);
/* Rotate at @bytes instead of AUDIT_ROTATE_BYTES (tests, which need small segments). */
void audit_sink_set_rotate_bytes(AuditSink *s, uint64_t bytes);

/*
 * audit_append() - write one record for @event (borrowed, not modified) and fsync it
 * before returning: when it returns 0 the record is on disk.
 *
 * @event is an object with these keys and no others:
 *   actor       {kind: "operator"|"app"|"agent"|"anonymous", id: non-empty string,
 *                verifiedBy: "peer-socket"|"token"|"self-asserted"}
 *   action      non-empty string, e.g. "tool.call", "sandbox.boot"
 *   decision    "allowed"|"denied"|"unavailable"
 *   target, reason        strings (optional)
 *   durationMs  integer >= 0 (optional)
 *   meta        object (optional), always redacted with audit_redact()
 *   input, output         any JSON (optional): dropped unless the sink captures payloads,
 *                         and then redacted like meta
 * ts, seq, prevHash and hash are set here (any given are replaced). Anything else, or a
 * key of the wrong type, is -EINVAL. A record whose line would exceed AUDIT_LINE_MAX is
 * written with its input and output replaced by a note saying so; if it is still too long
 * (a meta that large), -E2BIG and nothing is written.
 *
 * Several processes may append to one trail at once: each append holds an exclusive
 * flock on <path>.lock while it reads the trail's last record (for seq and prevHash),
 * rotates if needed, writes and fsyncs, so the chain never forks and lines never mix.
 * Returns 0 or -errno.
 */
int audit_append(AuditSink *s, json_t *event);

/*
 * audit_redact() - a redacted deep copy of @v (new reference; NULL on OOM):
 *   - an object key that, lowercased with '-' and ' ' turned into '_', contains password,
 *     passwd, secret, token, apikey, api_key, authorization, auth, credential,
 *     private_key, privatekey, session, cookie or signature has its value replaced by
 *     "[redacted]", at any depth;
 *   - a string longer than AUDIT_REDACT_STRING_MAX characters becomes
 *     "<N.NKB string, not captured>" (its UTF-8 size in KiB, one decimal);
 *   - an array longer than AUDIT_REDACT_ARRAY_MAX keeps its first 50 items and then the
 *     string "<N more items>";
 *   - a value AUDIT_REDACT_DEPTH_MAX levels below @v becomes "<max depth>", and one that
 *     contains itself "<circular>";
 *   - a non-integer number, which the canonical form cannot hold, becomes an integer when
 *     it is integral (and within ±2^53), else a string of its shortest round-trip decimal
 *     ("0.1").
 */
json_t *audit_redact(json_t *v);

/* sha256_hex(@prev_hash ‖ canonical(@record without prevHash and hash)). -EDOM when the
 * record holds a non-integer number. */
int audit_record_hash(json_t *record, const char *prev_hash, char ret_hex[SHA256_HEX_LEN + 1]);

/* ---- reading: the one walker of the chain ---- */

typedef struct AuditChain {
	unsigned segments;		 /* files found among <path>.5 … <path>.1, <path> */
	uint64_t records;		 /* records verified */
	uint64_t torn_lines;		 /* lines skipped as torn writes */
	char head[SHA256_HEX_LEN + 1];	 /* the last record's hash (genesis when none) */
	char anchor[SHA256_HEX_LEN + 1]; /* the first record's prevHash: genesis, or the hash
					  * of a record rotated away when <path>.5 exists */
} AuditChain;

typedef struct AuditWalkOps {
	/* Each verified record, oldest first. @segment is the file's path, @line the record's
	 * line number in it (from 1). @record is borrowed. A negative return stops the walk
	 * and is returned by audit_chain_walk(). May be NULL. */
	int (*record)(const char *segment, uint64_t line, json_t *record, void *userdata);
	/* A segment whose every record verified, with its count of records. May be NULL. */
	int (*segment_done)(const char *segment, uint64_t records, void *userdata);
} AuditWalkOps;

/*
 * audit_chain_walk() - walk the trail at @path, oldest segment first (<path>.5 … <path>.1,
 * then <path>; missing ones are skipped), and verify the chain: every record's prevHash
 * must be the previous record's hash (genesis for the first, unless the walk starts in
 * <path>.5, whose first record anchors the chain since older segments were deleted) and
 * its hash must match its contents.
 *
 * Empty lines are skipped. A line that is not JSON is a torn write: skipped and counted
 * (the next record must still chain to the last good one, so a record cannot be dropped
 * this way unnoticed, except the newest, as with truncation). A line longer than
 * AUDIT_LINE_MAX, JSON that is not an object, an object without a 64-hex prevHash and
 * hash, a record holding a non-integer number, or a hash that does not match is a broken
 * record: the walk stops with -EBADMSG and *@ret_error (may be NULL) is exactly
 * "<segment>: BROKEN at record <line> — <reason>".
 *
 * A missing trail is an empty chain (0 segments, head = genesis), not an error. While it
 * walks, it holds a shared flock on <path>.lock when that exists, so a concurrent
 * rotation cannot shift the segments underneath it. *@ret_chain (may be NULL) is filled
 * in as far as the walk got, also on -EBADMSG. Other errors: -errno with *@ret_error
 * saying which file.
 */
int audit_chain_walk(const char *path, const AuditWalkOps *ops, void *userdata,
		     AuditChain *ret_chain, char **ret_error);
