#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""apps/browser-native on a real VM with the browser layer (docs/browser.md).

A test host in a network namespace (a veth pair, 198.51.100.1 <-> 198.51.100.2) serves
pages as allowed.test and blocked.test, and logs every request (fixtures/browser-origin.py);
the names resolve through a test /etc/hosts bind-mounted in this test's own mount
namespace, and BERTH_VMM_EGRESS_TEST_ALLOW_CIDR admits the block the host lives on.

berth dev, on a pseudo-terminal, runs a copy of apps/browser-native whose berth.yml names
allowed.test only, with test/e2e/fixtures/procprobe beside it to look at the guest's /proc:
  - the first browser sandbox installs the layer, with its notice, into a fresh home;
  - navigate to http://allowed.test/ (the real broker, channel and dialer), get_page_text,
    a click that follows the link, a screenshot that decodes as a PNG of the viewport and
    one saved under /workspace, and search against the test host's result page;
  - an undeclared host is refused with the broker's reply, and the page's image from it
    never reaches the test host;
  - Chromium's processes run as the app's uid with no_new_privs and seccomp, each a
    descendant of the app's confined process (so in its Landlock domain); navigate refuses
    a file: URL;
  - another app of the VM is refused by X without the display's cookie;
  - nothing listens on a CDP port, and Chromium on no port at all;
  - noVNC through the published port: the page, then VNC authentication offered and None
    not, a wrong password refused and the right one let in to a 1280x800 display;
  - the password is in no argv in the guest, nor in vm.json, berth-vmm's log, the console
    or the boot evidence;
then, with the VM stopped, berth attest records the layer, and a layer changed on disk is
refused by berth-vmm before boot.
Prints TAP, and how long Chromium took, as comments."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.environ["BERTH_SOURCE_ROOT"]
BLD = os.environ["BERTH_BUILD_DIR"]
ARTIFACTS = os.environ.get("BERTH_TEST_ARTIFACTS", os.path.join(SRC, "out/artifacts"))
VMM = os.path.join(BLD, "src/berth-vmm/berth-vmm")
BERTH = os.path.join(BLD, "src/berth/berth")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev_pty import Dev  # noqa: E402
from ws_client import WebSocket, http  # noqa: E402

PLAN = 27
APP_UID = 10000
results = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines()[-40:]:
            print(f"# {line}", flush=True)


def rpc(home, export, inp=None, app="browser-native", timeout=600):
    """berth rpc: (exit status, the result parsed or None, standard error)."""
    args = [BERTH, "rpc", app, "--export", export]
    if inp is not None:
        args += ["--input", json.dumps(inp)]
    env = dict(os.environ, BERTH_HOME=home, BERTH_RPC_TIMEOUT_MS=str(timeout * 1000))
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout + 30)
    try:
        result = json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        result = None
    return p.returncode, result, p.stderr.strip()


def png_size(data):
    """(width, height) from a PNG's IHDR, or None when @data is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


# --- VNC (RFC 6143) over noVNC's websocket -------------------------------------------------

def vnc_response(password, challenge):
    """VNC authentication's answer: the challenge DES-encrypted with the password, each key
    byte's bits reversed (the RFB convention). DES as triple DES with one key thrice."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in password.encode()[:8].ljust(8, b"\0"))
    enc = Cipher(algorithms.TripleDES(key * 3), modes.ECB()).encryptor()
    return enc.update(challenge) + enc.finalize()


class Rfb:
    """An RFB client over websockify's binary websocket."""

    def __init__(self, port):
        self.ws = WebSocket(port, protocol="binary", path="/websockify")
        self.buf = b""

    def read(self, n, timeout=30):
        deadline = time.time() + timeout
        while len(self.buf) < n:
            op, payload = self.ws.recv(timeout=max(0.1, deadline - time.time()))
            if op == 8:
                raise EOFError("noVNC closed the connection")
            self.buf += payload
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def handshake(self):
        """The server's version; then the security types it offers."""
        version = self.read(12)
        self.ws.send(b"RFB 003.008\n")
        n = self.read(1)[0]
        return version, list(self.read(n)) if n else []

    def authenticate(self, password):
        """Choose VNC authentication and answer with @password: the SecurityResult (0 ok)."""
        self.ws.send(bytes([2]))
        self.ws.send(vnc_response(password, self.read(16)))
        return struct.unpack(">I", self.read(4))[0]

    def server_init(self):
        self.ws.send(bytes([1]))  # ClientInit, shared
        return struct.unpack(">HH", self.read(4))


# --- the test host ---------------------------------------------------------------------------

def setup_network(work, tag):
    ns, vhost, vns = f"berth-brw-{tag}", f"bbrw{tag}h", f"bbrw{tag}n"
    cmds = [["ip", "netns", "add", ns], ["ip", "link", "add", vhost, "type", "veth", "peer", "name", vns],
            ["ip", "link", "set", vns, "netns", ns], ["ip", "addr", "add", "198.51.100.1/24", "dev", vhost],
            ["ip", "link", "set", vhost, "up"], ["ip", "-n", ns, "addr", "add", "198.51.100.2/24", "dev", vns],
            ["ip", "-n", ns, "link", "set", vns, "up"], ["ip", "-n", ns, "link", "set", "lo", "up"]]
    for c in cmds:
        subprocess.run(c, check=True)
    log = open(os.path.join(work, "origin.log"), "w")
    origin = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable,
                               os.path.join(SRC, "test/e2e/fixtures/browser-origin.py"), "198.51.100.2"],
                              stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if "ready" in open(log.name).read():
            break
        time.sleep(0.1)
    with open(os.path.join(work, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n198.51.100.2 allowed.test\n198.51.100.2 blocked.test\n")
    with open(os.path.join(work, "resolv.conf"), "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    subprocess.run(["mount", "--bind", os.path.join(work, "hosts"), "/etc/hosts"], check=True)
    subprocess.run(["mount", "--bind", os.path.join(work, "resolv.conf"), "/etc/resolv.conf"], check=True)

    def teardown():
        origin.stdin.close()
        origin.wait(timeout=10)
        subprocess.run(["ip", "link", "del", vhost], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return log.name, teardown


def origin_requests(path):
    out = []
    for line in open(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def app_copy(home):
    """apps/browser-native, its navigation narrowed to the test host."""
    d = os.path.join(home, "browser-native")
    shutil.copytree(os.path.join(SRC, "apps/browser-native"), d, ignore=shutil.ignore_patterns("node_modules"))
    y = os.path.join(d, "berth.yml")
    text = open(y).read().replace("browser:navigate:*", "browser:navigate:allowed.test")
    open(y, "w").write(text)
    return d


def session(home, work, origin_log):
    app_dir = app_copy(home)
    probe = os.path.join(SRC, "test/e2e/fixtures/procprobe")
    # The search export's result page: the test host's, given as the app's setting.
    dev = Dev(home, app_dir, ["--apps", probe, "--env", "BROWSER_SEARCH_URL=http://allowed.test/search?q={query}"])
    run_dir = os.path.join(home, "run/vm/berth-dev-browser-native")
    try:
        ready = dev.wait_for(r"^VM ready in (\d+) ms", 600)
        tap(ready and "the browser layer (" in dev.text() and "installing it once" in dev.text(),
            "berth dev installs the browser layer on first need, with a notice, and boots the app", dev.text())
        url = dev.wait_for(r"^\[berth:dev\] noVNC: +http://127\.0\.0\.1:(\d+)/vnc\.html$", 30)
        pw = dev.wait_for(r"^\[berth:dev\] VNC password: ([A-Za-z0-9_-]{8})$", 30)
        tap(url and pw, "and prints noVNC's URL on 127.0.0.1 and, on a terminal, an 8-character password",
            dev.text())
        if not (ready and url and pw):
            return
        port, password = int(url.group(1)), pw.group(1)
        vm = json.load(open(os.path.join(run_dir, "vm.json")))
        tap(vm.get("vmConfig", {}).get("memMiB") == 2048, "a browser sandbox gets 2 GiB", vm.get("vmConfig"))
        layer = vm.get("measurements", {}).get("layer-browser", {})
        tap(layer.get("pinned") is True and len(layer.get("sha256", "")) == 64,
            "vm.json measures the layer, pinned", json.dumps(vm.get("measurements", {}))[:2000])

        t0 = time.time()
        rc, r, err = rpc(home, "navigate", {"url": "http://allowed.test/"})
        first = time.time() - t0
        print(f"# first navigate (Chromium's start included): {first:.1f} s", flush=True)
        tap(rc == 0 and r and r["title"] == "Berth test page" and r["status"] == 200,
            "navigate to the test host through the broker, the channel and the dialer", (r, err))
        t0 = time.time()
        rc, r2, err = rpc(home, "navigate", {"url": "http://allowed.test/"})
        print(f"# warm navigate: {time.time() - t0:.2f} s", flush=True)
        rc, r, err = rpc(home, "get_page_text")
        tap(rc == 0 and "Hello from the test host" in r["text"] and "through the egress broker" in r["text"],
            "get_page_text returns the page's text", (r, err))
        rc, r, err = rpc(home, "click", {"selector": "#next"})
        rc2, t, _ = rpc(home, "get_page_text")
        tap(rc == 0 and r["url"] == "http://allowed.test/second" and rc2 == 0 and "You followed the link." in t["text"],
            "click follows the link", (r, t, err))
        rc, r, err = rpc(home, "screenshot", {})
        size = png_size(base64.b64decode(r["png"])) if rc == 0 and r and r.get("png") else None
        tap(size == (1280, 720) and (r["width"], r["height"]) == size,
            "a screenshot decodes as a PNG of the page's viewport (1280x720)", (size, err))

        rc, r, err = rpc(home, "screenshot", {"path": "shots/page.png"})
        tap(rc == 0 and r and r.get("path") == "/workspace/shots/page.png" and (r["width"], r["height"]) == (1280, 720)
            and "png" not in r, "screenshot {path} saves the PNG under /workspace instead", (r, err))
        rc, r, err = rpc(home, "search", {"query": "berth test", "maxResults": 2})
        tap(rc == 0 and r and [x["title"] for x in r["results"]] == ["First result", "Second result"] and
            r["results"][0]["url"] == "http://allowed.test/",
            "search returns the result page's links, at most maxResults", (r, err))
        tap(any(q["path"] == "/search?q=berth%20test" for q in origin_requests(origin_log)),
            "and asked the search page for the query", origin_requests(origin_log)[-5:])

        rc, r, err = rpc(home, "navigate", {"url": "http://blocked.test/"})
        tap(rc != 0 and "egress denied" in err and "blocked.test" in err,
            "navigating to an undeclared host fails with the broker's refusal", (rc, r, err))
        reqs = origin_requests(origin_log)
        hosts = {q["host"] for q in reqs}
        tap(any(q["host"] == "allowed.test" and q["path"] == "/" for q in reqs) and
            not any((q["host"] or "").startswith("blocked.test") for q in reqs),
            "the page's image from the undeclared host never reached the test host", sorted(hosts))

        rc, r, err = rpc(home, "processes", app="procprobe")
        procs = r["processes"] if rc == 0 else []
        chromium = [p for p in procs if p["argv"] and p["argv"][0].startswith("/usr/lib/chromium/")]
        tap(chromium and all(p["uid"] == APP_UID and p["noNewPrivs"] == "1" and p["seccomp"] == "2"
                             for p in chromium),
            f"Chromium's {len(chromium)} processes run as the app's uid, with no_new_privs and seccomp",
            json.dumps(chromium)[:3000])
        tap(any("--proxy-server=http://127.0.0.1:8090" in " ".join(p["argv"]) for p in chromium) and
            not any("--remote-debugging-port" in " ".join(p["argv"]) for p in chromium) and
            any("--remote-debugging-pipe" in " ".join(p["argv"]) for p in chromium),
            "Chromium goes through the broker and is driven over a pipe, not a DevTools port",
            json.dumps([p["argv"][:40] for p in chromium])[:3000])
        rc, r, err = rpc(home, "navigate", {"url": "file:///proc/self/environ"})
        tap(rc != 0 and "only http: and https:" in err, "navigate refuses a file: URL (it would bypass the broker)",
            (rc, r, err))
        # Chromium's processes descend from the app's: Landlock domains are inherited and
        # never dropped, so each is under the app's rules (which e2e-confinement tests).
        # Its crash handler leaves its parent for PID 1, so the witness is the app's cgroup,
        # which berth-init puts only the app into and which every child inherits.
        app_procs = [p for p in procs if p["uid"] == APP_UID and "runtime.mjs" in " ".join(p["argv"])]
        app_cg = app_procs[0]["cgroup"] if app_procs else None
        others = {p["cgroup"] for p in procs if p["uid"] not in (APP_UID,) and p["argv"]}
        tap(app_cg and app_cg not in others and chromium and all(p["cgroup"] == app_cg for p in chromium) and
            any(p["ppid"] == app_procs[0]["pid"] for p in chromium),
            "every Chromium process was started by the confined app: its child, in its cgroup",
            json.dumps([(p["pid"], p["ppid"], p["cgroup"], p["argv"][:1]) for p in procs if p["argv"]])[:3000])

        rc, r, err = rpc(home, "x11_connect", app="procprobe")
        tap(rc == 0 and r.get("connected") and r.get("status") == 0,
            "another app of the VM reaches the display's socket but X refuses it: no cookie", (r, err))

        rc, r, err = rpc(home, "listeners", app="procprobe")
        ls = r["listeners"] if rc == 0 else []
        tap(rc == 0 and not any(x["port"] == 9222 for x in ls) and not any(x["uid"] == APP_UID for x in ls),
            "nothing listens on a CDP port, and Chromium on no port at all", ls)
        owners = {x["port"]: x["uid"] for x in ls}
        tap(owners.get(5900) == 9011 and owners.get(6080) == 9012 and
            all(x["address"].startswith("0100007F") for x in ls if x["table"].endswith("tcp")),
            "x11vnc (uid 9011) and noVNC (uid 9012) listen on the guest's 127.0.0.1 only", ls)

        st, _, body = http(port, "/vnc.html", timeout=30)
        tap(st == 200 and b"noVNC" in body, "noVNC's page through the published port", (st, body[:200]))
        rfb = Rfb(port)
        version, types = rfb.handshake()
        tap(rfb.ws.accepted and version.startswith(b"RFB 003.") and 2 in types and 1 not in types,
            "VNC offers VNC authentication and not None", (version, types))
        wrong = "A" * 8 if password != "A" * 8 else "B" * 8
        tap(rfb.authenticate(wrong) != 0, "a wrong VNC password is refused")
        rfb.ws.close()
        rfb = Rfb(port)
        rfb.handshake()
        res = rfb.authenticate(password)
        dims = rfb.server_init() if res == 0 else None
        tap(res == 0 and dims == (1280, 800), "the session's password opens the 1280x800 display", (res, dims))
        rfb.ws.close()

        argvs = [" ".join(p["argv"]) for p in procs]
        places = {"a guest argv": "\n".join(argvs)}
        for f in ("vm.json", "vmm.log", "console.log"):
            try:
                places[f] = open(os.path.join(run_dir, f), errors="replace").read()
            except OSError as e:
                places[f] = f"(unreadable: {e})"
        boot = vm.get("bootId", "")
        ev = os.path.join(home, "runs", boot, "evidence.json")
        places["evidence.json"] = open(ev, errors="replace").read() if os.path.exists(ev) else ""
        found = [k for k, v in places.items() if password in v]
        tap(not found, "the VNC password is in no guest argv, nor in vm.json, vmm.log, the console or the evidence",
            found)
        return boot, layer.get("sha256")
    finally:
        dev.stop()


def attested(home, boot, sha):
    p = subprocess.run([BERTH, "attest", boot, "--json"], env=dict(os.environ, BERTH_HOME=home),
                       capture_output=True, text=True, timeout=60)
    try:
        rec = json.loads(p.stdout)
    except ValueError:
        rec = {}
    text = json.dumps(rec)
    tap(p.returncode == 0 and sha and f'"sha256": "{sha}"' in text and '"layers"' in text,
        "berth attest records the browser layer's measurement", (p.stderr, text[:3000]))


def tampered(home):
    """A layer changed on disk after its install is refused before anything boots."""
    layers = os.path.join(home, "vm/layers")
    files = [f for f in os.listdir(layers) if f.endswith(".erofs")] if os.path.isdir(layers) else []
    if not files:
        tap(False, "a tampered layer is refused (no installed layer)")
        return
    path = os.path.join(layers, files[0])
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    p = subprocess.run([VMM, "run", "--name", "tampered", "--layer", "browser", "--foreground"],
                       env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True, timeout=120)
    tap(p.returncode != 0 and "does not match the pin" in p.stderr and "berth vm install --force" in p.stderr,
        "berth-vmm refuses a layer that does not match its pin, and says how to reinstall it", p.stderr)


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root for a network namespace and bind mounts")
        return 0
    if not os.environ.get("BERTH_BROWSER_TEST_INNER"):
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable, *sys.argv],
                   dict(os.environ, BERTH_BROWSER_TEST_INNER="1"))
    for f in ("layer-browser.erofs", "rootfs.erofs"):
        if not os.path.exists(os.path.join(ARTIFACTS, f)):
            print(f"1..0 # SKIP {ARTIFACTS}/{f} is missing: run scripts/build-artifacts.sh")
            return 0
    print(f"1..{PLAN}", flush=True)
    home = tempfile.mkdtemp(prefix="berth-browser-")
    os.environ["BERTH_VMM_EGRESS_TEST_ALLOW_CIDR"] = "198.51.100.0/24"
    teardown = None
    try:
        p = subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot",
                            "--vmm", VMM], env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True)
        if p.returncode != 0:
            tap(False, "install the base artifacts", p.stdout + p.stderr)
            return 1
        origin_log, teardown = setup_network(home, str(os.getpid() % 100000))
        boot, sha = session(home, home, origin_log) or (None, None)
        if boot:
            attested(home, boot, sha)
        tampered(home)
    finally:
        subprocess.run([BERTH, "vm", "stop", "berth-dev-browser-native"], env=dict(os.environ, BERTH_HOME=home),
                       capture_output=True)
        if teardown:
            teardown()
        if os.environ.get("BROWSER_KEEP"):
            shutil.copytree(home, os.environ["BROWSER_KEEP"], dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
    while len(results) < PLAN:
        tap(False, "not reached")
    return 0 if all(results) and len(results) == PLAN else 1


if __name__ == "__main__":
    sys.exit(main())
