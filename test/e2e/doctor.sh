#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth doctor --sandbox vm on a good setup and on broken ones, each in its own BERTH_HOME.
# On the good setup the doctor's accelerator check runs berth-vmm's probe boots.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
unset BERTH_SANDBOX BERTH_VMM
plan 47

out=$BERTH_HOME/out
pybin=$(command -v python3)
empty_bin=$BERTH_HOME/empty-bin
mkdir -p "$empty_bin"

skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP $2"; }

# doctor ARGS...: run berth doctor, output in $out, exit status in $rc.
doctor() {
	rc=0
	"$berth" doctor "$@" >"$out" 2>"$out.err" || rc=$?
}
has() { grep -qF -- "$1" "$out"; }
shows() {
	local what=$1
	shift
	if has "$1"; then ok "$what"; else not_ok "$what"; diag <"$out"; fi
}
exits() {
	if [ "$rc" = "$1" ]; then ok "$2 (exit $1)"; else not_ok "$2 (exit $rc, wanted $1)"; diag <"$out"; fi
}

# json_agrees: stdout is one JSON document that says what the exit status says.
json_agrees() {
	"$pybin" - "$rc" "$out" <<'EOF'
import json, sys
rc, path = int(sys.argv[1]), sys.argv[2]
with open(path) as f:
    d = json.load(f)
ids = [c["id"] for c in d["checks"]]
assert d["schemaVersion"] == 1 and d["sandbox"] == "vm", d
assert ids == ["qemu", "berth-vmm", "pins", "artifacts", "landlock", "accelerator"], ids
assert all(c["status"] in ("ok", "warn", "fail", "unknown") for c in d["checks"]), d
assert all("remedy" in c for c in d["checks"] if c["status"] in ("warn", "fail")), d
assert d["ready"] == (rc == 0), (d["ready"], rc)
assert d["ready"] == all(c["status"] in ("ok", "warn") for c in d["checks"]), d
if d["ready"]:
    assert d["accelerator"] in ("kvm", "tcg") and d["reasons"] == [], d
    assert d["verdict"].startswith("VM sandbox: READY ("), d
    # READY only after a VM of the chosen kind booted: the probe's verdict says so.
    assert d["accel"]["chosen"] == d["accelerator"], d
    assert d["accel"]["probe"]["trials"][d["accelerator"]]["booted"] is True, d
else:
    assert d["accelerator"] is None and d["reasons"], d
    assert d["verdict"] == "VM sandbox: NOT READY (" + "; ".join(d["reasons"]) + ")", d
EOF
}

eval "$("$pybin" - "$vmm" <<'EOF'
import json, subprocess, sys
p = json.loads(subprocess.run([sys.argv[1], "pins", "--json"], check=True,
                              capture_output=True, text=True).stdout)
for k in ("kernel", "initrd", "rootfs"):
    print(f"pin_{k}={p[k]['sha256']}")
EOF
)"
vmdir=$BERTH_HOME/vm
kernel_path=$vmdir/kernel/sha256/$pin_kernel/vmlinux
initrd_path=$vmdir/kernel/sha256/$pin_kernel/initrd-$pin_initrd.cpio
rootfs_path=$vmdir/rootfs/rootfs-$pin_rootfs.erofs

# A PATH with QEMU and nothing else.
qemu_bin=$BERTH_HOME/qemu-bin
mkdir -p "$qemu_bin"
ln -s "$(command -v qemu-system-x86_64)" "$qemu_bin/qemu-system-x86_64"

export BERTH_VMM=$vmm

# (a) Nothing installed.
doctor
exits 1 "nothing installed: not ready"
shows "nothing installed: artifacts fail" "✘ Pinned kernel and rootfs in ~/.berth/vm $vmdir: kernel missing; initrd missing; rootfs missing"
shows "nothing installed: remedy is berth vm install" "      → run \`berth vm install\`"
shows "nothing installed: verdict" "VM sandbox: NOT READY (kernel, initrd, rootfs not installed)"
shows "berth-vmm check shows its path" "✔ berth-vmm $(realpath "$vmm")"
shows "pins check shows berth-vmm's pins" "✔ berth-vmm's pinned kernel and rootfs kernel ${pin_kernel:0:16}…, initrd ${pin_initrd:0:16}…, rootfs ${pin_rootfs:0:16}…, linux "
shows "qemu check finds microvm" "✔ QEMU with microvm "
shows "nothing installed: the accelerator is not probed" "? Accelerator not probed: a probe boots the pinned kernel"
shows "nothing installed: nor counted ready" "      → fix what the checks above say"
doctor --json
check "nothing installed: --json parses and agrees with exit 1" json_agrees

# (b) The build's artifacts, installed where berth-vmm's own pins put them.
mkdir -p "${kernel_path%/*}" "${rootfs_path%/*}"
cp --reflink=auto "$artifacts/vmlinux" "$kernel_path"
cp --reflink=auto "$artifacts/initrd.cpio" "$initrd_path"
cp --reflink=auto "$artifacts/rootfs.erofs" "$rootfs_path"
artifacts_pinned=1
for f in "$kernel_path" "$initrd_path" "$rootfs_path"; do
	h=$(sha256sum "$f" | cut -d' ' -f1)
	case $f in *"$h"*) ;; *) artifacts_pinned= ;; esac
done
landlock_ok=1
doctor
has "✘ Host Landlock" && landlock_ok=
if [ -z "$artifacts_pinned" ]; then
	for i in 1 2 3 4 5 6 7; do skip "good setup ($i)" "$artifacts is not what $vmm pins"; done
elif [ -z "$landlock_ok" ]; then
	for i in 1 2 3 4 5 6 7; do skip "good setup ($i)" "this host's Landlock does not enforce"; done
else
	exits 0 "good setup: ready"
	shows "good setup: artifacts ok" "✔ Pinned kernel and rootfs in ~/.berth/vm $vmdir: kernel, initrd and rootfs match the pins"
	shows "good setup: landlock enforcing" "✔ Host Landlock (for confining berth-vmm) ABI "
	shows "good setup: the probe boot under TCG is shown with its time" "      tcg: booted the probe in "
	shows "good setup: so is KVM's, or why it was not tried" "      kvm: "
	if has "Accelerator (KVM)"; then ready_verdict="VM sandbox: READY (KVM)"; else ready_verdict="VM sandbox: READY (TCG emulation, slower)"; fi
	shows "good setup: verdict" "$ready_verdict"
	doctor --json
	check "good setup: --json parses and agrees with exit 0" json_agrees
fi
check "--json prints nothing else on stdout" "$pybin" -c 'import json,sys; json.load(open(sys.argv[1]))' "$out"

# (c) A tampered rootfs: same size, one byte changed.
printf '\x42' | dd of="$rootfs_path" bs=1 seek=8192 conv=notrunc status=none
bad=$(sha256sum "$rootfs_path" | cut -d' ' -f1)
doctor
exits 1 "tampered rootfs: not ready"
shows "tampered rootfs: names both hashes" "rootfs rootfs/rootfs-$pin_rootfs.erofs has sha256 $bad, expected $pin_rootfs"
shows "tampered rootfs: remedy is --force" "      → run \`berth vm install --force\` to replace rootfs"
shows "tampered rootfs: verdict" "VM sandbox: NOT READY (rootfs not matching the pins)"
doctor --json
check "tampered rootfs: --json agrees" json_agrees
rm -f "$rootfs_path"
doctor
shows "missing rootfs alone: named" "$vmdir: rootfs missing"
cp --reflink=auto "$artifacts/rootfs.erofs" "$rootfs_path"

# (d) BERTH_VMM names a missing file and no other berth-vmm can be found: a copy of berth
# outside the build tree, and a PATH with only QEMU in it.
mkdir -p "$BERTH_HOME/bin"
cp "$berth" "$BERTH_HOME/bin/berth"
rc=0
BERTH_VMM=$BERTH_HOME/no-such-vmm PATH=$qemu_bin "$BERTH_HOME/bin/berth" doctor >"$out" 2>&1 || rc=$?
exits 1 "no berth-vmm: not ready"
shows "no berth-vmm: fails naming BERTH_VMM" "✘ berth-vmm not found: BERTH_VMM=$BERTH_HOME/no-such-vmm is not an executable file"
shows "no berth-vmm: remedy" "berth vm install --vmm PATH"
shows "no berth-vmm: pins unknown" "? berth-vmm's pinned kernel and rootfs not checked"
shows "no berth-vmm: verdict" "VM sandbox: NOT READY (no berth-vmm)"
rc=0
BERTH_VMM=$BERTH_HOME/no-such-vmm PATH=$qemu_bin "$BERTH_HOME/bin/berth" doctor --json >"$out" 2>/dev/null || rc=$?
check "no berth-vmm: --json agrees" json_agrees

# A BERTH_VMM that is skipped while another berth-vmm is found is a warning, not a failure.
mkdir -p "$vmdir/bin"
cp "$vmm" "$vmdir/bin/berth-vmm"
rc=0
BERTH_VMM=$BERTH_HOME/no-such-vmm "$BERTH_HOME/bin/berth" doctor >"$out" 2>&1 || rc=$?
shows "skipped BERTH_VMM: warning" "! berth-vmm $vmdir/bin/berth-vmm (skipped: BERTH_VMM=$BERTH_HOME/no-such-vmm is not an executable file)"
rm -rf "$vmdir/bin"

# vm.vmm in ~/.berth/config.json is where berth looks after BERTH_VMM.
printf '{"vm": {"vmm": "%s"}}\n' "$vmm" >"$BERTH_HOME/config.json"
rc=0
env -u BERTH_VMM PATH=$qemu_bin "$BERTH_HOME/bin/berth" doctor >"$out" 2>&1 || rc=$?
shows "vm.vmm from the config file is used" "✔ berth-vmm $(realpath "$vmm")"
printf '{"sandbox": "docker"}\n' >"$BERTH_HOME/config.json"
doctor
shows "sandbox from the config file is used" "Docker sandbox: "
rm -f "$BERTH_HOME/config.json"

# (e) No QEMU in PATH; then a QEMU without microvm.
PATH=$empty_bin doctor
exits 1 "no qemu: not ready"
shows "no qemu: fails" "✘ QEMU with microvm qemu-system-x86_64 is not in PATH"
shows "no qemu: remedy" "      → install QEMU: sudo apt-get install qemu-system-x86"
fake_bin=$BERTH_HOME/fake-qemu
mkdir -p "$fake_bin"
printf '#!/bin/sh\necho "Supported machines are:"\necho "pc                   Standard PC"\n' >"$fake_bin/qemu-system-x86_64"
chmod +x "$fake_bin/qemu-system-x86_64"
PATH=$fake_bin doctor
shows "qemu without microvm: fails" "✘ QEMU with microvm $fake_bin/qemu-system-x86_64 has no microvm machine type"

# (g) --sandbox docker, and the sandbox choice itself.
PATH=$empty_bin doctor --sandbox docker
exits 1 "--sandbox docker without a docker program: not ready"
shows "--sandbox docker: says so" "✘ docker not found"
shows "--sandbox docker: says what to do" "      → no docker program in \$PATH: install Docker (Debian: apt-get install docker.io) or use --runtime vm"
shows "--sandbox docker: names the enforcing kernel, the host's, and its Landlock ABI" "✔ Enforcing kernel (the host's) Linux $(uname -r), Landlock ABI"
shows "--sandbox docker: verdict" "Docker sandbox: NOT READY (no docker program)"
rc=0
BERTH_SANDBOX=docker PATH=$empty_bin "$berth" doctor --json >"$out" 2>/dev/null || rc=$?
check "BERTH_SANDBOX=docker --json says not ready, check by check" "$pybin" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sandbox"] == "docker" and d["ready"] is False
assert [c["id"] for c in d["checks"]] == ["docker", "berth-vmm", "pins", "engine", "kernel", "image"]
assert sys.argv[2] == "1"' "$out" "$rc"
if docker info >/dev/null 2>&1; then
	doctor --sandbox docker
	exits 0 "--sandbox docker with dockerd running: ready"
	shows "--sandbox docker: dockerd answers" "✔ Docker engine dockerd"
	shows "--sandbox docker: the verdict says whose kernel enforces" "Docker sandbox: READY (the host's kernel enforces, not Berth's pinned one)"
else
	for i in 1 2 3; do skip "--sandbox docker with dockerd running" "no dockerd answers"; done
fi
doctor --sandbox kvm
exits 2 "--sandbox with an unknown value is a usage error"
finish
