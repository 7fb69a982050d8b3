/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error-text.h"
#include "attest.h"
#include "audit-log.h"
#include "fileio.h"
#include "macros.h"

#define TRUST_MODEL                                                                              \
	"tamper-evident, not tamper-proof: recordSha256 and the audit chain head let anyone "    \
	"detect a record or audit trail edited after it was written, but nothing here is "       \
	"signed, so whoever can write ~/.berth (the host user, or root) can forge a consistent " \
	"record; the enforcement status is only as true as the guest's own reports, which come " \
	"from the pinned kernel and root image the record names"

int attest_run_id_valid(const char *id)
{
	size_t n;

	if (!id)
		return 0;
	n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
			return 0;
	return 1;
}

static bool json_has_real(json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;

	if (json_is_real(v))
		return true;
	if (json_is_object(v)) {
		json_object_foreach(v, k, e)
			if (json_has_real(e))
				return true;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (json_has_real(e))
				return true;
	}
	return false;
}

int attest_canonical_json(json_t *v, char **ret)
{
	char *s;

	if (json_has_real(v))
		return -EDOM;
	s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (!s)
		return -ENOMEM;
	/* jansson writes "\u001B"; JSON.stringify and Python write "\u001b". Outside strings
	 * there is no backslash, and inside one an escape is a backslash and one character or
	 * "u" and four hex digits, so this walk sees every escape and only escapes. */
	for (char *p = s; *p; p++) {
		if (*p != '\\')
			continue;
		p++;
		if (!*p)
			break;
		if (*p != 'u')
			continue;
		for (int i = 1; i <= 4 && p[i]; i++)
			p[i] = (char)tolower((unsigned char)p[i]);
		p += 4;
	}
	*ret = s;
	return 0;
}

int attest_canonical_sha256(json_t *v, char ret_hex[SHA256_HEX_LEN + 1])
{
	_cleanup_(json_decrefp) json_t *copy = NULL;
	_cleanup_free_ char *s = NULL;
	int r;

	if (json_is_object(v)) {
		copy = json_copy(v); /* shallow: only the top level changes */
		if (!copy)
			return -ENOMEM;
		json_object_del(copy, "recordSha256");
		v = copy;
	}
	r = attest_canonical_json(v, &s);
	if (r < 0)
		return r;
	return sha256_buffer_hex(s, strlen(s), ret_hex);
}

typedef struct RunScan {
	const char *run_id;
	json_int_t records;
	json_t *run;   /* {firstSeq?, lastSeq?, firstTs?, lastTs?} */
	json_t *boots; /* bootId -> meta.evidence of the run's first sandbox.boot record for it */
	json_t *boot_order; /* the bootIds, in order of first appearance */
} RunScan;

static int scan_record(const char *segment, uint64_t line, json_t *rec, void *userdata)
{
	RunScan *rs = userdata;
	json_t *meta = json_object_get(rec, "meta"), *seq, *ts, *ev;
	const char *rid = json_string_value(json_object_get(meta, "runId"));
	const char *action = json_string_value(json_object_get(rec, "action"));
	const char *boot;

	(void)segment;
	(void)line;
	if (!rid || !streq(rid, rs->run_id))
		return 0;
	seq = json_object_get(rec, "seq");
	ts = json_object_get(rec, "ts");
	if (rs->records == 0) {
		if (json_is_integer(seq))
			json_object_set(rs->run, "firstSeq", seq);
		if (json_is_string(ts))
			json_object_set(rs->run, "firstTs", ts);
	}
	if (json_is_integer(seq))
		json_object_set(rs->run, "lastSeq", seq);
	if (json_is_string(ts))
		json_object_set(rs->run, "lastTs", ts);
	rs->records++;

	/* berth mcp's session record names the boot it served (SPEC §3.5). */
	ev = json_object_get(meta, "evidence");
	boot = json_string_value(json_object_get(ev, "bootId"));
	if (action && streq(action, "sandbox.boot") && boot && !json_object_get(rs->boots, boot)) {
		if (json_object_set(rs->boots, boot, ev) < 0 ||
		    json_array_append_new(rs->boot_order, json_string(boot)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* attest_audit_scan(), and the boots the run's sandbox.boot records name (@ret_boots,
 * @ret_boot_order may be NULL). */
static int audit_scan(const char *path, const char *run_id, json_t **ret_chain, json_t **ret_run,
		      json_t **ret_boots, json_t **ret_boot_order, char **ret_error)
{
	_cleanup_(json_decrefp) json_t *run = json_object(), *boots = json_object(),
				       *order = json_array();
	RunScan rs = {.run_id = run_id, .run = run, .boots = boots, .boot_order = order};
	static const AuditWalkOps ops = {.record = scan_record};
	AuditChain chain;
	int r;

	if (!run || !boots || !order)
		return -ENOMEM;
	r = audit_chain_walk(path, &ops, &rs, &chain, ret_error);
	if (r < 0)
		return r;
	if (json_object_set_new(run, "records", json_integer(rs.records)) < 0)
		return -ENOMEM;
	*ret_chain =
		json_pack("{s:s, s:i, s:I, s:s}", "path", path, "segments", (int)chain.segments,
			  "totalRecords", (json_int_t)chain.records, "head", chain.head);
	if (!*ret_chain)
		return -ENOMEM;
	*ret_run = TAKE_PTR(run);
	if (ret_boots)
		*ret_boots = TAKE_PTR(boots);
	if (ret_boot_order)
		*ret_boot_order = TAKE_PTR(order);
	return 0;
}

int attest_audit_scan(const char *path, const char *run_id, json_t **ret_chain, json_t **ret_run,
		      char **ret_error)
{
	return audit_scan(path, run_id, ret_chain, ret_run, NULL, NULL, ret_error);
}

static json_t *find_event(json_t *events, const char *name)
{
	json_t *e;
	size_t i;

	json_array_foreach(events, i, e) {
		const char *n = json_string_value(json_object_get(e, "event"));

		if (n && streq(n, name))
			return e;
	}
	return NULL;
}

static bool lsm_has_landlock(const char *lsm)
{
	const char *p = lsm;

	while (p && *p) {
		size_t n = strcspn(p, ",");

		if (n == 8 && strneq(p, "landlock", 8))
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

/* The probe from the facts the record keeps: kernel.pinned and boot_start.lsm. */
static json_t *probe_derive(json_t *kernel_pinned, const char *lsm)
{
	if (!json_is_boolean(kernel_pinned) || !lsm)
		return json_pack(
			"{s:s, s:s}", "status", "unknown", "reason",
			!lsm ? "berth-init reported no boot_start (no LSM list) for this boot"
			     : "the kernel measurement does not say whether it is pinned");
	if (!json_is_true(kernel_pinned))
		return json_pack("{s:s, s:s}", "status", "unsupported", "reason",
				 "the guest kernel is not the pinned kernel");
	if (!lsm_has_landlock(lsm)) {
		_cleanup_free_ char *why = NULL;

		if (asprintf(&why, "landlock is not among the guest's active LSMs (%s)", lsm) < 0)
			return NULL;
		return json_pack("{s:s, s:s}", "status", "unsupported", "reason", why);
	}
	return json_pack("{s:s}", "status", "enforcing");
}

/* The probe of a container (--runtime docker): the host's kernel enforces, with the
 * Landlock ABI berth-init found there. */
static json_t *probe_derive_host(json_t *landlock_abi)
{
	if (json_integer_value(landlock_abi) > 0)
		return json_pack("{s:s, s:s}", "status", "enforcing", "reason",
				 "a container: the host's kernel enforces, not Berth's pinned one");
	return json_pack("{s:s, s:s}", "status", "unsupported", "reason",
			 "a container on a host kernel without Landlock");
}

/* {status, reason?} of the VM's doctor probe, derived from the evidence. */
static json_t *attest_doctor_probe(json_t *evidence)
{
	json_t *vm = json_object_get(evidence, "vm");
	json_t *kernel = json_object_get(json_object_get(vm, "measurements"), "kernel");
	json_t *bs = find_event(json_object_get(evidence, "events"), "boot_start");

	if (json_is_object(json_object_get(vm, "container")))
		return probe_derive_host(json_object_get(
			json_object_get(json_object_get(vm, "container"), "hostKernel"),
			"landlockAbi"));
	return probe_derive(json_object_get(kernel, "pinned"),
			    json_string_value(json_object_get(bs, "lsm")));
}

static bool probe_status_valid(const char *s)
{
	return s && (streq(s, "enforcing") || streq(s, "unsupported") ||
		     streq(s, "present_not_enforcing") || streq(s, "unknown"));
}

static int append_reason(json_t *reasons, const char *fmt, ...) _printf_(2, 3);
static int append_reason(json_t *reasons, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	r = json_array_append_new(reasons, json_string(s));
	free(s);
	return r < 0 ? -ENOMEM : 0;
}

/*
 * The enforcement status of §8.5 from @reports ([{app, ruleset, ...}]) and @probe
 * ({status, reason?}): "ACTIVE", "NOT_ENFORCED" or "UNDETERMINED"; *@ret_reasons gets a new
 * array of reason strings.
 */
static const char *attest_enforcement_derive(json_t *reports, json_t *probe, json_t **ret_reasons)
{
	json_t *reasons = json_array(), *rep;
	const char *ps = json_string_value(json_object_get(probe, "status"));
	const char *pr = json_string_value(json_object_get(probe, "reason"));
	bool not_enforced = false;
	size_t i;

	if (ps && (streq(ps, "unsupported") || streq(ps, "present_not_enforcing"))) {
		if (pr)
			append_reason(reasons, "doctor probe: %s (%s)", ps, pr);
		else
			append_reason(reasons, "doctor probe: %s", ps);
		not_enforced = true;
	}
	json_array_foreach(reports, i, rep) {
		const char *rs = json_string_value(json_object_get(rep, "ruleset"));
		const char *app = json_string_value(json_object_get(rep, "app"));

		if (!rs || !streq(rs, "FullyEnforced")) {
			append_reason(reasons, "agent-init reported %s for app \"%s\"",
				      rs ? rs : "nothing", app ? app : "?");
			not_enforced = true;
		}
	}
	*ret_reasons = reasons;
	if (not_enforced)
		return "NOT_ENFORCED";
	if (!ps || !streq(ps, "enforcing")) {
		append_reason(reasons, "doctor probe result unavailable for this boot");
		return "UNDETERMINED";
	}
	if (json_array_size(reports) == 0) {
		append_reason(reasons, "no capability_policy_applied report found for this boot");
		return "UNDETERMINED";
	}
	return "ACTIVE";
}

/* Copy @keys of @from that exist into a new object. */
static json_t *pick(json_t *from, const char *const *keys)
{
	json_t *o = json_object();

	for (; o && *keys; keys++) {
		json_t *v = json_object_get(from, *keys);

		if (v && !json_is_null(v) && !json_is_real(v))
			json_object_set(o, *keys, v);
	}
	return o;
}

/* attest_record_build() with runId = @run_id (NULL: the boot id), for a run of berth mcp
 * in that boot. */
static int attest_record_build_run(json_t *evidence, const char *run_id, json_t *chain, json_t *run,
				   const char *generated_at, json_t **ret, char **ret_error)
{
	static const char *const kernel_keys[] = {"sha256", "pinned", "linux", "cmdline", NULL};
	static const char *const rootfs_keys[] = {"sha256", "pinned", "fstype", "readOnly", NULL};
	static const char *const state_keys[] = {"chunkedSha256", "sizeBytes", "created", NULL};
	static const char *const sandbox_keys[] = {"kind", "applied", "abi", "reason", NULL};
	_cleanup_(json_decrefp) json_t *rec = NULL, *iso = NULL, *reports = NULL, *policies = NULL,
				       *apps = NULL, *probe = NULL, *reasons = NULL, *seen = NULL;
	json_t *vm, *container, *meas, *rootfs, *events, *e, *bs, *app;
	const char *boot_id, *rootfs_sha, *name, *status;
	char tag[64], digest[80], hex[SHA256_HEX_LEN + 1];
	size_t i;
	int r;

	boot_id = json_string_value(json_object_get(evidence, "bootId"));
	if (json_integer_value(json_object_get(evidence, "schema")) != 1 ||
	    !json_is_string(json_object_get(evidence, "kind")) ||
	    !streq(json_string_value(json_object_get(evidence, "kind")), "berth.boot-evidence") ||
	    !attest_run_id_valid(boot_id)) {
		error_text_set(ret_error,
			       "not a berth.boot-evidence file of schema 1 with a valid bootId");
		return -EINVAL;
	}
	vm = json_object_get(evidence, "vm");
	meas = json_object_get(vm, "measurements");
	rootfs = json_object_get(meas, "rootfs");
	rootfs_sha = json_string_value(json_object_get(rootfs, "sha256"));
	if (!json_is_object(vm) || !rootfs_sha || !sha256_hex_valid(rootfs_sha)) {
		error_text_set(ret_error,
			       "the evidence of boot %s has no VM description with a rootfs "
			       "measurement (did the VM fail before QEMU started?)",
			       boot_id);
		return -EINVAL;
	}
	events = json_object_get(evidence, "events");
	if (!json_is_array(events))
		events = NULL;
	snprintf(tag, sizeof(tag), "rootfs-%.12s.erofs", rootfs_sha);
	snprintf(digest, sizeof(digest), "sha256:%s", rootfs_sha);
	name = json_string_value(json_object_get(vm, "name"));
	bs = find_event(events, "boot_start");

	apps = json_array();
	json_array_foreach(json_object_get(vm, "apps"), i, app) {
		json_t *a = json_object();

		json_object_set(a, "tag", json_object_get(app, "name"));
		json_object_set(a, "treeSha256", json_object_get(app, "treeSha256"));
		json_object_set(a, "files", json_object_get(app, "files"));
		json_object_set(a, "bytes", json_object_get(app, "bytes"));
		/* A reload in place replaced the share during this boot: the record names the
		 * last one; each replacement is an app_reload event of the evidence. */
		if (json_integer_value(json_object_get(app, "reloads")) > 0)
			json_object_set(a, "reloads", json_object_get(app, "reloads"));
		json_array_append_new(apps, a);
	}
	container = json_object_get(vm, "container");
	iso = json_pack("{s:s, s:s, s:O?, s:O?, s:o, s:o}", "kind",
			container ? "container" : "microvm", "engine",
			json_string_value(json_object_get(vm, "engine"))
				? json_string_value(json_object_get(vm, "engine"))
				: "qemu",
			"accelerator", json_object_get(vm, "accelerator"), "hypervisor",
			json_object_get(vm, "accelerator"), "kernel",
			pick(json_object_get(meas, "kernel"), kernel_keys), "rootfs",
			pick(rootfs, rootfs_keys));
	if (!iso)
		return -ENOMEM;
	json_object_set_new(iso, "runtime", json_string(container ? "docker" : "vm"));
	/* A container's policies are enforced by the host's kernel, not a pinned one: the
	 * record says which, and which image the container ran. */
	if (json_is_object(container)) {
		static const char *const image_keys[] = {"image", "imageTag", "layerSha256",
							 "fromRootfsSha256", NULL};

		json_object_set_new(
			iso, "kernel",
			json_pack("{s:s, s:O?, s:O?}", "enforcedBy", "host", "release",
				  json_object_get(json_object_get(container, "hostKernel"),
						  "release"),
				  "landlockAbi",
				  json_object_get(json_object_get(container, "hostKernel"),
						  "landlockAbi")));
		json_object_set_new(iso, "image", pick(container, image_keys));
	}
	if (json_is_object(json_object_get(meas, "state")))
		json_object_set_new(iso, "state", pick(json_object_get(meas, "state"), state_keys));
	/* The browser layer laid over the root image, measured like it (docs/browser.md). */
	if (json_is_object(json_object_get(meas, "layer-browser")))
		json_object_set_new(
			iso, "layers",
			json_pack("{s:o}", "browser",
				  pick(json_object_get(meas, "layer-browser"), rootfs_keys)));
	json_object_set_new(iso, "tsi",
			    json_boolean(json_is_true(
				    json_object_get(json_object_get(vm, "vmConfig"), "tsi"))));
	json_object_set(iso, "nics", json_object_get(json_object_get(vm, "vmConfig"), "nics"));
	json_object_set(iso, "vcpus", json_object_get(json_object_get(vm, "vmConfig"), "cpus"));
	json_object_set(iso, "memMiB", json_object_get(json_object_get(vm, "vmConfig"), "memMiB"));
	if (json_is_object(json_object_get(vm, "hostSandbox")))
		json_object_set_new(iso, "hostSandbox",
				    pick(json_object_get(vm, "hostSandbox"), sandbox_keys));
	/* Why this accelerator: who asked (auto, a flag, BERTH_ACCEL) and what the probe saw. */
	if (json_is_object(json_object_get(vm, "accel"))) {
		json_t *accel = json_object_get(vm, "accel");

		json_object_set_new(iso, "accelChoice",
				    json_pack("{s:O?, s:O?, s:O?}", "mode",
					      json_object_get(accel, "mode"), "source",
					      json_object_get(accel, "source"), "reason",
					      json_object_get(accel, "reason")));
	}
	/* Booted cold, or restored from which snapshot and the pins it was made from. */
	if (json_is_object(json_object_get(vm, "boot"))) {
		static const char *const boot_keys[] = {"mode", "reason", "snapshot", NULL};
		json_t *boot = pick(json_object_get(vm, "boot"), boot_keys);

		json_t *snap = json_deep_copy(json_object_get(boot, "snapshot"));

		/* The host path says nothing about the VM. */
		json_object_del(snap, "dir");
		if (snap)
			json_object_set_new(boot, "snapshot", snap);
		json_object_set_new(iso, "boot", boot);
	}
	/* What the VM could reach: the egress dialer's allowlist, and a test-only network
	 * when one was admitted (docs/egress.md). */
	if (json_is_object(json_object_get(json_object_get(vm, "endpoints"), "egress")))
		json_object_set(iso, "egress",
				json_object_get(json_object_get(vm, "endpoints"), "egress"));
	json_object_set(iso, "apps", apps);
	if (json_is_integer(json_object_get(bs, "landlockAbi")))
		json_object_set(iso, "landlockAbi", json_object_get(bs, "landlockAbi"));
	if (json_is_string(json_object_get(bs, "lsm")))
		json_object_set(iso, "lsm", json_object_get(bs, "lsm"));
	/* Drop what the evidence did not have (json_object_set with NULL fails silently). */

	reports = json_array();
	policies = json_array();
	seen = json_object();
	json_array_foreach(events, i, e) {
		const char *ev = json_string_value(json_object_get(e, "event"));

		if (!ev)
			continue;
		if (streq(ev, "policy_compiled")) {
			json_t *p = json_pack(
				"{s:O?, s:O?, s:O?}", "app", json_object_get(e, "app"), "path",
				json_object_get(e, "path"), "sha256", json_object_get(e, "sha256"));
			if (p)
				json_array_append_new(policies, p);
		} else if (streq(ev, "agent_init_report")) {
			json_t *rp = json_object_get(e, "report");
			const char *kind = json_string_value(json_object_get(rp, "event"));
			const char *a = json_string_value(json_object_get(rp, "app"));
			const char *rb = json_string_value(json_object_get(rp, "bootId"));
			json_t *x;

			/* The first capability_policy_applied per app of this boot (§4.6). */
			if (!kind || !streq(kind, "capability_policy_applied") || !a || !rb ||
			    !streq(rb, boot_id) || json_object_get(seen, a))
				continue;
			json_object_set_new(seen, a, json_true());
			x = json_pack("{s:s, s:O?, s:s}", "app", a, "ruleset",
				      json_object_get(rp, "ruleset"), "bootId", rb);
			if (x && json_is_integer(json_object_get(rp, "timestamp")))
				json_object_set(x, "timestamp", json_object_get(rp, "timestamp"));
			if (x)
				json_array_append_new(reports, x);
		}
	}

	probe = attest_doctor_probe(evidence);
	if (!probe)
		return -ENOMEM;
	status = attest_enforcement_derive(reports, probe, &reasons);

	rec = json_pack("{s:i, s:s, s:s, s:s, s:s, s:O, s:O}", "schemaVersion",
			ATTEST_SCHEMA_VERSION, "kind", ATTEST_KIND, "trustModel", TRUST_MODEL,
			"generatedAt", generated_at, "runId", run_id ? run_id : boot_id, "run", run,
			"auditChain", chain);
	if (!rec)
		return -ENOMEM;
	json_object_set_new(rec, "boot",
			    json_pack("{s:s, s:s?, s:s, s:s, s:s, s:O?, s:O}", "bootId", boot_id,
				      "containerName", name, "imageTag", tag, "imageDigest", digest,
				      "runtime", container ? "docker" : "berth-vmm", "final",
				      json_object_get(evidence, "final"), "isolation", iso));
	json_object_set_new(rec, "enforcement",
			    json_pack("{s:s, s:O, s:O, s:O}", "status", status, "reasons", reasons,
				      "rulesetReports", reports, "doctorProbe", probe));
	json_object_set(rec, "policies", policies);
	r = attest_canonical_sha256(rec, hex);
	if (r == -EDOM) {
		error_text_set(ret_error,
			       "the evidence holds non-integer numbers where integers belong");
		return -EINVAL;
	}
	if (r < 0)
		return r;
	json_object_set_new(rec, "recordSha256", json_string(hex));
	*ret = TAKE_PTR(rec);
	return 0;
}

int attest_record_build(json_t *evidence, json_t *chain, json_t *run, const char *generated_at,
			json_t **ret, char **ret_error)
{
	return attest_record_build_run(evidence, NULL, chain, run, generated_at, ret, ret_error);
}

static int evidence_load(const char *runs_dir, const char *boot_id, json_t **ret, char **ret_error)
{
	_cleanup_free_ char *path = NULL, *data = NULL;
	json_error_t jerr;
	int r;

	if (asprintf(&path, "%s/%s/evidence.json", runs_dir, boot_id) < 0)
		return -ENOMEM;
	r = read_full_file(path, ATTEST_EVIDENCE_MAX, &data, NULL);
	if (r == -ENOENT) {
		error_text_set(ret_error, "%s does not exist", path);
		return r;
	}
	if (r < 0) {
		error_text_set(ret_error, "cannot read %s: %s", path, strerror(-r));
		return r;
	}
	*ret = json_loads(data, JSON_REJECT_DUPLICATES, &jerr);
	if (!*ret) {
		error_text_set(
			ret_error,
			"%s is not valid JSON (line %d: %s); the VM's evidence is damaged, boot "
			"it again",
			path, jerr.line, jerr.text);
		return -EINVAL;
	}
	return 0;
}

int attest_run_record(const char *runs_dir, const char *audit_path, const char *run_id,
		      const char *generated_at, json_t **ret, char **ret_error)
{
	_cleanup_(json_decrefp) json_t *evidence = NULL, *chain = NULL, *run = NULL, *boots = NULL,
				       *order = NULL, *rec = NULL;
	_cleanup_free_ char *why = NULL;
	const char *boot_id = run_id, *got;
	int r;

	if (!attest_run_id_valid(run_id)) {
		error_text_set(ret_error, "'%s' is not a run id", run_id ? run_id : "");
		return -EINVAL;
	}
	r = audit_scan(audit_path, run_id, &chain, &run, &boots, &order, ret_error);
	if (r < 0)
		return r;

	r = evidence_load(runs_dir, run_id, &evidence, &why);
	if (r == -ENOENT) {
		/* Not a boot id: a run of berth mcp, named by its sandbox.boot record(s). */
		size_t n = json_array_size(order);

		if (n == 0) {
			error_text_set(
				ret_error,
				"no boot evidence for run %s (%s) and no sandbox.boot record "
				"with that runId in the audit trail %s",
				run_id, why, audit_path);
			return -ENOENT;
		}
		if (n > 1) {
			_cleanup_free_ char *list = NULL;
			json_t *b;
			size_t i;

			json_array_foreach(order, i, b) {
				char *l = NULL;

				if (asprintf(&l, "%s%s%s", list ? list : "", list ? ", " : "",
					     json_string_value(b)) < 0)
					return -ENOMEM;
				free(list);
				list = l;
			}
			error_text_set(
				ret_error,
				"run id %s spans boots %s: its records cannot be tied to one "
				"boot's evidence; attest each boot by its boot id instead",
				run_id, list);
			return -ENOTUNIQ;
		}
		boot_id = json_string_value(json_array_get(order, 0));
		if (!attest_run_id_valid(boot_id)) {
			error_text_set(
				ret_error,
				"the sandbox.boot record of run %s names a boot id that is not "
				"one (\"%.64s\")",
				run_id, boot_id);
			return -EINVAL;
		}
		free(TAKE_PTR(why));
		r = evidence_load(runs_dir, boot_id, &evidence, &why);
		if (r == -ENOENT) {
			error_text_set(
				ret_error,
				"run %s ran in boot %s (its sandbox.boot record), which has no "
				"evidence yet: %s",
				run_id, boot_id, why);
			return -ENODATA;
		}
	}
	if (r < 0) {
		error_text_set(ret_error, "%s", why ? why : strerror(-r));
		return r;
	}

	r = attest_record_build_run(evidence, run_id, chain, run, generated_at, &rec, ret_error);
	if (r < 0)
		return r;
	got = json_string_value(json_object_get(json_object_get(rec, "boot"), "bootId"));
	if (!streq(got, boot_id)) {
		error_text_set(
			ret_error,
			"%s/%s/evidence.json is the evidence of boot %s, not %s; it was moved "
			"or edited",
			runs_dir, boot_id, got, boot_id);
		return -EINVAL;
	}
	if (!streq(boot_id, run_id)) {
		/* The session record saw the image it booted; it must be the measured one. */
		const char *said = json_string_value(
			json_object_get(json_object_get(boots, boot_id), "imageDigest"));
		const char *measured = json_string_value(
			json_object_get(json_object_get(rec, "boot"), "imageDigest"));

		if (said && measured && !streq(said, measured)) {
			error_text_set(
				ret_error,
				"the sandbox.boot record of run %s says boot %s ran image %s, "
				"but its evidence measured %s",
				run_id, boot_id, said, measured);
			return -EINVAL;
		}
	}
	*ret = TAKE_PTR(rec);
	return 0;
}

/* ---- verification ---- */

static void problem(json_t *problems, const char *code, const char *fmt, ...) _printf_(3, 4);
static void problem(json_t *problems, const char *code, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	json_array_append_new(problems, json_pack("{s:s, s:s}", "code", code, "message",
						  s ? s : "(out of memory)"));
	free(s);
}

static bool nonempty_string(json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0;
}

static bool nonneg_int(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0;
}

static int attest_rfc3339_valid(const char *s)
{
	int y, mo, d, h, mi, sec, n = 0;

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
	    n != 19)
		return 0;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return 0;
	s += n;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (streq(s, "Z"))
		return 1;
	return (s[0] == '+' || s[0] == '-') && isdigit((unsigned char)s[1]) &&
	       isdigit((unsigned char)s[2]) && s[3] == ':' && isdigit((unsigned char)s[4]) &&
	       isdigit((unsigned char)s[5]) && s[6] == '\0';
}

static void verify_enforcement(json_t *rec, json_t *problems)
{
	json_t *enf = json_object_get(rec, "enforcement"), *reports, *probe, *rep, *apps;
	json_t *iso = json_object_get(json_object_get(rec, "boot"), "isolation");
	const char *status,
		*boot_id =
			json_string_value(json_object_get(json_object_get(rec, "boot"), "bootId"));
	_cleanup_(json_decrefp) json_t *reasons = NULL;
	const char *derived;
	size_t i;
	bool shapes_ok = true;

	if (!json_is_object(enf)) {
		problem(problems, "enforcement-missing", "the record has no enforcement object");
		return;
	}
	status = json_string_value(json_object_get(enf, "status"));
	if (!status || !(streq(status, "ACTIVE") || streq(status, "NOT_ENFORCED") ||
			 streq(status, "UNDETERMINED"))) {
		problem(problems, "enforcement-status-invalid",
			"enforcement.status must be ACTIVE, NOT_ENFORCED or UNDETERMINED");
		shapes_ok = false;
	}
	reports = json_object_get(enf, "rulesetReports");
	apps = json_object();
	if (!json_is_array(reports)) {
		problem(problems, "ruleset-report-invalid",
			"enforcement.rulesetReports is not an array");
		shapes_ok = false;
	}
	json_array_foreach(reports, i, rep) {
		json_t *ts = json_object_get(rep, "timestamp");
		const char *a = json_string_value(json_object_get(rep, "app"));
		const char *rb = json_string_value(json_object_get(rep, "bootId"));

		if (!json_is_object(rep) || !a || !*a ||
		    !nonempty_string(json_object_get(rep, "ruleset")) || !rb || !*rb ||
		    (ts && !nonneg_int(ts))) {
			problem(problems, "ruleset-report-invalid",
				"rulesetReports[%zu] needs app, ruleset and bootId strings and an "
				"integer timestamp if any",
				i);
			shapes_ok = false;
			continue;
		}
		if (json_object_get(apps, a))
			problem(problems, "ruleset-report-invalid",
				"rulesetReports[%zu]: a second report for app \"%s\" (only the first "
				"per app is recorded)",
				i, a);
		json_object_set_new(apps, a, json_true());
		if (boot_id && !streq(rb, boot_id))
			problem(problems, "boot-id-inconsistent",
				"rulesetReports[%zu] (app \"%s\") is from boot %s, the record is of "
				"boot %s",
				i, a, rb, boot_id);
	}
	json_decref(apps);
	probe = json_object_get(enf, "doctorProbe");
	if (!json_is_object(probe) ||
	    !probe_status_valid(json_string_value(json_object_get(probe, "status"))) ||
	    (json_object_get(probe, "reason") &&
	     !json_is_string(json_object_get(probe, "reason")))) {
		problem(problems, "doctor-probe-invalid",
			"enforcement.doctorProbe needs a status of enforcing, unsupported, "
			"present_not_enforcing or unknown, and a string reason if any");
		shapes_ok = false;
	} else if (json_is_object(iso)) {
		json_t *kernel = json_object_get(iso, "kernel");
		bool host =
			streq_ptr(json_string_value(json_object_get(kernel, "enforcedBy")), "host");
		_cleanup_(json_decrefp) json_t *want =
			host ? probe_derive_host(json_object_get(kernel, "landlockAbi"))
			     : probe_derive(json_object_get(kernel, "pinned"),
					    json_string_value(json_object_get(iso, "lsm")));
		const char *ws = json_string_value(json_object_get(want, "status"));

		if (ws && !streq(ws, json_string_value(json_object_get(probe, "status"))))
			problem(problems, "doctor-probe-invalid",
				"doctorProbe.status is %s but boot.isolation (kernel pinned, guest "
				"LSMs) derives %s",
				json_string_value(json_object_get(probe, "status")), ws);
	}
	if (!json_is_array(json_object_get(enf, "reasons"))) {
		problem(problems, "enforcement-status-underived",
			"enforcement.reasons is not an array");
		return;
	}
	if (!shapes_ok)
		return;
	derived = attest_enforcement_derive(reports, probe, &reasons);
	if (!streq(derived, status))
		problem(problems, "enforcement-status-underived",
			"enforcement.status is %s but its reports and doctor probe derive %s",
			status, derived);
	else if (!json_equal(reasons, json_object_get(enf, "reasons")))
		problem(problems, "enforcement-status-underived",
			"enforcement.reasons differ from the reasons its reports and probe derive");
}

int attest_verify(json_t *rec, json_t **ret_problems)
{
	json_t *problems = json_array(), *boot, *iso, *chain, *run, *pol, *p;
	const char *run_id, *boot_id, *digest, *tag, *rsha;
	char hex[SHA256_HEX_LEN + 1];
	size_t i;
	int r;

	if (!problems)
		return -ENOMEM;
	if (!json_is_object(rec)) {
		problem(problems, "kind-invalid", "the record is not a JSON object");
		*ret_problems = problems;
		return (int)json_array_size(problems);
	}
	if (!json_is_integer(json_object_get(rec, "schemaVersion")) ||
	    json_integer_value(json_object_get(rec, "schemaVersion")) != ATTEST_SCHEMA_VERSION)
		problem(problems, "schema-version-unsupported", "schemaVersion must be %d",
			ATTEST_SCHEMA_VERSION);
	if (!json_is_string(json_object_get(rec, "kind")) ||
	    !streq(json_string_value(json_object_get(rec, "kind")), ATTEST_KIND))
		problem(problems, "kind-invalid", "kind must be \"%s\"", ATTEST_KIND);
	run_id = json_string_value(json_object_get(rec, "runId"));
	if (!run_id || !*run_id)
		problem(problems, "run-id-missing", "runId is missing or empty");
	if (!nonempty_string(json_object_get(rec, "trustModel")))
		problem(problems, "trust-model-missing", "trustModel is missing or empty");
	if (!attest_rfc3339_valid(json_string_value(json_object_get(rec, "generatedAt"))))
		problem(problems, "generated-at-invalid", "generatedAt is not an RFC 3339 time");

	chain = json_object_get(rec, "auditChain");
	if (!json_is_object(chain) ||
	    !sha256_hex_valid(json_string_value(json_object_get(chain, "head"))) ||
	    !json_is_string(json_object_get(chain, "path")) ||
	    !nonneg_int(json_object_get(chain, "segments")) ||
	    !nonneg_int(json_object_get(chain, "totalRecords")))
		problem(problems, "audit-chain-head-invalid",
			"auditChain needs path, segments, totalRecords and a 64-hex head");

	run = json_object_get(rec, "run");
	if (!json_is_object(run) || !nonneg_int(json_object_get(run, "records")))
		problem(problems, "run-records-invalid", "run.records must be a count");
	else {
		json_int_t n = json_integer_value(json_object_get(run, "records"));
		json_t *fs = json_object_get(run, "firstSeq"),
		       *ls = json_object_get(run, "lastSeq");

		if ((fs && !json_is_integer(fs)) || (ls && !json_is_integer(ls)) ||
		    (fs && ls && json_integer_value(fs) > json_integer_value(ls)) ||
		    (n == 0 && (fs || ls || json_object_get(run, "firstTs") ||
				json_object_get(run, "lastTs"))) ||
		    (json_object_get(run, "firstTs") &&
		     !json_is_string(json_object_get(run, "firstTs"))) ||
		    (json_object_get(run, "lastTs") &&
		     !json_is_string(json_object_get(run, "lastTs"))) ||
		    (nonneg_int(json_object_get(chain, "totalRecords")) &&
		     n > json_integer_value(json_object_get(chain, "totalRecords"))))
			problem(problems, "run-records-invalid",
				"run: records, firstSeq <= lastSeq and timestamps do not agree (or "
				"more run records than the chain holds)");
	}

	boot = json_object_get(rec, "boot");
	boot_id = json_string_value(json_object_get(boot, "bootId"));
	if (!boot_id || !*boot_id)
		problem(problems, "boot-id-missing", "boot.bootId is missing or empty");
	else if (run_id && !streq(run_id, boot_id) &&
		 !(json_is_object(run) && json_integer_value(json_object_get(run, "records")) > 0))
		/* A run other than the boot itself is known only through its audit records. */
		problem(problems, "boot-id-inconsistent",
			"runId %s is not boot.bootId %s and no audit record ties the run to the "
			"boot (run.records is 0)",
			run_id, boot_id);
	digest = json_string_value(json_object_get(boot, "imageDigest"));
	tag = json_string_value(json_object_get(boot, "imageTag"));
	if (!digest || !strneq(digest, "sha256:", 7) || !sha256_hex_valid(digest + 7))
		problem(problems, "image-digest-missing",
			"boot.imageDigest must be \"sha256:\" and 64 hex digits");
	iso = json_object_get(boot, "isolation");
	if (json_is_object(iso)) {
		rsha = json_string_value(json_object_get(json_object_get(iso, "rootfs"), "sha256"));
		if (!sha256_hex_valid(rsha))
			problem(problems, "image-digest-missing",
				"boot.isolation.rootfs.sha256 is not 64 hex digits");
		else {
			char want[80];

			snprintf(want, sizeof(want), "sha256:%s", rsha);
			if (digest && !streq(digest, want))
				problem(problems, "digest-mismatch",
					"boot.imageDigest %s is not the rootfs measurement %s",
					digest, want);
			snprintf(want, sizeof(want), "rootfs-%.12s.erofs", rsha);
			if (!tag || !streq(tag, want))
				problem(problems, "digest-mismatch",
					"boot.imageTag %s is not %s, named after the rootfs measurement",
					tag ? tag : "(missing)", want);
		}
		/* A container's kernel is the host's: it has a release, not a pin. */
		if (!streq_ptr(json_string_value(json_object_get(json_object_get(iso, "kernel"),
								 "enforcedBy")),
			       "host") &&
		    !sha256_hex_valid(json_string_value(
			    json_object_get(json_object_get(iso, "kernel"), "sha256"))))
			problem(problems, "digest-mismatch",
				"boot.isolation.kernel.sha256 is not 64 hex digits");
	}

	pol = json_object_get(rec, "policies");
	if (!json_is_array(pol))
		problem(problems, "policy-digest-invalid", "policies is not an array");
	json_array_foreach(pol, i, p) {
		if (!nonempty_string(json_object_get(p, "app")) ||
		    !nonempty_string(json_object_get(p, "path")) ||
		    !sha256_hex_valid(json_string_value(json_object_get(p, "sha256"))))
			problem(problems, "policy-digest-invalid",
				"policies[%zu] needs app, path and a 64-hex sha256", i);
	}

	verify_enforcement(rec, problems);

	rsha = json_string_value(json_object_get(rec, "recordSha256"));
	r = attest_canonical_sha256(rec, hex);
	if (r == -EDOM)
		problem(problems, "digest-mismatch",
			"the record holds a non-integer number, which has no canonical form");
	else if (r < 0) {
		json_decref(problems);
		return r;
	} else if (!rsha)
		problem(problems, "digest-mismatch", "recordSha256 is missing");
	else if (!streq(rsha, hex))
		problem(problems, "digest-mismatch",
			"recordSha256 %.16s… does not match the record's contents (%.16s…)", rsha,
			hex);

	*ret_problems = problems;
	return (int)json_array_size(problems);
}
