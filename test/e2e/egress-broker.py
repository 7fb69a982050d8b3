#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The egress broker binary on this host, without a VM: a policy file, a dial socket served
by this test in place of berth-init's bridge and berth-vmm's dialer (it speaks the same
one-line protocol and really connects to servers on 127.0.0.1), and an app's side played
with plain sockets. Checks the replies of SPEC 6.1 word for word, the dial lines, header
stripping, body framing, the caps and timeouts, and the log lines. Prints TAP.

The real chain (berth-init, the channel, berth-vmm's dialer) is test/e2e/egress.sh."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BROKER = os.environ.get("EGRESS_BROKER") or os.path.join(
    os.environ["BERTH_BUILD_DIR"], "src/egress-broker/egress-broker")
results = []
BROKERS = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines() or [""]:
            print(f"# {line}", flush=True)


class Origin(threading.Thread):
    """A TCP server on 127.0.0.1 that records what it gets. mode "echo" sends back every
    byte; mode "http" reads one request head (and Content-Length or chunked body as raw
    bytes until the client stops for 0.3 s) and answers with what it saw as JSON."""

    def __init__(self, mode):
        super().__init__(daemon=True)
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.seen = []
        self.start()

    def run(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            if self.mode == "echo":
                while True:
                    d = c.recv(65536)
                    if not d:
                        c.shutdown(socket.SHUT_WR)
                        break
                    c.sendall(d)
                return
            data = b""
            c.settimeout(0.3)
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    data += d
            except socket.timeout:
                pass
            self.seen.append(data)
            body = json.dumps({"raw": data.decode("latin-1")}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            c.close()
        except OSError:
            pass


class Dialer(threading.Thread):
    """Serves the dial socket: reads one line, answers by the host named."""

    def __init__(self, path, targets):
        super().__init__(daemon=True)
        self.targets = targets  # host -> ("ok", port) | (code, error) | "silent"
        self.lines = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(64)
        self.start()

    def run(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        line = b""
        while not line.endswith(b"\n"):
            d = c.recv(1)
            if not d:
                return
            line += d
        self.lines.append(line)
        req = json.loads(line)
        what = self.targets.get(req["host"], ("denied", "not in --egress-allow"))
        if what == "silent":
            time.sleep(60)
            return
        if what[0] != "ok":
            c.sendall(json.dumps({"ok": False, "code": what[0], "error": what[1]}).encode() + b"\n")
            c.close()
            return
        up = socket.create_connection(("127.0.0.1", what[1]))
        c.sendall(b'{"ok":true,"address":"127.0.0.1"}\n')

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        b.shutdown(socket.SHUT_WR)
                        return
                    b.sendall(d)
            except OSError:
                pass

        t = threading.Thread(target=pump, args=(up, c), daemon=True)
        t.start()
        pump(c, up)
        t.join()
        c.close()
        up.close()


class Broker:
    def __init__(self, tmp, caps, extra_env=None, policy=True):
        self.policy = os.path.join(tmp, "policy.json")
        if policy:
            with open(self.policy, "w") as f:
                # The policy file as agent-init reads it (schema 2; every key present).
                json.dump({"schema": 2, "appName": "net", "declaredCapabilities": caps,
                           "writePaths": [], "readPaths": ["/usr"], "networkPorts": [],
                           "bindPorts": [], "networkUnrestricted": False, "meshPeers": [],
                           "cgroupLimits": {}}, f)
        env = {"PATH": "/usr/bin:/bin", "BERTH_EGRESS_POLICY": self.policy,
               "BERTH_EGRESS_DIALER_SOCKET": os.path.join(tmp, "dial.sock"),
               "BERTH_EGRESS_BROKER_PORT": "0"}
        env.update(extra_env or {})
        self.log = []
        self.p = subprocess.Popen([BROKER], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        BROKERS.append(self.p)
        self.port = None
        threading.Thread(target=self.read_log, daemon=True).start()
        deadline = time.time() + 10
        while self.port is None and time.time() < deadline:
            time.sleep(0.02)

    def read_log(self):
        for line in self.p.stderr:
            self.log.append(line.rstrip("\n"))
            if "listening on 127.0.0.1:" in line:
                self.port = int(line.rsplit(":", 1)[1])

    def events(self):
        out = []
        for line in self.log:
            if line.startswith("[egress-broker] {"):
                out.append(json.loads(line[len("[egress-broker] "):]))
        return out

    def settle(self, pred, timeout=3):
        """The log is read by a thread: wait until @pred(events) holds, or the timeout."""
        deadline = time.time() + timeout
        while time.time() < deadline and not pred(self.events()):
            time.sleep(0.02)
        return pred(self.events())

    def ask(self, data, timeout=10, read_all=True):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        got = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
                if not read_all:
                    break
        except socket.timeout:
            pass
        s.close()
        return got

    def stop(self):
        self.p.terminate()
        return self.p.wait(5)


def body_of(reply):
    return reply.split(b"\r\n\r\n", 1)[1].decode() if b"\r\n\r\n" in reply else None


def main():
    if not os.access(BROKER, os.X_OK):
        print(f"1..0 # SKIP {BROKER} is not built")
        return 0
    tmp = tempfile.mkdtemp(prefix="egress-broker-test.")
    echo = Origin("echo")
    web = Origin("http")
    dialer = Dialer(os.path.join(tmp, "dial.sock"), {
        "ok.test": ("ok", echo.port), "web.test": ("ok", web.port),
        "private.test": ("denied", 'egress denied: "private.test" resolves to 10.0.0.1, which is private (10.0.0.0/8); the dialer never connects to internal addresses'),
        "nowhere.test": ("unresolved", "Name or service not known"),
        "down.test": ("unreachable", "Connection refused"),
        "full.test": ("busy", "egress busy: this VM already has 64 egress connections open\r\nX-Injected: 1"),
        "odd.test": ("bad_request", "no line within 5 s"),
        "slow.test": "silent",
    })
    caps = ["network:host:ok.test", "network:host:web.test:*", "network:host:ok.test:5432",
            "network:host:*.wild.test", "network:host:private.test", "network:host:nowhere.test",
            "network:host:down.test", "network:host:full.test", "network:host:slow.test",
            "network:host:sneaky.test", "network:host:odd.test", "network:host:10.0.0.1", "network:host:127.0.0.1:*",
            "network:host:169.254.169.254", "network:host:192.168.1.1",
            "network:host:172.17.0.1", "network:host:100.64.0.1", "network:host:0x7f.1",
            "network:host:::ffff:10.0.0.1", "network:host:::1:443", "network:host:api.github.com",
            "github:read:repos", "network:connect:8090"]
    b = Broker(tmp, caps, {"BERTH_EGRESS_HEAD_TIMEOUT_MS": "700", "BERTH_EGRESS_MAX_CONNS": "8"})
    tap(b.port, "the broker says where it listens", "\n".join(b.log))
    tap(any("policy " in l and "21 host patterns" in l for l in b.log),
        "and how many host patterns the policy holds", "\n".join(b.log))

    # --- CONNECT ---------------------------------------------------------------------------
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.sendall(b"CONNECT ok.test:443 HTTP/1.1\r\nHost: ok.test:443\r\n\r\nearly bytes|")
    got = b""
    while b"early bytes|" not in got:
        got += s.recv(4096)
    tap(got.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\n"),
        "CONNECT to a declared host: 200 Connection Established", got)
    tap(dialer.lines and dialer.lines[-1] == b'{"op":"dial","host":"ok.test","port":443}\n',
        "one dial line, exactly the protocol's", dialer.lines[-1:] )
    tap(got.endswith(b"early bytes|"), "bytes sent right behind the head go through first", got)
    rest = bytearray()

    def drain():
        while True:
            d = s.recv(65536)
            if not d:
                break
            rest.extend(d)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    s.sendall(b"x" * 3000000)
    s.shutdown(socket.SHUT_WR)
    reader.join(20)
    tap(rest == b"x" * 3000000 and not reader.is_alive(),
        "3 MB round trip through the tunnel, then a clean half-close both ways",
        len(rest))
    s.close()

    r = b.ask(b"CONNECT ok.test:5432 HTTP/1.1\r\n\r\n", read_all=False)
    tap(r == b"HTTP/1.1 200 Connection Established\r\n\r\n", "a port-scoped pattern allows that port", r)
    r = b.ask(b"CONNECT ok.test:22 HTTP/1.1\r\n\r\n")
    tap(r == b"HTTP/1.1 403 Forbidden\r\n\r\n", "an undeclared port: exactly HTTP/1.1 403 Forbidden", r)
    n = len(dialer.lines)
    r = b.ask(b"CONNECT evil-not-declared.test:443 HTTP/1.1\r\n\r\n")
    tap(r == b"HTTP/1.1 403 Forbidden\r\n\r\n" and len(dialer.lines) == n,
        "an undeclared host: 403, and the dialer never hears of it", r)
    r = b.ask(b"CONNECT a.b.wild.test HTTP/1.1\r\n\r\n", read_all=False)
    tap(dialer.lines[-1] == b'{"op":"dial","host":"a.b.wild.test","port":443}\n',
        "a bare CONNECT host means port 443, and '*' spans dots", dialer.lines[-1])
    r = b.ask(b"CONNECT OK.Test:443 HTTP/1.1\r\n\r\n", read_all=False)
    tap(r.startswith(b"HTTP/1.1 200") and dialer.lines[-1] == b'{"op":"dial","host":"ok.test","port":443}\n',
        "names are matched and dialled lowercased", dialer.lines[-1])

    n = len(dialer.lines)
    for target in [b"10.0.0.1:443", b"127.0.0.1:8090", b"169.254.169.254:80", b"192.168.1.1:443",
                   b"172.17.0.1:443", b"100.64.0.1:443", b"0x7f.1:443", b"[::ffff:10.0.0.1]:443",
                   b"[::1]:443"]:
        r = b.ask(b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
        tap(r == b"HTTP/1.1 403 Forbidden\r\n\r\n", f"CONNECT {target.decode()} (declared, internal): 403", r)
    tap(len(dialer.lines) == n, "none of them reached the dialer")
    b.settle(lambda ev: len([e for e in ev if e["event"] == "blocked_address"]) >= 9)
    blocked = [e for e in b.events() if e["event"] == "blocked_address"]
    tap(len(blocked) == 9 and blocked[0] == {"event": "blocked_address", "host": "10.0.0.1", "port": 443,
                                             "address": "10.0.0.1"},
        "each logged as blocked_address", blocked[:1])
    r = b.ask(b"CONNECT api.github.com:443 HTTP/1.1\r\n\r\n")
    b.settle(lambda ev: ev[-1]["event"] == "navigate_denied" and ev[-1]["host"] == "api.github.com")
    tap(r == b"HTTP/1.1 403 Forbidden\r\n\r\n" and b.events()[-2]["event"] == "dedicated_broker_host",
        "api.github.com is left to the GitHub broker when github:* is declared", b.events()[-2:])

    # --- the dialer's answers --------------------------------------------------------------
    for host, want in [("private.test", b"HTTP/1.1 403 Forbidden\r\n\r\n"),
                       ("nowhere.test", b"HTTP/1.1 502 Bad Gateway\r\n\r\n"),
                       ("down.test", b"HTTP/1.1 502 Bad Gateway\r\n\r\n"),
                       ("full.test", b"HTTP/1.1 503 Service Unavailable\r\n\r\n"),
                       ("sneaky.test", b"HTTP/1.1 403 Forbidden\r\n\r\n")]:
        r = b.ask(b"CONNECT " + host.encode() + b":443 HTTP/1.1\r\n\r\n")
        status = want.decode().split("\r")[0]
        tap(r == want, f"CONNECT {host}, which the dialer refuses: {status}", r)
    get = lambda host, extra=b"": b.ask(b"GET http://" + host + b"/ HTTP/1.1\r\n" + extra + b"\r\n")
    r = get(b"private.test")
    tap(r.startswith(b"HTTP/1.1 403 Forbidden\r\n") and body_of(r) ==
        'egress denied: "private.test" resolves to 10.0.0.1, which is private (10.0.0.0/8); the dialer never connects to internal addresses',
        "plain HTTP: the host's denial is the reply, word for word", r)
    r = get(b"sneaky.test")
    tap(body_of(r) == "egress denied by the host: not in --egress-allow",
        "a reason not in the dialer's own words gets a prefix", r)
    r = get(b"odd.test")
    tap(r.startswith(b"HTTP/1.1 502") and body_of(r) ==
        "egress failed: the host dialer refused the request (bad_request: no line within 5 s)",
        "bad_request: 502 naming the code", r)
    r = get(b"nowhere.test")
    tap(body_of(r) == 'egress failed: could not resolve "nowhere.test" (Name or service not known)',
        "an unresolvable name: 502 could not resolve", r)
    r = get(b"down.test")
    tap(r.startswith(b"HTTP/1.1 502") and body_of(r) ==
        'egress failed: could not connect to "down.test:80" (Connection refused)', "unreachable: 502", r)
    r = get(b"full.test")
    tap(r.startswith(b"HTTP/1.1 503") and body_of(r) ==
        "egress busy: this VM already has 64 egress connections open??X-Injected: 1",
        "busy: 503, with line breaks in the host's text made harmless", r)
    b.settle(lambda ev: ev[-1]["event"] == "dial_refused" and ev[-1]["host"] == "full.test")
    refused = [e for e in b.events() if e["event"] == "dial_refused"]
    tap(refused and refused[-1] == {"event": "dial_refused", "host": "full.test", "port": 80, "code": "busy",
                                    "error": "egress busy: this VM already has 64 egress connections open??X-Injected: 1"},
        "the dialer's refusals are logged with their code", refused[-1:])

    # --- plain HTTP ------------------------------------------------------------------------
    r = b.ask(b"GET http://Web.test:8080/p?q=1 HTTP/1.1\r\nHost: evil.test\r\n"
              b"Connection: keep-alive, X-Private\r\nX-Private: secret\r\nProxy-Authorization: Basic eDp5\r\n"
              b"Proxy-Connection: keep-alive\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\n"
              b"Accept: text/plain\r\n\r\n")
    seen = json.loads(body_of(r))["raw"] if r.startswith(b"HTTP/1.1 200") else ""
    tap(seen == "GET /p?q=1 HTTP/1.1\r\nAccept: text/plain\r\nHost: web.test:8080\r\nConnection: close\r\n\r\n",
        "plain HTTP: hop-by-hop headers (and those Connection names) dropped, Host forced", seen or r)
    r = b.ask(b"POST http://web.test/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nhello\r\n0\r\n\r\nGET http://web.test/smuggled HTTP/1.1\r\n\r\n")
    seen = json.loads(body_of(r))["raw"] if r.startswith(b"HTTP/1.1 200") else ""
    tap(seen.endswith("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        "a chunked body is passed on as it is, and nothing after it", seen or r)
    r = b.ask(b"POST http://web.test/up HTTP/1.0\r\nContent-Length: 3\r\n\r\nabcGET /x HTTP/1.0\r\n\r\n")
    seen = json.loads(body_of(r))["raw"] if r.startswith(b"HTTP/1.1 200") else ""
    tap(seen.endswith("Content-Length: 3\r\nHost: web.test\r\nConnection: close\r\n\r\nabc"),
        "a Content-Length body likewise", seen or r)
    r = get(b"evil.test")
    tap(r.startswith(b"HTTP/1.1 403 Forbidden\r\n") and body_of(r) ==
        'egress denied: "evil.test:80" is not covered by any declared browser:navigate:<pattern>/network:host:<pattern> capability',
        "plain HTTP to an undeclared host: 403 with SPEC 6.1's text", r)
    r = get(b"10.0.0.1")
    tap(body_of(r) == 'egress denied: "10.0.0.1" resolves to 10.0.0.1, which is loopback, private, link-local, or otherwise internal',
        "plain HTTP to an internal literal: 403 with SPEC 6.1's text", r)
    r = get(b"[::ffff:10.0.0.1]")
    tap(body_of(r) == 'egress denied: "::ffff:10.0.0.1" resolves to ::ffff:10.0.0.1, which is loopback, private, link-local, or otherwise internal',
        "an IPv4-mapped IPv6 literal likewise", r)
    r = get(b"[2001:db8::1]")
    tap(body_of(r) == 'egress denied: "[2001:db8::1]:80" is not covered by any declared browser:navigate:<pattern>/network:host:<pattern> capability',
        "an undeclared IPv6 literal is shown in brackets", r)
    r = get(b"api.github.com")
    tap(body_of(r) == 'egress denied: "api.github.com" is enforced by a dedicated broker in this container, which is the only route to it',
        "the dedicated-broker text", r)
    r = b.ask(b"GET /relative HTTP/1.1\r\nHost: web.test\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 400 Bad Request\r\n") and body_of(r) == "bad request: expected an absolute-URI (proxy request)",
        "a request that is not a proxy request: 400 with SPEC 6.1's text", r)
    r = b.ask(b"GET https://web.test/ HTTP/1.1\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 400") and "CONNECT" in (body_of(r) or ""),
        "an https:// URI is refused with a pointer to CONNECT", r)
    r = b.ask(b"GET http://a_b.test/ HTTP/1.1\r\n\r\n")
    tap(body_of(r) == 'bad request: "a_b.test" is not a valid host name', "an invalid host name: 400", r)
    r = b.ask(b"POST http://web.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 400") and "both Content-Length and Transfer-Encoding" in body_of(r),
        "Content-Length with Transfer-Encoding is refused (request smuggling)", r)

    # --- caps and timeouts -----------------------------------------------------------------
    r = b.ask(b"GET http://web.test/ HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 431 "), "a head over 16 KiB: 431", r[:60])
    r = b.ask(b"GET http://web.test/ HTTP/1.1\r\n" + b"".join(b"X%d: y\r\n" % i for i in range(101)) + b"\r\n")
    tap(r.startswith(b"HTTP/1.1 431 "), "over 100 header lines: 431", r[:60])
    t0 = time.time()
    r = b.ask(b"GET http://web.test/ HTTP/1.1\r\n")
    tap(r.startswith(b"HTTP/1.1 400") and 0.5 < time.time() - t0 < 5 and "in time" in body_of(r),
        "a head that never ends is cut off by the handshake timeout", r)
    held = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(8)]
    time.sleep(0.2)
    r = b.ask(b"CONNECT ok.test:443 HTTP/1.1\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 503 Service Unavailable"), "past the connection cap: 503 at once", r)
    tap(b.settle(lambda ev: any(e["event"] == "too_many_connections" for e in ev)), "and a log line says so")
    for h in held:
        h.close()
    time.sleep(0.3)

    ev = b.events()
    allowed = [e for e in ev if e["event"] == "navigate_allowed"]
    denied = [e for e in ev if e["event"] == "navigate_denied"]
    tap(allowed and allowed[0] == {"event": "navigate_allowed", "host": "ok.test", "port": 443, "viaUpstreamProxy": False}
        and {"event": "navigate_denied", "host": "evil-not-declared.test", "port": 443, "viaUpstreamProxy": False} in denied,
        "navigate_allowed and navigate_denied lines as SPEC 6.1 writes them", (allowed[:1], denied[:2]))
    tap(b.stop() == 0, "SIGTERM stops it cleanly")

    # --- no dialer, no policy --------------------------------------------------------------
    os.unlink(os.path.join(tmp, "dial.sock"))
    b = Broker(tmp, caps)
    r = b.ask(b"GET http://web.test/ HTTP/1.1\r\n\r\n")
    tap(r.startswith(b"HTTP/1.1 502") and "cannot reach the host dialer" in body_of(r),
        "without a dial socket: 502 saying the dialer cannot be reached", r)
    b.stop()
    os.unlink(b.policy)
    b = Broker(tmp, caps, policy=False)
    b.settle(lambda ev: any("WARNING" in l for l in b.log))
    tap(any("WARNING: cannot read the policy" in l and "every request will be denied" in l for l in b.log),
        "an unreadable policy is reported", b.log)
    r = b.ask(b"CONNECT ok.test:443 HTTP/1.1\r\n\r\n")
    tap(r == b"HTTP/1.1 403 Forbidden\r\n\r\n", "and denies everything", r)
    b.stop()

    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for p in BROKERS:
            if p.poll() is None:
                p.kill()
