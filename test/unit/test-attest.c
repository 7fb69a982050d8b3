/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attest.h"
#include "digest.h"
#include "macros.h"
#include "tests.h"

#define BOOT "0b0e4c3a-1111-2222-3333-444455556666"
#define ROOTFS "46084b330b15e7690859a91b6c23778f3cd3da1b880408f630d765aa514fa864"
#define KERNEL "7c1eeb3d74fe3ae2160a0e6bdfcaafc3863d13a6cd9ef6cdedf839a2e24809c8"
#define POLICY "606a162861673ba94b66639b72b7483628c1d1501f6d2477450aa1cdb22bebe7"
#define LSM_OK "lockdown,capability,landlock,yama"

static json_t *report(const char *app, const char *ruleset, const char *boot)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:i}}", "event",
			 "agent_init_report", "app", app, "report", "source", "agent-init", "event",
			 "capability_policy_applied", "bootId", boot, "app", app, "ruleset",
			 ruleset, "timestamp", 1796006571);
}

/* A small evidence.json: one or two apps, a pinned kernel, landlock among the LSMs. */
static json_t *evidence(bool pinned, const char *lsm, json_t *reports)
{
	json_t *events = json_array(), *r;
	size_t i;

	if (lsm)
		json_array_append_new(events,
				      json_pack("{s:s, s:s, s:s, s:i}", "event", "boot_start",
						"kernel", "6.12", "lsm", lsm, "landlockAbi", 6));
	json_array_append_new(events,
			      json_pack("{s:s, s:s, s:s, s:s, s:i}", "event", "policy_compiled",
					"app", "notes", "path", "/run/berth/policy/notes.json",
					"sha256", POLICY, "bytes", 291));
	json_array_foreach(reports, i, r)
		json_array_append(events, r);
	json_decref(reports);
	return json_pack("{s:i, s:s, s:s, s:s, s:o, s:{s:s, s:s, s:s, "
			 "s:[{s:i, s:s, s:s, s:i, s:i}], s:{s:i, s:i, s:i, s:b}, "
			 "s:{s:{s:s, s:b, s:s, s:s}, s:{s:s, s:b, s:s, s:b}}, s:{s:s, s:b, s:i}}}",
			 "schema", 1, "kind", "berth.boot-evidence", "bootId", BOOT, "final",
			 "stopped", "events", events, "vm", "name", "t", "engine", "qemu",
			 "accelerator", "tcg", "apps", "index", 0, "name", "notes", "treeSha256",
			 POLICY, "files", 4, "bytes", 1000, "vmConfig", "cpus", 2, "memMiB", 512,
			 "nics", 0, "tsi", 0, "measurements", "kernel", "sha256", KERNEL, "pinned",
			 pinned, "linux", "6.12", "cmdline", "console=ttyS0", "rootfs", "sha256",
			 ROOTFS, "pinned", 1, "fstype", "erofs", "readOnly", 1, "hostSandbox",
			 "kind", "landlock+seccomp", "applied", 1, "abi", 7);
}

static json_t *build(json_t *ev)
{
	json_t *chain = json_pack("{s:s, s:i, s:i, s:s}", "path", "/nonexistent", "segments", 0,
				  "totalRecords", 0, "head", ATTEST_GENESIS_HASH);
	json_t *run = json_pack("{s:i}", "records", 0), *rec = NULL;
	char *err = NULL;

	ASSERT_OK(attest_record_build(ev, chain, run, "2026-11-30T02:45:20Z", &rec, &err));
	json_decref(chain);
	json_decref(run);
	json_decref(ev);
	return rec;
}

static const char *status_of(json_t *rec)
{
	return json_string_value(json_object_get(json_object_get(rec, "enforcement"), "status"));
}

static json_t *reasons_of(json_t *rec)
{
	return json_object_get(json_object_get(rec, "enforcement"), "reasons");
}

static int verify_count(json_t *rec)
{
	json_t *problems = NULL;
	int n = attest_verify(rec, &problems);

	json_decref(problems);
	return n;
}

static bool verify_has(json_t *rec, const char *code)
{
	json_t *problems = NULL, *p;
	bool found = false;
	size_t i;

	ASSERT_OK(attest_verify(rec, &problems));
	json_array_foreach(problems, i, p) {
		printf("#   %s: %s\n", json_string_value(json_object_get(p, "code")),
		       json_string_value(json_object_get(p, "message")));
		if (streq(json_string_value(json_object_get(p, "code")), code))
			found = true;
	}
	json_decref(problems);
	return found;
}

/* Change a field, then put a recordSha256 on that matches the change: only the derived
 * checks can catch it. */
static void reseal(json_t *rec)
{
	char hex[SHA256_HEX_LEN + 1];

	ASSERT_OK(attest_canonical_sha256(rec, hex));
	json_object_set_new(rec, "recordSha256", json_string(hex));
}

TEST(active_when_fully_enforced_and_probe_enforcing)
{
	json_t *rec = build(evidence(true, LSM_OK,
				     json_pack("[o, o, o]", report("notes", "FullyEnforced", BOOT),
					       report("notes", "PartiallyEnforced", BOOT),
					       report("other", "FullyEnforced", "elsewhere"))));
	json_t *reps = json_object_get(json_object_get(rec, "enforcement"), "rulesetReports");

	ASSERT_STREQ(status_of(rec), "ACTIVE");
	ASSERT_EQ(json_array_size(reasons_of(rec)), 0);
	/* The first report per app of this boot only. */
	ASSERT_EQ(json_array_size(reps), 1);
	ASSERT_STREQ(json_string_value(json_object_get(json_array_get(reps, 0), "ruleset")),
		     "FullyEnforced");
	ASSERT_STREQ(json_string_value(json_object_get(
			     json_object_get(json_object_get(rec, "enforcement"), "doctorProbe"),
			     "status")),
		     "enforcing");
	ASSERT_STREQ(json_string_value(json_object_get(json_object_get(rec, "boot"), "imageTag")),
		     "rootfs-46084b330b15.erofs");
	ASSERT_STREQ(
		json_string_value(json_object_get(json_object_get(rec, "boot"), "imageDigest")),
		"sha256:" ROOTFS);
	ASSERT_STREQ(json_string_value(json_object_get(
			     json_array_get(json_object_get(rec, "policies"), 0), "sha256")),
		     POLICY);
	ASSERT_EQ(json_integer_value(json_object_get(
			  json_object_get(json_object_get(rec, "boot"), "isolation"), "nics")),
		  0);
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

TEST(partially_enforced_is_not_enforced)
{
	json_t *rec = build(evidence(true, LSM_OK,
				     json_pack("[o]", report("notes", "PartiallyEnforced", BOOT))));

	ASSERT_STREQ(status_of(rec), "NOT_ENFORCED");
	ASSERT_EQ(json_array_size(reasons_of(rec)), 1);
	ASSERT_STREQ(json_string_value(json_array_get(reasons_of(rec), 0)),
		     "agent-init reported PartiallyEnforced for app \"notes\"");
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

TEST(no_reports_is_undetermined)
{
	json_t *rec = build(evidence(true, LSM_OK, json_array()));

	ASSERT_STREQ(status_of(rec), "UNDETERMINED");
	ASSERT_STREQ(json_string_value(json_array_get(reasons_of(rec), 0)),
		     "no capability_policy_applied report found for this boot");
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

TEST(unpinned_kernel_probe_unsupported)
{
	json_t *rec = build(
		evidence(false, LSM_OK, json_pack("[o]", report("notes", "FullyEnforced", BOOT))));
	json_t *probe = json_object_get(json_object_get(rec, "enforcement"), "doctorProbe");

	ASSERT_STREQ(json_string_value(json_object_get(probe, "status")), "unsupported");
	ASSERT_STREQ(status_of(rec), "NOT_ENFORCED");
	ASSERT_STREQ(json_string_value(json_array_get(reasons_of(rec), 0)),
		     "doctor probe: unsupported (the guest kernel is not the pinned kernel)");
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

TEST(no_landlock_lsm_unsupported_and_no_boot_start_unknown)
{
	json_t *rec = build(evidence(true, "capability,yama",
				     json_pack("[o]", report("notes", "FullyEnforced", BOOT))));

	ASSERT_STREQ(status_of(rec), "NOT_ENFORCED");
	json_decref(rec);
	rec = build(evidence(true, NULL, json_pack("[o]", report("notes", "FullyEnforced", BOOT))));
	ASSERT_STREQ(status_of(rec), "UNDETERMINED");
	ASSERT_STREQ(json_string_value(json_array_get(reasons_of(rec), 0)),
		     "doctor probe result unavailable for this boot");
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

TEST(record_sha_stable_across_key_order)
{
	json_t *a = json_pack("{s:i, s:{s:s, s:[i, i]}, s:s}", "z", 1, "m", "b", "x", "a", 2, 3,
			      "a", "é\n\"");
	json_t *b = json_pack("{s:s, s:{s:[i, i], s:s}, s:i, s:s}", "a", "é\n\"", "m", "a", 2, 3,
			      "b", "x", "z", 1, "recordSha256", "ignored");
	char ha[SHA256_HEX_LEN + 1], hb[SHA256_HEX_LEN + 1], want[SHA256_HEX_LEN + 1];
	const char *canon = "{\"a\":\"é\\n\\\"\",\"m\":{\"a\":[2,3],\"b\":\"x\"},\"z\":1}";

	ASSERT_OK(attest_canonical_sha256(a, ha));
	ASSERT_OK(attest_canonical_sha256(b, hb));
	ASSERT_OK(sha256_buffer_hex(canon, strlen(canon), want));
	ASSERT_STREQ(ha, hb);
	ASSERT_STREQ(ha, want);
	json_object_set_new(a, "f", json_real(1.5));
	ASSERT_ERROR(attest_canonical_sha256(a, ha), EDOM);
	json_decref(a);
	json_decref(b);
}

static json_t *good(void)
{
	return build(
		evidence(true, LSM_OK, json_pack("[o]", report("notes", "FullyEnforced", BOOT))));
}

TEST(verify_catches_tampering)
{
	json_t *rec = good(), *enf;

	/* Status flipped, digest left: both caught. */
	enf = json_object_get(rec, "enforcement");
	json_object_set_new(enf, "status", json_string("NOT_ENFORCED"));
	ASSERT_TRUE(verify_has(rec, "digest-mismatch"));
	ASSERT_TRUE(verify_has(rec, "enforcement-status-underived"));
	/* Resealed: the derivation still catches it. */
	reseal(rec);
	ASSERT_FALSE(verify_has(rec, "digest-mismatch"));
	ASSERT_TRUE(verify_has(rec, "enforcement-status-underived"));
	json_decref(rec);

	/* A PartiallyEnforced record turned ACTIVE by editing its report and status. */
	rec = build(evidence(true, LSM_OK,
			     json_pack("[o]", report("notes", "PartiallyEnforced", BOOT))));
	enf = json_object_get(rec, "enforcement");
	json_object_set_new(enf, "status", json_string("ACTIVE"));
	reseal(rec);
	ASSERT_TRUE(verify_has(rec, "enforcement-status-underived"));
	json_decref(rec);

	/* A policy sha flipped. */
	rec = good();
	json_object_set_new(
		json_array_get(json_object_get(rec, "policies"), 0), "sha256",
		json_string("706a162861673ba94b66639b72b7483628c1d1501f6d2477450aa1cdb22bebe7"));
	ASSERT_TRUE(verify_has(rec, "digest-mismatch"));
	json_object_set_new(json_array_get(json_object_get(rec, "policies"), 0), "sha256",
			    json_string("not-hex"));
	ASSERT_TRUE(verify_has(rec, "policy-digest-invalid"));
	json_decref(rec);

	/* The image digest no longer names the measured rootfs. */
	rec = good();
	json_object_set_new(json_object_get(rec, "boot"), "imageDigest",
			    json_string("sha256:" KERNEL));
	reseal(rec);
	ASSERT_TRUE(verify_has(rec, "digest-mismatch"));
	json_object_del(json_object_get(rec, "boot"), "imageDigest");
	ASSERT_TRUE(verify_has(rec, "image-digest-missing"));
	json_decref(rec);

	/* A report from another boot. */
	rec = good();
	json_object_set_new(
		json_array_get(
			json_object_get(json_object_get(rec, "enforcement"), "rulesetReports"), 0),
		"bootId", json_string("another-boot"));
	reseal(rec);
	ASSERT_TRUE(verify_has(rec, "boot-id-inconsistent"));
	json_decref(rec);

	/* The probe claims enforcing for an unpinned kernel. */
	rec = good();
	json_object_set_new(
		json_object_get(json_object_get(json_object_get(rec, "boot"), "isolation"),
				"kernel"),
		"pinned", json_false());
	reseal(rec);
	ASSERT_TRUE(verify_has(rec, "doctor-probe-invalid"));
	json_decref(rec);

	/* Shapes and the fixed fields. */
	rec = good();
	json_object_set_new(rec, "schemaVersion", json_integer(2));
	json_object_set_new(rec, "kind", json_string("x"));
	json_object_set_new(rec, "runId", json_string(""));
	json_object_del(rec, "trustModel");
	json_object_set_new(rec, "generatedAt", json_string("yesterday"));
	json_object_set_new(json_object_get(rec, "auditChain"), "head", json_string("00"));
	json_object_set_new(json_object_get(rec, "run"), "records", json_integer(-1));
	json_object_set_new(json_object_get(json_object_get(rec, "enforcement"), "doctorProbe"),
			    "status", json_string("maybe"));
	json_object_del(json_object_get(rec, "boot"), "bootId");
	ASSERT_TRUE(verify_has(rec, "schema-version-unsupported"));
	ASSERT_TRUE(verify_has(rec, "kind-invalid"));
	ASSERT_TRUE(verify_has(rec, "run-id-missing"));
	ASSERT_TRUE(verify_has(rec, "trust-model-missing"));
	ASSERT_TRUE(verify_has(rec, "generated-at-invalid"));
	ASSERT_TRUE(verify_has(rec, "audit-chain-head-invalid"));
	ASSERT_TRUE(verify_has(rec, "run-records-invalid"));
	ASSERT_TRUE(verify_has(rec, "doctor-probe-invalid"));
	ASSERT_TRUE(verify_has(rec, "boot-id-missing"));
	json_object_set_new(json_object_get(rec, "enforcement"), "status", json_string("GREAT"));
	ASSERT_TRUE(verify_has(rec, "enforcement-status-invalid"));
	json_array_append_new(
		json_object_get(json_object_get(rec, "enforcement"), "rulesetReports"),
		json_pack("{s:s}", "app", "x"));
	ASSERT_TRUE(verify_has(rec, "ruleset-report-invalid"));
	json_object_del(rec, "enforcement");
	ASSERT_TRUE(verify_has(rec, "enforcement-missing"));
	json_decref(rec);
}

/* Append one chained audit record, hashed the way §8.6 says. */
static void audit_append(FILE *f, char prev[SHA256_HEX_LEN + 1], int seq, const char *run_id)
{
	json_t *ev = json_pack("{s:s, s:i, s:{s:s, s:s, s:s}, s:s, s:s, s:{s:s}}", "ts",
			       "2026-11-30T02:45:20.000Z", "seq", seq, "actor", "kind", "operator",
			       "id", "me", "verifiedBy", "self-asserted", "action", "tool.call",
			       "decision", "allowed", "meta", "runId", run_id);
	char *canon = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS), *buf = NULL, *line;
	char hex[SHA256_HEX_LEN + 1];

	ASSERT_TRUE(asprintf(&buf, "%s%s", prev, canon) > 0);
	ASSERT_OK(sha256_buffer_hex(buf, strlen(buf), hex));
	json_object_set_new(ev, "prevHash", json_string(prev));
	json_object_set_new(ev, "hash", json_string(hex));
	line = json_dumps(ev, JSON_COMPACT);
	fprintf(f, "%s\n", line);
	memcpy(prev, hex, SHA256_HEX_LEN + 1);
	free(canon);
	free(buf);
	free(line);
	json_decref(ev);
}

TEST(audit_chain)
{
	char dir[] = "/tmp/test-attest.XXXXXX", path[256], prev[SHA256_HEX_LEN + 1];
	json_t *chain = NULL, *run = NULL;
	char *err = NULL, *data = NULL;
	size_t len = 0;
	FILE *f;

	ASSERT_TRUE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);

	/* Missing trail: an empty chain, no records. */
	ASSERT_OK(attest_audit_scan(path, BOOT, &chain, &run, &err));
	ASSERT_EQ(json_integer_value(json_object_get(chain, "segments")), 0);
	ASSERT_STREQ(json_string_value(json_object_get(chain, "head")), ATTEST_GENESIS_HASH);
	ASSERT_EQ(json_integer_value(json_object_get(run, "records")), 0);
	json_decref(chain);
	json_decref(run);

	strcpy(prev, ATTEST_GENESIS_HASH);
	f = fopen(path, "w");
	audit_append(f, prev, 1, "other");
	audit_append(f, prev, 2, BOOT);
	fprintf(f, "{\"torn\":\n");
	audit_append(f, prev, 3, BOOT);
	fclose(f);
	ASSERT_OK(attest_audit_scan(path, BOOT, &chain, &run, &err));
	ASSERT_EQ(json_integer_value(json_object_get(chain, "totalRecords")), 3);
	ASSERT_EQ(json_integer_value(json_object_get(chain, "segments")), 1);
	ASSERT_STREQ(json_string_value(json_object_get(chain, "head")), prev);
	ASSERT_EQ(json_integer_value(json_object_get(run, "records")), 2);
	ASSERT_EQ(json_integer_value(json_object_get(run, "firstSeq")), 2);
	ASSERT_EQ(json_integer_value(json_object_get(run, "lastSeq")), 3);
	json_decref(chain);
	json_decref(run);

	/* An edited decision breaks the chain. */
	f = fopen(path, "r");
	ASSERT_TRUE(getdelim(&data, &len, '\0', f) > 0);
	fclose(f);
	memcpy(strstr(data, "\"allowed\""), "\"denied\" ", 9);
	f = fopen(path, "w");
	fputs(data, f);
	fclose(f);
	ASSERT_ERROR(attest_audit_scan(path, BOOT, &chain, &run, &err), EBADMSG);
	ASSERT_TRUE(err && strstr(err, "BROKEN at record 1"));
	free(err);
	free(data);
	unlink(path);
	rmdir(dir);
}

/* Who chose the accelerator and why, from vm.json's accel, reaches the record. */
TEST(isolation_accel_choice)
{
	json_t *ev =
		evidence(true, LSM_OK, json_pack("[o]", report("notes", "FullyEnforced", BOOT)));
	json_t *rec, *choice;

	json_object_set_new(json_object_get(ev, "vm"), "accel",
			    json_pack("{s:s, s:s, s:s, s:s, s:{s:s}}", "mode", "auto", "source",
				      "the default", "chosen", "tcg", "reason",
				      "auto: KVM present, but its boot failed", "probe", "best",
				      "tcg"));
	rec = build(ev);
	choice = json_object_get(json_object_get(json_object_get(rec, "boot"), "isolation"),
				 "accelChoice");
	ASSERT_STREQ(json_string_value(json_object_get(choice, "mode")), "auto");
	ASSERT_STREQ(json_string_value(json_object_get(choice, "source")), "the default");
	ASSERT_STREQ(json_string_value(json_object_get(choice, "reason")),
		     "auto: KVM present, but its boot failed");
	/* The probe's timings stay in the evidence; the record says only why. */
	ASSERT_TRUE(json_object_get(choice, "probe") == NULL);
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);
}

/* The egress dialer's allowlist, recorded by berth-vmm in vm.json, reaches the record. */
TEST(isolation_egress)
{
	json_t *ev =
		evidence(true, LSM_OK, json_pack("[o]", report("notes", "FullyEnforced", BOOT)));
	json_t *rec, *iso, *eg;

	json_object_set_new(json_object_get(ev, "vm"), "endpoints",
			    json_pack("{s:{s:i, s:[s, s], s:i, s:s}}", "egress", "port", 1026,
				      "allow", "api.example.com", "db.example.com:5432", "maxConns",
				      64, "testAllowCidr", "198.51.100.0/24"));
	rec = build(ev);
	iso = json_object_get(json_object_get(rec, "boot"), "isolation");
	eg = json_object_get(iso, "egress");
	ASSERT_EQ(json_array_size(json_object_get(eg, "allow")), 2);
	ASSERT_STREQ(json_string_value(json_array_get(json_object_get(eg, "allow"), 1)),
		     "db.example.com:5432");
	ASSERT_STREQ(json_string_value(json_object_get(eg, "testAllowCidr")), "198.51.100.0/24");
	ASSERT_EQ(verify_count(rec), 0);
	json_decref(rec);

	/* Without an allowlist vm.json says null, and the record has no egress at all. */
	ev = evidence(true, LSM_OK, json_pack("[o]", report("notes", "FullyEnforced", BOOT)));
	json_object_set_new(json_object_get(ev, "vm"), "endpoints", json_pack("{s:n}", "egress"));
	rec = build(ev);
	ASSERT_TRUE(json_object_get(json_object_get(json_object_get(rec, "boot"), "isolation"),
				    "egress") == NULL);
	json_decref(rec);
}

int main(void)
{
	return tests_run();
}
