#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Published ports on the host (docs/vm.md, "Published ports"), with no guest: a stand-in
QEMU (fixtures/fake-qemu.c) and berth-vmm's channel connected to this test
(--channel-connect), which plays berth-init on it (mux_guest.py): it answers the control
port with a finished boot and serves channel port 2000, the first published port, as a
tiny web server.

  - berth-vmm run refuses what may not be published (CDP's 9222, a bad or repeated port,
    7681 without the terminal's app, two terminal apps in one VM);
  - berth-vmm run --publish 7681: publish-7681.sock in the run dir (0600), in vm.json's
    endpoints, bridged to channel port 2000 both ways; a refused stream closes the client;
  - berth dev with the terminal app, on a pseudo-terminal: it publishes 7681, serves it on
    127.0.0.1 at a free port and prints that URL and the login; the host port reaches the
    guest's stream; the login is in none of berth-vmm's argv, vm.json or vmm.log; without a
    terminal the login is not printed; BERTH_PUBLISH_HOST=0.0.0.0 serves every address with
    a warning, and an address that is not one is refused.
Prints TAP."""
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import stat
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
FAKE_QEMU = os.path.join(BLD, "test/e2e/fake-qemu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mux_guest import CONTROL, Guest  # noqa: E402
PUBLISH = 2000  # channel port of the first published port
PLAN = 27
results = []


def tap(ok, what, detail=None):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines()[-30:]:
            print(f"# {line}", flush=True)


def serve_stream(guest, sid, port):
    """berth-init's side of a stream: the control port says the boot is over (berth-vmm's
    own stream and every command's); the published port answers one request."""
    if port == CONTROL:
        lines = [{"source": "berth-init", "event": "hello", "protocol": 1},
                 {"event": "boot_complete", "uptimeMs": 1, "apps": 1},
                 {"event": "app_ready", "app": guest.app, "pid": 2}]
        guest.write(sid, b"".join(json.dumps(l).encode() + b"\n" for l in lines))
        return
    st = guest.wait(sid, lambda s: b"\r\n\r\n" in s.data or s.closed or s.reset, timeout=30)
    first = st.data.split(b"\r\n", 1)[0]
    body = b"guest saw: " + first
    guest.write(sid, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    guest.close(sid)


class FakeGuest(Guest):
    def __init__(self, listener, app):
        self.app = app
        super().__init__(listener, accept=(CONTROL, PUBLISH), on_open=serve_stream)


def env_for(home, **extra):
    env = dict(os.environ, BERTH_HOME=home, BERTH_QEMU=FAKE_QEMU, BERTH_FAKE_RUN="hang", BERTH_ACCEL="tcg")
    env.pop("BERTH_PUBLISH_HOST", None)
    env.update(extra)
    return env


def http_get(port, host="127.0.0.1", timeout=20):
    """One request; what came back (b"" when the connection was closed at once)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(b"GET /probe HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, socket.timeout):
        return data
    finally:
        s.close()


def unix_get(path, timeout=20):
    """The reply to one request; b"" when the far end closed first (a refused stream may
    close before the request is even written)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    data = b""
    try:
        s.connect(path)
        s.sendall(b"GET /sock HTTP/1.1\r\nHost: x\r\n\r\n")
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return data
    finally:
        s.close()


def kill_engine(run_dir):
    """QEMU goes (the stand-in never powers off); berth-vmm then ends by itself."""
    try:
        with open(os.path.join(run_dir, "vm.json")) as f:
            doc = json.load(f)
        pid = int(open(os.path.join(run_dir, "berth-vmm.pid")).read())
        os.kill(doc["enginePid"], signal.SIGKILL)
    except (OSError, ValueError, KeyError):
        return
    for _ in range(300):
        if not os.path.exists(f"/proc/{pid}"):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def vmm_refusals(home, apps):
    cases = [
        (["--publish", "9222", "--app", apps["terminal"]],
         "--publish 9222: this port is never published to the host; only 7681 (the terminal's web view), 6080 (noVNC) may be",
         "CDP's 9222 is never published"),
        (["--publish", "80x", "--app", apps["terminal"]], "--publish takes a TCP port number", "a bad port is refused"),
        (["--publish", "7681", "--publish", "7681", "--app", apps["terminal"]], "--publish 7681 is given twice",
         "a repeated port is refused"),
        (["--publish", "7681", "--app", apps["notes"]],
         "--publish 7681: no app of this VM declares a terminal: capability",
         "7681 without the terminal's app is refused"),
        (["--app", apps["terminal"], "--app", apps["t2"]],
         "at most one app may declare a terminal:* capability when running multiple apps together — found 2: terminal, t2",
         "two terminal apps in one VM are refused (the at-most-one rule)"),
    ]
    for args, want, what in cases:
        p = subprocess.run([VMM, "run", "--name", "refused"] + args, env=env_for(home), capture_output=True,
                           text=True, timeout=60)
        tap(p.returncode != 0 and want in p.stderr and not os.path.exists(os.path.join(home, "run/vm/refused")),
            what, p.stderr)


def vmm_publish(home, apps):
    sock = os.path.join(home, "guest-vmm.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sock)
    listener.listen(1)
    run_dir = os.path.join(home, "run/vm", "pub")
    p = subprocess.run([VMM, "run", "--name", "pub", "--app", apps["terminal"], "--publish", "7681",
                        "--channel-connect", sock], env=env_for(home), capture_output=True, text=True, timeout=120)
    tap(p.returncode == 0, "berth-vmm run --publish 7681 starts", p.stderr)
    if p.returncode != 0:
        return
    guest = FakeGuest(listener, "terminal")
    path = os.path.join(run_dir, "publish-7681.sock")
    endpoints = next((json.loads(l) for l in p.stderr.splitlines() if '"event":"endpoints"' in l), {})
    want = [{"port": 7681, "muxPort": 2000, "socket": path, "app": "terminal"}]
    tap(endpoints.get("endpoints", {}).get("published") == want,
        "the launcher reports the published socket, its channel port and its app", endpoints)
    with open(os.path.join(run_dir, "vm.json")) as f:
        tap(json.load(f)["endpoints"]["published"] == want, "vm.json records the same")
    status = subprocess.run([BERTH, "vm", "status", "pub"], env=env_for(home), capture_output=True,
                            text=True, timeout=60)
    tap(f"published: guest port 7681 of terminal at {path}" in status.stdout,
        "berth vm status names the published port, its app and its socket", status.stdout + status.stderr)
    st = os.stat(path)
    tap(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
        "publish-7681.sock is a socket only its owner may use (0600)", oct(st.st_mode))
    # berth-vmm run returns once the engine started, maybe before the fake guest's channel
    # is up; a connection before that is closed at once. Wait for the channel, bounded.
    reply = b""
    for _ in range(100):
        reply = unix_get(path)
        if reply:
            break
        time.sleep(0.1)
    tap(reply.startswith(b"HTTP/1.1 200 OK") and reply.endswith(b"guest saw: GET /sock HTTP/1.1"),
        "a connection to it is a stream to channel port 2000, bytes both ways", reply)
    guest.accept.discard(PUBLISH)
    reply = unix_get(path)
    tap(reply == b"", "a stream the guest refuses (nothing listens yet) closes the connection", reply)
    guest.accept.add(PUBLISH)
    kill_engine(run_dir)


class Dev:
    """berth dev in the terminal app's folder, on a pseudo-terminal of its own (or with its
    output in a file), its berth-vmm's channel connected to a FakeGuest."""

    def __init__(self, home, app_dir, tty=True, **env):
        self.home = home
        self.sock = os.path.join(home, "guest-dev.sock")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.sock)
        self.listener.listen(1)
        wrap = os.path.join(home, "wrap-vmm")
        with open(wrap, "w") as f:
            f.write('#!/bin/sh\nprintf "%s\\n" "$*" >>"$0.argv"\n'
                    f'[ "$1" = run ] && exec "{VMM}" "$@" --channel-connect "{self.sock}"\n'
                    f'exec "{VMM}" "$@"\n')
        os.chmod(wrap, 0o755)
        self.argv_log = wrap + ".argv"
        e = env_for(home, BERTH_VMM=wrap, **env)
        self.out = b""
        self.tty = tty
        if tty:
            master, slave = pty.openpty()
            self.proc = subprocess.Popen([BERTH, "dev"], cwd=app_dir, env=e, stdin=slave, stdout=slave,
                                         stderr=slave, start_new_session=True)
            os.close(slave)
            self.master = master
            threading.Thread(target=self.reader, daemon=True).start()
        else:
            self.log = open(os.path.join(home, "dev-notty.log"), "wb")
            self.proc = subprocess.Popen([BERTH, "dev"], cwd=app_dir, env=e, stdin=subprocess.DEVNULL,
                                         stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.guest = None
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        try:
            self.guest = FakeGuest(self.listener, "terminal")
        except (OSError, TimeoutError):
            pass

    def reader(self):
        while True:
            try:
                r, _, _ = select.select([self.master], [], [], 1)
                if r:
                    d = os.read(self.master, 65536)
                    if not d:
                        return
                    self.out += d
            except OSError:
                return

    def text(self):
        if not self.tty:
            with open(os.path.join(self.home, "dev-notty.log"), "rb") as f:
                self.out = f.read()
        return self.out.decode(errors="replace").replace("\r\n", "\n")

    def wait_for(self, pattern, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.text(), re.M)
            if m:
                return m
            if self.proc.poll() is not None:
                time.sleep(0.5)
                return re.search(pattern, self.text(), re.M)
            time.sleep(0.2)
        return None

    def stop(self):
        run_dir = os.path.join(self.home, "run/vm/berth-dev-terminal")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            time.sleep(1)
            kill_engine(run_dir)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.listener.close()


def dev_publish(home, app_dir):
    dev = Dev(home, app_dir)
    try:
        m = dev.wait_for(r"^\[berth:dev\] Terminal: http://127\.0\.0\.1:(\d+)$")
        tap(m is not None, "berth dev prints the terminal's URL on 127.0.0.1", dev.text())
        login = dev.wait_for(r"^\[berth:dev\] login: berth / ([A-Za-z0-9_-]{32})$")
        tap(login is not None, "and, on a terminal, the login: berth / <32 characters of base64url>", dev.text())
        if not m or not login:
            return
        port, secret = int(m.group(1)), login.group(1)
        with open(dev.argv_log) as f:
            argv = f.read()
        tap("--publish 7681" in argv, "berth-vmm was asked to publish 7681", argv)
        reply = http_get(port)
        tap(reply.startswith(b"HTTP/1.1 200 OK") and reply.endswith(b"guest saw: GET /probe HTTP/1.1"),
            "a browser's request to that port reaches the guest's published stream, and its answer comes back",
            reply)
        try:
            socket.create_connection(("127.0.0.2", port), timeout=5).close()
            other = True
        except OSError:
            other = False
        tap(not other, "the port is served on 127.0.0.1 only, not on the rest of loopback")
        run_dir = os.path.join(home, "run/vm/berth-dev-terminal")
        vpid = open(os.path.join(run_dir, "berth-vmm.pid")).read().strip()
        with open(f"/proc/{vpid}/cmdline", "rb") as f:
            cmdline = f.read()
        places = {"berth-vmm's argv": cmdline, "the argv berth dev gave berth-vmm": argv.encode()}
        for name in ("vm.json", "vmm.log", "console.log"):
            with open(os.path.join(run_dir, name), "rb") as f:
                places[name] = f.read()
        leaks = [k for k, v in places.items() if secret.encode() in v]
        tap(not leaks, "the login is in none of berth-vmm's argv, vm.json, vmm.log, console.log", leaks)
        tap(not os.path.exists(os.path.join(home, "run/secrets/berth-dev-terminal.img")),
            "the secrets disk that carried it is gone once the app is ready")
    finally:
        dev.stop()
    tap(dev.proc.returncode == 0, "Ctrl-C stops berth dev", dev.proc.returncode)


def dev_no_tty(home, app_dir):
    dev = Dev(home, app_dir, tty=False)
    try:
        m = dev.wait_for(r"^\[berth:dev\] login: berth / \(.*\)$")
        tap(m is not None and "not printed" in m.group(0),
            "without a terminal, berth dev says the login is not printed", dev.text())
        tap(not re.search(r"login: berth / [A-Za-z0-9_-]{32}", dev.text()), "and does not print it")
    finally:
        dev.stop()


def dev_publish_host(home, app_dir):
    dev = Dev(home, app_dir, BERTH_PUBLISH_HOST="0.0.0.0")
    try:
        m = dev.wait_for(r"^\[berth:dev\] Terminal: http://0\.0\.0\.0:(\d+)$")
        tap(m is not None, "BERTH_PUBLISH_HOST=0.0.0.0 serves every address", dev.text())
        tap("BERTH_PUBLISH_HOST=0.0.0.0: http://0.0.0.0:" in dev.text() and "other machines" in dev.text(),
            "with a warning that says so", dev.text())
        if m:
            reply = http_get(int(m.group(1)), host="127.0.0.2")
            tap(reply.startswith(b"HTTP/1.1 200 OK"), "and answers there", reply)
        else:
            tap(False, "and answers there")
    finally:
        dev.stop()
    dev = Dev(home, app_dir, BERTH_PUBLISH_HOST="localhost")
    try:
        m = dev.wait_for(r"BERTH_PUBLISH_HOST must be an IPv4 or IPv6 address")
        tap(m is not None, "a BERTH_PUBLISH_HOST that is not an address is refused, saying so", dev.text())
        dev.proc.wait(timeout=60)
        tap(dev.proc.returncode == 1, "and berth dev fails", dev.proc.returncode)
    finally:
        dev.stop()


def main():
    print(f"1..{PLAN}", flush=True)
    for f in ("vmlinux", "initrd.cpio", "rootfs.erofs"):
        if not os.path.exists(os.path.join(ARTIFACTS, f)):
            print(f"# no {ARTIFACTS}/{f}: run scripts/build-artifacts.sh")
            return 1
    home = tempfile.mkdtemp(prefix="berth-publish.")
    try:
        inst = subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot", "--vmm", VMM],
                              env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True)
        if inst.returncode != 0:
            raise RuntimeError("cannot install the artifacts: " + inst.stderr)
        apps = {}
        for name in ("terminal", "notes"):
            apps[name] = os.path.join(home, name)
            shutil.copytree(os.path.join(SRC, "apps", name), apps[name])
        apps["t2"] = os.path.join(home, "t2")
        os.mkdir(apps["t2"])
        with open(os.path.join(SRC, "apps/terminal/berth.yml")) as f, open(os.path.join(apps["t2"], "berth.yml"), "w") as g:
            g.write(f.read().replace("name: terminal", "name: t2", 1))
        vmm_refusals(home, apps)
        vmm_publish(home, apps)
        dev_publish(home, apps["terminal"])
        dev_no_tty(home, apps["terminal"])
        dev_publish_host(home, apps["terminal"])
    finally:
        for d in os.listdir(os.path.join(home, "run/vm")) if os.path.isdir(os.path.join(home, "run/vm")) else []:
            kill_engine(os.path.join(home, "run/vm", d))
        shutil.rmtree(home, ignore_errors=True)
    while len(results) < PLAN:
        tap(False, "not reached")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
