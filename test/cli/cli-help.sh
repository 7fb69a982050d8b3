#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every command of the CLI answers --help and -h on standard output with exit status 0,
# and a usage error with one line saying what was wrong, the usage line and a pointer to
# --help on standard error, with exit status 2 (src/berth/main.c's table drives both).
# The commands are taken from `berth --help`, so a new one is tested without an edit.
# Boots nothing.
. "$(dirname "$0")/../e2e/lib.sh"
new_home
out=$BERTH_HOME/out
err=$BERTH_HOME/err

mapfile -t cmds < <("$berth" --help | sed -n 's/^  \([a-z]\+\( [a-z]\+\)\?\)  .*/\1/p')
plan $((4 + ${#cmds[@]} * 7))

"$berth" --help >"$out" 2>"$err"
check "berth --help lists the commands on standard output" test "${#cmds[@]}" -ge 12 -a ! -s "$err"
"$berth" >"$out" 2>"$err"
check "berth alone is a usage error (exit 2, the list on standard error)" \
	test $? -eq 2 -a ! -s "$out" -a -s "$err"
"$berth" no-such-command >"$out" 2>"$err"
check "an unknown command is a usage error that names it" \
	bash -c '[ $0 -eq 2 ] && grep -q "unknown command '"'"'no-such-command'"'"'" "$1"' $? "$err"
"$berth" vm >"$out" 2>"$err"
check "a group without its command is a usage error" test $? -eq 2 -a -s "$err"

for cmd in "${cmds[@]}"; do
	# shellcheck disable=SC2086 # "vm status" is two words
	for h in --help -h; do
		"$berth" $cmd $h >"$out" 2>"$err"
		rc=$?
		check "berth $cmd $h: exit 0, usage on standard output, nothing on standard error" \
			bash -c '[ $0 -eq 0 ] && head -1 "$1" | grep -q "^usage: berth $2 " && [ ! -s "$3" ]' \
			$rc "$out" "$cmd" "$err"
	done
	"$berth" $cmd --no-such-option >"$out" 2>"$err"
	rc=$?
	check "berth $cmd --no-such-option: exit 2" test $rc -eq 2
	check "  says which option, on standard error" grep -q "unknown option '--no-such-option'" "$err"
	check "  with the usage line and where the help is" \
		bash -c 'grep -q "usage: berth $1 " "$2" && grep -q "Run '"'"'berth $1 --help'"'"'" "$2"' _ "$cmd" "$err"
	check "  and nothing on standard output" test ! -s "$out"
	# -h after another option is help too (not an unknown option).
	"$berth" $cmd --json -h >"$out" 2>"$err"
	rc=$?
	check "berth $cmd ... -h: help wherever it stands (or a usage error for the other option)" \
		bash -c '[ $0 -eq 0 ] && grep -q "^usage: berth $1 " "$2" || { [ $0 -eq 2 ] && grep -q "unknown option" "$3"; }' \
		$rc "$cmd" "$out" "$err"
done
finish
