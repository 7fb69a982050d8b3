#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What scripts/install.sh relies on: meson's install puts berth and berth-vmm in one bin
# directory, and the installed berth, run from the PATH and from anywhere, finds that
# berth-vmm on the PATH and the SDK's templates in the checkout it was built from, and
# names itself by its installed path in an MCP client's config. Installs into a
# temporary DESTDIR, never into the prefix; boots nothing.
. "$(dirname "$0")/../e2e/lib.sh"
new_home
dest=$BERTH_HOME/dest
work=$BERTH_HOME/work
mkdir -p "$work"
work=$(cd "$work" && pwd -P) # the folder as realpath() gives it
plan 8

meson install -C "$bld" --no-rebuild --quiet --destdir "$dest" >"$BERTH_HOME/install.log" 2>&1
check "meson install into a DESTDIR" test $? -eq 0
bin=$(dirname "$(find "$dest" -path '*/bin/berth' -type f | head -1)")
check "berth and berth-vmm are installed side by side" test -x "$bin/berth" -a -x "$bin/berth-vmm"
# Only the installed bin directory and the system's: no other berth or berth-vmm.
path=$bin:/usr/bin:/bin

(cd "$work" && PATH=$path berth --version) >"$BERTH_HOME/version" 2>&1
check "the installed berth runs from the PATH" grep -qx "berth [0-9.]*" "$BERTH_HOME/version"

(cd "$work" && PATH=$path berth init myapp) >"$BERTH_HOME/init.log" 2>&1
check "it finds the app templates in the checkout (berth init)" test -f "$work/myapp/berth.yml"
(cd "$work" && PATH=$path berth validate myapp) >"$BERTH_HOME/validate.log" 2>&1
check "  and the app it made is valid" grep -q "valid" "$BERTH_HOME/validate.log"

# Which berth-vmm a `berth vm install` would take the pins of: the installed one, found on
# the PATH (it then fails: there is nothing to install from).
mkdir -p "$BERTH_HOME/empty"
(cd "$work" && PATH=$path berth vm install --from "$BERTH_HOME/empty" --no-download) \
	>"$BERTH_HOME/vm-install.log" 2>&1
check "it finds the installed berth-vmm on the PATH" \
	grep -q "pinned by berth-vmm $bin/berth-vmm" "$BERTH_HOME/vm-install.log"

(cd "$work" && PATH=$path berth mcp --print-config claude-code --app myapp --app-dir myapp) \
	>"$BERTH_HOME/config" 2>"$BERTH_HOME/config.err"
check "an MCP client's config names the installed berth and the app's absolute folder" \
	grep -qxF "claude mcp add myapp -- $bin/berth mcp --app myapp --app-dir $work/myapp" \
	"$BERTH_HOME/config"
check "  with no warning that it would break when moved" \
	bash -c '! grep -q "not the one on \$PATH" "$0"' "$BERTH_HOME/config.err"
finish
