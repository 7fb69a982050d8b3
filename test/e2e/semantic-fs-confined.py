#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The semantic-fs daemon under its real confinement on this host, without a VM: agent-init
(Landlock, seccomp, uid 9005 with group berth) runs it with the daemon policy
docs/context.md gives berth-init, its paths moved into a directory of the test's own, and
its index on a "state disk" directory bind-mounted beneath its own run directory, in a
mount namespace of the test's own, as berth-init is to lay it out. So a path the policy
does not grant, a system call the filters refuse, or a write through the bind mount that
Landlock stops shows up here before a VM. The callers are children with apps' uids.

Checks: agent-init enforces the policy fully and drops to 9005 with group berth; the
daemon listens, tags and answers a query with created_by from the file's owner; the index
is written on the state directory through the bind mount; the process is uid 9005, no new
privileges, seccomp on; and a restart in a new namespace finds the tags again.

Needs root and Landlock; skips otherwise. Prints TAP."""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BLD = os.environ["BERTH_BUILD_DIR"]
AGENT_INIT = os.path.join(BLD, "src/agent-init/agent-init")
DAEMON = os.path.join(BLD, "src/semantic-fs/semantic-fs")
spec = importlib.util.spec_from_file_location("sfs_host", os.path.join(HERE, "semantic-fs.py"))
sfs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sfs)
tap, results = sfs.tap, sfs.results
UID, BERTH = sfs.DAEMON_UID, sfs.SHARED_GID


class Confined:
    """The layout of docs/context.md under one temporary directory."""

    def __init__(self):
        t = self.t = tempfile.mkdtemp(prefix="berth-sfs-confined-")
        os.chmod(t, 0o755)
        self.context = os.path.join(t, "context")
        self.run = os.path.join(t, "run", "semantic-fs")
        self.config = os.path.join(t, "run", "semantic-fs-config")
        self.state = os.path.join(t, "state", "semantic-fs")
        self.home = os.path.join(t, "tmp", "berth-semantic-fs")
        self.bin = os.path.join(t, "bin")
        self.sock = os.path.join(self.run, "sfs.sock")
        self.log = os.path.join(t, "daemon.log")
        for d, owner, mode in ((self.context, (0, BERTH), 0o2775), (os.path.dirname(self.run), (0, 0), 0o755),
                               (self.run, (UID, BERTH), 0o710), (self.config, (0, UID), 0o750),
                               (os.path.dirname(self.state), (0, 0), 0o755), (self.state, (UID, UID), 0o700),
                               (os.path.dirname(self.home), (0, 0), 0o755), (self.home, (UID, UID), 0o700),
                               (self.bin, (0, 0), 0o755)):
            os.makedirs(d, exist_ok=True)
            os.chown(d, *owner)
            os.chmod(d, mode)
        # The mount point berth-init binds the state directory on.
        os.mkdir(os.path.join(self.run, "index"))
        os.chown(os.path.join(self.run, "index"), UID, UID)
        shutil.copy(DAEMON, self.bin)
        self.apps = os.path.join(self.config, "apps.json")
        with open(self.apps, "w") as f:
            json.dump({"schema": 1, "apps": [{"uid": sfs.FILESYSTEM, "name": "filesystem"}]}, f)
        # docs/context.md's policy, its paths here (each under /tmp, which a policy may
        # grant), and the copied binary's directory readable.
        self.policy = os.path.join(self.config, "daemon-policy.json")
        policy = {"schema": 2, "appName": "semantic-fs", "declaredCapabilities": [],
                  "writePaths": ["/dev/null", self.home, self.run],
                  "readPaths": ["/usr", "/dev/urandom", self.context, self.config, self.run, self.bin],
                  "networkPorts": [], "networkUnrestricted": False, "meshPeers": [], "bindPorts": [],
                  "cgroupLimits": {}}
        with open(self.policy, "w") as f:
            json.dump(policy, f, sort_keys=True, separators=(",", ":"))
        for p in (self.apps, self.policy):
            os.chown(p, 0, UID)
            os.chmod(p, 0o640)
        self.proc = None

    def start(self):
        since = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        env = {"PATH": "/usr/sbin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self.home, "TMPDIR": self.home,
               "BERTH_BOOT_ID": "semantic-fs-confined", "BERTH_REQUIRE_ENFORCEMENT": "1",
               "BERTH_CAPABILITY_POLICY": self.policy, "BERTH_APP_UID": str(UID), "BERTH_APP_GID": str(UID),
               "BERTH_APP_SUPPLEMENTARY_GIDS": str(BERTH),
               "BERTH_SEMANTIC_FS_SOCKET": self.sock, "BERTH_CONTEXT_MOUNT": self.context,
               "BERTH_SEMANTIC_FS_INDEX": os.path.join(self.run, "index"),
               "BERTH_SEMANTIC_FS_APPS": self.apps, "BERTH_SHARED_GID": str(BERTH)}
        script = 'mount --bind "$1" "$2" && exec "$3" "$4"'
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", self.state,
                 os.path.join(self.run, "index"), AGENT_INIT, os.path.join(self.bin, "semantic-fs")],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            if f"listening on {self.sock}" in self.text()[since:]:
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        return self.proc.returncode if self.proc else None

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def events(text):
    out = {}
    for line in text.splitlines():
        if line.startswith('{"source":"agent-init"'):
            ev = json.loads(line)
            out.setdefault(ev["event"], ev)
    return out


def status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (agent-init, a mount namespace, other uids)")
        return 0
    for prog in (AGENT_INIT, DAEMON):
        if not os.access(prog, os.X_OK):
            print(f"1..0 # SKIP {prog} is not built")
            return 0
    c = Confined()
    try:
        run(c)
    finally:
        c.stop()
        shutil.rmtree(c.t, ignore_errors=True)
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


def run(c):
    ok = c.start()
    text = c.text()
    if not ok and "ruleset=NotEnforced" in text:
        print("1..0 # SKIP this kernel has no Landlock")
        sys.exit(0)
    tap(ok, "the daemon starts under agent-init with enforcement required", text[-3000:])
    ev = events(text)
    applied = ev.get("capability_policy_applied", {})
    tap(applied.get("ruleset") == "FullyEnforced" and applied.get("networkPorts") == []
        and applied.get("app") == "semantic-fs", "its policy is fully enforced, no network", applied)
    uid = ev.get("app_uid_applied", {})
    tap(uid.get("uid") == UID and uid.get("dropped") is True, "it runs as uid 9005", uid)
    daemon_pid = None
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.readlink(f"/proc/{p}/exe").endswith("/bin/semantic-fs") and \
                        os.stat(f"/proc/{p}").st_uid == UID:
                    daemon_pid = int(p)
            except OSError:
                pass
    st = status(daemon_pid) if daemon_pid else {}
    tap(st.get("Uid", "").split() == [str(UID)] * 4 and str(BERTH) in st.get("Groups", "").split()
        and st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2",
        "uid 9005, group berth, no new privileges, seccomp on", st)

    env = sfs.Env.__new__(sfs.Env)
    env.sock, env.context = c.sock, c.context

    def fs():
        sfs.write(env, "plan.md", "The launch plan: rockets, fuel, and a window.\n")
        return sfs.calls(env, {"id": "t", "op": "tag", "path": "plan.md", "task": "okapi census"},
                         {"id": "q", "op": "query", "text": "launch plan"})
    a = sfs.as_uid(sfs.FILESYSTEM, fs)
    tap(isinstance(a, list) and a[0].get("ok") is True and a[1].get("results", [{}])[0].get("created_by") == "filesystem",
        "tag and query work inside the confinement, created_by by the owner", a)
    db = os.path.join(c.state, "index.sqlite3")
    tap(os.path.exists(db) and os.stat(db).st_uid == UID,
        "the index is written on the state directory, through the bind mount", os.listdir(c.state))
    tap(not os.listdir(os.path.join(c.run, "index")), "nothing of the index outside the namespace's mount point")
    tap(c.stop() == 0, "SIGTERM stops it", c.text()[-2000:])
    tap(c.start(), "it starts again in a new namespace", c.text()[-2000:])
    a = sfs.calls(env, {"id": "o", "op": "query", "text": "okapi"})[0]
    tap([r["path"] for r in a.get("results", [])] == ["plan.md"], "the tags are found again", a)


if __name__ == "__main__":
    sys.exit(main())
