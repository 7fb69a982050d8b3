#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stage 1 of the root image: a Debian bookworm minbase tree with packages.txt installed,
# security updates applied and caches dropped. Slow (a minute or two), so it is cached
# by content under $BERTH_CACHE/rootfs-stage/<key>; a guest-code change never redoes it.
# Usage: vm/rootfs/stage.sh   (prints the tree's path)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
mirror=${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${BERTH_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

key=$(cat "$here/stage.sh" "$here/packages.txt" "$here/../lib.sh" | sha256sum | cut -c1-16)
dest="$BERTH_CACHE/rootfs-stage/$key"
if [ -z "${BERTH_STAGE_ISOLATED:-}" ] && [ -d "$dest/tree" ] && [ -z "${BERTH_REFRESH_STAGE:-}" ]; then
	say "rootfs stage: cached ($dest)"
	printf '%s\n' "$dest/tree"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "building the root image needs root (debootstrap and chroot): run it with sudo"
command -v debootstrap >/dev/null || die "debootstrap is missing: run scripts/setup.sh"

# The tree must not depend on the machine. debootstrap and every maintainer script in the
# chroot inherit the caller's environment: PYTHONDONTWRITEBYTECODE decides whether
# py3compile or an import writes debpython's .pyc files (checked-hash or timestamp ones),
# PYTHONOPTIMIZE and PYTHONPYCACHEPREFIX change which .pyc files are written, a TMPDIR
# that does not exist in the chroot breaks ca-certificates' postinst, and the umask sets
# the modes of every file a script writes. So the stage runs in a fixed environment, under
# its own hostname (UTS namespace), with umask 022 (vm/lib.sh). PYTHONDONTWRITEBYTECODE=1:
# only explicit byte-compilation writes .pyc files, never an import.
if [ -z "${BERTH_STAGE_ISOLATED:-}" ]; then
	keep=()
	for v in http_proxy https_proxy no_proxy; do
		[ -n "${!v:-}" ] && keep+=("$v=${!v}")
	done
	exec env -i BERTH_STAGE_ISOLATED=1 PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LC_ALL=C.UTF-8 TZ=UTC PYTHONDONTWRITEBYTECODE=1 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
		BERTH_CACHE="$BERTH_CACHE" \
		BERTH_DEBIAN_MIRROR="$mirror" BERTH_DEBIAN_SECURITY_MIRROR="$security" "${keep[@]}" \
		unshare --uts -- bash "$here/stage.sh"
fi
hostname berth
t0=$(now_ms)
mkdir -p "$BERTH_CACHE/rootfs-stage"
work=$(mktemp -d "$BERTH_CACHE/rootfs-stage/tmp.XXXXXX")
trap 'umount -R "$work/tree/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
tree="$work/tree"
pkgs=$(grep -v '^#' "$here/packages.txt" | paste -sd, -)

say "rootfs stage: debootstrap bookworm ($pkgs) from $mirror"
debootstrap --variant=minbase --include="$pkgs" bookworm "$tree" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{ tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

# Security updates: the archive's bookworm-security suite, applied in the chroot.
cat > "$tree/etc/apt/sources.list" <<SRC
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SRC
mount -t proc proc "$tree/proc"
chroot "$tree" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get -q update >"$work/apt.log" 2>&1 ||
	{ tail -20 "$work/apt.log" >&2; die "apt-get update in the root image failed"; }
chroot "$tree" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get -q -y upgrade >>"$work/apt.log" 2>&1 ||
	{ tail -20 "$work/apt.log" >&2; die "apt-get upgrade in the root image failed"; }

# Byte-compile Python with hashes instead of source mtimes: the image is read-only, so
# stale .pyc files would be recompiled in memory on every start, and mtimes vary by build.
# Every .pyc in the tree is rewritten here, whoever wrote it first.
chroot "$tree" /usr/bin/python3 -m compileall -q -f --invalidation-mode unchecked-hash \
	/usr/lib/python3 /usr/lib/python3.11 /usr/share/python3 >/dev/null 2>&1 || true
chroot "$tree" dpkg-query -W -f '${Package} ${Version}\n' | LC_ALL=C sort > "$work/packages.installed"
umount "$tree/proc"

# Drop what differs from build to build and what a read-only image never needs.
rm -rf "$tree"/var/cache/apt/* "$tree"/var/lib/apt/lists/* "$tree"/var/log/* \
	"$tree"/var/cache/debconf/*-old "$tree"/var/lib/dpkg/*-old "$tree"/var/cache/ldconfig/aux-cache \
	"$tree"/tmp/* "$tree"/var/tmp/* "$tree"/root/.cache
: > "$tree/etc/machine-id"
printf 'berth\n' > "$tree/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$tree/etc/hosts"
rm -f "$tree/etc/resolv.conf"
# Password ages are "days since 1970" at creation time.
sed -i -E 's/^([^:]*:[^:]*:)[0-9]+:/\1'$((SOURCE_DATE_EPOCH / 86400))':/' "$tree/etc/shadow"

rm -rf "$dest"
mkdir -p "$dest"
mv "$work/packages.installed" "$dest/packages.installed"
host_version debootstrap > "$dest/debootstrap.version"
mv "$tree" "$dest/tree"
say "rootfs stage: built in $(( $(now_ms) - t0 )) ms ($dest)"
printf '%s\n' "$dest/tree"
