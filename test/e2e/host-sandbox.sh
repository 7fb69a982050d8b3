#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth-vmm and QEMU confined on the host (docs/vm.md, "Host confinement"): a VM boots and
# is served under Landlock and seccomp, exec is refused to berth-vmm once it runs; without
# Landlock berth-vmm refuses to run unless --no-host-sandbox, which boots unconfined and says
# so. What each domain lets through, tried by a probe without a VM: host-sandbox-domains.sh.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
probe=$bld/test/e2e/host-sandbox-probe
[ -x "$probe" ] || skip_all "no $probe: build the tree first"
plan 22
vmm_pids=()
cleanup() {
	for p in "${vmm_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT

# hs_field NAME EXPR: evaluate EXPR on vm.json's hostSandbox (as h) for VM NAME.
hs_field() {
	python3 -c 'import json,sys; h=json.load(open(sys.argv[1]))["hostSandbox"]; sys.exit(0 if eval(sys.argv[2]) else 1)' \
		"$BERTH_HOME/run/vm/$1/vm.json" "$2"
}
status_has() { grep -Eq "^$2:[[:space:]]+$3\$" "/proc/$1/status"; }

check "berth vm install --from the build output" install_artifacts || diag < "$BERTH_HOME/install.log"

# --- boot 1: confined ---------------------------------------------------------------
name=e2e-hs
run=$BERTH_HOME/run/vm/$name
if BERTH_VMM_TEST_EXEC_PROBE=/bin/true "$vmm" run --name $name --state "$BERTH_HOME/state.img" \
	2>"$BERTH_HOME/run1.err"; then
	ok "berth-vmm run starts a VM with the host sandbox on"
else
	not_ok "berth-vmm run starts a VM with the host sandbox on"; diag < "$BERTH_HOME/run1.err"
fi
vmm_pids+=("$(vm_pid $name)")
check "the launcher reports the sandbox applied" grep -Eq \
	'^\{"event":"host_sandbox","hostSandbox":\{"abi":[0-9]+,"applied":true,"kind":"landlock\+seccomp"\}\}$' \
	"$BERTH_HOME/run1.err"
check "the VM boots and runs confined" wait_state $name running
check "vm.json: hostSandbox landlock+seccomp, applied, Landlock ABI >= 6, no reason" hs_field $name \
	'h["kind"] == "landlock+seccomp" and h["applied"] is True and h["abi"] >= 6 and "reason" not in h'
vpid=$(vm_pid $name)
qpid=$(qemu_pid $name)
check "berth-vmm runs under a seccomp filter (Seccomp: 2)" status_has "$vpid" Seccomp 2
check "berth-vmm has no_new_privs" status_has "$vpid" NoNewPrivs 1
check "QEMU runs under seccomp filters (Seccomp: 2)" status_has "$qpid" Seccomp 2
check "QEMU has no_new_privs" status_has "$qpid" NoNewPrivs 1
check "vmm.log records the sandbox" grep -q 'host sandbox: landlock+seccomp applied to berth-vmm and QEMU' "$run/vmm.log"
check "exec is refused to berth-vmm once it serves the VM" grep -Eq 'exec probe: refused \((EPERM|EACCES)\)$' "$run/vmm.log"
control $name '{"op":"status"}' >"$BERTH_HOME/status1.txt"
check "the confined berth-vmm still bridges the control socket to the guest" python3 -c '
import json,sys
replies = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sys.exit(not any(r.get("op") == "status" and r.get("ok") is True for r in replies))' \
	"$BERTH_HOME/status1.txt"
boot_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bootId"])' "$run/vm.json")
if "$berth" vm stop $name >"$BERTH_HOME/stop1.txt" 2>&1; then
	ok "the VM stops cleanly"
else
	not_ok "the VM stops cleanly"; diag < "$BERTH_HOME/stop1.txt"
fi
check "the confined berth-vmm removed its run dir after the clean stop" test ! -e "$run"
check "and wrote the boot evidence, which records the sandbox" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["vm"]["hostSandbox"]["applied"] is not True)' \
	"$BERTH_HOME/runs/$boot_id/evidence.json"

# --- no Landlock: a filter makes landlock_create_ruleset() ENOSYS for the real binary ----
name=e2e-hs-off
run=$BERTH_HOME/run/vm/$name
if "$probe" no-landlock "$vmm" run --name $name --foreground 2>"$BERTH_HOME/refuse.err"; then
	not_ok "without Landlock berth-vmm refuses to run"
else
	check "without Landlock berth-vmm refuses to run, saying how to fix it or turn it off" \
		grep -q 'has no Landlock.*CONFIG_SECURITY_LANDLOCK.*--no-host-sandbox' "$BERTH_HOME/refuse.err"
fi
check "nothing was started: no run dir" test ! -e "$run"

# --- boot 2: --no-host-sandbox on that kernel ---------------------------------------------
if "$probe" no-landlock "$vmm" run --name $name --no-host-sandbox 2>"$BERTH_HOME/run2.err"; then
	ok "--no-host-sandbox starts the VM without Landlock"
else
	not_ok "--no-host-sandbox starts the VM without Landlock"; diag < "$BERTH_HOME/run2.err"
fi
vmm_pids+=("$(vm_pid $name)")
check "the VM boots unconfined" wait_state $name running
check "vm.json: hostSandbox kind null, not applied, ABI 0, with the reason" hs_field $name \
	'h["kind"] is None and h["applied"] is False and h["abi"] == 0 and "--no-host-sandbox" in h["reason"]'
check "vmm.log says the sandbox is off" grep -q 'host sandbox: off (--no-host-sandbox)' "$run/vmm.log"
stop_quietly() { "$berth" vm stop "$1" >/dev/null 2>&1; }
check "the VM stops cleanly" stop_quietly $name
finish
