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

#include "attest.h"
#include "fileio.h"
#include "macros.h"

#define TRUST_MODEL                                                                              \
	"tamper-evident, not tamper-proof: recordSha256 and the audit chain head let anyone "    \
	"detect a record or audit trail edited after it was written, but nothing here is "       \
	"signed, so whoever can write ~/.berth (the host user, or root) can forge a consistent " \
	"record; the enforcement status is only as true as the guest's own reports, which come " \
	"from the pinned kernel and root image the record names"

static void set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **ret_error, const char *fmt, ...)
{
	va_list ap;

	if (!ret_error)
		return;
	free(*ret_error);
	*ret_error = NULL;
	va_start(ap, fmt);
	if (vasprintf(ret_error, fmt, ap) < 0)
		*ret_error = NULL;
	va_end(ap);
}

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

/* sha256_hex(prevHash ‖ canonical(event)), the event being the record without prevHash
 * and hash (SPEC §8.6). */
static int audit_record_hash(json_t *rec, const char *prev, char ret_hex[SHA256_HEX_LEN + 1])
{
	_cleanup_(json_decrefp) json_t *ev = json_copy(rec);
	_cleanup_free_ char *s = NULL, *buf = NULL;
	int r;

	if (!ev)
		return -ENOMEM;
	json_object_del(ev, "prevHash");
	json_object_del(ev, "hash");
	/* Audit records may carry non-integer numbers (durationMs); they hash as jansson
	 * prints them. */
	s = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
	if (!s)
		return -ENOMEM;
	if (asprintf(&buf, "%s%s", prev, s) < 0)
		return -ENOMEM;
	r = sha256_buffer_hex(buf, strlen(buf), ret_hex);
	return r;
}

int attest_audit_scan(const char *path, const char *run_id, json_t **ret_chain, json_t **ret_run,
		      char **ret_error)
{
	char prev[SHA256_HEX_LEN + 1] = ATTEST_GENESIS_HASH;
	json_int_t total = 0, records = 0;
	_cleanup_(json_decrefp) json_t *run = json_object();
	int segments = 0;
	bool first = true;

	if (!run)
		return -ENOMEM;
	for (int n = ATTEST_AUDIT_ROTATED_MAX; n >= 0; n--) {
		_cleanup_free_ char *seg = NULL, *data = NULL;
		size_t size = 0, lineno = 0;
		char *line, *next;
		int r;

		if (n > 0 ? asprintf(&seg, "%s.%d", path, n) < 0 : !(seg = strdup(path)))
			return -ENOMEM;
		r = read_full_file(seg, ATTEST_AUDIT_SEGMENT_MAX, &data, &size);
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			set_error(ret_error, "cannot read the audit trail segment %s: %s", seg,
				  strerror(-r));
			return r;
		}
		if (memchr(data, '\0', size)) {
			set_error(ret_error, "%s: BROKEN — the file holds NUL bytes", seg);
			return -EBADMSG;
		}
		segments++;
		for (line = data; line && *line; line = next) {
			_cleanup_(json_decrefp) json_t *rec = NULL;
			char hex[SHA256_HEX_LEN + 1];
			const char *ph, *h, *rid;
			json_t *meta;

			next = strchr(line, '\n');
			if (next)
				*next++ = '\0';
			lineno++;
			if (!*line)
				continue;
			rec = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
			/* A torn write is newline-terminated and left by the writer; skipping it
			 * is safe because the next record's prevHash still has to match. */
			if (!json_is_object(rec))
				continue;
			ph = json_string_value(json_object_get(rec, "prevHash"));
			h = json_string_value(json_object_get(rec, "hash"));
			if (!ph || !h || !sha256_hex_valid(ph) || !sha256_hex_valid(h)) {
				set_error(ret_error,
					  "%s: BROKEN at record %zu — no valid prevHash/hash", seg,
					  lineno);
				return -EBADMSG;
			}
			/* Rotation keeps <path>.1..5: when .5 exists older segments may be gone,
			 * and the oldest kept record anchors the chain instead of genesis. */
			if (first && n == ATTEST_AUDIT_ROTATED_MAX)
				snprintf(prev, sizeof(prev), "%s", ph);
			if (!streq(ph, prev)) {
				set_error(
					ret_error,
					"%s: BROKEN at record %zu — prevHash %.16s… does not match "
					"the previous record's hash %.16s…",
					seg, lineno, ph, prev);
				return -EBADMSG;
			}
			r = audit_record_hash(rec, prev, hex);
			if (r < 0)
				return r;
			if (!streq(hex, h)) {
				set_error(
					ret_error,
					"%s: BROKEN at record %zu — hash %.16s… does not match its "
					"contents (%.16s…)",
					seg, lineno, h, hex);
				return -EBADMSG;
			}
			memcpy(prev, h, sizeof(prev));
			first = false;
			total++;
			meta = json_object_get(rec, "meta");
			rid = json_string_value(json_object_get(meta, "runId"));
			if (rid && streq(rid, run_id)) {
				json_t *seq = json_object_get(rec, "seq"),
				       *ts = json_object_get(rec, "ts");

				if (records == 0) {
					if (json_is_integer(seq))
						json_object_set(run, "firstSeq", seq);
					if (json_is_string(ts))
						json_object_set(run, "firstTs", ts);
				}
				if (json_is_integer(seq))
					json_object_set(run, "lastSeq", seq);
				if (json_is_string(ts))
					json_object_set(run, "lastTs", ts);
				records++;
			}
		}
	}
	json_object_set_new(run, "records", json_integer(records));
	*ret_chain = json_pack("{s:s, s:i, s:I, s:s}", "path", path, "segments", segments,
			       "totalRecords", total, "head", prev);
	if (!*ret_chain)
		return -ENOMEM;
	*ret_run = TAKE_PTR(run);
	return 0;
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

json_t *attest_doctor_probe(json_t *evidence)
{
	json_t *vm = json_object_get(evidence, "vm");
	json_t *kernel = json_object_get(json_object_get(vm, "measurements"), "kernel");
	json_t *bs = find_event(json_object_get(evidence, "events"), "boot_start");

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

const char *attest_enforcement_derive(json_t *reports, json_t *probe, json_t **ret_reasons)
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

int attest_record_build(json_t *evidence, json_t *chain, json_t *run, const char *generated_at,
			json_t **ret, char **ret_error)
{
	static const char *const kernel_keys[] = {"sha256", "pinned", "linux", "cmdline", NULL};
	static const char *const rootfs_keys[] = {"sha256", "pinned", "fstype", "readOnly", NULL};
	static const char *const state_keys[] = {"chunkedSha256", "sizeBytes", "created", NULL};
	static const char *const sandbox_keys[] = {"kind", "applied", "abi", "reason", NULL};
	_cleanup_(json_decrefp) json_t *rec = NULL, *iso = NULL, *reports = NULL, *policies = NULL,
				       *apps = NULL, *probe = NULL, *reasons = NULL, *seen = NULL;
	json_t *vm, *meas, *rootfs, *events, *e, *bs, *app;
	const char *boot_id, *rootfs_sha, *name, *status;
	char tag[64], digest[80], hex[SHA256_HEX_LEN + 1];
	size_t i;
	int r;

	boot_id = json_string_value(json_object_get(evidence, "bootId"));
	if (json_integer_value(json_object_get(evidence, "schema")) != 1 ||
	    !json_is_string(json_object_get(evidence, "kind")) ||
	    !streq(json_string_value(json_object_get(evidence, "kind")), "berth.boot-evidence") ||
	    !attest_run_id_valid(boot_id)) {
		set_error(ret_error,
			  "not a berth.boot-evidence file of schema 1 with a valid bootId");
		return -EINVAL;
	}
	vm = json_object_get(evidence, "vm");
	meas = json_object_get(vm, "measurements");
	rootfs = json_object_get(meas, "rootfs");
	rootfs_sha = json_string_value(json_object_get(rootfs, "sha256"));
	if (!json_is_object(vm) || !rootfs_sha || !sha256_hex_valid(rootfs_sha)) {
		set_error(ret_error,
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
		json_array_append_new(apps, a);
	}
	iso = json_pack("{s:s, s:s, s:O?, s:O?, s:o, s:o}", "kind", "microvm", "engine",
			json_string_value(json_object_get(vm, "engine"))
				? json_string_value(json_object_get(vm, "engine"))
				: "qemu",
			"accelerator", json_object_get(vm, "accelerator"), "hypervisor",
			json_object_get(vm, "accelerator"), "kernel",
			pick(json_object_get(meas, "kernel"), kernel_keys), "rootfs",
			pick(rootfs, rootfs_keys));
	if (!iso)
		return -ENOMEM;
	if (json_is_object(json_object_get(meas, "state")))
		json_object_set_new(iso, "state", pick(json_object_get(meas, "state"), state_keys));
	json_object_set_new(iso, "tsi",
			    json_boolean(json_is_true(
				    json_object_get(json_object_get(vm, "vmConfig"), "tsi"))));
	json_object_set(iso, "nics", json_object_get(json_object_get(vm, "vmConfig"), "nics"));
	json_object_set(iso, "vcpus", json_object_get(json_object_get(vm, "vmConfig"), "cpus"));
	json_object_set(iso, "memMiB", json_object_get(json_object_get(vm, "vmConfig"), "memMiB"));
	if (json_is_object(json_object_get(vm, "hostSandbox")))
		json_object_set_new(iso, "hostSandbox",
				    pick(json_object_get(vm, "hostSandbox"), sandbox_keys));
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
			"generatedAt", generated_at, "runId", boot_id, "run", run, "auditChain",
			chain);
	if (!rec)
		return -ENOMEM;
	json_object_set_new(rec, "boot",
			    json_pack("{s:s, s:s?, s:s, s:s, s:s, s:O?, s:O}", "bootId", boot_id,
				      "containerName", name, "imageTag", tag, "imageDigest", digest,
				      "runtime", "berth-vmm", "final",
				      json_object_get(evidence, "final"), "isolation", iso));
	json_object_set_new(rec, "enforcement",
			    json_pack("{s:s, s:O, s:O, s:O}", "status", status, "reasons", reasons,
				      "rulesetReports", reports, "doctorProbe", probe));
	json_object_set(rec, "policies", policies);
	r = attest_canonical_sha256(rec, hex);
	if (r == -EDOM) {
		set_error(ret_error,
			  "the evidence holds non-integer numbers where integers belong");
		return -EINVAL;
	}
	if (r < 0)
		return r;
	json_object_set_new(rec, "recordSha256", json_string(hex));
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

int attest_rfc3339_valid(const char *s)
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

void attest_now_rfc3339(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
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
		_cleanup_(json_decrefp) json_t *want =
			probe_derive(json_object_get(json_object_get(iso, "kernel"), "pinned"),
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
	else if (run_id && !streq(run_id, boot_id))
		problem(problems, "boot-id-inconsistent",
			"runId %s is not boot.bootId %s (a VM run is one boot)", run_id, boot_id);
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
		if (!sha256_hex_valid(json_string_value(
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
