#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth-vmm and QEMU confined on the host (docs/vm.md, "Host confinement"): a VM boots and
# is served under Landlock and seccomp, exec is refused to berth-vmm once it runs; the two
# domains themselves, entered by a probe that links berth-vmm's own host-sandbox.c, let
# through what a VM needs and nothing else; without Landlock berth-vmm refuses to run
# unless --no-host-sandbox, which boots unconfined and says so.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
probe=$bld/test/e2e/host-sandbox-probe
[ -x "$probe" ] || skip_all "no $probe: build the tree first"
plan 42
vmm_pids=()
cleanup() {
	for p in "${vmm_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT

# expect FILE LINE...: every LINE is in the probe's output FILE.
expect() {
	local out=$1 line
	shift
	for line in "$@"; do
		grep -qxF "$line" "$out" || { echo "missing: $line" | diag; diag <"$out"; return 1; }
	done
}
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

# --- QEMU's domain, entered by the probe ------------------------------------------------
prun=$BERTH_HOME/run/vm/probe
mkdir -p "$prun"
echo '{}' >"$prun/vm.json"
echo 'token: secret' >"$BERTH_HOME/config.yml"
kernel=$(ls "$BERTH_HOME"/vm/kernel/sha256/*/vmlinux)
rootfs=$(ls "$BERTH_HOME"/vm/rootfs/rootfs-*.erofs)
firmware=$(readlink -f "$(dirname "$(readlink -f "$(command -v qemu-system-x86_64)")")/../share/qemu/bios-microvm.bin")
"$probe" qemu "$prun" "$kernel" read-artifact "read=$firmware" read=/etc/ld.so.cache \
	read=/dev/urandom "truncate=$prun/console.log" "bind-unix=$prun/qemu-mux.sock" \
	read=/etc/shadow "read=$BERTH_HOME/config.yml" "read=$rootfs" read=/proc/1/environ \
	"write=$prun/vm.json" "create=$prun/new" "unlink=$prun/vm.json" exec=/bin/true \
	tcp-connect=9 tcp-bind=0 abstract-connect signal-parent ptrace unshare-user clone-newns \
	clone3 mount bpf keyctl init-module io-uring perf-event >"$BERTH_HOME/qemu-probe.txt" 2>&1
check "QEMU's domain reads the VM's files, its firmware and libraries; writes its console; makes its socket" \
	expect "$BERTH_HOME/qemu-probe.txt" "read-artifact: ok" "read=$firmware: ok" \
	"read=/etc/ld.so.cache: ok" "read=/dev/urandom: ok" "truncate=$prun/console.log: ok" \
	"bind-unix=$prun/qemu-mux.sock: ok"
check "QEMU cannot read /etc/shadow, ~/.berth, an image it was not given, or other processes" \
	expect "$BERTH_HOME/qemu-probe.txt" "read=/etc/shadow: EACCES" \
	"read=$BERTH_HOME/config.yml: EACCES" "read=$rootfs: EACCES" "read=/proc/1/environ: EACCES"
check "QEMU cannot write, create or remove anything else in the run dir" \
	expect "$BERTH_HOME/qemu-probe.txt" "write=$prun/vm.json: EACCES" "create=$prun/new: EACCES" \
	"unlink=$prun/vm.json: EACCES"
check "QEMU cannot exec another program" expect "$BERTH_HOME/qemu-probe.txt" "exec=/bin/true: EACCES"
check "QEMU has no TCP" expect "$BERTH_HOME/qemu-probe.txt" "tcp-connect=9: EACCES" "tcp-bind=0: EACCES"
check "QEMU reaches no abstract socket and signals nothing outside its domain" \
	expect "$BERTH_HOME/qemu-probe.txt" "abstract-connect: EPERM" "signal-parent: EPERM"
check "QEMU's filter refuses ptrace, namespaces, mounts, bpf, keyrings, modules, io_uring, perf" \
	expect "$BERTH_HOME/qemu-probe.txt" "ptrace: EPERM" "unshare-user: EPERM" \
	"clone-newns: EPERM" "clone3: ENOSYS" "mount: EPERM" "bpf: EPERM" "keyctl: EPERM" \
	"init-module: EPERM" "io-uring: EPERM" "perf-event: EPERM"

# --- berth-vmm's own domain, entered by the probe ---------------------------------------
other=$BERTH_HOME/run/vm/other
mkdir -p "$other"
echo '{}' >"$other/vm.json"
evidence=$BERTH_HOME/runs/probe-boot
"$probe" self "$prun" "$evidence" "write-atomic=$prun/vm.json" "read=$prun/vm.json" \
	"bind-unix=$prun/control.sock" "write-atomic=$evidence/evidence.json" \
	"read=$BERTH_HOME/config.yml" "write=$BERTH_HOME/config.yml" "create=$BERTH_HOME/new" \
	read=/etc/shadow "read=$kernel" "write=$other/vm.json" "rm-rf=$other" exec=/bin/true \
	tcp-connect=9 tcp-bind=0 udp-socket udp6-socket raw-socket packet-socket netlink-route \
	resolve=localhost read=/etc/hosts abstract-connect signal-parent ptrace unshare-user \
	clone-newns clone3 mount bpf keyctl init-module io-uring perf-event "rm-rf=$prun" \
	>"$BERTH_HOME/self-probe.txt" 2>&1
check "berth-vmm's domain writes its run dir (atomically) and the evidence dir, and makes sockets" \
	expect "$BERTH_HOME/self-probe.txt" "write-atomic=$prun/vm.json: ok" "read=$prun/vm.json: ok" \
	"bind-unix=$prun/control.sock: ok" "write-atomic=$evidence/evidence.json: ok"
check "berth-vmm cannot read or write outside: ~/.berth, /etc/shadow, the kernel, another VM's run dir" \
	expect "$BERTH_HOME/self-probe.txt" "read=$BERTH_HOME/config.yml: EACCES" \
	"write=$BERTH_HOME/config.yml: EACCES" "create=$BERTH_HOME/new: EACCES" \
	"read=/etc/shadow: EACCES" "read=$kernel: EACCES" "write=$other/vm.json: EACCES" \
	"rm-rf=$other: EACCES"
check "another VM's run dir is still there" test -f "$other/vm.json"
check "berth-vmm's filter refuses exec" expect "$BERTH_HOME/self-probe.txt" "exec=/bin/true: EPERM"
check "without --egress-allow berth-vmm has no network: no inet, packet or netlink socket" \
	expect "$BERTH_HOME/self-probe.txt" "tcp-connect=9: EAFNOSUPPORT" "tcp-bind=0: EAFNOSUPPORT" \
	"udp-socket: EAFNOSUPPORT" "udp6-socket: EAFNOSUPPORT" "raw-socket: EAFNOSUPPORT" \
	"packet-socket: EAFNOSUPPORT" "netlink-route: EAFNOSUPPORT"
check "and resolves nothing: /etc/hosts is not readable" \
	expect "$BERTH_HOME/self-probe.txt" "resolve=localhost: ENOENT" "read=/etc/hosts: EACCES"
check "berth-vmm reaches no abstract socket, and may still signal (to kill QEMU)" \
	expect "$BERTH_HOME/self-probe.txt" "abstract-connect: EPERM" "signal-parent: ok"
check "berth-vmm's filter refuses ptrace, namespaces, mounts, bpf, keyrings, modules, io_uring, perf" \
	expect "$BERTH_HOME/self-probe.txt" "ptrace: EPERM" "unshare-user: EPERM" \
	"clone-newns: EPERM" "clone3: ENOSYS" "mount: EPERM" "bpf: EPERM" "keyctl: EPERM" \
	"init-module: EPERM" "io-uring: EPERM" "perf-event: EPERM"
check "berth-vmm's domain removes its own run dir" \
	expect "$BERTH_HOME/self-probe.txt" "rm-rf=$prun: ok"
rm -rf "$other"

# --- berth-vmm's domain with the egress dialer (--egress-allow) -----------------------------
# Ports 18443 and 18080 stand for an allowlist such as x.test:18443 and y.test:18080; the
# probe listens on both on 127.0.0.1 before it enters the domain.
mkdir -p "$prun"
"$probe" self-egress "$prun" "$evidence" 18443,18080 tcp-connect=18443 tcp-connect=18080 \
	tcp-connect=18444 tcp-connect=9 tcp-bind=0 udp-socket udp6-socket raw-socket packet-socket \
	netlink-route netlink-audit resolve=localhost read=/etc/hosts read=/etc/resolv.conf \
	read=/etc/shadow "read=$BERTH_HOME/config.yml" exec=/bin/true \
	>"$BERTH_HOME/egress-probe.txt" 2>&1
check "with an allowlist berth-vmm connects to exactly its ports, and binds none" \
	expect "$BERTH_HOME/egress-probe.txt" "tcp-connect=18443: ok" "tcp-connect=18080: ok" \
	"tcp-connect=18444: EACCES" "tcp-connect=9: EACCES" "tcp-bind=0: EACCES"
check "it may make TCP/UDP sockets and ask netlink for routes, nothing raw, no packet socket" \
	expect "$BERTH_HOME/egress-probe.txt" "udp-socket: ok" "udp6-socket: ok" "raw-socket: EPERM" \
	"packet-socket: EAFNOSUPPORT" "netlink-route: ok" "netlink-audit: EPERM"
check "it resolves names (/etc/hosts, /etc/resolv.conf) and still reads nothing else" \
	expect "$BERTH_HOME/egress-probe.txt" "resolve=localhost: ok" "read=/etc/hosts: ok" \
	"read=/etc/resolv.conf: ok" "read=/etc/shadow: EACCES" "read=$BERTH_HOME/config.yml: EACCES" \
	"exec=/bin/true: EPERM"
"$probe" self-egress "$prun" "$evidence" '*' tcp-connect=18444 tcp-connect=9 tcp-bind=0 \
	>"$BERTH_HOME/egress-any-probe.txt" 2>&1
check "a host:* pattern lets it connect to any port (nothing listens: refused by the peer), never bind" \
	expect "$BERTH_HOME/egress-any-probe.txt" "tcp-connect=18444: ECONNREFUSED" \
	"tcp-connect=9: ECONNREFUSED" "tcp-bind=0: EACCES"
rm -rf "$prun"

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
