#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the read-only root image: the cached Debian stage (stage.sh) plus Berth's guest
# binaries, packed with mkfs.erofs so that equal inputs give equal bytes.
# Usage: vm/rootfs/build.sh OUT_DIR BUILD_DIR
#   BUILD_DIR is the meson build directory holding the guest binaries.
# Writes OUT_DIR/rootfs.erofs, OUT_DIR/manifest-rootfs.json, OUT_DIR/packages.lock and
# OUT_DIR/tree.lock, the record of every file of the tree that is packed (vm/tree-lock.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: vm/rootfs/build.sh OUT_DIR BUILD_DIR}
build=${2:?usage: vm/rootfs/build.sh OUT_DIR BUILD_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# A fixed filesystem UUID: mkfs.erofs picks a random one otherwise.
uuid=62657274-6800-4000-8000-000000000001

t0=$(now_ms)
stage=$("$here/stage.sh")
t1=$(now_ms)

guest_bins=("$build/src/berth-init/berth-init" "$build/src/agent-init/agent-init"
	"$build/src/egress-broker/egress-broker" "$build/src/github-broker/github-api-broker"
	"$build/src/terminal-view/terminal-view" "$build/src/context-bus/context-bus"
	"$build/src/semantic-fs/semantic-fs" "$build/src/agent-init/libberth-confine.so"
	"$build/src/agent-init/berth-node-confine.node")
# The SDK sources are inputs of the image too.
for b in "${guest_bins[@]}"; do
	[ -x "$b" ] || die "$b is missing: build the project first (ninja -C $build)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/berth-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree="$work/tree"
cp -a "$stage" "$tree"
# What this source tree adds to the Debian stage (the tree record's "# source:" paths).
source_paths=(/sbin/berth-init /usr/sbin/agent-init /usr/sbin/egress-broker
	/usr/sbin/github-api-broker /usr/sbin/context-bus /usr/sbin/semantic-fs /usr/libexec/berth /usr/share/berth
	/usr/lib/berth/node-runtime
	/usr/lib/python3/dist-packages/berth_sdk /workspace /context /state /app)
install -m 0755 -s "$build/src/berth-init/berth-init" "$tree/sbin/berth-init"
install -m 0755 -s "$build/src/agent-init/agent-init" "$tree/usr/sbin/agent-init"
install -m 0755 -s "$build/src/egress-broker/egress-broker" "$tree/usr/sbin/egress-broker"
install -m 0755 -s "$build/src/github-broker/github-api-broker" "$tree/usr/sbin/github-api-broker"
# The context bus between apps (docs/context-bus.md), static like the brokers.
install -m 0755 -s "$build/src/context-bus/context-bus" "$tree/usr/sbin/context-bus"
# The /context index (docs/context.md), static too (SQLite with FTS5 inside).
install -m 0755 -s "$build/src/semantic-fs/semantic-fs" "$tree/usr/sbin/semantic-fs"
# The GitHub broker verifies api.github.com against the image's roots (ca-certificates).
[ -s "$tree/etc/ssl/certs/ca-certificates.crt" ] ||
	die "the stage has no /etc/ssl/certs/ca-certificates.crt: the GitHub broker needs the ca-certificates roots"
# The terminal's web view (docs/terminal.md): the server, which apps/terminal starts as
# itself, and the page it serves, with xterm.js from the root package.json's npm packages.
# It links Debian's libwebsockets17, which packages.txt puts in the image.
install -D -m 0755 -s "$build/src/terminal-view/terminal-view" "$tree/usr/libexec/berth/terminal-view"
# The warm Python runtime of a restored VM (docs/warm-start.md): the zygote berth-init
# starts in the template boot, and agent-init's confinement as a library, for its forks.
install -D -m 0644 "$here/../../src/berth-init/python-zygote.py" "$tree/usr/libexec/berth/python-zygote.py"
install -D -m 0644 -s "$build/src/agent-init/libberth-confine.so" "$tree/usr/libexec/berth/libberth-confine.so"
# Node's startup snapshot, made in the template boot on a tmpfs over warm/ (node-snapshot.h).
install -m 0644 "$here/../../src/berth-init/node-startup.js" "$tree/usr/libexec/berth/node-startup.js"
install -d -m 0755 "$tree/usr/libexec/berth/warm"
# The warm Node of a restored VM (node-warm.h), started from that snapshot in the template
# boot, and the addon through which agent-init's code confines it as its app.
install -m 0644 "$here/../../src/berth-init/node-warm.mjs" "$tree/usr/libexec/berth/node-warm.mjs"
install -m 0644 -s "$build/src/agent-init/berth-node-confine.node" "$tree/usr/libexec/berth/berth-node-confine.node"
# The SDK runtime every Node app's share holds, the same bytes, which the warm Node imports
# in the template and runs for an app whose share has them (node-warm.mjs).
rm -rf "$tree/usr/lib/berth/node-runtime"
mkdir -p "$tree/usr/lib/berth"
node "$here/../../sdk/node/bundle.mjs" --runtime "$tree/usr/lib/berth/node-runtime" >/dev/null ||
	die "cannot bundle the SDK runtime for the root image (npm ci first)"
view_assets="$tree/usr/share/berth/terminal-view"
xterm="$here/../../node_modules/@xterm"
[ -f "$xterm/xterm/lib/xterm.js" ] && [ -f "$xterm/addon-fit/lib/addon-fit.js" ] ||
	die "$xterm is missing: run npm ci (scripts/setup.sh), the root image ships xterm.js"
install -d -m 0755 "$tree/usr/share/berth" "$view_assets"
install -m 0644 "$here/../../src/terminal-view/page/index.html" \
	"$here/../../src/terminal-view/page/terminal.js" \
	"$here/../../src/terminal-view/page/terminal.css" \
	"$xterm/xterm/lib/xterm.js" "$xterm/xterm/css/xterm.css" \
	"$xterm/addon-fit/lib/addon-fit.js" "$view_assets/"
# The Python SDK, so that Python apps need only their own files in their share. Byte-compiled
# in the image's own Python, with hashes rather than mtimes (the image is read-only). The
# modes are set here: a checkout's follow the umask of whoever cloned it.
sdk_py="$here/../../sdk/python/berth_sdk"
[ -f "$sdk_py/runtime.py" ] || die "$sdk_py is missing: the root image ships the Python SDK"
site="$tree/usr/lib/python3/dist-packages"
rm -rf "$site/berth_sdk"
(cd "$sdk_py" && find . -name __pycache__ -prune -o -type f -print0 | LC_ALL=C sort -z |
	while IFS= read -r -d '' f; do install -D -m 0644 "$f" "$site/berth_sdk/$f"; done)
# The capability model's tables (the C code is generated from the same file), beside the
# modules, where berth_sdk/capability.py looks first.
install -m 0644 "$here/../../sdk/capability-model.json" "$site/berth_sdk/capability-model.json"
find "$site/berth_sdk" -type d -exec chmod 0755 {} +
# In an empty environment: PYTHONOPTIMIZE or PYTHONPYCACHEPREFIX would change what is written.
chroot "$tree" /usr/bin/env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8 /usr/bin/python3 -m compileall -q \
	--invalidation-mode unchecked-hash /usr/lib/python3/dist-packages/berth_sdk >/dev/null
# Mount points berth-init needs on a read-only root.
install -d -m 0755 "$tree/workspace" "$tree/context" "$tree/state" "$tree/app"

lock="$(dirname "$stage")/packages.installed"
cp "$lock" "$out/packages.lock"
if [ -f "$here/packages.lock" ] && ! cmp -s "$here/packages.lock" "$lock"; then
	drift "root image packages" "vm/rootfs/packages.lock" "$out/packages.lock"
	diff -u "$here/packages.lock" "$lock" | grep '^[-+][^-+]' | head -40 >&2 || true
fi

# The record of the exact tree that is packed, with what it was made by: the recipe
# (the scripts and lists of the image), and the host tools.
args=()
for p in "${source_paths[@]}"; do args+=(--source "$p"); done
made_by=$(recipe "$here/stage.sh" "$here/packages.txt" "$here/../lib.sh" "$here/build.sh" \
	"$here/../tree-lock.py")
python3 "$here/../tree-lock.py" write "$tree" "${args[@]}" --meta recipe="$made_by" \
	--meta debootstrap="$(cat "$(dirname "$stage")/debootstrap.version" 2>/dev/null || echo unknown)" \
	--meta mkfs.erofs="$(host_version erofs-utils)" > "$out/tree.lock.tmp"
mv "$out/tree.lock.tmp" "$out/tree.lock"

# mkfs.erofs sorts each directory and numbers inodes itself, and -T sets every timestamp:
# the image depends neither on the source filesystem's readdir order nor on inode numbers.
mkfs.erofs --quiet -zlz4hc -T"$SOURCE_DATE_EPOCH" -U "$uuid" "$out/rootfs.erofs.tmp" "$tree"
mv "$out/rootfs.erofs.tmp" "$out/rootfs.erofs"
t2=$(now_ms)

sha=$(sha256_of "$out/rootfs.erofs")
python3 - "$out/manifest-rootfs.json" <<PY
import json, sys
m = {
    "schema": 1,
    "kind": "rootfs",
    "suite": "bookworm",
    "packagesLockSha256": "$(sha256_of "$lock")",
    "rootfs": {"file": "rootfs.erofs", "sha256": "$sha", "size": $(size_of "$out/rootfs.erofs")},
    # The brokers and services the image ships: the CLI refuses, before boot, an app that
    # needs one the pinned image lacks (tools/gen-pins.py, src/shared/vm-support.c).
    "daemons": ["egress-broker", "github-api-broker", "terminal-view", "context-bus", "semantic-fs"],
}
with open(sys.argv[1], "w") as f:
    json.dump(m, f, indent=2, sort_keys=True)
    f.write("\n")
PY
say "rootfs: $(size_of "$out/rootfs.erofs") B sha256 $sha"
say "rootfs built in $((t2 - t0)) ms (stage $((t1 - t0)) ms, image $((t2 - t1)) ms)"
