#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An acknowledged write survives a crash. apps/notes on a real VM takes N add_note calls
# as fast as it answers them, and the moment the last answer is in, QEMU is killed with
# kill -9; the VM boots again on the same state disk and list_notes must hold every note
# that was acknowledged. Then the same with kill -9 of berth-vmm (QEMU follows through its
# parent-death signal), and once more with QEMU killed while calls are still in flight
# (what was acknowledged is there, and notes.json is whole, never half written).
# Without fsync (ext4 commits every 5 s) the notes of the last seconds are lost.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 21
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }

N=${BERTH_DURABILITY_NOTES:-50}
name=e2e-durable
run=$BERTH_HOME/run/vm/$name
state=$BERTH_HOME/state.img
shares=$BERTH_HOME/shares
mkdir -p "$shares"
node "$src/sdk/node/bundle.mjs" "$src/apps/notes" "$shares/notes" >/dev/null

# boot TAG: start the VM on the state disk and wait until notes answers.
boot() {
	local i
	"$vmm" run --name "$name" --app "$shares/notes" --state "$state" 2>"$BERTH_HOME/run-$1.err" || return 1
	wait_state "$name" running || return 1
	for ((i = 0; i < 60; i++)); do
		"$berth" rpc notes --export list_notes >"$BERTH_HOME/list-$1.json" 2>/dev/null && return 0
		sleep 1
	done
	return 1
}

# add_notes TAG COUNT KILL_AFTER PID: send COUNT add_note calls at once on rpc-0.sock, and
# kill -9 PID as soon as KILL_AFTER of them are acknowledged. Writes
# $BERTH_HOME/acked-TAG.json: {"acked": {id: text}, "errors": [...], "ms": ...}.
add_notes() {
	python3 - "$run/rpc-0.sock" "$1" "$2" "$3" "$4" "$BERTH_HOME/acked-$1.json" <<'PY'
import json, os, signal, socket, sys, time
path, tag, count, kill_after, pid, out = sys.argv[1:7]
count, kill_after, pid = int(count), int(kill_after), int(pid)
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(path)
texts = {f"{tag}-{i}": f"{tag} note {i}" for i in range(count)}
t0 = time.monotonic()
s.sendall(b"".join(json.dumps({"id": rid, "export": "add_note", "input": {"text": text}}).encode() + b"\n"
                   for rid, text in texts.items()))
acked, errors, buf, killed_ms = {}, [], b"", None
try:
    while len(acked) + len(errors) < count:
        data = s.recv(65536)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            result = msg.get("result")
            if isinstance(result, dict) and isinstance(result.get("id"), str):
                acked[result["id"]] = texts[msg["id"]]
            else:
                errors.append(msg)
            if len(acked) == kill_after and killed_ms is None:
                os.kill(pid, signal.SIGKILL)  # at once: not a millisecond for the guest to catch up
                killed_ms = round((time.monotonic() - t0) * 1000)
        if killed_ms is not None:
            break
except OSError as e:
    errors.append({"error": f"the connection: {e}"})
if killed_ms is None:
    os.kill(pid, signal.SIGKILL)
json.dump({"acked": acked, "errors": errors, "ms": killed_ms}, open(out, "w"))
PY
}

# wait_gone PID...: wait (30 s at most) until none of the processes is left.
wait_gone() {
	local i p left
	for ((i = 0; i < 300; i++)); do
		left=0
		for p in "$@"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && left=1; done
		[ $left = 0 ] && return 0
		sleep 0.1
	done
	return 1
}

# all_listed TAG...: every note acknowledged in acked-TAG.json is in the last list, and the
# list holds nothing that was not sent.
all_listed() {
	local list=$1
	shift
	python3 - "$list" "$@" <<'PY'
import json, sys
notes = json.load(open(sys.argv[1]))["notes"]
have = {n["id"]: n for n in notes}
missing = 0
for path in sys.argv[2:]:
    acked = json.load(open(path))["acked"]
    lost = [i for i, text in acked.items() if have.get(i, {}).get("text") != text]
    print(f"# {path.rsplit('/', 1)[-1]}: {len(acked) - len(lost)} of {len(acked)} acknowledged notes listed")
    missing += len(lost)
print(f"# the list has {len(notes)} notes")
sys.exit(missing > 0 or any(n["completed"] for n in notes))
PY
}

acked_count() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["acked"]))' "$1"; }
# report TAG: a diagnostic line on how the calls went.
report() {
	python3 - "$BERTH_HOME/acked-$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"# {len(d['acked'])} acknowledged, the kill {d['ms']} ms after the first call; errors: {d['errors'][:3]}")
if (d["ms"] or 0) > 5000:
    print("# (longer than ext4's 5 s commit interval: the earliest notes may have been committed without fsync)")
PY
}

# --- 1. kill -9 of QEMU right after the last acknowledgement ---------------------------------
if boot 1; then
	ok "apps/notes boots on a fresh state disk"
else
	not_ok "apps/notes boots on a fresh state disk"; diag < "$BERTH_HOME/run-1.err"; tail -30 "$run/console.log" 2>/dev/null | diag
fi
check "it starts with no notes" python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["notes"] != [])' "$BERTH_HOME/list-1.json"
qpid=$(qemu_pid "$name")
vpid=$(vm_pid "$name")
add_notes qemu "$N" "$N" "${qpid:-0}"
report qemu
check "all $N add_note calls are acknowledged" test "$(acked_count "$BERTH_HOME/acked-qemu.json")" = "$N"
check "QEMU is gone after kill -9" wait_gone "$qpid"
check "berth-vmm notices and exits" wait_gone "$vpid"
check "and logs that QEMU was killed" grep -q 'QEMU was killed by signal 9' "$run/vmm.log"
"$berth" vm status >"$BERTH_HOME/status-1.txt" 2>&1
check "berth vm status reports it as crashed" grep -q "\"$name\".*state crashed" "$BERTH_HOME/status-1.txt"

if boot 2; then ok "the VM boots again on the same state disk"; else not_ok "the VM boots again on the same state disk"; diag < "$BERTH_HOME/run-2.err"; fi
control "$name" >"$BERTH_HOME/events-2.txt"
check "the state disk was kept, not formatted again" grep -q '"formatted":false' "$BERTH_HOME/events-2.txt"
if all_listed "$BERTH_HOME/list-2.json" "$BERTH_HOME/acked-qemu.json"; then
	ok "list_notes holds every note acknowledged before QEMU was killed"
else
	not_ok "list_notes holds every note acknowledged before QEMU was killed"
fi

# --- 2. kill -9 of berth-vmm right after the last acknowledgement -----------------------------
qpid=$(qemu_pid "$name")
vpid=$(vm_pid "$name")
add_notes vmm "$N" "$N" "${vpid:-0}"
report vmm
check "$N more add_note calls are acknowledged" test "$(acked_count "$BERTH_HOME/acked-vmm.json")" = "$N"
check "berth-vmm is gone after kill -9" wait_gone "$vpid"
check "and QEMU with it (its parent-death signal)" wait_gone "$qpid"

"$berth" vm status >"$BERTH_HOME/status-2.txt" 2>&1
check "berth vm status reports and cleans the stale run dir" grep -q "cleaned up stale run dir of \"$name\"" "$BERTH_HOME/status-2.txt"
if boot 3; then ok "the VM boots again after berth-vmm was killed"; else not_ok "the VM boots again after berth-vmm was killed"; diag < "$BERTH_HOME/run-3.err"; fi
if all_listed "$BERTH_HOME/list-3.json" "$BERTH_HOME/acked-qemu.json" "$BERTH_HOME/acked-vmm.json"; then
	ok "list_notes holds every note acknowledged before berth-vmm was killed, and the earlier ones"
else
	not_ok "list_notes holds every note acknowledged before berth-vmm was killed, and the earlier ones"
fi

# --- 3. kill -9 of QEMU with calls still in flight -----------------------------------------------
half=$((N / 2))
qpid=$(qemu_pid "$name")
vpid=$(vm_pid "$name")
add_notes inflight "$N" "$half" "${qpid:-0}"
report inflight
check "$half of $N calls in flight are acknowledged when QEMU is killed" test "$(acked_count "$BERTH_HOME/acked-inflight.json")" = "$half"
wait_gone "$qpid" "$vpid"
if boot 4; then ok "the VM boots again"; else not_ok "the VM boots again"; diag < "$BERTH_HOME/run-4.err"; fi
if all_listed "$BERTH_HOME/list-4.json" "$BERTH_HOME/acked-qemu.json" "$BERTH_HOME/acked-vmm.json" "$BERTH_HOME/acked-inflight.json"; then
	ok "notes.json is whole and holds every acknowledged note (unacknowledged ones may be there or not)"
else
	not_ok "notes.json is whole and holds every acknowledged note (unacknowledged ones may be there or not)"
fi

# --- a clean stop, and the file system it leaves ----------------------------------------------
"$berth" vm stop "$name" >"$BERTH_HOME/stop.txt" 2>&1
check "the VM stops cleanly" test ! -e "$run"
if e2fsck -fn "$state" >"$BERTH_HOME/fsck.txt" 2>&1; then
	ok "the state disk's file system is clean (e2fsck -fn)"
else
	not_ok "the state disk's file system is clean (e2fsck -fn)"; diag < "$BERTH_HOME/fsck.txt"
fi
finish
