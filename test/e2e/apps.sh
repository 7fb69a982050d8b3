#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Apps end to end on real VMs: berth dev with the notes and hello-world-py examples,
# berth rpc, reloads (an identical bundle keeps the VM, an edited export is live once it
# is reloaded in place), persistence across a reload and a stop, a second berth dev
# refused, a manifest error that boots nothing, and a Python import error visible in the
# guest log.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 26
trap 'kill -9 $dev_pid 2>/dev/null; kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
rpc() { "$berth" rpc "$@" 2>&1; }

notes=$BERTH_HOME/notes
cp -r "$src/apps/notes" "$notes"
log=$BERTH_HOME/dev.log
if start_dev "$notes" "$log"; then ok "berth dev boots apps/notes"; else not_ok "berth dev boots apps/notes"; diag < "$log"; fi
check "it says how long the VM took, split into bundle and boot" \
	grep -Eq '^VM ready in [0-9]+ ms \(bundle [0-9]+ ms, fresh, (boot|restore) [0-9]+ ms\)\. boot [0-9a-f-]{36}, berth-vmm pid [0-9]+$' "$log"
check "and where to find it" grep -q "run dir $BERTH_HOME/run/vm/berth-dev-notes; call it with \`berth rpc notes --export <name>\`" "$log"

id=$(rpc notes --export add_note --input '{"text":"buy milk"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "add_note returns a uuid" python3 -c 'import sys,uuid; uuid.UUID(sys.argv[1], version=4)' "$id"
rpc notes --export list_notes >"$BERTH_HOME/list.json"
check "list_notes lists it" python3 -c '
import json,sys; n=json.load(open(sys.argv[1]))["notes"]
sys.exit(not(len(n)==1 and n[0]=={"id":sys.argv[2],"text":"buy milk","completed":False}))' "$BERTH_HOME/list.json" "$id"
check "complete_note completes it" sh -c "'$berth' rpc notes --export complete_note --input '{\"id\":\"$id\"}' | grep -q '\"completed\": true'"
check "complete_note of an unknown id is idempotent" sh -c "'$berth' rpc notes --export complete_note --input '{\"id\":\"does-not-exist\"}' | grep -q '\"completed\": false'"
out=$(rpc notes --export no_such_thing); status=$?
check "an unknown export fails with the SDK's message" test "$status" = 1 -a "$out" = 'no such export "no_such_thing"'
out=$(rpc notes --export add_note --input '{"text":5}'); status=$?
check "invalid input returns the validation error" sh -c "test $status = 1 && echo '$out' | grep -q '\"path\": \\[' && echo '$out' | grep -q 'expected string, received number'"
out=$(rpc notes --export add_note --input '{text}'); status=$?
check "bad --input JSON is refused by the CLI" sh -c "test $status = 2 && echo '$out' | grep -q -- '--input is not valid JSON: '"

if (cd "$notes" && "$berth" dev >"$BERTH_HOME/dev2.log" 2>&1); then
	not_ok "a second berth dev of the same app is refused"
else
	check "a second berth dev of the same app is refused, saying where the first runs" \
		grep -q "\"notes\" is already running in another berth dev (berth-vmm pid [0-9]*, run dir $BERTH_HOME/run/vm/berth-dev-notes)" "$BERTH_HOME/dev2.log"
fi

boot1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bootId"])' "$BERTH_HOME/run/vm/berth-dev-notes/vm.json")
echo "// a comment changes nothing in the bundle" >>"$notes/src/index.ts"
check "an identical bundle does not reboot the VM" wait_for "$log" 'the bundle did not change' 60
boot2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bootId"])' "$BERTH_HOME/run/vm/berth-dev-notes/vm.json")
check "the VM is the same boot" test "$boot1" = "$boot2"

sed -i 's/const note: Note = { id: randomUUID(), text, completed: false };/const note: Note = { id: randomUUID(), text: text.toUpperCase(), completed: false };/' "$notes/src/index.ts"
check "an edited export is reloaded in place, on the same boot" wait_for "$log" "^Reloaded in place in [0-9]* ms (bundle [0-9]* ms, pack [0-9]* ms, stop [0-9]* ms, start [0-9]* ms)\\. boot $boot1\$" 180
rpc notes --export add_note --input '{"text":"shout"}' >/dev/null
rpc notes --export list_notes >"$BERTH_HOME/list2.json"
check "the edited export is live after the reload" grep -q '"text": "SHOUT"' "$BERTH_HOME/list2.json"
check "notes survive the reload (state disk)" grep -q '"text": "buy milk"' "$BERTH_HOME/list2.json"
stop_dev
check "Ctrl-C stops the VM and removes its run dir" test ! -e "$BERTH_HOME/run/vm/berth-dev-notes"
start_dev "$notes" "$BERTH_HOME/dev3.log" || diag < "$BERTH_HOME/dev3.log"
check "an app unchanged since its last bundle is not bundled again" \
	grep -Eq '^VM ready in [0-9]+ ms \(bundle [0-9]+ ms, unchanged, ' "$BERTH_HOME/dev3.log"
rpc notes --export list_notes >"$BERTH_HOME/list3.json"
check "notes survive a stop and a new boot" sh -c "grep -q '\"text\": \"buy milk\"' '$BERTH_HOME/list3.json' && grep -q '\"text\": \"SHOUT\"' '$BERTH_HOME/list3.json'"
stop_dev

# --- Python --------------------------------------------------------------------------------
py=$BERTH_HOME/hello-world-py
cp -r "$src/apps/hello-world-py" "$py"
start_dev "$py" "$BERTH_HOME/py.log" || diag < "$BERTH_HOME/py.log"
check "hello-world-py answers greet" sh -c "'$berth' rpc hello-world-py --export greet --input '{\"name\":\"World\"}' | grep -q '\"message\": \"Hello, World! (from a real Python resident app)\"'"
out=$(rpc hello-world-py --export does_not_exist --input '{}')
check "and an unknown export the same way" test "$out" = 'no such export "does_not_exist"'
stop_dev

sed -i '1i import package_the_image_lacks' "$py/src/app.py"
if (cd "$py" && "$berth" dev >"$BERTH_HOME/py2.log" 2>&1); then
	not_ok "a Python app importing a package the image lacks fails at boot"
else
	ok "a Python app importing a package the image lacks fails at boot"
fi
check "with the ModuleNotFoundError in what berth dev prints" grep -q "ModuleNotFoundError: No module named 'package_the_image_lacks'" "$BERTH_HOME/py2.log"
"$berth" vm logs berth-dev-hello-world-py >"$BERTH_HOME/py-logs.txt" 2>&1
check "and in berth vm logs" grep -q "ModuleNotFoundError: No module named 'package_the_image_lacks'" "$BERTH_HOME/py-logs.txt"

# --- a manifest error ----------------------------------------------------------------------
bad=$BERTH_HOME/bad
cp -r "$src/apps/notes" "$bad"
sed -i 's|filesystem:write:/workspace|filesystem:write:/etc|' "$bad/berth.yml"
(cd "$bad" && "$berth" dev >"$BERTH_HOME/bad.log" 2>&1)
check "a manifest error prints the file, line and message" \
	grep -q 'berth.yml:[0-9]* capabilities.0: filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got "/etc"' "$BERTH_HOME/bad.log"
check "and boots nothing" test ! -e "$BERTH_HOME/run/vm/berth-dev-notes"
finish
