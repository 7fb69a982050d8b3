#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Confinement on a real VM: apps/filesystem and a cgroup-limits fixture run side by side
# under agent-init. The kernel allows the declared writes and refuses the rest (traversal,
# a symlink planted on the state disk, truncate and read outside the scope), refuses
# undeclared TCP, UDP, raw sockets and new user namespaces, and holds the cgroup limits:
# a fork bomb stops at pids.max, a memory hog is killed while the app and the VM live on.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 28
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
rpc() { "$berth" rpc "$@" 2>&1; }

shares=$BERTH_HOME/shares
mkdir -p "$shares"
node "$src/sdk/node/bundle.mjs" "$src/apps/filesystem" "$shares/filesystem" >/dev/null
cp -r "$src/test/e2e/fixtures/limits" "$shares/limits"
cp "$bld/src/agent-init/agent-init-probe" "$shares/limits/probe"

# A state disk prepared on the host: a symlink in the workspace that points out of it, and
# a world-writable file outside the workspace (only Landlock stands in the way).
state=$BERTH_HOME/state.img
truncate -s 64M "$state"
mkfs.ext4 -q -F -L berth-state -m 0 "$state"
echo "not yours" >"$BERTH_HOME/outside.txt"
debugfs -w -f - "$state" >/dev/null 2>&1 <<DEBUGFS
mkdir workspace
symlink workspace/escape /tmp
write $BERTH_HOME/outside.txt outside.txt
set_inode_field outside.txt mode 0100666
DEBUGFS

"$vmm" run --name e2e-confine --app "$shares/filesystem" --app "$shares/limits" --state "$state" 2>/dev/null
if wait_state e2e-confine running && "$berth" rpc limits --export ping >/dev/null 2>&1; then
	ok "a VM with both apps boots"
else
	not_ok "a VM with both apps boots"; tail -30 "$BERTH_HOME/run/vm/e2e-confine/console.log" | diag
fi
control e2e-confine >"$BERTH_HOME/events.txt"
check "agent-init reports the filesystem app's ruleset FullyEnforced" \
	grep -q '"app":"filesystem","event":"agent_init_report","report":{.*"event":"capability_policy_applied".*"ruleset":"FullyEnforced"' "$BERTH_HOME/events.txt"
check "each app's compiled policy is hashed" sh -c "grep -c '\"event\":\"policy_compiled\".*\"sha256\":\"[0-9a-f]\{64\}\"' '$BERTH_HOME/events.txt' | grep -qx 2"

# --- filesystem --------------------------------------------------------------------------
check "a write inside /workspace is allowed" sh -c "'$berth' rpc filesystem --export write_file --input '{\"path\":\"allowed.txt\",\"content\":\"hello from a sandbox\"}' >/dev/null"
check "and reads back" sh -c "'$berth' rpc filesystem --export read_file --input '{\"path\":\"allowed.txt\"}' | grep -q 'hello from a sandbox'"
out=$(rpc filesystem --export write_file --input '{"path":"../tmp/outside.txt","content":"x"}')
check "a traversal write to /tmp (open to all by mode) is refused by the kernel" sh -c "echo '$out' | grep -q EACCES"
out=$(rpc filesystem --export write_file --input '{"path":"escape/through-symlink.txt","content":"x"}')
check "a write through a symlink planted in /workspace is refused" sh -c "echo '$out' | grep -q EACCES"
out=$(rpc filesystem --export truncate_file --input '{"path":"../state/outside.txt","length":0}')
check "truncating a world-writable file outside the scope is refused" sh -c "echo '$out' | grep -q EACCES"
out=$(rpc filesystem --export read_file --input '{"path":"../state/outside.txt"}')
check "reading outside the declared read scope is refused" sh -c "echo '$out' | grep -q EACCES"
out=$(rpc filesystem --export read_file --input '{"path":"../etc/hostname"}')
check "reading the read baseline (/etc) is allowed" sh -c "echo '$out' | grep -q berth"

# --- network and namespaces ------------------------------------------------------------------
out=$(rpc filesystem --export probe_network_connect --input '{"host":"127.0.0.1","port":80}')
check "TCP connect without a network capability is refused (not merely unanswered)" \
	sh -c "echo '$out' | grep -q '\"connected\": false' && echo '$out' | grep -Eq 'EACCES|EPERM|permission'"
out=$(rpc filesystem --export probe_network_udp --input '{"host":"127.0.0.1","port":53}')
check "UDP is refused" sh -c "echo '$out' | grep -q '\"sent\": false' && echo '$out' | grep -Eiq 'EPERM|not permitted'"
out=$(rpc filesystem --export probe_raw_socket --input '{"host":"127.0.0.1"}')
check "raw sockets are refused" sh -c "echo '$out' | grep -q '\"opened\": false' && echo '$out' | grep -Eiq 'EPERM|not permitted'"
out=$(rpc filesystem --export probe_user_namespace)
check "a new user namespace is refused" sh -c "echo '$out' | grep -q '\"created\": false' && echo '$out' | grep -Eiq 'EPERM|not permitted'"

# --- the rest of the milestone, from a static probe run inside the limits app ----------------
fs_pid=$("$berth" vm status --json | python3 -c '
import json,sys; d=json.load(sys.stdin)
print([a["pid"] for v in d["vms"] for a in v["guest"]["apps"] if a["name"]=="filesystem"][0])')
"$berth" rpc limits --export probe --input "{\"ops\":[\"connect=7000\",\"connect=7001\",\"io-uring\",\"vsock\",\"unshare-user\",\"kill=$fs_pid\",\"ptrace=$fs_pid\"]}" >"$BERTH_HOME/probe.json"
probe_says() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"])' "$BERTH_HOME/probe.json" | grep -q "^$1: $2"; }
check "TCP connect to the declared port passes Landlock (nobody listens: ECONNREFUSED)" probe_says connect=7000 ECONNREFUSED
check "TCP connect to an undeclared port is refused (EACCES)" probe_says connect=7001 EACCES
check "io_uring_setup is refused (ENOSYS)" probe_says io-uring ENOSYS
check "socket(AF_VSOCK) is refused" probe_says vsock EPERM
check "unshare(CLONE_NEWUSER) is refused" probe_says unshare-user EPERM
check "signalling another app's process (another uid) is refused" probe_says "kill=$fs_pid" EPERM
check "ptrace of another app's process is refused" probe_says "ptrace=$fs_pid" EPERM

# --- cgroups --------------------------------------------------------------------------------
"$berth" vm status >"$BERTH_HOME/status.txt"
check "berth vm status shows the limits read back from the cgroup" \
	grep -q 'limits: ready, pid [0-9]*, uid 10001, .*memory.max=100663296 .*pids.max=32' "$BERTH_HOME/status.txt"
rpc limits --export fork_bomb >"$BERTH_HOME/bomb.json"
check "a fork bomb stops at pids.max" python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not(r["started"] < 32 and r["error"] == "EAGAIN"))' "$BERTH_HOME/bomb.json"
rpc limits --export memory_hog >"$BERTH_HOME/hog.json"
check "a memory hog past memory.max is killed" grep -q '"signal": "SIGKILL"' "$BERTH_HOME/hog.json"
check "the app that ran it lives on" sh -c "'$berth' rpc limits --export ping | grep -q pid"
check "and so does the VM and the other app" sh -c "'$berth' rpc filesystem --export list_files | grep -q allowed.txt"
check "the uid boundary: each app runs as its own uid" grep -q 'filesystem: ready, pid [0-9]*, uid 10000' "$BERTH_HOME/status.txt"
"$berth" vm stop e2e-confine >/dev/null
check "the VM stops cleanly" test ! -e "$BERTH_HOME/run/vm/e2e-confine"
finish
