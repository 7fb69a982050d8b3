#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the guest kernel, initramfs and root image into out/artifacts, compare them with
# the pins in vm/*/manifest.json, and report any drift loudly.
#
# When the fresh build differs from the pins (Debian's archive moved, or guest code
# changed without a re-pin), BERTH_PINS=build rebuilds berth-vmm and the CLI with the
# fresh build's pins so that tests run against what was just built; the default
# (BERTH_PINS=repo) leaves them pinned to the reviewed manifests.
set -euo pipefail
cd "$(dirname "$0")/.."
. vm/lib.sh
out=out/artifacts
mkdir -p "$out"
export DRIFT_FILE="$PWD/$out/drift.txt"
: > "$DRIFT_FILE"

# Pack the guest binaries as they are in the source tree now.
scripts/build.sh
vm/kernel/build.sh "$out"
vm/rootfs/build.sh "$out" build

pinned() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m[sys.argv[2]]['sha256'])" "$@"; }
for pair in "kernel kernel" "kernel initrd" "rootfs rootfs"; do
	set -- $pair
	want=$(pinned "vm/$1/manifest.json" "$2")
	got=$(pinned "$out/manifest-$1.json" "$2")
	[ "$want" = "$got" ] || drift "$2 image" "$want" "$got"
done

if [ -s "$DRIFT_FILE" ]; then
	if [ "${BERTH_PINS:-repo}" = build ]; then
		say "pins: building berth-vmm with the fresh artifacts' pins (BERTH_PINS=build)"
		scripts/build.sh -Dkernel_manifest="$PWD/$out/manifest-kernel.json" \
			-Drootfs_manifest="$PWD/$out/manifest-rootfs.json"
	else
		say "pins: berth-vmm keeps the reviewed pins and will refuse these artifacts; run vm/repin to adopt them"
	fi
else
	say "pins: the fresh build matches vm/kernel/manifest.json and vm/rootfs/manifest.json"
fi
