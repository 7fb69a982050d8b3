#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The domains berth-vmm builds on the host for QEMU and for itself (docs/vm.md, "Host
# confinement"), entered by a probe that links berth-vmm's own host-sandbox.c and then tries
# things: they let through what a VM needs and nothing else. The VM's files are made up
# here: no VM boots and no QEMU runs (the boots under the sandbox: host-sandbox.sh).
. "$(dirname "$0")/lib.sh"
probe=$bld/test/e2e/host-sandbox-probe
[ -x "$probe" ] || skip_all "no $probe: build the tree first"
qemu=$(command -v qemu-system-x86_64) || skip_all "no qemu-system-x86_64: QEMU's domain names its program"
abi=$(python3 -c 'import ctypes; print(max(0, ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)))')
[ "$abi" -ge 6 ] || skip_all "this kernel's Landlock ABI is $abi, the tests need 6"
new_home
plan 24

# expect FILE LINE...: every LINE is in the probe's output FILE.
expect() {
	local out=$1 line
	shift
	for line in "$@"; do
		grep -qxF "$line" "$out" || { echo "missing: $line" | diag; diag <"$out"; return 1; }
	done
}

# Stand-ins for the pinned kernel and root image: the domain's rules are on descriptors,
# whatever they hold.
mkdir -p "$BERTH_HOME/vm"
kernel=$BERTH_HOME/vm/vmlinux
rootfs=$BERTH_HOME/vm/rootfs.erofs
echo kernel >"$kernel"
echo rootfs >"$rootfs"

# --- QEMU's domain, entered by the probe ------------------------------------------------
prun=$BERTH_HOME/run/vm/probe
mkdir -p "$prun"
echo '{}' >"$prun/vm.json"
: >"$prun/console.log" # berth-vmm's, which QEMU may not write
echo 'token: secret' >"$BERTH_HOME/config.yml"
firmware=$(readlink -f "$(dirname "$(readlink -f "$qemu")")/../share/qemu/bios-microvm.bin")
# agent.sock stands for a named socket of the user's (an ssh agent, D-Bus), other.sock for
# one in the run dir that QEMU did not make; the probe listens on both first.
"$probe" qemu "$prun" "$kernel" read-artifact "read=$firmware" read=/etc/ld.so.cache \
	read=/dev/urandom "truncate=$prun/console.log" "bind-unix=$prun/qemu-mux.sock" "bind-unix=$prun/qmp.sock" \
	read=/etc/shadow "read=$BERTH_HOME/config.yml" "read=$rootfs" read=/proc/1/environ \
	"write=$prun/vm.json" "create=$prun/new" "unlink=$prun/vm.json" exec=/bin/true \
	tcp-connect=9 tcp-bind=0 udp-socket udp6-socket raw-socket packet-socket netlink-route \
	inet-socket-high inet-socketpair unix-stream-socket unix-seqpacket-socket \
	unix-socket-high unix-socketpair unix-dgram-socket unix-raw-socket unix-dgram-socketpair \
	"unix-connect=$BERTH_HOME/agent.sock" "unix-connect=$prun/other.sock" \
	abstract-connect signal-parent ptrace unshare-user clone-newns \
	clone3 mount bpf keyctl init-module io-uring perf-event >"$BERTH_HOME/qemu-probe.txt" 2>&1
check "QEMU's domain reads the VM's files, its firmware and libraries; makes its sockets" \
	expect "$BERTH_HOME/qemu-probe.txt" "read-artifact: ok" "read=$firmware: ok" \
	"read=/etc/ld.so.cache: ok" "read=/dev/urandom: ok" \
	"bind-unix=$prun/qemu-mux.sock: ok" "bind-unix=$prun/qmp.sock: ok"
check "QEMU cannot write the console file: its console is a pipe berth-vmm reads" \
	expect "$BERTH_HOME/qemu-probe.txt" "truncate=$prun/console.log: EACCES"
check "QEMU cannot read /etc/shadow, ~/.berth, an image it was not given, or other processes" \
	expect "$BERTH_HOME/qemu-probe.txt" "read=/etc/shadow: EACCES" \
	"read=$BERTH_HOME/config.yml: EACCES" "read=$rootfs: EACCES" "read=/proc/1/environ: EACCES"
check "QEMU cannot write, create or remove anything else in the run dir" \
	expect "$BERTH_HOME/qemu-probe.txt" "write=$prun/vm.json: EACCES" "create=$prun/new: EACCES" \
	"unlink=$prun/vm.json: EACCES"
check "QEMU cannot exec another program" expect "$BERTH_HOME/qemu-probe.txt" "exec=/bin/true: EACCES"
check "QEMU makes no IPv4, IPv6, packet or netlink socket (high bits or not): no TCP, no UDP" \
	expect "$BERTH_HOME/qemu-probe.txt" "tcp-connect=9: EPERM" "tcp-bind=0: EPERM" \
	"udp-socket: EPERM" "udp6-socket: EPERM" "raw-socket: EPERM" "packet-socket: EPERM" \
	"netlink-route: EPERM" "inet-socket-high: EPERM" "inet-socketpair: EPERM"
check "QEMU makes unix stream and seqpacket sockets and pairs (its chardevs), no datagram ones" \
	expect "$BERTH_HOME/qemu-probe.txt" "unix-stream-socket: ok" "unix-seqpacket-socket: ok" \
	"unix-socket-high: ok" "unix-socketpair: ok" "unix-dgram-socket: EPERM" \
	"unix-raw-socket: EPERM" "unix-dgram-socketpair: EPERM"
check "QEMU connects to no unix socket: none of the user's outside the run dir, none in it" \
	expect "$BERTH_HOME/qemu-probe.txt" "unix-connect=$BERTH_HOME/agent.sock: EPERM" \
	"unix-connect=$prun/other.sock: EPERM"
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
	clone-newns clone3 mount bpf keyctl init-module io-uring perf-event \
	"unix-connect=$prun/qemu-mux.sock" "rm-rf=$prun" >"$BERTH_HOME/self-probe.txt" 2>&1
check "berth-vmm's domain writes its run dir (atomically) and the evidence dir, and makes sockets" \
	expect "$BERTH_HOME/self-probe.txt" "write-atomic=$prun/vm.json: ok" "read=$prun/vm.json: ok" \
	"bind-unix=$prun/control.sock: ok" "write-atomic=$evidence/evidence.json: ok"
check "berth-vmm connects to QEMU's channel socket in its run dir" \
	expect "$BERTH_HOME/self-probe.txt" "unix-connect=$prun/qemu-mux.sock: ok"
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
finish
