#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Warm start end to end (docs/warm-start.md): `berth vm install` makes the snapshot; two
# VMs restored from it run side by side, each with its own boot ids, random stream and
# clock, its own secret and its own state; the snapshot holds neither the secret nor the
# app's files; vm.json, `berth vm status` and the attestation record say which snapshot a
# VM came from; a tampered snapshot and one made for another berth-vmm are refused and
# removed, the VM boots cold and works, and `berth dev --cold` boots cold on purpose. Node
# apps of two restored VMs each take their VM's warm Node: every thread confined, and
# their own Math.random() and OpenSSL streams from their first line.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 95
pids=()
trap 'kill -INT "${pids[@]}" 2>/dev/null; sleep 1; kill_home_vms; rm -rf "$BERTH_HOME"' EXIT

# The chunked digest of a snapshot's memory (sha256_chunked_fd_hex(), 64 KiB chunks).
ram_digest() { python3 -c 'import hashlib,sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for c in iter(lambda: f.read(65536), b""):
        h.update(hashlib.sha256(c).digest())
print(h.hexdigest())' "$1"; }
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[k] for k in sys.argv[2:]]; print(v)' "$@"; }
rand() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# dev NAME [ARGS...]: `berth dev` of a copy of the identity fixture named NAME, in the
# background, until "VM ready" (its log is $BERTH_HOME/NAME.log).
dev() {
	local name=$1
	shift
	mkdir -p "$BERTH_HOME/apps"
	rm -rf "${BERTH_HOME:?}/apps/$name"
	cp -r "$src/test/e2e/fixtures/identity" "$BERTH_HOME/apps/$name"
	sed -i "s/^name: identity/name: $name/" "$BERTH_HOME/apps/$name/berth.yml"
	# The app's own files carry a marker the snapshot must never hold.
	echo "# share marker: $marker" >>"$BERTH_HOME/apps/$name/src/app.py"
	launch "$name" "$@"
}
# launch NAME [ARGS...]: `berth dev` of $BERTH_HOME/apps/NAME until "VM ready" (lib.sh's
# start_dev), its pid as pid_NAME, its log $BERTH_HOME/NAME.log.
launch() {
	local name=$1 r=0
	shift
	start_dev "$BERTH_HOME/apps/$name" "$BERTH_HOME/$name.log" "$@" || r=1
	pids+=("$dev_pid")
	eval "pid_$name=$dev_pid"
	[ "$r" = 0 ] || diag <"$BERTH_HOME/$name.log"
	return "$r"
}
undev() {
	local p
	p=$(eval echo "\${pid_$1:-}")
	[ -n "$p" ] || return 0
	kill -INT "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	eval "pid_$1="
}
vmj() { echo "$BERTH_HOME/run/vm/berth-dev-$1/vm.json"; }
rpc() { "$berth" rpc "$1" --export "$2" ${3:+--input "$3"} 2>"$BERTH_HOME/rpc.err"; }
# field APP EXPORT INPUT KEY: one key of the export's result (None when null).
# A failed call says why on standard error (the test log), with the end of the app's log.
field() {
	local out
	if ! out=$(rpc "$1" "$2" "$3") || [ -z "$out" ]; then
		{ echo "berth rpc $1 --export $2 failed:"; cat "$BERTH_HOME/rpc.err"; tail -n 40 "$BERTH_HOME/$1.log"; } | diag >&2
		return 1
	fi
	python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$4" <<<"$out"
}
boot_mode() { json_get "$(vmj "$1")" boot mode 2>/dev/null; }
# flip FILE OFFSET: invert the byte at OFFSET (data+N: N bytes past the file's first data,
# for a sparse file). Flipped, not overwritten: a byte that already had the new value would
# change nothing.
flip() {
	python3 - "$1" "$2" <<'EOF'
import os, sys
with open(sys.argv[1], "r+b") as f:
    where = sys.argv[2]
    at = os.lseek(f.fileno(), 0, os.SEEK_DATA) + int(where[5:]) if where.startswith("data+") else int(where)
    f.seek(at)
    b = f.read(1)[0]
    f.seek(at)
    f.write(bytes([b ^ 0xFF]))
EOF
}

# kernel_text NAME OUT: the kernel's text in the memory of NAME's VM (its QEMU's memfd),
# written to OUT.
kernel_text() {
	python3 - "$(qemu_pid "berth-dev-$1")" "$2" <<'PY'
import os, sys
pid, out = sys.argv[1:]
memfd = next(os.path.join(f"/proc/{pid}/fd", fd) for fd in os.listdir(f"/proc/{pid}/fd")
             if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:berth-vm-ram"))
with open(memfd, "rb") as f, open(out, "wb") as o:
    o.write(f.read(256 << 20))
PY
}
# text_changes BEFORE AFTER [none]: how the kernel's text (vmlinux's first executable
# segment) in the memory image AFTER differs from that in BEFORE. Fails unless every change
# is a jump label's jump turned into a nop: a static key switched off, as the kernel does
# once it has drawn a secret it draws once; a nop turned into a jump is a key switched on.
# (A key switched on that is only ever tested as likely also turns jumps into nops: the
# check from the ready line on, with "none", which fails on any change, covers those.)
text_changes() {
	python3 - "$1" "$2" "$(ls "$BERTH_HOME"/vm/kernel/sha256/*/vmlinux)" "${3:-}" <<'PY'
import struct, sys
before, after, vmlinux, none = sys.argv[1:]
with open(vmlinux, "rb") as f:
    elf = f.read(4096)
phoff, = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
for i in range(phnum):
    p_type, p_flags, _, _, paddr, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
    if p_type == 1 and p_flags & 1:  # the first executable PT_LOAD: .text
        break
else:
    sys.exit("no executable segment in " + vmlinux)
def text(path):
    with open(path, "rb") as f:
        f.seek(paddr)
        return f.read(filesz)
a, b = text(before), text(after)
if not len(a) == len(b) == filesz:
    sys.exit("short memory image")
NOPS = {0xE9: bytes.fromhex("0f1f440000"), 0xEB: bytes.fromhex("6690")}
covered, off, bad = -1, 0, []
for i in (i for i in range(filesz) if a[i] != b[i]):
    if i <= covered:
        continue
    for p in range(i, max(i - 5, -1), -1):
        nop = NOPS.get(a[p])
        if nop and b[p:p + len(nop)] == nop and p + len(nop) > i:
            covered, off = p + len(nop) - 1, off + 1
            break
    else:
        bad.append(f"{0xffffffff81000000 + i:#x}: {a[i:i + 5].hex()} -> {b[i:i + 5].hex()}")
print(f"# kernel text, {filesz} bytes at {paddr:#x}: {off} jumps turned off, {len(bad)} other changes {bad[:8]}")
sys.exit(bool(bad) or (none == "none" and off > 0))
PY
}

token=warm-$(rand)
marker=marker-$(rand)

# --- The snapshot: made at install, private, refused by no one yet.
"$berth" vm install --from "$artifacts" --no-download --vmm "$vmm" >"$BERTH_HOME/install.log" 2>&1
check "berth vm install makes a warm-start snapshot for each VM size (512, 768, 1024 MiB)" \
	test "$(grep -c "^snapshot [0-9a-f]* made in" "$BERTH_HOME/install.log")" = 3
# The one of a one-app VM's size, which the apps here boot with.
snapdir=$(grep -l '"memMiB": 512' "$BERTH_HOME"/vm/snapshots/*/snapshot.json 2>/dev/null | head -1)
snapdir=${snapdir%/snapshot.json}
check "the snapshot, its memory and its record are 0600, in a 0700 directory" \
	test "$(stat -c %a "$snapdir/vm.snap" "$snapdir/ram" "$snapdir/snapshot.json" "$snapdir" 2>/dev/null | tr '\n' ' ')" = "600 600 600 700 "
sha=$(json_get "$snapdir/snapshot.json" sha256 2>/dev/null)
ram_sha=$(json_get "$snapdir/snapshot.json" ram sha256 2>/dev/null)
check "the record's sha256 is the file's" test "$(sha256sum "$snapdir/vm.snap" | cut -d' ' -f1)" = "$sha"
check "the record's digest of the memory is the memory's" test "$(ram_digest "$snapdir/ram")" = "$ram_sha"
check "the memory is a sparse file of the VM's size, the devices' state apart and small" \
	python3 -c 'import os,sys; r=os.stat(sys.argv[1]); s=os.stat(sys.argv[2]); sys.exit(not(r.st_size == 512 << 20 and r.st_blocks * 512 < r.st_size and s.st_size < 16 << 20))' "$snapdir/ram" "$snapdir/vm.snap"

# --- Two VMs restored from it, side by side; only the first gets the secret.
check "berth dev restores a VM from the snapshot" dev alpha --env "WARM_TOKEN=$token"
kernel_text alpha "$BERTH_HOME/text-ready"
check "a second VM restores from the same snapshot while the first runs" dev beta
check "both say so in vm.json, with the snapshot's sha256 and its memory's" \
	test "$(boot_mode alpha) $(boot_mode beta) $(json_get "$(vmj alpha)" boot snapshot sha256) $(json_get "$(vmj beta)" boot snapshot sha256) $(json_get "$(vmj beta)" boot snapshot ramSha256)" = "restored restored $sha $sha $ram_sha"
check "berth dev's ready line says it restored" grep -q '^VM ready in [0-9]* ms (bundle [0-9]* ms, [a-z]*, restore [0-9]* ms)' "$BERTH_HOME/alpha.log"
rpc alpha identity >"$BERTH_HOME/a.json"
rpc beta identity >"$BERTH_HOME/b.json"
ida() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$BERTH_HOME/a.json" "$1"; }
idb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$BERTH_HOME/b.json" "$1"; }
check "both apps answer" test -n "$(ida random 2>/dev/null)" -a -n "$(idb random 2>/dev/null)"
check "each VM has its own kernel boot id" test "$(ida kernelBootId)" != "$(idb kernelBootId)"
check "each VM has its own Berth boot id, the one in its vm.json" \
	test "$(ida berthBootId) $(idb berthBootId)" = "$(json_get "$(vmj alpha)" bootId) $(json_get "$(vmj beta)" bootId)" -a "$(ida berthBootId)" != "$(idb berthBootId)"
check "each VM has its own random stream" test "$(ida random)" != "$(idb random)"
check "and Python's random module its own, though both apps are forks of one warm runtime" \
	test "$(ida pyRandom)" != "$(idb pyRandom)"
check "each VM's clock is the host's" python3 -c 'import json,sys,time; sys.exit(not all(abs(json.load(open(f))["time"] - time.time()) < 30 for f in sys.argv[1:]))' "$BERTH_HOME/a.json" "$BERTH_HOME/b.json"
check "the secret reached the VM it was given to, and not the other" test "$(ida hasToken) $(idb hasToken)" = "True False"
check "apps run as their own uid, not root" test -n "$(ida uid)$(idb uid)" -a "$(ida uid)" != 0 -a "$(idb uid)" != 0
rpc alpha remember '{"text":"kept by alpha"}' >/dev/null
check "each VM has its own state" test "$(field alpha recall '' text)/$(field beta recall '' text)" = "kept by alpha/None"
"$berth" vm status berth-dev-alpha >"$BERTH_HOME/status.txt" 2>&1
check "berth vm status names the snapshot" grep -q "boot: restored from snapshot ${sha:0:12}" "$BERTH_HOME/status.txt"
check "a restored VM's app is confined: Landlock refuses a write to /tmp" \
	test "$(field alpha try_write '{"path":"/tmp/escape"}' error)" = EACCES
# started_as NAME: how berth-init started the app of NAME's berth dev VM, from the guest's
# app_started event; start_of VM: the same for a VM by its name.
started_as() { start_of "berth-dev-$1"; }
start_of() {
	control "$1" | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print(" ".join(e.get("start", "?") for e in ev if e.get("event") == "app_started"))'
}
check "berth-init waited for its child to draw the kernel's once-drawn secrets, which drew them all" \
	test "$(control berth-dev-alpha | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print([e["failed"] for e in ev if e.get("event") == "kernel_secrets_drawn"])')" = "[0]"
check "a restored VM's Python app is a fork of the warm runtime, not an exec" \
	test "$(started_as alpha)" = "warm runtime"
st=$(ida status)
echo "# the warm runtime's app, /proc/self/status: $st"
check "and it is confined as an exec'd app is: its uid, no capability, no_new_privs, seccomp" \
	python3 -c 'import ast,sys; s=ast.literal_eval(sys.argv[1]); sys.exit(not(s["Uid"].split()[0] != "0" and s["CapBnd"] == s["CapEff"] == "0000000000000000" and s["NoNewPrivs"] == "1" and s["Seccomp"] == "2"))' "$st"
check "and it is berth-init's child, as an exec'd app is" test "$(ida ppid)" = 1
check "its seccomp filters are an exec'd app's: UDP refused (no network declared), AF_ALG too" \
	test "$(ida udp) $(ida afAlg)" = "EPERM EPERM"
# released NAME: why berth-init released the context daemons of NAME's VM (held while the
# apps start): "apps started" (after every app's ready line) or "hold expired" (after the
# 3 s hold), when its event says so consistently and both were exec'd only after it.
released() {
	control "berth-dev-$1" | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
names = [e.get("event") for e in ev]
rel = [i for i, n in enumerate(names) if n == "context_daemons_released"]
started = [i for i, e in enumerate(ev) if e.get("event") == "daemon_started" and e.get("daemon") in ("context-bus", "semantic-fs")]
ready = [i for i, n in enumerate(names) if n == "app_ready"]
if len(rel) != 1 or len(started) != 2 or not all(i > rel[0] for i in started):
    sys.exit(1)
r = ev[rel[0]]
print(r["after"] if (r["after"] == "apps started" and ready and max(ready) < rel[0]) or (r["after"] == "hold expired" and r["heldMs"] >= 3000) else "inconsistent: %s" % r)'
}
why=$(released alpha)
echo "# alpha's context daemons released: $why"
check "the context daemons are exec'd once the app has started, not beside its start" \
	test "$why" = "apps started" -o "$why" = "hold expired"
check "they start at a lower priority than the apps" test "$(control berth-dev-alpha | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print(sorted(e["startNice"] for e in ev if e.get("event") == "daemon_started" and e.get("daemon") in ("context-bus", "semantic-fs")))')" = "[10, 10]"
check "and once they listen, they run at the apps' priority" \
	test "$(field alpha identity '' daemonNice)" = "{'context-bus': 0, 'semantic-fs': 0}"
keys=$(rpc alpha switch_keys)
echo "# what the app switched: $(tr -d " \n" <<<"$keys")"
check "the app switched what it could: timestamps, a minimum TTL and hop count, a TCP MD5 key, a flow label" \
	test "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(*(d[k] for k in ("timestamps", "timestampsNs", "minTtl", "minHopCount", "tcpMd5", "flowLabel")))' "$keys")" = "ok ok ok ok ok ok"
check "and not what its filters refuse it (no network declared): UDP, TCP connections" \
	test "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["udpEncap"], d["tcp4"], d["tcp6"])' "$keys")" = "EPERM EACCES EACCES"
sleep 2 # the kernel switches some keys from a work queue, some of them a second later
kernel_text alpha "$BERTH_HOME/text-session"
check "since the snapshot, the kernel's text changed only by keys switched off (no key switched on after the restore)" \
	text_changes "$snapdir/ram" "$BERTH_HOME/text-session"
check "and not at all since the app's ready line" \
	text_changes "$BERTH_HOME/text-ready" "$BERTH_HOME/text-session" none
alpha_boot=$(json_get "$(vmj alpha)" bootId)
undev alpha
undev beta
check "neither the secret nor the app's files are in the snapshot" sh -c "! grep -aqF -e '$token' -e '$marker' '$snapdir/vm.snap' '$snapdir/ram'"
check "restoring did not change the snapshot" test "$(sha256sum "$snapdir/vm.snap" | cut -d' ' -f1) $(ram_digest "$snapdir/ram")" = "$sha $ram_sha"
"$berth" attest "$alpha_boot" --out "$BERTH_HOME/record.json" >"$BERTH_HOME/attest.log" 2>&1
check "the attestation record names the snapshot" \
	test "$(json_get "$BERTH_HOME/record.json" boot isolation boot mode 2>/dev/null) $(json_get "$BERTH_HOME/record.json" boot isolation boot snapshot sha256 2>/dev/null)" = "restored $sha"
made_from=$(json_get "$BERTH_HOME/record.json" boot isolation boot snapshot madeFrom rootfsSha256 2>/dev/null)
check "and the pins it was made from" \
	test -n "$made_from" -a "$made_from" = "$(json_get "$BERTH_HOME/record.json" boot isolation rootfs sha256 2>/dev/null)"
dev alpha
check "state kept across VMs: the next restored VM of the app reads it" test "$(field alpha recall '' text)" = "kept by alpha"
undev alpha

# --- An app that waits for the /context index before its ready line: the hold ends alone.
check "an app that waits for the index at its start becomes ready all the same" \
	dev gamma --env IDENTITY_WAIT_FOR_INDEX=1
check "the index answered it at its start, once the 3 s hold was over" \
	test "$(field gamma identity '' knownAtStart) $(released gamma)" = "gamma hold expired"
undev gamma

# --- A tampered snapshot: one byte flipped in the middle, the size unchanged.
size=$(stat -c %s "$snapdir/vm.snap")
flip "$snapdir/vm.snap" "$((size / 2))"
check "the flip changed the snapshot" test "$(sha256sum "$snapdir/vm.snap" | cut -d' ' -f1)" != "$sha"
dev alpha
check "a tampered snapshot is refused: the VM boots cold" test "$(boot_mode alpha)" = cold
reason=$(json_get "$(vmj alpha)" boot reason 2>/dev/null)
check "and vm.json says why" grep -q "failed its check (sha256" <<<"$reason"
echo "# reason: $reason"
check "the cold-booted VM works and kept its state" test "$(field alpha recall '' text)" = "kept by alpha"
check "the tampered snapshot is removed" test ! -e "$snapdir/vm.snap"
undev alpha

# --- An old install's snapshot (another root image) is removed by the next snapshot made;
# those of the other VM sizes stay.
stale=$BERTH_HOME/vm/snapshots/0123456789abcdef
mkdir -m 0700 "$stale"
# From the 768 MiB VMs' record (the 512 MiB one was just removed as tampered).
python3 - "$(grep -l '"memMiB": 768' "$BERTH_HOME"/vm/snapshots/*/snapshot.json | head -1)" "$stale/snapshot.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["key"]["rootfsSha256"] = "1" * 64
json.dump(d, open(sys.argv[2], "w"))
EOF
head -c 4096 /dev/zero >"$stale/vm.snap"
records() { ls "$BERTH_HOME"/vm/snapshots/*/snapshot.json 2>/dev/null | grep -vc 0123456789abcdef; }
sizes_before=$(records)

# --- One made for another berth-vmm: its record names other pins.
"$vmm" snapshot >"$BERTH_HOME/snap2.log" 2>&1
check "berth-vmm snapshot removes a snapshot made from other pins, and says so" \
	sh -c "test ! -e '$stale/vm.snap' -a ! -e '$stale/snapshot.json' && grep -q '^removed 1 snapshot of other artifacts or another berth-vmm' '$BERTH_HOME/snap2.log'"
check "and keeps the other VM sizes' snapshots (and makes this size's again)" \
	test "$(records)" = "$((sizes_before + 1))"
python3 - "$snapdir/snapshot.json" <<'EOF'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["key"]["berthVmmSha256"] = "0" * 64
json.dump(d, open(p, "w"))
EOF
dev alpha
check "a snapshot made for another berth-vmm is refused: the VM boots cold" test "$(boot_mode alpha)" = cold
reason=$(json_get "$(vmj alpha)" boot reason 2>/dev/null)
check "and vm.json says it was made for another berth-vmm" grep -q "made for other artifacts, another berth-vmm" <<<"$reason"
echo "# reason: $reason"
undev alpha

# --- Cold on purpose.
"$vmm" snapshot >"$BERTH_HOME/snap3.log" 2>&1
dev alpha --cold
echo "# --cold: $(json_get "$(vmj alpha)" boot 2>&1)"
check "berth dev --cold boots cold although a snapshot exists" \
	test "$(boot_mode alpha) $(ls "$snapdir/vm.snap" 2>/dev/null)" = "cold $snapdir/vm.snap"
check "berth dev --cold's ready line says boot" grep -q '^VM ready in [0-9]* ms (bundle [0-9]* ms, [a-z]*, boot [0-9]* ms)' "$BERTH_HOME/alpha.log"
check "a cold VM's Python app is exec'd through agent-init" test "$(started_as alpha)" = exec
rpc alpha identity >"$BERTH_HOME/a.json"
check "and confined the same way" \
	python3 -c 'import ast,sys; s=ast.literal_eval(sys.argv[1]); sys.exit(not(s["Uid"].split()[0] != "0" and s["CapBnd"] == s["CapEff"] == "0000000000000000" and s["NoNewPrivs"] == "1" and s["Seccomp"] == "2"))' "$(ida status)"
check "with the same seccomp filters" test "$(ida udp) $(ida afAlg)" = "EPERM EPERM"
undev alpha
# --- Remembered: a snapshot's memory that matched is copied, not hashed, on a later restore
# while the file is unchanged (hash-record.h); one changed just before is hashed again.
ram_checked=
for _ in 1 2 3; do
	dev alpha
	ram_checked=$(json_get "$(vmj alpha)" boot snapshot ramCheckedBy 2>/dev/null)
	undev alpha
	[ "$ram_checked" = record ] && break
done
check "a restore copies a snapshot's memory that matched before without hashing it again" \
	test "$ram_checked" = record
# --- Tampered memory: one byte flipped among the data the template left, the size unchanged;
# remembered as matching, so the flip alone must make it hashed again.
flip "$snapdir/ram" data+$((4096 * 7 + 123))
dev alpha
check "a snapshot whose memory was tampered with is refused: the VM boots cold" test "$(boot_mode alpha)" = cold
reason=$(json_get "$(vmj alpha)" boot reason 2>/dev/null)
check "and vm.json says the memory failed its check" grep -q "memory .* failed its check (chunked sha256" <<<"$reason"
echo "# reason: $reason"
check "and the snapshot is removed" test ! -e "$snapdir/ram" -a ! -e "$snapdir/vm.snap"
undev alpha
"$vmm" snapshot >"$BERTH_HOME/snap4.log" 2>&1
# --- Node apps: restored, the first takes the warm Node the template started (confined in
# place, every thread of it); cold, a plain exec.
# node_dev NAME [ARGS...]: `berth dev` of a copy of the Node identity fixture named NAME.
node_dev() {
	local name=$1
	shift
	rm -rf "${BERTH_HOME:?}/apps/$name"
	cp -r "$src/test/e2e/fixtures/identity-node" "$BERTH_HOME/apps/$name"
	sed -i "s/^name: identity-node/name: $name/" "$BERTH_HOME/apps/$name/berth.yml"
	echo "// share marker: $marker" >>"$BERTH_HOME/apps/$name/src/index.mjs"
	launch "$name" "$@"
}
check "a Node app boots in a restored VM" node_dev nalpha --env "WARM_TOKEN=$token"
check "a second one beside it, from the same snapshot" node_dev nbeta
check "each took the warm Node of its VM" test "$(started_as nalpha)/$(started_as nbeta)" = "warm runtime/warm runtime"
rpc nalpha identity >"$BERTH_HOME/na.json"
rpc nbeta identity >"$BERTH_HOME/nb.json"
ina() { json_get "$BERTH_HOME/na.json" "$@"; }
inb() { json_get "$BERTH_HOME/nb.json" "$@"; }
echo "# nalpha: $(tr -d "\n" <"$BERTH_HOME/na.json")"
check "both answer" test -n "$(ina random 2>/dev/null)" -a -n "$(inb random 2>/dev/null)"
check "each drew its own Math.random() at its first line, though both Nodes are one template's" \
	test "$(ina mathRandom)" != "$(inb mathRandom)"
check "and its own bytes from OpenSSL (crypto.randomBytes)" test "$(ina cryptoRandom)" != "$(inb cryptoRandom)"
check "each VM has its own kernel boot id" test "$(ina kernelBootId)" != "$(inb kernelBootId)"
check "the secret reached the VM it was given to, and not the other" test "$(ina hasToken) $(inb hasToken)" = "True False"
check "the app runs in its share, as runtime.mjs" test "$(ina cwd) $(ina argv1)" = "/app /app/runtime.mjs"
check "it is berth-init's child, as an exec'd app is" test "$(ina ppid)" = 1
check "every thread of it is confined: the app's uid and gid, no capability, no_new_privs, seccomp" \
	python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["threads"]
uid = json.load(open(sys.argv[1]))["uid"]
ok = len(t) > 1 and uid != 0 and all(
    s["Uid"].split() == [str(uid)] * 4 and s["Gid"].split() == [str(uid)] * 4 and
    all(s[c] == "0000000000000000" for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")) and
    s["NoNewPrivs"] == "1" and s["Seccomp"] == "2" for s in t.values())
sys.exit(not ok)' "$BERTH_HOME/na.json"
check "Landlock refuses it a write to /tmp" test "$(field nalpha try_write '{"path":"/tmp/escape"}' error)" = EACCES
check "and lets it write its declared /workspace" test "$(field nalpha try_write '{"path":"/workspace/n"}' error)" = None
check "its seccomp filters refuse it a UDP socket (no network declared), as an exec'd app's" \
	test "$(field nalpha try_udp '' error)" = EPERM
# reports NAME: the events of agent-init's reports berth-init relayed for NAME's VM.
reports() {
	control "berth-dev-$1" | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print(" ".join(e["report"]["event"] for e in ev if e.get("event") == "agent_init_report"))'
}
check "agent-init reported the confinement of an exec'd app, in its order" \
	test "$(reports nalpha)" = "capabilities_dropped app_uid_applied capability_policy_applied namespace_seccomp_filter network_seccomp_filter"
check "with no warning of Node's snapshot in its log" sh -c "! grep -q 'not yet supported in user snapshots' '$BERTH_HOME/nalpha.log'"
check "an app bundled by this SDK runs on the runtime the template preloaded from the image" \
	grep -q "runtime.mjs is the root image's, loaded before the app" "$BERTH_HOME/nalpha.log"
check "and the zod the template loaded from the image: its own import of zod is that module" \
	sh -c "grep -q \"runtime-zod.mjs is the root image's, loaded before the app\" '$BERTH_HOME/nalpha.log' && test '$(ina zodFromImage)' = True"
undev nalpha
undev nbeta
# A Node app whose share holds another runtime.mjs (the echo fixture's own, no SDK): the
# warm Node runs that one.
cp -r "$src/test/e2e/fixtures/echo" "$BERTH_HOME/apps/wecho"
check "a Node app with a runtime.mjs of its own restores" \
	sh -c "'$vmm' run --name wecho --app '$BERTH_HOME/apps/wecho' 2>'$BERTH_HOME/wecho.err'"
wait_state wecho running >/dev/null
check "it took the warm Node too" test "$(start_of wecho)" = "warm runtime"
for ((i = 0; i < 600; i++)); do
	control wecho | grep -q '"event":"app_ready"' && break
	sleep 0.2
done
python3 "$src/test/e2e/control-client.py" "$BERTH_HOME/run/vm/wecho/rpc-0.sock" \
	'{"id":"w1","export":"ping","input":{"n":1}}' >"$BERTH_HOME/wecho.json" 2>&1
"$berth" vm logs wecho >"$BERTH_HOME/wecho.logs" 2>&1
check "and ran the share's runtime.mjs, not the preloaded one" \
	sh -c "grep -q '\"echo\":{\"n\":1}' '$BERTH_HOME/wecho.json' && ! grep -q \"runtime.mjs is the root image's\" '$BERTH_HOME/wecho.logs'"
"$berth" vm stop wecho >/dev/null 2>&1

check "neither the Node app's secret nor its files are in the snapshot" sh -c "! grep -aqF -e '$token' -e '$marker' '$snapdir/vm.snap' '$snapdir/ram'"
check "a Node app boots in a --cold VM" node_dev nalpha --cold
check "which has no warm Node: plain exec" test "$(started_as nalpha)" = exec
check "and answers the same" test "$(field nalpha try_write '{"path":"/tmp/escape"}' error)" = EACCES
check "and its seccomp filters the same" test "$(field nalpha try_udp '' error)" = EPERM
check "and its zod is another module than the image's: the share's runtime-zod.mjs" \
	test "$(field nalpha identity '' zodFromImage)" = False
undev nalpha
no_vm_left() { ! pgrep -f "^[^ ]*qemu-system-x86_64 .*$BERTH_HOME" >/dev/null; }
# --- The disks a restored VM reads are measured while QEMU loads the snapshot.
dev alpha
check "a restored VM's kernel, initramfs, root image and state disk are checked before it runs" \
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["measurements"]; sys.exit(not(d["boot"]["mode"] == "restored" and all(m[k]["pinned"] and len(m[k]["sha256"]) == 64 and m[k]["checkedBy"] in ("hash", "record") for k in ("kernel", "initrd", "rootfs")) and len(m["state"]["chunkedSha256"]) == 64 and not any("pending" in v for v in m.values() if isinstance(v, dict))))' "$(vmj alpha)"
check "the kernel, initramfs and root image, unchanged since an earlier start matched them, were not hashed again" \
	test "$(for k in kernel initrd rootfs; do json_get "$(vmj alpha)" measurements $k checkedBy; done | tr '\n' ' ')" = "record record record "
undev alpha
# refused_on_restore FILE OFFSET PIN WHAT: with a byte of the pinned FILE changed at
# OFFSET, berth dev is refused with PIN's mismatch although a snapshot would restore: the
# restore had begun, nothing of the guest ran, no QEMU is left; then FILE is put back.
refused_on_restore() {
	local file=$1 offset=$2 pin=$3 what=$4
	cp "$file" "$BERTH_HOME/tampered.good"
	chmod u+w "$file"
	printf '\x42' | dd of="$file" bs=1 seek="$offset" conv=notrunc status=none
	if dev alpha; then
		not_ok "a tampered $what is refused, though a snapshot would restore"
		diag <"$BERTH_HOME/alpha.log"
		diag <"$BERTH_HOME/run/vm/berth-dev-alpha/vmm.log"
		undev alpha
	elif grep -q "$pin .* does not match the pin" "$BERTH_HOME/alpha.log"; then
		ok "a tampered $what is refused, though a snapshot would restore"
	else
		not_ok "a tampered $what is refused, though a snapshot would restore"
		diag <"$BERTH_HOME/alpha.log"
	fi
	check "the restore had begun, and nothing of the guest ran" \
		sh -c "grep -q 'restoring snapshot' '$BERTH_HOME/alpha.log' && ! grep -q 'berth-init' '$BERTH_HOME/alpha.log'"
	check "the snapshot is kept: the $what was wrong, not it" test -e "$snapdir/vm.snap"
	check "and no QEMU is left of it" no_vm_left
	cp "$BERTH_HOME/tampered.good" "$file"
}
# Both are remembered as matching (above): the changed byte alone must have them hashed again.
refused_on_restore "$(ls "$BERTH_HOME"/vm/rootfs/rootfs-*.erofs)" 8192 rootfs "root image"
# A restore's QEMU does not read the kernel: it is measured beside the load, like the disks.
refused_on_restore "$(ls "$BERTH_HOME"/vm/kernel/sha256/*/vmlinux)" 4096 kernel kernel
check "no VM is left behind" no_vm_left
finish
