#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Calls between apps in one real VM (src/berth-init/grants.h): app:invoke:<target> lets
# its app, and only it, call the target on a socket of its own, attributed to it; every
# other way in is refused by the kernel (EACCES), and a grant is not transitive. The app
# that governs: true is asked before every call to the others, and when it is gone they
# refuse their calls (fail closed). Two governors are refused before boot.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 15
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
shares=$BERTH_HOME/shares
mkdir -p "$shares"
# share NAME FIXTURE CAPABILITY...: the fixture as app NAME with these capabilities.
share() {
	local name=$1 fixture=$2 dir=$BERTH_HOME/src-$1
	shift 2
	rm -rf "$dir"
	cp -r "$src/test/e2e/fixtures/$fixture" "$dir"
	sed -i "s/^name: $fixture/name: $name/" "$dir/berth.yml"
	for c in "$@"; do sed -i "s/^capabilities: \[\]/capabilities:\n  - $c/; /^capabilities:$/a\\  - $c" "$dir/berth.yml"; done
	node "$src/sdk/node/bundle.mjs" "$dir" "$shares/$name" >/dev/null
}
logs() { "$berth" vm logs apps >"$BERTH_HOME/logs.txt" 2>&1; }

share alpha caller app:invoke:beta app:invoke:nosuch
share beta caller
share gamma caller
share governor governor
share governor2 governor
"$vmm" run --name two-governors --app "$shares/governor" --app "$shares/governor2" >"$BERTH_HOME/two.log" 2>&1
check "two apps that govern are refused before boot" \
	grep -q 'at most one app may declare governs: true when running multiple apps together — found 2: governor, governor2' "$BERTH_HOME/two.log"

"$vmm" run --name apps --app "$shares/alpha" --app "$shares/beta" --app "$shares/gamma" \
	--app "$shares/governor" --mem 1024 2>"$BERTH_HOME/vmm-run.log" && wait_state apps running 300
for ((i = 0; i < 300; i++)); do
	logs
	[ "$(grep -c '" ready$' "$BERTH_HOME/logs.txt")" -ge 4 ] && break
	sleep 1
done
check "a VM with alpha, beta, gamma and a governor boots" test "$(grep -c '" ready$' "$BERTH_HOME/logs.txt")" -ge 4

# --- app:invoke ------------------------------------------------------------------------
call alpha call '{"socket":"/run/berth/beta/peers/alpha/rpc.sock","export":"echo","input":{"text":"hi"}}'
says "alpha, granted app:invoke:beta, calls beta on its own socket" 'r["ok"] and r["answer"]["result"] == {"text": "hi", "app": "beta"}'
logs
check "and beta knows the call is alpha's" grep -q '\[berth:runtime\] "alpha" invoked export "echo"' "$BERTH_HOME/logs.txt"
call gamma call '{"socket":"/run/berth/beta/peers/alpha/rpc.sock","export":"echo","input":{"text":"hi"}}'
says "gamma cannot use alpha's way in (EACCES)" 'not r["ok"] and r["error"] == "EACCES"'
call gamma call '{"socket":"/run/berth/beta/rpc.sock","export":"echo","input":{"text":"hi"}}'
says "nor beta's own socket (EACCES)" 'not r["ok"] and r["error"] == "EACCES"'
call beta call '{"socket":"/run/berth/alpha/rpc.sock","export":"echo","input":{"text":"hi"}}'
says "a grant is one way: beta cannot call alpha (EACCES)" 'not r["ok"] and r["error"] == "EACCES"'
call beta call '{"socket":"/run/berth/gamma/peers/beta/rpc.sock","export":"echo","input":{"text":"hi"}}'
says "nor anyone it was not granted" 'not r["ok"] and r["error"] in ("ENOENT", "EACCES")'
check "a grant for an app that is not in the VM is warned about" \
	grep -q '\[berth-init\] WARNING: "alpha" declares app:invoke:nosuch, but no app named "nosuch" is in this VM — ignoring' "$BERTH_HOME/logs.txt"

# --- governs: true ---------------------------------------------------------------------
call beta echo '{"text":"governed"}'
says "a call the governor allows runs" 'r == {"text": "governed", "app": "beta"}'
call beta forbidden
check "a call it refuses does not, with its reason" test "$out" = 'governance denied forbidden: the governor forbids it'
logs
check "the governor was asked, with the caller" grep -q '\[governor\] asked: host -> beta.forbidden' "$BERTH_HOME/logs.txt"
call governor leave
sleep 3
call beta echo '{"text":"nobody to ask"}'
check "with the governor gone, calls are refused: fail closed" \
	sh -c "echo \"\$1\" | grep -q '^governance denied echo: governance unavailable (' " _ "$out"
call gamma echo '{"text":"x"}'
check "for every governed app" sh -c "echo \"\$1\" | grep -q '^governance denied echo: governance unavailable (' " _ "$out"
check "and the VM stays up for them" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$BERTH_HOME/run/vm/apps/vm.json")" = running
"$berth" vm stop apps >/dev/null 2>&1
finish
