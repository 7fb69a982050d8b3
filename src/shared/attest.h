/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "digest.h"

/*
 * The attestation record of one VM boot (berth attest, docs/attest.md): built from the
 * boot evidence berth-vmm writes when a VM ends (~/.berth/runs/<bootId>/evidence.json)
 * and the audit trail (~/.berth/audit/audit.jsonl), and checked again from its own
 * contents by attest_verify().
 *
 * Canonical form (what recordSha256 and the audit chain hash): jansson's
 * JSON_COMPACT | JSON_SORT_KEYS dump -- keys sorted by their UTF-8 bytes, no whitespace,
 * strings as UTF-8 with only '"', '\\' and control characters escaped (\n, \t, ... and
 * \u00xx in lowercase hex), integers in decimal. Python's json.dumps(v, sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False) gives the same text. A record holds no
 * floating-point numbers, so the form is unambiguous; attest_canonical_sha256() refuses
 * one that does.
 */

#define ATTEST_SCHEMA_VERSION 1
#define ATTEST_KIND "berth.attestation"
#define ATTEST_EVIDENCE_MAX (64u * 1024 * 1024)
/* The audit chain's genesis prevHash (AUDIT_GENESIS_HASH). */
#define ATTEST_GENESIS_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* Boot and run ids: 1-128 of [A-Za-z0-9._-], not starting with '.'. */
int attest_run_id_valid(const char *id);

/* The canonical JSON text of @v (malloc()ed into *@ret). -EDOM when @v holds a real
 * number. The audit chain (audit-log.h) hashes records in this form too. */
int attest_canonical_json(json_t *v, char **ret);

/* sha256 of the canonical JSON of @v without its top-level "recordSha256" (when @v is an
 * object). -EDOM when @v holds a real number. */
int attest_canonical_sha256(json_t *v, char ret_hex[SHA256_HEX_LEN + 1]);

/*
 * attest_audit_scan() - walk the audit trail at @path with audit_chain_walk() (its rotated
 * segments <path>.5 .. <path>.1 first), verify the hash chain, and count the records whose
 * meta.runId is @run_id. *@ret_chain gets {path, segments, totalRecords, head} and *@ret_run
 * {records, firstSeq?, lastSeq?, firstTs?, lastTs?}. A missing trail is an empty chain
 * (head = 64 zeros). A broken chain returns -EBADMSG with the reason in *@ret_error
 * ("<segment>: BROKEN at record <n> — <why>").
 */
int attest_audit_scan(const char *path, const char *run_id, json_t **ret_chain, json_t **ret_run,
		      char **ret_error);

/*
 * attest_record_build() - the record for boot @evidence (a parsed evidence.json), with
 * the audit @chain and @run from attest_audit_scan() (borrowed) and @generated_at
 * (RFC 3339). -EINVAL with *@ret_error when the evidence is not usable.
 */
int attest_record_build(json_t *evidence, json_t *chain, json_t *run, const char *generated_at,
			json_t **ret, char **ret_error);

/*
 * attest_run_record() - the record of run @run_id, what `berth attest <runId>` prints.
 * @run_id is either a boot id, with evidence at <@runs_dir>/<run_id>/evidence.json, or the
 * run id of a berth mcp session (SPEC §3.5), whose sandbox.boot audit record names the
 * boot in meta.evidence.bootId: that boot's evidence is attested, with run = the records
 * whose meta.runId is @run_id. The trail at @audit_path is verified first.
 * Returns 0, or with *@ret_error saying why:
 *   -ENOENT    neither evidence nor a sandbox.boot record for @run_id
 *   -ENODATA   the run's boot is known but has no evidence yet (the VM is still running,
 *              or its run directory was removed)
 *   -ENOTUNIQ  the run's sandbox.boot records name more than one boot
 *   -EBADMSG   the audit trail's chain is broken
 *   -EINVAL    the evidence is unusable or does not match the run
 */
int attest_run_record(const char *runs_dir, const char *audit_path, const char *run_id,
		      const char *generated_at, json_t **ret, char **ret_error);

/*
 * attest_verify() - re-derive every derived field of @record from its own contents.
 * Returns the number of problems; *@ret_problems gets [{code, message}] (codes of
 * SPEC §8.5: digest-mismatch, enforcement-status-underived, ...).
 */
int attest_verify(json_t *record, json_t **ret_problems);
