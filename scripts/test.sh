#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite on a fresh Debian 12 machine: install what is needed, build,
# build the guest artifacts, then run the unit, fuzz-replay, stress and end-to-end tests
# (real QEMU VMs). Ends with 'N passed, N failed'; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# Tests run against what was just built; pin drift is reported loudly, not hidden.
BERTH_PINS=build scripts/build-artifacts.sh
# The Docker runtime's tests need an engine that answers.
scripts/start-dockerd.sh
status=0
meson test -C build --print-errorlogs --num-processes 2 "$@" >build/test-output.txt 2>&1 || status=$?
grep -E '^ *[0-9]+/[0-9]+ ' build/test-output.txt || true
python3 scripts/tap-summary.py build/meson-logs/testlog.json || status=1
if [ -s out/artifacts/drift.txt ]; then
	echo "NOTE: the artifacts differ from the reviewed pins (see out/artifacts/drift.txt):"
	cat out/artifacts/drift.txt
fi
if [ -s out/artifacts/repro-failure.txt ]; then
	echo "FAIL: the artifacts differ from the pins although nothing they are made of changed;"
	echo "the build depends on the machine (out/artifacts/repro-failure.txt names the files):"
	cat out/artifacts/repro-failure.txt
	status=1
fi
exit $status
