#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Building the guest artifacts twice from the same inputs gives the same bytes.
# The second build goes to a fresh directory; with BERTH_REPRO_FULL=1 it also redoes the
# debootstrap stage from Debian's archive in a fresh cache (two minutes more).
. "$(dirname "$0")/lib.sh"
require_artifacts
plan 4
work=$(mktemp -d "${TMPDIR:-/tmp}/berth-repro.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ "${BERTH_REPRO_FULL:-0}" = 1 ]; then
	export BERTH_CACHE=$work/cache
	echo "# rebuilding the debootstrap stage from scratch in $BERTH_CACHE"
fi

same() { cmp -s "$1" "$2" || { echo "# $(sha256sum "$1" "$2" | tr '\n' ' ')"; return 1; }; }

if "$src/vm/kernel/build.sh" "$work/k" 2>"$work/k.log"; then
	check "vmlinux is the same bytes" same "$artifacts/vmlinux" "$work/k/vmlinux"
	check "initrd.cpio is the same bytes" same "$artifacts/initrd.cpio" "$work/k/initrd.cpio"
else
	not_ok "kernel artifacts rebuild"; not_ok "initrd rebuild"; diag < "$work/k.log"
fi
if "$src/vm/rootfs/build.sh" "$work/r" "$bld" 2>"$work/r.log"; then
	check "rootfs.erofs is the same bytes" same "$artifacts/rootfs.erofs" "$work/r/rootfs.erofs"
	check "the package lists are the same" same "$artifacts/packages.lock" "$work/r/packages.lock"
else
	not_ok "rootfs rebuild"; not_ok "package list"; diag < "$work/r.log"
fi
finish
