#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Egress end to end (docs/egress.md): the egress broker in the guest, berth-init's dial
# socket, the channel and berth-vmm's dialer, against servers in a network namespace this
# test makes (a veth pair, 198.51.100.1 <-> 198.51.100.2; plain HTTP on :80, HTTPS with a
# throwaway self-signed certificate on :443 and :8443). Names resolve through a test
# /etc/hosts bind-mounted in this script's own mount namespace, so only the processes it
# starts see it; BERTH_VMM_EGRESS_TEST_ALLOW_CIDR admits the documentation block the
# servers live on (the dialer refuses it otherwise).
#
# Boot 1, berth dev on test/e2e/fixtures/outbound (the CLI computes --egress-allow): HTTPS
# through CONNECT, plain HTTP (hop-by-hop headers gone, Host forced), fetch() through the
# SDK's configureEgressProxy(), the port-scoped pattern; an undeclared host and port, a
# name that resolves to a private address or an IPv4-mapped one, an unresolvable name, a
# request that is not a proxy request, each refused with its reply; the dial socket out of
# the app's reach; the broker's and the dialer's log lines.
# Boot 2, berth-vmm run with two apps: "wide" declares network:host:* while --egress-allow
# names only allowed.test, so the broker (the guest-side check) lets sneaky.test through
# and the host dialer refuses it: a guest that got past the broker still reaches only
# what the host allows. The broker refuses internal IP literals (private, loopback,
# link-local, metadata, IPv4-mapped IPv6) itself. "plain" does not declare
# network:connect:8090: Landlock refuses its connect to the broker.
# Boot 3: two apps declaring egress are both refused (egress_refused), the third starts.
. "$(dirname "$0")/lib.sh"
if [ -z "${BERTH_EGRESS_TEST_INNER:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for a network namespace and bind mounts"
	command -v ip >/dev/null || skip_all "needs iproute2 (ip)"
	require_artifacts
	exec env BERTH_EGRESS_TEST_INNER=1 unshare -m --propagation private "$0" "$@"
fi
new_home
plan 48
tag=$$
ns=berth-egr-$tag
vhost=begr${tag}h
vns=begr${tag}n
# EGRESS_KEEP=DIR keeps a copy of the test's files (logs, replies) for a look afterwards.
cleanup() {
	kill -9 ${dev_pid:-} 2>/dev/null
	for name in berth-dev-outbound e2e-egress e2e-egress-two; do
		"$berth" vm stop "$name" >/dev/null 2>&1
		pid=$(vm_pid "$name")
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	done
	[ -n "${origin_pid:-}" ] && kill "$origin_pid" 2>/dev/null
	ip link del "$vhost" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	[ -n "${EGRESS_KEEP:-}" ] && cp -r "$BERTH_HOME" "$EGRESS_KEEP"; rm -rf "$BERTH_HOME"
}
trap cleanup EXIT
install_artifacts || { diag < "$BERTH_HOME/install.log"; exit 1; }
export BERTH_VMM_EGRESS_TEST_ALLOW_CIDR=198.51.100.0/24

# --- the far end ---------------------------------------------------------------------------
work=$BERTH_HOME/egress
mkdir -p "$work"
netns_up
egress_origin_up "$work" || { not_ok "the origin servers start"; diag < "$work/origin.out"; exit 1; }
cat >"$work/hosts" <<EOF
127.0.0.1 localhost
198.51.100.2 allowed.test
198.51.100.2 sneaky.test
198.51.100.2 other.test
10.0.0.1 private.test
::ffff:10.0.0.1 mapped.test
EOF
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$work/resolv.conf"
mount --bind "$work/hosts" /etc/hosts
mount --bind "$work/resolv.conf" /etc/resolv.conf

rpc() { "$berth" rpc "$@" 2>&1; }
# field FILE EXPR: a Python expression over the JSON in FILE (as r).
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
ca=$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$work/cert.pem")
# Reply status line and body of a broker reply in the JSON of an export.
status_of() { field "$1" 'r["reply"].split("\r\n")[0]'; }
body_of() { field "$1" 'r["reply"].split("\r\n\r\n", 1)[1] if "\r\n\r\n" in r["reply"] else ""'; }
# reply_is FILE STATUS [BODY_PREFIX]: the reply's status line, and how its body starts.
reply_is() {
	local st body
	st=$(status_of "$1")
	body=$(body_of "$1")
	[ "$st" = "$2" ] || { echo "# status line: $st"; return 1; }
	[ -z "${3:-}" ] || [[ "$body" == "$3"* ]] || { echo "# body: $body"; return 1; }
}
vmm_events() { grep -h '"event":"egress"' "$BERTH_HOME/run/vm/$1/vmm.log" 2>/dev/null; }

# --- boot 1: berth dev ---------------------------------------------------------------------
app=$BERTH_HOME/outbound
cp -r "$src/test/e2e/fixtures/outbound" "$app"
bad=$BERTH_HOME/badhost
cp -r "$app" "$bad"
sed -i 's/^name: outbound/name: badhost/; s/network:host:nowhere.test/network:host:no_where.test/' "$bad/berth.yml"
(cd "$bad" && "$berth" dev >"$BERTH_HOME/bad.log" 2>&1)
check "a scope the dialer cannot take is refused before anything boots" sh -c "
	grep -q '\"network:host:no_where.test\" in badhost.s berth.yml cannot be reached from the VM' '$BERTH_HOME/bad.log' &&
	test ! -e '$BERTH_HOME/run/vm/berth-dev-badhost'"

log=$BERTH_HOME/dev.log
if start_dev "$app" "$log"; then ok "berth dev boots an app that declares network:host:"; else not_ok "berth dev boots an app that declares network:host:"; diag < "$log"; fi
check "it says which hosts the dialer will allow" \
	grep -q 'egress: allowed.test,allowed.test:8443,private.test,mapped.test,nowhere.test (berth-vmm checks every connection against these)' "$log"
check "berth-vmm got exactly the manifest's scopes as --egress-allow" python3 -c '
import json,sys; e=json.load(open(sys.argv[1]))["endpoints"]["egress"]
sys.exit(e["allow"] != ["allowed.test","allowed.test:8443","private.test","mapped.test","nowhere.test"] or e["port"] != 1026)' \
	"$BERTH_HOME/run/vm/berth-dev-outbound/vm.json"
control berth-dev-outbound >"$BERTH_HOME/events.txt"
check "the broker started under agent-init as uid 9002, before the app" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
names=[e.get("event") for e in ev]
d=[e for e in ev if e.get("event")=="daemon_started" and e.get("daemon")=="egress-broker"]
sys.exit(not(d and d[0]["uid"]==9002 and d[0]["app"]=="outbound" and names.index("daemon_started") < names.index("app_started")))' "$BERTH_HOME/events.txt"
# berth dev streams the guest log; its output is where the broker's lines are read.
check "confined: Landlock FullyEnforced, bind 8090 only, no TCP connect, writes only /dev/null and /tmp/berth-egress" \
	grep -q '^\[egress-broker\] {"source":"agent-init","event":"capability_policy_applied",.*"app":"berth-egress","writePaths":\["/dev/null","/tmp/berth-egress"\],"readPaths":\["/usr","/run/berth/egress"\],"networkPorts":\[\],"networkUnrestricted":false,"bindPorts":\[8090\],.*"ruleset":"FullyEnforced"' "$log"
check "the broker's listening line is in the log" grep -q '^\[egress-broker\] \[egress-broker\] listening on 127.0.0.1:8090$' "$log"
rpc outbound --export env >"$BERTH_HOME/env.json"
check "the egress app is told BERTH_EGRESS_PROXY_URL=http://127.0.0.1:8090" \
	test "$(field "$BERTH_HOME/env.json" 'r["proxy"]')" = "http://127.0.0.1:8090"

rpc outbound --export tunnel --input "{\"host\":\"allowed.test\",\"port\":443,\"path\":\"/over-tls\",\"ca\":$ca}" >"$BERTH_HOME/tls.json"
check "CONNECT allowed.test:443: 200 Connection Established" \
	test "$(field "$BERTH_HOME/tls.json" 'repr(r.get("connectReply"))')" = "'HTTP/1.1 200 Connection Established\\r\\n\\r\\n'"
check "and TLS through the tunnel reaches the HTTPS server, certificate verified" python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); body=json.loads(r["response"].split("\r\n\r\n",1)[1])
sys.exit(not(r["tls"] and r["response"].startswith("HTTP/1.1 200") and body["server"]=="198.51.100.2:443" and body["tls"] and body["requestline"]=="GET /over-tls HTTP/1.1"))' "$BERTH_HOME/tls.json"
rpc outbound --export tunnel --input "{\"host\":\"allowed.test\",\"port\":8443,\"path\":\"/port\",\"ca\":$ca}" >"$BERTH_HOME/tls8443.json"
check "network:host:allowed.test:8443 opens port 8443" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r.get("tls") and "\"server\": \"198.51.100.2:8443\"" in r["response"]))' "$BERTH_HOME/tls8443.json"
rpc outbound --export proxy_get --input '{"url":"http://allowed.test/plain?x=1"}' >"$BERTH_HOME/plain.json"
check "plain HTTP with an absolute URI reaches allowed.test:80" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))["reply"]; b=json.loads(r.split("\r\n\r\n",1)[1])
sys.exit(not(r.startswith("HTTP/1.1 200") and b["server"]=="198.51.100.2:80" and b["requestline"]=="GET /plain?x=1 HTTP/1.1"))' "$BERTH_HOME/plain.json"
check "hop-by-hop headers (and what Connection names) are gone, Host is the checked target" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))["reply"]; h=json.loads(r.split("\r\n\r\n",1)[1])["headers"]
sys.exit(h != [["X-Kept","kept"],["Host","allowed.test"],["Connection","close"]])' "$BERTH_HOME/plain.json"
rpc outbound --export fetch_text --input '{"url":"http://allowed.test/fetched"}' >"$BERTH_HOME/fetch.json"
check "fetch() through the SDK's configureEgressProxy() works" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
sys.exit(not(r.get("proxied") and r.get("status")==200 and "GET /fetched HTTP/1.1" in r.get("body","")))' "$BERTH_HOME/fetch.json"

rpc outbound --export raw --input '{"data":"CONNECT other.test:443 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "CONNECT to an undeclared host: exactly HTTP/1.1 403 Forbidden" test "$(field "$BERTH_HOME/r.json" 'repr(r["reply"])')" = "'HTTP/1.1 403 Forbidden\\r\\n\\r\\n'"
rpc outbound --export proxy_get --input '{"url":"http://other.test/"}' >"$BERTH_HOME/r.json"
check "plain HTTP to an undeclared host: 403 with SPEC 6.1's text" test "$(body_of "$BERTH_HOME/r.json")" = \
	'egress denied: "other.test:80" is not covered by any declared browser:navigate:<pattern>/network:host:<pattern> capability'
rpc outbound --export raw --input '{"data":"CONNECT allowed.test:22 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "CONNECT to an undeclared port of a declared host: 403" test "$(status_of "$BERTH_HOME/r.json")" = "HTTP/1.1 403 Forbidden"
rpc outbound --export proxy_get --input '{"url":"http://allowed.test:8080/"}' >"$BERTH_HOME/r.json"
check "plain HTTP to an undeclared port: 403 naming host:port" test "$(body_of "$BERTH_HOME/r.json")" = \
	'egress denied: "allowed.test:8080" is not covered by any declared browser:navigate:<pattern>/network:host:<pattern> capability'
rpc outbound --export proxy_get --input '{"url":"http://private.test/"}' >"$BERTH_HOME/r.json"
check "a declared name that resolves to 10.0.0.1: the host refuses, 403 with its reason" \
	reply_is "$BERTH_HOME/r.json" "HTTP/1.1 403 Forbidden" 'egress denied: "private.test" resolves to 10.0.0.1, which is private (10.0.0.0/8)'
rpc outbound --export raw --input '{"data":"CONNECT private.test:443 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "and over CONNECT, exactly HTTP/1.1 403 Forbidden" test "$(field "$BERTH_HOME/r.json" 'repr(r["reply"])')" = "'HTTP/1.1 403 Forbidden\\r\\n\\r\\n'"
rpc outbound --export proxy_get --input '{"url":"http://mapped.test/"}' >"$BERTH_HOME/r.json"
check "a name that resolves to ::ffff:10.0.0.1 (IPv4-mapped private): 403" \
	reply_is "$BERTH_HOME/r.json" "HTTP/1.1 403 Forbidden" 'egress denied: "mapped.test" resolves to ::ffff:10.0.0.1, which is IPv4-mapped private'
rpc outbound --export proxy_get --input '{"url":"http://nowhere.test/"}' >"$BERTH_HOME/r.json"
check "a name that does not resolve: 502 could not resolve" \
	reply_is "$BERTH_HOME/r.json" "HTTP/1.1 502 Bad Gateway" 'egress failed: could not resolve "nowhere.test"'
rpc outbound --export raw --input '{"data":"GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "a request that is not a proxy request: 400 with SPEC 6.1's text" \
	reply_is "$BERTH_HOME/r.json" "HTTP/1.1 400 Bad Request" "bad request: expected an absolute-URI (proxy request)"
rpc outbound --export probe_dial_socket >"$BERTH_HOME/r.json"
check "the app cannot reach the dial socket itself (EACCES)" test "$(field "$BERTH_HOME/r.json" 'r.get("error")')" = EACCES

check "the broker logs navigate_allowed and navigate_denied as SPEC 6.1 writes them" sh -c "
	grep -qF '[egress-broker] {\"event\":\"navigate_allowed\",\"host\":\"allowed.test\",\"port\":443,\"viaUpstreamProxy\":false}' '$log' &&
	grep -qF '[egress-broker] {\"event\":\"navigate_denied\",\"host\":\"other.test\",\"port\":443,\"viaUpstreamProxy\":false}' '$log'"
vmm_events berth-dev-outbound >"$BERTH_HOME/vmm-egress.txt"
check "the host dialer logged each dial: allowed ones with their address, refused ones with their reason" sh -c "
	grep -q '\"decision\":\"allowed\",\"host\":\"allowed.test\",\"port\":443,\"address\":\"198.51.100.2\"' '$BERTH_HOME/vmm-egress.txt' &&
	grep -q '\"decision\":\"denied\",\"host\":\"private.test\",\"port\":80,\"address\":\"10.0.0.1\"' '$BERTH_HOME/vmm-egress.txt'"
check "requests the broker refused never reached the host" sh -c "! grep -q 'other.test' '$BERTH_HOME/vmm-egress.txt'"
stop_dev
check "berth dev stops the VM" test ! -e "$BERTH_HOME/run/vm/berth-dev-outbound"

# --- boot 2: a guest-side check bypassed; an app without network:connect:8090 --------------
shares=$BERTH_HOME/shares
mkdir -p "$shares"
node "$src/sdk/node/bundle.mjs" "$app" "$shares/wide" >/dev/null
sed -i 's/^name: outbound/name: wide/; s/^  - network:host:allowed.test$/  - network:host:*/' "$shares/wide/berth.yml"
cp -r "$shares/wide" "$shares/plain"
python3 - "$shares/plain/berth.yml" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read().replace("name: wide", "name: plain")
s = re.sub(r"  - network:host:[^\n]*\n", "", s).replace("network:connect:8090", "network:connect:8091")
open(p, "w").write(s)
PY
"$vmm" run --name e2e-egress --app "$shares/wide" --app "$shares/plain" --egress-allow allowed.test 2>"$BERTH_HOME/launch2.log"
if wait_state e2e-egress running && rpc plain --export env >/dev/null && rpc wide --export env >"$BERTH_HOME/env2.json"; then
	ok "a VM with wide (network:host:*) and plain (no network:connect:8090) boots"
else
	not_ok "a VM with wide (network:host:*) and plain (no network:connect:8090) boots"
	diag < "$BERTH_HOME/launch2.log"
	tail -30 "$BERTH_HOME/run/vm/e2e-egress/console.log" 2>/dev/null | diag
fi
rpc wide --export proxy_get --input '{"url":"http://allowed.test/still"}' >"$BERTH_HOME/r.json"
check "wide reaches allowed.test" test "$(status_of "$BERTH_HOME/r.json")" = "HTTP/1.1 200 OK"
rpc wide --export proxy_get --input '{"url":"http://sneaky.test/"}' >"$BERTH_HOME/r.json"
check "sneaky.test passes the broker (network:host:*) but the host refuses it: not in --egress-allow" \
	reply_is "$BERTH_HOME/r.json" "HTTP/1.1 403 Forbidden" "egress denied: \"sneaky.test:80\" is not covered by this VM's egress allowlist"
"$berth" vm logs e2e-egress >"$BERTH_HOME/logs2.txt" 2>&1
check "the broker had allowed it, the dialer denied it" sh -c "
	grep -qF '{\"event\":\"navigate_allowed\",\"host\":\"sneaky.test\",\"port\":80,\"viaUpstreamProxy\":false}' '$BERTH_HOME/logs2.txt' &&
	grep -q '\"decision\":\"denied\",\"host\":\"sneaky.test\",\"port\":80' '$BERTH_HOME/run/vm/e2e-egress/vmm.log'"
rpc wide --export raw --input '{"data":"CONNECT sneaky.test:443 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "over CONNECT too" test "$(field "$BERTH_HOME/r.json" 'repr(r["reply"])')" = "'HTTP/1.1 403 Forbidden\\r\\n\\r\\n'"
for target in 10.0.0.1 127.0.0.1 169.254.169.254 192.168.1.1 172.17.0.1 100.64.0.1 '[::ffff:10.0.0.1]' '[::1]'; do
	shown=${target#[}
	shown=${shown%]}
	rpc wide --export proxy_get --input "{\"url\":\"http://$target/\"}" >"$BERTH_HOME/r.json"
	check "http://$target/ is refused by the broker as internal" test "$(body_of "$BERTH_HOME/r.json")" = \
		"egress denied: \"$shown\" resolves to $shown, which is loopback, private, link-local, or otherwise internal"
done
rpc wide --export raw --input '{"data":"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n"}' >"$BERTH_HOME/r.json"
check "CONNECT to the metadata address: exactly HTTP/1.1 403 Forbidden" test "$(field "$BERTH_HOME/r.json" 'repr(r["reply"])')" = "'HTTP/1.1 403 Forbidden\\r\\n\\r\\n'"
check "none of the literals reached the host" sh -c "! grep -E '\"host\":\"(10.0.0.1|127.0.0.1|169.254.169.254|192.168.1.1|172.17.0.1|100.64.0.1|::ffff:10.0.0.1|::1)\"' '$BERTH_HOME/run/vm/e2e-egress/vmm.log'"
rpc plain --export probe_broker >"$BERTH_HOME/r.json"
check "plain (no network:connect:8090) cannot connect to the broker: Landlock says EACCES" \
	test "$(field "$BERTH_HOME/r.json" '(r["connected"], r.get("error"))')" = "(False, 'EACCES')"
rpc plain --export env >"$BERTH_HOME/r.json"
check "and is not told the proxy URL" test "$(field "$BERTH_HOME/r.json" 'r["proxy"]')" = None
rpc plain --export probe_dial_socket >"$BERTH_HOME/r.json"
check "nor can it use the dial socket (EACCES)" test "$(field "$BERTH_HOME/r.json" 'r.get("error")')" = EACCES
"$berth" vm stop e2e-egress >/dev/null 2>&1

# --- boot 3: two egress apps ---------------------------------------------------------------
cp -r "$shares/wide" "$shares/wide2"
sed -i 's/^name: wide/name: wide2/' "$shares/wide2/berth.yml"
"$vmm" run --name e2e-egress-two --app "$shares/wide" --app "$shares/wide2" --app "$shares/plain" 2>/dev/null
wait_state e2e-egress-two running && rpc plain --export env >/dev/null
control e2e-egress-two >"$BERTH_HOME/events3.txt"
check "two apps declaring egress: egress_refused with SPEC 6.1's message" grep -qF \
	'"apps":["wide","wide2"],"event":"egress_refused","reason":"at most one app may declare a browser:navigate:*/network:host:* capability when running multiple apps together — found 2: wide, wide2"' \
	"$BERTH_HOME/events3.txt"
check "both are refused, no broker starts, the other app runs" python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
refused={e["app"] for e in ev if e.get("event")=="app_refused"}
ready={e["app"] for e in ev if e.get("event")=="app_ready"}
sys.exit(not(refused=={"wide","wide2"} and ready=={"plain"} and not any(e.get("event")=="daemon_started" and e.get("daemon")=="egress-broker" for e in ev)))' "$BERTH_HOME/events3.txt"
"$berth" vm stop e2e-egress-two >/dev/null 2>&1
finish
