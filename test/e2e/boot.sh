#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth-vmm boots the pinned kernel and root image to the minimal init's power-off,
# and refuses a kernel or root image that differs from its pins.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 8

check "berth vm install --from the build output" install_artifacts || diag < "$BERTH_HOME/install.log"

console=$BERTH_HOME/console.log
"$vmm" run --name e2e-boot --foreground --console "$console" 2>"$BERTH_HOME/vmm.err" &
vmm_pid=$!
if wait_state e2e-boot running && "$berth" vm stop e2e-boot >/dev/null && wait $vmm_pid; then
	ok "berth-vmm boots the VM and it powers off cleanly when stopped"
else
	not_ok "berth-vmm boots the VM and it powers off cleanly when stopped"
	diag < "$BERTH_HOME/vmm.err"
	tail -20 "$console" | diag
fi
check "the guest's berth-init ran on the pinned kernel" grep -q '"kernel":"6.12' "$console"
check "the guest kernel reports Landlock ABI 6 or newer" grep -Eq '"landlockAbi":([6-9]|[1-9][0-9])' "$console"

# A run dir whose path holds a comma: QEMU's option lists take "," as a separator, so the
# paths in them must be escaped or QEMU would read an option out of a directory name.
comma_dir=$BERTH_HOME/a,b=c/run
mkdir -p "$BERTH_HOME/a,b=c"
"$vmm" run --name e2e-comma --run-dir "$comma_dir" 2>"$BERTH_HOME/vmm-comma.err"
for ((i = 0; i < 600; i++)); do
	grep -q '"state": "running"' "$comma_dir/vm.json" 2>/dev/null && break
	sleep 0.2
done
if grep -q '"state": "running"' "$comma_dir/vm.json" 2>/dev/null; then
	ok "a VM whose run dir path holds a comma boots"
else
	not_ok "a VM whose run dir path holds a comma boots"
	diag <"$BERTH_HOME/vmm-comma.err"
	diag <"$comma_dir/vmm.log"
fi
kill "$(cat "$comma_dir/berth-vmm.pid" 2>/dev/null)" 2>/dev/null
for ((i = 0; i < 150; i++)); do [ -e "$comma_dir/berth-vmm.pid" ] || break; sleep 0.2; done

# Tamper with an installed artifact: flip one byte, keep the size.
tamper() {
	local f=$1
	chmod u+w "$f"
	printf '\x42' | dd of="$f" bs=1 seek=4096 conv=notrunc status=none
}
kernel=$(ls "$BERTH_HOME"/vm/kernel/sha256/*/vmlinux)
cp "$kernel" "$BERTH_HOME/vmlinux.good"
tamper "$kernel"
if timeout 60 "$vmm" run --name e2e-boot2 --foreground --console "$BERTH_HOME/console2.log" 2>"$BERTH_HOME/vmm2.err"; then
	not_ok "a tampered kernel is refused"
else
	check "a tampered kernel is refused" grep -q 'kernel .* does not match the pin' "$BERTH_HOME/vmm2.err"
fi
check "nothing booted from the tampered kernel" test ! -s "$BERTH_HOME/console2.log"
cp "$BERTH_HOME/vmlinux.good" "$kernel"

rootfs=$(ls "$BERTH_HOME"/vm/rootfs/rootfs-*.erofs)
tamper "$rootfs"
if timeout 60 "$vmm" run --name e2e-boot3 --foreground --console "$BERTH_HOME/console3.log" 2>"$BERTH_HOME/vmm3.err"; then
	not_ok "a tampered root image is refused"
else
	check "a tampered root image is refused" grep -q 'rootfs .* does not match the pin' "$BERTH_HOME/vmm3.err"
fi
finish
