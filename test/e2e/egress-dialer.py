#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""berth-vmm's host egress dialer (docs/egress.md), end to end without the guest broker:
berth-vmm boots a real VM but connects its channel to this test (--channel-connect),
which plays the guest and opens streams to port 1026 itself. The far end is a network
namespace made here (a veth pair, 198.51.100.1 <-> 198.51.100.2) with an HTTP server, an
echo server and a DNS server that never answers; 198.51.100.1, the host's end, is one of
the host's own addresses, where this test listens on 0.0.0.0 as a host service would. berth-vmm runs in its own mount namespace
with a test /etc/hosts and /etc/resolv.conf bind-mounted over the host's, so that names
like allowed.test resolve to the namespace and internal.test to 10.0.0.1. Prints TAP."""
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ["BERTH_SOURCE_ROOT"]
BLD = os.environ["BERTH_BUILD_DIR"]
ARTIFACTS = os.environ.get("BERTH_TEST_ARTIFACTS", os.path.join(SRC, "out/artifacts"))
VMM = os.path.join(BLD, "src/berth-vmm/berth-vmm")
BERTH = os.path.join(BLD, "src/berth/berth")
SERVERS = os.path.join(SRC, "test/e2e/fixtures/egress-servers.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mux_guest import EGRESS, Guest  # noqa: E402
HOST_ADDR, NS_ADDR = "198.51.100.1", "198.51.100.2"
PLAN = 43
results = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines()[:20]:
            print(f"# {line}", flush=True)


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Netns:
    def __init__(self):
        tag = os.getpid() % 100000
        self.ns, self.host_if, self.ns_if = f"berth-egress-{tag}", f"beg{tag}h", f"beg{tag}n"
        self.servers = None

    def setup(self):
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        sh("ip", "link", "set", self.ns_if, "netns", self.ns)
        sh("ip", "addr", "add", HOST_ADDR + "/24", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        sh("ip", "-n", self.ns, "addr", "add", NS_ADDR + "/24", "dev", self.ns_if)
        sh("ip", "-n", self.ns, "link", "set", self.ns_if, "up")
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        self.servers = subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable, SERVERS, NS_ADDR],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.servers.stdout.readline().strip() != "ready":
            raise RuntimeError("the servers in the namespace did not start")

    def close(self):
        if self.servers:
            self.servers.kill()
            self.servers.wait()
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)


HOSTS = f"""127.0.0.1 localhost
{NS_ADDR} allowed.test
{NS_ADDR} other.test
10.0.0.1 internal.test
::ffff:10.0.0.1 mapped.test
{NS_ADDR} mixed.test
10.0.0.2 mixed.test
{HOST_ADDR} self.test
{NS_ADDR} selfmixed.test
{HOST_ADDR} selfmixed.test
"""
ALLOW = ["allowed.test", "ALLOWED.test:7777", "other.test:7777", "internal.test", "mapped.test",
         "mixed.test:7777", "nodns.test", "10.0.0.1:80", "127.0.0.1:22",
         "169.254.169.254,100.64.0.1", "[::ffff:10.0.0.1]", f"{NS_ADDR}:7777",
         "self.test:7777", "selfmixed.test:7777", f"{HOST_ADDR}:7777"]


class Vmm:
    """berth-vmm run, detached, in a mount namespace with the test's hosts and resolv.conf."""

    def __init__(self, home, name):
        self.home, self.name = home, name
        self.run_dir = os.path.join(home, "run/vm", name)
        self.sock = os.path.join(home, f"guest-{name}.sock")
        self.guest = None

    def start(self, test_cidr, max_conns=3):
        home = self.home
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.sock)
        self.listener.listen(1)
        env = dict(os.environ, BERTH_HOME=home)
        env.pop("BERTH_VMM_EGRESS_TEST_ALLOW_CIDR", None)
        if test_cidr:
            env["BERTH_VMM_EGRESS_TEST_ALLOW_CIDR"] = test_cidr
        args = [VMM, "run", "--name", self.name, "--channel-connect", self.sock, "--egress-max-conns", str(max_conns)]
        for a in ALLOW:
            args += ["--egress-allow", a]
        mount = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"'
        self.launch = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh",
                                      os.path.join(home, "hosts"), os.path.join(home, "resolv.conf")] + args,
                                     env=env, capture_output=True, text=True, timeout=120)
        self.guest = Guest(self.listener) if self.launch.returncode == 0 else None

    def vm_json(self):
        with open(os.path.join(self.run_dir, "vm.json")) as f:
            return json.load(f)

    def log(self):
        with open(os.path.join(self.run_dir, "vmm.log"), errors="replace") as f:
            return f.read()

    def log_events(self):
        out = []
        for line in self.log().splitlines():
            if line.startswith('{"source":"berth-vmm"'):
                out.append(json.loads(line))
        return out

    def stop(self):
        """QEMU ends (killed: it inherits SIGTERM blocked); berth-vmm writes the evidence and exits."""
        try:
            doc = self.vm_json()
            pid = int(open(os.path.join(self.run_dir, "berth-vmm.pid")).read())
        except (OSError, ValueError):
            return None
        try:
            os.kill(doc["enginePid"], signal.SIGKILL)
        except (KeyError, ProcessLookupError):
            pass
        for _ in range(300):
            if not os.path.exists(f"/proc/{pid}"):
                return doc
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        return doc

    def kill(self):
        try:
            pid = int(open(os.path.join(self.run_dir, "berth-vmm.pid")).read())
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def refused(reply, code, *says):
    return reply.get("ok") is False and reply.get("code") == code and all(s in reply.get("error", "") for s in says)


def main():
    print(f"1..{PLAN}", flush=True)
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root for network namespaces and bind mounts")
        return 0
    for f in ("vmlinux", "initrd.cpio", "rootfs.erofs"):
        if not os.path.exists(os.path.join(ARTIFACTS, f)):
            print(f"# no {ARTIFACTS}/{f}: run scripts/build-artifacts.sh")
            return 1
    home = tempfile.mkdtemp(prefix="berth-egress.")
    netns = vmm = vmm2 = None
    try:
        inst = subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot", "--vmm", VMM],
                              env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True)
        if inst.returncode != 0:
            raise RuntimeError("cannot install the artifacts: " + inst.stderr)
        with open(os.path.join(home, "hosts"), "w") as f:
            f.write(HOSTS)
        with open(os.path.join(home, "resolv.conf"), "w") as f:
            f.write(f"nameserver {NS_ADDR}\noptions timeout:8 attempts:1\n")
        netns = Netns()
        netns.setup()

        vmm = Vmm(home, "egress")
        vmm.start("198.51.100.0/24")
        tap(vmm.guest is not None, "berth-vmm run --egress-allow ... starts, and its channel reaches the test",
            vmm.launch.stderr)
        endpoints = next((json.loads(l) for l in vmm.launch.stderr.splitlines() if '"event":"endpoints"' in l), {})
        eg = endpoints.get("endpoints", {}).get("egress") or {}
        tap(eg.get("port") == 1026 and eg.get("maxConns") == 3 and eg.get("testAllowCidr") == "198.51.100.0/24"
            and "allowed.test:7777" in eg.get("allow", []) and "[::ffff:10.0.0.1]" in eg.get("allow", [])
            and "169.254.169.254" in eg.get("allow", []) and "100.64.0.1" in eg.get("allow", [])
            and len(eg.get("allow", [])) == 16,
            "the launcher reports the egress endpoint: port, normalised allowlist (a comma list split), "
            "cap, test setting", eg)
        tap(vmm.vm_json()["endpoints"]["egress"] == eg, "vm.json records the same")
        log = vmm.log()
        tap("WARNING: BERTH_VMM_EGRESS_TEST_ALLOW_CIDR=198.51.100.0/24 is set" in log
            and "WARNING: BERTH_VMM_EGRESS_TEST_ALLOW_CIDR" in vmm.launch.stderr,
            "the test-only setting is warned about on stderr and in vmm.log")
        tap("the egress dialer may connect to TCP ports 22,80,443,7777" in log
            and "host sandbox: landlock+seccomp applied" in log,
            "berth-vmm is confined, with TCP connect to exactly the allowlist's ports", log)
        g = vmm.guest

        # Allowed: HTTP and an echo, bytes both ways.
        sid, r = g.dial("allowed.test", 80)
        tap(r == {"ok": True, "address": NS_ADDR}, "allowed.test:80 is dialed: {ok:true, address}", r)
        g.write(sid, b"GET /hello HTTP/1.0\r\nHost: allowed.test\r\n\r\n")
        st = g.wait(sid, lambda s: s.closed or s.reset, timeout=20)
        tap(b"200 OK" in st.data and b"berth egress test: /hello for allowed.test" in st.data and st.closed,
            "an HTTP request goes through the tunnel and the whole answer comes back, then CLOSE", st.data[-300:])
        g.close(sid)
        payload = os.urandom(300 * 1024)
        sid, r = g.dial("allowed.test", 7777)
        echo_id = sid
        g.write(sid, payload)
        g.close(sid)
        st = g.wait(sid, lambda s: s.closed or s.reset, timeout=30)
        body = st.data.partition(b"\n")[2]
        tap(r.get("ok") is True and body == payload and st.closed,
            "300 KiB go up and come back byte for byte; the half-close passes both ways",
            f"reply {r}, got {len(body)} bytes")
        sid, r = g.dial(NS_ADDR, 7777)
        tap(r == {"ok": True, "address": NS_ADDR}, "an allowed IP literal is dialed as it is", r)
        g.close(sid)
        # Bytes sent right behind the request line are not lost.
        sid = g.open()
        g.write(sid, b'{"op":"dial","host":"allowed.test","port":7777}\nearly bytes')
        st = g.wait(sid, lambda s: b"early bytes" in s.data or s.reset, timeout=20)
        tap(st.data.endswith(b"\nearly bytes"), "bytes written right behind the request line are delivered first", st.data)
        g.close(sid)

        # Denied by the allowlist.
        _, r = g.dial("other.test", 80)
        tap(refused(r, "denied", '"other.test:80" is not covered', "network:host:"),
            "an undeclared host is denied, and the error says how to declare it", r)
        _, r = g.dial("allowed.test", 8080)
        tap(refused(r, "denied", '"allowed.test:8080" is not covered'), "an undeclared port is denied", r)
        _, r = g.dial("evil.allowed.test", 443)
        tap(refused(r, "denied", "not covered"), "a pattern without '*' covers no subdomain", r)

        # Denied by the address, although the pattern covers it.
        for host, port, why in (("10.0.0.1", 80, "private (10.0.0.0/8)"), ("127.0.0.1", 22, "loopback"),
                                ("169.254.169.254", 80, "link-local"), ("100.64.0.1", 443, "carrier-grade NAT")):
            _, r = g.dial(host, port)
            tap(refused(r, "denied", f"{host} is {why}"), f"the literal {host} is denied as {why.split(' (')[0]}", r)
        _, r = g.dial("internal.test", 443)
        tap(refused(r, "denied", '"internal.test" resolves to 10.0.0.1, which is private'),
            "a name that resolves to an internal address is denied", r)
        _, r = g.dial("::ffff:10.0.0.1", 443)
        tap(refused(r, "denied", "IPv4-mapped private"), "the literal ::ffff:10.0.0.1 is denied", r)
        _, r = g.dial("[::ffff:10.0.0.1]", 80)
        tap(refused(r, "denied", "IPv4-mapped private"), "and so is [::ffff:10.0.0.1] in brackets", r)
        _, r = g.dial("mapped.test", 443)
        tap(refused(r, "denied", '"mapped.test" resolves to ::ffff:10.0.0.1', "IPv4-mapped private"),
            "a name that resolves to ::ffff:10.0.0.1 is denied", r)
        _, r = g.dial("mixed.test", 7777)
        tap(refused(r, "denied", "resolves to 10.0.0.2"),
            "a name with one public and one internal address is denied (any internal answer)", r)

        # The host's own addresses: a service listening on 0.0.0.0 there is not the guest's
        # to reach, although the test setting admits the block the address is in.
        own = socket.socket()
        own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        own.bind(("0.0.0.0", 7777))
        own.listen(8)
        own.settimeout(0.5)
        sid, r = g.dial("self.test", 7777)
        g.close(sid)
        tap(refused(r, "denied", f'"self.test" resolves to {HOST_ADDR}', "this host's own address",
                    "never connects to the host it runs on"),
            "a name that resolves to one of the host's own addresses is denied", r)
        sid, r = g.dial(HOST_ADDR, 7777)
        g.close(sid)
        tap(refused(r, "denied", f"{HOST_ADDR} is this host's own address (on {netns.host_if})"),
            "the literal of one of the host's own addresses is denied, although a pattern names it", r)
        sid, r = g.dial("selfmixed.test", 7777)
        g.close(sid)
        tap(refused(r, "denied", f"resolves to {HOST_ADDR}", "this host's own address"),
            "a name with one answer elsewhere and one of the host's own is denied", r)
        try:
            conn, peer = own.accept()
            conn.close()
            accepted = peer
        except socket.timeout:
            accepted = None
        own.close()
        tap(accepted is None, "and the host's service listening on 0.0.0.0 saw no connection", accepted)

        # Failures.
        t0 = time.time()
        _, r = g.dial("nodns.test", 80)
        took = time.time() - t0
        tap(refused(r, "unresolved", "longer than 5 s") and 4.5 <= took < 8,
            f"a name whose DNS never answers is unresolved after the 5 s timeout ({took:.1f} s)", r)
        _, r = g.dial("allowed.test", 443)
        tap(refused(r, "unreachable", "198.51.100.2", "Connection refused"),
            "a port where nothing listens is unreachable", r)

        # Bad requests.
        sid = g.open()
        g.write(sid, b"hello\n")
        r = g.reply(sid)[0]
        st = g.wait(sid, lambda s: s.closed or s.reset)
        tap(refused(r, "bad_request", "not a JSON object") and st.closed,
            "a malformed line is a bad_request, and the stream is half-closed after it", r)
        sid = g.open()
        g.write(sid, b'{"op":"dial","host":"allowed.test","port":80,"pad":"' + b"x" * 2000)
        r = g.reply(sid)[0]
        tap(refused(r, "bad_request", "1024 bytes"), "a line over 1 KiB is a bad_request", r)
        sid = g.open()
        g.write(sid, b'{"op":"dial","host":"a..b/c","port":80}\n')
        tap(refused(g.reply(sid)[0], "bad_request", "A-Za-z0-9"), "a host outside [A-Za-z0-9.-] is a bad_request")
        sid = g.open()
        g.write(sid, b'{"op":"dial","host":"127.1","port":22}\n')
        tap(refused(g.reply(sid)[0], "bad_request", "dotted quad"), "a short numeric IPv4 form is a bad_request")
        t0 = time.time()
        sid = g.open()
        r = g.reply(sid, timeout=15)[0]
        took = time.time() - t0
        tap(refused(r, "bad_request", "within 5 s") and 4.5 <= took < 8,
            f"no line within 5 s is a bad_request ({took:.1f} s)", r)

        # The cap: 3 tunnels.
        held = []
        for _ in range(3):
            sid, r = g.dial("allowed.test", 7777)
            held.append((sid, r.get("ok")))
        _, r = g.dial("allowed.test", 7777)
        tap(all(ok for _, ok in held) and refused(r, "busy", "--egress-max-conns"),
            "with 3 tunnels open (--egress-max-conns 3) the next dial is busy", (held, r))
        g.close(held[0][0])
        g.wait(held[0][0], lambda s: s.closed or s.reset)
        time.sleep(0.2)
        sid, r = g.dial("allowed.test", 7777)
        tap(r.get("ok") is True, "once one closes, a new dial goes through", r)
        for s, _ in held[1:] + [(sid, None)]:
            g.close(s)

        # vmm.log
        time.sleep(0.5)
        events = vmm.log_events()
        decisions = [e for e in events if e.get("event") == "egress"]
        closed = {e["id"]: e for e in events if e.get("event") == "egress_closed"}
        keys = ["source", "event", "id", "decision", "host", "port", "address", "reason"]
        allowed = [e for e in decisions if e["decision"] == "allowed"]
        tap(decisions and all([k for k in e if k != "code"] == keys for e in decisions),
            "vmm.log has one egress line per dial with source, event, id, decision, host, port, address, reason",
            decisions[:2])
        tap(any(e["decision"] == "allowed" and e["host"] == "allowed.test" and e["address"] == NS_ADDR
                and "allowed.test:7777" in e["reason"] for e in allowed)
            and any(e["decision"] == "denied" and e["host"] == "internal.test" and e["address"] == "10.0.0.1"
                    for e in decisions)
            and any(e["decision"] == "failed" and e.get("code") == "bad_request" and e["host"] is None
                    for e in decisions),
            "allowed, denied and failed decisions are logged with their host, address and reason")
        echo_log = [e for e in allowed if e["port"] == 7777]
        ids = {e["id"] for e in echo_log}
        tap(any(closed.get(i, {}).get("bytesUp") == len(payload) and closed[i].get("bytesDown") == len(payload)
                for i in ids),
            "the echo tunnel's egress_closed line counts 300 KiB up and 300 KiB down", list(closed.values())[:4])
        tap(all(e["id"] in closed for e in allowed) and all(
            list(c) == ["source", "event", "id", "bytesUp", "bytesDown"] for c in closed.values()),
            "every tunnel logs egress_closed with bytesUp and bytesDown", list(closed.values())[:2])

        doc = vmm.stop()
        boot = doc["bootId"] if doc else "?"
        try:
            with open(os.path.join(home, "runs", boot, "evidence.json")) as f:
                ev = json.load(f)
            ev_eg = ev["vm"]["endpoints"]["egress"]
        except (OSError, KeyError, ValueError) as e:
            ev_eg = repr(e)
        tap(isinstance(ev_eg, dict) and ev_eg.get("allow") == eg.get("allow")
            and ev_eg.get("testAllowCidr") == "198.51.100.0/24",
            "the boot evidence records the allowlist and the test setting", ev_eg)
        vmm = None

        # Without the test setting the namespace's address is what it is: documentation.
        vmm2 = Vmm(home, "egress-strict")
        vmm2.start(None)
        tap(vmm2.guest is not None, "berth-vmm starts again without BERTH_VMM_EGRESS_TEST_ALLOW_CIDR",
            vmm2.launch.stderr)
        _, r = vmm2.guest.dial("allowed.test", 7777)
        tap(refused(r, "denied", "198.51.100.2, which is documentation (198.51.100.0/24)"),
            "without the setting even the allowed test host is denied: the setting is what admits it", r)
        eg2 = vmm2.vm_json()["endpoints"]["egress"]
        tap("testAllowCidr" not in eg2 and "BERTH_VMM_EGRESS_TEST_ALLOW_CIDR" not in vmm2.log(),
            "and nothing records or warns about a test setting", eg2)
        vmm2.stop()
        vmm2 = None
    except Exception as e:  # a failed step fails the rest
        print(f"# {type(e).__name__}: {e}", flush=True)
    finally:
        while len(results) < PLAN:
            tap(False, "not reached")
        for v in (vmm, vmm2):
            if v:
                v.kill()
        if netns:
            netns.close()
        if not os.environ.get("BERTH_TEST_KEEP"):
            subprocess.run(["rm", "-rf", home])
        else:
            print(f"# kept {home}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
