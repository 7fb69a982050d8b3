#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kernel says no: boot apps/filesystem (berth.yml grants filesystem:write:/workspace),
# write inside /workspace (allowed), then outside it (refused by Landlock in the guest
# kernel, EACCES), and print both. Run scripts/main-job.sh once first.
set -euo pipefail
cd "$(dirname "$0")/.."
berth=$PWD/build/src/berth/berth
[ -x "$berth" ] || { echo "build first: scripts/main-job.sh" >&2; exit 1; }

. scripts/lib-dev.sh
dev_start apps/filesystem
log=$dev_log
grep '^VM ready in' "$log"
grep 'capability-policy' "$log" | sed 's/^/  /' || true

echo
echo '1. write_file {"path":"hello.txt"}: inside /workspace, which berth.yml declares'
"$berth" rpc filesystem --export write_file --input '{"path":"hello.txt","content":"hello from a sandbox"}' >/dev/null
printf '   allowed; reading it back: %s\n' "$("$berth" rpc filesystem --export read_file --input '{"path":"hello.txt"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["content"])')"

echo '2. write_file {"path":"../tmp/berth-should-not-exist.txt"}: outside it (/tmp is writable by everyone)'
if out=$("$berth" rpc filesystem --export write_file --input '{"path":"../tmp/berth-should-not-exist.txt","content":"x"}' 2>&1); then
	echo "   ALLOWED: $out"
	echo "FAIL — the write outside the declared scope went through."
	exit 1
fi
echo "   refused: $out"
if grep -Eq 'EACCES|EPERM|permission denied' <<<"$out"; then
	echo
	echo "PASS — the capability line in berth.yml is the boundary, and the kernel is the one holding it."
else
	echo "FAIL — refused, but not by the kernel's permission check."
	exit 1
fi
