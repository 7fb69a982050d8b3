#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The semantic-fs daemon binary on this host, without a VM (docs/context.md): a context
root, an index directory and an apps file in a temporary directory, laid out and owned as
berth-init lays them out in the guest, the daemon run as its own uid (9005, in group 9999)
and its callers as the apps' uids (forked children that drop to 10000, 10001, ...), so that
SO_PEERCRED and the files' owners are the kernel's real word.

Checks the SPEC 2.9 shapes, attribution by the kernel's word (created_by from the file's
owner, a caller's claimed name logged and ignored), tags for the owner only, query ranking
(bm25, the matching file first, "ranking": "keyword" on every result), DAC-filtered answers
and an app the apps file says may not read, the caps (request size, limit, hidden names,
links), bad JSON and over-cap frames answered on a connection that goes on, and the index
surviving a stop, a SIGKILL right after an answer, and a damaged database file.

Needs root (it changes uids); without it, it says so and skips. Prints TAP."""
import json
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

DAEMON = os.environ.get("SEMANTIC_FS") or os.path.join(
    os.environ["BERTH_BUILD_DIR"], "src/semantic-fs/semantic-fs")
DAEMON_UID = 9005
SHARED_GID = 9999
FILESYSTEM, NOTES, BLIND, STRANGER = 10000, 10001, 10002, 4242
results = []


def tap(ok, what, detail=None):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail is not None:
        for line in str(detail).splitlines() or [""]:
            print(f"# {line}", flush=True)


def frame(obj):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_frame(sock, timeout=10):
    sock.settimeout(timeout)
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise EOFError("connection closed")
        head += chunk
    (n,) = struct.unpack(">I", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(min(65536, n - len(body)))
        if not chunk:
            raise EOFError("connection closed mid-frame")
        body += chunk
    return json.loads(body)


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="berth-sfs-")
        os.chmod(self.dir, 0o755)
        self.context = os.path.join(self.dir, "context")
        self.index = os.path.join(self.dir, "index")
        self.run = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.run, "sfs.sock")
        self.apps = os.path.join(self.dir, "apps.json")
        self.log = os.path.join(self.dir, "daemon.log")
        # As berth-init makes them: /context root:berth 2775 (several apps write there),
        # the daemon's own directory for its socket and index, the apps file root's.
        os.mkdir(self.context)
        os.chown(self.context, 0, SHARED_GID)
        os.chmod(self.context, 0o2775)
        os.mkdir(self.run)
        os.chown(self.run, DAEMON_UID, SHARED_GID)
        os.chmod(self.run, 0o710)
        os.mkdir(self.index, 0o700)
        os.chown(self.index, DAEMON_UID, DAEMON_UID)
        with open(self.apps, "w") as f:
            json.dump({"schema": 1, "apps": [
                {"uid": FILESYSTEM, "name": "filesystem"},
                {"uid": NOTES, "name": "notes"},
                {"uid": BLIND, "name": "blind", "read": False}]}, f)
        os.chown(self.apps, 0, DAEMON_UID)
        os.chmod(self.apps, 0o640)
        self.proc = None

    def start(self):
        since = len(self.log_text()) if os.path.exists(self.log) else 0
        logf = open(self.log, "a")
        self.proc = subprocess.Popen(
            [DAEMON, "--socket", self.sock, "--context", self.context, "--index", self.index,
             "--apps", self.apps, "--socket-group", str(SHARED_GID)],
            user=DAEMON_UID, group=DAEMON_UID, extra_groups=[SHARED_GID],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env={"PATH": "/usr/bin:/bin"})
        logf.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            if f"listening on {self.sock}" in self.log_text()[since:]:
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        return self.proc.returncode

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def as_uid(uid, fn):
    """Run fn() in a child that is uid (gid = uid, supplementary group berth), and return
    what it returns (JSON through a pipe), or {"child_error": ...}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([uid, SHARED_GID])
            os.setgid(uid)
            os.setuid(uid)
            os.umask(0o022)
            out = {"value": fn()}
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
            out = {"child_error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out = json.loads(data or b'{"child_error": "no answer"}')
    return out.get("value", out)


def calls(env, *reqs, raw=None):
    """Connect, send each request (dicts, or bytes for a raw frame body), return answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(env.sock)
    out = []
    try:
        for rq in reqs:
            s.sendall(frame(rq))
            out.append(read_frame(s))
    finally:
        s.close()
    return out


def write(env, rel, text, mode=0o644):
    path = os.path.join(env.context, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root to run the daemon and its callers as other uids")
        return 0
    env = Env()
    try:
        run(env)
    finally:
        env.stop(signal.SIGKILL)
        shutil.rmtree(env.dir, ignore_errors=True)
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


def run(env):
    tap(env.start(), "the daemon starts as uid 9005 and says it listens", env.log_text())
    st = os.stat(env.sock)
    tap(stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == SHARED_GID and st.st_uid == DAEMON_UID,
        "the socket is 0660, the daemon's, group berth", oct(st.st_mode))

    # register: the kernel's name, whatever the client claims.
    a = as_uid(FILESYSTEM, lambda: calls(env, {"id": "r1", "op": "register", "pid": os.getpid(),
                                               "app": "notes"})[0])
    tap(a.get("ok") is True and a.get("app") == "filesystem" and a.get("id") == "r1",
        "register answers the kernel's name, not the claimed one", a)
    tap('claims to be "notes"; the kernel says uid 10000, recorded as "filesystem"'
        in env.log_text(), "the contradiction is logged")

    # A file of filesystem's, tagged by it.
    def fs_write_and_tag():
        write(env, "plan.md", "The launch plan: rockets, fuel, and a launch window.\n")
        return calls(env, {"id": "t1", "op": "tag", "path": "plan.md",
                           "task": "quarterly zebra review",
                           "related_apps": ["notes", "activity-feed"]})[0]
    a = as_uid(FILESYSTEM, fs_write_and_tag)
    f = a.get("file") or {}
    tap(a.get("ok") is True and f.get("path") == "plan.md" and f.get("created_by") == "filesystem"
        and f.get("task") == "quarterly zebra review"
        and f.get("related_apps") == ["notes", "activity-feed"],
        "tag by the file's creator: ok, created_by from the owner uid", a)
    tap(all(k in f for k in ("created_at", "updated_at")), "a tag answers its timestamps", f)

    a = as_uid(NOTES, lambda: calls(env, {"id": "t2", "op": "tag", "path": "plan.md",
                                          "task": "mine now"})[0])
    tap(a.get("ok") is False and 'created by "filesystem"' in a.get("error", ""),
        "another app may not tag it", a)

    # Files by others; the stranger claims to be filesystem.
    def notes_write():
        write(env, "groceries.txt", "milk, eggs, and bread for the week\n")
        write(env, "launch-notes.txt", "one word about a launch\n")
        return True
    as_uid(NOTES, notes_write)

    def stranger():
        write(env, "spoof.txt", "spoofed launch plan by a stranger\n")
        return calls(env, {"id": "s1", "op": "register", "app": "filesystem"},
                     {"id": "s2", "op": "tag", "path": "spoof.txt", "task": "pretend"})
    a = as_uid(STRANGER, stranger)
    tap(a[0].get("app") == "uid-4242" and a[1].get("file", {}).get("created_by") == "uid-4242",
        "an unknown uid claiming a name is recorded as uid-<n>", a)

    a = as_uid(NOTES, lambda: calls(env, {"id": "q1", "op": "query", "text": "launch plan"})[0])
    res = a.get("results") or []
    tap(a.get("ok") is True and res and res[0]["path"] == "plan.md"
        and res[0]["created_by"] == "filesystem",
        "query ranks the matching file first, created_by by the kernel's word", a)
    tap(res and all(r.get("ranking") == "keyword" for r in res) and a.get("ranking") == "keyword",
        "every result names its ranking: keyword", res)
    tap(len(res) == 3 and {r["path"] for r in res} == {"plan.md", "spoof.txt", "launch-notes.txt"},
        "only matching files are answered", res)
    tap(all(set(r) >= {"path", "created_by", "task", "related_apps", "created_at", "updated_at"}
            for r in res), "results have SPEC 2.9's fields", res)

    a = as_uid(NOTES, lambda: calls(env, {"id": "q2", "op": "query", "text": "zebra"})[0])
    tap([r["path"] for r in a.get("results", [])] == ["plan.md"], "the task is searched", a)
    a = as_uid(NOTES, lambda: calls(env, {"id": "q3", "op": "query", "text": "activity"})[0])
    tap([r["path"] for r in a.get("results", [])] == ["plan.md"], "related apps are searched", a)

    # DAC: a file only its owner may read is answered to its owner alone.
    as_uid(FILESYSTEM, lambda: write(env, "private/diary.txt", "secret launch codes", 0o600))
    a = as_uid(NOTES, lambda: calls(env, {"id": "q4", "op": "query", "text": "codes"})[0])
    tap(a.get("ok") is True and a.get("results") == [], "a file the caller may not read is not answered", a)
    a = as_uid(FILESYSTEM, lambda: calls(env, {"id": "q5", "op": "query", "text": "codes"})[0])
    tap([r["path"] for r in a.get("results", [])] == [], "... and one the daemon cannot read has no text indexed",
        a)
    os.chmod(os.path.join(env.context, "private/diary.txt"), 0o640)
    os.chown(os.path.join(env.context, "private/diary.txt"), FILESYSTEM, SHARED_GID)
    a = as_uid(FILESYSTEM, lambda: calls(env, {"id": "q6", "op": "query", "text": "codes"})[0])
    tap([r["path"] for r in a.get("results", [])] == ["private/diary.txt"],
        "a group-readable file is indexed and answered to its owner", a)
    os.chown(os.path.join(env.context, "private"), FILESYSTEM, FILESYSTEM)
    os.chmod(os.path.join(env.context, "private"), 0o700)
    a = as_uid(NOTES, lambda: calls(env, {"id": "q7", "op": "query", "text": "codes"})[0])
    tap(a.get("results") == [], "a file in a directory the caller cannot enter is not answered", a)

    a = as_uid(BLIND, lambda: calls(env, {"id": "q8", "op": "query", "text": "launch"})[0])
    tap(a.get("ok") is True and a.get("results") == [], "an app the apps file says may not read gets nothing", a)

    # Paths and links.
    os.symlink("/etc/passwd", os.path.join(env.context, "passwd-link"))
    a = calls(env, {"id": "p1", "op": "tag", "path": "passwd-link"},
              {"id": "p2", "op": "tag", "path": "../etc/passwd"},
              {"id": "p3", "op": "tag", "path": "/etc/passwd"},
              {"id": "p4", "op": "tag", "path": "nope.txt"},
              {"id": "p5", "op": "query", "text": "root"})
    tap("not a regular file" in a[0].get("error", ""), "a link is not tagged", a[0])
    tap(a[1].get("ok") is False and a[2].get("ok") is False, "paths outside the root are refused", a[1:3])
    tap(a[3].get("error") == 'no such file in /context: "nope.txt"', "a missing file says so", a[3])
    tap(all(r["path"] != "passwd-link" for r in a[4].get("results", [])), "a link is not indexed", a[4])

    # Errors, and the connection going on after them.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(env.sock)
    s.sendall(frame(b"{not json"))
    a = read_frame(s)
    tap(a.get("ok") is False and a.get("error", "").startswith("invalid JSON") and a.get("id") is None,
        "bad JSON gets a clear error", a)
    # jansson's message quotes the bytes near the error, here half a character.
    s.sendall(frame(b'{"id":"1","op":"taga\\u00\xe2\x80\x94 x"}'))
    a = read_frame(s)
    tap(a.get("ok") is False and "invalid JSON" in a.get("error", ""),
        "bad JSON whose message would cut a character is still answered", a)
    s.sendall(struct.pack(">I", 2 * 1024 * 1024) + b"x" * (2 * 1024 * 1024))
    a = read_frame(s)
    tap("over the cap of 1048576" in a.get("error", ""), "an over-cap frame is refused", a)
    s.sendall(frame({"id": "x", "op": "delete"}) + frame({"id": 7, "op": "query"}) +
              frame({"id": "ok", "op": "query", "text": "milk", "limit": 1000}))
    a = [read_frame(s) for _ in range(3)]
    tap('unknown op "delete"' in a[0].get("error", "") and a[0].get("id") == "x",
        "an unknown op is named, with its id", a[0])
    tap(a[1].get("id") == 7 and "needs \"text\"" in a[1].get("error", ""), "a missing field is named", a[1])
    tap(a[2].get("ok") is True and [r["path"] for r in a[2]["results"]] == ["groceries.txt"],
        "the same connection still answers, pipelined, in order", a[2])
    s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(env.sock)
    s.sendall(struct.pack(">I", 0xFFFFFFFF) + b"abc")
    s.close()
    a = calls(env, {"id": "alive", "op": "query", "text": "milk"})[0]
    tap(a.get("ok") is True and env.proc.poll() is None, "a 4 GiB length and a hang-up leave the daemon up", a)

    hogs = []
    for _ in range(20):
        x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        x.connect(env.sock)
        hogs.append(x)
    answered = 0
    for x in hogs:
        try:
            x.sendall(frame({"id": "h", "op": "query", "text": "milk"}))
            answered += read_frame(x, 5).get("ok") is True
        except (OSError, EOFError):
            pass
    others = as_uid(NOTES, lambda: calls(env, {"id": "n", "op": "query", "text": "milk"})[0])
    for x in hogs:
        x.close()
    tap(answered == 16 and others.get("ok") is True,
        "one uid gets 16 connections at a time, and others still get theirs", (answered, others))

    for i in range(60):
        write(env, f"many/f{i:02d}.txt", f"common word number {i}\n")
    a = calls(env, {"id": "m", "op": "query", "text": "common", "limit": 1000})[0]
    tap(len(a.get("results", [])) == 50, "limit is capped at 50", len(a.get("results", [])))
    write(env, ".hidden-launch", "launch")
    a = calls(env, {"id": "h", "op": "query", "text": "launch", "limit": 50})[0]
    tap(all(not r["path"].startswith(".") for r in a["results"]), "hidden names are not indexed", a)

    # Persistence: a stop and a start; a SIGKILL right after an answer; a damaged file.
    tap(env.stop() == 0, "SIGTERM stops it cleanly", env.log_text()[-4000:])
    tap(env.start(), "it starts again over the same index")
    a = calls(env, {"id": "z", "op": "query", "text": "zebra"})[0]
    tap([(r["path"], r["task"]) for r in a.get("results", [])] == [("plan.md", "quarterly zebra review")],
        "tags survive a restart", a)
    a = as_uid(FILESYSTEM, lambda: calls(env, {"id": "t9", "op": "tag", "path": "plan.md",
                                               "task": "okapi census"})[0])
    env.stop(signal.SIGKILL)
    tap(a.get("ok") is True and env.start(), "tagged, then killed with SIGKILL, then started")
    a = calls(env, {"id": "o", "op": "query", "text": "okapi"})[0]
    tap([r["path"] for r in a.get("results", [])] == ["plan.md"], "an answered tag survives SIGKILL", a)
    tap(env.stop() == 0, "SIGTERM stops it cleanly after a recovery", env.log_text()[-4000:])
    db = os.path.join(env.index, "index.sqlite3")
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    with open(db, "r+b") as f:
        f.write(b"\0garbage" * 512)
    tap(env.start(), "a damaged index does not stop it from starting")
    tap("is damaged: moved aside" in env.log_text(), "the damage is logged")
    a = calls(env, {"id": "d", "op": "query", "text": "launch plan"})[0]
    tap(a.get("results") and a["results"][0]["path"] == "plan.md"
        and a["results"][0]["created_by"] == "filesystem",
        "the rebuilt index answers from the files", a)
    tap(env.stop() == 0, "SIGTERM stops it cleanly after a rebuild", env.log_text()[-4000:])


if __name__ == "__main__":
    sys.exit(main())
