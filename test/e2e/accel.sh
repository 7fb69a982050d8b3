#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The accelerator choice: the probe on this host's real QEMU, its cache and what
# invalidates it, the precedence of --accel, BERTH_ACCEL, vm.accel and auto, and an
# explicit kvm that cannot boot. A stand-in QEMU (BERTH_QEMU) scripts the probe boots
# where this host alone could not show a case.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
unset BERTH_ACCEL BERTH_QEMU
plan 30
trap 'kill_home_vms; rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag <"$BERTH_HOME/install.log"; exit 1; }
fake=$bld/test/e2e/fake-qemu
cache=$BERTH_HOME/vm/accel.json
out=$BERTH_HOME/accel.json

# accel ARGS...: berth-vmm accel --json ARGS, the document in $out, exit status in $rc.
accel() {
	rc=0
	"$vmm" accel --json "$@" >"$out" 2>"$out.err" || rc=$?
}
# field EXPR: a Python expression over the document d, printed.
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$out" "$1"; }
is() {
	local what=$1 expr=$2 want=$3 got
	got=$(field "$expr" 2>&1)
	if [ "$got" = "$want" ]; then ok "$what"; else not_ok "$what ($expr is '$got', wanted '$want')"; diag <"$out"; diag <"$out.err"; fi
}
kvm_usable() { [ -r /dev/kvm ] && [ -w /dev/kvm ] && python3 -c 'import os; os.close(os.open("/dev/kvm", os.O_RDWR))' 2>/dev/null; }
# edit_key FIELD VALUE: pretend the cache was written under another key.
edit_key() {
	python3 - "$cache" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["key"][sys.argv[2]] = sys.argv[3]
json.dump(d, open(sys.argv[1], "w"))
EOF
}

# --- this host, real QEMU ----------------------------------------------------------------
accel
check "auto on this host chooses an accelerator" test "$rc" = 0
is "the verdict is probed now, not cached" 'd["probe"]["cached"]' False
is "TCG booted the probe" 'd["probe"]["trials"]["tcg"]["booted"]' True
if kvm_usable; then
	# Whatever KVM did, it is chosen only if it booted the probe faster than TCG.
	is "KVM was tried, since /dev/kvm opens" 'd["probe"]["trials"]["kvm"]["tried"]' True
	is "KVM is chosen only when it booted first" \
		'd["chosen"] == ("kvm" if d["probe"]["trials"]["kvm"]["booted"] and d["probe"]["trials"]["kvm"]["ms"] < d["probe"]["trials"]["tcg"]["ms"] else "tcg")' True
else
	is "KVM is not usable here and not tried" 'd["probe"]["trials"]["kvm"]["tried"]' False
	is "so TCG is chosen" 'd["chosen"]' tcg
fi
is "the reason says what was seen" 'd["reason"].startswith("auto: ")' True
check "the verdict is cached in ~/.berth/vm/accel.json (0600)" test "$(stat -c %a "$cache")" = 600
accel
is "a second call uses the cache" 'd["probe"]["cached"]' True

# --- what invalidates the cache ---------------------------------------------------------
edit_key bootId 00000000-0000-4000-8000-000000000000
accel
is "another host boot id: probed again" 'd["probe"]["cached"]' False
edit_key kernelSha256 0000000000000000000000000000000000000000000000000000000000000000
accel
is "another kernel pin: probed again" 'd["probe"]["cached"]' False
BERTH_QEMU=$fake accel
is "another QEMU: probed again" 'd["probe"]["cached"]' False
accel
is "back to this QEMU: probed again (one verdict is kept)" 'd["probe"]["cached"]' False

# --- precedence: --accel > BERTH_ACCEL > vm.accel > auto ----------------------------------
printf '{"vm": {"accel": "kvm"}}\n' >"$BERTH_HOME/config.json"
BERTH_ACCEL=tcg accel --accel tcg
is "--accel is taken first" 'd["source"]' --accel
BERTH_ACCEL=tcg accel
is "then BERTH_ACCEL" 'd["source"] + " " + d["chosen"]' "BERTH_ACCEL tcg"
printf '{"vm": {"accel": "tcg"}}\n' >"$BERTH_HOME/config.json"
accel
is "then vm.accel in config.json" 'd["source"].startswith("vm.accel in ") and d["chosen"] == "tcg"' True
rm "$BERTH_HOME/config.json"
accel
is "then the default, auto" 'd["mode"] + " " + d["source"]' "auto the default"
BERTH_ACCEL=fast accel
check "a bad BERTH_ACCEL is refused, naming it" grep -q 'BERTH_ACCEL is "fast": use auto, kvm or tcg' "$out.err"
printf '{"vm": {"accel": "fast"}}\n' >"$BERTH_HOME/config.json"
accel
check "a bad vm.accel is refused, naming the file" grep -q 'vm.accel must be "auto", "kvm" or "tcg"' "$out.err"
rm "$BERTH_HOME/config.json"
rc=0
"$vmm" run --name bad --accel fast 2>"$out.err" || rc=$?
check "berth-vmm run --accel fast is a usage error" test "$rc" = 2
check "and says what it takes" grep -q -- "--accel takes auto, kvm or tcg" "$out.err"

# --- scripted probes (the stand-in QEMU) ----------------------------------------------------
if kvm_usable; then
	export BERTH_QEMU=$fake
	BERTH_FAKE_PROBE_TCG=ok:400 BERTH_FAKE_PROBE_KVM=ok:10 accel
	is "a KVM that boots the probe first is chosen" 'd["chosen"]' kvm
	BERTH_FAKE_PROBE_TCG=ok:50 BERTH_FAKE_PROBE_KVM=hang accel --reprobe
	is "a KVM slower than TCG is cut off at TCG's time" 'd["probe"]["trials"]["kvm"]["outpaced"]' True
	is "and TCG is chosen" 'd["chosen"]' tcg
	BERTH_FAKE_PROBE_TCG=ok:50 BERTH_FAKE_PROBE_KVM=internal-error accel --reprobe
	is "a KVM internal error in the probe is named" 'd["probe"]["trials"]["kvm"]["why"]' "KVM internal error (Suberror: 1)"
	is "and auto says why it uses TCG" '"KVM present, but its boot failed (KVM internal error (Suberror: 1)); using TCG" in d["reason"]' True
	# An explicit kvm that cannot boot: an error that says why, never a fallback.
	accel --accel kvm
	check "--accel kvm that cannot boot fails" test "$rc" = 1
	is "and says why, with the fix" '"KVM internal error" in d["error"] and "--accel auto" in d["error"]' True
	rc=0
	"$vmm" run --name explicit --accel kvm 2>"$out.err" || rc=$?
	check "berth-vmm run --accel kvm refuses before booting" test "$rc" = 1
	check "naming the KVM internal error" grep -q "it cannot boot the pinned kernel on this host: KVM internal error" "$out.err"
	check "and leaves no run dir" test ! -e "$BERTH_HOME/run/vm/explicit"
	unset BERTH_QEMU
else
	for i in $(seq 1 10); do ok "scripted KVM probe ($i) # SKIP /dev/kvm does not open read-write here"; done
fi
finish
