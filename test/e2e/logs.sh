#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM's log socket with many readers, on one real VM: berth dev streams the log while
# berth vm logs (twice), berth vm logs --follow and late readers come and go; a new line
# reaches every reader once; readers past the cap are refused with a line; a reader that
# stops reading is dropped alone, while the app floods its log; and berth dev, dropped
# the same way while the VM runs on, attaches again instead of stopping the VM.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 27
dev_pid= follow_pid= holders_pid= stalled_pid=
cleanup() {
	local p
	for p in $holders_pid $stalled_pid $follow_pid $dev_pid; do kill -9 "$p" 2>/dev/null; done
	kill -CONT "$dev_pid" 2>/dev/null
	p=$(vm_pid berth-dev-logger)
	[ -n "$p" ] && kill -9 "$p" 2>/dev/null
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }

app=$BERTH_HOME/logger
cp -r "$src/test/e2e/fixtures/logger" "$app"
run=$BERTH_HOME/run/vm/berth-dev-logger
log=$BERTH_HOME/dev.log
say() { "$berth" rpc logger --export say --input "{\"text\":\"$1\"}" >/dev/null 2>&1; }
# count FILE TEXT: how many lines hold TEXT
count() { grep -cF -- "$2" "$1"; }
wait_file() {
	local i
	for ((i = 0; i < 300; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}

if start_dev "$app" "$log"; then ok "berth dev boots the logger app"; else not_ok "berth dev boots the logger app"; diag < "$log"; exit 1; fi
wait_for "$log" '"logger" ready' 60

# --- readers side by side -------------------------------------------------------------
"$berth" vm logs berth-dev-logger >"$BERTH_HOME/logs1.txt" 2>&1; s1=$?
"$berth" vm logs berth-dev-logger >"$BERTH_HOME/logs2.txt" 2>&1; s2=$?
check "berth vm logs, twice, replays the log each time" sh -c "
	test $s1 = 0 && test $s2 = 0 &&
	grep -qF '[logger] [berth:runtime] \"logger\" ready' '$BERTH_HOME/logs1.txt' &&
	grep -qF '[logger] [berth:runtime] \"logger\" ready' '$BERTH_HOME/logs2.txt'"
sleep 1
check "berth dev keeps running" kill -0 "$dev_pid"
check "and says nothing about the VM going away" sh -c "! grep -q 'went away\|stopping the VM' '$log'"

"$berth" vm logs --follow berth-dev-logger >"$BERTH_HOME/follow.txt" 2>&1 &
follow_pid=$!
check "berth vm logs --follow replays, then waits" wait_for "$BERTH_HOME/follow.txt" '"logger" ready' 30
"$berth" vm logs --json berth-dev-logger >"$BERTH_HOME/logs3.json" 2>&1
check "another reader meanwhile gets the raw lines with --json" \
	grep -qF '"src":"logger","stream":"stderr","line":"[berth:runtime] \"logger\" ready"}' "$BERTH_HOME/logs3.json"

say "first new line"
check "berth dev prints a new line" wait_for "$log" '^\[logger\] first new line$' 30
check "berth vm logs --follow gets it too" wait_for "$BERTH_HOME/follow.txt" '^\[logger\] first new line$' 30
sleep 1
check "each of them once" test "$(count "$log" 'first new line')" = 1 -a "$(count "$BERTH_HOME/follow.txt" 'first new line')" = 1
"$berth" vm logs berth-dev-logger >"$BERTH_HOME/late.txt" 2>&1
check "a reader that comes later gets it in the replay" sh -c "
	grep -qF '[logger] first new line' '$BERTH_HOME/late.txt' &&
	grep -qF '[berth-init] host channel: ready' '$BERTH_HOME/late.txt'"
check "berth vm logs --follow is still following" kill -0 "$follow_pid"

# --- the cap ----------------------------------------------------------------------------
# berth dev and the follower are two; 14 more make 16, the most berth-vmm serves.
python3 - "$run/logs.sock" 14 "$BERTH_HOME/holders.ready" <<'PY' &
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    buf = b""
    while b"\n" not in buf:
        buf += s.recv(64)
    socks.append(s)
open(sys.argv[3], "w").close()
time.sleep(600)
PY
holders_pid=$!
check "14 more readers are served" wait_file "$BERTH_HOME/holders.ready"
"$berth" vm logs berth-dev-logger >"$BERTH_HOME/refused.txt" 2>&1; s=$?
check "the 17th is refused, told why and what to do, exit status 1" sh -c "test $s = 1 &&
	grep -qF 'log stream refused: 16 readers are attached to this VM, the most it serves; stop one (berth vm logs --follow, berth dev) and try again' '$BERTH_HOME/refused.txt'"
kill "$holders_pid"; wait "$holders_pid" 2>/dev/null; holders_pid=
sleep 1
"$berth" vm logs berth-dev-logger >"$BERTH_HOME/after-cap.txt" 2>&1; s=$?
check "once they leave, a reader is served again" sh -c "test $s = 0 && grep -qF 'first new line' '$BERTH_HOME/after-cap.txt'"

# --- a reader that stops reading --------------------------------------------------------
# A raw client that never reads, and berth dev stopped (SIGSTOP): each has a 2 MiB buffer in
# berth-vmm, and the app now logs 2.7 MB.
python3 - "$run/logs.sock" "$BERTH_HOME/stalled.go" >"$BERTH_HOME/stalled.txt" <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.2)
s.settimeout(10)
n = 0
try:
    while True:
        d = s.recv(65536)
        if not d:
            print("eof", n)
            break
        n += len(d)
except socket.timeout:
    print("no end after", n)
PY
stalled_pid=$!
sleep 1
kill -STOP "$dev_pid"
"$berth" rpc logger --export flood --input '{"lines":2600,"size":1000}' >"$BERTH_HOME/flood.json" 2>&1
check "the app logs 2600 lines of 1000 bytes" grep -q '"lines": 2600' "$BERTH_HOME/flood.json"
check "berth vm logs --follow gets the last of them" wait_for "$BERTH_HOME/follow.txt" '^\[logger\] flood 2599 x' 60
check "every one, once and in order" python3 -c '
import re, sys
n = [int(m.group(1)) for m in re.finditer(r"^\[logger\] flood (\d+) x+$", open(sys.argv[1]).read(), re.M)]
sys.exit(n != list(range(2600)))' "$BERTH_HOME/follow.txt"
check "berth-vmm dropped the two readers that did not read" \
	test "$(grep -c 'dropped a log reader that stopped reading' "$run/vmm.log")" = 2
touch "$BERTH_HOME/stalled.go"
wait "$stalled_pid"; stalled_pid=
check "the raw client, reading at last, finds part of the flood and the end of its stream" \
	python3 -c 'import sys; w = open(sys.argv[1]).read().split(); sys.exit(not (w[0] == "eof" and 0 < int(w[1]) < 2700000))' "$BERTH_HOME/stalled.txt"
kill -CONT "$dev_pid"
check "berth dev, let go on, attaches again" wait_for "$log" 'the log stream had ended while the VM ran on; following it again' 30
check "and keeps running" kill -0 "$dev_pid"
check "it printed the last line of the flood" grep -q '^\[logger\] flood 2599 x' "$log"
check "and no line twice" python3 -c '
import re, sys
n = [int(m.group(1)) for m in re.finditer(r"^\[logger\] flood (\d+) x+$", open(sys.argv[1]).read(), re.M)]
sys.exit(len(n) != len(set(n)) or n != sorted(n))' "$log"

say "second new line"
check "berth dev prints new lines after that" wait_for "$log" '^\[logger\] second new line$' 30
check "and so does berth vm logs --follow" wait_for "$BERTH_HOME/follow.txt" '^\[logger\] second new line$' 30

# --- the end ----------------------------------------------------------------------------
stop_dev
check "Ctrl-C stops berth dev and its VM" test ! -e "$run"
for ((i = 0; i < 100; i++)); do kill -0 "$follow_pid" 2>/dev/null || break; sleep 0.1; done
wait "$follow_pid"; s=$?
follow_pid=
check "berth vm logs --follow ends with the VM, exit status 0" test "$s" = 0
finish
