#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# agent-init on this host's real kernel: small policies, and agent-init-probe trying what a
# confined app may and may not do. Needs root and Landlock ABI 6 or newer; no VM.
. "$(dirname "$0")/lib.sh"
ai=$bld/src/agent-init/agent-init
ai_test=$bld/src/agent-init/agent-init-test
[ "$(id -u)" = 0 ] || skip_all "agent-init needs root"
[ -x "$ai" ] && [ -x "$ai_test" ] || skip_all "build agent-init first"
abi=$(python3 -c 'import ctypes; print(max(0, ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)))')
[ "$abi" -ge 6 ] || skip_all "this kernel's Landlock ABI is $abi, the tests need 6"

APP_UID=64101 # the app, and a second app
OTHER_UID=64102
T=$(mktemp -d /tmp/berth-agent-init.XXXXXX)
helpers=()
cleanup() {
	for p in "${helpers[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
chmod 0755 "$T"
mkdir -p "$T/bin" "$T/ws" "$T/outside"
install -m 0755 "$bld/src/agent-init/agent-init-probe" "$T/bin/probe"
chown "$APP_UID:$APP_UID" "$T/ws"
# DAC lets the app write here: whatever refuses it is the ruleset.
chmod 0777 "$T/outside"
echo keep >"$T/outside/file"
chown "$APP_UID:$APP_UID" "$T/outside/file"
ln -s "$T/outside" "$T/ws/link"
echo data >"$T/ws/readable"

# Things outside the app's domain: TCP listeners, an abstract unix socket, two sleepers.
python3 - "$T/helpers" <<'EOF' &
import os, socket, sys, time
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    socks.append(s)
free = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free.append(s.getsockname()[1])
    s.close()
a = socket.socket(socket.AF_UNIX)
name = "berth-agent-init-%d" % os.getpid()
a.bind("\0" + name)
a.listen(8)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d %d %d %s\n" % (socks[0].getsockname()[1], socks[1].getsockname()[1],
                                  free[0], free[1], name))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
EOF
helpers+=($!)
sleeper() { python3 -c 'import os, sys, time; os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1])); time.sleep(600)' "$1" & helpers+=($!); }
sleeper "$OTHER_UID"
other_pid=${helpers[-1]}
sleeper "$APP_UID"
same_uid_pid=${helpers[-1]}
for ((i = 0; i < 100; i++)); do [ -f "$T/helpers" ] && break; sleep 0.1; done
read -r port_open port_closed port_bind port_unbound abstract <"$T/helpers"

# policy NAME JSON-FIELDS: write $T/NAME.json for app "aitest": a schema 2 policy with
# every key, the fields given replacing the defaults (reads confined to the runtime
# baseline and $T, as the compiler would for an app whose files live there).
policy() {
	python3 - "$T" "$T/$1.json" "{$2}" <<'PY'
import json, sys
t, path, fields = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
doc = {"schema": 2, "appName": "aitest", "declaredCapabilities": [],
       "writePaths": ["/dev/null"], "readPaths": ["/usr", "/bin", "/sbin", "/lib", "/etc",
       "/proc", "/dev", t], "networkPorts": [], "bindPorts": [], "meshPeers": [],
       "networkUnrestricted": False, "cgroupLimits": {}}
doc.update(fields)
with open(path, "w") as f:
    json.dump(doc, f, sort_keys=True, separators=(",", ":"))
PY
}
# run NAME BINARY POLICY [VAR=VALUE...] -- PROBE-ARGS...: agent-init with a clean
# environment (enforcement required, app uid set, unless overridden), the probe as the app.
run() {
	local name=$1 bin=$2 pol=$3
	local envs=()
	shift 3
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	rc=0
	env -i PATH=/usr/bin:/bin BERTH_CAPABILITY_POLICY="$pol" BERTH_REQUIRE_ENFORCEMENT=1 \
		BERTH_APP_UID=$APP_UID BERTH_APP_GID=$APP_UID BERTH_APP_SUPPLEMENTARY_GIDS=9999,0,x \
		BERTH_BOOT_ID=boot-e2e "${envs[@]}" "$bin" "$T/bin/probe" "$@" \
		>"$T/$name.out" 2>"$T/$name.err" 3</dev/null || rc=$?
	out=$T/$name.out
	err=$T/$name.err
}
# says WHAT LINE: the probe printed exactly LINE.
says() {
	if grep -qxF -- "$2" "$out"; then ok "$1"; else not_ok "$1 (wanted: $2)"; diag <"$out"; diag <"$err"; fi
}
# says_not WHAT LINE: the probe answered, but not LINE.
says_not() {
	local op=${2%%: *}
	if grep -q -- "^$op: " "$out" && ! grep -qxF -- "$2" "$out"; then ok "$1"; else not_ok "$1 (not wanted: $2)"; diag <"$out"; diag <"$err"; fi
}
# answered WHAT OP...: the probe printed a line for every OP (it ran them all).
answered() {
	local what=$1 op missing=
	shift
	for op in "$@"; do grep -q -- "^$op: " "$out" || missing+=" $op"; done
	if [ -z "$missing" ]; then ok "$what"; else not_ok "$what (no answer for:$missing)"; diag <"$out"; diag <"$err"; fi
}
# logs WHAT TEXT: agent-init's stderr holds TEXT.
logs() {
	if grep -qF -- "$2" "$err"; then ok "$1"; else not_ok "$1 (wanted: $2)"; diag <"$err"; fi
}
exits() {
	if [ "$rc" = "$1" ]; then ok "$2 (exit $1)"; else not_ok "$2 (exit $rc, wanted $1)"; diag <"$err"; fi
}
# audit PYTHON-ASSERTIONS: the JSON lines of stderr as `ev` (event name -> object), `lines`.
audit() {
	local what=$1
	shift
	if python3 - "$err" "$@" >"$T/audit.log" 2>&1 <<'EOF'; then ok "$what"; else not_ok "$what"; diag <"$T/audit.log"; diag <"$err"; fi
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ev = {l["event"]: l for l in lines}
for l in lines:
    assert l["source"] == "agent-init", l
    assert isinstance(l["timestamp"], int), l
    assert list(l)[:2] == ["source", "event"], l
for a in sys.argv[2:]:
    assert eval(a, {"ev": ev, "lines": lines}), a
EOF
}

# --- writes, identity, capabilities, seccomp: no network declared -------------------------
policy writes '"writePaths":["/dev/null","'"$T"'/ws","'"$T"'/made/deep"]'
run writes "$ai" "$T/writes.json" -- \
	write="$T/ws/f" write="$T/ws/../outside/f" write="$T/outside/f" write="$T/ws/link/g" \
	symlink="$T/outside:$T/ws/mylink" write="$T/ws/mylink/h" truncate="$T/outside/file" \
	truncate="$T/ws/f" mkdir="$T/ws/sub" mkdir="$T/outside/sub" unlink="$T/outside/file" \
	rename="$T/ws/f:$T/outside/moved" write="$T/made/deep/x" write=/dev/null \
	ids status fds setuid0 udp udp6 raw packet tcp-socket unix-socket sctp \
	unshare-user unshare-net unshare-mount clone-newuser setns clone3 fork \
	io-uring vsock mount="$T/ws" bpf keyctl perf \
	ptrace="$other_pid" kill="$other_pid" kill="$same_uid_pid" abstract="$abstract" \
	connect="$port_open" bind="$port_bind" \
	userfaultfd alg key bluetooth vsock-high udp-high netlink-route netlink-audit netlink-uevent \
	personality personality-query unlisted newer thread spawn=/bin/true sleep
exits 0 "the confined app ran"
says "write inside a declared write path" "write=$T/ws/f: ok"
says "write through .. out of scope is refused by Landlock" "write=$T/ws/../outside/f: EACCES"
says "write outside every write path is refused (DAC would allow it)" "write=$T/outside/f: EACCES"
says "write through a symlink planted inside the scope is refused" "write=$T/ws/link/g: EACCES"
says "the app may make a symlink inside its scope" "symlink=$T/outside:$T/ws/mylink: ok"
says "but writing through it is refused" "write=$T/ws/mylink/h: EACCES"
says "truncate outside the scope is refused" "truncate=$T/outside/file: EACCES"
says "truncate inside the scope works" "truncate=$T/ws/f: ok"
says "mkdir inside the scope works" "mkdir=$T/ws/sub: ok"
says "mkdir outside is refused" "mkdir=$T/outside/sub: EACCES"
says "unlink outside is refused" "unlink=$T/outside/file: EACCES"
says "moving a file out of the scope is refused" "rename=$T/ws/f:$T/outside/moved: EACCES"
says "a missing write path is created and writable" "write=$T/made/deep/x: ok"
check "directories agent-init created belong to the app" \
	test "$(stat -c %u:%g "$T/made" "$T/made/deep" | sort -u)" = "$APP_UID:$APP_UID"
check "an existing write path keeps its owner" test "$(stat -c %u "$T/ws")" = "$APP_UID"
says "/dev/null stays writable" "write=/dev/null: ok"
says "the app runs as its uid, gid and supplementary groups (0 and junk dropped)" \
	"ids: uid=$APP_UID euid=$APP_UID gid=$APP_UID egid=$APP_UID groups=9999,$APP_UID"
says "no effective capability" "status: CapEff:	0000000000000000"
says "no permitted capability" "status: CapPrm:	0000000000000000"
says "the bounding set is empty" "status: CapBnd:	0000000000000000"
says "no inheritable capability" "status: CapInh:	0000000000000000"
says "no ambient capability" "status: CapAmb:	0000000000000000"
says "no_new_privs is set" "status: NoNewPrivs:	1"
says "a seccomp filter is on" "status: Seccomp:	2"
says "only stdin, stdout and stderr reach the app" "fds: 0"

# --- socket activation: the one descriptor let through, and only when it is what it says.
# with_fd3 KIND NAME: run the probe's fds op under agent-init with fd 3 a listening unix
# socket (KIND listening), a connected one (KIND connected) or /dev/null (KIND null), and
# BERTH_LISTEN_FD=3.
with_fd3() {
	rc=0
	python3 - "$1" "$T/listen-$2.sock" "$ai" "$T/writes.json" "$T/bin/probe" "$APP_UID" \
		>"$T/$2.out" 2>"$T/$2.err" <<'EOF' || rc=$?
import os, socket, sys
kind, path, ai, pol, probe, uid = sys.argv[1:]
if kind == "null":
    fd = os.open("/dev/null", os.O_RDONLY)
else:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    s = listener
    if kind == "connected":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
    fd = s.fileno()
os.dup2(fd, 3)
os.set_inheritable(3, True)
env = {"PATH": "/usr/bin:/bin", "BERTH_CAPABILITY_POLICY": pol, "BERTH_REQUIRE_ENFORCEMENT": "1",
       "BERTH_APP_UID": uid, "BERTH_APP_GID": uid, "BERTH_BOOT_ID": "boot-e2e",
       "BERTH_LISTEN_FD": "3"}
os.execve(ai, [ai, probe, "fds", "env=BERTH_LISTEN_FD"], env)
EOF
	out=$T/$2.out
	err=$T/$2.err
}
with_fd3 listening activated
says "a listening unix socket named by BERTH_LISTEN_FD=3 reaches the daemon as fd 3" "fds: 1"
says "and so does the variable that names it" "env=BERTH_LISTEN_FD: 3"
with_fd3 connected not-listening
says "a connected socket on fd 3 is closed at the exec, named or not" "fds: 0"
says "and the variable is dropped" "env=BERTH_LISTEN_FD: unset"
with_fd3 null not-a-socket
says "so is a file on fd 3" "fds: 0"
out=$T/writes.out
err=$T/writes.err
says "setuid(0) fails after the switch" "setuid0: EPERM"
says "no UDP socket without a network capability" "udp: EPERM"
says "no UDP over IPv6 either" "udp6: EPERM"
says "no raw socket" "raw: EPERM"
says "no packet socket" "packet: EPERM"
says "TCP sockets can still be made (Landlock decides ports)" "tcp-socket: ok"
says "unix sockets are untouched" "unix-socket: ok"
says "no SCTP, which Landlock's port rules do not see" "sctp: EPERM"
says "unshare(CLONE_NEWUSER) is refused" "unshare-user: EPERM"
says "unshare(CLONE_NEWNET) is refused" "unshare-net: EPERM"
says "unshare(CLONE_NEWNS) is refused" "unshare-mount: EPERM"
says "clone(CLONE_NEWUSER) is refused" "clone-newuser: EPERM"
says "setns is refused" "setns: EPERM"
says "clone3 reports ENOSYS so libc falls back to clone" "clone3: ENOSYS"
says "plain fork still works" "fork: ok"
says "io_uring_setup reports ENOSYS" "io-uring: ENOSYS"
says "socket(AF_VSOCK) is refused" "vsock: EPERM"
says "mount is refused" "mount=$T/ws: EPERM"
says "bpf is refused" "bpf: EPERM"
says "keyctl is refused" "keyctl: EPERM"
says "perf_event_open is refused" "perf: EPERM"
says "ptrace of another uid's process is refused" "ptrace=$other_pid: EPERM"
says "signalling another uid's process is refused" "kill=$other_pid: EPERM"
says "signalling a same-uid process outside the domain is refused (Landlock scope)" "kill=$same_uid_pid: EPERM"
says "an abstract unix socket outside the domain is out of reach (Landlock scope)" "abstract=$abstract: EPERM"
says "TCP connect to an undeclared port is refused" "connect=$port_open: EACCES"
says "TCP bind to an undeclared port is refused" "bind=$port_bind: EACCES"
# What the deny list let through, and the allow list does not.
says "userfaultfd is refused" "userfaultfd: EPERM"
says "socket(AF_ALG) is refused" "alg: EPERM"
says "socket(AF_KEY) is refused" "key: EPERM"
says "socket(AF_BLUETOOTH) is refused" "bluetooth: EPERM"
says "AF_VSOCK with bits above the int the kernel reads is still AF_VSOCK, and refused" "vsock-high: EPERM"
says "so is UDP without a network capability" "udp-high: EPERM"
says "netlink: NETLINK_ROUTE stays (getaddrinfo, getifaddrs)" "netlink-route: ok"
says "other netlink protocols are refused (audit)" "netlink-audit: EPERM"
says "other netlink protocols are refused (uevents)" "netlink-uevent: EPERM"
says "personality(ADDR_NO_RANDOMIZE) is refused" "personality: EPERM"
says "the personality query still answers" "personality-query: ok"
says "a system call not on the allow list reports ENOSYS" "unlisted: ENOSYS"
says "so does one newer than the list" "newer: ENOSYS"
# The probe is static glibc: its own start-up and what its checks use must be on the list.
says "a thread starts (glibc falls back from clone3 to clone)" "thread: ok"
says "posix_spawn of a dynamic program works, the child's start-up included" "spawn=/bin/true: ok"
says "a sleep works" "sleep: ok"
answered "the static probe answered every operation under the allow list" \
	write="$T/ws/f" ids status fds setuid0 udp tcp-socket unix-socket fork io-uring vsock \
	userfaultfd alg netlink-route personality unlisted thread spawn=/bin/true sleep
logs "the seccomp line says the allow list is on" "[agent-init] seccomp: system call allow list on for \"aitest\""
logs "restrict_self status line" "[agent-init] landlock restrict_self() status: ruleset=FullyEnforced no_new_privs=true"
logs "human restricted line" "[agent-init] restricted \"aitest\" (FullyEnforced) — write access allowed only under: /dev/null, $T/ws, $T/made/deep"
audit "the audit lines are JSON objects in sequence order" \
	'[l["event"] for l in lines] == ["capabilities_dropped", "app_uid_applied", "capability_policy_applied", "namespace_seccomp_filter", "network_seccomp_filter"]'
audit "capability_policy_applied has the SPEC fields" \
	'list(ev["capability_policy_applied"]) == ["source","event","bootId","app","writePaths","readPaths","networkPorts","networkUnrestricted","bindPorts","meshPeers","ruleset","timestamp"]' \
	'ev["capability_policy_applied"]["ruleset"] == "FullyEnforced"' \
	'ev["capability_policy_applied"]["bootId"] == "boot-e2e" and ev["capability_policy_applied"]["app"] == "aitest"' \
	'ev["capability_policy_applied"]["networkPorts"] == [] and ev["capability_policy_applied"]["networkUnrestricted"] is False' \
	"ev['capability_policy_applied']['writePaths'] == ['/dev/null', '$T/ws', '$T/made/deep']"
audit "capabilities_dropped, app_uid_applied and the seccomp lines say what happened" \
	'ev["capabilities_dropped"]["dropped"] is True' \
	"ev['app_uid_applied']['uid'] == $APP_UID and ev['app_uid_applied']['gid'] == $APP_UID" \
	'ev["app_uid_applied"]["dropped"] is True and ev["app_uid_applied"]["detail"] == "irreversible"' \
	'ev["namespace_seccomp_filter"]["applied"] is True and ev["namespace_seccomp_filter"]["detail"] == "syscall_allow_list,new_namespaces_denied"' \
	'ev["network_seccomp_filter"]["applied"] is True and ev["network_seccomp_filter"]["detail"] == "udp_and_raw_sockets_denied"'

run x32 "$ai" "$T/writes.json" -- x32
exits 159 "a system call through another ABI's table (x32) kills the app with SIGSYS"
# i386's int 0x80 works on this kernel only with IA32 emulation: ask the probe unconfined.
if [ "$("$T/bin/probe" i386 2>/dev/null)" = "i386: ok" ]; then
	run i386 "$ai" "$T/writes.json" -- i386
	exits 159 "a system call through i386's table (int 0x80) kills the app with SIGSYS"
else
	ok "i386 table # SKIP this kernel has no IA32 emulation"
fi

# --- read scoping and TCP ports --------------------------------------------------------------
policy net '"writePaths":["/dev/null","'"$T"'/ws"],"readPaths":["/usr","/lib","/etc","/proc","/dev","'"$T"'/bin","'"$T"'/ws","'"$T"'/missing"],"networkPorts":['"$port_open"'],"bindPorts":['"$port_bind"']'
run net "$ai" "$T/net.json" -- \
	read="$T/ws/readable" read="$T/outside/file" readdir="$T/outside" readdir="$T/ws" \
	read=/etc/hostname connect="$port_open" connect="$port_closed" bind="$port_bind" \
	bind="$port_unbound" udp raw udp-high sctp packet netlink-audit
exits 0 "the app with read scoping and a port ran"
says "read inside a read path" "read=$T/ws/readable: ok"
says "read outside every read path is refused" "read=$T/outside/file: EACCES"
says "listing outside every read path is refused" "readdir=$T/outside: EACCES"
says "listing a read path works" "readdir=$T/ws: ok"
says "the read baseline stays readable" "read=/etc/hostname: ok"
says "TCP connect to the declared port works" "connect=$port_open: ok"
says "TCP connect to another port is refused" "connect=$port_closed: EACCES"
says "bind to a bindPorts port works" "bind=$port_bind: ok"
says "bind to any other port is refused" "bind=$port_unbound: EACCES"
says "a declared port keeps UDP (DNS)" "udp: ok"
says "raw sockets need a capability the app no longer has" "raw: EPERM"
says "a declared port keeps UDP whatever the bits above the int" "udp-high: ok"
says "SCTP stays refused with a declared port" "sctp: EPERM"
says "packet sockets are refused by the allow list too" "packet: EPERM"
says "netlink audit is refused with a declared port" "netlink-audit: EPERM"
logs "a missing read path is reported" "[agent-init] WARNING: couldn't open \"$T/missing\" to grant read access (No such file or directory) — reads there will be DENIED for the whole life of this process, since the ruleset is about to be sealed. Create the path before boot if the app needs it."
check "read paths are never created" test ! -e "$T/missing"
audit "the network filter line says datagrams stay open" \
	'ev["network_seccomp_filter"]["applied"] is False' \
	'ev["network_seccomp_filter"]["detail"] == "network capability declared — datagram sockets left open for DNS"' \
	"ev['capability_policy_applied']['networkPorts'] == [$port_open] and ev['capability_policy_applied']['bindPorts'] == [$port_bind]" \
	'ev["capability_policy_applied"]["ruleset"] == "FullyEnforced"'

# network:connect:* keeps every IP protocol (the kernel decides), and nothing else.
policy open '"networkUnrestricted":true'
run open "$ai" "$T/open.json" -- tcp-socket udp sctp netlink-route netlink-audit vsock alg unlisted
exits 0 "the app with an unrestricted network ran"
says "TCP" "tcp-socket: ok"
says "UDP" "udp: ok"
says_not "SCTP is the kernel's to answer" "sctp: EPERM"
says "netlink route" "netlink-route: ok"
says "netlink audit is still refused" "netlink-audit: EPERM"
says "AF_VSOCK is still refused" "vsock: EPERM"
says "AF_ALG is still refused" "alg: EPERM"
says "the allow list still applies" "unlisted: ENOSYS"

# --- write paths outside the allowed set -------------------------------------------------------
policy refused '"writePaths":["/etc/berth-agent-init-test","/run/berth/other","/run/berth/aitest/../x","/dev"]'
# The compiler never writes such a policy: one that holds them was made by someone else,
# and the one policy reader refuses it whole (fail closed), before anything is created.
run refused "$ai" "$T/refused.json" -- write=/dev/null
exits 1 "a policy granting a write path outside the allowed set is refused"
logs "the refusal names the entry" "writePaths[0] is not a path the policy may grant writes to"
check "nothing was created for refused paths" test ! -e /etc/berth-agent-init-test -a ! -e /run/berth/other
for bad in '"/run/berth/other"' '"/run/berth/aitest/../x"' '"/dev"'; do
	policy refused1 '"writePaths":["/dev/null",'"$bad"']'
	run refused1 "$ai" "$T/refused1.json" -- write=/dev/null
	exits 1 "write path $bad is refused"
done

# --- fail closed --------------------------------------------------------------------------------
marker=$T/ws/app-ran
run abi3 "$ai_test" "$T/net.json" BERTH_TEST_LANDLOCK_ABI=3 -- write="$marker"
exits 1 "enforcement required and a port the kernel cannot rule: refused"
check "the app never ran" test ! -e "$marker" -a ! -s "$out"
logs "FATAL line" "[agent-init] FATAL: BERTH_REQUIRE_ENFORCEMENT is set but landlock ruleset status was PartiallyEnforced, not FullyEnforced (this kernel cannot handle BindTcp, ConnectTcp) for \"aitest\" — refusing to exec unrestricted."
audit "capability_enforcement_refused is the one audit line" \
	'[l["event"] for l in lines] == ["capability_enforcement_refused"]' \
	'list(lines[0]) == ["source","event","app","reason","timestamp"]' \
	'lines[0]["app"] == "aitest" and "PartiallyEnforced" in lines[0]["reason"]'

run abi2 "$ai_test" "$T/writes.json" BERTH_TEST_LANDLOCK_ABI=2 -- write="$marker"
exits 1 "an ABI without Truncate cannot enforce the write set: refused"
logs "it names the missing right" "(this kernel cannot handle Truncate, BindTcp, ConnectTcp)"

run abi0 "$ai_test" "$T/writes.json" BERTH_TEST_LANDLOCK_ABI=0 -- write="$marker"
exits 1 "no Landlock at all: refused"
logs "NotEnforced is named" "landlock ruleset status was NotEnforced, not FullyEnforced"
check "the app never ran (ABI 2, ABI 0)" test ! -e "$marker"

run abi3-optional "$ai_test" "$T/net.json" BERTH_TEST_LANDLOCK_ABI=3 BERTH_REQUIRE_ENFORCEMENT= -- connect="$port_closed"
exits 0 "without BERTH_REQUIRE_ENFORCEMENT a partial ruleset runs"
logs "and says so" "ruleset=PartiallyEnforced"
logs "human line carries the status" "[agent-init] restricted \"aitest\" (PartiallyEnforced)"

run abi-ignored "$ai" "$T/net.json" BERTH_TEST_LANDLOCK_ABI=0 -- write="$T/ws/prod"
exits 0 "the production binary ignores BERTH_TEST_LANDLOCK_ABI"
logs "and enforces fully" "ruleset=FullyEnforced"

run nopolicy "$ai" "$T/does-not-exist.json" -- write="$marker"
exits 1 "an unreadable policy with enforcement required: refused"
audit "refused as app unknown" 'lines[0]["event"] == "capability_enforcement_refused" and lines[0]["app"] == "unknown"' \
	'"could not apply capability policy from" in lines[0]["reason"]'
check "the app never ran (no policy)" test ! -e "$marker"

printf '{"schema":2,"appName":"aitest","writePaths":[],"writePaths":["/tmp"]}' >"$T/dup.json"
run dup "$ai" "$T/dup.json" -- write="$marker"
exits 1 "a policy with a duplicate key is refused"
logs "the parse error is named" "duplicate object key"

run nopolicy-optional "$ai" "$T/does-not-exist.json" BERTH_REQUIRE_ENFORCEMENT=0 -- ids status unshare-user
exits 0 "without enforcement required a missing policy runs unrestricted"
logs "with a warning" "— continuing unrestricted."
logs "and the NOT RESTRICTED line" "[agent-init] NOT RESTRICTED \"unknown\""
says "still not root" "ids: uid=$APP_UID euid=$APP_UID gid=$APP_UID egid=$APP_UID groups=9999,$APP_UID"
says "still no new namespaces" "unshare-user: EPERM"

run noid "$ai" "$T/writes.json" BERTH_APP_UID= -- write="$marker"
exits 1 "no BERTH_APP_UID with enforcement required: refused, never run as root"
logs "the refusal says why" "BERTH_APP_UID or BERTH_APP_GID is missing or not a valid id (not 0), so the app would run as root"
check "the app never ran (no identity)" test ! -e "$marker"
run badid "$ai" "$T/writes.json" BERTH_APP_UID=junk -- write="$marker"
exits 1 "a BERTH_APP_UID that does not parse: refused"

run root "$ai" "$T/writes.json" BERTH_APP_UID= BERTH_REQUIRE_ENFORCEMENT= -- ids status mount="$T/ws"
exits 0 "no BERTH_APP_UID without enforcement required: the app stays root"
says "root keeps no capability" "status: CapEff:	0000000000000000"
says "root's bounding set is empty too" "status: CapBnd:	0000000000000000"
says "root cannot mount" "mount=$T/ws: EPERM"
audit "app_uid_applied says so" 'ev["app_uid_applied"]["dropped"] is False' \
	'ev["app_uid_applied"]["detail"] == "no BERTH_APP_UID — running as root"' \
	'ev["app_uid_applied"]["uid"] == 0'

# --- in place: the same confinement for a runtime that is already running ------------------
# libberth-confine.so, as the warm Python runtime calls it (src/berth-init/python-zygote.py):
# a Python confines itself, checks what an exec would have done, then execs the probe,
# which inherits the restrictions and reports them. Not in a sanitized build (no library).
lib=$bld/src/agent-init/libberth-confine.so
if [ -f "$lib" ]; then
	cat >"$T/bin/in-place" <<EOF
#!/usr/bin/python3
import ctypes, errno, os, select, signal, sys, threading
# INPLACE_THREADS: two more threads, one blocking every signal it can (as Node's inspector
# watchdog does), each trying a write inside and outside the policy once confined.
go, seen = threading.Event(), {}
def thread(name, block):
    if block:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    go.wait()
    got = []
    for d in ("ws", "outside"):
        try:
            open("$T/%s/thread-%s" % (d, name), "w").close()
            got.append("%s=ok" % d)
        except OSError as e:
            got.append("%s=%s" % (d, errno.errorcode[e.errno]))
    st = dict(l.split(":\t", 1) for l in open("/proc/thread-self/status").read().splitlines() if ":\t" in l)
    seen[name] = "%s uid=%s capbnd=%s nnp=%s seccomp=%s" % (" ".join(got), st["Uid"].split()[0], st["CapBnd"], st["NoNewPrivs"], st["Seccomp"])
threads = [threading.Thread(target=thread, args=a) for a in (("plain", False), ("blocking", True))] if os.environ.get("INPLACE_THREADS") else []
for t in threads:
    t.start()
extra = os.open("/dev/null", os.O_RDONLY)
os.set_inheritable(extra, True)
# INPLACE_LOOP: an event loop's kind of descriptors, which stay; INPLACE_SOCKET: one that may not.
if os.environ.get("INPLACE_LOOP"):
    ep = select.epoll()
    loop = [ep.fileno(), os.eventfd(0), *os.pipe()]
if os.environ.get("INPLACE_SOCKET"):
    import socket
    sock = socket.socket(socket.AF_UNIX)
lib = ctypes.CDLL("$lib")
(lib.berth_confine_in_place_event_loop if os.environ.get("INPLACE_LOOP") else lib.berth_confine_in_place)()
go.set()
for t in threads:
    t.join()
for name in sorted(seen):
    print("inplace-thread-%s: %s" % (name, seen[name]), flush=True)
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
print("inplace-fds: %s" % ("open" if is_open(extra) else "closed"), flush=True)
if os.environ.get("INPLACE_LOOP"):
    print("inplace-loop-fds: %s" % ("open" if all(map(is_open, loop)) else "closed"), flush=True)
libc = ctypes.CDLL(None)
print("inplace-dumpable: %d" % libc.prctl(3, 0, 0, 0, 0), flush=True)  # PR_GET_DUMPABLE
print("inplace-uid: %d" % os.getuid(), flush=True)
os.execv(sys.argv[1], sys.argv[1:])
EOF
	chmod 0755 "$T/bin/in-place"
	run inplace "$T/bin/in-place" "$T/writes.json" -- \
		write="$T/ws/f2" write="$T/outside/f2" ids status fds setuid0 udp unshare-user mount="$T/ws"
	exits 0 "in place: the confined runtime ran on"
	says "in place: an inherited descriptor is closed, as an exec would" "inplace-fds: closed"
	says "in place: the process is dumpable again, as after an exec" "inplace-dumpable: 1"
	says "in place: the runtime itself runs as the app uid" "inplace-uid: $APP_UID"
	says "in place: write inside a declared write path" "write=$T/ws/f2: ok"
	says "in place: write outside is refused by Landlock" "write=$T/outside/f2: EACCES"
	says "in place: the app uid, gid and groups" \
		"ids: uid=$APP_UID euid=$APP_UID gid=$APP_UID egid=$APP_UID groups=9999,$APP_UID"
	says "in place: the bounding set is empty" "status: CapBnd:	0000000000000000"
	says "in place: no effective capability" "status: CapEff:	0000000000000000"
	says "in place: no_new_privs is set" "status: NoNewPrivs:	1"
	says "in place: a seccomp filter is on" "status: Seccomp:	2"
	says "in place: setuid(0) fails" "setuid0: EPERM"
	says "in place: no UDP socket without a network capability" "udp: EPERM"
	says "in place: unshare(CLONE_NEWUSER) is refused" "unshare-user: EPERM"
	says "in place: mount is refused" "mount=$T/ws: EPERM"
	audit "in place: the audit records of an exec'd app, in their order" \
		'[l["event"] for l in lines] == ["capabilities_dropped", "app_uid_applied", "capability_policy_applied", "namespace_seccomp_filter", "network_seccomp_filter"]' \
		'ev["capabilities_dropped"]["dropped"] is True' 'ev["app_uid_applied"]["dropped"] is True' \
		'ev["capability_policy_applied"]["ruleset"] == "FullyEnforced"'
	run inplace-threads "$T/bin/in-place" "$T/writes.json" INPLACE_THREADS=1 -- status
	exits 0 "in place: a runtime with more threads is confined, every thread of it"
	says "in place: a second thread is confined like the first" \
		"inplace-thread-plain: ws=ok outside=EACCES uid=$APP_UID capbnd=0000000000000000 nnp=1 seccomp=2"
	says "in place: so is a thread that blocks every signal it can" \
		"inplace-thread-blocking: ws=ok outside=EACCES uid=$APP_UID capbnd=0000000000000000 nnp=1 seccomp=2"
	says "in place: and the main thread as before" "status: CapBnd:	0000000000000000"
	audit "in place: with threads, the audit records of an exec'd app" \
		'[l["event"] for l in lines] == ["capabilities_dropped", "app_uid_applied", "capability_policy_applied", "namespace_seccomp_filter", "network_seccomp_filter"]'

	run inplace-loop "$T/bin/in-place" "$T/writes.json" INPLACE_LOOP=1 -- write="$T/outside/f3" status
	exits 0 "in place with an event loop: confined"
	says "in place with an event loop: its epoll, eventfd and pipe stay open" "inplace-loop-fds: open"
	says "in place with an event loop: /dev/null stays too" "inplace-fds: open"
	says "in place with an event loop: Landlock as before" "write=$T/outside/f3: EACCES"
	says "in place with an event loop: seccomp as before" "status: Seccomp:	2"
	run inplace-socket "$T/bin/in-place" "$T/writes.json" INPLACE_LOOP=1 INPLACE_SOCKET=1 -- write="$marker"
	exits 1 "in place with an event loop: a socket left open is refused"
	logs "in place with an event loop: the refusal names it" "is open in the runtime"
	check "in place with an event loop: nothing ran after the refusal" test ! -e "$marker"
	check "in place with an event loop: the refused runtime printed nothing of its own" test ! -s "$T/inplace-socket.out"
	run inplace-root "$T/bin/in-place" "$T/writes.json" BERTH_APP_UID= BERTH_REQUIRE_ENFORCEMENT= -- write="$marker"
	exits 1 "in place: no app uid is refused even without enforcement required (root's capabilities would stay)"
	logs "in place: and says why" "would keep root's capabilities"
fi

rc=0
"$ai" >"$T/usage.out" 2>"$T/usage.err" || rc=$?
err=$T/usage.err
exits 1 "no command"
logs "usage line" "[agent-init] usage: agent-init <command> [args...]"

rc=0
env -i BERTH_CAPABILITY_POLICY="$T/writes.json" "$ai" no-such-command-here >"$T/noexec.out" 2>"$T/noexec.err" || rc=$?
err=$T/noexec.err
exits 1 "a command that does not exist"
logs "exec failure line" "[agent-init] failed to exec \"no-such-command-here\""

plan "$tap_n"
finish
