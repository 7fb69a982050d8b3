#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job on a fresh Debian 12 machine: install dependencies, build, build the
# guest artifacts, install them, check the host, and boot the VM to a clean power-off.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

step "Installing dependencies (scripts/setup.sh)"
scripts/setup.sh
step "Building (meson + ninja into build/)"
scripts/build.sh
step "Building the guest kernel, initramfs and root image (out/artifacts)"
scripts/build-artifacts.sh
step "Installing them into ~/.berth/vm (berth vm install)"
build/src/berth/berth vm install --from out/artifacts --no-download --vmm build/src/berth-vmm/berth-vmm
step "Checking the host (berth doctor --sandbox vm)"
build/src/berth/berth doctor --sandbox vm
step "Booting the VM to a clean power-off (berth-vmm run)"
console=$(mktemp)
start=$(date +%s%3N)
build/src/berth-vmm/berth-vmm run --console "$console"
end=$(date +%s%3N)
sed 's/^/    guest: /' "$console" | grep -E 'berth-init|Power' || true
rm -f "$console"
printf '\nBooted the pinned kernel and image and powered off cleanly in %d ms.\n' $((end - start))
