#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# berth test and berth deploy with a real dockerd (docs/runtimes.md): the app built into an
# image on Berth's base image; berth test's one JSON line for the example apps, a failing
# export and an exports mismatch; berth deploy's digest and run command, an image that
# docker run starts and that answers RPC on its socket, confined (EACCES outside scope);
# and an app that needs berth-vmm refused.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the base image is made once as root)"
command -v docker >/dev/null || skip_all "no docker program: install docker.io (scripts/setup.sh does)"
require_artifacts
new_home
plan 21
cleanup() {
	for c in ${started:-}; do docker rm -f "$c" >/dev/null 2>&1; done
	docker rmi -f berth-e2e-deploy-notes:1 berth-e2e-deploy-probe:1 berth-test-mismatch:0.1.0 >/dev/null 2>&1
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
if ! docker info >/dev/null 2>&1; then
	not_ok "dockerd answers (start it: scripts/start-dockerd.sh)"
	exit 1
fi
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
field() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$@"; }

# --- berth test --------------------------------------------------------------------------------
# test_app NAME DIR: berth test DIR, its stdout in $out, status in $rc.
test_app() {
	rc=0
	out=$("$berth" test "$2" 2>"$BERTH_HOME/test-$1.err") || rc=$?
}
test_app notes "$src/apps/notes"
check "berth test apps/notes: exit 0 and one JSON line, every export ok" sh -c "
	test $rc = 0 && test \$(printf '%s\n' '$out' | wc -l) = 1" 
says "  add_note, list_notes and complete_note each answered" \
	'r["ok"] is True and [x["export"] for x in r["results"]] == ["add_note","list_notes","complete_note"] and all(x["ok"] for x in r["results"])'
check "  the progress went to standard error" grep -q '^\[berth:test\] calling every export of notes with stub inputs' "$BERTH_HOME/test-notes.err"
check "  and the stub run was confined as always (Landlock FullyEnforced)" \
	grep -q '^\[notes\] \[agent-init\] landlock restrict_self() status: ruleset=FullyEnforced' "$BERTH_HOME/test-notes.err"
test_app py "$src/apps/hello-world-py"
says "berth test apps/hello-world-py (Python): every export ok" 'r["ok"] is True and {x["export"] for x in r["results"]} == {"greet","publish_file_created"}'
test_app editor "$src/apps/code-editor"
check "berth test apps/code-editor: exit 1, an export failed on its stub input" test "$rc" = 1
says "  the failure names the export and its error" \
	'r["ok"] is False and r["results"][0]["export"] == "open_file" and "ENOENT" in r["results"][0]["error"]'
mis=$BERTH_HOME/mismatch
cp -r "$src/apps/hello-world-py" "$mis"
sed -i 's/^name: .*/name: mismatch/' "$mis/berth.yml"
printf '  - name: not_in_code\n' >>"$mis/berth.yml"
test_app mismatch "$mis"
says "an exports mismatch fails before any call, saying which" \
	'r["ok"] is False and r["results"] == [] and "declared in berth.yml but not implemented: not_in_code" in r["error"]'
check "  exit 1" test "$rc" = 1

# --- berth deploy ------------------------------------------------------------------------------
notes=$BERTH_HOME/notes
cp -r "$src/apps/notes" "$notes"
"$berth" deploy "$notes" --tag berth-e2e-deploy-notes:1 >"$BERTH_HOME/deploy.out" 2>"$BERTH_HOME/deploy.err"
check "berth deploy builds the image and prints its digest" grep -qE '^  image  sha256:[0-9a-f]{64}$' "$BERTH_HOME/deploy.out"
image=$(sed -n 's/^  image  //p' "$BERTH_HOME/deploy.out")
check "  tagged as asked, with the app's share and policy digests and the rootfs as labels" python3 -c '
import json,subprocess,sys
i=json.loads(subprocess.check_output(["docker","image","inspect",sys.argv[1]]))[0]; l=i["Config"]["Labels"]
sys.exit(not("berth-e2e-deploy-notes:1" in i["RepoTags"] and l["org.berth.app.0.name"]=="notes" and len(l["org.berth.app.0.policy.sha256"])==64
  and len(l["org.berth.rootfs.sha256"])==64 and i["Config"]["Entrypoint"]==["/usr/sbin/berth-init"]))' "$image"
check "  nothing was pushed: no repository digest" test "$(docker image inspect --format '{{len .RepoDigests}}' "$image")" = 0
run=$(grep '^  docker run ' "$BERTH_HOME/deploy.out" | sed 's/^  //; s/--name notes/--name berth-e2e-deploy-notes/')
cd "$BERTH_HOME" && mkdir -p notes-rpc
started="berth-e2e-deploy-notes"
sh -c "$run" >/dev/null
for ((i = 0; i < 100; i++)); do [ -S notes-rpc/notes.sock ] && break; sleep 0.1; done
check "docker run as printed starts it; its socket appears, 0600" test "$(stat -c %a notes-rpc/notes.sock 2>/dev/null)" = 600
out=$("$berth" rpc notes --socket notes-rpc/notes.sock --export add_note --input '{"text":"from a deployed image"}' 2>&1)
out=$("$berth" rpc notes --socket notes-rpc/notes.sock --export list_notes 2>&1)
says "berth rpc --socket: add_note, then list_notes has it" 'any(n["text"] == "from a deployed image" for n in r["notes"])'
check "the app runs confined in it (Landlock FullyEnforced, its own uid)" sh -c "
	docker logs berth-e2e-deploy-notes 2>&1 | grep -q '^\[notes\] \[agent-init\] running \"notes\" as uid 10000' &&
	docker logs berth-e2e-deploy-notes 2>&1 | grep -q '^\[notes\] \[agent-init\] landlock restrict_self() status: ruleset=FullyEnforced'"
docker restart berth-e2e-deploy-notes >/dev/null
for ((i = 0; i < 100; i++)); do
	out=$("$berth" rpc notes --socket notes-rpc/notes.sock --export list_notes 2>&1) && break
	sleep 0.1
done
says "docker restart: the app comes back with its plan, and /workspace kept its note" 'any(n["text"] == "from a deployed image" for n in r["notes"])'
docker stop berth-e2e-deploy-notes >/dev/null
check "docker stop: berth-init stops the app and the container exits 0" \
	test "$(docker inspect --format '{{.State.ExitCode}}' berth-e2e-deploy-notes)" = 0

probe=$BERTH_HOME/fileprobe
cp -r "$src/test/e2e/fixtures/fileprobe" "$probe"
"$berth" deploy "$probe" --tag berth-e2e-deploy-probe:1 >"$BERTH_HOME/probe.out" 2>&1
run=$(grep '^  docker run ' "$BERTH_HOME/probe.out" | sed 's/^  //; s/--name fileprobe/--name berth-e2e-deploy-probe/')
mkdir -p fileprobe-rpc
started="$started berth-e2e-deploy-probe"
sh -c "$run" >/dev/null
for ((i = 0; i < 100; i++)); do [ -S fileprobe-rpc/fileprobe.sock ] && break; sleep 0.1; done
out=$("$berth" rpc fileprobe --socket fileprobe-rpc/fileprobe.sock --export write --input '{"path":"/workspace/fileprobe/a.txt","text":"in"}' 2>&1)
says "a deployed app writes in its scope" 'r["ok"] is True'
out=$("$berth" rpc fileprobe --socket fileprobe-rpc/fileprobe.sock --export write --input '{"path":"/etc/deployed","text":"x"}' 2>&1)
says "and gets EACCES outside it" 'r["ok"] is False and r["error"] == "EACCES"'

rc=0
docker run --rm --network=none "$image" >"$BERTH_HOME/unconfined.log" 2>&1 || rc=$?
check "run with Docker's default capabilities, berth-init refuses to boot, saying how to run it" \
	sh -c 'test "$1" != 0 && grep -q "the container has more capabilities than berth-init needs" "$2"' - "$rc" "$BERTH_HOME/unconfined.log"
out_app=$BERTH_HOME/outbound
cp -r "$src/test/e2e/fixtures/outbound" "$out_app"
rc=0
"$berth" deploy "$out_app" >"$BERTH_HOME/outbound.log" 2>&1 || rc=$?
want="\"network:host:allowed.test\" in outbound's berth.yml needs berth-vmm's egress dialer, which a deployed image has not; run the app with berth dev or berth mcp"
check "an app that needs berth-vmm's egress dialer is refused, saying why and what to do" \
	sh -c 'test "$1" = 1 && grep -qF -- "$2" "$3"' - "$rc" "$want" "$BERTH_HOME/outbound.log"
finish
