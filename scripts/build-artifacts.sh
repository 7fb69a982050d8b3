#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the guest kernel, initramfs and root image into out/artifacts, compare them with
# the pins in vm/*/manifest.json, and report any drift loudly.
#
# A drift is expected when Debian's archive moved or the guest code or recipe changed; the
# tree records (vm/rootfs/tree.lock, vm/kernel/initrd-tree.lock) tell which. When nothing
# the artifact is made of changed, the build depends on the machine: that is written to
# out/artifacts/repro-failure.txt, which fails the suite (see vm/lib.sh, docs/artifacts.md).
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
export DRIFT_FILE="$PWD/$out/drift.txt" REPRO_FILE="$PWD/$out/repro-failure.txt"
: > "$DRIFT_FILE"
: > "$REPRO_FILE"

# Pack the guest binaries as they are in the source tree now.
scripts/build.sh
vm/kernel/build.sh "$out"
vm/rootfs/build.sh "$out" build
vm/layers/browser/build.sh "$out" build

check_kernel_pin "$out"
check_rootfs_pin "$out"
check_layer_pin "$out" browser

if [ -s "$DRIFT_FILE" ]; then
	if [ "${BERTH_PINS:-repo}" = build ]; then
		say "pins: building berth-vmm with the fresh artifacts' pins (BERTH_PINS=build)"
		scripts/build.sh -Dkernel_manifest="$PWD/$out/manifest-kernel.json" \
			-Drootfs_manifest="$PWD/$out/manifest-rootfs.json" \
			-Dbrowser_layer_manifest="$PWD/$out/manifest-layer-browser.json"
	else
		say "pins: berth-vmm keeps the reviewed pins and will refuse these artifacts; run vm/repin to adopt them"
	fi
else
	say "pins: the fresh build matches vm/kernel/manifest.json, vm/rootfs/manifest.json and vm/layers/browser/manifest.json"
fi
if [ -s "$REPRO_FILE" ]; then
	say "REPRODUCIBILITY FAILURE (written to $out/repro-failure.txt, fails scripts/test.sh):"
	cat "$REPRO_FILE" >&2
fi
