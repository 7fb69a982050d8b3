# SPDX-License-Identifier: Apache-2.0
# TAP helpers and fixtures for the end-to-end tests (sourced).
# Environment (set by meson): BERTH_SOURCE_ROOT, BERTH_BUILD_DIR, BERTH_TEST_ARTIFACTS.
set -u
src=${BERTH_SOURCE_ROOT:?}
bld=${BERTH_BUILD_DIR:?}
artifacts=${BERTH_TEST_ARTIFACTS:-$src/out/artifacts}
berth=$bld/src/berth/berth
vmm=$bld/src/berth-vmm/berth-vmm
tap_n=0
tap_failed=0

plan() { echo "1..$1"; }
ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1)); echo "not ok $tap_n - $*"; }
diag() { sed 's/^/# /'; }
# check DESCRIPTION COMMAND...: one TAP line from a command's exit status.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
finish() { exit $((tap_failed > 0)); }

# kill_home_vms: SIGKILL the berth-vmm of every VM in this test's $BERTH_HOME (QEMU
# follows its supervisor), and no one else's: tests and engineers may run VMs side by side.
kill_home_vms() {
	local f
	for f in "$BERTH_HOME"/run/vm/*/berth-vmm.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
	done
	return 0
}

# A private ~/.berth for this test, removed at exit.
new_home() {
	export BERTH_HOME
	BERTH_HOME=$(mktemp -d "${TMPDIR:-/tmp}/berth-e2e.XXXXXX")
	trap 'rm -rf "$BERTH_HOME"' EXIT
}

require_artifacts() {
	for f in vmlinux initrd.cpio rootfs.erofs; do
		[ -f "$artifacts/$f" ] || skip_all "no $artifacts/$f: run scripts/build-artifacts.sh"
	done
}

# Install the artifacts into $BERTH_HOME through the real CLI.
# The suite runs on the cold path by default; e2e-warm makes and restores snapshots.
install_artifacts() {
	"$berth" vm install --from "$artifacts" --no-download --no-snapshot --vmm "$vmm" >"$BERTH_HOME/install.log" 2>&1
}

# wait_state NAME STATE [SECONDS]: poll vm.json until the VM reaches STATE.
wait_state() {
	local name=$1 want=$2 limit=${3:-180} i
	for ((i = 0; i < limit * 5; i++)); do
		if [ -f "$BERTH_HOME/run/vm/$name/vm.json" ] &&
			python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("state") != sys.argv[2])' \
				"$BERTH_HOME/run/vm/$name/vm.json" "$want" 2>/dev/null; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# control NAME LINE...: send lines on the VM's control socket, print what comes back
# within a few seconds (events and replies, one JSON object a line).
control() {
	local name=$1
	shift
	python3 "$src/test/e2e/control-client.py" "$BERTH_HOME/run/vm/$name/control.sock" "$@"
}

vm_pid() { cat "$BERTH_HOME/run/vm/$1/berth-vmm.pid" 2>/dev/null; }
qemu_pid() { pgrep -f "qemu-system-x86_64.*$BERTH_HOME/run/vm/$1/" | head -1; }

# start_dev DIR LOG [ARGS...]: run `berth dev [ARGS...]` in DIR in the background, wait for
# "VM ready"; its pid is $dev_pid.
start_dev() {
	local dir=$1 log=$2 i
	shift 2
	# Emptied here, not in the background child: until it runs, the last run's log
	# (and its "VM ready") would still be there to read.
	: >"$log"
	(cd "$dir" && exec "$berth" dev "$@" >"$log" 2>&1) &
	dev_pid=$!
	for ((i = 0; i < 900; i++)); do
		grep -q '^VM ready in' "$log" && return 0
		kill -0 $dev_pid 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

# stop_dev: Ctrl-C the background berth dev and wait for it.
stop_dev() {
	kill -INT "$dev_pid" 2>/dev/null
	wait "$dev_pid" 2>/dev/null
}

# wait_for LOG PATTERN [SECONDS]
wait_for() {
	local i
	for ((i = 0; i < ${3:-120} * 5; i++)); do
		grep -q "$2" "$1" && return 0
		sleep 0.2
	done
	return 1
}

# call APP EXPORT [JSON]: the export's answer, or the CLI's error, in $out.
call() { out=$("$berth" rpc "$1" --export "$2" --input "${3:-{\}}" 2>&1); }
# says WHAT PYTHON-EXPRESSION: the last answer, parsed as `r`, passes the expression.
says() {
	if python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not eval(sys.argv[2]))' "$out" "$2" 2>/dev/null; then
		ok "$1"
	else
		not_ok "$1"
		echo "$out" | diag
	fi
}

# netns_up: the network namespace $ns and a veth pair into it ($vhost here, $vns there),
# 198.51.100.1 <-> 198.51.100.2: the far end for the egress tests. The caller's cleanup
# deletes $vhost and $ns.
netns_up() {
	ip netns add "$ns"
	ip link add "$vhost" type veth peer name "$vns"
	ip link set "$vns" netns "$ns"
	ip addr add 198.51.100.1/24 dev "$vhost"
	ip link set "$vhost" up
	ip -n "$ns" addr add 198.51.100.2/24 dev "$vns"
	ip -n "$ns" link set "$vns" up
	ip -n "$ns" link set lo up
}

# egress_origin_up WORK: fixtures/egress-origin.py in $ns on 198.51.100.2 (plain HTTP on
# :80, HTTPS with a throwaway certificate for allowed.test, WORK/cert.pem, on :443 and
# :8443), kept alive by fd 9 on WORK/origin.in; its pid in $origin_pid. Fails when it does
# not say ready (its output is WORK/origin.out).
egress_origin_up() {
	local work=$1
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=allowed.test \
		-addext subjectAltName=DNS:allowed.test -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1
	mkfifo "$work/origin.in"
	ip netns exec "$ns" python3 "$src/test/e2e/fixtures/egress-origin.py" 198.51.100.2 \
		"$work/cert.pem" "$work/key.pem" <"$work/origin.in" >"$work/origin.out" 2>&1 &
	origin_pid=$!
	exec 9>"$work/origin.in"
	wait_for "$work/origin.out" '^ready' 20
}
