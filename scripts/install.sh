#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Put berth and berth-vmm on the PATH: meson's install of build/ into a prefix
# ($BERTH_PREFIX, default /usr/local; ~/.local works without root when it is on $PATH).
# The installed berth finds berth-vmm on the PATH (or ~/.berth/vm/bin, which
# `berth vm install --vmm` fills), and the SDK and its bundler in this checkout, whose path
# it was built with (BERTH_SOURCE_DIR names another): keep the checkout where it is.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${BERTH_PREFIX:-/usr/local}
[ -f build/build.ninja ] || scripts/build.sh
meson configure build -Dprefix="$prefix" >/dev/null
ninja -C build >/dev/null
meson install -C build --quiet --no-rebuild >/dev/null
found=$(command -v berth || true)
if [ "$found" != "$prefix/bin/berth" ]; then
	echo "install: berth is in $prefix/bin, but the PATH finds ${found:-no berth}; put $prefix/bin first on PATH" >&2
	exit 1
fi
echo "install: $("$prefix/bin/berth" --version) and berth-vmm in $prefix/bin (the SDK from $PWD)" >&2
