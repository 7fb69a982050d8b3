#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Docker runtime end to end (docs/runtimes.md), with a real dockerd: berth dev, rpc and
# vm stop under --runtime docker, the base image made from the pinned rootfs, the
# container's shape (no network, few capabilities, the share read-only, no secret in its
# configuration), the notes round trip kept across restarts on a named volume, Landlock's
# EACCES outside an app's scope, egress through the broker and berth-vmm's dialer to a
# server in a network namespace (and refused elsewhere), secrets reaching the app only,
# attest's record, BERTH_SANDBOX, and no container left behind: not after a stop, not
# after berth-vmm is killed.
. "$(dirname "$0")/lib.sh"
if [ -z "${BERTH_DOCKER_TEST_INNER:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for a network namespace and bind mounts"
	command -v docker >/dev/null || skip_all "no docker program: install docker.io (scripts/setup.sh does)"
	require_artifacts
	exec env BERTH_DOCKER_TEST_INNER=1 unshare -m --propagation private "$0" "$@"
fi
new_home
plan 33
tag=$$
ns=berth-dkr-$tag
vhost=bdkr${tag}h
vns=bdkr${tag}n
containers() { docker ps -a --filter "label=org.berth.run-dir=$BERTH_HOME/run/vm/$1" --format '{{.Names}}'; }
cleanup() {
	kill -9 ${dev_pid:-} 2>/dev/null
	for name in berth-dev-notes berth-dev-fileprobe berth-dev-outbound berth-dev-envprobe; do
		"$berth" vm stop "$name" >/dev/null 2>&1
		pid=$(vm_pid "$name")
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	done
	docker ps -a --filter "label=org.berth.run-dir" --format '{{.ID}} {{.Labels}}' |
		grep -F "$BERTH_HOME/" | cut -d' ' -f1 | xargs -r docker rm -f >/dev/null 2>&1
	docker volume ls -q | grep -E '^berth-(notes|fileprobe|outbound|envprobe)-' |
		while read -r v; do docker volume inspect "$v" >/dev/null 2>&1 && echo "$v"; done |
		xargs -r docker volume rm >/dev/null 2>&1
	[ -n "${origin_pid:-}" ] && kill "$origin_pid" 2>/dev/null
	ip link del "$vhost" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
if ! docker info >/dev/null 2>&1; then
	not_ok "dockerd answers (start it: dockerd, or systemctl start docker)"
	exit 1
fi
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }

rpc() { "$berth" rpc "$@" 2>&1; }
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# dev DIR LOG ARGS...: berth dev under the Docker runtime, in the background, until ready.
dev() {
	local dir=$1 log=$2 i
	shift 2
	# Emptied before the child starts: the last run's "VM ready" must not be read.
	: >"$log"
	(cd "$dir" && exec "$berth" dev --runtime docker "$@" >"$log" 2>&1) &
	dev_pid=$!
	for ((i = 0; i < 900; i++)); do
		grep -q '^VM ready in' "$log" && return 0
		kill -0 $dev_pid 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

# --- notes ---------------------------------------------------------------------------------
notes=$BERTH_HOME/notes
cp -r "$src/apps/notes" "$notes"
log=$BERTH_HOME/notes.log
if dev "$notes" "$log"; then ok "berth dev --runtime docker boots apps/notes"; else not_ok "berth dev --runtime docker boots apps/notes"; diag < "$log"; fi
run=$BERTH_HOME/run/vm/berth-dev-notes
check "vm.json: engine docker, the host's kernel, its Landlock ABI, the image made from the pinned rootfs" python3 -c '
import json,os,sys; v=json.load(open(sys.argv[1])); c=v["container"]
sys.exit(not(v["engine"]=="docker" and c["hostKernel"]["release"]==os.uname().release and c["hostKernel"]["landlockAbi"]>=1
  and c["fromRootfsSha256"]==v["measurements"]["rootfs"]["sha256"] and c["image"].startswith("sha256:") and "kernel" not in v["measurements"]))' "$run/vm.json"
image=$(field "$run/vm.json" 'r["container"]["image"]')
layer=$(field "$run/vm.json" 'r["container"]["layerSha256"]')
check "the image's one layer is the tar its label names, from the rootfs its label names" test \
	"$(docker image inspect --format '{{len .RootFS.Layers}} {{index .RootFS.Layers 0}} sha256:{{index .Config.Labels "org.berth.layer.sha256"}} {{index .Config.Labels "org.berth.rootfs.sha256"}}' "$image")" = \
	"1 $layer $layer $(field "$run/vm.json" 'r["measurements"]["rootfs"]["sha256"]')"
cname=$(containers berth-dev-notes)
docker inspect "$cname" >"$BERTH_HOME/inspect.json"
check "the container: network none, capabilities dropped but seven, the share read-only, volumes for /workspace" python3 -c '
import json,sys; c=json.load(open(sys.argv[1]))[0]; h=c["HostConfig"]; m={x["Destination"]:x for x in c["Mounts"]}
sys.exit(not(h["NetworkMode"]=="none" and h["CapDrop"]==["ALL"] and sorted(h["CapAdd"])==sorted(["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER","CAP_SETUID","CAP_SETGID","CAP_SETPCAP","CAP_KILL"])
  and not h["Privileged"] and m["/app"]["RW"] is False and m["/workspace"]["Type"]=="volume"
  and sorted(c["Config"]["Env"])[:2]==["BERTH_BOOT_ID='"$(field "$run/vm.json" 'r["bootId"]')"'","BERTH_CONTAINER=1"]))' "$BERTH_HOME/inspect.json"
check "nothing is left of the boot disk in the run dir" test -z "$(ls -A "$run/guest")"
rpc notes --export add_note --input '{"text":"kept on a volume"}' >"$BERTH_HOME/add.json"
rpc notes --export list_notes >"$BERTH_HOME/list.json"
check "notes: add_note then list_notes" grep -q '"kept on a volume"' "$BERTH_HOME/list.json"
check "berth rpc --runtime docker calls it" sh -c "'$berth' rpc notes --runtime docker --export list_notes | grep -q 'kept on a volume'"
out=$("$berth" rpc notes --runtime vm --export list_notes 2>&1)
check "berth rpc --runtime vm refuses, saying where it runs" sh -c "echo '$out' | grep -qF '\"notes\" runs in a Docker container, not under --runtime vm'"
check "the app runs as its own uid under agent-init, Landlock FullyEnforced" \
	grep -q '^\[notes\] {"source":"agent-init","event":"capability_policy_applied",.*"app":"notes",.*"ruleset":"FullyEnforced"' "$log"
"$berth" vm status >"$BERTH_HOME/status.txt" 2>&1
check "berth vm status names the container and the host's kernel" grep -q "container $cname on the host's kernel $(uname -r)" "$BERTH_HOME/status.txt"
kill -INT "$dev_pid"; wait "$dev_pid"
check "Ctrl-C stops it and removes the container and the run dir" test -z "$(containers berth-dev-notes)" -a ! -e "$run"
boot=$(field "$BERTH_HOME/inspect.json" 'r[0]["Config"]["Labels"]["org.berth.boot-id"]')
"$berth" attest "$boot" >"$BERTH_HOME/attest.json" 2>"$BERTH_HOME/attest.err"
check "berth attest: runtime docker, isolation kind container, the host kernel enforcing, ACTIVE" python3 -c '
import json,os,sys; r=json.load(open(sys.argv[1])); b=r["boot"]; i=b["isolation"]
sys.exit(not(b["runtime"]=="docker" and i["runtime"]=="docker" and i["kind"]=="container" and i["kernel"]["enforcedBy"]=="host"
  and i["kernel"]["release"]==os.uname().release and i["image"]["image"]==sys.argv[2] and r["enforcement"]["status"]=="ACTIVE"))' \
	"$BERTH_HOME/attest.json" "$image"
if dev "$notes" "$log"; then ok "a restart boots again"; else not_ok "a restart boots again"; diag < "$log"; fi
rpc notes --export list_notes >"$BERTH_HOME/list.json"
check "the note is still there: /workspace is a named volume" grep -q '"kept on a volume"' "$BERTH_HOME/list.json"
pid=$(vm_pid berth-dev-notes)
kill -9 "$pid"
for ((i = 0; i < 100; i++)); do [ -z "$(containers berth-dev-notes)" ] && break; sleep 0.1; done
check "berth-vmm killed with -9: its watchdog removes the container" test -z "$(containers berth-dev-notes)"
wait "$dev_pid" 2>/dev/null

# --- confinement -----------------------------------------------------------------------------
probe=$BERTH_HOME/fileprobe
cp -r "$src/test/e2e/fixtures/fileprobe" "$probe"
if dev "$probe" "$BERTH_HOME/probe.log"; then ok "a Python app boots under --runtime docker"; else not_ok "a Python app boots under --runtime docker"; diag < "$BERTH_HOME/probe.log"; fi
call fileprobe write '{"path":"/workspace/fileprobe/in.txt","text":"in scope"}'
says "a write in its declared scope succeeds" 'r["ok"] is True'
call fileprobe write '{"path":"/workspace/elsewhere.txt","text":"out of scope"}'
says "a write outside it: EACCES from Landlock" 'r["ok"] is False and r["error"]=="EACCES"'
call fileprobe write '{"path":"/etc/berth-was-here","text":"x"}'
says "and into the container's own /etc: EACCES" 'r["ok"] is False and r["error"]=="EACCES"'
call fileprobe read '{"path":"/run/berth-host/mux.sock"}'
says "the run dir's channel directory is out of its reach" 'r["ok"] is False and r["error"] in ("EACCES","ENOENT")'
kill -INT "$dev_pid"; wait "$dev_pid"

# --- secrets -----------------------------------------------------------------------------------
token=docker-secret-$RANDOM$RANDOM$RANDOM
envapp=$BERTH_HOME/envprobe
cp -r "$src/test/e2e/fixtures/envprobe" "$envapp"
export PROBE_TOKEN=$token
if dev "$envapp" "$BERTH_HOME/env.log" --env PROBE_TOKEN; then ok "berth dev --runtime docker --env boots"; else not_ok "berth dev --runtime docker --env boots"; diag < "$BERTH_HOME/env.log"; fi
unset PROBE_TOKEN
"$berth" rpc envprobe --export env --input '{"names":["PROBE_TOKEN"]}' >"$BERTH_HOME/env.json" 2>&1
check "the app has its secret" test "$(field "$BERTH_HOME/env.json" 'r["values"]["PROBE_TOKEN"]')" = "$token"
cname=$(containers berth-dev-envprobe)
check "docker inspect does not hold it" sh -c "docker inspect '$cname' | grep -c -F '$token' | grep -qx 0"
erun=$BERTH_HOME/run/vm/berth-dev-envprobe
check "nor does any file of the run dir, nor the logs" sh -c "! grep -rqF '$token' '$erun' '$BERTH_HOME/env.log'"
check "nor docker logs" sh -c "docker logs '$cname' 2>&1 | grep -c -F '$token' | grep -qx 0"
kill -INT "$dev_pid"; wait "$dev_pid"

# --- egress ------------------------------------------------------------------------------------
work=$BERTH_HOME/egress
mkdir -p "$work"
netns_up
egress_origin_up "$work" || { not_ok "the origin servers start"; diag < "$work/origin.out"; exit 1; }
printf '127.0.0.1 localhost\n198.51.100.2 allowed.test\n198.51.100.2 other.test\n' >"$work/hosts"
mount --bind "$work/hosts" /etc/hosts
export BERTH_VMM_EGRESS_TEST_ALLOW_CIDR=198.51.100.0/24
out_app=$BERTH_HOME/outbound
cp -r "$src/test/e2e/fixtures/outbound" "$out_app"
if dev "$out_app" "$BERTH_HOME/out.log"; then ok "an app that declares network:host: boots under --runtime docker"; else not_ok "an app that declares network:host: boots under --runtime docker"; diag < "$BERTH_HOME/out.log"; fi
ca=$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$work/cert.pem")
rpc outbound --export tunnel --input "{\"host\":\"allowed.test\",\"port\":443,\"path\":\"/over-tls\",\"ca\":$ca}" >"$BERTH_HOME/tls.json"
check "through the broker, the channel and the dialer: TLS to allowed.test in the namespace" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r.get("connectReply","").startswith("HTTP/1.1 200") and json.loads(r["response"].split("\r\n\r\n",1)[1])["requestline"]=="GET /over-tls HTTP/1.1"))' "$BERTH_HOME/tls.json"
rpc outbound --export raw --input '{"data":"CONNECT other.test:443 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "a host the app did not declare is refused by the broker" python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not r["reply"].startswith("HTTP/1.1 403"))' "$BERTH_HOME/r.json"
cname=$(containers berth-dev-outbound)
check "the container itself has no way out but the channel (no interface but lo)" \
	sh -c "test \"\$(docker exec '$cname' ls /sys/class/net)\" = lo"
kill -INT "$dev_pid"; wait "$dev_pid"

# --- the selection -----------------------------------------------------------------------------
(cd "$notes" && BERTH_SANDBOX=docker exec "$berth" dev >"$BERTH_HOME/env-sel.log" 2>&1) &
dev_pid=$!
wait_for "$BERTH_HOME/env-sel.log" '^VM ready in' 120
check "BERTH_SANDBOX=docker chooses the container" test "$(field "$run/vm.json" 'r["engine"]')" = docker
kill -INT "$dev_pid"; wait "$dev_pid"
out=$(cd "$notes" && BERTH_SANDBOX=podman "$berth" dev 2>&1)
check "an unknown BERTH_SANDBOX is refused, naming where it came from" sh -c "echo '$out' | grep -q 'unknown sandbox runtime \"podman\" (from BERTH_SANDBOX): use vm or docker'"

# --- the base image, made again ------------------------------------------------------------------
tagname=$(field "$run/vm.json" 'r["container"]["imageTag"]' 2>/dev/null || docker image inspect --format '{{index .RepoTags 0}}' "$image")
docker rmi -f "$tagname" >/dev/null 2>&1
"$berth" vm install --from "$artifacts" --no-download --runtime docker >"$BERTH_HOME/remake.log" 2>&1
check "berth vm install --runtime docker makes it again" grep -q "^✔ Docker base image $tagname (sha256:[0-9a-f]*) made in" "$BERTH_HOME/remake.log"
check "with the same layer: the same rootfs gives the same bytes" \
	test "$(docker image inspect --format '{{index .RootFS.Layers 0}}' "$tagname")" = "$layer"
finish
