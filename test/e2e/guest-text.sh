#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Guest and app text on its way to a terminal (docs/vm.md, "Text from the guest"): boots
# no VM. Stale run dirs made up by hand (vm.json, vmm.log and console.log holding escape
# sequences, a pid file naming a dead pid), a stand-in berth-vmm serving a made-up running
# VM's sockets (fixtures/fake-vmm.py), and a berth.yml whose error quotes escape sequences.
# The human outputs of berth vm logs, berth vm status, berth rpc, berth attest, berth dev and
# berth mcp must hold no raw control, C1 or bidi character, and show that one was there;
# --json, berth rpc's result and berth attest's record keep the bytes when they go to a
# pipe, and are escaped (the same JSON) on a terminal.
. "$(dirname "$0")/lib.sh"
new_home
plan 46
run=$BERTH_HOME/run/vm
out=$BERTH_HOME/out
err=$BERTH_HOME/err
mkdir -p "$run"

# clean FILE: valid UTF-8 with no control (but tab and line feed), DEL, C1, U+2028/2029
# or bidi control in it.
clean() {
	python3 -c '
import sys
try:
    t = open(sys.argv[1], "rb").read().decode("utf-8")
except UnicodeDecodeError as e:
    print("# not UTF-8:", e); sys.exit(1)
bidi = {0x61c, 0x200e, 0x200f, 0x2028, 0x2029} | set(range(0x202a, 0x202f)) | set(range(0x2066, 0x206a))
bad = [c for c in t if (ord(c) < 0x20 and c not in "\t\n") or 0x7f <= ord(c) <= 0x9f or ord(c) in bidi]
if bad:
    print("# raw characters:", " ".join("U+%04X" % ord(c) for c in sorted(set(bad))))
sys.exit(1 if bad else 0)' "$1"
}
# has_bytes FILE HEX: FILE holds these bytes.
has_bytes() { python3 -c 'import sys; sys.exit(bytes.fromhex(sys.argv[2]) not in open(sys.argv[1], "rb").read())' "$1" "$2"; }
# on_tty OUT CMD...: run CMD with its standard output on a terminal (a raw pty), into OUT.
on_tty() {
	python3 -c '
import os, pty, subprocess, sys, tty
m, s = pty.openpty()
tty.setraw(s)
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=s, stderr=subprocess.DEVNULL)
os.close(s)
data = b""
while True:
    try:
        d = os.read(m, 65536)
    except OSError:
        break
    if not d:
        break
    data += d
p.wait()
open(sys.argv[1], "wb").write(data)
sys.exit(p.returncode)' "$@"
}
# rpc_value FILE: the JSON result in FILE is exactly what the app returned.
rpc_value() {
	python3 -c '
import json, sys
v = json.loads(open(sys.argv[1], "rb").read())["text"]
sys.exit(v != "ok \x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\x1b[H\u009b31m\u202eevil\u2028x\x7f\rspoof")' "$1"
}
dead_pid() {
	sh -c 'exit 0' &
	wait $!
	echo $!
}
# stale NAME VM_JSON VMM_LOG: a run dir whose berth-vmm is gone, with a console log.
stale() {
	mkdir -p "$run/$1"
	printf '%s' "$2" >"$run/$1/vm.json"
	printf "$3" >"$run/$1/vmm.log"
	printf '[event] {"event":"hello"}\r\n[echo] hello \e]52;c;cHduZWQ=\a \e[2J\e[H \x9b31m \xc2\x9b31m \xe2\x80\xae evil \xe2\x80\xa8 \xc0\xaf \x7f\rspoof\r\n[    0.10] kernel\r\n[berth-init] done \e]0;title\a\r\n' >"$run/$1/console.log"
	dead_pid >"$run/$1/berth-vmm.pid"
}
reason_json='{"name":"NAME","state":"crashed","failure":{"reason":"guest said \u001b]0;pwned\u0007 \u202e bye"}}'

# --- a VM that is gone --------------------------------------------------------------------
stale stale1 "${reason_json/NAME/stale1}" 'starting\n'
"$berth" vm logs stale1 >"$out" 2>"$err"
check "berth vm logs of a stopped VM prints the guest log its console kept" grep -q '^\[echo\] hello' "$out"
check "  with no raw control, C1 or bidi character" clean "$out"
check "  showing each one: OSC 52, the 8-bit CSI, a UTF-8 C1, the bidi override, an overlong form" \
	grep -qF '[echo] hello \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H \x9b31m \u009b31m \u202e evil \u2028 \xc0\xaf \x7f\rspoof' "$out"
check "  and a CRLF line end as a plain one" grep -qxF '[berth-init] done \x1b]0;title\x07' "$out"
check "  the reason from vm.json on standard error, neutralised" clean "$err"
check "  and shown" grep -qF 'guest said \x1b]0;pwned\x07 \u202e bye' "$err"
"$berth" vm logs stale1 --json >"$out" 2>"$err"
check "berth vm logs --json to a pipe keeps the console's bytes" has_bytes "$out" 1b5d35323b63
check "  (the C1 and the override too)" has_bytes "$out" c29b3331
check "  and standard error is neutralised still" clean "$err"

stale berth-dev-gone "${reason_json/NAME/berth-dev-gone}" 'x\n'
"$berth" rpc gone --export hi >"$out" 2>"$err"
check "berth rpc says why the app's VM failed, neutralised" clean "$err"
check "  and shown" grep -qF 'failed: guest said \x1b]0;pwned\x07 \u202e bye; start it again' "$err"
rm -rf "$run/berth-dev-gone"

stale stale2 '{"name":"stale2","state":"crashed"}' 'ok\nlast \033[2J\033]0;t\007 line\n'
stale stale3 '{"name":"stale3","state":"crashed"}' 'last \377\376 \033[31m not UTF-8\n'
"$berth" vm status >"$out" 2>"$err"
check "berth vm status reports the stale run dirs" \
	test "$(grep -c '^cleaned up stale run dir of "stale[123]"' "$out")" = 3
check "  with no raw control, C1 or bidi character" clean "$out"
check "  showing the failure" grep -qF 'guest said \x1b]0;pwned\x07 \u202e bye' "$out"
check "  and vmm.log's last line" grep -qF 'last \x1b[2J\x1b]0;t\x07 line' "$out"
check "  and one whose last log line is not UTF-8" grep -qF 'last \xff\xfe \x1b[31m not UTF-8' "$out"
stale stale1 "${reason_json/NAME/stale1}" 'x\n'
"$berth" vm status --json >"$out" 2>"$err"
check "berth vm status --json keeps the reason as it was" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(d["staleCleaned"][0]["reason"] != "state crashed: guest said \x1b]0;pwned\x07 \u202e bye")' "$out"

# --- a running VM (a stand-in berth-vmm) --------------------------------------------------
# The interpreter itself: a wrapper (pyenv's shim) would exec it again under its own name.
# Its home given, since under the name berth-vmm it would look for its library beside
# any berth-vmm on the PATH (an installed one).
py=$(python3 -c 'import sys; print(sys.executable)')
pyhome=$(python3 -c 'import sys; print(sys.base_prefix)')
(PYTHONHOME=$pyhome exec -a berth-vmm "$py" "$src/test/e2e/fixtures/fake-vmm.py" "$run/live1") &
fake=$!
trap 'kill $fake 2>/dev/null; rm -rf "$BERTH_HOME"' EXIT
for ((i = 0; i < 100; i++)); do [ -f "$run/live1/berth-vmm.pid" ] && break; sleep 0.1; done

"$berth" vm status live1 >"$out" 2>"$err"
check "berth vm status shows the guest's apps" grep -q '^  echo\\x1b\]52' "$out"
check "  with no raw control, C1 or bidi character in any field" clean "$out"
"$berth" vm status live1 --json >"$out" 2>"$err"
check "berth vm status --json keeps the guest's text" has_bytes "$out" e280ae6576696c
on_tty "$out" "$berth" vm status live1 --json
check "  and escapes it on a terminal" clean "$out"
"$berth" vm logs live1 >"$out" 2>"$err"
check "berth vm logs prints the journal line, neutralised" \
	grep -qF '[echo\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\x1b[H\u009b31m\u202eevil\u2028x\x7f\rspoof] hello \x1b]52' "$out"
check "  with no raw control, C1 or bidi character" clean "$out"
"$berth" vm logs live1 --json >"$out" 2>"$err"
check "berth vm logs --json to a pipe passes every line as it came" has_bytes "$out" 6e6f74206a736f6e201b5b324a
on_tty "$out" "$berth" vm logs live1 --json
check "berth vm logs --json on a terminal escapes what would act on it" clean "$out"
check "  as JSON escapes" grep -qF 'not json \u001b[2J' "$out"

"$berth" rpc echo --export hi >"$out" 2>"$err"
check "berth rpc to a pipe prints the result's JSON as it is (the override raw)" has_bytes "$out" e280ae
check "  (the UTF-8 C1 raw)" has_bytes "$out" c29b
check "  whose value is the app's" rpc_value "$out"
on_tty "$out" "$berth" rpc echo --export hi
check "berth rpc on a terminal writes nothing raw" clean "$out"
check "  and the same JSON value" rpc_value "$out"
"$berth" rpc echo --export fail >"$out" 2>"$err"
check "berth rpc prints the app's error neutralised" clean "$err"
check "  shown" grep -qF 'boom \x1b]52;c;cHduZWQ=\x07' "$err"
check "  with its line break kept" grep -qx 'second line' "$err"
kill $fake 2>/dev/null
wait $fake 2>/dev/null

# --- the evidence of a boot whose guest reported hostile text -----------------------------
boot=0b0e4c3a-1111-2222-3333-444455556666
mkdir -p "$BERTH_HOME/runs/$boot"
python3 - "$BERTH_HOME/runs/$boot/evidence.json" "$boot" <<'EOF'
import json, sys
boot, h = sys.argv[2], "\x1b]52;c;cHduZWQ=\x07\u202e"
report = {"event": "capability_policy_applied", "bootId": boot, "app": "notes" + h,
          "ruleset": "NotEnforced" + h, "source": "agent-init"}
ev = {"schema": 1, "kind": "berth.boot-evidence", "bootId": boot, "final": "stopped",
      "events": [{"event": "boot_start", "lsm": "landlock,yama", "landlockAbi": 6},
                 {"event": "policy_compiled", "app": "notes", "path": "/run/berth/policy/notes.json",
                  "sha256": "60" * 32},
                 {"event": "agent_init_report", "app": "notes", "report": report}],
      "vm": {"name": "berth-dev-notes", "engine": "qemu", "accelerator": "tcg", "apps": [],
             "vmConfig": {"cpus": 2, "memMiB": 512, "nics": 0, "tsi": 0},
             "measurements": {"kernel": {"sha256": "7c" * 32, "pinned": True},
                              "rootfs": {"sha256": "46" * 32, "pinned": True}}}}
open(sys.argv[1], "w", encoding="utf-8").write(json.dumps(ev, ensure_ascii=False))
EOF
"$berth" attest "$boot" >"$out" 2>"$err"
check "berth attest writes the record to a pipe as it is" has_bytes "$out" e280ae
on_tty "$out" "$berth" attest "$boot"
check "  and escapes it on a terminal" clean "$out"
check "  and the reasons to standard error neutralised" clean "$err"
check "  and shown" grep -qF 'reported NotEnforced\x1b]52;c;cHduZWQ=\x07\u202e for app "notes\x1b]52' "$err"

# --- a berth.yml whose error quotes escape sequences --------------------------------------
mkdir -p "$BERTH_HOME/evil"
printf 'name: evil\nversion: 0.1.0\nruntime: "node\\e]0;pwned\\a\\e[2J\\u202e"\nexports: []\n' >"$BERTH_HOME/evil/berth.yml"
"$berth" dev "$BERTH_HOME/evil" >"$out" 2>"$err"
check "berth dev reports the invalid berth.yml" grep -q "Invalid enum value" "$err"
check "  neutralised" clean "$err"
check "  and shown" grep -qF "received 'node\\x1b]0;pwned\\x07\\x1b[2J\\u202e'" "$err"
"$berth" mcp --app evil --app-dir "$BERTH_HOME/evil" </dev/null >"$out" 2>"$err"
check "berth mcp relays the error to standard error" grep -q '^\[berth:mcp\] .*Invalid enum value' "$err"
check "  neutralised" clean "$err"
check "  and its standard output (MCP) carries none of it" test ! -s "$out"
"$berth" validate "$BERTH_HOME/evil" >"$out" 2>"$err"
check "berth validate reports the invalid berth.yml" grep -q "Invalid enum value" "$err"
check "  neutralised" clean "$err"
finish
