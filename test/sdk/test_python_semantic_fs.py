# SPDX-License-Identifier: Apache-2.0
"""The Python SDK's semantic-fs client against the real daemon (src/semantic-fs) on this
host: register, tag and query over SPEC 2.9's frames, the daemon's errors as exceptions, a
reconnect after a restart, threads sharing one client, and an app's on_agent_ready context
through `python3 -m berth_sdk.runtime` (and the runtime's message when the daemon is
absent inside a sandbox)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK = os.path.join(ROOT, "sdk", "python")
sys.path.insert(0, SDK)

from berth_sdk import semantic_fs  # noqa: E402

BUILD = os.environ.get("BERTH_BUILD_DIR") or os.path.join(ROOT, "build")
DAEMON = os.path.join(BUILD, "src", "semantic-fs", "semantic-fs")
IS_ROOT = os.geteuid() == 0

APP_YML = """name: sfs-py
version: 0.1.0
runtime: python
capabilities:
  - filesystem:read:/context
  - filesystem:write:/context
exports:
  - name: write_tag_query
"""

APP_PY = """import os
from berth_sdk import define_app

state = {}


def ready(ctx):
    state["sfs"] = ctx.semantic_fs


def write_tag_query(inp):
    root = os.environ["BERTH_CONTEXT_MOUNT"]
    with open(os.path.join(root, inp["path"]), "w") as f:
        f.write(inp["content"])
    tagged = state["sfs"].tag(inp["path"], task=inp["task"])
    return {"tagged": tagged, "results": state["sfs"].query(inp["text"], 5)}


def setup(a):
    a.export("write_tag_query", write_tag_query)
    a.on_agent_ready(ready)


app = define_app(setup)
"""


class Daemon:
    def __init__(self, work):
        self.work = work
        self.sock = os.path.join(work, "sfs.sock")
        self.context = os.path.join(work, "context")
        self.log = os.path.join(work, "daemon.log")
        os.makedirs(self.context, exist_ok=True)
        with open(os.path.join(work, "apps.json"), "w") as f:
            json.dump({"schema": 1, "apps": [{"uid": 10000, "name": "filesystem"}]}, f)
        self.proc = None

    def start(self):
        since = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        with open(self.log, "a") as logf:
            self.proc = subprocess.Popen(
                [DAEMON, "--socket", self.sock, "--context", self.context, "--index",
                 os.path.join(self.work, "index"), "--apps", os.path.join(self.work, "apps.json"),
                 "--socket-group", "0"], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        deadline = time.time() + 20
        while time.time() < deadline:
            with open(self.log) as f:
                f.seek(since)
                if f"listening on {self.sock}" in f.read():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("the daemon did not start: " + open(self.log).read())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@unittest.skipUnless(os.path.exists(DAEMON), f"no daemon at {DAEMON} (build first)")
class SemanticFsAgainstDaemon(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="berth-sfs-py-")
        self.d = Daemon(self.work)
        self.d.start()
        self.addCleanup(shutil.rmtree, self.work, True)
        self.addCleanup(self.d.stop)

    def write(self, rel, text, uid=None):
        path = os.path.join(self.d.context, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        if uid is not None and IS_ROOT:
            os.chown(path, uid, uid)

    def test_register_tag_query(self):
        c = semantic_fs.connect_semantic_fs(self.d.sock)
        self.addCleanup(c.close)
        self.assertEqual(c.register("claimed-name"), "root" if IS_ROOT else f"uid-{os.getuid()}")
        self.write("plan.md", "The launch plan: rockets, fuel and a window.\n", uid=10000)
        self.write("shopping.txt", "milk and eggs\n")
        t = c.tag("plan.md", task="quarterly zebra review", related_apps=["notes"])
        self.assertEqual((t["path"], t["task"], t["relatedApps"]), ("plan.md", "quarterly zebra review", ["notes"]))
        if IS_ROOT:
            self.assertEqual(t["createdBy"], "filesystem")
        res = c.query("launch plan")
        self.assertEqual(res[0]["path"], "plan.md")
        self.assertTrue(all(r["ranking"] == "keyword" for r in res))
        self.assertIsInstance(res[0]["score"], float)
        self.assertEqual([r["path"] for r in c.query("zebra")], ["plan.md"])
        c.tag("plan.md")  # neither task nor related apps: both kept
        self.assertEqual(c.query("zebra")[0]["task"], "quarterly zebra review")
        with self.assertRaisesRegex(semantic_fs.SemanticFsError, 'no such file in /context: "nope.txt"'):
            c.tag("nope.txt", task="x")
        with self.assertRaisesRegex(semantic_fs.SemanticFsError, "over the 1048576-byte cap"):
            c.query("x" * (2 << 20))
        self.assertLessEqual(len(c.query("milk", 1000)), 50)

    def test_threads_share_a_client_and_it_reconnects(self):
        c = semantic_fs.connect_semantic_fs(self.d.sock)
        self.addCleanup(c.close)
        for i in range(8):
            self.write(f"t/f{i}.txt", f"word{i} shared\n")
        out, errors = {}, []

        def worker(i):
            try:
                out[i] = [r["path"] for r in c.query(f"word{i}")]
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(out, {i: [f"t/f{i}.txt"] for i in range(8)})
        self.d.stop()
        self.d.start()
        res = None
        for _ in range(3):
            try:
                res = c.query("shared", 50)
                break
            except semantic_fs.SemanticFsError:
                continue
        self.assertEqual(len(res), 8)

    def app_dir(self, name, sfs_socket):
        """A Python app of APP_YML/APP_PY under the work dir, and the runtime's environment
        with semantic-fs at @sfs_socket and no context bus."""
        app = os.path.join(self.work, name)
        os.makedirs(os.path.join(app, "src"))
        with open(os.path.join(app, "berth.yml"), "w") as f:
            f.write(APP_YML)
        with open(os.path.join(app, "src", "app.py"), "w") as f:
            f.write(APP_PY)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": SDK,
               "BERTH_CONTEXT_BUS_SOCKET": os.path.join(self.work, "no-bus.sock"),
               "BERTH_SEMANTIC_FS_SOCKET": sfs_socket, "BERTH_CONTEXT_MOUNT": self.d.context,
               "BERTH_BOOT_ID": "test-boot"}
        return app, env

    def test_runtime_is_ready_before_the_daemon_accepts(self):
        # A socket-activated daemon still starting: its socket listens, nobody accepts yet.
        path = os.path.join(self.work, "not-yet.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path)
        lsock.listen(8)
        app, env = self.app_dir("app-early", path)
        p = subprocess.Popen([sys.executable, "-m", "berth_sdk.runtime"], cwd=app, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            err, deadline = b"", time.monotonic() + 30
            while b'"sfs-py" ready' not in err and time.monotonic() < deadline:
                line = p.stderr.readline()
                if not line:
                    break
                err += line
            self.assertIn(b'"sfs-py" ready', err, err.decode())
            self.assertIn(b"semantic-fs connected at", err)
            self.assertNotIn(b"knows this app as", err)
            # The register is waiting in the daemon's queue, and is the first thing it reads.
            conn, _ = lsock.accept()
            conn.settimeout(10)
            head = conn.recv(4, socket.MSG_WAITALL)
            body = json.loads(conn.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL))
            self.assertEqual(body["op"], "register")
            conn.close()
        finally:
            p.kill()
            p.wait()
            lsock.close()

    def test_runtime_hands_the_client_to_the_app(self):
        app, env = self.app_dir("app", self.d.sock)
        req = {"id": "1", "export": "write_tag_query",
               "input": {"path": "okapi.md", "content": "an okapi census\n", "task": "survey",
                         "text": "okapi"}}
        p = subprocess.run([sys.executable, "-m", "berth_sdk.runtime"], cwd=app, env=env,
                           input=(json.dumps(req) + "\n").encode(), capture_output=True, timeout=60)
        err = p.stderr.decode()
        self.assertIn('semantic-fs connected at', err)
        # Registered in the background, but before the export's own calls went out.
        self.assertIn('semantic-fs knows this app as "', err)
        ans = json.loads(p.stdout.decode().splitlines()[0])
        self.assertNotIn("error", ans, err)
        self.assertEqual(ans["result"]["tagged"]["task"], "survey")
        self.assertEqual([r["path"] for r in ans["result"]["results"]], ["okapi.md"])
        self.assertEqual(ans["result"]["results"][0]["ranking"], "keyword")


class SemanticFsWithoutDaemon(unittest.TestCase):
    def test_sandbox_without_daemon_says_it_will_fail(self):
        env = {"BERTH_SEMANTIC_FS_SOCKET": "/nonexistent/sfs.sock", "BERTH_BOOT_ID": "b"}
        from berth_sdk import runtime
        logged = []
        orig = runtime.log
        runtime.log = logged.append
        try:
            c = runtime.connect_sfs(env, "x")
        finally:
            runtime.log = orig
        self.assertEqual(c.kind, "unavailable")
        self.assertTrue(any("/context tagging and queries will fail" in m for m in logged), logged)
        with self.assertRaisesRegex(semantic_fs.SemanticFsError, "semantic-fs is unavailable"):
            c.query("x")

    def test_outside_a_sandbox_a_local_stand_in(self):
        from berth_sdk import runtime
        c = runtime.connect_sfs({"BERTH_SEMANTIC_FS_SOCKET": "/nonexistent/sfs.sock"}, "x")
        self.assertEqual(c.kind, "local")
        c.register("me")
        c.tag("a.txt", task="weekly plan", related_apps=["notes"])
        c.tag("b.txt", task="other")
        r = c.query("weekly")
        self.assertEqual([x["path"] for x in r], ["a.txt"])
        self.assertEqual(r[0]["createdBy"], "me")
        self.assertEqual(r[0]["ranking"], "keyword")


if __name__ == "__main__":
    unittest.main()
