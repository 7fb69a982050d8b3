#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The unit, fuzz-replay and stress tests once more, built with AddressSanitizer and
# UndefinedBehaviorSanitizer into build/asan/ (inside the ignored build/; BERTH_ASAN_BUILD
# names another directory), where any finding fails its test: a memory error, undefined
# behaviour, or a leak (in every fuzz input, and at the exit of every test program). The
# cli and mcp suites run the real berth under the sanitizers too: every command's option
# handling, and a berth mcp session against the stand-in berth-vmm, the only test of the
# session's loop that needs no VM. No VM is booted; it takes a few minutes, most of them
# building. Extra arguments go to meson test. Ends with 'sanitizers: N passed, N failed, N skipped'; exits non-zero on
# any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BERTH_ASAN_BUILD:-build/asan}
say_failed() {
	sed 's/^/sanitizers: /' "$1" | tail -n 40
	echo "sanitizers: $2"
	exit 1
}
mkdir -p "$dir"
if [ ! -f "$dir/build.ninja" ]; then
	# b_lundef=false: with clang (CC=clang) the sanitizer runtime's symbols are only
	# resolved at run time.
	meson setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
		>"$dir/setup-output.txt" 2>&1 || say_failed "$dir/setup-output.txt" "meson setup failed"
fi
ninja -C "$dir" >"$dir/build-output.txt" 2>&1 || say_failed "$dir/build-output.txt" "the build failed"
# Fatal, all of them: halt at the first finding, abort (a fuzz input's child dies with a
# signal and is named), check leaks; UBSan prints where.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
status=0
meson test -C "$dir" --suite unit --suite fuzz --suite stress --suite cli --suite mcp --print-errorlogs \
	--num-processes 2 "$@" >"$dir/test-output.txt" 2>&1 || status=$?
grep -E '^ *[0-9]+/[0-9]+ ' "$dir/test-output.txt" | sed 's/^/sanitizers: /' || true
summary=$(python3 scripts/tap-summary.py "$dir/meson-logs/testlog.json") || status=1
printf '%s\n' "$summary" | sed 's/^/sanitizers: /'
if [ "$status" -ne 0 ]; then
	echo "sanitizers: the reports are in $dir/meson-logs/testlog.txt" >&2
fi
exit $status
