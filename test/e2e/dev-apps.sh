#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth dev --apps: companions in the app's VM, on a real VM. The ready line waits for
# every app; each has its own uid and RPC port, and berth rpc and berth vm status name
# them; the VM has the memory of several apps; an edit of the main app reloads it in place
# while the companions run on; companions that cannot be are refused before boot with
# what to do: a missing folder, a repeated name, too many, two terminals.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 15
trap 'kill -INT $dev_pid 2>/dev/null; sleep 1; kill -9 $dev_pid 2>/dev/null; kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[int(k) if k.isdigit() else k] for k in sys.argv[2:]]; print(v)' "$@"; }
ws=$BERTH_HOME/ws
mkdir -p "$ws"
for a in filesystem code-editor activity-feed terminal; do cp -r "$src/apps/$a" "$ws/$a"; done
vmjson=$BERTH_HOME/run/vm/berth-dev-filesystem/vm.json
dev_start() {
	local log=$1 i
	shift
	# Emptied before the child starts: the last run's "VM ready" must not be read.
	: >"$log"
	(cd "$ws/filesystem" && exec "$berth" dev "$@" >"$log" 2>&1) &
	dev_pid=$!
	for ((i = 0; i < 1500; i++)); do
		grep -q '^VM ready in' "$log" && return 0
		kill -0 $dev_pid 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}
# refused ARGS...: berth dev of filesystem with ARGS, its output in $BERTH_HOME/refused.txt.
refused() { (cd "$ws/filesystem" && "$berth" dev "$@" >"$BERTH_HOME/refused.txt" 2>&1); }
said() { grep -qF -- "$1" "$BERTH_HOME/refused.txt"; }

# --- refused before anything boots --------------------------------------------------------
refused --apps no-such-app
check "a companion folder that does not exist is refused, saying where it looked" \
	said "--apps no-such-app: no such app folder (looked for it as given and beside $ws/filesystem); name each companion's folder"
cp -r "$ws/code-editor" "$ws/code-editor-2"
refused --apps code-editor,code-editor-2
check "two companions of one name are refused" said '--apps: two companions are named "code-editor"'
refused --apps ../filesystem
check "a companion named like the app is refused" said 'it is named "filesystem" like the app itself'
refused --apps code-editor,activity-feed,terminal,code-editor-2
check "more than three companions are refused: a VM holds four apps" said '--apps: at most 3 companions, since a VM holds 4 apps'
cp -r "$ws/terminal" "$ws/terminal-2"
sed -i 's/^name: terminal$/name: terminal-2/' "$ws/terminal-2/berth.yml"
(cd "$ws/terminal" && "$berth" dev --apps terminal-2 >"$BERTH_HOME/two-terminals.log" 2>&1)
check "two apps declaring terminal:* are refused with the at-most-one message" \
	grep -q 'at most one app may declare a terminal:\* capability when running multiple apps together — found 2: terminal, terminal-2' "$BERTH_HOME/two-terminals.log"
check "and nothing is left running" test -z "$(ls "$BERTH_HOME/run/vm" 2>/dev/null)"

# --- three apps in one VM ------------------------------------------------------------------
log=$BERTH_HOME/dev.log
if dev_start "$log" --apps code-editor,activity-feed; then ok "berth dev --apps boots the app with its companions"; else not_ok "berth dev --apps boots the app with its companions"; diag <"$log"; fi
"$berth" vm status berth-dev-filesystem >"$BERTH_HOME/status.txt"
check "berth vm status names each app, each with its own uid, all ready" sh -c "
	grep -q '^  filesystem: ready, pid [0-9]*, uid 10000' '$BERTH_HOME/status.txt' &&
	grep -q '^  code-editor: ready, pid [0-9]*, uid 10001' '$BERTH_HOME/status.txt' &&
	grep -q '^  activity-feed: ready, pid [0-9]*, uid 10002' '$BERTH_HOME/status.txt'"
check "the VM has the memory of several apps (1024 MiB)" test "$(json_get "$vmjson" vmConfig memMiB)" = 1024
"$berth" rpc filesystem --export write_file --input '{"path":"a.txt","content":"from the main app"}' >/dev/null 2>&1
check "berth rpc reaches a companion by its name" \
	sh -c "'$berth' rpc code-editor --export open_file --input '{\"path\":\"a.txt\"}' | grep -q 'from the main app'"
check "and the companions hear the main app on the context bus" \
	sh -c "'$berth' rpc activity-feed --export get_recent_activity | grep -q '\"path\": \"a.txt\"'"
# berth mcp of a companion attaches to the VM it runs in.
python3 - "$berth" "$ws/code-editor" >"$BERTH_HOME/mcp.out" 2>"$BERTH_HOME/mcp.err" <<'PY'
import json, subprocess, sys
msgs = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "open_file", "arguments": {"path": "a.txt"}}},
]
p = subprocess.run([sys.argv[1], "mcp", "--app", "code-editor", "--app-dir", sys.argv[2]],
                   input="".join(json.dumps(m) + "\n" for m in msgs), capture_output=True, text=True, timeout=120)
sys.stderr.write(p.stderr)
for line in p.stdout.splitlines():
    r = json.loads(line)
    if r.get("id") == 2:
        print(r["result"]["content"][0]["text"])
PY
check "berth mcp of a companion attaches to the VM it runs in, and calls it" sh -c "
	grep -q 'attached to the running VM \"berth-dev-filesystem\"' '$BERTH_HOME/mcp.err' &&
	grep -q 'from the main app' '$BERTH_HOME/mcp.out'"
boot=$(json_get "$vmjson" bootId)
echo "export const devAppsRevision = 1;" >>"$ws/filesystem/src/index.ts"
for ((i = 0; i < 1500; i++)); do grep -q '^Reloaded' "$log" && break; sleep 0.2; done
check "an edit of the main app reloads it in place" grep -q "^Reloaded in place in [0-9]* ms .*boot $boot\$" "$log"
"$berth" vm status berth-dev-filesystem >"$BERTH_HOME/status2.txt"
check "while the companions run on, not restarted" sh -c "
	test \"\$(grep '^  code-editor:' '$BERTH_HOME/status.txt' | cut -d, -f2)\" = \"\$(grep '^  code-editor:' '$BERTH_HOME/status2.txt' | cut -d, -f2)\" &&
	grep -q '^  filesystem: ready, .*reloaded in place 1 time' '$BERTH_HOME/status2.txt'"
kill -INT "$dev_pid"
wait "$dev_pid" 2>/dev/null
check "Ctrl-C stops the VM with all its apps" test ! -e "$BERTH_HOME/run/vm/berth-dev-filesystem"
finish
