#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A dead boot fails at once, says why, and leaves nothing behind. A stand-in QEMU
# (BERTH_QEMU) plays a KVM internal error that leaves QEMU paused, an early exit, a guest
# panic and a boot that never shows a sign of life; then real VMs are interrupted while
# they boot (Ctrl-C to berth dev, SIGTERM to berth mcp as MCP clients send it), and a VM
# that never answered is stopped at once.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
unset BERTH_ACCEL BERTH_QEMU
plan 29
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
fake=$bld/test/e2e/fake-qemu
app=$BERTH_HOME/notes
cp -r "$src/apps/notes" "$app"
log=$BERTH_HOME/dev.log
# The probe sees a KVM faster than TCG, so auto picks KVM and the boot below runs the
# stand-in's KVM; without a usable /dev/kvm auto picks TCG, which the stand-in fails alike.
export BERTH_FAKE_PROBE_TCG=ok:300 BERTH_FAKE_PROBE_KVM=ok:10

# nothing_left NAME: no berth-vmm or QEMU of this test's home runs, and NAME's run dir is gone.
nothing_left() {
	! pgrep -f "$BERTH_HOME/run/vm/$1/" >/dev/null && ! pgrep -f "^$fake" >/dev/null &&
		! pgrep -f -- "berth-vmm run --name $1 .*$BERTH_HOME/" >/dev/null &&
		test ! -e "$BERTH_HOME/run/vm/$1"
}

# fault MODE WANT: berth dev with the stand-in playing MODE must fail within a minute
# (a dead boot used to wait out the three-minute readiness timeout), print WANT and
# leave nothing behind.
fault() {
	local mode=$1 want=$2 rc=0
	(cd "$app" && BERTH_QEMU=$fake BERTH_FAKE_RUN=$mode timeout 60 "$berth" dev >"$log" 2>&1) || rc=$?
	if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then ok "$mode: berth dev fails"; else not_ok "$mode: berth dev fails (exit $rc)"; diag <"$log"; fi
	check "$mode: it says why" grep -qF -- "$want" "$log"
	check "$mode: it shows the last lines of berth-vmm's log" grep -q "berth-vmm's log, last lines" "$log"
	if nothing_left berth-dev-notes; then ok "$mode: no process or run dir is left"; else not_ok "$mode: no process or run dir is left"; pgrep -af "$BERTH_HOME" | diag; fi
}

fault kvm-internal-error "QEMU reported: KVM internal error (Suberror: 1)"
check "kvm-internal-error: the fix is named" grep -q -- "use --accel auto" "$log"
fault exit-early "QEMU exited with status 1 before the guest powered off"
check "exit-early: QEMU's own error is shown" grep -qF "qemu: qemu-system-x86_64: -drive id=rootfs: Could not open: stand-in" "$log"
fault panic "the guest kernel panicked: [    0.912345] Kernel panic - not syncing: VFS"
check "the failed boot's logs are kept under ~/.berth/runs" grep -q "the logs of that boot are kept in $BERTH_HOME/runs/" "$log"

# A boot with no sign of life: berth-vmm run directly, with a short stall limit.
rc=0
BERTH_QEMU=$fake BERTH_FAKE_RUN=hang "$vmm" run --name stall --boot-stall-timeout 2 2>"$BERTH_HOME/stall.err" || rc=$?
check "a silent boot starts" test "$rc" = 0
check "and is failed as stalled" wait_state stall boot_failed 30
check "with the reason in vm.json" grep -q '"reason": "no progress on the console or the control port for 2 s' "$BERTH_HOME/run/vm/stall/vm.json"
stall_pid=$(vm_pid stall)
timeout 10 tail --pid="$stall_pid" -f /dev/null
"$berth" vm status >"$BERTH_HOME/status.out" 2>&1
check "berth vm status reports the failure it cleaned up" grep -q 'cleaned up stale run dir of "stall" .*no progress on the console' "$BERTH_HOME/status.out"

# A VM that never answered its control port is stopped at once, not after the timeout.
BERTH_QEMU=$fake BERTH_FAKE_RUN=hang "$vmm" run --name quiet 2>/dev/null
wait_state quiet booting 10
"$berth" vm stop quiet >"$BERTH_HOME/stop.out" 2>&1
check "berth vm stop of a VM that never answered stops it cleanly" grep -q '^stopped "quiet" in ' "$BERTH_HOME/stop.out"
if nothing_left quiet; then ok "and leaves nothing"; else not_ok "and leaves nothing"; diag <"$BERTH_HOME/stop.out"; fi

# A guest that floods its console: console.log is a file on the host, so it stops at its cap.
BERTH_QEMU=$fake BERTH_FAKE_RUN=console-flood "$vmm" run --name flood 2>/dev/null
flood_log=$BERTH_HOME/run/vm/flood/console.log
for ((i = 0; i < 100; i++)); do
	grep -q 'the console reached 32 MiB' "$BERTH_HOME/run/vm/flood/vmm.log" 2>/dev/null && break
	sleep 0.2
done
check "a guest that writes 40 MiB to its console leaves at most 32 MiB in console.log" \
	test "$(stat -c %s "$flood_log" 2>/dev/null || echo 0)" -le $((32 * 1024 * 1024 + 256)) -a \
	"$(stat -c %s "$flood_log" 2>/dev/null || echo 0)" -ge $((32 * 1024 * 1024))
check "and says there where it stopped" sh -c "tail -c 300 '$flood_log' | grep -q 'the console reached 32 MiB'"
"$berth" vm stop flood >/dev/null 2>&1

# --- real VMs, interrupted while they boot --------------------------------------------------
unset BERTH_FAKE_PROBE_TCG BERTH_FAKE_PROBE_KVM
(cd "$app" && exec "$berth" dev >"$log" 2>&1) &
dev_pid=$!
wait_state berth-dev-notes booting 120
kill -INT $dev_pid
rc=0
wait $dev_pid || rc=$?
check "Ctrl-C during berth dev's boot: it exits 130" test "$rc" = 130
check "and says it stops the VM" grep -q "interrupted during the boot; stopping the VM" "$log"
if nothing_left berth-dev-notes; then ok "and no VM is left"; else not_ok "and no VM is left"; diag <"$log"; fi

# An MCP client closes stdin and sends SIGTERM, as the official SDK's stdio transport does.
mcp_log=$BERTH_HOME/mcp.log
mkfifo "$BERTH_HOME/mcp.in"
"$berth" mcp --app notes --app-dir "$app" <"$BERTH_HOME/mcp.in" >/dev/null 2>"$mcp_log" &
mcp_pid=$!
exec 7>"$BERTH_HOME/mcp.in"
wait_state berth-mcp-notes booting 120
kill -TERM $mcp_pid
rc=0
timeout 30 tail --pid=$mcp_pid -f /dev/null || rc=$?
check "SIGTERM during berth mcp's own boot: it exits promptly" test "$rc" = 0
exec 7>&-
wait $mcp_pid 2>/dev/null
check "and says it stops the VM" grep -q "stopping the VM" "$mcp_log"
if nothing_left berth-mcp-notes; then ok "and no VM is left"; else not_ok "and no VM is left"; diag <"$mcp_log"; fi
finish
