#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# containerd-shim-berth-v2 end to end (docs/kubernetes.md) with a real containerd, started
# here with a private root and state, and ctr: an app image (berth deploy's) run as
# io.containerd.berth.v2 boots a Berth VM that answers RPC on its socket in the bundle and
# is refused a write outside its scope; two tasks side by side; the app's log through
# --log-uri; Exec refused with a reason; ctr task kill and delete leave no QEMU, berth-vmm
# or run dir; a shim killed with -9 is cleaned up by delete; host networking, privileged
# mode and host mounts refused; each boot's evidence where berth attest finds it.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (containerd)"
for p in containerd ctr docker; do
	command -v "$p" >/dev/null || skip_all "no $p: scripts/setup.sh installs containerd and docker.io"
done
require_artifacts
new_home
plan 25
tag=$$
state=/run/bctr$tag
sock=$state.sock
ctrd=$BERTH_HOME/containerd
A() { ctr -a "$sock" "$@"; }
bundle() { echo "$state/io.containerd.runtime.v2.task/default/$1"; }
# pgrep -f for [b]erth-vmm: the pattern does not match a shell whose own line holds it.
vmm_of() { pgrep -f "[b]erth-vmm run --name ctr-[0-9a-f]* --run-dir $(bundle "$1")/berth " ; }
qemu_of() { pgrep -f "[q]emu-system-x86_64.*default/$1/berth/" ; }
# gone ID: no berth-vmm, no QEMU, no bundle of task ID.
gone() { [ -z "$(vmm_of "$1")" ] && [ -z "$(qemu_of "$1")" ] && [ ! -e "$(bundle "$1")" ]; }
cleanup() {
	for t in n1 p1 pod1 x1 x2 x3; do
		A task kill -s SIGKILL "$t" >/dev/null 2>&1
		A task delete -f "$t" >/dev/null 2>&1
		A container rm "$t" >/dev/null 2>&1
	done
	[ -n "${events_pid:-}" ] && kill "$events_pid" 2>/dev/null
	[ -n "${ctrd_pid:-}" ] && kill "$ctrd_pid" 2>/dev/null && wait "$ctrd_pid" 2>/dev/null
	umount -l "$state"/io.containerd.runtime.v2.task/*/*/rootfs 2>/dev/null
	rm -rf "$state" "$sock" "$sock.ttrpc"
	docker rmi -f berth-e2e-ctr-notes:1 berth-e2e-ctr-probe:1 >/dev/null 2>&1
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
docker info >/dev/null 2>&1 || { not_ok "dockerd answers (scripts/start-dockerd.sh), to build the app images"; exit 1; }
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }

# --- containerd, and the app images -------------------------------------------------------------
mkdir -p "$ctrd"
cat >"$ctrd/config.toml" <<TOML
version = 2
root = "$ctrd/root"
state = "$state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
TOML
PATH=$bld/src/shim:$PATH BERTH_VMM=$vmm containerd --config "$ctrd/config.toml" >"$ctrd/log" 2>&1 &
ctrd_pid=$!
for ((i = 0; i < 100; i++)); do A version >/dev/null 2>&1 && break; sleep 0.1; done
check "containerd answers" A version
A events >"$ctrd/events.txt" 2>&1 &
events_pid=$!
import() {
	"$berth" deploy "$1" --tag "$2" >"$BERTH_HOME/deploy.log" 2>&1 &&
		docker save "$2" | A image import --base-name "${2%%:*}" - >/dev/null
}
cp -r "$src/apps/notes" "$BERTH_HOME/notes"
cp -r "$src/test/e2e/fixtures/fileprobe" "$BERTH_HOME/fileprobe"
import "$BERTH_HOME/notes" berth-e2e-ctr-notes:1 && import "$BERTH_HOME/fileprobe" berth-e2e-ctr-probe:1
check "berth deploy's images import into containerd" sh -c "ctr -a '$sock' image ls -q | grep -q berth-e2e-ctr-notes && ctr -a '$sock' image ls -q | grep -q berth-e2e-ctr-probe"
notes=$(A image ls -q | grep berth-e2e-ctr-notes | head -1)
probe=$(A image ls -q | grep berth-e2e-ctr-probe | head -1)

# rpc_ready ID APP: wait for the app in task ID to answer list-like calls on its socket.
call_sock() { out=$("$berth" rpc "$2" --socket "$(bundle "$1")/berth/rpc-0.sock" --export "$3" --input "${4:-{\}}" 2>&1); }
wait_rpc() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ -S "$(bundle "$1")/berth/rpc-0.sock" ] && call_sock "$1" "$2" "$3" "${4:-{\}}" && return 0
		sleep 0.2
	done
	return 1
}

# --- two tasks ----------------------------------------------------------------------------------
A run -d --runtime io.containerd.berth.v2 --log-uri "file://$BERTH_HOME/n1.log" "$notes" n1 >"$BERTH_HOME/run.log" 2>&1
check "ctr run --runtime io.containerd.berth.v2 starts the task" sh -c "ctr -a '$sock' task ls | grep -qE '^n1 +[0-9]+ +RUNNING'"
A run -d --runtime io.containerd.berth.v2 "$probe" p1 >>"$BERTH_HOME/run.log" 2>&1
check "a second task beside it" sh -c "ctr -a '$sock' task ls | grep -qE '^p1 +[0-9]+ +RUNNING'"
if wait_rpc n1 notes add_note '{"text":"from containerd"}'; then ok "the app answers on bundle/berth/rpc-0.sock"; else not_ok "the app answers on bundle/berth/rpc-0.sock"; echo "$out" | diag; diag < "$(bundle n1)/berth/vmm.log"; fi
call_sock n1 notes list_notes
says "  add_note, then list_notes has it" 'any(n["text"] == "from containerd" for n in r["notes"])'
check "the task's pid is its berth-vmm" test "$(A task ls | awk '$1 == "n1" {print $2}')" = "$(vmm_of n1)"
check "  named after a digest of namespace and id" test -e "$BERTH_HOME/containerd/ctr-$(printf 'default/n1' | sha256sum | cut -c1-16).img"
wait_rpc p1 fileprobe write '{"path":"/workspace/fileprobe/a.txt","text":"in"}'
says "the second app writes in its scope" 'r["ok"] is True'
check "each is its own berth-vmm and QEMU" sh -c 'test -n "$1" -a -n "$2" -a -n "$3" -a -n "$4"' - \
	"$(vmm_of n1)" "$(vmm_of p1)" "$(qemu_of n1)" "$(qemu_of p1)"
call_sock p1 fileprobe write '{"path":"/workspace/elsewhere.txt","text":"x"}'
says "and gets EACCES from Landlock outside it" 'r["ok"] is False and r["error"] == "EACCES"'
check "the app's log comes back through the log URI" grep -q '^\[notes\] \[agent-init\] landlock restrict_self() status: ruleset=FullyEnforced' "$BERTH_HOME/n1.log"
boot=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bootId"])' "$(bundle n1)/berth/vm.json")
out=$(A task exec --exec-id sh1 n1 /bin/sh 2>&1)
check "ctr task exec is refused, saying why" sh -c "echo '$out' | grep -q 'no shell to exec'"

# --- kill and delete ------------------------------------------------------------------------------
A task kill n1
for ((i = 0; i < 300; i++)); do A task ls | grep -qE '^n1 .*STOPPED' && break; sleep 0.2; done
check "ctr task kill: the task stops (berth-vmm stops the VM on SIGTERM)" sh -c "ctr -a '$sock' task ls | grep -qE '^n1 .*STOPPED'"
A task delete n1 >/dev/null 2>&1
check "ctr task delete: no berth-vmm, no QEMU, no bundle or run dir left" gone n1
# The VM's name: ctr- and 16 hex digits of sha256("<namespace>/<id>").
n1_vm=ctr-$(printf 'default/n1' | sha256sum | cut -c1-16)
check "nor its state disk ($n1_vm.img)" test ! -e "$BERTH_HOME/containerd/$n1_vm.img"
check "the shim published the task's create, start, exit and delete to containerd" sh -c '
	for t in create start exit delete; do grep -qE "/tasks/$t .*\"?n1" "$1" || exit 1; done' - "$ctrd/events.txt"
"$berth" attest "$boot" >"$BERTH_HOME/attest.json" 2>&1
check "the boot's evidence is where berth attest finds it (runtime berth-vmm, ACTIVE)" python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not(r["boot"]["runtime"]=="berth-vmm" and r["enforcement"]["status"]=="ACTIVE"))' "$BERTH_HOME/attest.json"
A container rm n1 >/dev/null 2>&1

shim=$(pgrep -f "[c]ontainerd-shim-berth-v2 .*-id p1 " | head -1)
kill -9 "$shim"
for ((i = 0; i < 300; i++)); do
	gone p1 && break
	sleep 0.2
done
check "a shim killed with -9: containerd's delete removes its berth-vmm, QEMU and bundle" gone p1
A container rm p1 >/dev/null 2>&1

# --- a pod's sandbox container -----------------------------------------------------------------
A run -d --annotation io.kubernetes.cri.container-type=sandbox --runtime io.containerd.berth.v2 "$notes" pod1 >/dev/null 2>&1
check "a pod's sandbox (pause) container runs as a placeholder: no VM" sh -c 'ctr -a "$1" task ls | grep -qE "^pod1 +[0-9]+ +RUNNING" && test -z "$2"' - "$sock" "$(vmm_of pod1)"
A task kill pod1
for ((i = 0; i < 100; i++)); do A task ls | grep -qE '^pod1 .*STOPPED' && break; sleep 0.1; done
A task delete pod1 >/dev/null 2>&1
check "  and stops when killed, leaving nothing" gone pod1
A container rm pod1 >/dev/null 2>&1

# --- refused specs -------------------------------------------------------------------------------
out=$(A run -d --net-host --runtime io.containerd.berth.v2 "$notes" x1 2>&1)
check "host networking is refused, saying what to do" sh -c "echo '$out' | grep -q 'the spec asks for host networking (no network namespace): a Berth sandbox has no network but its egress dialer'"
out=$(A run -d --privileged --runtime io.containerd.berth.v2 "$notes" x2 2>&1)
check "a privileged spec is refused" sh -c "echo '$out' | grep -q 'the spec asks for a privileged container (CAP_SYS_ADMIN)'"
out=$(A run -d --mount type=bind,src=/etc,dst=/hostetc,options=rbind:ro --runtime io.containerd.berth.v2 "$notes" x3 2>&1)
check "a host mount is refused" sh -c "echo '$out' | grep -q 'the spec mounts /etc from the host at /hostetc'"
check "and nothing of them is left running" sh -c 'test -z "$1" -a -z "$2"' - \
	"$(pgrep -f '[c]ontainerd-shim-berth-v2')" "$(pgrep -f '[b]erth-vmm run --name ctr-')"
finish
