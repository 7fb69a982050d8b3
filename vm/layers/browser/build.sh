#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the browser layer (docs/browser.md): what the browser stage (stage.sh) adds to the
# root image's Debian stage, plus the few files of this source tree it needs, packed with
# mkfs.erofs so that equal inputs give equal bytes. berth-init lays it read-only over the
# root image with overlayfs.
# Usage: vm/layers/browser/build.sh OUT_DIR BUILD_DIR [--fresh]
#   --fresh rebuilds the stage in a scratch directory instead of taking the cached one
#   (the bit-for-bit rebuild test, test/layer-rebuild.sh).
# Writes OUT_DIR/layer-browser.erofs, OUT_DIR/manifest-layer-browser.json,
# OUT_DIR/layer-browser-packages.lock and OUT_DIR/layer-browser-tree.lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../lib.sh"
out=${1:?usage: vm/layers/browser/build.sh OUT_DIR BUILD_DIR [--fresh]}
build=${2:?usage: vm/layers/browser/build.sh OUT_DIR BUILD_DIR [--fresh]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
uuid=62657274-6800-4000-8000-000000000002

helper="$build/src/browser-layer/vnc-passwd"
[ -x "$helper" ] || die "$helper is missing: build the project first (ninja -C $build; it needs libvncserver-dev, scripts/setup.sh)"
playwright="$here/../../../node_modules/playwright-core"
[ -f "$playwright/package.json" ] || die "$playwright is missing: run npm ci (scripts/setup.sh), the layer ships playwright-core"

t0=$(now_ms)
base=$("$here/../../rootfs/stage.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/berth-layer.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ "${3:-}" = --fresh ]; then
	stage=$("$here/stage.sh" --fresh "$work/stage")
else
	stage=$("$here/stage.sh")
fi
t1=$(now_ms)
tree="$work/tree"
python3 "$here/../../layer-diff.py" "$base" "$stage" "$tree"
# What a read-only browser layer never uses: documentation, translations of the packages'
# messages, and Mesa's hardware GL drivers with the LLVM they link (137 MB unpacked).
# Chromium draws with its own SwiftShader (--disable-gpu), and Xvfb runs without GLX.
rm -rf "$tree"/usr/share/doc "$tree"/usr/share/man "$tree"/usr/share/info "$tree"/usr/share/locale \
	"$tree"/usr/share/lintian "$tree"/usr/lib/x86_64-linux-gnu/dri \
	"$tree"/usr/lib/x86_64-linux-gnu/libLLVM-15.so*
# dbus's maintainer scripts make a random machine id; the root image's stays empty, as
# every VM's own. /run and /root are the guest's tmpfs and nobody's.
rm -rf "$tree/etc/machine-id" "$tree/var/lib/dbus/machine-id" "$tree/run" "$tree/root"
# berth-init lays /usr, /etc and /var over the root image, nothing else.
other=$(cd "$tree" && find . -mindepth 1 -maxdepth 1 ! -name usr ! -name etc ! -name var)
[ -z "$other" ] || die "the browser layer adds $other, outside the /usr, /etc and /var berth-init overlays"

# What this source tree adds (the tree record's "# source:" paths): the helper that writes
# x11vnc's password file, and Playwright's client library for apps/browser-native, which
# the app's bundle leaves out (it loads its own files at run time) and finds on NODE_PATH.
source_paths=(/usr/libexec/berth/vnc-passwd /usr/lib/berth/node_modules)
install -D -m 0755 -s "$helper" "$tree/usr/libexec/berth/vnc-passwd"
dest="$tree/usr/lib/berth/node_modules/playwright-core"
(cd "$playwright" && find . -type f -print0 | LC_ALL=C sort -z |
	while IFS= read -r -d '' f; do
		mode=0644
		[ -x "$f" ] && mode=0755
		install -D -m "$mode" "$f" "$dest/$f"
	done)
find "$tree/usr/lib/berth" -type d -exec chmod 0755 {} +

cp "$(dirname "$stage")/packages.installed" "$out/layer-browser-packages.lock"
if [ -f "$here/packages.lock" ] && ! cmp -s "$here/packages.lock" "$out/layer-browser-packages.lock"; then
	drift "browser layer packages" "vm/layers/browser/packages.lock" "$out/layer-browser-packages.lock"
	diff -u "$here/packages.lock" "$out/layer-browser-packages.lock" | grep '^[-+][^-+]' | head -40 >&2 || true
fi
args=()
for p in "${source_paths[@]}"; do args+=(--source "$p"); done
made_by=$(recipe "$here/stage.sh" "$here/packages.txt" "$here/build.sh" "$here/../../lib.sh" \
	"$here/../../layer-diff.py" "$here/../../tree-lock.py")
python3 "$here/../../tree-lock.py" write "$tree" "${args[@]}" --meta recipe="$made_by" \
	--meta mkfs.erofs="$(host_version erofs-utils)" > "$out/layer-browser-tree.lock.tmp"
mv "$out/layer-browser-tree.lock.tmp" "$out/layer-browser-tree.lock"

mkfs.erofs --quiet -zlz4hc -T"$SOURCE_DATE_EPOCH" -U "$uuid" "$out/layer-browser.erofs.tmp" "$tree"
mv "$out/layer-browser.erofs.tmp" "$out/layer-browser.erofs"
t2=$(now_ms)
sha=$(sha256_of "$out/layer-browser.erofs")
python3 - "$out/manifest-layer-browser.json" <<PY
import json, sys
m = {
    "schema": 1,
    "kind": "layer",
    "name": "browser",
    "suite": "bookworm",
    "packagesLockSha256": "$(sha256_of "$out/layer-browser-packages.lock")",
    "layer": {"file": "layer-browser.erofs", "sha256": "$sha", "size": $(size_of "$out/layer-browser.erofs")},
    # The root image's Debian stage it was made over: gen-pins.py refuses a layer made
    # over another one, whose /etc and libraries would not match the root image's.
    "basePackagesLockSha256": "$(sha256_of "$(dirname "$base")/packages.installed")",
    # Regular files only: a directory's size depends on the filesystem.
    "treeBytes": $(find "$tree" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'),
}
with open(sys.argv[1], "w") as f:
    json.dump(m, f, indent=2, sort_keys=True)
    f.write("\n")
PY
say "browser layer: $(size_of "$out/layer-browser.erofs") B sha256 $sha"
say "browser layer built in $((t2 - t0)) ms (stage $((t1 - t0)) ms, diff and image $((t2 - t1)) ms)"
