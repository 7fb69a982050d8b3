/* SPDX-License-Identifier: Apache-2.0 */
/* berth attest <runId> for a berth mcp run: the boot found through the audit trail. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attest.h"
#include "audit-log.h"
#include "fileio.h"
#include "macros.h"
#include "tests.h"

#define BOOT "0b0e4c3a-1111-2222-3333-444455556666"
#define BOOT2 "7d1f0000-aaaa-bbbb-cccc-ddddeeeeffff"
#define RUN "mcp-notes-20261130T024520Z-a1b2c3"
#define ROOTFS "46084b330b15e7690859a91b6c23778f3cd3da1b880408f630d765aa514fa864"
#define KERNEL "7c1eeb3d74fe3ae2160a0e6bdfcaafc3863d13a6cd9ef6cdedf839a2e24809c8"
#define POLICY "606a162861673ba94b66639b72b7483628c1d1501f6d2477450aa1cdb22bebe7"

typedef struct Home {
	char *dir, *runs, *trail;
} Home;

/* A temporary BERTH_HOME with runs/<BOOT>/evidence.json: a pinned kernel, landlock among
 * the LSMs, notes FullyEnforced. */
static Home home_new(void)
{
	Home h = {};
	_cleanup_free_ char *edir = NULL, *epath = NULL, *text = NULL;
	json_t *ev;

	h.dir = strdup("/tmp/test-attest-run.XXXXXX");
	ASSERT_TRUE(mkdtemp(h.dir));
	ASSERT_TRUE(asprintf(&h.runs, "%s/runs", h.dir) > 0);
	ASSERT_TRUE(asprintf(&h.trail, "%s/audit/audit.jsonl", h.dir) > 0);
	ASSERT_TRUE(asprintf(&edir, "%s/%s", h.runs, BOOT) > 0);
	ASSERT_OK(mkdir_p(edir, 0700));
	ASSERT_TRUE(asprintf(&epath, "%s/evidence.json", edir) > 0);
	ev = json_pack(
		"{s:i, s:s, s:s, s:s, s:[{s:s, s:s, s:i}, {s:s, s:s, s:s, s:s}, "
		"{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}], "
		"s:{s:s, s:s, s:s, s:[], s:{s:i, s:i, s:i, s:b}, s:{s:{s:s, s:b}, s:{s:s, s:b}}}}",
		"schema", 1, "kind", "berth.boot-evidence", "bootId", BOOT, "final", "stopped",
		"events", "event", "boot_start", "lsm", "landlock,yama", "landlockAbi", 6, "event",
		"policy_compiled", "app", "notes", "path", "/run/berth/policy/notes.json", "sha256",
		POLICY, "event", "agent_init_report", "app", "notes", "report", "event",
		"capability_policy_applied", "bootId", BOOT, "app", "notes", "ruleset",
		"FullyEnforced", "source", "agent-init", "vm", "name", "berth-dev-notes", "engine",
		"qemu", "accelerator", "tcg", "apps", "vmConfig", "cpus", 2, "memMiB", 512, "nics",
		0, "tsi", 0, "measurements", "kernel", "sha256", KERNEL, "pinned", 1, "rootfs",
		"sha256", ROOTFS, "pinned", 1);
	ASSERT_NOT_NULL(ev);
	text = json_dumps(ev, JSON_INDENT(2));
	ASSERT_OK(write_file_atomic(epath, text, strlen(text), 0600));
	json_decref(ev);
	return h;
}

static void home_free(Home *h)
{
	rm_rf(h->dir);
	free(h->dir);
	free(h->runs);
	free(h->trail);
}

/* berth mcp's session record (SPEC §3.5). */
static void boot_record(AuditSink *s, const char *run, const char *boot, const char *digest)
{
	json_t *ev =
		json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, "
			  "s:s, s:s}}}",
			  "actor", "kind", "operator", "id", "me", "verifiedBy", "self-asserted",
			  "action", "sandbox.boot", "target", "container:berth-dev-notes",
			  "decision", "allowed", "meta", "runId", run, "bridge", "0123456789abcdef",
			  "evidence", "bootId", boot, "containerName", "berth-dev-notes",
			  "imageTag", "rootfs-46084b330b15.erofs", "imageDigest", digest);

	ASSERT_OK(audit_append(s, ev));
	json_decref(ev);
}

static void call_record(AuditSink *s, const char *run)
{
	json_t *ev = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:I, s:{s:s}}", "actor", "kind",
			       "agent", "id", "claude", "verifiedBy", "self-asserted", "action",
			       "tool.call", "target", "notes.add_note", "decision", "allowed",
			       "durationMs", (json_int_t)5, "meta", "runId", run);

	ASSERT_OK(audit_append(s, ev));
	json_decref(ev);
}

static int verify_count(json_t *rec)
{
	json_t *problems = NULL, *p;
	size_t i;
	int n = attest_verify(rec, &problems);

	json_array_foreach(problems, i, p)
		printf("#   %s: %s\n", json_string_value(json_object_get(p, "code")),
		       json_string_value(json_object_get(p, "message")));
	json_decref(problems);
	return n;
}

TEST(mcp_run_id_attests_its_boot)
{
	Home h = home_new();
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *rec = NULL, *run, *boot;
	char *err = NULL;

	ASSERT_OK(audit_sink_open(h.trail, false, &s));
	call_record(s, "some-other-run");
	boot_record(s, RUN, BOOT, "sha256:" ROOTFS);
	call_record(s, RUN);
	call_record(s, "some-other-run");
	call_record(s, RUN);

	ASSERT_OK(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err));
	ASSERT_STREQ(json_string_value(json_object_get(rec, "runId")), RUN);
	boot = json_object_get(rec, "boot");
	ASSERT_STREQ(json_string_value(json_object_get(boot, "bootId")), BOOT);
	ASSERT_STREQ(json_string_value(json_object_get(boot, "imageDigest")), "sha256:" ROOTFS);
	run = json_object_get(rec, "run");
	ASSERT_EQ(json_integer_value(json_object_get(run, "records")), 3);
	ASSERT_EQ(json_integer_value(json_object_get(run, "firstSeq")), 2);
	ASSERT_EQ(json_integer_value(json_object_get(run, "lastSeq")), 5);
	ASSERT_EQ(json_integer_value(
			  json_object_get(json_object_get(rec, "auditChain"), "totalRecords")),
		  5);
	ASSERT_STREQ(
		json_string_value(json_object_get(json_object_get(rec, "enforcement"), "status")),
		"ACTIVE");
	ASSERT_EQ(verify_count(rec), 0);

	/* A run other than its boot, with no records to tie it there, does not verify. */
	json_object_set_new(run, "records", json_integer(0));
	json_object_del(run, "firstSeq");
	json_object_del(run, "lastSeq");
	json_object_del(run, "firstTs");
	json_object_del(run, "lastTs");
	{
		char hex[SHA256_HEX_LEN + 1];

		ASSERT_OK(attest_canonical_sha256(rec, hex));
		json_object_set_new(rec, "recordSha256", json_string(hex));
	}
	ASSERT_EQ(verify_count(rec), 1);
	json_decref(rec);
	rec = NULL;

	/* The boot id itself still works, as before. */
	ASSERT_OK(attest_run_record(h.runs, h.trail, BOOT, "2026-11-30T02:45:20Z", &rec, &err));
	ASSERT_STREQ(json_string_value(json_object_get(rec, "runId")), BOOT);
	ASSERT_EQ(json_integer_value(json_object_get(json_object_get(rec, "run"), "records")), 0);
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
	home_free(&h);
}

TEST(run_spanning_boots_is_refused)
{
	Home h = home_new();
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *rec = NULL;
	char *err = NULL;

	ASSERT_OK(audit_sink_open(h.trail, false, &s));
	boot_record(s, RUN, BOOT, "sha256:" ROOTFS);
	call_record(s, RUN);
	boot_record(s, RUN, BOOT, "sha256:" ROOTFS); /* the same boot again: fine */
	boot_record(s, RUN, BOOT2, "sha256:" ROOTFS);
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     ENOTUNIQ);
	printf("# %s\n", err);
	ASSERT_TRUE(strstr(err, "run id " RUN " spans boots " BOOT ", " BOOT2) != NULL);
	ASSERT_TRUE(rec == NULL);
	free(err);
	home_free(&h);
}

TEST(unknown_run_and_boot_without_evidence)
{
	Home h = home_new();
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *rec = NULL;
	char *err = NULL;

	/* No trail at all. */
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     ENOENT);
	printf("# %s\n", err);
	ASSERT_TRUE(strstr(err, "runs/" RUN "/evidence.json does not exist") != NULL);
	free(TAKE_PTR(err));

	/* Records of the run, but no sandbox.boot record. */
	ASSERT_OK(audit_sink_open(h.trail, false, &s));
	call_record(s, RUN);
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     ENOENT);
	free(TAKE_PTR(err));

	/* A boot that has not ended: no evidence yet. */
	boot_record(s, RUN, BOOT2, "sha256:" ROOTFS);
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     ENODATA);
	printf("# %s\n", err);
	ASSERT_TRUE(strstr(err, "ran in boot " BOOT2) != NULL);
	free(TAKE_PTR(err));
	home_free(&h);
}

TEST(session_image_must_be_the_measured_one)
{
	Home h = home_new();
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	json_t *rec = NULL;
	char *err = NULL;

	ASSERT_OK(audit_sink_open(h.trail, false, &s));
	boot_record(s, RUN, BOOT, "sha256:" KERNEL);
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     EINVAL);
	printf("# %s\n", err);
	ASSERT_TRUE(strstr(err, "but its evidence measured sha256:" ROOTFS) != NULL);
	free(err);
	home_free(&h);
}

TEST(broken_trail_refuses_the_run)
{
	Home h = home_new();
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	_cleanup_free_ char *data = NULL;
	json_t *rec = NULL;
	char *err = NULL, *p;

	ASSERT_OK(audit_sink_open(h.trail, false, &s));
	boot_record(s, RUN, BOOT, "sha256:" ROOTFS);
	call_record(s, RUN);
	ASSERT_OK(read_full_file(h.trail, 1 << 20, &data, NULL));
	p = strstr(data, "\"claude\"");
	ASSERT_NOT_NULL(p);
	memcpy(p, "\"clause\"", 8);
	ASSERT_OK(write_file_atomic(h.trail, data, strlen(data), 0600));
	ASSERT_ERROR(attest_run_record(h.runs, h.trail, RUN, "2026-11-30T02:45:20Z", &rec, &err),
		     EBADMSG);
	printf("# %s\n", err);
	ASSERT_TRUE(strstr(err, "audit.jsonl: BROKEN at record 2") != NULL);
	free(err);
	home_free(&h);
}

int main(void)
{
	return tests_run();
}
