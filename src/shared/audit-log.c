/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error-text.h"
#include "attest.h"
#include "audit-log.h"
#include "fileio.h"
#include "line-reader.h"
#include "macros.h"
#include "paths.h"
#include "time-util.h"

/* How far back from the end the sink looks for the last record before it falls back to
 * reading the whole segment: room for a torn line and a whole record before it. */
#define TAIL_WINDOW_MIN (64u * 1024)
#define TAIL_WINDOW_MAX (4u * AUDIT_LINE_MAX)

struct AuditSink {
	char *path;
	char *dir;
	int lock_fd;
	bool capture_payloads;
	uint64_t rotate_bytes;
};

char *audit_default_path(void)
{
	const char *env = getenv("BERTH_AUDIT_PATH");
	_cleanup_free_ char *home = NULL;
	char *p = NULL;

	if (env && *env)
		return strdup(env);
	home = berth_home();
	if (!home || asprintf(&p, "%s/audit/audit.jsonl", home) < 0)
		return NULL;
	return p;
}

static char *segment_path(const char *path, int n)
{
	char *p = NULL;

	if (n == 0)
		return strdup(path);
	if (asprintf(&p, "%s.%d", path, n) < 0)
		return NULL;
	return p;
}

/* ---- redaction ---- */

static const char *const sensitive_keys[] = {
	"password",   "passwd",	       "secret", "token",      "apikey",
	"api_key",    "authorization", "auth",	 "credential", "private_key",
	"privatekey", "session",       "cookie", "signature",
};

static bool key_sensitive(const char *key, size_t len)
{
	_cleanup_free_ char *k = NULL;

	/* A NUL inside a key would hide what follows it from the check: fail closed. */
	if (memchr(key, '\0', len))
		return true;
	k = strndup(key, len);
	if (!k)
		return true;
	for (char *p = k; *p; p++) {
		if (*p == '-' || *p == ' ')
			*p = '_';
		else if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	}
	for (size_t i = 0; i < ELEMENTSOF(sensitive_keys); i++)
		if (strstr(k, sensitive_keys[i]))
			return true;
	return false;
}

static size_t utf8_chars(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			n++;
	return n;
}

/* The canonical form has no reals (attest.h): an integral one becomes an integer, any
 * other the shortest decimal text that reads back as the same double. */
static json_t *real_normalize(double x)
{
	char buf[64];

	if (x == trunc(x) && fabs(x) <= 9007199254740992.0)
		return json_integer((json_int_t)x);
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	return json_string(buf);
}

static json_t *redact(json_t *v, unsigned depth, json_t **stack)
{
	json_t *out, *e;
	const char *k;
	size_t i, klen;

	for (i = 0; i < depth; i++)
		if (stack[i] == v)
			return json_string("<circular>");
	if (depth >= AUDIT_REDACT_DEPTH_MAX)
		return json_string("<max depth>");
	stack[depth] = v;

	switch (json_typeof(v)) {
	case JSON_STRING: {
		size_t len = json_string_length(v);
		char note[64];

		if (utf8_chars(json_string_value(v), len) <= AUDIT_REDACT_STRING_MAX)
			return json_incref(v);
		snprintf(note, sizeof(note), "<%.1fKB string, not captured>", (double)len / 1024.0);
		return json_string(note);
	}
	case JSON_REAL:
		return real_normalize(json_real_value(v));
	case JSON_ARRAY: {
		size_t n = json_array_size(v);

		out = json_array();
		for (i = 0; out && i < n && i < AUDIT_REDACT_ARRAY_MAX; i++)
			if (json_array_append_new(
				    out, redact(json_array_get(v, i), depth + 1, stack)) < 0)
				return json_decref(out), NULL;
		if (out && n > AUDIT_REDACT_ARRAY_MAX) {
			char note[64];

			snprintf(note, sizeof(note), "<%zu more items>",
				 n - AUDIT_REDACT_ARRAY_MAX);
			if (json_array_append_new(out, json_string(note)) < 0)
				return json_decref(out), NULL;
		}
		return out;
	}
	case JSON_OBJECT:
		out = json_object();
		if (!out)
			return NULL;
		json_object_keylen_foreach(v, k, klen, e)
		{
			json_t *r = key_sensitive(k, klen) ? json_string("[redacted]")
							   : redact(e, depth + 1, stack);

			if (json_object_setn_new(out, k, klen, r) < 0)
				return json_decref(out), NULL;
		}
		return out;
	case JSON_INTEGER:
	case JSON_TRUE:
	case JSON_FALSE:
	case JSON_NULL:
	default:
		return json_incref(v);
	}
}

json_t *audit_redact(json_t *v)
{
	json_t *stack[AUDIT_REDACT_DEPTH_MAX];

	if (!v)
		return NULL;
	return redact(v, 0, stack);
}

/* ---- hashing ---- */

int audit_record_hash(json_t *record, const char *prev_hash, char ret_hex[SHA256_HEX_LEN + 1])
{
	_cleanup_(json_decrefp) json_t *ev = json_copy(record); /* shallow: top level only */
	_cleanup_(sha256_freep) Sha256 *h = NULL;
	_cleanup_free_ char *canon = NULL;
	int r;

	if (!ev)
		return -ENOMEM;
	json_object_del(ev, "prevHash");
	json_object_del(ev, "hash");
	r = attest_canonical_json(ev, &canon);
	if (r < 0)
		return r;
	h = sha256_new();
	if (!h)
		return -ENOMEM;
	r = sha256_update(h, prev_hash, strlen(prev_hash));
	if (r >= 0)
		r = sha256_update(h, canon, strlen(canon));
	if (r >= 0)
		r = sha256_final_hex(h, ret_hex);
	return r;
}

static int open_segment_ro(const char *path, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	/* O_NONBLOCK: a FIFO in the segment's place must not hang the reader. */
	fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* A line the sink may chain to: an object with a 64-hex hash. */
static json_t *parse_record(const char *line, size_t len)
{
	json_t *rec;

	if (len == 0 || len > AUDIT_LINE_MAX)
		return NULL;
	rec = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(rec) ||
	    !sha256_hex_valid(json_string_value(json_object_get(rec, "hash")))) {
		json_decref(rec);
		return NULL;
	}
	return rec;
}

/* ---- the walker ---- */

static void close_all(int (*fds)[AUDIT_ROTATED_MAX + 1])
{
	for (int n = 0; n <= AUDIT_ROTATED_MAX; n++)
		safe_close((*fds)[n]);
}

int audit_chain_walk(const char *path, const AuditWalkOps *ops, void *userdata,
		     AuditChain *ret_chain, char **ret_error)
{
	AuditChain chain = {.head = AUDIT_GENESIS_HASH, .anchor = AUDIT_GENESIS_HASH};
	_cleanup_(close_all) int fds[AUDIT_ROTATED_MAX + 1];
	_cleanup_close_ int lock_fd = -EBADF;
	_cleanup_free_ char *lock_path = NULL;
	bool first = true, have_oldest = false;
	int r = 0;

	for (int n = 0; n <= AUDIT_ROTATED_MAX; n++)
		fds[n] = -EBADF;
	if (asprintf(&lock_path, "%s.lock", path) < 0)
		return -ENOMEM;

	/* Open every segment under a shared lock, so no rotation runs in between, then let
	 * go: the descriptors are a snapshot that renames cannot shift, and writers are not
	 * held up while the records are read (or printed to a paused pager). Readers never
	 * create the lock file: a trail no sink wrote has none. */
	lock_fd = open(lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (lock_fd >= 0)
		while (flock(lock_fd, LOCK_SH) < 0 && errno == EINTR)
			;
	for (int n = AUDIT_ROTATED_MAX; n >= 0; n--) {
		_cleanup_free_ char *seg = segment_path(path, n);

		if (!seg)
			return -ENOMEM;
		r = open_segment_ro(seg, &fds[n]);
		if (r < 0 && r != -ENOENT) {
			error_text_set(ret_error, "cannot read the audit trail segment %s: %s", seg,
				       r == -EBADFD ? "not a regular file" : strerror(-r));
			goto out;
		}
	}
	lock_fd = safe_close(lock_fd);

	for (int n = AUDIT_ROTATED_MAX; n >= 0; n--) {
		_cleanup_free_ char *seg = segment_path(path, n);
		_cleanup_(line_reader_done) LineReader lr =
			LINE_READER_INIT(fds[n], AUDIT_LINE_MAX);
		uint64_t lineno = 0, records = 0;

		if (!seg) {
			r = -ENOMEM;
			goto out;
		}
		if (fds[n] < 0)
			continue;
		chain.segments++;
		if (n == AUDIT_ROTATED_MAX)
			have_oldest = true;
		lr.keep_partial = true; /* a last line without its newline is read as well */
		for (;;) {
			_cleanup_(json_decrefp) json_t *rec = NULL;
			char hex[SHA256_HEX_LEN + 1];
			const char *ph, *h;
			json_error_t jerr;
			size_t len = 0;
			char *line = NULL;

			r = line_reader_next(&lr, -1, &line, &len);
			if (r == 0)
				break;
			lineno++;
			if (r == -EMSGSIZE) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — the line is longer "
					       "than the %u MiB a record may take",
					       seg, lineno, AUDIT_LINE_MAX / (1024 * 1024));
				r = -EBADMSG;
				goto out;
			}
			if (r < 0) {
				error_text_set(ret_error,
					       "cannot read the audit trail segment %s: %s", seg,
					       strerror(-r));
				goto out;
			}
			if (len == 0)
				continue;
			rec = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
			/* A torn write is newline-terminated and left by the writer; skipping it
			 * is safe because the next record's prevHash still has to match. */
			if (!rec) {
				chain.torn_lines++;
				continue;
			}
			if (!json_is_object(rec)) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — the line is JSON but "
					       "not a record (an object)",
					       seg, lineno);
				r = -EBADMSG;
				goto out;
			}
			ph = json_string_value(json_object_get(rec, "prevHash"));
			h = json_string_value(json_object_get(rec, "hash"));
			if (!ph || !h || !sha256_hex_valid(ph) || !sha256_hex_valid(h)) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — no valid prevHash/hash",
					       seg, lineno);
				r = -EBADMSG;
				goto out;
			}
			/* Rotation keeps <path>.1..5: when .5 exists older segments may be gone,
			 * and the oldest kept record anchors the chain instead of genesis. */
			if (first && have_oldest) {
				memcpy(chain.head, ph, sizeof(chain.head));
				memcpy(chain.anchor, ph, sizeof(chain.anchor));
			}
			if (!streq(ph, chain.head)) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — prevHash %.16s… does "
					       "not match the previous record's hash %.16s…",
					       seg, lineno, ph, chain.head);
				r = -EBADMSG;
				goto out;
			}
			r = audit_record_hash(rec, chain.head, hex);
			if (r == -EDOM) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — it holds a non-integer "
					       "number, which no record written by berth does",
					       seg, lineno);
				r = -EBADMSG;
				goto out;
			}
			if (r < 0)
				goto out;
			if (!streq(hex, h)) {
				error_text_set(ret_error,
					       "%s: BROKEN at record %" PRIu64
					       " — hash %.16s… does not "
					       "match its contents (%.16s…)",
					       seg, lineno, h, hex);
				r = -EBADMSG;
				goto out;
			}
			memcpy(chain.head, h, sizeof(chain.head));
			first = false;
			chain.records++;
			records++;
			if (ops && ops->record) {
				r = ops->record(seg, lineno, rec, userdata);
				if (r < 0)
					goto out;
			}
		}
		if (ops && ops->segment_done) {
			r = ops->segment_done(seg, records, userdata);
			if (r < 0)
				goto out;
		}
	}
	r = 0;
out:
	if (ret_chain)
		*ret_chain = chain;
	return r;
}

/* ---- the sink ---- */

AuditSink *audit_sink_free(AuditSink *s)
{
	if (!s)
		return NULL;
	safe_close(s->lock_fd);
	free(s->path);
	free(s->dir);
	free(s);
	return NULL;
}

const char *audit_sink_path(const AuditSink *s)
{
	return s->path;
}

void audit_sink_set_rotate_bytes(AuditSink *s, uint64_t bytes)
{
	s->rotate_bytes = bytes > 0 ? bytes : AUDIT_ROTATE_BYTES;
}

static int fsync_dir(const char *dir)
{
	_cleanup_close_ int fd = RET_NERRNO(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));

	if (fd < 0)
		return fd;
	return RET_NERRNO(fsync(fd));
}

static int lock_exclusive(int fd)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void unlockp(int **fd)
{
	if (*fd && **fd >= 0)
		(void)flock(**fd, LOCK_UN);
}

static int tighten(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
		return -errno;
	return 0;
}

/* Open the current segment for appending (creating it, and syncing the directory entry,
 * when missing) with mode 0600. Called with the lock held. */
static int open_current(AuditSink *s, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	bool created = false;
	int r;

	fd = open(s->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		fd = open(s->path,
			  O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
			  0600);
		created = fd >= 0;
	}
	if (fd < 0)
		return -errno;
	r = tighten(fd);
	if (r < 0)
		return r;
	if (created) {
		r = fsync_dir(s->dir);
		if (r < 0)
			return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* A crash in the middle of an append leaves a line without its newline: end it, so the
 * next record is a line of its own. */
static int terminate_torn_line(int fd, uint64_t *size)
{
	char c;
	ssize_t n;
	int r;

	if (*size == 0)
		return 0;
	n = pread(fd, &c, 1, (off_t)(*size - 1));
	if (n < 0)
		return -errno;
	if (n == 1 && c == '\n')
		return 0;
	r = loop_write(fd, "\n", 1);
	if (r < 0)
		return r;
	(*size)++;
	return RET_NERRNO(fdatasync(fd));
}

/* The current segment, opened (or created) under the lock, and its size once a torn last
 * line is ended. */
static int open_current_sized(AuditSink *s, int *ret_fd, uint64_t *ret_size)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	uint64_t size;
	int r;

	r = open_current(s, &fd);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	size = (uint64_t)st.st_size;
	r = terminate_torn_line(fd, &size);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	*ret_size = size;
	return 0;
}

/* The last line of @fd (of @size bytes) the sink may chain to, or NULL. Looks back through
 * a window that grows to TAIL_WINDOW_MAX, then reads the whole segment. */
static int segment_last_record(int fd, uint64_t size, json_t **ret)
{
	_cleanup_free_ char *buf = NULL;
	uint64_t window = TAIL_WINDOW_MIN;

	*ret = NULL;
	if (size == 0)
		return 0;
	for (;;) {
		uint64_t off = size > window ? size - window : 0;
		size_t len = (size_t)(size - off), got = 0;
		char *nb = realloc(buf, len + 1);

		if (!nb)
			return -ENOMEM;
		buf = nb;
		while (got < len) {
			ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			if (n == 0)
				break;
			got += (size_t)n;
		}
		len = got;
		buf[len] = '\0';
		/* Lines from the end; the first one is partial unless the window starts the
		 * file. */
		for (size_t e = len; e > 0;) {
			size_t stop = buf[e - 1] == '\n' ? e - 1 : e, b = stop;
			json_t *rec;

			while (b > 0 && buf[b - 1] != '\n')
				b--;
			if (b == 0 && off > 0)
				break;
			rec = parse_record(buf + b, stop - b);
			if (rec) {
				*ret = rec;
				return 0;
			}
			e = b;
		}
		if (off == 0)
			return 0;
		if (window >= TAIL_WINDOW_MAX)
			break;
		window *= 2;
	}

	/* Only torn or foreign lines near the end: read the whole segment, keep the last. */
	{
		_cleanup_(line_reader_done) LineReader lr = LINE_READER_INIT(fd, AUDIT_LINE_MAX);

		lr.keep_partial = true;
		/* Reading moves the offset; appends go to the end regardless (O_APPEND). */
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		for (;;) {
			char *line;
			size_t llen = 0;
			json_t *rec;
			int r = line_reader_next(&lr, -1, &line, &llen);

			if (r == 0)
				return 0;
			if (r == -EMSGSIZE)
				continue;
			if (r < 0)
				return r;
			rec = parse_record(line, llen);
			if (rec) {
				json_decref(*ret);
				*ret = rec;
			}
		}
	}
}

/* The record to chain to: the last one of the current segment (@fd), else of the newest
 * rotated segment that has one. */
static int trail_last_record(AuditSink *s, int fd, uint64_t size, json_t **ret)
{
	int r = segment_last_record(fd, size, ret);

	for (int n = 1; r >= 0 && !*ret && n <= AUDIT_ROTATED_MAX; n++) {
		_cleanup_free_ char *seg = segment_path(s->path, n);
		_cleanup_close_ int sfd = -EBADF;
		struct stat st;

		if (!seg)
			return -ENOMEM;
		r = open_segment_ro(seg, &sfd);
		if (r == -ENOENT) {
			r = 0;
			continue;
		}
		if (r < 0)
			return r;
		if (fstat(sfd, &st) < 0)
			return -errno;
		r = segment_last_record(sfd, (uint64_t)st.st_size, ret);
	}
	return r;
}

/* <path>.5 is dropped, .4 … .1 move up one, <path> becomes .1. Called with the lock held. */
static int rotate(AuditSink *s)
{
	_cleanup_free_ char *oldest = segment_path(s->path, AUDIT_ROTATED_MAX);

	if (!oldest)
		return -ENOMEM;
	if (unlink(oldest) < 0 && errno != ENOENT)
		return -errno;
	for (int n = AUDIT_ROTATED_MAX - 1; n >= 0; n--) {
		_cleanup_free_ char *from = segment_path(s->path, n),
				    *to = segment_path(s->path, n + 1);

		if (!from || !to)
			return -ENOMEM;
		if (rename(from, to) < 0 && errno != ENOENT)
			return -errno;
	}
	return fsync_dir(s->dir);
}

int audit_sink_open(const char *path, bool capture_payloads, AuditSink **ret)
{
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	_cleanup_free_ char *lock_path = NULL;
	_cleanup_close_ int fd = -EBADF;
	_cleanup_(unlockp) int *locked = NULL;
	uint64_t size;
	char *slash;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -EBADF;
	s->capture_payloads = capture_payloads;
	s->rotate_bytes = AUDIT_ROTATE_BYTES;
	s->path = path ? strdup(path) : audit_default_path();
	if (!s->path)
		return -ENOMEM;
	if (!*s->path)
		return -EINVAL;
	slash = strrchr(s->path, '/');
	s->dir = slash ? strndup(s->path, slash == s->path ? 1 : (size_t)(slash - s->path))
		       : strdup(".");
	if (!s->dir)
		return -ENOMEM;
	r = mkdir_p(s->dir, 0700);
	if (r < 0)
		return r;

	if (asprintf(&lock_path, "%s.lock", s->path) < 0)
		return -ENOMEM;
	s->lock_fd = RET_NERRNO(
		open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
	if (s->lock_fd < 0)
		return s->lock_fd;
	r = tighten(s->lock_fd);
	if (r < 0)
		return r;
	r = lock_exclusive(s->lock_fd);
	if (r < 0)
		return r;
	locked = &s->lock_fd;

	r = open_current_sized(s, &fd, &size);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

/* ---- appending ---- */

static bool string_in(const char *s, const char *const *set)
{
	for (; s && *set; set++)
		if (streq(s, *set))
			return true;
	return false;
}

static int event_check(json_t *ev)
{
	static const char *const kinds[] = {"operator", "app", "agent", "anonymous", NULL};
	static const char *const verified[] = {"peer-socket", "token", "self-asserted", NULL};
	static const char *const decisions[] = {"allowed", "denied", "unavailable", NULL};
	static const char *const keys[] = {"actor", "action",	"decision",   "target", "reason",
					   "input", "output",	"durationMs", "meta",	"ts",
					   "seq",   "prevHash", "hash",	      NULL};
	json_t *actor = json_object_get(ev, "actor"), *v;
	const char *k, *id;

	if (!json_is_object(ev) || !json_is_object(actor) || json_object_size(actor) != 3)
		return -EINVAL;
	json_object_foreach(ev, k, v)
		if (!string_in(k, keys))
			return -EINVAL;
	id = json_string_value(json_object_get(actor, "id"));
	if (!string_in(json_string_value(json_object_get(actor, "kind")), kinds) ||
	    !string_in(json_string_value(json_object_get(actor, "verifiedBy")), verified) || !id ||
	    !*id)
		return -EINVAL;
	k = json_string_value(json_object_get(ev, "action"));
	if (!k || !*k || !string_in(json_string_value(json_object_get(ev, "decision")), decisions))
		return -EINVAL;
	if (((v = json_object_get(ev, "target")) && !json_is_string(v)) ||
	    ((v = json_object_get(ev, "reason")) && !json_is_string(v)) ||
	    ((v = json_object_get(ev, "meta")) && !json_is_object(v)) ||
	    ((v = json_object_get(ev, "durationMs")) &&
	     (!json_is_integer(v) || json_integer_value(v) < 0)))
		return -EINVAL;
	return 0;
}

/* The record for @ev, in the order of audit-log.h, without prevHash and hash. */
static json_t *record_new(AuditSink *s, json_t *ev, const char *ts, json_int_t seq)
{
	static const char *const order[] = {"actor", "action", "target",     "decision", "reason",
					    "input", "output", "durationMs", "meta",	 NULL};
	_cleanup_(json_decrefp) json_t *rec = json_pack("{s:s, s:I}", "ts", ts, "seq", seq);

	if (!rec)
		return NULL;
	for (const char *const *k = order; *k; k++) {
		json_t *v = json_object_get(ev, *k), *c;

		if (!v)
			continue;
		if (streq(*k, "input") || streq(*k, "output")) {
			if (!s->capture_payloads)
				continue;
			c = audit_redact(v);
		} else if (streq(*k, "meta"))
			c = audit_redact(v);
		else
			c = json_deep_copy(v);
		if (!c || json_object_set_new(rec, *k, c) < 0)
			return NULL;
	}
	return TAKE_PTR(rec);
}

/* Seal @rec onto @prev and serialise it, newline included. */
static int record_seal(json_t *rec, const char *prev, char **ret_line, size_t *ret_len)
{
	char hex[SHA256_HEX_LEN + 1];
	char *text, *line = NULL;
	int r;

	json_object_del(rec, "prevHash");
	json_object_del(rec, "hash");
	r = audit_record_hash(rec, prev, hex);
	if (r < 0)
		return r;
	if (json_object_set_new(rec, "prevHash", json_string(prev)) < 0 ||
	    json_object_set_new(rec, "hash", json_string(hex)) < 0)
		return -ENOMEM;
	text = json_dumps(rec, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	r = asprintf(&line, "%s\n", text);
	free(text);
	if (r < 0)
		return -ENOMEM;
	*ret_len = (size_t)r;
	*ret_line = line;
	return 0;
}

int audit_append(AuditSink *s, json_t *event)
{
	_cleanup_(json_decrefp) json_t *last = NULL, *rec = NULL;
	_cleanup_free_ char *line = NULL;
	_cleanup_close_ int fd = -EBADF;
	_cleanup_(unlockp) int *locked = NULL;
	char prev[SHA256_HEX_LEN + 1] = AUDIT_GENESIS_HASH, ts[80];
	json_int_t seq = 1;
	uint64_t size;
	size_t len = 0;
	int r;

	if (!s || event_check(event) < 0)
		return -EINVAL;

	r = lock_exclusive(s->lock_fd);
	if (r < 0)
		return r;
	locked = &s->lock_fd;
	/* Reopened on every append: another writer may have rotated the file since. */
	r = open_current_sized(s, &fd, &size);
	if (r < 0)
		return r;
	r = trail_last_record(s, fd, size, &last);
	if (r < 0)
		return r;
	if (last) {
		json_t *ls = json_object_get(last, "seq");

		memcpy(prev, json_string_value(json_object_get(last, "hash")), sizeof(prev));
		if (json_is_integer(ls) && json_integer_value(ls) >= 0)
			seq = json_integer_value(ls) + 1;
	}

	now_rfc3339(ts, sizeof(ts), true);
	rec = record_new(s, event, ts, seq);
	if (!rec)
		return -ENOMEM;
	r = record_seal(rec, prev, &line, &len);
	if (r < 0)
		return r;
	if (len - 1 > AUDIT_LINE_MAX &&
	    (json_object_get(rec, "input") || json_object_get(rec, "output"))) {
		static const char note[] = "<not captured: the record would exceed the audit "
					   "trail's 1 MiB line cap>";

		if (json_object_get(rec, "input"))
			json_object_set_new(rec, "input", json_string(note));
		if (json_object_get(rec, "output"))
			json_object_set_new(rec, "output", json_string(note));
		free(TAKE_PTR(line));
		r = record_seal(rec, prev, &line, &len);
		if (r < 0)
			return r;
	}
	if (len - 1 > AUDIT_LINE_MAX)
		return -E2BIG;

	if (size > 0 && size + len > s->rotate_bytes) {
		r = rotate(s);
		if (r < 0)
			return r;
		fd = safe_close(fd);
		r = open_current(s, &fd);
		if (r < 0)
			return r;
	}
	r = loop_write(fd, line, len);
	if (r < 0)
		return r;
	return RET_NERRNO(fdatasync(fd));
}
