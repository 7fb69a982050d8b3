#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Apps that work together, on a real VM (docs/context-bus.md, docs/context.md): the
# filesystem, code-editor, activity-feed and hello-world-py examples in one VM (a VM holds
# four shares).
# berth-init starts the context bus and the /context index under agent-init as their own
# uids; a file filesystem writes is opened by code-editor when it hears of it, a Python
# publish reaches the Node subscriber, activity-feed lists what the others announce newest
# first, the bus names each sender by its uid; /context files are attributed by their
# owner's uid, tagged, ranked by keyword, and they, their tags and the index survive the
# VM and the next boot.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 25
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
shares=$BERTH_HOME/shares
state=$BERTH_HOME/state.img
run=$BERTH_HOME/run/vm/together
mkdir -p "$shares"
for a in filesystem code-editor activity-feed hello-world-py notes; do
	node "$src/sdk/node/bundle.mjs" "$src/apps/$a" "$shares/$a" >/dev/null || { echo "Bail out! cannot bundle $a"; exit 1; }
done
# logged PATTERN [SECONDS]: the guest log (berth vm logs) has a line matching PATTERN.
logged() {
	local i
	for ((i = 0; i < ${2:-60}; i++)); do
		"$berth" vm logs together >"$BERTH_HOME/logs.txt" 2>&1
		grep -q -- "$1" "$BERTH_HOME/logs.txt" && return 0
		sleep 1
	done
	return 1
}
boot() {
	local a args=()
	for a in filesystem code-editor activity-feed hello-world-py; do args+=(--app "$shares/$a"); done
	"$vmm" run --name together "${args[@]}" --state "$state" --mem 1536 2>"$BERTH_HOME/vmm-run.log" &&
		wait_state together running 300 || return 1
	for a in filesystem code-editor activity-feed hello-world-py; do
		logged "\"$a\" ready" 300 || return 1
	done
}

# --- boot 1 ------------------------------------------------------------------------------
if boot; then ok "a VM with four apps boots and every app is ready"; else not_ok "a VM with four apps boots and every app is ready"; diag <"$BERTH_HOME/vmm-run.log"; tail -40 "$BERTH_HOME/logs.txt" | diag; fi
"$berth" vm status together --json >"$BERTH_HOME/status.json"
check "berth-init runs the context bus and the /context index" python3 -c '
import json,sys; c=json.load(open(sys.argv[1]))["vms"][0]["guest"]["context"]
sys.exit(not(c["contextBus"]["state"] == "ready" and c["semanticFs"]["state"] == "ready"))' "$BERTH_HOME/status.json"
check "berth-init bound both daemons' sockets and handed them over (socket activation)" python3 -c '
import json,sys
ev = [json.loads(l[l.index("{"):]) for l in open(sys.argv[1]) if "guest: {" in l]
d = {e["daemon"]: e for e in ev if e.get("event") == "daemon_started"}
sys.exit(not(d["context-bus"]["activated"] and d["semantic-fs"]["activated"] and d["context-bus"]["listen"] == "/tmp/berth-context-bus.sock"))' "$run/vmm.log"
# daemon_report SOURCE KEY=VALUE...: agent-init's report lines of a daemon, in its log.
daemon_report() {
	python3 -c '
import json,sys
src, want = sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
n = 0
for line in open(sys.argv[1]):
    head = "[" + src + "] {"
    if not line.startswith(head): continue
    try: e = json.loads(line[len(head) - 1:])
    except ValueError: continue
    n += e.get("source") == "agent-init" and all(str(e.get(k)) == v for k, v in want.items())
sys.exit(n != 1)' "$BERTH_HOME/logs.txt" "$@"
}
if daemon_report context-bus event=app_uid_applied uid=9001 &&
	daemon_report context-bus event=capability_policy_applied ruleset=FullyEnforced; then
	ok "the bus runs as uid 9001 under a fully enforced Landlock domain"
else
	not_ok "the bus runs as uid 9001 under a fully enforced Landlock domain"
fi
if daemon_report semantic-fs event=app_uid_applied uid=9005 &&
	daemon_report semantic-fs event=capability_policy_applied ruleset=FullyEnforced; then
	ok "the index as uid 9005, likewise"
else
	not_ok "the index as uid 9005, likewise"
fi
check "every Node and Python app reached the bus" sh -c "test \$(grep -c 'context bus connected at /tmp/berth-context-bus.sock' '$BERTH_HOME/logs.txt') -ge 4"
check "the bus knows each app by its uid, not by what it claims" \
	grep -q '\[context-bus\] conn [0-9]* from uid 10001 pid [0-9]* is "code-editor"' "$BERTH_HOME/logs.txt"

# --- the bus -------------------------------------------------------------------------------
call filesystem write_file '{"path":"hello.txt","content":"hi"}'
check "filesystem's write is heard: code-editor opens the file on its own" \
	logged '\[code-editor\] reactively opened "hello.txt" (2 characters, announced by "filesystem")'
call code-editor open_file '{"path":"hello.txt"}'
says "and open_file returns what filesystem wrote" 'r == {"content": "hi"}'
call hello-world-py publish_file_created '{"path":"hello.txt","created_by":"hello-world-py"}'
check "a Python publish reaches the Node subscriber" \
	logged '\[code-editor\] reactively opened "hello.txt" (2 characters, announced by "hello-world-py")'
call filesystem publish_context_event '{"topic":"notes.added","payload":{"text":"buy milk"}}'
sleep 2
call activity-feed get_recent_activity
says "activity-feed lists what the others announced, newest first" \
	'[e["topic"] for e in r["events"]][:3] == ["notes.added", "fs.file_created", "fs.file_created"] and r["events"][0]["payload"]["text"] == "buy milk" and r["events"][1]["payload"]["createdBy"] == "hello-world-py" and r["events"][2]["payload"]["createdBy"] == "filesystem"'
for i in $(seq 1 60); do call filesystem publish_context_event "{\"topic\":\"notes.added\",\"payload\":{\"text\":\"note $i\"}}"; done
sleep 3
call activity-feed get_recent_activity
says "and keeps the 50 newest" 'len(r["events"]) == 50 and r["events"][0]["payload"]["text"] == "note 60"'
call filesystem publish_context_event '{"topic":"nobody.listens","payload":{"x":1}}'
says "a topic nobody subscribes to is published without an error" 'r is None'

# --- /context ------------------------------------------------------------------------------
call filesystem write_context_file '{"path":"plans/roadmap.md","content":"The quarterly roadmap. Roadmap items: the context index; the roadmap review"}'
call filesystem write_context_file '{"path":"notes/lunch.txt","content":"lunch at noon, then a long walk, and the roadmap is somebody else'"'"'s problem today"}'
call filesystem tag_context_file '{"path":"plans/roadmap.md","task":"planning","relatedApps":["notes"]}'
says "filesystem tags its own /context file" 'r is None'
call filesystem query_context '{"text":"roadmap","limit":5}'
says "query_context ranks the file that matches best first, by keyword, attributed to its creator by uid, with its tags" \
	'[x["path"] for x in r["results"]] == ["plans/roadmap.md", "notes/lunch.txt"] and r["results"][0]["score"] > r["results"][1]["score"] and all(x["ranking"] == "keyword" and x["createdBy"] == "filesystem" for x in r["results"]) and r["results"][0]["task"] == "planning" and r["results"][0]["relatedApps"] == ["notes"]'
call filesystem query_context '{"text":"noon","limit":5}'
says "a word only one file has finds that file alone" '[x["path"] for x in r["results"]] == ["notes/lunch.txt"]'
"$berth" vm stop together >/dev/null 2>&1
check "the VM stops" test ! -e "$run"

# --- boot 2: the same state disk -------------------------------------------------------------
if boot; then ok "the next boot of the same state disk"; else not_ok "the next boot of the same state disk"; diag <"$BERTH_HOME/vmm-run.log"; fi
call filesystem read_context_file '{"path":"plans/roadmap.md"}'
says "/context kept the file" 'r["content"].startswith("The quarterly roadmap")'
call filesystem query_context '{"text":"roadmap","limit":5}'
says "and the index its tags" 'r["results"][0]["path"] == "plans/roadmap.md" and r["results"][0]["task"] == "planning"'
check "the index reopened what it had: nothing to update" logged '\[semantic-fs\] indexed /context: 2 files, 0 updated, 0 removed'
call activity-feed get_recent_activity
says "activity-feed starts empty: it keeps nothing on disk" 'r["events"] == []'
"$berth" vm stop together >/dev/null 2>&1

# --- boot 3: notes, activity-feed and two bus probes ------------------------------------------
for a in pub sub; do
	rm -rf "$BERTH_HOME/src-$a" && cp -r "$src/test/e2e/fixtures/busprobe" "$BERTH_HOME/src-$a"
	sed -i "s/^name: busprobe/name: $a/" "$BERTH_HOME/src-$a/berth.yml"
	node "$src/sdk/node/bundle.mjs" "$BERTH_HOME/src-$a" "$shares/$a" >/dev/null
done
"$vmm" run --name together --app "$shares/notes" --app "$shares/activity-feed" --app "$shares/pub" \
	--app "$shares/sub" --mem 1536 2>"$BERTH_HOME/vmm-run3.log" && wait_state together running 300
for a in notes activity-feed pub sub; do logged "\"$a\" ready" 300 || break; done
call notes add_note '{"text":"first"}'
call notes add_note '{"text":"second"}'
sleep 2
call activity-feed get_recent_activity
says "notes publishes notes.added, and the feed lists it newest first" \
	'[(e["topic"], e["payload"]["text"]) for e in r["events"]][:2] == [("notes.added", "second"), ("notes.added", "first")]'
call pub spoof '{"claim":"notes"}'
check "a register under another app's name is recorded under the real one" \
	logged '\[context-bus\] {"event":"register_name_overridden","conn":[0-9]*,"uid":10002,"pid":[0-9]*,"claimed":"notes","app":"pub"}'
call pub oversize
call sub roundtrip
says "a frame far over the cap does not kill the bus: it still delivers" 'r == {"delivered": True}'
"$berth" vm stop together >/dev/null 2>&1
finish
