#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth attest on a real boot: apps/notes in a VM, stopped, its evidence turned into an
# attestation record, the record verified, then edited and refused. One VM boot.
. "$(dirname "$0")/lib.sh"
require_artifacts
command -v node >/dev/null || skip_all "no node to bundle apps/notes"
new_home
trap '[ -n "$(vm_pid e2e-attest)" ] && kill -9 "$(vm_pid e2e-attest)" 2>/dev/null; rm -rf "$BERTH_HOME"' EXIT
plan 14

install_artifacts || { diag <"$BERTH_HOME/install.log"; skip_all "berth vm install failed"; }
node "$src/sdk/node/bundle.mjs" "$src/apps/notes" "$BERTH_HOME/notes" >"$BERTH_HOME/bundle.log" 2>&1 ||
	{ diag <"$BERTH_HOME/bundle.log"; skip_all "cannot bundle apps/notes"; }

rec=$BERTH_HOME/record.json
json() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# Unknown run: says where evidence lives and when it is written.
"$berth" attest no-such-boot >/dev/null 2>"$BERTH_HOME/unknown.err"
rc=$?
check "an unknown run id fails and says where evidence is written" \
	sh -c "[ $rc = 1 ] && grep -q 'runs/no-such-boot/evidence.json does not exist' '$BERTH_HOME/unknown.err' &&
		grep -q 'when a VM ends' '$BERTH_HOME/unknown.err' && grep -q 'berth vm status' '$BERTH_HOME/unknown.err'"

"$vmm" run --name e2e-attest --app "$BERTH_HOME/notes" >"$BERTH_HOME/run.log" 2>&1
wait_state e2e-attest running 240 || { diag <"$BERTH_HOME/run.log"; }
boot=$(json "$BERTH_HOME/run/vm/e2e-attest/vm.json" 'r["bootId"]' 2>/dev/null)
# The app is confined and serving once the guest says it is ready.
for ((i = 0; i < 300; i++)); do
	"$berth" vm status e2e-attest --json 2>/dev/null | python3 -c '
import json,sys; apps=json.load(sys.stdin)["vms"][0]["guest"]["apps"]; sys.exit(apps[0]["state"] != "ready")' 2>/dev/null && break
	sleep 0.2
done
"$berth" vm stop e2e-attest >"$BERTH_HOME/stop.log" 2>&1
check "the VM booted and stopped, leaving its evidence" test -f "$BERTH_HOME/runs/$boot/evidence.json"

"$berth" attest "$boot" >"$rec" 2>"$BERTH_HOME/attest.err"
check "berth attest <bootId> succeeds" test $? = 0
diag <"$BERTH_HOME/attest.err"
check "enforcement is ACTIVE" test "$(json "$rec" 'r["enforcement"]["status"]')" = ACTIVE
policy_sha=$(python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))
print([e["sha256"] for e in ev["events"] if e.get("event") == "policy_compiled" and e.get("app") == "notes"][0])' \
	"$BERTH_HOME/runs/$boot/evidence.json")
check "policies has the notes policy and its sha" \
	test "$(json "$rec" '[p["sha256"] for p in r["policies"] if p["app"] == "notes"][0]')" = "$policy_sha"
check "the notes report is FullyEnforced, from this boot" \
	test "$(json "$rec" '[(x["ruleset"], x["bootId"]) for x in r["enforcement"]["rulesetReports"] if x["app"] == "notes"][0]')" = "('FullyEnforced', '$boot')"
check "isolation: no NICs, no TSI, a pinned kernel" \
	test "$(json "$rec" '(r["boot"]["isolation"]["nics"], r["boot"]["isolation"]["tsi"], r["boot"]["isolation"]["kernel"]["pinned"])')" = "(0, False, True)"
# What the probe chose on this host (the verdict berth-vmm cached for this home).
want_accel=$("$vmm" accel --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["chosen"])')
check "isolation accelerator is $want_accel" test "$(json "$rec" 'r["boot"]["isolation"]["accelerator"]')" = "$want_accel"
check "imageDigest names the measured rootfs" \
	test "$(json "$rec" 'r["boot"]["imageDigest"] == "sha256:" + r["boot"]["isolation"]["rootfs"]["sha256"]')" = True

"$berth" attest "$boot" --out "$BERTH_HOME/out.json" 2>/dev/null
check "--out writes the record with mode 0600" test "$(stat -c %a "$BERTH_HOME/out.json")" = 600

"$berth" attest --verify "$rec" >"$BERTH_HOME/verify.out" 2>&1
check "berth attest --verify passes on the record" test $? = 0
diag <"$BERTH_HOME/verify.out"

# Hand edits: a status changed, a policy sha flipped.
python3 - "$rec" "$BERTH_HOME/edited-status.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["enforcement"]["status"] = "NOT_ENFORCED"
json.dump(r, open(sys.argv[2], "w"), indent=2)
PY
"$berth" attest --verify "$BERTH_HOME/edited-status.json" >"$BERTH_HOME/v1.out" 2>&1
rc=$?
check "an edited status fails: enforcement-status-underived, digest-mismatch" \
	sh -c "[ $rc = 1 ] && grep -q '^enforcement-status-underived:' '$BERTH_HOME/v1.out' && grep -q '^digest-mismatch:' '$BERTH_HOME/v1.out'"
diag <"$BERTH_HOME/v1.out"

python3 - "$rec" "$BERTH_HOME/edited-sha.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["policies"][0]["sha256"]
r["policies"][0]["sha256"] = ("0" if s[0] != "0" else "1") + s[1:]
json.dump(r, open(sys.argv[2], "w"))
PY
"$berth" attest --verify "$BERTH_HOME/edited-sha.json" --json >"$BERTH_HOME/v2.out" 2>&1
rc=$?
check "a flipped policy sha fails: digest-mismatch" \
	sh -c "[ $rc = 1 ] && python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); sys.exit(o[\"ok\"] or \"digest-mismatch\" not in [p[\"code\"] for p in o[\"problems\"]])' '$BERTH_HOME/v2.out'"

# A broken audit chain makes attest fail.
mkdir -p "$BERTH_HOME/audit"
echo '{"ts":"2026-01-01T00:00:00Z","seq":1,"action":"x","decision":"allowed","meta":{"runId":"'"$boot"'"},"prevHash":"0000000000000000000000000000000000000000000000000000000000000000","hash":"1111111111111111111111111111111111111111111111111111111111111111"}' \
	>"$BERTH_HOME/audit/audit.jsonl"
"$berth" attest "$boot" >/dev/null 2>"$BERTH_HOME/broken.err"
rc=$?
check "a broken audit chain makes berth attest fail" \
	sh -c "[ $rc = 1 ] && grep -q 'BROKEN at record 1' '$BERTH_HOME/broken.err'"
finish
