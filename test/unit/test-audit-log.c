/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit-log.h"
#include "digest.h"
#include "fileio.h"
#include "macros.h"
#include "tests.h"

#define RUN "mcp-notes-20261130T024520Z-a1b2c3"

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test-audit-log.XXXXXX");

	ASSERT_TRUE(d && mkdtemp(d));
	return d;
}

static char *join(const char *dir, const char *name)
{
	char *p = NULL;

	ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static json_t *event(const char *action, const char *decision, const char *target)
{
	return json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:s}}", "actor", "kind",
			 "agent", "id", "claude-desktop", "verifiedBy", "self-asserted", "action",
			 action, "decision", decision, "target", target, "meta", "runId", RUN,
			 "bridge", "0123456789abcdef");
}

static void append(AuditSink *s, json_t *ev)
{
	ASSERT_OK(audit_append(s, ev));
	json_decref(ev);
}

/* Every line of @path, parsed; a line that is not JSON becomes null. */
static json_t *lines(const char *path)
{
	_cleanup_free_ char *data = NULL;
	json_t *out = json_array();
	char *save = NULL;

	ASSERT_OK(read_full_file(path, 64 * 1024 * 1024, &data, NULL));
	for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		json_t *v = json_loads(l, 0, NULL);

		json_array_append_new(out, v ? v : json_null());
	}
	return out;
}

static AuditChain walk_ok(const char *path)
{
	_cleanup_free_ char *err = NULL;
	AuditChain c;
	int r = audit_chain_walk(path, NULL, NULL, &c, &err);

	if (r < 0)
		TEST_FAIL("walk %s: %d %s", path, r, err ? err : "");
	return c;
}

static char *walk_broken(const char *path)
{
	char *err = NULL;

	ASSERT_ERROR(audit_chain_walk(path, NULL, NULL, NULL, &err), EBADMSG);
	ASSERT_NOT_NULL(err);
	printf("# %s\n", err);
	return err;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

TEST(hash_formula_matches_an_independent_computation)
{
	/* The expected digest is Python's: hashlib.sha256((prev + json.dumps(ev,
	 * sort_keys=True, separators=(",", ":"), ensure_ascii=False)).encode()). */
	json_t *rec = json_loads(
		"{\"ts\":\"2026-11-30T02:45:20.123Z\",\"seq\":7,\"actor\":{\"kind\":\"agent\","
		"\"id\":\"claude-desktop\",\"verifiedBy\":\"self-asserted\"},\"action\":"
		"\"tool.call\",\"target\":\"notes.add_note\",\"decision\":\"denied\",\"reason\":"
		"\"BERTH CAPABILITY DENIAL \\u2014 \\u00e9\\n\\\"q\\\"\\u001B[0m\",\"durationMs\":42,"
		"\"meta\":{\"runId\":\"" RUN "\",\"bridge\":\"0123456789abcdef\",\"z\":[1,true,"
		"null,{\"b\":\"x\",\"a\":\"y\"}]},\"prevHash\":\"ignored\",\"hash\":\"ignored\"}",
		0, NULL);
	char prev[SHA256_HEX_LEN + 1], hex[SHA256_HEX_LEN + 1];

	ASSERT_NOT_NULL(rec);
	for (int i = 0; i < SHA256_HEX_LEN; i += 2)
		memcpy(prev + i, "ab", 2);
	prev[SHA256_HEX_LEN] = '\0';
	ASSERT_OK(audit_record_hash(rec, prev, hex));
	ASSERT_STREQ(hex, "4809b96d4427b2b7f0f608f82853463d56e6c241be6c6db20b5005f824fc1d11");
	json_object_set_new(rec, "durationMs", json_real(4.5));
	ASSERT_ERROR(audit_record_hash(rec, prev, hex), EDOM);
	json_decref(rec);
}

TEST(chain_of_appends)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "a/b/audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	char prev[SHA256_HEX_LEN + 1] = AUDIT_GENESIS_HASH, hex[SHA256_HEX_LEN + 1];
	json_t *ls, *rec;
	AuditChain c;
	struct stat st;
	size_t i;

	ASSERT_OK(audit_sink_open(path, false, &s));
	ASSERT_STREQ(audit_sink_path(s), path);
	append(s, json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:{s:s}}}", "actor", "kind",
			    "operator", "id", "me", "verifiedBy", "self-asserted", "action",
			    "sandbox.boot", "target", "container:berth-dev-notes", "decision",
			    "allowed", "meta", "runId", RUN, "evidence", "bootId", "b-1"));
	append(s, event("tool.call", "allowed", "notes.add_note"));
	rec = event("tool.call", "denied", "notes.write_file");
	json_object_set_new(rec, "reason", json_string("BERTH CAPABILITY DENIAL"));
	json_object_set_new(rec, "durationMs", json_integer(12));
	append(s, rec);

	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 3);
	json_array_foreach(ls, i, rec) {
		const char *ts = str(rec, "ts");

		ASSERT_EQ(json_integer_value(json_object_get(rec, "seq")), (long long)i + 1);
		ASSERT_STREQ(str(rec, "prevHash"), prev);
		ASSERT_OK(audit_record_hash(rec, prev, hex));
		ASSERT_STREQ(str(rec, "hash"), hex);
		memcpy(prev, hex, sizeof(prev));
		/* 2026-11-30T02:45:20.123Z */
		ASSERT_TRUE(ts && strlen(ts) == 24 && ts[10] == 'T' && ts[19] == '.' &&
			    ts[23] == 'Z');
	}
	ASSERT_STREQ(str(json_array_get(ls, 2), "decision"), "denied");
	ASSERT_EQ(json_integer_value(json_object_get(json_array_get(ls, 2), "durationMs")), 12);
	c = walk_ok(path);
	ASSERT_EQ(c.segments, 1);
	ASSERT_EQ(c.records, 3);
	ASSERT_EQ(c.torn_lines, 0);
	ASSERT_STREQ(c.head, prev);
	ASSERT_STREQ(c.anchor, AUDIT_GENESIS_HASH);

	/* Modes: the trail 0600, the directory it made 0700. */
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0600);
	ASSERT_OK(stat(dir, &st));
	{
		_cleanup_free_ char *d = join(dir, "a/b");

		ASSERT_OK(stat(d, &st));
		ASSERT_EQ(st.st_mode & 07777, 0700);
	}
	json_decref(ls);
	rm_rf(dir);
}

TEST(events_are_checked)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *ev;
	struct stat st;

	ASSERT_OK(audit_sink_open(path, true, &s));
	ev = event("tool.call", "maybe", "x");
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_set_new(ev, "decision", json_string("unavailable"));
	json_object_set_new(ev, "extra", json_true());
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_del(ev, "extra");
	json_object_set_new(ev, "durationMs", json_integer(-1));
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_set_new(ev, "durationMs", json_real(1.5));
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_del(ev, "durationMs");
	json_object_set_new(json_object_get(ev, "actor"), "verifiedBy", json_string("trust-me"));
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_set_new(json_object_get(ev, "actor"), "verifiedBy", json_string("token"));
	json_object_set_new(json_object_get(ev, "actor"), "id", json_string(""));
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_set_new(json_object_get(ev, "actor"), "id", json_string("a"));
	json_object_set_new(ev, "meta", json_string("not an object"));
	ASSERT_ERROR(audit_append(s, ev), EINVAL);
	json_object_del(ev, "meta");
	/* ts, seq, prevHash and hash are the sink's: given ones are replaced. */
	json_object_set_new(ev, "seq", json_integer(99));
	json_object_set_new(ev, "hash", json_string("x"));
	ASSERT_OK(audit_append(s, ev));
	ASSERT_OK(stat(path, &st));
	{
		json_t *ls = lines(path);

		ASSERT_EQ(json_array_size(ls), 1);
		ASSERT_EQ(json_integer_value(json_object_get(json_array_get(ls, 0), "seq")), 1);
		json_decref(ls);
	}
	ASSERT_EQ(walk_ok(path).records, 1);
	json_decref(ev);
	rm_rf(dir);
}

TEST(redaction)
{
	_cleanup_free_ char *s2048 = malloc(2049), *s2049 = malloc(2050), *e2049 = NULL;
	json_t *arr51 = json_array(), *arr50 = json_array(), *deep, *inner, *v, *r;
	json_t *a = json_object(), *b = json_object();

	memset(s2048, 'x', 2048);
	s2048[2048] = '\0';
	memset(s2049, 'x', 2049);
	s2049[2049] = '\0';
	e2049 = calloc(1, 2049 * 2 + 1);
	for (int i = 0; i < 2049; i++)
		memcpy(e2049 + 2 * i, "\xc3\xa9", 2); /* é: 2049 characters, 4098 bytes */
	for (int i = 0; i < 51; i++) {
		json_array_append_new(arr51, json_integer(i));
		if (i < 50)
			json_array_append_new(arr50, json_integer(i));
	}
	/* meta.d1.d2. ... .d9: 9 levels of objects. */
	deep = inner = json_object();
	for (int i = 2; i <= 9; i++) {
		json_t *n = json_object();
		char k[8];

		snprintf(k, sizeof(k), "d%d", i);
		json_object_set_new(inner, k, n);
		inner = n;
	}
	json_object_set_new(inner, "leaf", json_true());
	v = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, "
		      "s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:s}",
		      "runId", RUN, "Password", "p", "db_passwd", "p", "client-secret", "p",
		      "GitHub Token", "p", "x-apikey", "p", "API-KEY", "p", "Authorization", "p",
		      "author", "p", "credentials", "p", "Private Key", "p", "privatekey", "p",
		      "sessionId", "p", "Set-Cookie", "p", "signature", "p", "bridge",
		      "0123456789abcdef", "nested", "access-token", "p", "ok", "kept", "s2048",
		      s2048, "s2049", s2049, "e2049", e2049, "arr51", arr51, "arr50", arr50, "d1",
		      deep, "one", 1.0, "tenth", 0.1, "big", 1e300, "neg", -2.5, "via", "vm");
	ASSERT_NOT_NULL(v);
	/* An indirect cycle (jansson refuses only a direct one). */
	json_object_set(a, "b", b);
	json_object_set(b, "a", a);
	json_object_set(v, "cycle", a);

	r = audit_redact(v);
	ASSERT_NOT_NULL(r);
	{
		static const char *const gone[] = {"Password",	    "db_passwd",  "client-secret",
						   "GitHub Token",  "x-apikey",	  "API-KEY",
						   "Authorization", "author",	  "credentials",
						   "Private Key",   "privatekey", "sessionId",
						   "Set-Cookie",    "signature",  NULL};

		for (const char *const *k = gone; *k; k++) {
			printf("# %s\n", *k);
			ASSERT_STREQ(str(r, *k), "[redacted]");
		}
	}
	ASSERT_STREQ(str(r, "runId"), RUN);
	ASSERT_STREQ(str(r, "bridge"), "0123456789abcdef");
	ASSERT_STREQ(str(json_object_get(r, "nested"), "access-token"), "[redacted]");
	ASSERT_STREQ(str(json_object_get(r, "nested"), "ok"), "kept");
	ASSERT_STREQ(str(r, "s2048"), s2048);
	ASSERT_STREQ(str(r, "s2049"), "<2.0KB string, not captured>");
	ASSERT_STREQ(str(r, "e2049"), "<4.0KB string, not captured>");
	ASSERT_EQ(json_array_size(json_object_get(r, "arr51")), 51);
	ASSERT_EQ(json_integer_value(json_array_get(json_object_get(r, "arr51"), 49)), 49);
	ASSERT_STREQ(json_string_value(json_array_get(json_object_get(r, "arr51"), 50)),
		     "<1 more items>");
	ASSERT_TRUE(json_equal(json_object_get(r, "arr50"), arr50));
	/* meta is depth 0: d1 is 1, ..., d8 is 8 and is replaced. */
	inner = json_object_get(r, "d1");
	for (int i = 2; i <= 7; i++) {
		char k[8];

		snprintf(k, sizeof(k), "d%d", i);
		inner = json_object_get(inner, k);
		ASSERT_TRUE(json_is_object(inner));
	}
	ASSERT_STREQ(str(inner, "d8"), "<max depth>");
	ASSERT_TRUE(json_is_integer(json_object_get(r, "one")));
	ASSERT_EQ(json_integer_value(json_object_get(r, "one")), 1);
	ASSERT_STREQ(str(r, "tenth"), "0.1");
	ASSERT_STREQ(str(r, "big"), "1e+300");
	ASSERT_STREQ(str(r, "neg"), "-2.5");
	ASSERT_STREQ(str(json_object_get(json_object_get(r, "cycle"), "b"), "a"), "<circular>");
	/* The original is untouched. */
	ASSERT_STREQ(str(v, "Password"), "p");

	json_object_del(b, "a"); /* break the cycle so it can be freed */
	json_decref(a);
	json_decref(b);
	json_decref(r);
	json_decref(v);
}

TEST(payloads_captured_only_when_asked_and_redacted)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	AuditSink *s = NULL;
	json_t *ev, *ls, *rec;

	for (int capture = 0; capture <= 1; capture++) {
		ASSERT_OK(audit_sink_open(path, capture, &s));
		ev = event("tool.call", "allowed", "notes.add_note");
		json_object_set_new(
			ev, "input",
			json_pack("{s:s, s:s}", "text", "hello", "api_key", "sk-live-123"));
		json_object_set_new(ev, "output", json_pack("[i, f]", 1, 0.5));
		json_object_set_new(json_object_get(ev, "meta"), "session_token",
				    json_string("abc"));
		append(s, ev);
		s = audit_sink_free(s);
	}
	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 2);
	rec = json_array_get(ls, 0);
	ASSERT_TRUE(!json_object_get(rec, "input") && !json_object_get(rec, "output"));
	ASSERT_STREQ(str(json_object_get(rec, "meta"), "session_token"), "[redacted]");
	rec = json_array_get(ls, 1);
	ASSERT_STREQ(str(json_object_get(rec, "input"), "text"), "hello");
	ASSERT_STREQ(str(json_object_get(rec, "input"), "api_key"), "[redacted]");
	ASSERT_STREQ(json_string_value(json_array_get(json_object_get(rec, "output"), 1)), "0.5");
	ASSERT_TRUE(!strstr(json_dumps(ls, 0), "sk-live-123"));
	ASSERT_EQ(walk_ok(path).records, 2);
	json_decref(ls);
	rm_rf(dir);
}

/* A string of @n 'y's inside an array nested deep enough to stay under every redaction
 * cap: 50 × 50 strings of 2000 characters is about 5 MB. */
static json_t *huge(void)
{
	json_t *outer = json_array();
	char *s = malloc(2001);

	memset(s, 'y', 2000);
	s[2000] = '\0';
	for (int i = 0; i < 50; i++) {
		json_t *row = json_array();

		for (int j = 0; j < 50; j++)
			json_array_append_new(row, json_string(s));
		json_array_append_new(outer, row);
	}
	free(s);
	return outer;
}

TEST(line_cap)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *ev, *ls;

	ASSERT_OK(audit_sink_open(path, true, &s));
	ev = event("tool.call", "allowed", "notes.dump");
	json_object_set_new(ev, "output", huge());
	json_object_set_new(ev, "input", json_pack("{s:s}", "q", "small"));
	append(s, ev);
	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 1);
	ASSERT_TRUE(strstr(str(json_array_get(ls, 0), "output"), "line cap") != NULL);
	ASSERT_TRUE(strstr(str(json_array_get(ls, 0), "input"), "line cap") != NULL);
	json_decref(ls);

	/* A meta that large is refused, and nothing is written. */
	ev = event("tool.call", "allowed", "notes.dump");
	json_object_set_new(json_object_get(ev, "meta"), "rows", huge());
	ASSERT_ERROR(audit_append(s, ev), E2BIG);
	json_decref(ev);
	ASSERT_EQ(walk_ok(path).records, 1);
	rm_rf(dir);
}

TEST(resume_after_reopen_and_two_sinks)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	AuditSink *s = NULL, *t = NULL;
	json_t *ls;
	size_t i;
	json_t *rec;

	ASSERT_OK(audit_sink_open(path, false, &s));
	append(s, event("tool.call", "allowed", "a"));
	append(s, event("tool.call", "allowed", "b"));
	s = audit_sink_free(s);
	ASSERT_OK(audit_sink_open(path, false, &s));
	ASSERT_OK(audit_sink_open(path, false, &t));
	append(s, event("tool.call", "allowed", "c"));
	append(t, event("tool.call", "allowed", "d"));
	append(s, event("tool.call", "allowed", "e"));
	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 5);
	json_array_foreach(ls, i, rec)
		ASSERT_EQ(json_integer_value(json_object_get(rec, "seq")), (long long)i + 1);
	ASSERT_EQ(walk_ok(path).records, 5);
	json_decref(ls);
	audit_sink_free(s);
	audit_sink_free(t);
	rm_rf(dir);
}

TEST(concurrent_writers_do_not_fork_the_chain)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	const int writers = 4, each = 40;
	json_t *ls, *rec;
	size_t i;

	for (int w = 0; w < writers; w++) {
		pid_t pid = fork();

		ASSERT_TRUE(pid >= 0);
		if (pid == 0) {
			AuditSink *s = NULL;

			if (audit_sink_open(path, false, &s) < 0)
				_exit(1);
			/* Small segments, so rotations race with appends too. */
			audit_sink_set_rotate_bytes(s, 8 * 1024);
			for (int i2 = 0; i2 < each; i2++) {
				json_t *ev = event("tool.call", "allowed", "notes.add_note");
				int r = audit_append(s, ev);

				json_decref(ev);
				if (r < 0)
					_exit(1);
			}
			audit_sink_free(s);
			_exit(0);
		}
	}
	for (int w = 0; w < writers; w++) {
		int status = 0;

		ASSERT_TRUE(wait(&status) > 0);
		ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	{
		AuditChain c = walk_ok(path);

		/* 160 records of ~320 bytes in 8 KiB segments: some were rotated away. */
		printf("# %u segments, %llu records kept\n", c.segments,
		       (unsigned long long)c.records);
		ASSERT_EQ(c.segments, 6);
		ASSERT_EQ(c.torn_lines, 0);
	}
	/* The newest segment's seqs are consecutive and end at writers × each. */
	ls = lines(path);
	rec = json_array_get(ls, json_array_size(ls) - 1);
	ASSERT_EQ(json_integer_value(json_object_get(rec, "seq")), writers * each);
	json_array_foreach(ls, i, rec)
		if (i > 0)
			ASSERT_EQ(json_integer_value(json_object_get(rec, "seq")),
				  json_integer_value(
					  json_object_get(json_array_get(ls, i - 1), "seq")) +
					  1);
	json_decref(ls);
	rm_rf(dir);
}

TEST(torn_last_line)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	_cleanup_free_ char *data = NULL;
	json_t *ls;
	AuditChain c;
	int fd;

	ASSERT_OK(audit_sink_open(path, false, &s));
	append(s, event("tool.call", "allowed", "a"));
	append(s, event("tool.call", "allowed", "b"));
	s = audit_sink_free(s);
	/* A crash in the middle of the third append. */
	fd = open(path, O_WRONLY | O_APPEND);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(loop_write(fd, "{\"ts\":\"2026-", 12));
	close(fd);
	c = walk_ok(path);
	ASSERT_EQ(c.records, 2);
	ASSERT_EQ(c.torn_lines, 1);

	ASSERT_OK(audit_sink_open(path, false, &s));
	ASSERT_OK(read_full_file(path, 1 << 20, &data, NULL));
	ASSERT_TRUE(strlen(data) > 0 && data[strlen(data) - 1] == '\n');
	ASSERT_TRUE(strstr(data, "{\"ts\":\"2026-\n") != NULL);
	append(s, event("tool.call", "allowed", "c"));
	c = walk_ok(path);
	ASSERT_EQ(c.records, 3);
	ASSERT_EQ(c.torn_lines, 1);
	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 4);
	ASSERT_TRUE(json_is_null(json_array_get(ls, 2)));
	ASSERT_EQ(json_integer_value(json_object_get(json_array_get(ls, 3), "seq")), 3);
	ASSERT_STREQ(str(json_array_get(ls, 3), "prevHash"), str(json_array_get(ls, 1), "hash"));
	json_decref(ls);
	rm_rf(dir);
}

TEST(mode_tightened_when_loose)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	_cleanup_free_ char *lock = join(dir, "audit.jsonl.lock");
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT, 0644);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(fchmod(fd, 0644));
	close(fd);
	ASSERT_OK(audit_sink_open(path, false, &s));
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0600);
	ASSERT_OK(stat(lock, &st));
	ASSERT_EQ(st.st_mode & 07777, 0600);
	/* Loosened while the sink is open: the next append tightens it again. */
	ASSERT_OK(chmod(path, 0666));
	append(s, event("tool.call", "allowed", "a"));
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0600);
	s = audit_sink_free(s);

	/* Not a regular file, or a symlink: refused. */
	unlink(path);
	ASSERT_OK(symlink("/etc/passwd", path));
	ASSERT_ERROR(audit_sink_open(path, false, &s), ELOOP);
	unlink(path);
	ASSERT_OK(mkfifo(path, 0600));
	ASSERT_ERROR(audit_sink_open(path, false, &s), EBADFD);
	rm_rf(dir);
}

TEST(rotation)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	char seg[512];
	json_t *cur, *one;
	AuditChain c;
	struct stat st;

	ASSERT_OK(audit_sink_open(path, false, &s));
	audit_sink_set_rotate_bytes(s, 1000);
	/* ~330-byte records: two a segment. Five appends make .1 and .2 and no drop. */
	for (int i = 0; i < 5; i++)
		append(s, event("tool.call", "allowed", "notes.add_note"));
	snprintf(seg, sizeof(seg), "%s.2", path);
	ASSERT_OK(stat(seg, &st));
	ASSERT_EQ(st.st_mode & 07777, 0600);
	c = walk_ok(path);
	ASSERT_EQ(c.segments, 3);
	ASSERT_EQ(c.records, 5);
	ASSERT_STREQ(c.anchor, AUDIT_GENESIS_HASH);

	/* The chain runs on across segments. */
	snprintf(seg, sizeof(seg), "%s.1", path);
	one = lines(seg);
	cur = lines(path);
	ASSERT_STREQ(str(json_array_get(cur, 0), "prevHash"),
		     str(json_array_get(one, json_array_size(one) - 1), "hash"));
	json_decref(one);
	json_decref(cur);

	/* Enough to drop segments: .1 … .5 and the current one remain, anchored. */
	for (int i = 0; i < 20; i++)
		append(s, event("tool.call", "allowed", "notes.add_note"));
	snprintf(seg, sizeof(seg), "%s.5", path);
	ASSERT_OK(stat(seg, &st));
	snprintf(seg, sizeof(seg), "%s.6", path);
	ASSERT_TRUE(stat(seg, &st) < 0 && errno == ENOENT);
	c = walk_ok(path);
	ASSERT_EQ(c.segments, 6);
	ASSERT_TRUE(c.records < 25 && c.records >= 11);
	ASSERT_FALSE(streq(c.anchor, AUDIT_GENESIS_HASH));
	cur = lines(path);
	ASSERT_EQ(json_integer_value(
			  json_object_get(json_array_get(cur, json_array_size(cur) - 1), "seq")),
		  25);
	json_decref(cur);

	/* A dropped middle segment breaks the chain. */
	snprintf(seg, sizeof(seg), "%s.3", path);
	ASSERT_OK(unlink(seg));
	free(walk_broken(path));
	rm_rf(dir);
}

/* Replace the first occurrence of @from in line @n (from 1) of @path by @to. */
static void edit_line(const char *path, int n, const char *from, const char *to)
{
	_cleanup_free_ char *data = NULL, *out = NULL;
	char *line = NULL, *p;
	size_t len = 0;
	FILE *f;

	ASSERT_OK(read_full_file(path, 64 << 20, &data, &len));
	line = data;
	for (int i = 1; i < n; i++) {
		line = strchr(line, '\n');
		ASSERT_NOT_NULL(line);
		line++;
	}
	p = strstr(line, from);
	ASSERT_NOT_NULL(p);
	*p = '\0';
	ASSERT_TRUE(asprintf(&out, "%s%s%s", data, to, p + strlen(from)) > 0);
	f = fopen(path, "w");
	fputs(out, f);
	fclose(f);
}

TEST(walker_finds_tampering)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_free_ char *orig = NULL, *big = NULL;
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	char *err;
	FILE *f;

	ASSERT_OK(audit_sink_open(path, false, &s));
	for (int i = 0; i < 4; i++)
		append(s, event("tool.call", i == 2 ? "denied" : "allowed", "notes.add_note"));
	ASSERT_OK(read_full_file(path, 1 << 20, &orig, NULL));

	/* One record's decision changed. */
	edit_line(path, 3, "\"denied\"", "\"allowed\"");
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "audit.jsonl: BROKEN at record 3 — hash ") != NULL);
	free(err);

	/* A record removed from the middle. */
	write_file_atomic(path, orig, strlen(orig), 0600);
	{
		char *l2 = strchr(orig, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
		_cleanup_free_ char *cut = NULL;

		ASSERT_TRUE(asprintf(&cut, "%.*s%s", (int)(l2 - orig), orig, l3) > 0);
		write_file_atomic(path, cut, strlen(cut), 0600);
	}
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "BROKEN at record 2 — prevHash") != NULL);
	free(err);

	/* JSON that is not a record, a record without hashes, a real number. */
	write_file_atomic(path, orig, strlen(orig), 0600);
	f = fopen(path, "a");
	fputs("[1,2]\n", f);
	fclose(f);
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "BROKEN at record 5 — the line is JSON but not a record") != NULL);
	free(err);
	write_file_atomic(path, orig, strlen(orig), 0600);
	edit_line(path, 1, "\"seq\":1", "\"seq\":1.0");
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "BROKEN at record 1 — it holds a non-integer number") != NULL);
	free(err);
	write_file_atomic(path, orig, strlen(orig), 0600);
	edit_line(path, 2, "\"prevHash\"", "\"prevHasj\"");
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "BROKEN at record 2 — no valid prevHash/hash") != NULL);
	free(err);

	/* A line over the cap is a broken record, read without holding it all. */
	write_file_atomic(path, orig, strlen(orig), 0600);
	big = malloc(AUDIT_LINE_MAX + 100);
	memset(big, 'z', AUDIT_LINE_MAX + 98);
	big[AUDIT_LINE_MAX + 98] = '\n';
	big[AUDIT_LINE_MAX + 99] = '\0';
	f = fopen(path, "a");
	fputs(big, f);
	fclose(f);
	err = walk_broken(path);
	ASSERT_TRUE(strstr(err, "BROKEN at record 5 — the line is longer than the 1 MiB") != NULL);
	free(err);

	/* Garbage between records is a torn write: skipped, the chain still holds. */
	write_file_atomic(path, orig, strlen(orig), 0600);
	edit_line(path, 2, "{", "{\"torn\n{");
	{
		AuditChain c = walk_ok(path);

		ASSERT_EQ(c.records, 4);
		ASSERT_EQ(c.torn_lines, 1);
	}
	rm_rf(dir);
}

TEST(last_record_found_behind_torn_lines_and_in_rotated_segments)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_free_ char *one = join(dir, "audit.jsonl.1"), *junk = NULL;
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *ls;
	AuditChain c;
	FILE *f;

	ASSERT_OK(audit_sink_open(path, false, &s));
	append(s, event("tool.call", "allowed", "a"));
	append(s, event("tool.call", "allowed", "b"));
	/* Five torn lines of almost 1 MiB each: more than the sink looks back through before
	 * it reads the whole segment. */
	junk = malloc(AUDIT_LINE_MAX);
	memset(junk, 'z', AUDIT_LINE_MAX - 1);
	junk[AUDIT_LINE_MAX - 1] = '\0';
	f = fopen(path, "a");
	for (int i = 0; i < 5; i++)
		fprintf(f, "{%s\n", junk);
	fclose(f);
	append(s, event("tool.call", "allowed", "c"));
	c = walk_ok(path);
	ASSERT_EQ(c.records, 3);
	ASSERT_EQ(c.torn_lines, 5);

	/* Rotated away with nothing after it yet (a crash between the rename and the write):
	 * the next record chains to the newest rotated one. */
	ASSERT_OK(rename(path, one));
	append(s, event("tool.call", "allowed", "d"));
	ls = lines(path);
	ASSERT_EQ(json_array_size(ls), 1);
	ASSERT_EQ(json_integer_value(json_object_get(json_array_get(ls, 0), "seq")), 4);
	json_decref(ls);
	c = walk_ok(path);
	ASSERT_EQ(c.segments, 2);
	ASSERT_EQ(c.records, 4);
	rm_rf(dir);
}

static int count_record(const char *segment, uint64_t line, json_t *rec, void *userdata)
{
	int *n = userdata;

	ASSERT_TRUE(json_is_object(rec));
	ASSERT_EQ(line, (uint64_t)*n + 1);
	(*n)++;
	return *n == 2 ? -ECANCELED : 0;
}

TEST(walker_callbacks_and_missing_trail)
{
	_cleanup_free_ char *dir = tmpdir(), *path = join(dir, "audit.jsonl");
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	static const AuditWalkOps ops = {.record = count_record};
	AuditChain c;
	int n = 0;

	c = walk_ok(path);
	ASSERT_EQ(c.segments, 0);
	ASSERT_EQ(c.records, 0);
	ASSERT_STREQ(c.head, AUDIT_GENESIS_HASH);
	ASSERT_OK(audit_sink_open(path, false, &s));
	for (int i = 0; i < 3; i++)
		append(s, event("tool.call", "allowed", "x"));
	ASSERT_ERROR(audit_chain_walk(path, &ops, &n, &c, NULL), ECANCELED);
	ASSERT_EQ(n, 2);
	rm_rf(dir);
}

TEST(default_path)
{
	_cleanup_free_ char *p = NULL;

	setenv("BERTH_AUDIT_PATH", "/somewhere/trail.jsonl", 1);
	p = audit_default_path();
	ASSERT_STREQ(p, "/somewhere/trail.jsonl");
	free(p);
	setenv("BERTH_AUDIT_PATH", "", 1);
	setenv("BERTH_HOME", "/home/x/.berth", 1);
	p = audit_default_path();
	ASSERT_STREQ(p, "/home/x/.berth/audit/audit.jsonl");
}

int main(void)
{
	return tests_run();
}
