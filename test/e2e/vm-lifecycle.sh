#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM's life on real QEMU: boot, status, logs, stop; /workspace persistence; two VMs
# side by side; a duplicate name refused; kill -9 of berth-vmm and of QEMU noticed and
# cleaned up; secrets kept out of argv, the kernel command line, vm.json, logs and console;
# malformed and oversized control lines refused without harm.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 34
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT

install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
state=$BERTH_HOME/state-a.img
app=$BERTH_HOME/echo
cp -r "$src/test/e2e/fixtures/echo" "$app"
secret_value="s3cr3t-$(date +%s%N)"
secrets=$BERTH_HOME/secrets.img
python3 - "$secrets" "$secret_value" <<'PY'
import json, os, sys
body = b"BERTHSEC1\n" + json.dumps({"shared": {"API_TOKEN": sys.argv[2]}, "apps": {}}).encode()
body += b"\0" * (-len(body) % 512)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, body)
os.close(fd)
PY

# --- boot A -------------------------------------------------------------------------
if "$vmm" run --name e2e-a --app "$app" --state "$state" --secrets "$secrets" 2>"$BERTH_HOME/run-a.err"; then
	ok "berth-vmm run detaches and reports the VM started"
else
	not_ok "berth-vmm run detaches and reports the VM started"; diag < "$BERTH_HOME/run-a.err"
fi
check "it printed the endpoints" grep -q '"event":"endpoints"' "$BERTH_HOME/run-a.err"
check "the run dir is 0700" test "$(stat -c %a "$BERTH_HOME/run/vm/e2e-a")" = 700
check "VM A boots to boot_complete" wait_state e2e-a running
"$berth" vm status >"$BERTH_HOME/status.txt" 2>&1
check "berth vm status lists A with its run dir" grep -q "run dir $BERTH_HOME/run/vm/e2e-a" "$BERTH_HOME/status.txt"
check "status shows the engine and accelerator" grep -q 'running, qemu (tcg\|kvm)' "$BERTH_HOME/status.txt"

if "$vmm" run --name e2e-a --state "$BERTH_HOME/other.img" 2>"$BERTH_HOME/dup.err"; then
	not_ok "a second VM with the same name is refused"
else
	check "a second VM with the same name is refused, naming the running one" \
		grep -q "\"e2e-a\" is already running (berth-vmm pid $(vm_pid e2e-a)" "$BERTH_HOME/dup.err"
fi

# --- boot B beside A ------------------------------------------------------------------
"$vmm" run --name e2e-b 2>/dev/null
check "VM B boots beside A" wait_state e2e-b running
"$berth" vm status --json >"$BERTH_HOME/status.json"
check "both VMs are listed as running" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); names=sorted(v["name"] for v in d["vms"])
sys.exit(names != ["e2e-a","e2e-b"] or any(v["guest"]["ok"] is not True for v in d["vms"]))' "$BERTH_HOME/status.json"

# --- logs and control -----------------------------------------------------------------
"$berth" vm logs e2e-a >"$BERTH_HOME/logs.txt" 2>&1
check "berth vm logs replays the guest log" grep -q 'host channel: ready' "$BERTH_HOME/logs.txt"
control e2e-a >"$BERTH_HOME/events.txt"
check "the control port greets, then replays boot events" \
	python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if x.startswith("{")]; sys.exit(not(l[0]["event"]=="hello" and any(e.get("event")=="boot_complete" for e in l)))' "$BERTH_HOME/events.txt"
check "the state disk was formatted on first boot (boot 1)" grep -q '"bootCount":1,.*"formatted":true' "$BERTH_HOME/events.txt"
check "the secrets event carries the name" grep -q '"secrets_loaded".*API_TOKEN\|API_TOKEN.*secrets_loaded' "$BERTH_HOME/events.txt"
control e2e-a 'this is not json' >"$BERTH_HOME/bad.txt"
check "a malformed control line gets an error reply" grep -q '"op":"error"' "$BERTH_HOME/bad.txt"
control e2e-a '@repeat:70000:x' >"$BERTH_HOME/big.txt"
check "a control line over 64 KiB closes the connection" grep -q '^CLOSED' "$BERTH_HOME/big.txt"
control e2e-a '{"op":"status"}' >"$BERTH_HOME/after.txt"
check "the guest still answers after both" grep -q '"op":"status","shuttingDown":false' "$BERTH_HOME/after.txt"

# --- the app ---------------------------------------------------------------------------
python3 - "$BERTH_HOME/run/vm/e2e-a/rpc-0.sock" >"$BERTH_HOME/rpc.json" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"id":"1","export":"echo","input":{"n":1}}\n')
buf = b""
while not buf.endswith(b"\n"):
    d = s.recv(65536)
    if not d:
        break
    buf += d
print(buf.decode().strip())
PY
check "an RPC call reaches the app through rpc-0.sock" grep -q '"echo":{"n":1}' "$BERTH_HOME/rpc.json"
check "the app runs as its own uid 10000" grep -q '"uid":10000' "$BERTH_HOME/rpc.json"
check "its environment is built from scratch and carries the shared secret's name" python3 -c '
import json,sys; env=json.load(open(sys.argv[1]))["result"]["env"]
sys.exit(not("API_TOKEN" in env and "BERTH_VM_APPS" not in env and "BERTH_RPC_SOCKET" in env))' "$BERTH_HOME/rpc.json"

# --- secrets stay out of sight --------------------------------------------------------
qpid=$(qemu_pid e2e-a)
leak=0
tr '\0' ' ' < "/proc/$qpid/cmdline" | grep -qF "$secret_value" && leak=1
check "the secret value is not in QEMU's argv (nor the kernel command line it passes)" test $leak = 0
for f in vm.json vmm.log console.log; do
	check "the secret value is not in $f" sh -c "! grep -qF '$secret_value' '$BERTH_HOME/run/vm/e2e-a/$f'"
done
check "the secret value is not in the guest log or events" sh -c "! grep -qF '$secret_value' '$BERTH_HOME/logs.txt' '$BERTH_HOME/events.txt'"

# --- stop, and persistence ------------------------------------------------------------
if "$berth" vm stop e2e-a >"$BERTH_HOME/stop.txt" 2>&1; then
	ok "berth vm stop shuts A down cleanly"
else
	not_ok "berth vm stop shuts A down cleanly"; diag < "$BERTH_HOME/stop.txt"
fi
check "A's run dir is gone" test ! -e "$BERTH_HOME/run/vm/e2e-a"
check "A's QEMU is gone" test -z "$(qemu_pid e2e-a)"
check "the state disk holds the boot count on the host (debugfs)" \
	sh -c "debugfs -R 'cat /berth/boot-count' '$state' 2>/dev/null | grep -qx 1"
"$vmm" run --name e2e-a --state "$state" 2>/dev/null
wait_state e2e-a running
control e2e-a >"$BERTH_HOME/events2.txt"
check "after a stop and a new boot the state disk persists (boot 2, not reformatted)" \
	grep -q '"bootCount":2,.*"formatted":false' "$BERTH_HOME/events2.txt"

# --- kill -9 of berth-vmm -------------------------------------------------------------
qpid=$(qemu_pid e2e-a)
kill -9 "$(vm_pid e2e-a)"
for i in $(seq 50); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
check "kill -9 of berth-vmm leaves no QEMU behind" sh -c "! kill -0 $qpid 2>/dev/null"
"$berth" vm status >"$BERTH_HOME/stale.txt" 2>&1
check "the next berth vm status reports and cleans the stale run dir" \
	grep -q 'cleaned up stale run dir of "e2e-a"' "$BERTH_HOME/stale.txt"
check "and the run dir is gone" test ! -e "$BERTH_HOME/run/vm/e2e-a"

# --- a QEMU that dies -----------------------------------------------------------------
kill -9 "$(qemu_pid e2e-b)"
for i in $(seq 50); do [ -z "$(vm_pid e2e-b)" ] || ! kill -0 "$(vm_pid e2e-b)" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
check "berth-vmm notices and logs a QEMU that died" grep -q 'QEMU was killed by signal 9' "$BERTH_HOME/run/vm/e2e-b/vmm.log"
"$berth" vm status >"$BERTH_HOME/stale2.txt" 2>&1
check "and berth vm status reports it as crashed" grep -q '"e2e-b".*state crashed' "$BERTH_HOME/stale2.txt"
finish
