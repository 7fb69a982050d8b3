#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the guest kernel artifacts: Debian's cloud kernel as the uncompressed vmlinux that
# QEMU's microvm boots through PVH, and the initramfs that loads the modules the cloud kernel
# lacks and switches to the erofs root. Usage: vm/kernel/build.sh OUT_DIR
# Writes OUT_DIR/vmlinux, OUT_DIR/initrd.cpio, OUT_DIR/manifest-kernel.json and
# OUT_DIR/initrd-tree.lock, the record of every file of the initramfs (vm/tree-lock.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: vm/kernel/build.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(now_ms)

read_lock() { awk -v n="$1" '$1 == n { print $2 }' "$here/kernel.lock"; }
kpkg=$(awk '!/^#/ && $1 ~ /^linux-image-/ { print $1 }' "$here/kernel.lock")
kver=$(read_lock "$kpkg")
bbver=$(read_lock busybox-static)
debs="$BERTH_CACHE/debs"

# The archive keeps only the newest kernel of a series; when the locked one is gone,
# take what the series' meta package points at now and say so.
if ! apt-cache show "$kpkg=$kver" >/dev/null 2>&1; then
	cur=$(apt-cache depends linux-image-6.12-cloud-amd64 2>/dev/null |
		awk '/Depends: linux-image-6.12/ { print $2; exit }')
	[ -n "$cur" ] || die "neither $kpkg=$kver nor linux-image-6.12-cloud-amd64 is in the apt cache: run 'apt-get update'"
	drift "kernel package" "$kpkg $kver" "$cur-unsigned (candidate)"
	kpkg=$cur-unsigned
	kver=$(apt-cache policy "$kpkg" | awk '/Candidate:/ { print $2 }')
fi
kdeb=$(fetch_deb "$kpkg" "$kver" "$debs")
bbdeb=$(fetch_deb busybox-static "$bbver" "$debs")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kdeb" "$work/k"
dpkg-deb -x "$bbdeb" "$work/bb"
release=$(ls "$work/k/lib/modules")
depmod -b "$work/k" "$release"

# The vmlinuz is a zstd bzImage; the ELF inside boots through PVH, 0.35-0.7 s faster.
python3 "$here/extract-vmlinux.py" "$work/k/boot/vmlinuz-$release" "$out/vmlinux.tmp"
mv "$out/vmlinux.tmp" "$out/vmlinux"

# The initramfs: busybox, /init, and the modules unpacked here (busybox insmod and .xz don't mix).
st="$work/initramfs"
mkdir -p "$st"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$work/bb/bin/busybox" "$st/bin/busybox"
for applet in sh mount umount insmod switch_root poweroff sleep seq cat mkdir; do
	ln -s busybox "$st/bin/$applet"
done
install -m 0755 "$here/initramfs-init" "$st/init"
: > "$st/modules.list"
modules=()
for m in $(grep -v '^#' "$here/modules.list"); do
	while read -r ko; do
		n=$(basename "$ko" .ko.xz)
		# A soft dependency that needs SSE4.2, which TCG's default CPU lacks; libcrc32c
		# falls back to the generic code.
		[ "$n" = crc32c-intel ] && continue
		grep -qx "$n" "$st/modules.list" && continue
		xz -dc "$ko" > "$st/lib/modules/$n.ko"
		echo "$n" >> "$st/modules.list"
		modules+=("$n")
	done < <(modprobe -d "$work/k" -S "$release" --show-depends "$m" | awk '$1 == "insmod" { print $2 }')
done
python3 "$here/../tree-lock.py" write "$st" --source /init --source /modules.list \
	--meta recipe="$(recipe "$here/build.sh" "$here/initramfs-init" "$here/modules.list" \
		"$here/extract-vmlinux.py" "$here/../lib.sh" "$here/../tree-lock.py")" \
	--meta packages="$kpkg $(dpkg-deb -f "$kdeb" Version), busybox-static $(dpkg-deb -f "$bbdeb" Version)" \
	--meta cpio="$(host_version cpio)" > "$out/initrd-tree.lock"
find "$st" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
(cd "$st" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet --reproducible --owner=0:0) > "$out/initrd.cpio"

k_sha=$(sha256_of "$out/vmlinux")
i_sha=$(sha256_of "$out/initrd.cpio")
deb_sha=$(sha256_of "$kdeb")
python3 - "$out/manifest-kernel.json" <<PY
import json, sys
m = {
    "schema": 1,
    "kind": "kernel",
    "package": "$kpkg",
    "packageVersion": "$kver",
    "packageSha256": "$deb_sha",
    "linux": "$release",
    "busyboxVersion": "$(dpkg-deb -f "$bbdeb" Version)",
    "modules": "${modules[*]}".split(),
    "kernel": {"file": "vmlinux", "sha256": "$k_sha", "size": $(size_of "$out/vmlinux")},
    "initrd": {"file": "initrd.cpio", "sha256": "$i_sha", "size": $(size_of "$out/initrd.cpio")},
}
with open(sys.argv[1], "w") as f:
    json.dump(m, f, indent=2, sort_keys=True)
    f.write("\n")
PY
say "kernel: $release vmlinux $(size_of "$out/vmlinux") B sha256 $k_sha"
say "initrd: $(size_of "$out/initrd.cpio") B sha256 $i_sha (modules: ${modules[*]})"
say "kernel artifacts built in $(( $(now_ms) - t0 )) ms"
