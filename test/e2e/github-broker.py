#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GitHub API broker binary on this host, without a VM (docs/github.md): a policy file, a
dial socket served by this test in place of berth-init's bridge and berth-vmm's dialer (the
same one-line protocol; it connects to servers on 127.0.0.1), and a fake api.github.com:
HTTPS servers with a CA of this test's own (a good certificate, an expired one, one from an
untrusted CA, one for another name), which record every request. The app's side is played
with plain sockets and Python's ssl, trusting the broker's per-boot CA, and once with Node.

Checks SPEC 11's github-assistant table (/repos/o/r allowed; /user/emails denied naming
github:read:user:emails; /user, /gists, /notifications, /orgs/x, /emojis and traversal
denied), POST /repos/o/r/pulls denied with read-only scopes and the upstream never hit, the
token upstream on allowed requests only (and never from the app) and absent from denied
ones, the log and the broker's environ, CONNECT to other hosts refused, the certificate
directory's modes and no private key in it, bad upstream certificates refused, bodies, and
the log lines. Prints TAP.

The real chain (berth-init, the channel, berth-vmm's dialer, a real app) is
test/e2e/github.sh."""
import json
import os
import secrets
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time

BROKER = os.environ.get("GITHUB_BROKER") or os.path.join(
    os.environ["BERTH_BUILD_DIR"], "src/github-broker/github-api-broker")
results = []
PROCS = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines() or [""]:
            print(f"# {line}", flush=True)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_certs(d):
    """A test CA; api.github.com signed by it (good, and expired); api.github.com from a CA
    nobody trusts; evil.test signed by the test CA."""
    def ca(name):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-days", "2", "-subj", f"/CN={name}", "-keyout", f"{d}/{name}.key",
                "-out", f"{d}/{name}.crt")

    def leaf(name, host, issuer, days):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-subj", f"/CN={host}", "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(f"subjectAltName=DNS:{host}\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{issuer}.crt",
                "-CAkey", f"{d}/{issuer}.key", "-CAcreateserial", "-days", str(days),
                "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")

    ca("testca")
    ca("otherca")
    leaf("good", "api.github.com", "testca", 2)
    leaf("expired", "api.github.com", "testca", -1)
    leaf("untrusted", "api.github.com", "otherca", 2)
    leaf("wrongname", "evil.test", "testca", 2)


class FakeGitHub(threading.Thread):
    """An HTTPS server on 127.0.0.1 with certificate @name: reads one request (head and the
    body its Content-Length or chunked framing gives), records it, answers JSON."""

    def __init__(self, d, name):
        super().__init__(daemon=True)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(f"{d}/{name}.crt", f"{d}/{name}.key")
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.seen = []
        self.tcp_hits = 0
        self.start()

    def run(self):
        while True:
            c, _ = self.sock.accept()
            self.tcp_hits += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, raw):
        # As GitHub's servers: no Nagle delay behind the handshake's session tickets.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            c = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        try:
            c.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                d = c.recv(65536)
                if not d:
                    return
                data += d
            head, body = data.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = [tuple(x.split(": ", 1)) for x in lines[1:]]
            low = {k.lower(): v for k, v in headers}
            if "content-length" in low:
                while len(body) < int(low["content-length"]):
                    body += c.recv(65536)
            elif low.get("transfer-encoding") == "chunked":
                while not body.endswith(b"0\r\n\r\n"):
                    body += c.recv(65536)
            self.seen.append({"requestline": lines[0], "headers": headers,
                              "body": body.decode("latin-1")})
            out = json.dumps({"full_name": "o/r", "open_issues_count": 3,
                              "requestline": lines[0]}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(out) + out)
            c.unwrap()
        except (ssl.SSLError, OSError):
            pass
        finally:
            c.close()


class Dialer(threading.Thread):
    """Serves the dial socket: reads one line and tunnels to the fake server of the moment."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.target = None  # a port, or (code, error)
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
        if isinstance(self.target, tuple):
            c.sendall(json.dumps({"ok": False, "code": self.target[0],
                                  "error": self.target[1]}).encode() + b"\n")
            c.close()
            return
        up = socket.create_connection(("127.0.0.1", self.target))
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
    def __init__(self, tmp, caps, token, upstream_ca, policy=True, extra_env=None):
        self.dir = os.path.join(tmp, "certs")
        os.makedirs(self.dir, mode=0o755, exist_ok=True)
        os.chmod(self.dir, 0o755)  # the broker makes it 0700 itself
        self.policy = os.path.join(tmp, "policy.json")
        if policy:
            with open(self.policy, "w") as f:
                json.dump({"schema": 2, "appName": "gh", "declaredCapabilities": caps,
                           "writePaths": [], "readPaths": ["/usr"], "networkPorts": [8092],
                           "bindPorts": [], "networkUnrestricted": False, "meshPeers": [],
                           "cgroupLimits": {}}, f)
        elif os.path.exists(self.policy):
            os.unlink(self.policy)
        env = {"PATH": "/usr/bin:/bin", "BERTH_GITHUB_POLICY": self.policy,
               "BERTH_GITHUB_DIALER_SOCKET": os.path.join(tmp, "dial.sock"),
               "BERTH_GITHUB_API_BROKER_PORT": "0",
               "BERTH_GITHUB_API_BROKER_CERT_DIR": self.dir,
               "BERTH_GITHUB_UPSTREAM_CA": upstream_ca}
        if token:
            env["GITHUB_TOKEN"] = token
        env.update(extra_env or {})
        self.log = []
        self.p = subprocess.Popen([BROKER], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        PROCS.append(self.p)
        self.port = None
        self.reader = threading.Thread(target=self.read_log, daemon=True)
        self.reader.start()
        deadline = time.time() + 10
        while self.port is None and time.time() < deadline and self.p.poll() is None:
            time.sleep(0.02)

    def read_log(self):
        for line in self.p.stderr:
            self.log.append(line.rstrip("\n"))
            if "listening on 127.0.0.1:" in line:
                self.port = int(line.rsplit(":", 1)[1])

    def events(self):
        return [json.loads(l[len("[github-api-broker] "):]) for l in self.log
                if l.startswith("[github-api-broker] {")]

    def settle(self, pred, timeout=3):
        deadline = time.time() + timeout
        while time.time() < deadline and not pred(self.events()):
            time.sleep(0.02)
        return pred(self.events())

    def raw(self, data, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        got = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except (socket.timeout, ConnectionResetError):
            pass
        s.close()
        return got

    def request(self, method, path, headers=(), body=b"", cafile=None, raw_body=None):
        """The app's side: CONNECT, TLS trusting the broker's CA, one request. Returns
        (status line, {header: value}, body) or an exception's text."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=15)
        try:
            s.sendall(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                d = s.recv(1)
                if not d:
                    return f"closed after {got!r}"
                got += d
            if not got.startswith(b"HTTP/1.1 200 "):
                return f"CONNECT answered {got!r}"
            ctx = ssl.create_default_context(cafile=cafile or os.path.join(self.dir, "ca.crt"))
            t = ctx.wrap_socket(s, server_hostname="api.github.com")
            head = f"{method} {path} HTTP/1.1\r\nHost: api.github.com\r\nUser-Agent: test\r\n"
            for k, v in headers:
                head += f"{k}: {v}\r\n"
            if raw_body is None and body:
                head += f"Content-Length: {len(body)}\r\n"
            t.sendall(head.encode() + b"\r\n" + (raw_body if raw_body is not None else body))
            data = b""
            try:
                while True:
                    d = t.recv(65536)
                    if not d:
                        break
                    data += d
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError):
                pass
            h, _, b = data.partition(b"\r\n\r\n")
            lines = h.decode("latin-1").split("\r\n")
            return lines[0], {x.split(": ", 1)[0].lower(): x.split(": ", 1)[1]
                              for x in lines[1:] if ": " in x}, b
        except Exception as e:  # noqa: BLE001 - the test reports what happened
            return f"{type(e).__name__}: {e}"
        finally:
            s.close()

    def stop(self):
        self.p.terminate()
        return self.p.wait(5)


def message(reply):
    try:
        return json.loads(reply[2])["message"]
    except Exception:  # noqa: BLE001
        return repr(reply)


def main():
    if not os.access(BROKER, os.X_OK):
        print(f"1..0 # SKIP {BROKER} is not built")
        return 0
    if not shutil.which("openssl"):
        print("1..0 # SKIP needs the openssl command to make the test's certificates")
        return 0
    tmp = tempfile.mkdtemp(prefix="github-broker-test.")
    pki = os.path.join(tmp, "pki")
    os.makedirs(pki)
    make_certs(pki)
    test_ca = open(f"{pki}/testca.crt").read()
    good = FakeGitHub(pki, "good")
    expired = FakeGitHub(pki, "expired")
    untrusted = FakeGitHub(pki, "untrusted")
    wrongname = FakeGitHub(pki, "wrongname")
    dialer = Dialer(os.path.join(tmp, "dial.sock"))
    dialer.target = good.port
    token = "ghp_" + secrets.token_hex(18)
    caps = ["github:read:repos", "github:read:issues", "network:connect:8092"]
    b = Broker(tmp, caps, token, test_ca)
    tap(b.port, "the broker says where it listens", "\n".join(b.log))
    tap(any("policy " in l and "2 github: capabilities" in l for l in b.log),
        "and how many github: capabilities the policy declares", "\n".join(b.log))

    # --- the certificate directory -------------------------------------------------------
    st = os.stat(b.dir)
    tap(stat.S_IMODE(st.st_mode) == 0o700, "the certificate directory is made 0700",
        oct(st.st_mode))
    names = sorted(os.listdir(b.dir))
    tap(names == ["ca-bundle.crt", "ca.crt"], "it holds ca.crt and ca-bundle.crt, nothing else", names)
    tap(all(stat.S_IMODE(os.stat(os.path.join(b.dir, n)).st_mode) == 0o644 for n in names),
        "both 0644", [oct(os.stat(os.path.join(b.dir, n)).st_mode) for n in names])
    text = "".join(open(os.path.join(b.dir, n)).read() for n in names)
    tap("PRIVATE KEY" not in text, "no private key is ever written: the CA's is gone once the leaf is signed")
    dump = subprocess.run(["openssl", "x509", "-noout", "-subject", "-ext",
                           "basicConstraints,nameConstraints", "-in", os.path.join(b.dir, "ca.crt")],
                          capture_output=True, text=True).stdout
    tap("Berth Local MITM CA" in dump and "CA:TRUE" in dump and "DNS:api.github.com" in dump,
        "the CA is 'Berth Local MITM CA', and may vouch for api.github.com only", dump)
    bundle = open(os.path.join(b.dir, "ca-bundle.crt")).read()
    tap(bundle.endswith(open(os.path.join(b.dir, "ca.crt")).read()) and bundle.count("BEGIN CERTIFICATE") > 1,
        "ca-bundle.crt is the system's roots followed by the CA", bundle.count("BEGIN CERTIFICATE"))
    environ = open(f"/proc/{b.p.pid}/environ", "rb").read()
    tap(token.encode() not in environ, "the token is wiped from the broker's own environ")

    # --- allowed ---------------------------------------------------------------------------
    r = b.request("GET", "/repos/o/r", headers=[("Authorization", "token berth-placeholder")])
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 200 OK" and json.loads(r[2])["full_name"] == "o/r",
        "GET /repos/o/r with github:read:repos: allowed, GitHub's answer comes back", r)
    up = good.seen[-1] if good.seen else {}
    auth = [v for k, v in up.get("headers", []) if k.lower() == "authorization"]
    tap(auth == [f"Bearer {token}"], "upstream it carries the broker's token, and only that: the app's Authorization is gone", auth)
    tap(up.get("requestline") == "GET /repos/o/r HTTP/1.1" and ("Host", "api.github.com") in up.get("headers", []),
        "with the path checked and Host api.github.com", up)
    tap(isinstance(r, tuple) and r[1].get("connection") == "close" and "keep-alive" not in r[1],
        "the response ends the connection: Connection: close, GitHub's Keep-Alive gone", r[1] if isinstance(r, tuple) else r)
    tap(dialer.lines[-1:] == [b'{"op":"dial","host":"api.github.com","port":443}\n'],
        "one dial line for api.github.com:443, the dialer's protocol", dialer.lines[-1:])
    r = b.request("GET", "/repos/o/r/issues/../issues?state=open")
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 200 OK" and good.seen[-1]["requestline"] ==
        "GET /repos/o/r/issues?state=open HTTP/1.1",
        "the normalised path is what goes upstream", good.seen[-1]["requestline"])

    # --- denied ----------------------------------------------------------------------------
    hits, dials = len(good.seen), len(dialer.lines)
    table = [
        ("GET", "/user/emails", "denied: no declared capability covers github:read:user:emails"),
        ("GET", "/user", "denied: no declared capability covers github:read:user"),
        ("GET", "/gists", "denied: no declared capability covers github:read:gists"),
        ("GET", "/notifications", "denied: no declared capability covers github:read:notifications"),
        ("GET", "/orgs/x", "denied: no declared capability covers github:read:orgs"),
        ("GET", "/emojis", "denied: no route covers GET /emojis — this broker maps paths to capabilities explicitly and denies by default"),
        ("GET", "/repos/o/r/../../../user/emails", "denied: no declared capability covers github:read:user:emails"),
        ("GET", "/repos/o/r/../../../../user/emails", "denied: no route covers GET /repos/o/r/../../../../user/emails — this broker maps paths to capabilities explicitly and denies by default"),
        ("GET", "/repos/o/r/%2e%2e/%2e%2e/%2e%2e/user", "denied: no declared capability covers github:read:user"),
        ("GET", "/repos/o%2fr/x/../../../user", "denied: no route covers GET /repos/o%2fr/x/../../../user — this broker maps paths to capabilities explicitly and denies by default"),
        ("POST", "/repos/o/r/pulls", "denied: no declared capability covers github:write:pulls"),
    ]
    for method, path, want in table:
        r = b.request(method, path, headers=[("Authorization", "token berth-placeholder")],
                      body=b'{"title":"x"}' if method == "POST" else b"")
        tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 403 Forbidden" and
            r[1].get("content-type", "").startswith("application/json") and message(r) == want,
            f"{method} {path}: 403, {want[:60]}...", r)
    tap(len(good.seen) == hits and len(dialer.lines) == dials,
        "no denied request reached the dialer or GitHub (POST /repos/o/r/pulls included)",
        (len(good.seen) - hits, len(dialer.lines) - dials))
    tap(b.settle(lambda ev: {"event": "denied", "method": "GET", "path": "/user/emails",
                             "requested": "github:read:user:emails"} in ev and
                 {"event": "denied", "method": "GET", "path": "/emojis", "requested": "(no route)"} in ev and
                 {"event": "allowed", "method": "GET", "path": "/repos/o/r", "requested": "github:read:repos"} in ev),
        "one JSON line per decision: allowed, denied with the capability, denied with (no route)",
        "\n".join(b.log[-20:]))
    # The broker's log is a pipe of its own: its last lines may come a moment after the answers.
    count = lambda ev: len([e for e in ev if e.get("event") in ("allowed", "denied")])
    b.settle(lambda ev: count(ev) >= 2 + len(table))
    time.sleep(0.2)  # and nothing more after them
    tap(count(b.events()) == 2 + len(table), "exactly one line per request", count(b.events()))

    # --- CONNECT ---------------------------------------------------------------------------
    got = b.raw(b"CONNECT github.com:443 HTTP/1.1\r\n\r\n")
    tap(got == b"HTTP/1.1 403 Forbidden\r\n\r\n", "CONNECT to another host: exactly HTTP/1.1 403 Forbidden", got)
    got = b.raw(b"CONNECT api.github.com:80 HTTP/1.1\r\n\r\n")
    tap(got == b"HTTP/1.1 403 Forbidden\r\n\r\n", "CONNECT to api.github.com on another port: 403", got)
    got = b.raw(b"CONNECT API.GitHub.com:443 HTTP/1.1\r\n\r\n")
    tap(got.startswith(b"HTTP/1.1 200 Connection Established"), "the host is matched lowercased", got[:60])
    got = b.raw(b"CONNECT 140.82.112.6:443 HTTP/1.1\r\n\r\n")
    tap(got == b"HTTP/1.1 403 Forbidden\r\n\r\n", "CONNECT to an address, even GitHub's: 403", got)
    tap(b.settle(lambda ev: {"event": "connect_denied", "host": "github.com", "port": 443} in ev),
        "connect_denied is logged with host and port", "\n".join(b.log[-5:]))
    got = b.raw(b"GET http://api.github.com/repos/o/r HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
    tap(got.startswith(b"HTTP/1.1 400 ") and got.endswith(b"this broker only accepts CONNECT requests"),
        "a request that is not CONNECT: 400 this broker only accepts CONNECT requests", got)
    got = b.raw(b"GET /repos/o/r HTTP/1.1\r\n\r\n")
    tap(got.endswith(b"this broker only accepts CONNECT requests"), "origin-form too", got)
    r = b.request("GET", "/repos/o/r", cafile=f"{pki}/otherca.crt")
    tap(isinstance(r, str) and "CERTIFICATE_VERIFY_FAILED" in r,
        "an app that does not trust the broker's CA gets no answer it could believe", r)
    tap(b.settle(lambda ev: any(e.get("event") == "client_tls_failed" for e in ev)),
        "and the broker logs client_tls_failed")

    # --- bodies ----------------------------------------------------------------------------
    b.stop()
    caps_w = ["github:read:repos", "github:write:issues"]
    b = Broker(tmp, caps_w, token, test_ca)
    r = b.request("POST", "/repos/o/r/issues", body=b'{"title":"t","body":"b"}')
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 200 OK" and good.seen[-1]["body"] == '{"title":"t","body":"b"}',
        "POST /repos/o/r/issues with github:write:issues: the body goes upstream as framed", r)
    r = b.request("POST", "/repos/o/r/issues", headers=[("Transfer-Encoding", "chunked")],
                  raw_body=b"5\r\nhello\r\n0\r\n\r\n")
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 200 OK" and good.seen[-1]["body"] == "5\r\nhello\r\n0\r\n\r\n" and
        ("Transfer-Encoding", "chunked") in good.seen[-1]["headers"],
        "a chunked body too, re-announced", good.seen[-1])
    r = b.request("POST", "/repos/o/r/issues", headers=[("Transfer-Encoding", "chunked"), ("Content-Length", "3")],
                  raw_body=b"abc")
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 400 Bad Request" and
        "both Content-Length and Transfer-Encoding" in message(r),
        "a smuggling head is refused inside the tunnel too (400)", r)

    # --- upstream certificates ---------------------------------------------------------
    for server, name, want in [(expired, "expired", "certificate has expired"),
                               (untrusted, "from a CA the broker does not trust", "unable to get local issuer certificate"),
                               (wrongname, "for another name", "certificate verify failed")]:
        hits = len(server.seen)
        dialer.target = server.port
        r = b.request("GET", "/repos/o/r")
        tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 502 Bad Gateway" and want in message(r) and
            len(server.seen) == hits,
            f"an upstream certificate {name}: refused (502, {want}), no request sent", r)
    tap(b.settle(lambda ev: sum(e.get("event") == "upstream_tls_failed" for e in ev) == 3),
        "each logged as upstream_tls_failed with its reason", "\n".join(b.log[-6:]))
    dialer.target = ("denied", 'egress denied: "api.github.com:443" is not covered by this VM\'s egress allowlist')
    r = b.request("GET", "/repos/o/r")
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 403 Forbidden" and "egress allowlist" in message(r),
        "the host dialer's refusal comes back as 403 with its reason", r)
    dialer.target = good.port

    # --- the token never leaks -----------------------------------------------------------
    b.stop()
    log_text = "\n".join(b.log)
    tap(token not in log_text, "the token is in no log line")
    denied_up = [s for s in good.seen if "pulls" in s["requestline"] or "user" in s["requestline"]]
    tap(not denied_up, "and never went upstream with a denied request", denied_up)

    # --- no token, no policy ------------------------------------------------------------
    b = Broker(tmp, caps, None, test_ca)
    r = b.request("GET", "/repos/o/r", headers=[("Authorization", "token app-own")])
    auth = [v for k, v in good.seen[-1]["headers"] if k.lower() == "authorization"]
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 200 OK" and auth == [],
        "without GITHUB_TOKEN requests go without credentials: the app's own are not passed on", auth)
    b.stop()
    b = Broker(tmp, caps, token, test_ca, policy=False)
    r = b.request("GET", "/repos/o/r")
    tap(isinstance(r, tuple) and r[0] == "HTTP/1.1 403 Forbidden" and any("every request will be denied" in l for l in b.log),
        "an unreadable policy denies everything, and says so", r)
    b.stop()
    b = Broker(tmp, caps, "bad token\r\nX: 1", test_ca)
    status = b.p.wait(5)
    b.reader.join(5)
    tap(status == 1 and any("cannot go in an Authorization header" in l for l in b.log),
        "a token that cannot be a header value stops the broker, saying why", b.log[-2:])

    # --- Node, as the app would be -----------------------------------------------------
    node = shutil.which("node")
    if node:
        b = Broker(tmp, caps, token, test_ca)
        script = r"""
const http = require('node:http'), https = require('node:https');
const req = http.request({host: '127.0.0.1', port: +process.argv[1], method: 'CONNECT', path: 'api.github.com:443'});
req.on('connect', (res, socket) => {
  https.get({host: 'api.github.com', path: '/repos/o/r', socket, agent: false,
             headers: {authorization: 'token placeholder'}}, (r) => {
    let body = ''; r.on('data', (d) => body += d);
    r.on('end', () => { console.log(JSON.stringify({status: r.statusCode, body})); });
  }).on('error', (e) => console.log(JSON.stringify({error: e.message})));
});
req.on('error', (e) => console.log(JSON.stringify({error: e.message})));
req.end();
"""
        out = subprocess.run([node, "-e", script, str(b.port)], capture_output=True, text=True, timeout=30,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                  "NODE_EXTRA_CA_CERTS": os.path.join(b.dir, "ca.crt")})
        try:
            res = json.loads(out.stdout.strip().splitlines()[-1])
        except Exception:  # noqa: BLE001
            res = {"error": out.stdout + out.stderr}
        tap(res.get("status") == 200 and "o/r" in res.get("body", ""),
            "Node trusts the broker's CA through NODE_EXTRA_CA_CERTS alone", res)
        b.stop()
    else:
        tap(True, "# SKIP no node on this host")

    print(f"1..{len(results)}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
