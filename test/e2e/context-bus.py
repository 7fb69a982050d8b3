#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The context bus binary on this host, without a VM: a temporary socket and app table,
clients connected by child processes that took the uids of apps (root runs this, so the
kernel's SO_PEERCRED is real) and hand their sockets back, the frames encoded by Debian's
python3-protobuf from the descriptor meson compiles out of sdk/context_bus.proto. Checks
identity by the kernel's word and the logged contradiction, fan-out, no echo, the queue
cap, oversized and undecodable frames that cost only themselves, the socket's mode, and
start-up failures. Prints TAP."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

BUS = os.environ.get("CONTEXT_BUS") or os.path.join(
    os.environ["BERTH_BUILD_DIR"], "src/context-bus/context-bus")
DESC = os.environ.get("CONTEXT_BUS_DESCRIPTOR") or os.path.join(os.path.dirname(BUS), "context_bus.desc")
results = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines() or [""]:
            print(f"# {line}", flush=True)


def skip_all(why):
    print(f"1..0 # SKIP {why}")
    sys.exit(0)


if os.geteuid() != 0:
    skip_all("needs root, to connect as the apps' uids")
try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    skip_all("python3-protobuf is not installed")

fds = descriptor_pb2.FileDescriptorSet()
with open(DESC, "rb") as f:
    fds.ParseFromString(f.read())
pool = descriptor_pool.DescriptorPool()
for fd in fds.file:
    pool.Add(fd)
Envelope = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("berth.contextbus.Envelope"))

APPS = {10000: "notes", 10001: "feed", 10002: "editor"}
GID = 9999


def enc(**kw):
    e = Envelope()
    (kind, fields), = kw.items()
    getattr(e, kind).SetInParent()
    for k, v in fields.items():
        setattr(getattr(e, kind), k, v)
    data = e.SerializeToString()
    return struct.pack(">I", len(data)) + data


class Client:
    def __init__(self, path, uid):
        self.uid = uid
        self.sock = connect_as(path, uid)
        self.sock.settimeout(2)
        self.buf = b""

    def send(self, **kw):
        self.sock.sendall(enc(**kw))

    def raw(self, data):
        self.sock.sendall(data)

    def frames(self, wait=0.3, acks=False, limit=100000):
        out = []
        end = time.time() + wait
        while time.time() < end and len(out) < limit:
            self.sock.settimeout(max(0.01, end - time.time()))
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                break
            if not chunk:
                out.append("EOF")
                break
            self.buf += chunk
            while len(self.buf) >= 4:
                (n,) = struct.unpack(">I", self.buf[:4])
                if len(self.buf) < 4 + n:
                    break
                e = Envelope()
                e.ParseFromString(self.buf[4:4 + n])
                self.buf = self.buf[4 + n:]
                kind = e.WhichOneof("kind")
                if kind == "ack" and not acks:
                    continue
                out.append((kind, getattr(e, kind)))
        return out

    def close(self):
        self.sock.close()


def connect_as(path, uid):
    """A child takes @uid (and the shared group) and connects; SO_PEERCRED keeps the
    child's credentials, and the fd comes back to this process."""
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            parent.close()
            if uid:
                os.setgroups([GID])
                os.setgid(uid)
                os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(child, [b"x"], [s.fileno()])
            os._exit(0)
        except BaseException as e:
            child.sendall(str(e).encode())
            os._exit(1)
    child.close()
    msg, got, _, _ = socket.recv_fds(parent, 1024, 1)
    os.waitpid(pid, 0)
    parent.close()
    if not got:
        raise RuntimeError(f"child of uid {uid} could not connect: {msg!r}")
    return socket.socket(fileno=got[0])


class Bus:
    def __init__(self, d, env=None, table=True):
        self.path = os.path.join(d, "bus.sock")
        self.err_path = os.path.join(d, f"bus-{time.time_ns()}.log")
        e = {"PATH": "/usr/bin:/bin", "BERTH_CONTEXT_BUS_SOCKET": self.path, "BERTH_SHARED_GID": str(GID)}
        if table:
            tp = os.path.join(d, "apps.json")
            with open(tp, "w") as f:
                json.dump({"schema": 1, "apps": [{"uid": u, "name": n} for u, n in APPS.items()]}, f)
            e["BERTH_CONTEXT_BUS_APPS"] = tp
        e.update(env or {})
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([BUS], env=e, stderr=self.err, stdin=subprocess.DEVNULL)
        end = time.time() + 5
        while time.time() < end and self.proc.poll() is None and "listening on" not in self.log():
            time.sleep(0.02)

    def log(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def json_lines(self):
        out = []
        for line in self.log().splitlines():
            if line.startswith("[context-bus] {"):
                out.append(json.loads(line[len("[context-bus] "):]))
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.err.close()
        return self.proc.returncode


def landlock_abi():
    import ctypes
    return max(0, ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1))


def confined(d):
    """The bus under agent-init as docs/context-bus.md tells berth-init to start it: uid
    9001 in group 9999, the daemon policy (writes: /dev/null and the socket's directory;
    reads: the binary's and the table's; no network), on this host's kernel."""
    agent_init = os.environ.get("AGENT_INIT")
    if not agent_init or not os.access(agent_init, os.X_OK) or landlock_abi() < 6:
        print("# skipping the confined run: no agent-init, or Landlock ABI < 6")
        return
    tmp, cb, bindir, home = (os.path.join(d, x) for x in ("tmp", "cb", "bin", "home"))
    for p, mode in ((tmp, 0o1777), (cb, 0o750), (bindir, 0o755), (home, 0o700)):
        os.makedirs(p, exist_ok=True)
        os.chmod(p, mode)
    os.chown(cb, 0, 9001)
    os.chown(home, 9001, 9001)
    shutil.copy(BUS, os.path.join(bindir, "context-bus"))
    table = os.path.join(cb, "apps.json")
    with open(table, "w") as f:
        json.dump({"schema": 1, "apps": [{"uid": u, "name": n} for u, n in APPS.items()]}, f)
    os.chown(table, 0, 9001)
    os.chmod(table, 0o640)
    policy = os.path.join(cb, "bus-policy.json")
    with open(policy, "w") as f:
        json.dump({"schema": 2, "appName": "berth-context-bus", "declaredCapabilities": [],
                   "writePaths": ["/dev/null", tmp], "readPaths": ["/usr", cb, bindir],
                   "networkPorts": [], "networkUnrestricted": False, "meshPeers": [], "bindPorts": [],
                   "cgroupLimits": {}}, f)
    os.chown(policy, 0, 9001)
    os.chmod(policy, 0o640)
    path = os.path.join(tmp, "berth-context-bus.sock")
    err_path = os.path.join(d, "confined.log")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([agent_init, os.path.join(bindir, "context-bus")], stdin=subprocess.DEVNULL,
                                stderr=err, cwd="/", env={
            "PATH": "/usr/sbin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "BERTH_BOOT_ID": "bus-e2e",
            "BERTH_REQUIRE_ENFORCEMENT": "1", "BERTH_CAPABILITY_POLICY": policy,
            "BERTH_APP_UID": "9001", "BERTH_APP_GID": "9001", "BERTH_APP_SUPPLEMENTARY_GIDS": "9999",
            "BERTH_CONTEXT_BUS_SOCKET": path, "BERTH_CONTEXT_BUS_APPS": table, "BERTH_SHARED_GID": "9999"})

    def log():
        with open(err_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    end = time.time() + 10
    while time.time() < end and proc.poll() is None and "listening on" not in log():
        time.sleep(0.05)
    try:
        applied = [json.loads(line) for line in log().splitlines() if line.startswith("{")]
        ev = {j.get("event"): j for j in applied}
        pol = ev.get("capability_policy_applied", {})
        tap(proc.poll() is None and f"[context-bus] listening on {path}" in log()
            and pol.get("ruleset") == "FullyEnforced" and ev.get("app_uid_applied", {}).get("uid") in (9001, None),
            "under agent-init with the daemon policy, as uid 9001: Landlock fully enforced, listening", log())
        st = os.stat(path) if os.path.exists(path) else None
        tap(st is not None and st.st_uid == 9001 and st.st_gid == GID and st.st_mode & 0o777 == 0o660,
            "its socket is 9001:9999 0660: the group berth it was given", st)
        a, b = Client(path, 10000), Client(path, 10001)
        a.send(register={"app": "activity-feed"})
        b.send(subscribe={"topic": "notes.added"})
        time.sleep(0.2)
        a.send(publish={"topic": "notes.added", "payload": b"confined"})
        fr = b.frames()
        tap([x.payload for k, x in fr if k == "event"] == [b"confined"], "confined, it delivers", fr)
        tap(any(j.get("event") == "register_name_overridden" and j["app"] == "notes"
                for j in (json.loads(l[len("[context-bus] "):]) for l in log().splitlines()
                          if l.startswith("[context-bus] {"))),
            "confined, it reads the app table and overrides a spoofed name", log())
        a.close()
        b.close()
    finally:
        proc.terminate()
        proc.wait(5)
    tap(proc.returncode == 0 and not os.path.exists(path), "confined, SIGTERM: exit 0, socket removed",
        (proc.returncode, log()[-800:]))


def main():
    d = tempfile.mkdtemp(prefix="berth-bus-")
    os.chmod(d, 0o755)
    bus = Bus(d)
    alive = bus.proc.poll() is None
    tap(alive and f"listening on {bus.path}" in bus.log(), "the bus says it is listening", bus.log())
    if not alive:
        print(f"1..{len(results)}")
        return 1
    st = os.stat(bus.path)
    tap(oct(st.st_mode & 0o777) == "0o660" and st.st_gid == GID,
        "its socket is group BERTH_SHARED_GID, mode 0660", (oct(st.st_mode), st.st_gid))

    notes, feed, editor = Client(bus.path, 10000), Client(bus.path, 10001), Client(bus.path, 10002)
    stranger, root = Client(bus.path, 12345), Client(bus.path, 0)

    # Identity: the kernel's uid decides, a contradicting claim is overridden and logged.
    notes.send(register={"app": "feed"})
    feed.send(register={"app": "feed"})
    stranger.send(register={"app": "notes"})
    root.send(register={"app": "governor"})
    time.sleep(0.3)
    lines = bus.json_lines()
    over = [j for j in lines if j.get("event") == "register_name_overridden"]
    tap(any(j["claimed"] == "feed" and j["app"] == "notes" and j["uid"] == 10000 for j in over),
        "a spoofed register is recorded under the kernel's name, as one JSON line", lines)
    tap(any(j["claimed"] == "notes" and j["app"] == "uid-12345" for j in over),
        "a uid outside the app table is uid-<n>, whatever it claims", lines)
    tap(not any(j.get("uid") == 10001 for j in over) and 'conn 2 registered as "feed" (uid 10001' in bus.log(),
        "a claim that matches is no contradiction", bus.log())
    tap('registered as "governor" (uid 0' in bus.log(), "root's claim stands (SPEC 5)", bus.log())

    # Fan-out to exactly the topic's other subscribers.
    notes.send(subscribe={"topic": "notes.added"})
    feed.send(subscribe={"topic": "notes.added"})
    editor.send(subscribe={"topic": "notes.added.more"})
    time.sleep(0.1)
    notes.frames(0.1)
    notes.send(publish={"topic": "notes.added", "payload": b'{"id":"1","text":"milk"}'})
    got_feed, got_notes, got_editor = feed.frames(), notes.frames(), editor.frames()
    tap(len(got_feed) == 1 and got_feed[0][0] == "event" and got_feed[0][1].topic == "notes.added"
        and got_feed[0][1].payload == b'{"id":"1","text":"milk"}', "a subscriber gets the event", got_feed)
    tap(got_notes == [], "the publisher does not get its own event back", got_notes)
    tap(got_editor == [], "topics are exact: no prefix or wildcard match", got_editor)
    acks = [f for f in notes.frames(0.05, acks=True)]
    notes.send(publish={"topic": "nobody", "payload": b"1"})
    acks = notes.frames(acks=True)
    tap(len(acks) == 1 and acks[0][0] == "ack" and acks[0][1].ok, "a publish is acked to its publisher", acks)

    # Unsubscribe and disconnect.
    feed.send(unsubscribe={"topic": "notes.added"})
    time.sleep(0.1)
    editor.send(publish={"topic": "notes.added", "payload": b"2"})
    tap(feed.frames() == [] and len(notes.frames()) == 1, "unsubscribe stops delivery, others still get it")
    notes.close()
    time.sleep(0.1)
    editor.send(publish={"topic": "notes.added", "payload": b"3"})
    time.sleep(0.1)
    tap(bus.proc.poll() is None, "a subscriber that disconnected is simply gone")

    # Client-sent Event and Ack are ignored; undecodable frames are skipped with an error.
    feed.send(event={"topic": "x"})
    feed.raw(struct.pack(">I", 3) + b"\x0a\x05x")
    fr = feed.frames(acks=True)
    tap(len(fr) == 1 and fr[0][0] == "ack" and not fr[0][1].ok and "not a context bus Envelope" in fr[0][1].error,
        "an undecodable frame gets an error ack, a client's Event none", fr)
    tap("sent an Event, which only the bus sends; ignored" in bus.log(), "a client's Event is logged and ignored")

    # An oversized frame is skipped, the connection and the bus survive.
    feed.send(subscribe={"topic": "big"})
    editor.frames(0.05)
    editor.raw(struct.pack(">I", 8 * 1024 * 1024 + 1))
    chunk = b"\x00" * (1 << 20)
    left = 8 * 1024 * 1024 + 1
    while left:
        n = min(left, len(chunk))
        editor.raw(chunk[:n])
        left -= n
    editor.send(publish={"topic": "big", "payload": b"after"})
    fr_e = editor.frames(0.5, acks=True)
    fr_f = feed.frames(0.5)
    tap(any(k == "ack" and not a.ok and "over the 8 MiB limit" in a.error for k, a in fr_e),
        "an oversized frame gets an error ack", fr_e)
    tap([a.payload for k, a in fr_f if k == "event"] == [b"after"],
        "the frame after it is read, on the same connection", fr_f)
    tap(any(j.get("event") == "frame_oversized" and j.get("bytes") == 8 * 1024 * 1024 + 1 for j in bus.json_lines()),
        "and the bus logs it", bus.log()[-2000:])

    # A large frame inside the limit passes.
    big = b"x" * (7 * 1024 * 1024)
    editor.send(publish={"topic": "big", "payload": big})
    fr_f = feed.frames(3, limit=1)
    tap(len(fr_f) == 1 and fr_f[0][1].payload == big, "a 7 MiB payload is delivered whole")

    # The queue cap: a subscriber that reads nothing loses the newest, keeps its connection.
    slow = Client(bus.path, 10000)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.send(subscribe={"topic": "flood"})
    time.sleep(0.1)
    slow.frames(0.05, acks=True)
    for i in range(3000):
        editor.send(publish={"topic": "flood", "payload": b"%d" % i})
    time.sleep(0.3)
    editor.frames(0.05, acks=True)
    got = [int(a.payload) for k, a in slow.frames(1.0)]
    tap(256 <= len(got) < 3000 and got == list(range(len(got))),
        f"a full queue drops the newest: {len(got)} of 3000 arrived, the first ones, in order",
        got[:5] + ["..."] + got[-5:])
    qf = [j for j in bus.json_lines() if j.get("event") in ("queue_full", "queue_drained") and j["app"] == "notes"]
    tap([j["event"] for j in qf] == ["queue_full", "queue_drained"] and qf[1]["dropped"] == 3000 - len(got),
        "one line when the queue fills, one with the count when it drains", qf)
    editor.send(publish={"topic": "flood", "payload": b"later"})
    fr = slow.frames()
    tap([a.payload for k, a in fr] == [b"later"], "the slow subscriber's connection lives on", fr)

    rc = bus.stop()
    tap(rc == 0 and not os.path.exists(bus.path), "SIGTERM: exit 0, socket removed", (rc, bus.log()[-500:]))

    # Start-up: a stale socket is replaced; a non-socket is not touched; a bad table is fatal.
    s = socket.socket(socket.AF_UNIX)
    s.bind(bus.path)
    s.close()
    b2 = Bus(d)
    tap(b2.proc.poll() is None and "listening on" in b2.log(), "a stale socket file is replaced", b2.log())
    b2.stop()
    with open(bus.path, "w") as f:
        f.write("not a socket")
    b3 = Bus(d)
    b3.proc.wait(5)
    tap(b3.proc.returncode == 1 and "something that is not a socket is there" in b3.log(),
        "a file that is not a socket is left alone, and the bus refuses to start", b3.log())
    b3.stop()
    os.unlink(bus.path)
    with open(os.path.join(d, "bad.json"), "w") as f:
        f.write('{"schema":1,"apps":[{"uid":10000,"name":"Notes"}]}')
    b4 = Bus(d, env={"BERTH_CONTEXT_BUS_APPS": os.path.join(d, "bad.json")}, table=False)
    b4.proc.wait(5)
    tap(b4.proc.returncode == 1 and "FATAL: the app table" in b4.log() and "apps[0].name" in b4.log(),
        "a bad app table stops the bus with what is wrong", b4.log())
    b4.stop()
    r = subprocess.run([BUS, "--help"], capture_output=True, text=True)
    tap(r.returncode == 2 and "BERTH_CONTEXT_BUS_SOCKET" in r.stderr, "arguments get the usage line")

    confined(d)

    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
