#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install everything Berth needs to build, build its guest artifacts and run its tests on
# Debian 12. Idempotent: a second run installs nothing new. Needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	# build
	gcc libc6-dev meson ninja-build pkg-config python3 clang-format
	libjansson-dev libyaml-dev libseccomp-dev libcurl4-openssl-dev libssl-dev
	# the terminal's web view (src/terminal-view)
	libwebsockets-dev
	# the browser layer's helper that writes x11vnc's password file (src/browser-layer)
	libvncserver-dev
	# the context bus (src/context-bus): protoc-c makes its C code from sdk/context_bus.proto
	protobuf-c-compiler libprotobuf-c-dev
	# the /context index (src/semantic-fs): SQLite with FTS5, linked statically
	libsqlite3-dev
	# guest artifacts
	debootstrap erofs-utils busybox-static cpio zstd xz-utils kmod e2fsprogs dpkg-dev
	# running VMs
	qemu-system-x86
	# the Docker runtime (--runtime docker, berth test, berth deploy) and its tests
	docker.io
	# containerd-shim-berth-v2's tests run a real containerd and ctr
	containerd
	# tests (iproute2: the egress dialer's test makes a network namespace; tmux: the
	# terminal app's tests run it on the host)
	curl iproute2 tmux
	# the Python SDK and its tests (the same packages as in the guest image)
	python3-yaml python3-pydantic python3-protobuf
	# the browser layer's test speaks VNC authentication (DES) to noVNC
	python3-cryptography
)
# Node.js and npm: the machine's own if it has them (another repository may provide a
# newer Node.js with npm built in), else Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	packages+=(nodejs npm)
fi

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
missing=()
for p in "${packages[@]}"; do
	[[ $p == \#* ]] && continue
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}" >&2
	# Only Debian's archive is needed; an unreachable third-party list must not stop us.
	$sudo apt-get update -q >/dev/null 2>&1 || true
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
# The kernel build reads Debian's package lists; make sure they are there.
apt-cache show linux-image-6.12-cloud-amd64 >/dev/null 2>&1 || $sudo apt-get update -q >/dev/null 2>&1 || true

if [ -f package.json ]; then
	if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
		echo "setup: npm ci" >&2
		npm ci --no-audit --no-fund --loglevel=error
	fi
fi
echo "setup: all dependencies present" >&2
