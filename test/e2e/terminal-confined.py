#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""apps/terminal under its real confinement on this host, without a VM: agent-init (Landlock,
seccomp, the app's uid, groups berth and tty) runs the bundled app's runtime with the policy
the compiler gives a terminal app (its paths moved into a directory of the test's own, as
test/e2e/agent-init.sh does), and the app starts the host's tmux and the built terminal-view
inside that domain, in a network namespace of the test's own. This is Debian 12's tmux,
bash and libwebsockets, as in the root image, so a system call the seccomp filter lacks, a
path Landlock does not grant or a port it does not let the view bind shows up here first.
test/e2e/terminal.sh checks the same on a real VM, with berth-init and the published port.
Needs root and Landlock ABI 6 or newer. Prints TAP."""
import ctypes
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.environ["BERTH_SOURCE_ROOT"]
BLD = os.environ["BERTH_BUILD_DIR"]
AGENT_INIT = os.path.join(BLD, "src/agent-init/agent-init")
VIEW = os.path.join(BLD, "src/terminal-view/terminal-view")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ws_client import WebSocket, basic, http  # noqa: E402

APP_UID = 64111
BERTH_GID, TTY_GID = 9999, 5
PORT = 7681
READ_BASELINE = ["/usr", "/bin", "/sbin", "/lib", "/etc", "/proc", "/dev"]
PLAN = 20
results = []


def tap(ok, what, detail=None):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines()[-30:]:
            print(f"# {line}", flush=True)


def skip_all(why):
    print(f"1..0 # SKIP {why}")
    sys.exit(0)


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, libc.syscall(444, None, 0, 1))


class Rpc:
    def __init__(self, path, timeout=60):
        end = time.time() + timeout
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.time() > end:
                    raise
                time.sleep(0.1)
        self.s.settimeout(timeout)
        self.buf, self.n = b"", 0

    def call(self, export, inp=None, timeout=30):
        self.n += 1
        req = {"id": str(self.n), "export": export}
        if inp is not None:
            req["input"] = inp
        self.s.settimeout(timeout)
        self.s.sendall(json.dumps(req).encode() + b"\n")
        while b"\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError(f"the app closed the connection during {export}")
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def own_network():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) < 0:  # CLONE_NEWNET; os.unshare() is Python 3.12's
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def setup(t):
    """The app's tree, as berth-init lays it out, under @t."""
    d = {k: os.path.join(t, k) for k in ("app", "workspace", "tmp", "run", "outside", "bin", "assets")}
    os.chmod(t, 0o755)
    subprocess.run(["node", os.path.join(SRC, "sdk/node/bundle.mjs"), os.path.join(SRC, "apps/terminal"), d["app"]],
                   check=True, stdout=subprocess.DEVNULL)
    for k in ("workspace", "tmp", "run", "outside", "bin", "assets"):
        os.makedirs(d[k], exist_ok=True)
    os.chown(d["workspace"], APP_UID, APP_UID)
    os.chown(d["tmp"], APP_UID, APP_UID)
    os.chmod(d["tmp"], 0o700)
    os.chown(d["run"], APP_UID, APP_UID)
    os.chmod(d["run"], 0o711)
    os.chmod(d["outside"], 0o777)  # DAC lets the app write here: whatever refuses it is Landlock
    shutil.copy(VIEW, d["bin"])
    page = os.path.join(SRC, "src/terminal-view/page")
    for f in os.listdir(page):
        shutil.copy(os.path.join(page, f), d["assets"])
    xterm = os.path.join(SRC, "node_modules/@xterm")
    for f in ("xterm/lib/xterm.js", "xterm/css/xterm.css", "addon-fit/lib/addon-fit.js"):
        shutil.copy(os.path.join(xterm, f), d["assets"])
    # What capability_policy_compile() gives apps/terminal (filesystem:write:/workspace,
    # terminal:attach:*), its paths here; the view's files are read where the image has them
    # under /usr, which the baseline covers.
    writes = ["/dev/null", d["tmp"], d["run"], d["workspace"], "/dev/pts", "/dev/ptmx"]
    policy = {"schema": 2, "appName": "terminal",
              "declaredCapabilities": ["filesystem:write:/workspace", "terminal:attach:*"],
              "writePaths": writes,
              "readPaths": READ_BASELINE + [d["run"], d["app"]] + writes + [d["bin"], d["assets"]],
              "networkPorts": [], "bindPorts": [PORT], "meshPeers": [], "networkUnrestricted": False,
              "cgroupLimits": {}}
    d["policy"] = os.path.join(t, "policy.json")
    with open(d["policy"], "w") as f:
        json.dump(policy, f, sort_keys=True, separators=(",", ":"))
    os.chmod(d["policy"], 0o644)
    return d


def start(d, login):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": d["tmp"], "TMPDIR": d["tmp"], "LANG": "C.UTF-8",
           "BERTH_APP_NAME": "terminal", "BERTH_BOOT_ID": "terminal-confined",
           "BERTH_RPC_SOCKET": os.path.join(d["run"], "rpc.sock"),
           "BERTH_MANIFEST_PATH": os.path.join(d["app"], "berth.yml"),
           "BERTH_APP_ENTRY": os.path.join(d["app"], "dist/index.mjs"),
           "BERTH_CONTEXT_BUS_SOCKET": os.path.join(d["run"], "no-bus.sock"),
           "BERTH_WORKSPACE_ROOT": d["workspace"], "BERTH_REQUIRE_ENFORCEMENT": "1",
           "BERTH_CAPABILITY_POLICY": d["policy"], "BERTH_APP_UID": str(APP_UID), "BERTH_APP_GID": str(APP_UID),
           "BERTH_APP_SUPPLEMENTARY_GIDS": f"{BERTH_GID},{TTY_GID}",
           "BERTH_TERMINAL_CREDENTIAL": login,
           "BERTH_TERMINAL_VIEW": os.path.join(d["bin"], "terminal-view"),
           "BERTH_TERMINAL_VIEW_ASSETS": d["assets"]}
    d["log"] = os.path.join(os.path.dirname(d["app"]), "app.log")
    log = open(d["log"], "wb")
    return subprocess.Popen([AGENT_INIT, "/usr/bin/node", os.path.join(d["app"], "runtime.mjs")], cwd=d["app"],
                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)


def app_pids(t):
    """Every process of the app's uid that belongs to this test (tmux's server leaves the
    app's process tree when it daemonises, not its domain)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.stat(f"/proc/{p}").st_uid != APP_UID:
                continue
            out.append(int(p))
        except OSError:
            pass
    return out


def proc_text(pid, what):
    try:
        with open(f"/proc/{pid}/{what}", "rb") as f:
            return f.read()
    except OSError:
        return None


def main():
    print(f"1..{PLAN}", flush=True)
    if os.geteuid() != 0:
        skip_all("needs root (agent-init, a network namespace)")
    if landlock_abi() < 6:
        skip_all(f"this kernel's Landlock ABI is {landlock_abi()}, the test needs 6")
    for prog, what in ((AGENT_INIT, "agent-init"), (VIEW, "terminal-view")):
        if not os.access(prog, os.X_OK):
            skip_all(f"build {what} first")
    if not shutil.which("tmux") or not shutil.which("node"):
        skip_all("tmux and node are needed (scripts/setup.sh)")
    try:
        pwd.getpwuid(APP_UID)
        skip_all(f"uid {APP_UID} belongs to a user here")
    except KeyError:
        pass
    t = tempfile.mkdtemp(prefix="berth-terminal-confined.")
    proc = None
    try:
        own_network()
        d = setup(t)
        secret = "Zm9yLXRoZS10ZXJtaW5hbC0wMTIzNDU2Nzg5YWJj"[:32]
        login = f"berth:{secret}"
        proc = start(d, login)
        ready = False
        for _ in range(300):
            with open(d["log"], errors="replace") as f:
                text = f.read()
            if '"terminal" ready' in text or proc.poll() is not None:
                ready = '"terminal" ready' in text
                break
            time.sleep(0.1)
        tap(ready, "the terminal app starts under agent-init (enforcement required)", text)
        if not ready:
            return 1
        events = {}
        for line in text.splitlines():
            if line.startswith('{"source":"agent-init"'):
                ev = json.loads(line)
                events[ev["event"]] = ev
        tap(events.get("capability_policy_applied", {}).get("ruleset") == "FullyEnforced"
            and events["capability_policy_applied"].get("bindPorts") == [PORT]
            and all(events.get(e, {}).get("applied") for e in ("namespace_seccomp_filter", "network_seccomp_filter")),
            "with Landlock fully enforced (TCP bind to 7681 only) and both seccomp filters", events)
        rpc = Rpc(os.path.join(d["run"], "rpc.sock"))
        r = rpc.call("run_command", {"command": "echo hi"})
        tap(r.get("result") == {"output": "hi"}, 'run_command {"command":"echo hi"} returns {"output":"hi"}', r)
        r = rpc.call("run_command", {"command": "id -u; id -G; pwd"})
        out = r.get("result", {}).get("output", "").split("\n")
        tap(len(out) == 3 and out[0] == str(APP_UID) and set(out[1].split()) == {str(APP_UID), str(BERTH_GID), str(TTY_GID)}
            and out[2] == d["workspace"],
            "the shell runs as the app's uid, in groups berth and tty, in the workspace", r)
        r = rpc.call("send_keys", {"keys": "echo Space typed-by-keys Enter"})
        screen = ""
        for _ in range(25):
            time.sleep(0.2)
            screen = rpc.call("read_screen").get("result", {}).get("text", "")
            if re.search(r"^typed-by-keys$", screen, re.M):
                break
        tap("result" in r and re.search(r"^typed-by-keys$", screen, re.M), "send_keys then read_screen shows the keys and what they ran", screen)

        r = rpc.call("run_command", {"command": f"echo denied > {d['outside']}/f; echo rc=$?"})
        o = r.get("result", {}).get("output", "")
        tap("Permission denied" in o and o.endswith("rc=1") and not os.path.exists(os.path.join(d["outside"], "f")),
            "a write outside the app's scopes, from the shell, is refused (Landlock; DAC would allow it)", r)
        r = rpc.call("run_command", {"command": "echo kept > kept.txt && cat kept.txt"})
        tap(r.get("result") == {"output": "kept"}, "a write in the workspace, from the shell, works", r)
        r = rpc.call("run_command", {"command": "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 7682))' 2>&1 | tail -1"})
        tap("Permission denied" in r.get("result", {}).get("output", ""),
            "the shell may not bind another port (only the view's 7681 is granted)", r)

        # The web view came up with the first call, on 127.0.0.1 only, as the app.
        listening = []
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                p = line.split()
                if p[3] == "0A" and p[1].endswith(":1E01"):
                    listening.append((p[1], p[7]))
        tap(listening == [("0100007F:1E01", str(APP_UID))], "the web view listens on 127.0.0.1:7681 only, as the app", listening)
        st, _, _ = http(PORT)
        tap(st == 401, "no login: 401", st)
        st, _, _ = http(PORT, headers={"Authorization": basic("berth:" + "x" * 32)})
        tap(st == 401, "a wrong login: 401", st)
        st, _, body = http(PORT, headers={"Authorization": basic(login)})
        tap(st == 200 and b'<script src="xterm.js">' in body, "the right login: the page", st)
        ws = WebSocket(PORT, headers={"Authorization": basic(login)})
        tap(ws.accepted, "a websocket with the login opens", ws.status)
        if ws.accepted:
            ws.resize(120, 40)
            r = rpc.call("run_command", {"command": "echo seen-by-$((6*7))"})
            try:
                seen = b"seen-by-42" in ws.read_until(b"seen-by-42")
            except (TimeoutError, EOFError) as e:
                seen = str(e)
            tap(seen is True and r.get("result") == {"output": "seen-by-42"},
                "it sees a command that run_command typed", seen)
        else:
            tap(False, "it sees a command that run_command typed")
        ws.close()
        ws = WebSocket(PORT)
        tap(ws.status == 401, "a websocket without the login: 401", ws.status)
        ws.close()

        # The login reaches no process but the app itself.
        leaks = []
        for pid in app_pids(t):
            for what in ("cmdline", "environ"):
                data = proc_text(pid, what)
                if data and secret.encode() in data and not (what == "environ" and pid == proc.pid):
                    leaks.append(f"/proc/{pid}/{what}")
        tap(not leaks and len(app_pids(t)) >= 4,
            "the login is in no argv, nor in the environment of tmux, the shell or the view", leaks)
        view = [p for p in app_pids(t) if (proc_text(p, "cmdline") or b"").startswith(d["bin"].encode())]
        dumpable = [p for p in view if os.stat(f"/proc/{p}/environ").st_uid != 0]
        tap(view and not dumpable, "the view is not dumpable: its memory is not the app's to read", view)

        t0 = time.time()
        r = rpc.call("run_command", {"command": "sleep 30"}, timeout=40)
        tap(r.get("error") == 'command timed out after 15000ms: "sleep 30"' and time.time() - t0 >= 15,
            "a command that outlives the timeout gets the exact error", r)
        rpc.call("send_keys", {"keys": "C-c"})
        r = rpc.call("run_command", {"command": "echo after"})
        tap(r.get("result") == {"output": "after"}, "and the shell goes on", r)
        with open(d["log"], errors="replace") as f:
            text = f.read()
        tap(secret not in text, "the login is not in the app's output", None)
    finally:
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in app_pids(t):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(t, ignore_errors=True)
    while len(results) < PLAN:
        tap(False, "not reached")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
