#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GitHub API broker end to end (docs/github.md): the broker in the guest, berth-init's
# dial socket, the channel and berth-vmm's dialer, against a fake api.github.com in a
# network namespace this test makes (a veth pair, 198.51.100.1 <-> 198.51.100.2; HTTPS on
# :443 with certificates from a CA of the test's own: good, expired, or from a CA nobody
# trusts, switched on its standard input). api.github.com resolves there through a test
# /etc/hosts bind-mounted in this script's own mount namespace, and
# BERTH_VMM_EGRESS_TEST_ALLOW_CIDR admits the block.
#
# Boot 1, berth dev on apps/github-assistant without a token: the CLI's --egress-allow is
# api.github.com:443, the broker starts as uid 9003 under agent-init before the app,
# confined (bind 8092, no TCP connect, writes only its directories), and SPEC 10's stub
# answers.
# Boot 2, berth dev with --env GITHUB_TOKEN and GITHUB_REPO: the token goes to the broker
# alone (the app gets the placeholder; secrets_loaded names it under daemons), and is in
# no argv, log, vm.json or event. The broker trusts the image's roots only, so the fake
# server's certificate is refused and nothing is sent to it.
# Boot 3, berth-vmm run with test/e2e/fixtures/ghprobe and a secrets disk whose daemon
# scope also gives the broker the test CA (BERTH_GITHUB_UPSTREAM_CA): SPEC 11's table
# (/repos/o/r allowed; /user/emails denied naming github:read:user:emails; /user, /gists,
# /notifications, /orgs/x, /emojis, traversal denied), POST /repos/o/r/pulls denied with
# read-only scopes and the upstream never hit, the token upstream on allowed requests only
# and absent from the app's /proc/self/environ, every log, argv and vm.json; CONNECT to
# other hosts refused; the certificate directory 0750 root:<app gid> with root's 0644
# certificates and no key; the broker's process and dial socket out of the app's reach;
# expired and untrusted upstream certificates refused.
# Boot 4: two apps declaring github: are both refused (github_refused), the third starts.
# Boot 5: github-assistant live (the test CA on the disk): get_repo_summary and
# create_issue in GITHUB_REPO through the broker.
. "$(dirname "$0")/lib.sh"
if [ -z "${BERTH_GITHUB_TEST_INNER:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for a network namespace and bind mounts"
	command -v ip >/dev/null || skip_all "needs iproute2 (ip)"
	command -v openssl >/dev/null || skip_all "needs the openssl command"
	require_artifacts
	exec env BERTH_GITHUB_TEST_INNER=1 unshare -m --propagation private "$0" "$@"
fi
new_home
plan 50
tag=$$
ns=berth-gh-$tag
vhost=bgh${tag}h
vns=bgh${tag}n
cleanup() {
	kill -9 ${dev_pid:-} 2>/dev/null
	for name in berth-dev-github-assistant e2e-github e2e-github-two e2e-github-live; do
		"$berth" vm stop "$name" >/dev/null 2>&1
		pid=$(vm_pid "$name")
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	done
	[ -n "${origin_pid:-}" ] && kill "$origin_pid" 2>/dev/null
	ip link del "$vhost" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	[ -n "${GITHUB_KEEP:-}" ] && cp -r "$BERTH_HOME" "$GITHUB_KEEP"; rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
export BERTH_VMM_EGRESS_TEST_ALLOW_CIDR=198.51.100.0/24

# --- the fake api.github.com ----------------------------------------------------------------
work=$BERTH_HOME/github
pki=$work/pki
mkdir -p "$pki"
mkca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$1" \
		-keyout "$pki/$1.key" -out "$pki/$1.crt" >/dev/null 2>&1
}
mkleaf() { # NAME ISSUER DAYS
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=api.github.com \
		-keyout "$pki/$1.key" -out "$pki/$1.csr" >/dev/null 2>&1
	printf 'subjectAltName=DNS:api.github.com\nextendedKeyUsage=serverAuth\n' >"$pki/$1.ext"
	openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$2.crt" -CAkey "$pki/$2.key" -CAcreateserial \
		-days "$3" -extfile "$pki/$1.ext" -out "$pki/$1.crt" >/dev/null 2>&1
}
mkca testca
mkca otherca
mkleaf good testca 2
mkleaf expired testca -1
mkleaf untrusted otherca 2
netns_up
mkfifo "$work/origin.in"
ip netns exec "$ns" python3 "$src/test/e2e/fixtures/github-origin.py" 198.51.100.2 "$pki" \
	<"$work/origin.in" >"$work/origin.out" 2>&1 &
origin_pid=$!
exec 9>"$work/origin.in"
wait_for "$work/origin.out" '^ready' 20 || { not_ok "the fake api.github.com starts"; diag < "$work/origin.out"; exit 1; }
printf '127.0.0.1 localhost\n198.51.100.2 api.github.com\n' >"$work/hosts"
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$work/resolv.conf"
mount --bind "$work/hosts" /etc/hosts
mount --bind "$work/resolv.conf" /etc/resolv.conf

rpc() { "$berth" rpc "$@" 2>&1; }
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# requests PATTERN: how many requests the fake server has read whose request line matches.
requests() { grep -c "\"requestline\": \"$1" "$work/origin.out"; }
# A BERTHSEC2 disk: secrets_disk OUT APP_JSON DAEMON_JSON (0600, as berth-vmm wants it).
secrets_disk() {
	python3 - "$@" <<'PY'
import json, os, sys
out, apps, daemons = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
body = b"BERTHSEC2\n" + json.dumps({"shared": {}, "apps": apps, "daemons": daemons}).encode()
body += b"\0" * (-len(body) % 512)
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, body)
os.close(fd)
PY
}
token=ghp_$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
placeholder=berth-placeholder-the-github-broker-adds-the-token
test_ca=$(cat "$pki/testca.crt")
# no_token_in FILE...: the token appears in none of them.
no_token_in() { ! grep -qF -- "$token" "$@" 2>/dev/null; }

# --- boot 1: berth dev, no token ----------------------------------------------------------
app=$BERTH_HOME/github-assistant
cp -r "$src/apps/github-assistant" "$app"
log=$BERTH_HOME/dev1.log
if start_dev "$app" "$log"; then ok "berth dev boots github-assistant"; else not_ok "berth dev boots github-assistant"; diag < "$log"; fi
check "it says the dialer will allow api.github.com:443" \
	grep -q 'egress: api.github.com:443 (berth-vmm checks every connection against these)' "$log"
check "berth-vmm got exactly that as --egress-allow" python3 -c '
import json,sys; e=json.load(open(sys.argv[1]))["endpoints"]["egress"]; sys.exit(e["allow"] != ["api.github.com:443"])' \
	"$BERTH_HOME/run/vm/berth-dev-github-assistant/vm.json"
control berth-dev-github-assistant >"$BERTH_HOME/events1.txt"
check "the GitHub broker started under agent-init as uid 9003, before the app" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
names=[e.get("event") for e in ev]
d=[e for e in ev if e.get("event")=="daemon_started" and e.get("daemon")=="github-api-broker"]
sys.exit(not(d and d[0]["uid"]==9003 and d[0]["app"]=="github-assistant" and d[0]["listen"]=="127.0.0.1:8092" and names.index("daemon_started") < names.index("app_started")))' "$BERTH_HOME/events1.txt"
check "confined: FullyEnforced, bind 8092 only, no TCP connect, writes only its directories" \
	grep -q '^\[github-api-broker\] {"source":"agent-init","event":"capability_policy_applied",.*"app":"github-api-broker","writePaths":\["/dev/null","/tmp/berth-github","/run/berth/github-api-broker"\],.*"networkPorts":\[\],"networkUnrestricted":false,"bindPorts":\[8092\],.*"ruleset":"FullyEnforced"' "$log"
check "the broker's listening line is in the log" grep -q '^\[github-api-broker\] \[github-api-broker\] listening on 127.0.0.1:8092$' "$log"
rpc github-assistant --export get_repo_summary --input '{"repo":"o/r"}' >"$BERTH_HOME/r.json"
check "without GITHUB_TOKEN, SPEC 10's stub" \
	test "$(field "$BERTH_HOME/r.json" 'r')" = "{'summary': 'o/r (stub — set GITHUB_TOKEN for live data)', 'open_issues': 0}"
rpc github-assistant --export create_issue --input '{"title":"t","body":"b"}' >"$BERTH_HOME/r.json"
check "create_issue without GITHUB_REPO: nothing, no error" test "$(cat "$BERTH_HOME/r.json")" = null
check "and nothing reached the fake server" test "$(requests '')" = 0
stop_dev

# --- boot 2: berth dev with a token; the image's roots do not trust the fake server ----------
log=$BERTH_HOME/dev2.log
(cd "$app" && GITHUB_TOKEN=$token exec "$berth" dev --env GITHUB_TOKEN --env GITHUB_REPO=o/r >"$log" 2>&1) &
dev_pid=$!
for ((i = 0; i < 900; i++)); do grep -q '^VM ready in' "$log" && break; sleep 0.2; done
check "berth dev --env GITHUB_TOKEN boots, and says where the token goes" \
	grep -q '\[berth\] GITHUB_TOKEN goes to the GitHub API broker alone' "$log"
control berth-dev-github-assistant >"$BERTH_HOME/events2.txt"
check "secrets_loaded: GITHUB_TOKEN under the broker's daemon scope (the app's is the placeholder)" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
n=[e["names"] for e in ev if e.get("event")=="secrets_loaded"][0]
sys.exit(not(sorted(n["apps"]["github-assistant"])==["GITHUB_REPO","GITHUB_TOKEN"] and n["daemons"]=={"github-api-broker":["GITHUB_TOKEN"]} and n["shared"]==[]))' \
	"$BERTH_HOME/events2.txt"
rpc github-assistant --export get_repo_summary --input '{"repo":"o/r"}' >"$BERTH_HOME/r.json"
check "a certificate the image's roots do not vouch for is refused: 502, nothing sent" sh -c "
	grep -q 'GitHub API 502: .*certificate verify failed' '$BERTH_HOME/r.json' && test \"\$(grep -c '\"requestline\"' '$work/origin.out')\" = 0"
check "the broker logged upstream_tls_failed" grep -q '"event":"upstream_tls_failed"' "$log"
vpid=$(vm_pid berth-dev-github-assistant)
qpid=$(qemu_pid berth-dev-github-assistant)
tr '\0' ' ' <"/proc/$vpid/cmdline" >"$BERTH_HOME/argv.txt" 2>/dev/null
tr '\0' ' ' <"/proc/$qpid/cmdline" >>"$BERTH_HOME/argv.txt" 2>/dev/null
tr '\0' '\n' <"/proc/$vpid/environ" >>"$BERTH_HOME/argv.txt" 2>/dev/null
"$berth" vm logs berth-dev-github-assistant >"$BERTH_HOME/logs2.txt" 2>&1
d=$BERTH_HOME/run/vm/berth-dev-github-assistant
check "the token is in no argv or environment of berth-vmm or QEMU, no log, no vm.json, no event" \
	no_token_in "$BERTH_HOME/argv.txt" "$log" "$BERTH_HOME/logs2.txt" "$d/vm.json" "$d/vmm.log" "$d/console.log" "$BERTH_HOME/events2.txt"
stop_dev

# --- boot 3: the probe, with the test CA given to the broker --------------------------------
shares=$BERTH_HOME/shares
mkdir -p "$shares"
node "$src/sdk/node/bundle.mjs" "$src/test/e2e/fixtures/ghprobe" "$shares/ghprobe" >/dev/null
secrets_disk "$BERTH_HOME/probe.img" "{\"ghprobe\":{\"GITHUB_TOKEN\":\"$placeholder\"}}" \
	"$(python3 -c 'import json,sys; print(json.dumps({"github-api-broker":{"GITHUB_TOKEN":sys.argv[1],"BERTH_GITHUB_UPSTREAM_CA":sys.argv[2]}}))' "$token" "$test_ca")"
"$vmm" run --name e2e-github --app "$shares/ghprobe" --egress-allow api.github.com:443 \
	--secrets "$BERTH_HOME/probe.img" 2>"$BERTH_HOME/launch3.log"
rm -f "$BERTH_HOME/probe.img"
# "running" is the VM; the app answers once it says app_ready.
if wait_state e2e-github running && wait_for "$BERTH_HOME/run/vm/e2e-github/vmm.log" '"app_ready"' 180 &&
	rpc ghprobe --export env >"$BERTH_HOME/env.json"; then
	ok "a VM with ghprobe boots"
else
	not_ok "a VM with ghprobe boots"
	diag < "$BERTH_HOME/env.json"
	diag < "$BERTH_HOME/launch3.log"
	tail -30 "$BERTH_HOME/run/vm/e2e-github/console.log" 2>/dev/null | diag
fi
check "the app alone is told the proxy and the CA: BERTH_GITHUB_API_PROXY, NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE" \
	test "$(field "$BERTH_HOME/env.json" '(r["proxy"], r["nodeExtraCaCerts"], r["sslCertFile"], r["requestsCaBundle"], r["egressProxy"])')" = \
	"('http://127.0.0.1:8092', '/run/berth/github-api-broker/ca.crt', '/run/berth/github-api-broker/ca-bundle.crt', '/run/berth/github-api-broker/ca-bundle.crt', None)"
check "its GITHUB_TOKEN is the placeholder, and its /proc/self/environ holds no token" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r["token"]==sys.argv[2] and "GITHUB_TOKEN="+sys.argv[2] in r["environ"] and sys.argv[3] not in r["environ"]))' \
	"$BERTH_HOME/env.json" "$placeholder" "$token"
rpc ghprobe --export certdir >"$BERTH_HOME/certdir.json"
check "the certificate directory is 0750 root:<the app's gid>" \
	test "$(field "$BERTH_HOME/certdir.json" 'r["dir"]')" = "{'mode': '750', 'uid': 0, 'gid': 10000}"
check "holding ca.crt and ca-bundle.crt, root's and 0644, and no key" \
	test "$(field "$BERTH_HOME/certdir.json" '(r["files"], r["ca"])')" = \
	"({'ca-bundle.crt': {'mode': '644', 'uid': 0, 'gid': 0}, 'ca.crt': {'mode': '644', 'uid': 0, 'gid': 0}}, '-----BEGIN CERTIFICATE-----')"
rpc ghprobe --export peek_broker >"$BERTH_HOME/peek.json"
check "the broker's environ and memory are out of the app's reach (EACCES)" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r["pids"] and set(r["tries"].values()) == {"EACCES"}))' "$BERTH_HOME/peek.json"
rpc ghprobe --export probe_dial_socket >"$BERTH_HOME/r.json"
check "so is the broker's dial socket (EACCES)" test "$(field "$BERTH_HOME/r.json" 'r.get("error")')" = EACCES

greq() { rpc ghprobe --export request --input "{\"method\":\"$1\",\"path\":\"$2\",\"body\":\"${3:-}\"}"; }
greq GET /repos/o/r >"$BERTH_HOME/r.json"
check "GET /repos/o/r with github:read:repos: allowed, GitHub's answer comes back" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r["status"]=="HTTP/1.1 200 OK" and json.loads(r["body"])["full_name"]=="o/r" and r["headers"].get("connection")=="close"))' "$BERTH_HOME/r.json"
check "upstream it carries the broker's token, not the app's placeholder" python3 -c '
import json,sys
reqs=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"requestline")]
auth=[v for k,v in reqs[-1]["headers"] if k.lower()=="authorization"]
sys.exit(not(reqs[-1]["requestline"]=="GET /repos/o/r HTTP/1.1" and auth==["Bearer "+sys.argv[2]]))' "$work/origin.out" "$token"
before=$(requests '')
i=0
while IFS='|' read -r method path want; do
	greq "$method" "$path" >"$BERTH_HOME/r.json"
	check "$method $path: 403, $want" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r["status"]=="HTTP/1.1 403 Forbidden" and json.loads(r["body"])["message"]==sys.argv[2]))' "$BERTH_HOME/r.json" "$want"
done <<'EOF'
GET|/user/emails|denied: no declared capability covers github:read:user:emails
GET|/user|denied: no declared capability covers github:read:user
GET|/gists|denied: no declared capability covers github:read:gists
GET|/notifications|denied: no declared capability covers github:read:notifications
GET|/orgs/x|denied: no declared capability covers github:read:orgs
GET|/emojis|denied: no route covers GET /emojis — this broker maps paths to capabilities explicitly and denies by default
GET|/repos/o/r/../../../user/emails|denied: no declared capability covers github:read:user:emails
GET|/repos/o/r/../../../../user|denied: no route covers GET /repos/o/r/../../../../user — this broker maps paths to capabilities explicitly and denies by default
POST|/repos/o/r/pulls|denied: no declared capability covers github:write:pulls
EOF
check "none of the denied requests reached the fake server (POST /repos/o/r/pulls included)" \
	test "$(requests '')" = "$before"
rpc ghprobe --export fetch_repo --input '{"repo":"o/r"}' >"$BERTH_HOME/r.json"
check "fetch() through the SDK's configureEgressProxy() reaches it too" python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not(r.get("proxied") and r.get("status")==200))' "$BERTH_HOME/r.json"
for target in github.com:443 api.github.com:80 evil.test:443 198.51.100.2:443; do
	rpc ghprobe --export raw --input "{\"data\":\"CONNECT $target HTTP/1.1\\r\\n\\r\\n\"}" >"$BERTH_HOME/r.json"
	check "CONNECT $target: exactly HTTP/1.1 403 Forbidden" \
		test "$(field "$BERTH_HOME/r.json" 'repr(r["reply"])')" = "'HTTP/1.1 403 Forbidden\\r\\n\\r\\n'"
done
for cert in expired:'certificate has expired' untrusted:'unable to get local issuer certificate'; do
	echo "cert ${cert%%:*}" >&9
	sleep 0.5
	before=$(requests '')
	greq GET /repos/o/r >"$BERTH_HOME/r.json"
	check "an upstream certificate that is ${cert%%:*}: refused (502, ${cert#*:}), nothing sent" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r["status"]=="HTTP/1.1 502 Bad Gateway" and sys.argv[2] in json.loads(r["body"])["message"]))' "$BERTH_HOME/r.json" "${cert#*:}"
	check "(the fake server read no request)" test "$(requests '')" = "$before"
done
echo "cert good" >&9
"$berth" vm logs e2e-github >"$BERTH_HOME/logs3.txt" 2>&1
check "one JSON line per decision, as SPEC 6.2 writes them" sh -c "
	grep -qF '{\"event\":\"allowed\",\"method\":\"GET\",\"path\":\"/repos/o/r\",\"requested\":\"github:read:repos\"}' '$BERTH_HOME/logs3.txt' &&
	grep -qF '{\"event\":\"denied\",\"method\":\"GET\",\"path\":\"/user/emails\",\"requested\":\"github:read:user:emails\"}' '$BERTH_HOME/logs3.txt' &&
	grep -qF '{\"event\":\"denied\",\"method\":\"GET\",\"path\":\"/emojis\",\"requested\":\"(no route)\"}' '$BERTH_HOME/logs3.txt' &&
	grep -qF '{\"event\":\"connect_denied\",\"host\":\"github.com\",\"port\":443}' '$BERTH_HOME/logs3.txt'"
check "the host dialer saw api.github.com:443 only" sh -c "
	grep -q '\"decision\":\"allowed\",\"host\":\"api.github.com\",\"port\":443,\"address\":\"198.51.100.2\"' '$BERTH_HOME/run/vm/e2e-github/vmm.log' &&
	! grep '\"event\":\"egress\"' '$BERTH_HOME/run/vm/e2e-github/vmm.log' | grep -v '\"host\":\"api.github.com\",\"port\":443'"
control e2e-github '{"op":"status"}' >"$BERTH_HOME/status3.txt"
check "status reports the broker: app, ready, its dials" python3 -c '
import json,sys
g=[json.loads(l)["github"] for l in open(sys.argv[1]) if l.startswith("{") and "\"github\"" in l][-1]
sys.exit(not(g["app"]=="ghprobe" and g["state"]=="ready" and g["dials"]>=1))' "$BERTH_HOME/status3.txt"
d=$BERTH_HOME/run/vm/e2e-github
vpid=$(vm_pid e2e-github)
qpid=$(qemu_pid e2e-github)
tr '\0' ' ' <"/proc/$vpid/cmdline" >"$BERTH_HOME/argv3.txt" 2>/dev/null
tr '\0' ' ' <"/proc/$qpid/cmdline" >>"$BERTH_HOME/argv3.txt" 2>/dev/null
check "the token is in no log, no argv, no vm.json, no event, no reply to the app" \
	no_token_in "$BERTH_HOME/logs3.txt" "$d/vm.json" "$d/vmm.log" "$d/console.log" "$BERTH_HOME/argv3.txt" \
	"$BERTH_HOME/status3.txt" "$BERTH_HOME/launch3.log" "$BERTH_HOME"/*.json
"$berth" vm stop e2e-github >/dev/null 2>&1

# --- boot 4: two apps declaring github: ---------------------------------------------------
cp -r "$shares/ghprobe" "$shares/ghprobe2"
sed -i 's/^name: ghprobe/name: ghprobe2/' "$shares/ghprobe2/berth.yml"
cp -r "$src/test/e2e/fixtures/echo" "$shares/echo"
"$vmm" run --name e2e-github-two --app "$shares/ghprobe" --app "$shares/ghprobe2" --app "$shares/echo" \
	--egress-allow api.github.com:443 2>/dev/null
wait_state e2e-github-two running
for ((i = 0; i < 100; i++)); do
	control e2e-github-two >"$BERTH_HOME/events4.txt"
	grep -q '"event":"app_ready"' "$BERTH_HOME/events4.txt" && break
	sleep 1
done
check "two apps declaring github:: github_refused with the at-most-one message" grep -qF \
	'"reason":"at most one app may declare a github:* capability when running multiple apps together — found 2: ghprobe, ghprobe2"' \
	"$BERTH_HOME/events4.txt"
check "both are refused, no broker starts, the other app runs" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
refused={e["app"] for e in ev if e.get("event")=="app_refused"}
ready={e["app"] for e in ev if e.get("event")=="app_ready"}
sys.exit(not(refused=={"ghprobe","ghprobe2"} and ready=={"echo"} and not any(e.get("event")=="daemon_started" and e.get("daemon")=="github-api-broker" for e in ev)))' "$BERTH_HOME/events4.txt"
"$berth" vm stop e2e-github-two >/dev/null 2>&1

# --- boot 5: github-assistant, live ---------------------------------------------------------
node "$src/sdk/node/bundle.mjs" "$src/apps/github-assistant" "$shares/github-assistant" >/dev/null
secrets_disk "$BERTH_HOME/live.img" \
	"{\"github-assistant\":{\"GITHUB_TOKEN\":\"$placeholder\",\"GITHUB_REPO\":\"o/r\"}}" \
	"$(python3 -c 'import json,sys; print(json.dumps({"github-api-broker":{"GITHUB_TOKEN":sys.argv[1],"BERTH_GITHUB_UPSTREAM_CA":sys.argv[2]}}))' "$token" "$test_ca")"
"$vmm" run --name e2e-github-live --app "$shares/github-assistant" --egress-allow api.github.com:443 \
	--secrets "$BERTH_HOME/live.img" 2>"$BERTH_HOME/launch5.log"
rm -f "$BERTH_HOME/live.img"
wait_state e2e-github-live running
rpc github-assistant --export get_repo_summary --input '{"repo":"o/r"}' >"$BERTH_HOME/r.json"
check "get_repo_summary through the broker: the repository's description and open issues" \
	test "$(field "$BERTH_HOME/r.json" 'r')" = "{'summary': 'a fake repository', 'open_issues': 7}"
rpc github-assistant --export create_issue --input '{"title":"from the VM","body":"hello"}' >"$BERTH_HOME/r.json"
check "create_issue (github:write:issues) opens the issue in GITHUB_REPO, with the broker's token" python3 -c '
import json,sys
reqs=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"requestline")]
r=reqs[-1]; auth=[v for k,v in r["headers"] if k.lower()=="authorization"]
sys.exit(not(r["requestline"]=="POST /repos/o/r/issues HTTP/1.1" and json.loads(r["body"])=={"title":"from the VM","body":"hello"} and auth==["Bearer "+sys.argv[2]]))' \
	"$work/origin.out" "$token"
"$berth" vm stop e2e-github-live >/dev/null 2>&1
finish
