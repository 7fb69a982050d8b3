#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Building the guest artifacts on another machine gives the same bytes as out/artifacts.
# The second build is made the way a different machine would make it: into a tmpfs
# (another filesystem, another readdir order, other inode numbers) with another hostname,
# TMPDIR, HOME, umask, locale, time zone, Python environment and CPU count. With
# BERTH_REPRO_FULL=1 (as in CI) it also redoes the debootstrap stage from Debian's archive
# in a fresh cache on that tmpfs, under the same conditions (a minute more). The browser
# layer's stage is always redone (--fresh). When bytes differ, the tree records
# (vm/tree-lock.py) name the files.
. "$(dirname "$0")/lib.sh"
require_artifacts
[ "$(id -u)" = 0 ] || skip_all "needs root (debootstrap, chroot, a tmpfs mount)"
work=$(mktemp -d "${TMPDIR:-/tmp}/berth-repro.XXXXXX")
if ! mount -t tmpfs -o size=8g,mode=0755 berth-repro "$work"; then
	rmdir "$work"
	echo "1..1"
	not_ok "mount a tmpfs for the second build"
	finish
fi
trap 'umount -R "$work" 2>/dev/null || umount -l "$work"; rmdir "$work"' EXIT
mkdir -p "$work/tmp" "$work/home"
plan 8

# The cache stays where it is unless the stage is rebuilt: HOME changes below.
export BERTH_CACHE=${BERTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}
if [ "${BERTH_REPRO_FULL:-0}" = 1 ]; then
	export BERTH_CACHE=$work/cache
	echo "# rebuilding the debootstrap stage from scratch in $BERTH_CACHE (tmpfs)"
fi
# One CPU of those this test may use, and the opposite of the caller's bytecode setting.
cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then pyc=(-u PYTHONDONTWRITEBYTECODE); else pyc=(PYTHONDONTWRITEBYTECODE=1); fi
echo "# second build: tmpfs $work, hostname berth-repro-elsewhere, umask 077, LC_ALL=POSIX,"
echo "# TZ=Pacific/Kiritimati, CPU $cpu only (of $(nproc --all)), ${pyc[*]}, PYTHONHASHSEED=4242"
elsewhere() {
	unshare --uts -- env "${pyc[@]}" TMPDIR="$work/tmp" HOME="$work/home" LANG=de_DE.UTF-8 \
		LC_ALL=POSIX TZ=Pacific/Kiritimati PYTHONHASHSEED=4242 \
		bash -c 'hostname berth-repro-elsewhere && umask 077 && exec taskset -c "$0" "$@"' "$cpu" "$@"
}

# same NAME RECORD: the artifact NAME in $work/$dir is the bytes of the one in
# $artifacts; if not, print both hashes and every path whose record entry differs.
same() {
	local name=$1 record=$2
	cmp -s "$artifacts/$name" "$work/$dir/$name" && return 0
	sha256sum "$artifacts/$name" "$work/$dir/$name" | diag
	if [ -f "$artifacts/$record" ] && [ -f "$work/$dir/$record" ]; then
		local d
		d=$(python3 "$src/vm/tree-lock.py" diff "$artifacts/$record" "$work/$dir/$record" --max 500)
		if [ -n "$d" ]; then
			printf '%s\n' "$d" | diag
		else
			echo "# the tree records are the same: the same tree gave other bytes, the pack depends on the machine"
		fi
	else
		echo "# $artifacts/$record is missing: rebuild out/artifacts (scripts/build-artifacts.sh) to name the files"
	fi
	return 1
}

dir=k
if elsewhere "$src/vm/kernel/build.sh" "$work/k" 2>"$work/k.log"; then
	check "vmlinux is the same bytes" same vmlinux initrd-tree.lock
	check "initrd.cpio is the same bytes" same initrd.cpio initrd-tree.lock
	check "the initramfs tree records are the same" same initrd-tree.lock initrd-tree.lock
else
	not_ok "kernel artifacts rebuild"; not_ok "initrd rebuild"; not_ok "initramfs record"
	tail -30 "$work/k.log" | diag
fi
dir=r
if elsewhere "$src/vm/rootfs/build.sh" "$work/r" "$bld" 2>"$work/r.log"; then
	check "rootfs.erofs is the same bytes" same rootfs.erofs tree.lock
	check "the root image tree records are the same" same tree.lock tree.lock
	check "the package lists are the same" same packages.lock tree.lock
else
	not_ok "rootfs rebuild"; not_ok "root image record"; not_ok "package list"
	tail -30 "$work/r.log" | diag
fi
# The browser layer, its stage redone from scratch (--fresh) over the root image's stage:
# the packages install again, from the cached .deb files, under the same conditions.
dir=l
if elsewhere "$src/vm/layers/browser/build.sh" "$work/l" "$bld" --fresh 2>"$work/l.log"; then
	check "layer-browser.erofs is the same bytes" same layer-browser.erofs layer-browser-tree.lock
	check "the browser layer's tree records are the same" same layer-browser-tree.lock layer-browser-tree.lock
else
	not_ok "browser layer rebuild"; not_ok "browser layer record"
	tail -30 "$work/l.log" | diag
fi
finish
