#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trace the system calls a confined app makes, for agent-init's seccomp allow list.

    sudo tools/trace-app-syscalls.py [--build DIR] [--out FILE] [--only NAME,...]

Runs the example apps (and the test fixtures the VM tests boot) the way berth-init starts
them in the VM, without booting one: in a chroot on a copy of the cached root image stage
(vm/rootfs/stage.sh's tree: Debian's nodejs and python3), with the Python SDK installed as
vm/rootfs/build.sh installs it, each app's share at /app, its compiled policy, and
`agent-init /usr/bin/node /app/runtime.mjs` (or `python3 -m berth_sdk.runtime`) with the
environment of src/berth-init/apps.c, all under `strace -f`. Each app's exports are called
through its RPC socket, then it gets SIGTERM (or fails at startup, for the failure paths).
The egress broker runs too, with a stand-in dialer on its dial socket and origin servers
on 127.0.0.1, so that the egress app's fetch() goes all the way.

Only what runs after agent-init loaded its first seccomp filter is counted: the rest of
agent-init's own sequence, the runtime, and every process it starts. The summary (per
scenario, the union with which program needed what, the arguments of the calls the filter
looks at, the errors they returned, and a check against the table in
src/agent-init/filters.c) goes to --out, by default src/agent-init/syscalls-traced.txt.
The raw traces are left in the work directory only with --keep.

Exit status: 0, or 2 when a traced call is not in filters.c's table at all (it got the
default, ENOSYS): a runtime needs it, or the image changed; decide and record why.

Needs root (chroot, mounts, agent-init), strace, the cached stage (build the root image
once: vm/rootfs/build.sh), a build directory with agent-init, agent-init-probe and
egress-broker, and Berth's node_modules for the bundler (npm ci). Never boots a VM, and never
changes the cache: it works on a copy.
"""
import argparse
import collections
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILTERS_C = os.path.join(SRC, "src/agent-init/filters.c")
APP_UID = 10000  # APP_UID_BASE, the first app of a VM (src/berth-init/apps.h)
BERTH_GID = 9999  # BERTH_GROUP_GID
EGRESS_UID = 9002  # src/berth-init/egress.h
BROKER_PORT = 8090
READ_BASELINE = ["/usr", "/bin", "/sbin", "/lib", "/etc", "/proc", "/dev"]
START_TIMEOUT = 120
# What the filter looks at, or what says which feature a call was for: the argument
# positions recorded per system call.
ARGS_KEPT = {
    "socket": (0, 3), "socketpair": (0, 3), "clone": (1, 2), "unshare": (0, 1),
    "prctl": (0, 1), "personality": (0, 1), "ioctl": (1, 2), "fcntl": (1, 2),
    "setsockopt": (1, 3), "getsockopt": (1, 3), "madvise": (2, 3), "arch_prctl": (0, 1),
    "seccomp": (0, 1), "mprotect": (2, 3), "rt_sigprocmask": (0, 1), "futex": (1, 2),
    "clock_gettime": (0, 1), "clock_nanosleep": (0, 1), "prlimit64": (1, 2), "kill": (1, 2),
    "tgkill": (2, 3), "membarrier": (0, 1), "getrandom": (2, 3), "mmap": (2, 4),
    "sched_getaffinity": (0, 0), "wait4": (2, 3), "shutdown": (1, 2), "epoll_ctl": (1, 2),
}


def say(msg):
    print(f"[trace] {msg}", file=sys.stderr, flush=True)


def die(msg):
    say(f"error: {msg}")
    sys.exit(1)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


# --- the root tree ----------------------------------------------------------------------


def stage_tree(cache):
    """The stage vm/rootfs/stage.sh would use now (the same key), else the newest one."""
    h = hashlib.sha256()
    for f in ("vm/rootfs/stage.sh", "vm/rootfs/packages.txt", "vm/lib.sh"):
        with open(os.path.join(SRC, f), "rb") as fh:
            h.update(fh.read())
    base = os.path.join(cache, "rootfs-stage")
    want = os.path.join(base, h.hexdigest()[:16], "tree")
    if os.path.isdir(want):
        return want, False
    trees = [os.path.join(base, d, "tree") for d in os.listdir(base) if os.path.isdir(os.path.join(base, d, "tree"))] if os.path.isdir(base) else []
    if not trees:
        die(f"no root image stage under {base}: build the root image once (vm/rootfs/build.sh)")
    return max(trees, key=os.path.getmtime), True


def package_versions(tree):
    lock = os.path.join(os.path.dirname(tree), "packages.installed")
    want = {"nodejs", "python3.11", "libc6", "libuv1", "libssl3"}
    out = []
    with open(lock) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].split(":")[0] in want:
                out.append(f"{parts[0]} {parts[1]}")
    return out


class Root:
    """A copy of the stage with Berth's guest pieces, and the VM's mounts."""

    def __init__(self, stage, work, build):
        self.path = os.path.join(work, "root")
        self.mounts = []
        say(f"copying {stage} to {self.path}")
        run(["cp", "-a", stage, self.path])
        site = self.j("/usr/lib/python3/dist-packages/berth_sdk")
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(os.path.join(SRC, "sdk/python/berth_sdk"), site,
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(SRC, "sdk/capability-model.json"), site)
        for b in ("agent-init/agent-init", "egress-broker/egress-broker"):
            shutil.copy(os.path.join(build, "src", b), self.j("/usr/sbin"))
        for d in ("/workspace", "/context", "/state", "/app"):
            os.makedirs(self.j(d), exist_ok=True)
        # The image's byte-compiled SDK (build.sh): the runtime finds .pyc files, as in the VM.
        run(["chroot", self.path, "/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8",
             "/usr/bin/python3", "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash",
             "/usr/lib/python3/dist-packages/berth_sdk"], stdout=subprocess.DEVNULL)
        # berth-init's mounts (src/berth-init/main.c), /dev from the host.
        self.mount(["-t", "proc", "-o", "nosuid,nodev,noexec", "proc"], "/proc")
        self.mount(["-t", "sysfs", "-o", "nosuid,nodev,noexec", "sysfs"], "/sys")
        self.mount(["--bind", "/dev"], "/dev")
        self.mount(["-t", "tmpfs", "-o", "nosuid,nodev,mode=0755,size=64m", "tmpfs"], "/run")
        self.mount(["-t", "tmpfs", "-o", "nosuid,nodev,mode=1777,size=1g", "tmpfs"], "/tmp")
        os.makedirs(self.j("/run/berth/policy"), exist_ok=True)

    def j(self, p):
        return os.path.join(self.path, p.lstrip("/"))

    def mount(self, args, target):
        run(["mount"] + args + [self.j(target)])
        self.mounts.append(self.j(target))

    def close(self):
        for m in reversed(self.mounts):
            subprocess.run(["umount", m])
        self.mounts = []
        with open("/proc/self/mounts") as f:
            left = [l.split()[1] for l in f if l.split()[1].startswith(self.path + "/")]
        if left:
            say(f"still mounted, not removing {self.path}: {left}")
            return False
        return True


# --- apps ---------------------------------------------------------------------------------


def load_manifest(share):
    import yaml  # the host's PyYAML; the bundler has validated the file already

    with open(os.path.join(share, "berth.yml")) as f:
        return yaml.safe_load(f)


def compile_policy(manifest, app, cwd="/app", bind_ports=()):
    """capability_policy_compile() (src/capability/policy.c) for what these apps declare."""
    write, reads, ports, unrestricted = ["/dev/null", f"/tmp/{app}", f"/run/berth/{app}"], [], [], False
    for cap in manifest.get("capabilities") or []:
        ns, action, scope = cap.split(":", 2)
        scope = scope[:-2] if scope.endswith("/*") else scope
        if ns == "filesystem" and action == "write":
            write.append(scope)
        elif ns == "filesystem" and action == "read":
            reads.append(scope)
        elif ns == "network" and action == "connect":
            if scope == "*":
                unrestricted = True
            else:
                ports.append(int(scope))
    read = READ_BASELINE + [f"/run/berth/{app}", cwd] + reads + write
    uniq = lambda xs: list(dict.fromkeys(xs))
    return {"appName": app, "bindPorts": list(bind_ports), "cgroupLimits": {},
            "declaredCapabilities": list(manifest.get("capabilities") or []), "meshPeers": [],
            "networkPorts": uniq(ports), "networkUnrestricted": unrestricted,
            "readPaths": uniq(read), "schema": 2, "writePaths": uniq(write)}


def write_policy(root, path, policy, gid):
    p = root.j(path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        json.dump(policy, f, sort_keys=True, separators=(",", ":"))
    os.chown(p, 0, gid)
    os.chmod(p, 0o640)


def app_env(name, python, extra=None):
    """build_env() of src/berth-init/apps.c for the only app of a VM."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"/tmp/{name}", "TMPDIR": f"/tmp/{name}",
           "XDG_CONFIG_HOME": f"/tmp/{name}/.config", "XDG_CACHE_HOME": f"/tmp/{name}/.cache",
           "LANG": "C.UTF-8", "BERTH_APP_NAME": name, "BERTH_BOOT_ID": "trace-boot",
           "BERTH_RPC_SOCKET": f"/run/berth/{name}/rpc.sock", "BERTH_MANIFEST_PATH": "/app/berth.yml",
           "BERTH_APP_ENTRY": "/app/src/app.py" if python else "/app/dist/index.mjs",
           "BERTH_WORKSPACE_ROOT": "/workspace", "BERTH_REQUIRE_ENFORCEMENT": "1",
           "BERTH_CAPABILITY_POLICY": f"/run/berth/policy/{name}.json",
           "BERTH_APP_UID": str(APP_UID), "BERTH_APP_GID": str(APP_UID),
           "BERTH_APP_SUPPLEMENTARY_GIDS": str(BERTH_GID)}
    env.update(extra or {})
    return env


class Traced:
    """One process tree under strace: `chroot ROOT env -i -C CWD ENV... agent-init ARGV`."""

    def __init__(self, root, label, argv, env, cwd, work):
        self.label = label
        self.trace = os.path.join(work, "traces", label + ".trace")
        self.log = os.path.join(work, "traces", label + ".log")
        # berth-init's report pipe (BERTH_REPORT_FD): agent-init writes its audit lines
        # there too, after its first filter, and closes it at the exec.
        report = os.open(os.path.join(work, "traces", label + ".report"),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        env = dict(env, BERTH_REPORT_FD=str(report))
        cmd = ["strace", "-f", "-qq", "-e", "trace=all", "-o", self.trace, "chroot", root.path,
               "/usr/bin/env", "-i", "-C", cwd] + [f"{k}={v}" for k, v in env.items()] + \
              ["/usr/sbin/agent-init"] + argv
        self.logf = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=self.logf, start_new_session=True, pass_fds=(report,))
        os.close(report)
        self.pid = None
        end = time.time() + 30
        while self.pid is None and time.time() < end and self.proc.poll() is None:
            # strace's own child once it has exec'd: chroot, then env, agent-init and the
            # runtime, one pid. strace forks short-lived test children of its own first;
            # those never exec.
            for pid in self.tree():
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        argv0 = os.path.basename(f.read().split(b"\0")[0])
                except OSError:
                    continue
                if ppid == self.proc.pid and argv0 and argv0 != b"strace":
                    self.pid = pid
            time.sleep(0.05)

    def tree(self):
        """Every process strace traces: its session, but strace itself."""
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != self.proc.pid:
                try:
                    if os.getsid(int(d)) == self.proc.pid:
                        out.append(int(d))
                except OSError:
                    pass
        return out

    def output(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_for(self, text, timeout=START_TIMEOUT):
        end = time.time() + timeout
        while time.time() < end:
            if text in self.output():
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"{self.label}: no {text!r} in its output:\n{self.output()[-3000:]}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        # What the last call left running (a connection's thread) settles first: SIGTERM
        # then meets the runtime idle, the way a VM's stop does.
        time.sleep(1)
        if self.pid is None and self.proc.poll() is None:
            raise RuntimeError(f"{self.label}: cannot tell which process strace runs")
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
                say(f"{self.label}: {signal.Signals(sig).name} to pid {self.pid}")
            except ProcessLookupError:
                pass
        return self.finish(timeout)

    def finish(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # The traced processes, not strace: killed, strace would lose what it buffered.
            say(f"{self.label}: still running {timeout} s after the signal, killing it")
            for pid in self.tree():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
        self.logf.close()
        return self.proc.returncode


class Rpc:
    """The line-JSON protocol on an app's socket (docs/sdk.md), one request at a time."""

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
        self.buf = b""
        self.n = 0
        self.answers = []

    def send_raw(self, line):
        self.s.sendall(line.encode() + b"\n")

    def call(self, export, inp=None):
        self.n += 1
        req = {"id": str(self.n), "export": export}
        if inp is not None:
            req["input"] = inp
        self.send_raw(json.dumps(req))
        while b"\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise RuntimeError(f"the app closed the connection during {export}")
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        answer = json.loads(line)
        self.answers.append((export, answer))
        return answer

    def close(self):
        self.s.close()


def share_of(work, src, bundle):
    out = os.path.join(work, "shares", os.path.basename(src))
    if os.path.exists(out):
        return out
    if bundle:
        run(["node", os.path.join(SRC, "sdk/node/bundle.mjs"), src, out], stdout=subprocess.DEVNULL)
    else:
        shutil.copytree(src, out)
    return out


def install_share(root, share):
    app = root.j("/app")
    shutil.rmtree(app)
    shutil.copytree(share, app)
    for d in ("/workspace", "/context"):
        shutil.rmtree(root.j(d))
        os.makedirs(root.j(d))
        os.chown(root.j(d), APP_UID, APP_UID)


def start_app(root, work, label, share, name, python, extra_env=None, bind_ports=()):
    install_share(root, share)
    manifest = load_manifest(share)
    write_policy(root, f"/run/berth/policy/{name}.json",
                 compile_policy(manifest, name, bind_ports=bind_ports), APP_UID)
    argv = ["/usr/bin/python3", "-m", "berth_sdk.runtime"] if python else ["/usr/bin/node", "/app/runtime.mjs"]
    return Traced(root, label, argv, app_env(name, python, extra_env), "/app", work)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- the scenarios -----------------------------------------------------------------------
# Each returns the list of Traced runs it made; answers of the calls go to the log.

SCENARIOS = collections.OrderedDict()


def scenario(name, what):
    def reg(fn):
        SCENARIOS[name] = (fn, what)
        return fn
    return reg


def served(ctx, label, share, name, python, calls, extra_env=None, bind_ports=(), after=None):
    t = start_app(ctx.root, ctx.work, label, share, name, python, extra_env, bind_ports)
    try:
        t.wait_for(f'"{name}" ready')
        rpc = Rpc(ctx.root.j(f"/run/berth/{name}/rpc.sock"))
        for c in calls:
            if isinstance(c, str):
                rpc.send_raw(c)
            else:
                ans = rpc.call(*c)
                ctx.note(label, c[0], ans)
        if after:
            after(t, rpc)
        rpc.close()
    finally:
        rc = t.stop()
    ctx.note(label, "SIGTERM", {"exit": rc})
    return [t]


@scenario("notes", "apps/notes (Node): add, list, complete, a bad input, an unknown export, a non-JSON line; SIGTERM")
def sc_notes(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/notes"), True)
    calls = [("add_note", {"text": "buy milk"}), ("add_note", {"text": "write the report"}),
             ("list_notes", None), ("add_note", {"text": 5}), ("no_such_export", {}),
             "this is not JSON", "", ("list_notes", None)]

    def complete(t, rpc):
        notes = rpc.call("list_notes")["result"]["notes"]
        ctx.note("notes", "complete_note", rpc.call("complete_note", {"id": notes[0]["id"]}))
        ctx.note("notes", "complete_note", rpc.call("complete_note", {"id": "nope"}))
    return served(ctx, "notes", share, "notes", False, calls, after=complete)


@scenario("notes-http", "apps/notes (Node) also serving RPC over HTTP (BERTH_HTTP_RPC_PORT): /healthz, POST /rpc; SIGTERM")
def sc_notes_http(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/notes"), True)
    port = free_port()

    def http(t, rpc):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            ctx.note("notes-http", "GET /healthz", {"status": r.status})
        req = urllib.request.Request(f"http://127.0.0.1:{port}/rpc", method="POST",
                                     data=json.dumps({"id": "h", "export": "add_note", "input": {"text": "over http"}}).encode(),
                                     headers={"Authorization": "Bearer trace-token", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            ctx.note("notes-http", "POST /rpc", json.loads(r.read()))
    return served(ctx, "notes-http", share, "notes", False, [("list_notes", None)],
                  {"BERTH_HTTP_RPC_PORT": str(port), "BERTH_HTTP_RPC_TOKEN": "trace-token"},
                  bind_ports=(port,), after=http)


@scenario("node-startup-failure", "apps/notes (Node) with an entry that does not exist: the fatal startup error, exit 1")
def sc_node_fail(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/notes"), True)
    t = start_app(ctx.root, ctx.work, "node-startup-failure", share, "notes", False,
                  {"BERTH_APP_ENTRY": "/app/dist/missing.mjs"})
    ctx.note("node-startup-failure", "exit", {"exit": t.finish()})
    return [t]


@scenario("filesystem", "apps/filesystem (Node): files in /workspace and /context, the network and namespace probes (which run python3), a path outside; SIGTERM")
def sc_filesystem(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/filesystem"), True)
    calls = [("write_file", {"path": "a/b.txt", "content": "hello"}), ("read_file", {"path": "a/b.txt"}),
             ("list_files", None), ("truncate_file", {"path": "a/b.txt", "length": 2}),
             ("read_file", {"path": "../etc/shadow"}), ("write_file", {"path": "../etc/x", "content": "x"}),
             ("write_context_file", {"path": "c.txt", "content": "ctx"}), ("read_context_file", {"path": "c.txt"}),
             ("probe_network_connect", {"host": "127.0.0.1", "port": 80}),
             ("probe_network_connect", {"host": "localhost", "port": 80}),
             ("probe_network_udp", {"host": "127.0.0.1", "port": 53}),
             ("probe_raw_socket", {"host": "127.0.0.1"}), ("probe_user_namespace", None),
             ("publish_context_event", {"topic": "t", "payload": {"a": 1}}),
             ("tag_context_file", {"path": "c.txt", "task": "x"}), ("query_context", {"text": "x"})]
    return served(ctx, "filesystem", share, "filesystem", False, calls)


@scenario("mcp-slow", "test/e2e/fixtures/mcp-slow (Node, TypeScript): a timer, an echo, an export that throws; SIGTERM")
def sc_mcp_slow(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "test/e2e/fixtures/mcp-slow"), True)
    calls = [("sleep", {"ms": 300}), ("echo", {"text": "hi"}), ("fail", {"message": "thrown on purpose"}),
             ("env_length", {"name": "PATH"})]
    return served(ctx, "mcp-slow", share, "mcp-slow", False, calls)


@scenario("echo", "test/e2e/fixtures/echo (Node without the SDK): one request; SIGTERM through its own handler")
def sc_echo(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "test/e2e/fixtures/echo"), False)
    return served(ctx, "echo", share, "echo", False, [("anything", {"x": 1})])


@scenario("limits", "test/e2e/fixtures/limits (Node without the SDK): the static probe, a python3 child allocating 400 MiB, spawning /bin/sleep until told to stop; SIGTERM")
def sc_limits(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "test/e2e/fixtures/limits"), False)
    shutil.copy(os.path.join(ctx.build, "src/agent-init/agent-init-probe"), os.path.join(share, "probe"))
    calls = [("ping", None),
             ("probe", {"ops": ["connect=7000", "connect=7001", "io-uring", "vsock", "unshare-user", "kill=1", "ptrace=1"]}),
             ("memory_hog", None), ("fork_bomb", None)]
    return served(ctx, "limits", share, "limits", False, calls)


@scenario("hello-world-py", "apps/hello-world-py (Python): greet, a bad input, publish, an unknown export, a non-JSON line; SIGTERM")
def sc_hello_py(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/hello-world-py"), True)
    calls = [("greet", {"name": "trace"}), ("greet", {"nom": 1}), "not JSON either",
             ("publish_file_created", {"path": "/workspace/x", "created_by": "trace"}),
             ("no_such_export", None), ("greet", {"name": "again"})]
    return served(ctx, "hello-world-py", share, "hello-world-py", True, calls)


@scenario("python-startup-failure", "apps/hello-world-py (Python) with an entry that does not exist: the fatal startup error, exit 1")
def sc_py_fail(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "apps/hello-world-py"), True)
    t = start_app(ctx.root, ctx.work, "python-startup-failure", share, "hello-world-py", True,
                  {"BERTH_APP_ENTRY": "/app/src/missing.py"})
    ctx.note("python-startup-failure", "exit", {"exit": t.finish()})
    return [t]


@scenario("envprobe", "test/e2e/fixtures/envprobe (Python): the environment, /proc/cmdline, another process's environ; SIGTERM")
def sc_envprobe(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "test/e2e/fixtures/envprobe"), True)
    calls = [("env", {"names": ["PATH", "NOPE"]}), ("cmdline", None), ("environ_of", {"pid": 1})]
    return served(ctx, "envprobe", share, "envprobe", True, calls)


@scenario("logger", "test/e2e/fixtures/logger (Python): one line, then a flood on stdout; SIGTERM")
def sc_logger(ctx):
    share = share_of(ctx.work, os.path.join(SRC, "test/e2e/fixtures/logger"), True)
    return served(ctx, "logger", share, "logger", True,
                  [("say", {"text": "hello log"}), ("flood", {"lines": 200, "size": 300})])


class Origin(threading.Thread):
    """An HTTP (or HTTPS) server on 127.0.0.1 answering every request with its path."""

    def __init__(self, context=None):
        super().__init__(daemon=True)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"path": self.path, "tls": context is not None}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.start()

    def run(self):
        self.httpd.serve_forever()


class Dialer(threading.Thread):
    """berth-init's dial socket and berth-vmm's dialer in one: one line in, one line out,
    then bytes both ways to the origin (TLS for ports 443 and 8443)."""

    def __init__(self, path, plain, tls):
        super().__init__(daemon=True)
        self.plain, self.tls = plain, tls
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        os.chown(path, 0, EGRESS_UID)
        os.chmod(path, 0o660)
        self.sock.listen(64)
        self.start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def close(self):
        # A bound socket, and every socket accepted from it, keeps the chroot's /run busy;
        # shutdown() wakes the accept().
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def serve(self, c):
        with c:
            self.dial(c)

    def dial(self, c):
        line = b""
        while not line.endswith(b"\n"):
            d = c.recv(1)
            if not d:
                return
            line += d
        req = json.loads(line)
        port = self.tls if req["port"] in (443, 8443) else self.plain
        up = socket.create_connection(("127.0.0.1", port))
        c.sendall(b'{"ok":true,"address":"127.0.0.1"}\n')

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        back = threading.Thread(target=pump, args=(up, c), daemon=True)
        back.start()
        pump(c, up)
        back.join()
        up.close()


@scenario("outbound", "test/e2e/fixtures/outbound (Node, egress): fetch() through configureEgressProxy(), CONNECT and TLS through the broker, plain HTTP through it; SIGTERM")
def sc_outbound(ctx):
    root, work = ctx.root, ctx.work
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", BROKER_PORT))
        except OSError:
            die(f"127.0.0.1:{BROKER_PORT} is taken on this host: the egress broker needs it")
    share = share_of(work, os.path.join(SRC, "test/e2e/fixtures/outbound"), True)
    install_share(root, share)
    manifest = load_manifest(share)
    policy = compile_policy(manifest, "outbound")
    write_policy(root, "/run/berth/policy/outbound.json", policy, APP_UID)
    # src/berth-init/egress.c: the directory, the policy copy, the broker's own policy.
    edir = root.j("/run/berth/egress")
    os.makedirs(edir)
    os.chown(edir, 0, EGRESS_UID)
    os.chmod(edir, 0o750)
    write_policy(root, "/run/berth/egress/policy.json", policy, EGRESS_UID)
    write_policy(root, "/run/berth/egress/broker-policy.json",
                 {"appName": "berth-egress", "bindPorts": [BROKER_PORT], "cgroupLimits": {},
                  "declaredCapabilities": [], "meshPeers": [], "networkPorts": [],
                  "networkUnrestricted": False, "readPaths": ["/usr", "/run/berth/egress"],
                  "schema": 2, "writePaths": ["/dev/null", "/tmp/berth-egress"]}, EGRESS_UID)
    key, cert = os.path.join(work, "origin.key"), os.path.join(work, "origin.pem")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=allowed.test",
         "-addext", "subjectAltName=DNS:allowed.test", "-keyout", key, "-out", cert],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls_ctx.load_cert_chain(cert, key)
    plain, tls = Origin(), Origin(tls_ctx)
    dialer = Dialer(root.j("/run/berth/egress/dial.sock"), plain.port, tls.port)
    ctx.cleanups += [dialer.close, plain.httpd.shutdown, tls.httpd.shutdown]
    broker_env = {"PATH": "/usr/sbin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp/berth-egress",
                  "TMPDIR": "/tmp/berth-egress", "BERTH_BOOT_ID": "trace-boot", "BERTH_REQUIRE_ENFORCEMENT": "1",
                  "BERTH_CAPABILITY_POLICY": "/run/berth/egress/broker-policy.json",
                  "BERTH_APP_UID": str(EGRESS_UID), "BERTH_APP_GID": str(EGRESS_UID),
                  "BERTH_EGRESS_POLICY": "/run/berth/egress/policy.json",
                  "BERTH_EGRESS_DIALER_SOCKET": "/run/berth/egress/dial.sock",
                  "BERTH_EGRESS_BROKER_PORT": str(BROKER_PORT)}
    broker = Traced(root, "egress-broker", ["/usr/sbin/egress-broker"], broker_env, "/", work)
    runs = [broker]
    try:
        broker.wait_for("listening on")
        with open(cert) as f:
            ca = f.read()
        calls = [("env", None), ("probe_broker", None),
                 ("fetch_text", {"url": "http://allowed.test/fetched"}),
                 ("fetch_text", {"url": "https://allowed.test/fetched-tls"}),
                 ("tunnel", {"host": "allowed.test", "port": 443, "path": "/over-tls", "ca": ca}),
                 ("proxy_get", {"url": "http://allowed.test/plain"}),
                 ("raw", {"data": "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n"}),
                 ("probe_dial_socket", None)]
        runs += served(ctx, "outbound", share, "outbound", False, calls,
                       {"BERTH_EGRESS_PROXY_URL": f"http://127.0.0.1:{BROKER_PORT}"})
    finally:
        ctx.note("egress-broker", "SIGTERM", {"exit": broker.stop()})
    return runs


@scenario("probe", "agent-init-probe (static glibc, the e2e tests' probe): what its legitimate operations need")
def sc_probe(ctx):
    root = ctx.root
    shutil.copy(os.path.join(ctx.build, "src/agent-init/agent-init-probe"), root.j("/usr/sbin/probe"))
    ws = root.j("/workspace")
    shutil.rmtree(ws)
    os.makedirs(ws)
    os.chown(ws, APP_UID, APP_UID)
    write_policy(root, "/run/berth/policy/probe.json",
                 compile_policy({"capabilities": ["filesystem:write:/workspace"]}, "probe"), APP_UID)
    env = app_env("probe", False)
    ops = ["write=/workspace/f", "read=/workspace/f", "readdir=/workspace", "truncate=/workspace/f",
           "mkdir=/workspace/d", "symlink=/workspace/f:/workspace/l", "rename=/workspace/f:/workspace/g",
           "unlink=/workspace/g", "write=/etc/x", "ids", "status", "fds", "setuid0", "tcp-socket",
           "unix-socket", "udp", "connect=80", "bind=80", "fork", "kill=1", "abstract=x"]
    t = Traced(root, "probe", ["/usr/sbin/probe"] + ops, env, "/", ctx.work)
    ctx.note("probe", "exit", {"exit": t.finish()})
    return [t]


# --- reading the traces --------------------------------------------------------------------

LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^([a-z_][a-z0-9_]*)\((.*)$")
RESUMED = re.compile(r"^<\.\.\. ([a-z_][a-z0-9_]*) resumed>(.*)$")
RET = re.compile(r"\)\s+=\s+(-?\d+|\?|0x[0-9a-f]+)(?:\s+([A-Z][A-Z0-9_]+))?")


def split_args(s):
    """Top-level comma split of strace's argument text (brackets, braces, quotes)."""
    out, depth, cur, q, esc = [], 0, "", False, False
    for ch in s:
        if q:
            cur += ch
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                q = False
            continue
        if ch == '"':
            q = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                out.append(cur.strip())
                return out
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def norm_arg(name, i, a):
    a = re.sub(r"0x[0-9a-f]{6,}", "ADDR", a)
    if name in ("socket", "socketpair") and i == 1:
        a = "|".join(p for p in a.split("|") if p not in ("SOCK_CLOEXEC", "SOCK_NONBLOCK")) or a
    if name == "clone" and i == 1:
        a = a.replace("flags=", "")
    if name == "futex" and i == 1:
        a = a.replace("_PRIVATE", "").replace("|FUTEX_CLOCK_REALTIME", "")
    if name == "mmap" and i == 3:
        a = "|".join(p for p in a.split("|") if p not in ("MAP_FIXED", "MAP_DENYWRITE", "MAP_NORESERVE", "MAP_STACK"))
    return a


class Parsed:
    """What one trace says, counting only calls made under the seccomp filter."""

    def __init__(self, path, scenario):
        with open(path, errors="replace") as f:
            lines = [m.groups() for m in (LINE.match(l.rstrip("\n")) for l in f) if m]
        marker, births, execs = {}, {}, collections.defaultdict(list)
        pending = {}
        events = []  # (idx, pid, name, args_text, ret, err)
        for idx, (pid, rest) in enumerate(lines):
            pid = int(pid)
            if rest.startswith(("---", "+++")):
                continue
            m = RESUMED.match(rest)
            if m:
                name, tail = m.group(1), m.group(2)
                start = pending.pop((pid, name), None)
                r = RET.search(tail)
                if start is not None and r:
                    i = start
                    events[i] = events[i][:4] + (r.group(1), r.group(2))
                continue
            m = CALL.match(rest)
            if not m:
                continue
            name, tail = m.group(1), m.group(2)
            r = RET.search(tail)
            unfinished = tail.endswith("<unfinished ...>")
            if unfinished:
                tail = tail[: -len("<unfinished ...>")].rstrip()
            events.append((idx, pid, name, tail, r.group(1) if r and not unfinished else None,
                           r.group(2) if r and not unfinished else None))
            if unfinished:
                pending[(pid, name)] = len(events) - 1
        # Pass 1: where each pid loaded its first filter, who made whom, what each exec'd.
        for ev in events:
            idx, pid, name, tail, ret, err = ev
            # libseccomp probes the kernel first (calls that fail with EFAULT or EINVAL): the
            # marker is the first filter that loaded.
            if name == "seccomp" and tail.startswith("SECCOMP_SET_MODE_FILTER") and ret == "0" and pid not in marker:
                marker[pid] = idx
            if name in ("clone", "clone3", "fork", "vfork") and ret and ret.isdigit() and int(ret) > 0:
                births[int(ret)] = (pid, idx)
            if name == "execve" and ret == "0":
                prog = re.match(r'"([^"]*)"', tail)
                execs[pid].append((idx, os.path.basename(prog.group(1)) if prog else "?"))
        self.scenario = scenario
        self.calls = collections.Counter()
        self.who = collections.defaultdict(set)
        self.args = collections.defaultdict(collections.Counter)
        self.errors = collections.defaultdict(collections.Counter)
        self.programs = set()

        def confined_from(pid, seen=()):
            if pid in births and pid not in seen:
                parent, at = births[pid]
                p = confined_from(parent, seen + (pid,))
                if p is not None and p < at:
                    return -1
            return marker.get(pid)

        def program(pid, idx, seen=()):
            before = [p for i, p in execs.get(pid, []) if i < idx]
            if before:
                return before[-1]
            if pid in births and pid not in seen:
                parent, at = births[pid]
                return program(parent, at, seen + (pid,))
            return "agent-init"

        cache = {}
        for idx, pid, name, tail, ret, err in events:
            if pid not in cache:
                cache[pid] = confined_from(pid)
            start = cache[pid]
            if start is None or idx <= start:
                continue
            prog = program(pid, idx)
            self.programs.add(prog)
            self.calls[name] += 1
            self.who[name].add(prog)
            if err:
                self.errors[name][err] += 1
            if name in ARGS_KEPT:
                lo, hi = ARGS_KEPT[name]
                a = split_args(tail)
                if hi > lo:
                    key = ", ".join(norm_arg(name, i, a[i]) for i in range(lo, min(hi, len(a))))
                    self.args[name][f"{prog}: {key}"] += 1


def filter_table():
    """The verdicts of src/agent-init/filters.c's table: name -> ALLOW|ARGS|REFUSE|NOSYS."""
    with open(FILTERS_C) as f:
        text = f.read()
    return {m.group(2): m.group(1) for m in re.finditer(r"\b(ALLOW|ARGS|REFUSE|NOSYS)\(\s*\"([a-z0-9_]+)\"", text)}


def report(ctx, parsed, out):
    table = filter_table()
    union = collections.defaultdict(set)
    programs = collections.defaultdict(set)
    for p in parsed:
        for name in p.calls:
            union[name].add(p.scenario)
            programs[name] |= p.who[name]
    lines = []
    w = lines.append
    w("# The system calls confined apps make, traced by tools/trace-app-syscalls.py: the evidence")
    w("# behind the seccomp allow list in src/agent-init/filters.c. Regenerate, do not edit:")
    w(f"#     sudo {ctx.command}")
    w("#")
    w(f"# stage:      rootfs-stage/{os.path.basename(os.path.dirname(ctx.stage))}"
      f"{' (NOT the key vm/rootfs/stage.sh computes now: the newest there is)' if ctx.stale else ' (the key vm/rootfs/stage.sh computes)'}")
    for v in ctx.versions:
        w(f"#             {v}")
    w(f"# agent-init: {ctx.agent_init_kind}")
    w(f"# host:       Linux {os.uname().release}, strace {ctx.strace_version}")
    w("# Counted: every call after agent-init loaded its first seccomp filter, in that process and")
    w("# every process it started (threads and children: the runtime, python3 children, /bin/sleep).")
    w("")
    w("## Scenarios")
    for name, p in zip(ctx.ran, parsed):
        w(f"{name}: {SCENARIOS[name][1]}")
        w(f"    programs: {', '.join(sorted(p.programs))}; {len(p.calls)} distinct calls, {sum(p.calls.values())} in all")
        for label, op, ans in ctx.notes.get(name, []):
            w(f"    {label} {op} -> {ans}")
    w("")
    w("## Union: call, the programs that made it, the scenarios, the table's verdict")
    for name in sorted(union):
        verdict = table.get(name, "default (ENOSYS)")
        w(f"{name:24} {verdict:7} {','.join(sorted(programs[name])):40} {','.join(s for s in ctx.ran if s in union[name])}")
    w("")
    w("## Arguments of the calls the filter (or the reader) looks at: program: arguments  count")
    for name in sorted(ARGS_KEPT):
        merged = collections.Counter()
        for p in parsed:
            merged.update(p.args.get(name, {}))
        for k, n in sorted(merged.items()):
            w(f"{name:16} {k}  x{n}")
    w("")
    w("## Errors the traced calls returned (a refusal by the filter, Landlock or the kernel, or")
    w("## an ordinary failure such as ENOENT): call  errno  count  scenarios")
    for name in sorted(union):
        merged = collections.Counter()
        where = collections.defaultdict(set)
        for p in parsed:
            for e, n in p.errors.get(name, {}).items():
                merged[e] += n
                where[e].add(p.scenario)
        for e, n in sorted(merged.items()):
            w(f"{name:24} {e:16} x{n:<6} {','.join(s for s in ctx.ran if s in where[e])}")
    w("")
    w("## Check against the table")
    missing = [n for n in sorted(union) if table.get(n) not in ("ALLOW", "ARGS")]
    w("traced but not allowed: " + (", ".join(f"{n} ({table.get(n, 'default ENOSYS')})" for n in missing) or "(none)"))
    margin = sorted(n for n, v in table.items() if v in ("ALLOW", "ARGS") and n not in union)
    w(f"allowed but not traced (the margin, each with its reason in filters.c): {len(margin)}")
    for i in range(0, len(margin), 8):
        w("    " + " ".join(margin[i:i + 8]))
    allowed = sum(1 for v in table.values() if v in ("ALLOW", "ARGS"))
    w(f"table: {allowed} allowed ({sum(1 for v in table.values() if v == 'ARGS')} of them with argument rules), "
      f"{sum(1 for v in table.values() if v == 'REFUSE')} refused with EPERM, "
      f"{sum(1 for v in table.values() if v == 'NOSYS')} with ENOSYS; traced: {len(union)}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return missing


class Ctx:
    def __init__(self):
        self.notes = collections.defaultdict(list)
        self.cleanups = []

    def note(self, label, op, ans):
        # What changes from run to run (ids, pids, dates) is masked: the summary is
        # committed, and a rerun should show only what really changed.
        text = json.dumps(ans, sort_keys=True)
        text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)
        text = re.sub(r"Date: [^\\]*", "Date: <date>", text)
        text = re.sub(r'"pid": \d+', '"pid": <pid>', text)
        text = text if len(text) <= 160 else text[:157] + "..."
        self.notes[self.current].append((label, op, text))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"), help="meson build dir (agent-init, the probe, egress-broker)")
    ap.add_argument("--agent-init", help="trace under this agent-init instead of the build's")
    ap.add_argument("--out", default=os.path.join(SRC, "src/agent-init/syscalls-traced.txt"))
    ap.add_argument("--only", help="comma list of scenarios: " + ",".join(SCENARIOS))
    ap.add_argument("--keep", action="store_true", help="keep the work directory (raw traces)")
    ap.add_argument("--cache", default=os.environ.get("BERTH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "berth"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        die("run as root: chroot, mounts and agent-init need it")
    if not shutil.which("strace"):
        die("strace is not installed")
    build = os.path.abspath(args.build)
    for b in ("agent-init/agent-init", "agent-init/agent-init-probe", "egress-broker/egress-broker"):
        if not os.access(os.path.join(build, "src", b), os.X_OK):
            die(f"{build}/src/{b} is missing: build first (ninja -C {build})")
    only = args.only.split(",") if args.only else list(SCENARIOS)
    for o in only:
        if o not in SCENARIOS:
            die(f"no scenario {o!r}; there are: {', '.join(SCENARIOS)}")
    ctx = Ctx()
    ctx.build = build
    ctx.stage, ctx.stale = stage_tree(args.cache)
    ctx.versions = package_versions(ctx.stage)
    ctx.strace_version = subprocess.run(["strace", "-V"], capture_output=True, text=True).stdout.split("\n")[0].split()[-1]
    ctx.command = "tools/trace-app-syscalls.py --build BUILD_DIR" + (f" --only {args.only}" if args.only else "")
    ctx.work = tempfile.mkdtemp(prefix="berth-trace.")
    os.chmod(ctx.work, 0o755)
    os.makedirs(os.path.join(ctx.work, "traces"))
    os.makedirs(os.path.join(ctx.work, "shares"))
    ctx.root = None
    ok = False
    unlisted = []
    try:
        ctx.root = Root(ctx.stage, ctx.work, build)
        ai = args.agent_init or os.path.join(build, "src/agent-init/agent-init")
        shutil.copy(ai, ctx.root.j("/usr/sbin/agent-init"))
        ctx.agent_init_kind = "the build's" if not args.agent_init else ai
        with open(ai, "rb") as f:
            allow_list = b"syscall_allow_list" in f.read()
        ctx.agent_init_kind += " (its filter: the allow list)" if allow_list else " (its filter: the old deny list)"
        ctx.ran, runs = [], []
        for name in only:
            say(f"scenario {name}")
            ctx.current = name
            ctx.ran.append(name)
            runs.append(SCENARIOS[name][0](ctx))
        parsed = []
        for name, ts in zip(ctx.ran, runs):
            p = None
            for t in ts:
                q = Parsed(t.trace, name)
                if p is None:
                    p = q
                else:
                    p.calls.update(q.calls)
                    p.programs |= q.programs
                    for k, v in q.who.items():
                        p.who[k] |= v
                    for k, v in q.args.items():
                        p.args[k].update(v)
                    for k, v in q.errors.items():
                        p.errors[k].update(v)
            parsed.append(p)
        missing = report(ctx, parsed, args.out)
        say(f"wrote {args.out}")
        unlisted = [n for n in missing if n not in filter_table()]
        if missing:
            say(f"traced but not allowed by filters.c: {', '.join(missing)}")
        if unlisted:
            say(f"not in the table at all (the default, ENOSYS): {', '.join(unlisted)}: "
                "a runtime needs them, or they are new; decide, and say why in filters.c")
        ok = True
    finally:
        for fn in ctx.cleanups:
            fn()
        clean = ctx.root.close() if ctx.root else True
        if args.keep or not ok:
            say(f"work directory kept: {ctx.work}")
        elif clean:
            subprocess.run(["rm", "-rf", "--one-file-system", ctx.work])
    return 2 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
