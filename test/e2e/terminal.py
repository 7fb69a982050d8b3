#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""apps/terminal on a real VM (docs/terminal.md), two boots.

Boot 1, berth dev on a pseudo-terminal, as a person runs it: it prints the web view's URL
on 127.0.0.1 and the login. Then, with berth rpc: run_command {"command":"echo hi"} returns
{"output":"hi"}; send_keys then read_screen shows the keys; a command that outlives the
timeout gets the exact error; a write outside the app's scopes from inside the shell is
refused by Landlock. Through the published port (the channel, berth-init's relay, the
CLI's listener): 401 without the login and with a wrong one, the page with the right one,
and a websocket with it sees a command run_command typed. The view listens on the guest's
127.0.0.1 only and the CLI on the host's; only 7681 is published. The login is in no argv
(host or guest), not in /proc/cmdline, vm.json, vmm.log, console.log, berth vm logs or the
guest's events, nor in the shell's environment.

Boot 2, berth-vmm with the terminal and another app (envprobe), the login on the CLI's
secrets disk for the terminal alone: the other app's environment does not have it, and it
cannot read the terminal's.
Prints TAP."""
import json
import os
import re
import shutil
import signal
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
WRITER = os.path.join(BLD, "test/e2e/secrets-disk-write")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev_pty import Dev  # noqa: E402
from ws_client import WebSocket, basic, http  # noqa: E402

PLAN = 25
results = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines()[-40:]:
            print(f"# {line}", flush=True)


def rpc(home, export, inp=None, app="terminal", timeout=60):
    """berth rpc: (exit status, the result parsed or None, standard error)."""
    args = [BERTH, "rpc", app, "--export", export]
    if inp is not None:
        args += ["--input", json.dumps(inp)]
    p = subprocess.run(args, env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True,
                       timeout=timeout)
    try:
        result = json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        result = None
    return p.returncode, result, p.stderr.strip()


def run_command(home, command, timeout=60):
    rc, result, err = rpc(home, "run_command", {"command": command}, timeout=timeout)
    return (result or {}).get("output") if rc == 0 else None


def listeners(tables, port):
    """(local address, uid) of each TCP listener on @port in /proc/net/tcp-style @tables."""
    out = []
    for line in tables.splitlines():
        p = line.split()
        if len(p) > 7 and p[3] == "0A" and p[1].endswith(":%04X" % port):
            out.append((p[1], p[7]))
    return out


def qemu_pid(run_dir):
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"qemu-system" in cmd.split(b"\0")[0] and run_dir.encode() in cmd:
                return int(d)
    return None


def boot_dev(home):
    app_dir = os.path.join(home, "terminal")
    shutil.copytree(os.path.join(SRC, "apps/terminal"), app_dir)
    dev = Dev(home, app_dir)
    run_dir = os.path.join(home, "run/vm/berth-dev-terminal")
    try:
        ready = dev.wait_for(r"^VM ready in \d+ ms")
        tap(ready, "berth dev boots the terminal app in a VM", dev.text())
        url = dev.wait_for(r"^\[berth:dev\] Terminal: http://127\.0\.0\.1:(\d+)$", 30)
        login = dev.wait_for(r"^\[berth:dev\] login: berth / ([A-Za-z0-9_-]{32})$", 30)
        tap(url and login, "and prints the web view's URL on 127.0.0.1 and, on a terminal, its login", dev.text())
        if not (ready and url and login):
            return
        port, secret = int(url.group(1)), login.group(1)
        cred = "berth:" + secret

        # Before the first call nothing listens in the guest: the browser's connection closes.
        try:
            st = http(port, headers={"Authorization": basic(cred)})[0]
        except ConnectionResetError:
            st = None
        tap(st is None, "before the terminal's first call, the URL answers nothing (the view starts lazily)", st)

        rc, r, err = rpc(home, "run_command", {"command": "echo hi"})
        tap(rc == 0 and r == {"output": "hi"}, 'run_command {"command":"echo hi"} returns {"output":"hi"}', (r, err))
        rc, r, err = rpc(home, "send_keys", {"keys": "echo Space typed-by-keys Enter"})
        screen = ""
        for _ in range(25):
            time.sleep(0.2)
            screen = (rpc(home, "read_screen")[1] or {}).get("text", "")
            if re.search(r"^typed-by-keys$", screen, re.M):
                break
        tap(rc == 0 and re.search(r"^typed-by-keys$", screen, re.M), "send_keys then read_screen shows the keys", screen)
        out = run_command(home, "id -u; id -G; pwd")
        tap(out and out.split("\n")[0] == "10000" and "5" in out.split("\n")[1].split() and out.endswith("/workspace"),
            "the shell runs as the app's uid, in group tty, in /workspace", out)
        out = run_command(home, "echo x > /tmp/outside-the-scopes; echo rc=$?; ls /tmp/outside-the-scopes 2>&1")
        tap(out and "Permission denied" in out and "rc=1" in out and "No such file" in out,
            "a write outside the app's scopes, from the shell, is refused by Landlock", out)

        # The web view through the published port.
        st, hdrs, _ = http(port)
        tap(st == 401 and hdrs.get("www-authenticate", "").startswith("Basic "), "no login: 401", (st, hdrs))
        st, _, _ = http(port, headers={"Authorization": basic("berth:" + "A" * 32)})
        tap(st == 401, "a wrong login: 401", st)
        st, _, body = http(port, headers={"Authorization": basic(cred)})
        tap(st == 200 and b'<script src="xterm.js">' in body, "the right login: the page", (st, body[:200]))
        st, _, js = http(port, "/xterm.js", headers={"Authorization": basic(cred)})
        tap(st == 200 and len(js) > 100000, "and xterm.js from the root image", (st, len(js)))
        ws = WebSocket(port, headers={"Authorization": basic(cred), "Origin": f"http://127.0.0.1:{port}"})
        seen = False
        if ws.accepted:
            ws.resize(120, 40)
            holder = {}
            t = threading.Thread(target=lambda: holder.update(out=run_command(home, "echo seen-by-$((6*7))")))
            t.start()
            try:
                seen = b"seen-by-42" in ws.read_until(b"seen-by-42", timeout=30)
            except (TimeoutError, EOFError) as e:
                seen = str(e)
            t.join()
            seen = seen is True and holder.get("out") == "seen-by-42"
        tap(seen, "a websocket with the login sees a command that run_command typed", (ws.status, seen))
        ws.close()
        ws = WebSocket(port)
        tap(ws.status == 401, "a websocket without the login: 401", ws.status)
        ws.close()

        # Loopback only, on both sides; only 7681 is published.
        tables = run_command(home, "cat /proc/net/tcp /proc/net/tcp6") or ""
        tap(listeners(tables, 7681) == [("0100007F:1E01", "10000")],
            "in the guest the view listens on 127.0.0.1:7681 only, as the app", listeners(tables, 7681))
        with open("/proc/net/tcp") as f:
            host = f.read()
        with open("/proc/net/tcp6") as f:
            host6 = f.read()
        tap(listeners(host, port) == [("0100007F:%04X" % port, str(os.getuid()))] and not listeners(host6, port),
            "on the host the CLI listens on 127.0.0.1 only", listeners(host + host6, port))
        with open(os.path.join(run_dir, "vm.json")) as f:
            vm = json.load(f)
        tap([p["port"] for p in vm["endpoints"]["published"]] == [7681], "only 7681 is published (never CDP)",
            vm["endpoints"]["published"])

        # Where the login must not be.
        places = {}
        vpid = open(os.path.join(run_dir, "berth-vmm.pid")).read().strip()
        for name, path in (("berth-vmm's argv", f"/proc/{vpid}/cmdline"), ("berth-vmm's environment", f"/proc/{vpid}/environ")):
            with open(path, "rb") as f:
                places[name] = f.read()
        qpid = qemu_pid(run_dir)
        if qpid:
            with open(f"/proc/{qpid}/cmdline", "rb") as f:
                places["QEMU's argv"] = f.read()
        for name in ("vm.json", "vmm.log", "console.log"):
            with open(os.path.join(run_dir, name), "rb") as f:
                places[name] = f.read()
        logs = subprocess.run([BERTH, "vm", "logs", "berth-dev-terminal"], env=dict(os.environ, BERTH_HOME=home),
                              capture_output=True, timeout=60)
        places["berth vm logs"] = logs.stdout + logs.stderr
        events = subprocess.run([sys.executable, os.path.join(SRC, "test/e2e/control-client.py"),
                                 os.path.join(run_dir, "control.sock")], capture_output=True, timeout=60)
        places["the guest's events"] = events.stdout
        places["the guest's /proc/cmdline"] = (run_command(home, "cat /proc/cmdline") or "").encode()
        argvs = run_command(home, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done") or ""
        places["every guest process's argv"] = argvs.encode()
        places["the shell's environment"] = (run_command(home, "env") or "").encode()
        leaks = [k for k, v in places.items() if secret.encode() in v]
        tap(not leaks and qpid and "terminal-view" in argvs and b"BERTH_BOOT_ID=" in places["the guest's /proc/cmdline"],
            "the login is in no argv (host or guest), nor /proc/cmdline, vm.json, the logs, the events, "
            "or the shell's environment", leaks)
        tap(b'"secrets_loaded","names":{"apps":{"terminal":["BERTH_TERMINAL_CREDENTIAL"]}' in places["the guest's events"],
            "the guest reports the name it delivered to the terminal alone, and no value", places["the guest's events"][-2000:])
        tap(not os.path.exists(os.path.join(home, "run/secrets/berth-dev-terminal.img")),
            "the secrets disk that carried it is gone once the app is ready")

        t0 = time.time()
        rc, _, err = rpc(home, "run_command", {"command": "sleep 30"}, timeout=90)
        tap(rc != 0 and err == 'command timed out after 15000ms: "sleep 30"' and time.time() - t0 >= 15,
            "a command that outlives the timeout gets the exact error", err)
        rpc(home, "send_keys", {"keys": "C-c"})
        tap(run_command(home, "echo after") == "after", "and the shell goes on")
    finally:
        dev.stop()


def boot_two(home):
    shares = os.path.join(home, "shares")
    os.makedirs(shares)
    for name, src in (("terminal", "apps/terminal"), ("probe", "test/e2e/fixtures/envprobe")):
        tree = os.path.join(home, "src-" + name)
        shutil.copytree(os.path.join(SRC, src), tree)
        if name == "probe":
            with open(os.path.join(tree, "berth.yml")) as f:
                text = f.read().replace("name: envprobe", "name: probe", 1)
            with open(os.path.join(tree, "berth.yml"), "w") as f:
                f.write(text)
        subprocess.run(["node", os.path.join(SRC, "sdk/node/bundle.mjs"), tree, os.path.join(shares, name)],
                       check=True, stdout=subprocess.DEVNULL)
    secret = "two-apps-" + os.urandom(12).hex()
    disk = os.path.join(home, "two.img")
    subprocess.run([WRITER, disk, f"--own=terminal:BERTH_TERMINAL_CREDENTIAL=berth:{secret}",
                    os.path.join(shares, "terminal"), os.path.join(shares, "probe")], check=True,
                   capture_output=True)
    env = dict(os.environ, BERTH_HOME=home)
    p = subprocess.run([VMM, "run", "--name", "e2e-terminal", "--app", os.path.join(shares, "terminal"),
                        "--app", os.path.join(shares, "probe"), "--secrets", disk, "--mem", "1024"],
                       env=env, capture_output=True, text=True, timeout=300)
    os.unlink(disk)
    try:
        up = False
        for _ in range(90):
            rc, r, _ = rpc(home, "env", {"names": ["BERTH_TERMINAL_CREDENTIAL"]}, app="probe")
            if rc == 0:
                up = True
                break
            time.sleep(2)
        tap(p.returncode == 0 and up, "a VM with the terminal and another app boots", p.stderr)
        if not up:
            return
        tap(r["values"] == {"BERTH_TERMINAL_CREDENTIAL": None} and "BERTH_TERMINAL_CREDENTIAL" not in r["names"],
            "the other app's environment has no terminal login", r)
        tap(run_command(home, "echo ${BERTH_TERMINAL_CREDENTIAL:-unset}") == "unset",
            "and the terminal's shell has none either (the app took it out before tmux started)")
        status = subprocess.run([BERTH, "vm", "status", "--json"], env=env, capture_output=True, text=True, timeout=60)
        pids = {a["name"]: a["pid"] for v in json.loads(status.stdout)["vms"] for a in v["guest"]["apps"]}
        rc, peek, _ = rpc(home, "environ_of", {"pid": pids.get("terminal", 0)}, app="probe")
        tap(rc == 0 and peek.get("read") is False and peek.get("error") == "EACCES" and secret not in json.dumps(peek),
            "the other app cannot read the terminal's environment (EACCES)", peek)
    finally:
        subprocess.run([BERTH, "vm", "stop", "e2e-terminal"], env=env, capture_output=True, timeout=120)


def main():
    print(f"1..{PLAN}", flush=True)
    for f in ("vmlinux", "initrd.cpio", "rootfs.erofs"):
        if not os.path.exists(os.path.join(ARTIFACTS, f)):
            print(f"# no {ARTIFACTS}/{f}: run scripts/build-artifacts.sh")
            return 1
    home = tempfile.mkdtemp(prefix="berth-terminal.")
    try:
        inst = subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot", "--vmm", VMM],
                              env=dict(os.environ, BERTH_HOME=home), capture_output=True, text=True)
        if inst.returncode != 0:
            raise RuntimeError("cannot install the artifacts: " + inst.stderr)
        boot_dev(home)
        boot_two(home)
    finally:
        for d in os.listdir(os.path.join(home, "run/vm")) if os.path.isdir(os.path.join(home, "run/vm")) else []:
            try:
                os.kill(int(open(os.path.join(home, "run/vm", d, "berth-vmm.pid")).read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        shutil.rmtree(home, ignore_errors=True)
    while len(results) < PLAN:
        tap(False, "not reached")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
