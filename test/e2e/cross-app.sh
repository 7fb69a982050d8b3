#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two apps in one real VM may not read each other's data: reads are confined for every app
# (policy schema 2), so alpha's files in /workspace, /tmp/alpha and its share are refused to
# beta by Landlock even where the file modes would let any uid read them. Then a symlink an
# app leaves on the state disk: on the next boot berth-init refuses that app rather than
# follow the link as root.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 27
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
shares=$BERTH_HOME/shares
state=$BERTH_HOME/state.img
mkdir -p "$shares"

# share NAME CAPABILITY...: the fileprobe fixture as app NAME with these capabilities.
share() {
	local name=$1 src_dir=$BERTH_HOME/src-$1
	shift
	rm -rf "$src_dir" "$shares/$name"
	cp -r "$src/test/e2e/fixtures/fileprobe" "$src_dir"
	sed -i -e "s/^name: fileprobe/name: $name/" -e '/^capabilities:/,/^exports:/{/^  - /d}' "$src_dir/berth.yml"
	for c in "$@"; do sed -i "/^capabilities:/a\\  - $c" "$src_dir/berth.yml"; done
	node "$src/sdk/node/bundle.mjs" "$src_dir" "$shares/$name" >/dev/null
}
boot() {
	"$vmm" run --name cross --app "$shares/alpha" --app "$shares/beta" "${more_apps[@]}" \
		--state "$state" --mem 1024 2>"$BERTH_HOME/vmm-run.log" && wait_state cross running 180
	for ((i = 0; i < 90; i++)); do
		call "$1" read '{"path":"/etc/hostname"}' && break
		sleep 1
	done
}

# --- boot 1: alpha and beta, each with its own directory in /workspace ---------------------
share alpha filesystem:write:/workspace/alpha
share beta filesystem:write:/workspace/beta
# A third app that takes its RPC socket and never accepts a call.
node "$src/sdk/node/bundle.mjs" "$src/test/e2e/fixtures/stuckrpc" "$shares/stuck" >/dev/null
more_apps=(--app "$shares/stuck")
if boot beta; then ok "a VM with alpha, beta and stuck boots"; else not_ok "a VM with alpha, beta and stuck boots"; diag <"$BERTH_HOME/vmm-run.log"; fi

call alpha write '{"path":"/workspace/alpha/secret.txt","text":"alpha-secret"}'
says "alpha writes its own file (mode 0644)" 'r["ok"]'
call alpha write '{"path":"/tmp/alpha/note","text":"alpha-tmp"}'
says "and one in its own /tmp/alpha" 'r["ok"]'
call alpha read '{"path":"/workspace/alpha/secret.txt"}'
says "alpha reads back what it may write" 'r["ok"] and r["text"] == "alpha-secret"'

call beta read '{"path":"/workspace/alpha/secret.txt"}'
says "beta cannot read alpha's /workspace file (EACCES from Landlock, not the file mode)" 'not r["ok"] and r["error"] == "EACCES"'
call beta read '{"path":"/workspace/alpha"}'
says "nor list alpha's directory" 'not r["ok"] and r["error"] == "EACCES"'
call beta read '{"path":"/app/alpha/berth.yml"}'
says "nor read alpha's share" 'not r["ok"] and r["error"] == "EACCES"'
call beta read '{"path":"/tmp/alpha/note"}'
says "nor alpha's /tmp/alpha" 'not r["ok"] and r["error"] == "EACCES"'
call beta read '{"path":"/app/beta/berth.yml"}'
says "beta reads its own share" 'r["ok"] and "name: beta" in r["text"]'
call beta read '{"path":"/etc/hostname"}'
says "and the read baseline (/etc)" 'r["ok"]'
call beta read '{"path":"/proc/net/dev"}'
says "the guest has no network interface but lo (/proc/net/dev, read by an app)" \
	'r["ok"] and [l.split(":")[0].strip() for l in r["text"].splitlines()[2:]] == ["lo"]'
call beta write '{"path":"/workspace/beta/mine","text":"b"}'
call beta read '{"path":"/workspace/beta/mine"}'
says "and what it writes itself" 'r["ok"] and r["text"] == "b"'

# alpha leaves a link in its persistent directory, pointing at beta's run directory.
call alpha symlink '{"target":"/run/berth/beta","path":"/workspace/alpha/link"}'
says "alpha may make a symlink inside its own directory" 'r["ok"]'
call beta symlink '{"target":"/workspace/alpha","path":"/workspace/beta/peek"}'
says "and beta one to alpha's directory" 'r["ok"]'
# stuck's backlog holds two connections; PID 1 connects to an app's socket for every call,
# so a blocking connect would stall it on the third.
for i in 1 2 3 4; do
	BERTH_RPC_TIMEOUT_MS=60000 timeout 90 "$berth" rpc stuck --export never >/dev/null 2>&1 &
	stuck_calls+=($!)
done
sleep 3
"$berth" vm status --json >"$BERTH_HOME/status-stuck.json" 2>&1
check "with four calls queued at an app that never accepts, PID 1 still answers status" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
apps = {a["name"]: a["state"] for v in d["vms"] for a in v["guest"]["apps"]}
sys.exit(apps.get("stuck") != "ready" or apps.get("beta") != "ready")' "$BERTH_HOME/status-stuck.json"
call beta read '{"path":"/etc/hostname"}'
says "and another app's calls" 'r["ok"]'
kill "${stuck_calls[@]}" 2>/dev/null
wait "${stuck_calls[@]}" 2>/dev/null
# alpha's RPC socket lives in a directory alpha owns: it swaps the socket for a link to
# beta's. berth-init connects as root, so without a peer check alpha's calls would reach beta.
call alpha symlink '{"target":"/run/berth/beta/rpc.sock","path":"/run/berth/alpha/rpc.sock","replace":true}'
call alpha read '{"path":"/etc/hostname"}'
check "a call to alpha after it swapped its socket for beta's is refused, not answered by beta" \
	sh -c '! printf "%s" "$1" | grep -q "\"ok\": *true"' _ "$out"
"$berth" vm logs cross >"$BERTH_HOME/logs-1.txt" 2>&1
check "berth-init says the socket is not served by the app" \
	grep -q 'rpc.sock is not served by the app (peer uid' "$BERTH_HOME/logs-1.txt"
call beta read '{"path":"/etc/hostname"}'
says "beta still answers its own calls" 'r["ok"]'
"$berth" vm stop cross >/dev/null 2>&1
check "of the report-shaped lines the apps printed, none was taken for agent-init's" python3 -c '
import glob, json, sys
reports = [e for f in glob.glob(sys.argv[1] + "/runs/*/evidence.json")
	   for e in json.load(open(f))["events"] if e.get("event") == "agent_init_report"]
known = {"capabilities_dropped", "app_uid_applied", "capability_policy_applied",
	 "namespace_seccomp_filter", "network_seccomp_filter"}
apps = {r["app"] for r in reports}
sys.exit(not (apps == {"alpha", "beta", "stuck"} and
	      all(r["report"]["event"] in known and "forged" not in r["report"] for r in reports) and
	      len(reports) <= 3 * len(known)))' "$BERTH_HOME"

# --- boot 2: alpha now declares a path through its link, beta reads through its own -------
more_apps=()
share alpha filesystem:write:/workspace/alpha/link/planted
share beta filesystem:write:/workspace/beta filesystem:read:/workspace/beta/peek
boot beta
"$berth" vm status --json >"$BERTH_HOME/status.json" 2>&1
check "berth-init refuses alpha, naming the link, instead of following it as root" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
apps = {a["name"]: a for v in d["vms"] for a in v["guest"]["apps"]}
a = apps["alpha"]
sys.exit(not (a["state"] == "refused" and "a symbolic link" in a.get("reason", "") and "/workspace/alpha/link/planted" in a["reason"]))' "$BERTH_HOME/status.json"
check "beta still starts" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
apps = {a["name"]: a for v in d["vms"] for a in v["guest"]["apps"]}
sys.exit(apps["beta"]["state"] != "ready")' "$BERTH_HOME/status.json"
call beta read '{"path":"/run/berth/beta"}'
says "nothing was created in beta's run directory" 'r["ok"] and "planted" not in r["entries"]'
call beta write '{"path":"/workspace/beta/after","text":"still mine"}'
says "and beta's own writes still work" 'r["ok"]'
call beta read '{"path":"/workspace/beta/peek/secret.txt"}'
says "beta declared a read of its link to alpha's directory: still EACCES through the link" \
	'not r["ok"] and r["error"] == "EACCES"'
call beta read '{"path":"/workspace/alpha/secret.txt"}'
says "and at alpha's path itself" 'not r["ok"] and r["error"] == "EACCES"'
"$berth" vm logs cross >"$BERTH_HOME/logs-2.txt" 2>&1
check "agent-init said it did not grant the read through the link" \
	grep -q '/workspace/beta/peek.* is or passes through a symbolic link' "$BERTH_HOME/logs-2.txt"
"$berth" vm stop cross >/dev/null 2>&1
finish
