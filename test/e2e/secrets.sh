#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Secrets end to end (docs/secrets.md): berth dev --env/--env-file hands random values to
# the envprobe fixture through the secrets disk. The app that declares a name sees its
# value; the value is in none of QEMU's argv, berth-vmm's argv, the guest's /proc/cmdline,
# vm.json, vmm.log, console.log, berth vm logs, the guest's events or berth dev's output;
# the disk is 0600 when berth-vmm starts and gone once the app is ready, after a reload,
# after a failed start and after a signal. Then two apps in one VM (berth-vmm directly,
# with a disk from the CLI's own code): neither sees the other's secret, not even through
# /proc/<pid>/environ. Three boots in all.
. "$(dirname "$0")/lib.sh"
require_artifacts
new_home
plan 45
trap 'kill -9 ${dev_pid:-} $(cat "$BERTH_HOME/wrap.pid" 2>/dev/null) 2>/dev/null
"$berth" vm stop e2e-secrets >/dev/null 2>&1; "$berth" vm stop berth-dev-envprobe >/dev/null 2>&1
rm -rf "$BERTH_HOME"' EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
writer=$bld/test/e2e/secrets-disk-write

rand() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
token=tok-$(rand)
shared=shr-$(rand)
alpha_token=alpha-$(rand)
beta_token=beta-$(rand)
common=common-$(rand)
# absent FILE...: none of the files holds any of the values.
absent() {
	local f
	for f in "$@"; do
		[ -e "$f" ] || { echo "# no $f"; return 1; }
		if grep -aqF -e "$token" -e "$shared" -e "$alpha_token" -e "$beta_token" -e "$common" "$f"; then
			echo "# a value is in $f"
			return 1
		fi
	done
}
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[k] for k in sys.argv[2:]]; print(v)' "$@"; }

app=$BERTH_HOME/envprobe
cp -r "$src/test/e2e/fixtures/envprobe" "$app"
disk=$BERTH_HOME/run/secrets/berth-dev-envprobe.img

# berth dev finds berth-vmm through BERTH_VMM: this one notes whether the --secrets file is
# there (and its mode) when berth-vmm starts, then runs the real one, or fails, or hangs.
mkdir -p "$BERTH_HOME/wrap"
cat >"$BERTH_HOME/wrap/berth-vmm" <<EOF
#!/bin/sh
prev=
for a in "\$@"; do
	if [ "\$prev" = --secrets ]; then
		if [ -f "\$a" ]; then stat -c 'present %a %U' "\$a"; else echo absent; fi >>"$BERTH_HOME/wrap.log"
		printf '%s\n' "\$*" >"$BERTH_HOME/wrap-argv.txt"
	fi
	prev=\$a
done
[ -e "$BERTH_HOME/wrap-fail" ] && [ "\$1" = run ] && exit 1
if [ -e "$BERTH_HOME/wrap-hang" ] && [ "\$1" = run ]; then echo \$\$ >"$BERTH_HOME/wrap.pid"; exec sleep 120; fi
exec "$vmm" "\$@"
EOF
chmod +x "$BERTH_HOME/wrap/berth-vmm"
export BERTH_VMM=$BERTH_HOME/wrap/berth-vmm
seen() { wc -l <"$BERTH_HOME/wrap.log" 2>/dev/null || echo 0; }

# dev LOG ARGS...: berth dev in the app's folder, in the background, with SIGINT at its
# default action as in a terminal (a background job of a script would have it ignored).
dev() {
	local log=$1
	shift
	# Emptied before the child starts: the last run's "VM ready" must not be read.
	: >"$log"
	(cd "$app" && exec python3 -c 'import os,signal,sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
		"$berth" dev "$@" >"$log" 2>&1) &
	dev_pid=$!
}
wait_ready() {
	local i
	for ((i = 0; i < 900; i++)); do
		grep -q '^VM ready in' "$1" && return 0
		kill -0 "$dev_pid" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

# --- refusals before anything boots ---------------------------------------------------------
unset PROBE_NOT_EXPORTED
out=$(cd "$app" && "$berth" dev --env PROBE_NOT_EXPORTED 2>&1); status=$?
check "--env NAME of a name the shell lacks is refused, saying what to do" \
	test "$status" = 2 -a "$out" = "berth: --env PROBE_NOT_EXPORTED: PROBE_NOT_EXPORTED isn't set in this shell (export it first, or use --env-file)"
printf 'A=1\n# fine\nB="%s\nC=2\n' "$token" >"$BERTH_HOME/bad.env"
out=$(cd "$app" && "$berth" dev --env-file "$BERTH_HOME/bad.env" 2>&1); status=$?
check "a broken --env-file is refused with its line and column" \
	test "$status" = 2 -a "$out" = "berth: $BERTH_HOME/bad.env:3:3: the \" quote opened here is never closed; close it, or escape it"
check "and the message holds no value" sh -c "! echo '$out' | grep -qF '$token'"
out=$(cd "$app" && "$berth" dev --env "$token" 2>&1)
check "a malformed --env is not echoed back (it may be a pasted value)" \
	sh -c "echo '$out' | grep -q -- '--env takes NAME or NAME=value' && ! echo '$out' | grep -qF '$token'"

# --- the disk goes on every failure path ----------------------------------------------------
export PROBE_TOKEN=$token
touch "$BERTH_HOME/wrap-fail"
(cd "$app" && "$berth" dev --env PROBE_TOKEN >"$BERTH_HOME/fail.log" 2>&1)
check "when berth-vmm fails to start, berth dev fails" grep -q 'berth-vmm could not start the VM' "$BERTH_HOME/fail.log"
check "berth-vmm was given the disk, 0600" test "$(tail -1 "$BERTH_HOME/wrap.log")" = "present 600 $(id -un)"
check "and it is gone afterwards" test ! -e "$disk"
rm "$BERTH_HOME/wrap-fail"

touch "$BERTH_HOME/wrap-hang"
before=$(seen)
dev "$BERTH_HOME/hang.log" --env PROBE_TOKEN
for ((i = 0; i < 300 && $(seen) == before; i++)); do sleep 0.1; done
check "a berth-vmm that hangs has the disk" test -e "$disk" -a "$(tail -1 "$BERTH_HOME/wrap.log")" = "present 600 $(id -un)"
kill -INT "$dev_pid"
wait "$dev_pid"
check "Ctrl-C then stops berth dev" test $? = 130
check "and the disk is gone with it" test ! -e "$disk"
kill "$(cat "$BERTH_HOME/wrap.pid")" 2>/dev/null
rm -f "$BERTH_HOME/wrap-hang" "$BERTH_HOME/wrap.pid"

# --- berth dev with secrets: boot 1 ---------------------------------------------------------
cat >"$BERTH_HOME/app.env" <<EOF
# PROBE_TOKEN from --env wins over this one, though the file comes later on the line
PROBE_TOKEN=from-the-file
export SHARED_NAME="$shared" # not declared by the app: every app gets it, with a warning
EOF
log=$BERTH_HOME/dev.log
before=$(seen)
# Every reload restarts the VM here, so that one writes a new secrets disk (boot 2); a
# reload in place keeps the disk the VM booted with (e2e-reload).
dev "$log" --env PROBE_TOKEN --env-file "$BERTH_HOME/app.env" --reboot-on-change
if wait_ready "$log"; then ok "berth dev --env --env-file boots the app"; else not_ok "berth dev --env --env-file boots the app"; diag <"$log"; fi
check "berth-vmm started with the disk in place, 0600" \
	test "$(seen)" = $((before + 1)) -a "$(tail -1 "$BERTH_HOME/wrap.log")" = "present 600 $(id -un)"
check "passed as --secrets $disk" grep -qF -- "--secrets $disk" "$BERTH_HOME/wrap-argv.txt"
check "the disk is gone once the app is ready" test ! -e "$disk"
check "its directory is private (0700)" test "$(stat -c %a "$BERTH_HOME/run/secrets")" = 700
check "an undeclared name is delivered with a warning that says how to scope it" \
	grep -qx "\[berth\] SHARED_NAME is not declared under secrets: in any app's berth.yml, so every app in this VM receives it; to give it to one app only, list it under secrets: in that app's berth.yml" "$log"
check "a declared name without a value is warned about" \
	grep -qx '\[berth\] app "envprobe" declares secret PROBE_MISSING in berth.yml, but no value was provided for this boot' "$log"

"$berth" rpc envprobe --export env --input '{"names":["PROBE_TOKEN","SHARED_NAME","PROBE_MISSING"]}' >"$BERTH_HOME/env.json" 2>&1
check "the app sees its declared secret, the --env value rather than the file's" \
	test "$(json_get "$BERTH_HOME/env.json" values PROBE_TOKEN)" = "$token"
check "and the undeclared name" test "$(json_get "$BERTH_HOME/env.json" values SHARED_NAME)" = "$shared"
check "and nothing for the name without a value" test "$(json_get "$BERTH_HOME/env.json" values PROBE_MISSING)" = None

"$berth" rpc envprobe --export cmdline >"$BERTH_HOME/guest-cmdline.json" 2>&1
check "the guest's /proc/cmdline does not hold a value" \
	sh -c "grep -q 'BERTH_BOOT_ID=' '$BERTH_HOME/guest-cmdline.json' && ! grep -qF -e '$token' -e '$shared' '$BERTH_HOME/guest-cmdline.json'"
run=$BERTH_HOME/run/vm/berth-dev-envprobe
vpid=$(vm_pid berth-dev-envprobe)
tr '\0' ' ' <"/proc/$vpid/cmdline" >"$BERTH_HOME/vmm-argv.txt"
tr '\0' '\n' <"/proc/$vpid/environ" >"$BERTH_HOME/vmm-environ.txt"
check "berth-vmm's argv and environment do not hold a value (PROBE_TOKEN was exported)" \
	sh -c "grep -q -- '--secrets' '$BERTH_HOME/vmm-argv.txt' && grep -q '^PATH=' '$BERTH_HOME/vmm-environ.txt' && ! grep -qF -e '$token' -e '$shared' '$BERTH_HOME/vmm-argv.txt' '$BERTH_HOME/vmm-environ.txt'"
qpid=$(qemu_pid berth-dev-envprobe)
tr '\0' ' ' <"/proc/$qpid/cmdline" >"$BERTH_HOME/qemu-argv.txt" 2>/dev/null
tr '\0' '\n' <"/proc/$qpid/environ" >"$BERTH_HOME/qemu-environ.txt" 2>/dev/null
check "nor do QEMU's" \
	sh -c "grep -q 'serial=boot' '$BERTH_HOME/qemu-argv.txt' && ! grep -qF -e '$token' -e '$shared' '$BERTH_HOME/qemu-argv.txt' '$BERTH_HOME/qemu-environ.txt'"
check "vm.json, vmm.log and console.log do not" absent "$run/vm.json" "$run/vmm.log" "$run/console.log"
control berth-dev-envprobe >"$BERTH_HOME/events.txt"
check "berth-init reports the names it delivered, and no value" \
	sh -c "grep -qF '\"event\":\"secrets_loaded\",\"names\":{\"apps\":{\"envprobe\":[\"PROBE_TOKEN\"]},\"shared\":[\"SHARED_NAME\"]}' '$BERTH_HOME/events.txt' && ! grep -qF -e '$token' -e '$shared' '$BERTH_HOME/events.txt'"

# --- a reload writes a fresh disk: boot 2 ---------------------------------------------------
before=$(seen)
echo "# a change, so the bundle differs" >>"$app/src/app.py"
if wait_for "$log" '^Reloaded in [0-9]* ms' 240; then ok "a reload reboots the VM"; else not_ok "a reload reboots the VM"; tail -20 "$log" | diag; fi
check "with a fresh disk, 0600 when berth-vmm starts" \
	test "$(seen)" = $((before + 1)) -a "$(tail -1 "$BERTH_HOME/wrap.log")" = "present 600 $(id -un)"
check "gone again once the app is ready" test ! -e "$disk"
"$berth" rpc envprobe --export env --input '{"names":["PROBE_TOKEN"]}' >"$BERTH_HOME/env2.json" 2>&1
check "and the app has its secret after the reload" test "$(json_get "$BERTH_HOME/env2.json" values PROBE_TOKEN)" = "$token"
# Last: the guest's log port has one reader at a time, so this ends berth dev's stream.
"$berth" vm logs berth-dev-envprobe >"$BERTH_HOME/vm-logs.txt" 2>&1
check "berth vm logs does not hold a value" sh -c "grep -q 'envprobe\" ready' '$BERTH_HOME/vm-logs.txt' && ! grep -qF -e '$token' -e '$shared' '$BERTH_HOME/vm-logs.txt'"
kill -INT "$dev_pid" 2>/dev/null
wait "$dev_pid"
check "berth dev's own output never held a value" absent "$log" "$BERTH_HOME/hang.log" "$BERTH_HOME/fail.log"
check "nothing is left in the secrets directory" test -z "$(ls -A "$BERTH_HOME/run/secrets")"

# --- two apps in one VM: boot 3 -------------------------------------------------------------
# alpha declares ALPHA_TOKEN and 300 BULK_<n> (more than berth-init once had room for), beta
# BETA_TOKEN; COMMON is declared by neither.
shares=$BERTH_HOME/shares
mkdir -p "$shares"
bulk_names=$(seq -s, -f 'BULK_%g' 0 299)
for ((i = 0; i < 300; i++)); do echo "BULK_$i=bulk-value-$i"; done >"$BERTH_HOME/bulk.env"
for a in alpha beta; do
	A=$(echo "$a" | tr a-z A-Z)
	extra=
	[ "$a" = alpha ] && extra=,$bulk_names
	cp -r "$src/test/e2e/fixtures/envprobe" "$BERTH_HOME/src-$a"
	sed -i -e "s/^name: envprobe/name: $a/" -e "s/^secrets: .*/secrets: [${A}_TOKEN$extra]/" "$BERTH_HOME/src-$a/berth.yml"
	node "$src/sdk/node/bundle.mjs" "$BERTH_HOME/src-$a" "$shares/$a" >/dev/null
done
two=$BERTH_HOME/two.img
ALPHA_TOKEN=$alpha_token "$writer" "$two" --env ALPHA_TOKEN --env "BETA_TOKEN=$beta_token" --env "COMMON=$common" \
	--env-file "$BERTH_HOME/bulk.env" "$shares/alpha" "$shares/beta" 2>"$BERTH_HOME/writer.log"
check "the CLI's disk for two apps is written 0600" test "$(stat -c %a "$two" 2>/dev/null)" = 600
check "warning only about the name neither declares" \
	sh -c "test \$(wc -l <'$BERTH_HOME/writer.log') = 1 && grep -q '^\[berth\] COMMON is not declared' '$BERTH_HOME/writer.log'"
"$vmm" run --name e2e-secrets --app "$shares/alpha" --app "$shares/beta" --secrets "$two" --mem 1024 2>"$BERTH_HOME/vmm-run.log"
rm -f "$two" # as the CLI does once berth-vmm has it
q() { "$berth" rpc "$1" --export env --input "{\"names\":[\"ALPHA_TOKEN\",\"BETA_TOKEN\",\"COMMON\"]}" >"$BERTH_HOME/$1.json" 2>&1; }
for ((i = 0; i < 60; i++)); do q alpha && q beta && break; sleep 2; done
if q alpha && q beta; then ok "a VM with both apps boots"; else not_ok "a VM with both apps boots"; diag <"$BERTH_HOME/vmm-run.log"; tail -30 "$BERTH_HOME/run/vm/e2e-secrets/console.log" | diag; fi
check "alpha sees its own secret and the shared one" \
	test "$(json_get "$BERTH_HOME/alpha.json" values ALPHA_TOKEN)" = "$alpha_token" -a "$(json_get "$BERTH_HOME/alpha.json" values COMMON)" = "$common"
check "alpha does not see beta's" test "$(json_get "$BERTH_HOME/alpha.json" values BETA_TOKEN)" = None
"$berth" rpc alpha --export env --input '{"names":["BULK_0","BULK_150","BULK_299"]}' >"$BERTH_HOME/bulk.json" 2>&1
check "alpha sees every one of its 300 other secrets too" \
	test "$(json_get "$BERTH_HOME/bulk.json" values BULK_0)/$(json_get "$BERTH_HOME/bulk.json" values BULK_299)" = bulk-value-0/bulk-value-299
check "beta sees its own secret and the shared one" \
	test "$(json_get "$BERTH_HOME/beta.json" values BETA_TOKEN)" = "$beta_token" -a "$(json_get "$BERTH_HOME/beta.json" values COMMON)" = "$common"
check "beta does not see alpha's" test "$(json_get "$BERTH_HOME/beta.json" values ALPHA_TOKEN)" = None
check "they run as different uids" test "$(json_get "$BERTH_HOME/alpha.json" uid)" != "$(json_get "$BERTH_HOME/beta.json" uid)"
apid=$(json_get "$BERTH_HOME/alpha.json" pid)
bpid=$(json_get "$BERTH_HOME/beta.json" pid)
"$berth" rpc beta --export environ_of --input "{\"pid\":$apid}" >"$BERTH_HOME/peek-ab.json" 2>&1
check "beta cannot read alpha's /proc/<pid>/environ" \
	sh -c "grep -q '\"read\": false' '$BERTH_HOME/peek-ab.json' && ! grep -qF '$alpha_token' '$BERTH_HOME/peek-ab.json'"
"$berth" rpc alpha --export environ_of --input "{\"pid\":$bpid}" >"$BERTH_HOME/peek-ba.json" 2>&1
check "nor alpha beta's" \
	sh -c "grep -q '\"read\": false' '$BERTH_HOME/peek-ba.json' && ! grep -qF '$beta_token' '$BERTH_HOME/peek-ba.json'"
"$berth" vm status --json >"$BERTH_HOME/status.json" 2>&1
check "refused by the kernel (EACCES) while those are the live app processes" sh -c "
grep -q '\"error\": \"EACCES\"' '$BERTH_HOME/peek-ab.json' && grep -q '\"error\": \"EACCES\"' '$BERTH_HOME/peek-ba.json' &&
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p={a[\"name\"]:a[\"pid\"] for v in d[\"vms\"] for a in v[\"guest\"][\"apps\"]}; sys.exit(p!={\"alpha\":$apid,\"beta\":$bpid})' '$BERTH_HOME/status.json'"
check "the two-app VM's logs hold no value" absent "$BERTH_HOME/run/vm/e2e-secrets/vmm.log" "$BERTH_HOME/run/vm/e2e-secrets/console.log" "$BERTH_HOME/run/vm/e2e-secrets/vm.json"
"$berth" vm stop e2e-secrets >/dev/null 2>&1
finish
