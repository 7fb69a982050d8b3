#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the C code into build/ (meson + ninja). Extra arguments go to meson setup.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
	meson setup build "$@" >/dev/null
elif [ $# -gt 0 ]; then
	meson configure build "$@" >/dev/null
fi
ninja -C build >/dev/null
echo "build: binaries in build/src (berth, berth-vmm, berth-init)" >&2
