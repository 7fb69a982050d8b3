/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The semantic-fs control protocol (SPEC 2.9; docs/context.md): frames of a 4-byte
 * big-endian length and UTF-8 JSON. A request is
 *   {"id", "op": "register", "pid"?, "app"?}
 *   {"id", "op": "tag", "path", "task"?, "related_apps"?, "embedding"?, "model"?}
 *   {"id", "op": "query", "text", "limit"?, "embedding"?, "model"?}
 * and every answer {"id", "ok": true, ...} or {"id", "ok": false, "error": "<text>"}.
 *
 * This file turns one frame's body into a typed request, within the caps below, or into
 * the error text the peer is sent. libc and jansson only, no I/O: it is what the fuzz
 * target drives.
 */

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One request frame's body. A larger frame is skipped unread and answered with an error. */
#define SFS_REQUEST_MAX (1024 * 1024)
/* The id echoed back. */
#define SFS_ID_MAX 128
/* A path beneath the context root: bytes and segments. */
#define SFS_PATH_MAX 1024
#define SFS_PATH_DEPTH_MAX 16
#define SFS_TASK_MAX 4096
#define SFS_QUERY_TEXT_MAX 4096
/* related_apps entries (the "tags"), each an app name. */
#define SFS_RELATED_MAX 32
#define SFS_APP_NAME_MAX 64
/* Terms of a query that are looked up; the rest of the text is ignored. */
#define SFS_QUERY_TERMS_MAX 32
#define SFS_LIMIT_DEFAULT 10
#define SFS_LIMIT_MAX 50
/* An embedding is accepted for the SDK's shape and not used (keyword ranking). */
#define SFS_EMBEDDING_MAX 4096
#define SFS_MODEL_MAX 256
/* The JSON nesting a request may use; deeper is refused before it is looked at. */
#define SFS_DEPTH_MAX 8

typedef enum SfsOp {
	SFS_OP_REGISTER,
	SFS_OP_TAG,
	SFS_OP_QUERY,
	_SFS_OP_MAX,
	_SFS_OP_INVALID = -EINVAL,
} SfsOp;

typedef struct SfsRequest {
	json_t *id; /* a string or an integer, or JSON null when the request had none */
	SfsOp op;
	/* register */
	long long pid;	   /* -1 when not given */
	char *claimed_app; /* what the client says it is: logged, never believed */
	/* tag */
	char *path; /* normalised: relative to the context root, no "./", no trailing "/" */
	char *task; /* NULL when not given (a tag keeps the task it had) */
	char **related;
	size_t n_related;
	bool has_related;
	/* query */
	char *text;
	unsigned limit;
} SfsRequest;

void sfs_request_done(SfsRequest *r);

/*
 * sfs_request_parse() - decode one frame body of @len bytes.
 * Returns 0 and fills @ret, or -EINVAL (-ENOMEM) with the message for the peer in
 * @err (@errlen bytes). Even on failure @ret->id holds the request's id when one could be
 * read, so that the error answers the right call; sfs_request_done() releases it either way.
 */
int sfs_request_parse(const char *buf, size_t len, SfsRequest *ret, char *err, size_t errlen);

/*
 * sfs_path_normalize() - check a client's @path (absolute beneath @root, or relative to
 * it) and return the relative form in @out (@outlen bytes, at least SFS_PATH_MAX + 1).
 * Refused: empty, NUL or control bytes, not UTF-8, ".", ".." or hidden (".x") segments,
 * more than SFS_PATH_DEPTH_MAX segments or SFS_PATH_MAX bytes, an absolute path outside
 * @root. Returns 0 or -EINVAL with the reason in @err.
 */
int sfs_path_normalize(const char *path, const char *root, char *out, size_t outlen, char *err,
		       size_t errlen);

/*
 * sfs_query_match() - the FTS5 MATCH expression for a query's @text: each run of letters
 * and digits becomes one quoted term, OR-ed, at most SFS_QUERY_TERMS_MAX of them, so that
 * no client text is ever FTS5 syntax. Returns a new string ("" when there is no term), or
 * NULL for out of memory.
 */
char *sfs_query_match(const char *text);

/* The answers. Each returns a new object (NULL only for out of memory). */
json_t *sfs_answer_error(json_t *id, const char *error);
json_t *sfs_answer_ok(json_t *id);

/*
 * sfs_frame_encode() - @answer as one frame: 4-byte big-endian length then compact JSON.
 * Returns 0 and a malloc'ed buffer, or -ENOMEM, or -E2BIG past @max bytes of body.
 */
int sfs_frame_encode(const json_t *answer, size_t max, char **ret, size_t *ret_len);
