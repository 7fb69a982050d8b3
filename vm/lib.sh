# SPDX-License-Identifier: Apache-2.0
# Helpers shared by the artifact build scripts (sourced, not run).

# Everything the build writes gets this timestamp, so equal inputs give equal bytes.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
BERTH_CACHE=${BERTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}
# Files the build writes get their modes from the recipe, not from the caller's umask.
umask 022
berth_vm=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# drift WHAT LOCKED ACTUAL: report, loudly, that Debian's archive moved under a lock.
drift() {
	{
		printf '%s\n' '########################################################################'
		printf '# PIN DRIFT: %s\n#   locked: %s\n#   built:  %s\n' "$1" "$2" "$3"
		printf '%s\n' '# Debian'"'"'s archive moved, or guest code changed. Review, then run vm/repin.'
		printf '%s\n' '########################################################################'
	} >&2
	[ -n "${DRIFT_FILE:-}" ] && printf '%s: locked %s, built %s\n' "$1" "$2" "$3" >> "$DRIFT_FILE"
	return 0
}

# fetch_deb NAME VERSION DIR: download NAME=VERSION, or the candidate when the archive
# no longer serves VERSION (reported as drift). Prints the .deb path.
fetch_deb() {
	local name=$1 version=$2 dir=$3 got
	mkdir -p "$dir"
	got=$(cd "$dir" && ls "${name}_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$got" ] || ! dpkg-deb -f "$dir/$got" Version | grep -qxF "$version"; then
		rm -f "$dir/${name}_"*.deb
		if ! (cd "$dir" && apt-get download -q "$name=$version" >/dev/null 2>&1); then
			(cd "$dir" && apt-get download -q "$name" >/dev/null) ||
				die "apt-get download $name failed: run 'apt-get update' and check the network to Debian's archive"
		fi
		got=$(cd "$dir" && ls "${name}_"*.deb | head -1)
	fi
	local actual
	actual=$(dpkg-deb -f "$dir/$got" Version)
	[ "$actual" = "$version" ] || drift "$name" "$version" "$actual"
	printf '%s\n' "$dir/$got"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
size_of() { stat -c %s "$1"; }
# recipe FILE...: one hash of the scripts and lists an artifact is made by. It goes into
# the artifact's tree record, so that a change to them is told apart from a machine's.
recipe() { cat "$@" | sha256sum | cut -c1-16; }
# host_version PACKAGE: the host tool's Debian version, for the tree record's header.
host_version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo unknown; }
manifest_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v=v[k]
print(v)' "$@"; }

# repro_failure WHAT WHY: the artifact differs from its pin although nothing it is made
# of changed: it depends on the machine. Loud, and written to $REPRO_FILE, which fails
# the suite (scripts/test.sh).
repro_failure() {
	{
		printf '%s\n' '########################################################################'
		printf '# REPRODUCIBILITY FAILURE: %s\n#   %s\n' "$1" "$2"
		printf '%s\n' '# Equal inputs must give equal bytes on any machine: fix the cause, do not re-pin.'
		printf '%s\n' '########################################################################'
	} >&2
	[ -n "${REPRO_FILE:-}" ] && printf '%s: %s\n' "$1" "$2" >> "$REPRO_FILE"
	return 0
}

# tree_diff LOCKED BUILT: print the paths whose entries differ (capped), to stderr and
# to $DRIFT_FILE; return tree-lock.py's status (1 source tree, 2 stage, 4 recipe).
tree_diff() {
	local st=0 text
	text=$(python3 "$berth_vm/tree-lock.py" diff "$1" "$2" --max 40) || st=$?
	[ -n "${REPRO_TEXT:-}" ] && printf '%s' "${text:+$text$'\n'}" > "$REPRO_TEXT"
	if [ -n "$text" ]; then
		printf '%s\n' "$text" >&2
		[ -n "${DRIFT_FILE:-}" ] && printf '%s\n' "$text" >> "$DRIFT_FILE"
	fi
	return $st
}

# check_rootfs_pin OUT: when OUT/rootfs.erofs is not the pinned image, say why from the
# tree records and package locks. The rule:
#   - packages.lock changed: Debian's archive moved. Drift, re-pin after review.
#   - the recipe changed (stage.sh, packages.txt, lib.sh, build.sh, tree-lock.py): re-pin.
#   - only files from this source tree (guest binaries, SDK) changed in content: guest
#     code changed. Drift, re-pin.
#   - anything else (a file from the Debian stage, a mode or owner, or no file at all
#     while the image differs) with packages.lock unchanged: the image depends on the
#     machine. A reproducibility failure.
check_rootfs_pin() {
	local out=$1 pins=$berth_vm/rootfs want got st=0 why
	rm -f "$out/rootfs-tree.diff"
	want=$(manifest_get "$pins/manifest.json" rootfs sha256)
	got=$(manifest_get "$out/manifest-rootfs.json" rootfs sha256)
	[ "$want" = "$got" ] && return 0
	drift "rootfs image" "$want" "$got"
	if [ ! -f "$pins/tree.lock" ]; then
		say "rootfs: no tree record is committed beside the pin (vm/rootfs/tree.lock) to name the files that differ; vm/repin writes it"
		return 0
	fi
	REPRO_TEXT=$out/rootfs-tree.diff tree_diff "$pins/tree.lock" "$out/tree.lock" || st=$?
	if ! cmp -s "$pins/packages.lock" "$out/packages.lock"; then
		say "rootfs: packages.lock changed: Debian's archive moved. Review, then run vm/repin."
	elif ((st & 4)); then
		say "rootfs: the image's recipe changed (vm/rootfs, vm/lib.sh or vm/tree-lock.py): review, then run vm/repin."
	elif ((st & 2)); then
		repro_failure "rootfs image" "packages.lock and the recipe are unchanged, yet files from Debian's packages, or the mode or owner of this tree's files, differ from vm/rootfs/tree.lock:"
		sed 's/^/    /' "$out/rootfs-tree.diff" >> "$REPRO_FILE"
	elif ((st & 1)); then
		say "rootfs: only files from this source tree differ: guest code changed. Review, then run vm/repin."
	else
		why="the same tree gave a different image: the pack depends on the machine"
		[ "$(sed -n 's/^# mkfs.erofs: //p' "$pins/tree.lock")" = "$(host_version erofs-utils)" ] ||
			why="$why (this host's erofs-utils is $(host_version erofs-utils), the pin's $(sed -n 's/^# mkfs.erofs: //p' "$pins/tree.lock"))"
		repro_failure "rootfs image" "$why"
	fi
}

# check_kernel_pin OUT: the kernel and initramfs come from packages fetched by exact
# version, so when kernel.lock's versions are what was fetched and the recipe (the
# kernel scripts and lists) is unchanged, a vmlinux or initrd.cpio that is not the pinned
# one is a reproducibility failure. Otherwise it is drift: re-pin after review.
check_kernel_pin() {
	local out=$1 pins=$berth_vm/kernel f want got differ="" st=0 lock fetched
	rm -f "$out/initrd-tree.diff"
	for f in kernel initrd; do
		want=$(manifest_get "$pins/manifest.json" $f sha256)
		got=$(manifest_get "$out/manifest-kernel.json" $f sha256)
		[ "$want" = "$got" ] || { drift "$f image" "$want" "$got"; differ="$differ $(manifest_get "$out/manifest-kernel.json" $f file)"; }
	done
	[ -n "$differ" ] || return 0
	lock=$(grep -v '^#' "$pins/kernel.lock" | sort)
	fetched=$(printf '%s %s\nbusybox-static %s\n' "$(manifest_get "$out/manifest-kernel.json" package)" \
		"$(manifest_get "$out/manifest-kernel.json" packageVersion)" \
		"$(manifest_get "$out/manifest-kernel.json" busyboxVersion)" | sort)
	if [ "$lock" != "$fetched" ]; then
		say "kernel: what was fetched is not what kernel.lock names: Debian's archive moved. Review, then run vm/repin."
		return 0
	fi
	if [ ! -f "$pins/initrd-tree.lock" ]; then
		say "kernel: no tree record is committed beside the pin (vm/kernel/initrd-tree.lock); vm/repin writes it"
		return 0
	fi
	REPRO_TEXT=$out/initrd-tree.diff tree_diff "$pins/initrd-tree.lock" "$out/initrd-tree.lock" || st=$?
	if ((st & 4)); then
		say "kernel: the recipe changed (vm/kernel, vm/lib.sh or vm/tree-lock.py): review, then run vm/repin."
		return 0
	fi
	repro_failure "kernel artifacts" "kernel.lock's versions are what was fetched and the recipe is unchanged, yet these differ from the pin:$differ"
	[ -s "$out/initrd-tree.diff" ] && sed 's/^/    /' "$out/initrd-tree.diff" >> "$REPRO_FILE"
	return 0
}

# check_layer_pin OUT NAME: as check_rootfs_pin, for the layer NAME (vm/layers/NAME):
# its packages.lock or recipe changed, or only this source tree's files: drift; anything
# else differing with both unchanged: a reproducibility failure.
check_layer_pin() {
	local out=$1 name=$2 pins=$berth_vm/layers/$2 want got st=0 why
	rm -f "$out/layer-$name-tree.diff"
	want=$(manifest_get "$pins/manifest.json" layer sha256)
	got=$(manifest_get "$out/manifest-layer-$name.json" layer sha256)
	[ "$want" = "$got" ] && return 0
	drift "$name layer" "$want" "$got"
	REPRO_TEXT=$out/layer-$name-tree.diff tree_diff "$pins/tree.lock" "$out/layer-$name-tree.lock" || st=$?
	if ! cmp -s "$pins/packages.lock" "$out/layer-$name-packages.lock"; then
		say "$name layer: packages.lock changed: Debian's archive moved. Review, then run vm/repin."
	elif ((st & 4)); then
		say "$name layer: its recipe changed (vm/layers/$name, vm/lib.sh or the tree scripts): review, then run vm/repin."
	elif ((st & 2)); then
		repro_failure "$name layer" "packages.lock and the recipe are unchanged, yet files from Debian's packages differ from vm/layers/$name/tree.lock:"
		sed 's/^/    /' "$out/layer-$name-tree.diff" >> "$REPRO_FILE"
	elif ((st & 1)); then
		say "$name layer: only files from this source tree differ. Review, then run vm/repin."
	else
		why="the same tree gave a different layer: the pack depends on the machine"
		repro_failure "$name layer" "$why"
	fi
}
