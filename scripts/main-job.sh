#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job on a fresh Debian 12 machine: install dependencies, build, build the
# guest artifacts, install them, check the host, and boot the VM to a clean power-off.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

step "Installing dependencies (scripts/setup.sh)"
scripts/setup.sh
step "Building (meson + ninja into build/)"
scripts/build.sh
step "Building the guest kernel, initramfs and root image (out/artifacts)"
BERTH_PINS=build scripts/build-artifacts.sh
# After the artifacts: when they drift from the reviewed pins, build-artifacts.sh rebuilt
# berth and berth-vmm with the fresh pins, and those are the ones to install.
step "Putting berth and berth-vmm on the PATH (scripts/install.sh: meson install into /usr/local)"
scripts/install.sh
step "Installing them into ~/.berth/vm (berth vm install)"
berth vm install --from out/artifacts --no-download --vmm build/src/berth-vmm/berth-vmm
step "Checking the host (berth doctor --sandbox vm)"
berth doctor --sandbox vm
step "Booting apps/notes in a VM (berth dev) and calling it (berth rpc)"
berth=$(command -v berth)
. scripts/lib-dev.sh
dev_start apps/notes
log=$dev_log
sed 's/^/    /' "$log"
echo '$ berth rpc notes --export add_note --input '"'"'{"text":"hello from the main job"}'"'"
"$berth" rpc notes --export add_note --input '{"text":"hello from the main job"}'
echo '$ berth rpc notes --export list_notes'
"$berth" rpc notes --export list_notes
echo '$ berth vm status'
"$berth" vm status
step "Serving it to an MCP client (berth mcp, attached to berth dev's VM)"
echo '$ berth mcp --print-config claude-code --app notes --app-dir apps/notes'
"$berth" mcp --print-config claude-code --app notes --app-dir apps/notes
# What an MCP client sends: initialize, then one tools/call; then a client of the 2026-07-28
# revision, which needs no initialize. Standard output is JSON-RPC.
printf '%s\n' \
	'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"main-job","version":"1"}}}' \
	'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
	'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_notes","arguments":{}}}' \
	'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_notes","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' |
	"$berth" mcp --app notes --app-dir apps/notes --no-boot
echo '$ berth audit verify'
"$berth" audit verify
step "Stopping it (Ctrl-C to berth dev)"
dev_stop
tail -2 "$log" | sed 's/^/    /'
printf '\nDone: built, installed (berth is on the PATH), checked, booted apps/notes, called it (berth rpc, berth mcp) and stopped it.\n'
