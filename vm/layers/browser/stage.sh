#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stage of the browser layer: the root image's Debian stage with packages.txt installed
# on top (the current versions, security updates included), caches dropped. Cached by content under
# $BERTH_CACHE/layer-stage/browser/<key>, like the root image's stage; the .deb files are
# kept under $BERTH_CACHE/layer-debs/browser so that a rebuild needs no download.
# Usage: vm/layers/browser/stage.sh [--fresh DIR]   (prints the tree's path)
#   --fresh DIR builds into DIR, ignoring and leaving the cache alone (the rebuild test).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../lib.sh"
fresh=
[ "${1:-}" = --fresh ] && fresh=${2:?usage: stage.sh --fresh DIR}

base=$("$here/../../rootfs/stage.sh")
key=$(cat "$(dirname "$base")/packages.installed" "$here/stage.sh" "$here/packages.txt" \
	"$here/../../lib.sh" | sha256sum | cut -c1-16)
dest=${fresh:-$BERTH_CACHE/layer-stage/browser/$key}
if [ -z "$fresh" ] && [ -d "$dest/tree" ] && [ -z "${BERTH_REFRESH_STAGE:-}" ]; then
	say "browser layer stage: cached ($dest)"
	printf '%s\n' "$dest/tree"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "building the browser layer needs root (chroot): run it with sudo"
# Under its own hostname, as the root image's stage (a maintainer script may record it),
# and in a mount namespace of its own, so that its mounts go when it does, whatever happens.
if [ -z "${BERTH_LAYER_ISOLATED:-}" ]; then
	exec env BERTH_LAYER_ISOLATED=1 unshare --uts --mount --propagation private -- \
		bash "$here/stage.sh" "$@"
fi
hostname berth

t0=$(now_ms)
mkdir -p "$(dirname "$dest")" "$BERTH_CACHE/layer-debs/browser"
work=$(mktemp -d "$(dirname "$dest")/tmp.XXXXXX")
tree="$work/tree"
cleanup() {
	umount "$tree/var/cache/apt/archives" 2>/dev/null || true
	umount "$tree/proc" 2>/dev/null || true
	# Never into a mount left behind (the .deb cache is bind-mounted in the tree).
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
cp -a "$base" "$tree"
# Name resolution for apt only; the file is removed again below.
cp /etc/resolv.conf "$tree/etc/resolv.conf"
mount -t proc proc "$tree/proc"
mkdir -p "$tree/var/cache/apt/archives/partial"
mount --bind "$BERTH_CACHE/layer-debs/browser" "$tree/var/cache/apt/archives"
pkgs=$(grep -v '^#' "$here/packages.txt" | paste -sd' ' -)
say "browser layer stage: apt-get install $pkgs"
# The same fixed environment as the root image's stage (vm/rootfs/stage.sh says why).
in_tree() {
	chroot "$tree" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
		TZ=UTC PYTHONDONTWRITEBYTECODE=1 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		DEBIAN_FRONTEND=noninteractive "$@"
}
# No upgrade: the layer must leave the root image's packages as they are (the root image's
# stage has its security updates already); only what packages.txt needs is added.
{ in_tree apt-get -q update && in_tree apt-get -q -y install --no-install-recommends $pkgs; } \
	>"$work/apt.log" 2>&1 ||
	{ tail -20 "$work/apt.log" >&2; die "apt-get in the browser layer's stage failed (log above)"; }
# Python byte code with hashes, not mtimes (vm/rootfs/stage.sh says why).
in_tree /usr/bin/python3 -m compileall -q -f --invalidation-mode unchecked-hash \
	/usr/lib/python3 /usr/share/python3 /usr/share/novnc >/dev/null 2>&1 || true
in_tree dpkg-query -W -f '${Package} ${Version}\n' | LC_ALL=C sort > "$work/packages.installed"
umount "$tree/var/cache/apt/archives"
umount "$tree/proc"
# What differs from build to build, and what a read-only layer never needs. fontconfig's
# caches record the build's mtimes; without them fontconfig scans the fonts at start.
rm -rf "$tree"/var/cache/apt/* "$tree"/var/lib/apt/lists/* "$tree"/var/log/* \
	"$tree"/var/cache/debconf/*-old "$tree"/var/lib/dpkg/*-old "$tree"/var/cache/ldconfig/aux-cache \
	"$tree"/var/cache/fontconfig/* "$tree"/tmp/* "$tree"/var/tmp/* "$tree"/root/.cache \
	"$tree/etc/resolv.conf"
sed -i -E 's/^([^:]*:[^:]*:)[0-9]+:/\1'$((SOURCE_DATE_EPOCH / 86400))':/' "$tree/etc/shadow"
rm -rf "$dest/tree" "$dest/packages.installed"
mkdir -p "$dest"
mv "$work/packages.installed" "$dest/packages.installed"
mv "$tree" "$dest/tree"
say "browser layer stage: built in $(( $(now_ms) - t0 )) ms ($dest)"
printf '%s\n' "$dest/tree"
