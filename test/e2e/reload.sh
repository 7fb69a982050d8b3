#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reload in place end to end (docs/warm-start.md, "Reload in place"), on a VM restored from
# the warm-start snapshot: an edited app (a new export) replaces the share in the running
# VM, which keeps its boot; the new version runs as a new process under the same uid and
# Landlock; the state disk keeps what was written; vm.json, `berth vm status` and the
# attestation record name the new share. A version that fails to start leaves the VM up
# for the next one. A changed policy and changed secrets restart the VM instead, and so
# does --reboot-on-change.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 30
trap 'kill -INT $dev_pid 2>/dev/null; sleep 1; kill -9 $dev_pid 2>/dev/null; kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[int(k) if k.isdigit() else k] for k in sys.argv[2:]]; print(v)' "$@"; }
rpc() { "$berth" rpc filesystem "$@" 2>&1; }
run=$BERTH_HOME/run/vm/berth-dev-filesystem
vmjson=$run/vm.json
# reloads N [SECONDS]: wait until berth dev has printed N "Reloaded in place" lines.
reloads() {
	local i
	for ((i = 0; i < ${2:-300} * 5; i++)); do
		[ "$(grep -c '^Reloaded in place in' "$log")" -ge "$1" ] && return 0
		sleep 0.2
	done
	tail -30 "$log" | diag
	return 1
}
guest_pid() { "$berth" vm status berth-dev-filesystem --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["vms"][0]["guest"]["apps"][0]["pid"])'; }

"$berth" vm install --from "$artifacts" --no-download --vmm "$vmm" >"$BERTH_HOME/install.log" 2>&1 ||
	{ diag <"$BERTH_HOME/install.log"; exit 1; }
app=$BERTH_HOME/filesystem
cp -r "$src/apps/filesystem" "$app"
log=$BERTH_HOME/dev.log
if start_dev "$app" "$log"; then ok "berth dev boots apps/filesystem"; else not_ok "berth dev boots apps/filesystem"; diag <"$log"; fi
check "restored from the snapshot" grep -Eq '^VM ready in [0-9]+ ms \(bundle [0-9]+ ms, fresh, restore ' "$log"
boot=$(json_get "$vmjson" bootId)
share1=$(json_get "$vmjson" apps 0 treeSha256)
pid1=$(guest_pid)
rpc --export write_file --input '{"path":"kept.txt","content":"written before the reload"}' >/dev/null
# A VM of berth dev keeps a warm Node for the next start once its app is up; waited for
# here, so that the first reload takes it whatever this machine's speed.
warm_ready() {
	local i
	for ((i = 0; i < 600; i++)); do
		control berth-dev-filesystem 2>/dev/null | grep -q '"event":"warm_runtime_ready"' && return 0
		sleep 0.2
	done
	return 1
}
check "the VM starts a warm Node for the app's next start once the app is up" warm_ready

# --- a new export: in place ------------------------------------------------------------
cat >>"$app/berth.yml" <<'EOF'
  - name: reload_marker
    output:
      marker: string
EOF
sed -i 's|^export default defineApp((app) => {$|&\n\tapp.export({ name: "reload_marker", output: z.object({ marker: z.string() }), handler: async () => ({ marker: "second version" }) });|' "$app/src/index.ts"
check "an edited app is reloaded in place" reloads 1
check "berth dev says what the reload took, on the same boot" \
	grep -Eq "^Reloaded in place in [0-9]+ ms \(bundle [0-9]+ ms, pack [0-9]+ ms, stop [0-9]+ ms, start [0-9]+ ms\)\. boot $boot$" "$log"
check "the VM is the same boot (vm.json)" test "$(json_get "$vmjson" bootId)" = "$boot"
check "the new export answers" sh -c "'$berth' rpc filesystem --export reload_marker | grep -q '\"marker\": \"second version\"'"
check "what was written before the reload is still there" \
	sh -c "'$berth' rpc filesystem --export read_file --input '{\"path\":\"kept.txt\"}' | grep -q 'written before the reload'"
pid2=$(guest_pid)
check "the new version is a new process" test -n "$pid2" -a "$pid2" != "$pid1"
"$berth" vm status berth-dev-filesystem --json >"$BERTH_HOME/status.json"
check "under the same uid" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vms"][0]["guest"]["apps"][0]["uid"])' "$BERTH_HOME/status.json")" = 10000
rpc --export write_file --input '{"path":"../tmp/outside.txt","content":"x"}' >"$BERTH_HOME/escape.txt"
check "and under Landlock: a write to /tmp (open to all by mode) is refused with EACCES" grep -q EACCES "$BERTH_HOME/escape.txt"
check "vm.json names the new share and counts the reload" \
	test "$(json_get "$vmjson" apps 0 reloads)" = 1 -a "$(json_get "$vmjson" apps 0 treeSha256)" != "$share1"
share2=$(json_get "$vmjson" apps 0 treeSha256)
"$berth" vm status berth-dev-filesystem >"$BERTH_HOME/status.txt"
check "berth vm status says it was reloaded in place" grep -q 'filesystem: ready, pid [0-9]*, uid 10000, .*reloaded in place 1 time$' "$BERTH_HOME/status.txt"
"$berth" vm status berth-dev-filesystem --json >/dev/null
control berth-dev-filesystem >"$BERTH_HOME/events.txt" 2>&1
# events KEY=VALUE...: how many events have these (top-level, or in "report") values.
events() {
	python3 -c '
import json,sys
want = dict(a.split("=", 1) for a in sys.argv[2:])
n = 0
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    flat = {**e, **{"report." + k: v for k, v in (e.get("report") or {}).items()}}
    n += all(str(flat.get(k)) == v for k, v in want.items())
print(n)' "$BERTH_HOME/events.txt" "$@"
}
check "the guest's events record the reload with the new share" \
	test "$(events event=app_reload phase=share treeSha256="$share2")" = 1
check "and agent-init confined the new version before its code ran" \
	test "$(events event=agent_init_report report.event=capability_policy_applied)" = 2
check "the new version took the warm Node the VM kept for it" \
	test "$(events event=app_started app=filesystem start="warm runtime")" = 2

# --- a version that does not start: the VM stays up --------------------------------------
echo 'throw new Error("broken on purpose");' >>"$app/src/index.ts"
for ((i = 0; i < 1500; i++)); do grep -q 'the new version did not start' "$log" && break; sleep 0.2; done
check "a version that throws is reported" \
	grep -q '^\[berth:dev\] the new version did not start: the new version exited with status 1 before it was ready; its log says why; fix it and save again$' "$log"
check "with its error in the log" grep -q 'Error: broken on purpose' "$log"
check "and the VM stays up, on the same boot" \
	test "$(json_get "$vmjson" state)" = running -a "$(json_get "$vmjson" bootId)" = "$boot"
# berth dev keeps its bundler between builds (sdk/node/bundle.mjs --serve); one that dies
# costs the next build its speed, not the build.
bundler_pid=$(pgrep -P "$dev_pid" -f 'bundle\.mjs --serve' | head -1)
check "berth dev keeps one bundler for its builds" \
	test -n "$bundler_pid" -a "$(pgrep -P "$dev_pid" -f 'bundle\.mjs --serve' | wc -l)" = 1
kill -9 "$bundler_pid" 2>/dev/null
sed -i '$d' "$app/src/index.ts"
check "the fixed version reloads in place again, with its kept bundler killed" reloads 2
check "and answers" sh -c "'$berth' rpc filesystem --export reload_marker | grep -q 'second version'"

# --- what needs a new VM -----------------------------------------------------------------
sed -i 's|^  - filesystem:write:/context$|&\n  - network:connect:8080|' "$app/berth.yml"
for ((i = 0; i < 1500; i++)); do grep -q '^Reloaded in [0-9]* ms (bundle' "$log" && break; sleep 0.2; done
check "a changed policy restarts the VM, saying why" \
	grep -q '^\[berth:dev\] the new berth.yml compiles to another policy than the one "filesystem" runs under; the VM restarts to apply it; rebooting the VM with the new bundle\.\.\.$' "$log"
check "with a new boot" grep -Eq '^Reloaded in [0-9]+ ms \(bundle [0-9]+ ms, stop [0-9]+ ms, (boot|restore) [0-9]+ ms\)\. boot ' "$log"
boot2=$(json_get "$vmjson" bootId)
check "which is another boot, whose share is the latest" \
	test "$boot2" != "$boot" -a "$(json_get "$vmjson" apps 0 reloads)" = 0
check "and the state disk came along" \
	sh -c "'$berth' rpc filesystem --export read_file --input '{\"path\":\"kept.txt\"}' | grep -q 'written before the reload'"

before=$(grep -c '^Reloaded in [0-9]* ms (bundle' "$log")
printf 'secrets:\n  - SOME_TOKEN\n' >>"$app/berth.yml"
for ((i = 0; i < 1500; i++)); do [ "$(grep -c '^Reloaded in [0-9]* ms (bundle' "$log")" -gt "$before" ] && break; sleep 0.2; done
check "changed secrets restart the VM too" \
	grep -q '^\[berth:dev\] the secrets it declares changed; rebooting the VM with the new bundle\.\.\.$' "$log"

# --- the attestation names the share the app ran last -------------------------------------
bundler_pid=$(pgrep -P "$dev_pid" -f 'bundle\.mjs --serve' | head -1)
check "a bundler runs again for the builds that followed" test -n "$bundler_pid"
kill -INT "$dev_pid"
wait "$dev_pid" 2>/dev/null
gone() {
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.2
	done
	return 1
}
check "and it ends with berth dev" gone "$bundler_pid"
"$berth" attest "$boot" >"$BERTH_HOME/attest.json" 2>"$BERTH_HOME/attest.err"
check "the first boot's attestation names the reloaded share and counts the reloads" python3 -c '
import json,sys; a=json.load(open(sys.argv[1]))["boot"]["isolation"]["apps"][0]
sys.exit(not(a["treeSha256"] != sys.argv[2] and a["reloads"] == 3))' "$BERTH_HOME/attest.json" "$share1"
finish
