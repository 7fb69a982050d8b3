# SPDX-License-Identifier: Apache-2.0
"""The Python SDK: `python3 -m berth_sdk.runtime` as a subprocess over its socket and
stdio, its context bus codec against the protobuf library, write_file_durable, and
hello-world-py and the python template in-process."""
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK = os.path.join(ROOT, "sdk", "python")
FIXTURE = os.path.join(HERE, "fixtures", "python-app")
sys.path.insert(0, SDK)

from berth_sdk import context_bus as cb  # noqa: E402
from berth_sdk import durable  # noqa: E402
from berth_sdk import rpc, runtime  # noqa: E402
from berth_sdk.app import AppContext  # noqa: E402

PYTHON = sys.executable


class Runtime:
    """A running `python3 -m berth_sdk.runtime` and what it printed."""

    def __init__(self, app_dir, env=None, socket_path=None):
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": SDK,
                    "BERTH_CONTEXT_BUS_SOCKET": os.path.join(app_dir, "no-such-bus.sock")}
        if socket_path:
            full_env["BERTH_RPC_SOCKET"] = socket_path
        full_env.update(env or {})
        self.proc = subprocess.Popen([PYTHON, "-m", "berth_sdk.runtime"], cwd=app_dir, env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr = ""
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def feed(self, data: bytes, timeout=20) -> bytes:
        """stdio mode: write all of ``data``, close stdin, return all of stdout."""
        self.proc.stdin.write(data)
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        self.proc.wait(timeout)
        self._pump_thread.join(timeout)
        return out

    def _pump(self):
        for raw in self.proc.stderr:
            with self._lock:
                self.stderr += raw.decode()
            if '" ready' in raw.decode():
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout=20):
        if not self._ready.wait(timeout):
            raise AssertionError(f"no ready line; stderr:\n{self.stderr}")
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.rfile = self.sock.makefile("rb")

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, req):
        self.send_raw((json.dumps(req) + "\n").encode())

    def line(self):
        return self.rfile.readline().decode().rstrip("\n")

    def call(self, export, inp=None, rid="1"):
        req = {"id": rid, "export": export}
        if inp is not None:
            req["input"] = inp
        self.send(req)
        return json.loads(self.line())

    def close(self):
        self.rfile.close()
        self.sock.close()


class PythonRuntimeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-py-test-")
        self.sock = os.path.join(self.tmp, "rpc.sock")
        self.rt = None

    def tearDown(self):
        if self.rt:
            self.rt.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def boot(self, env=None, app_dir=FIXTURE, socket_path=True):
        self.rt = Runtime(app_dir, env, self.sock if socket_path else None).wait_ready()
        self.assertIsNone(self.rt.proc.poll(), self.rt.stderr)
        return self.rt

    def test_boot_lines_ready_and_socket_mode(self):
        rt = self.boot()
        lines = rt.stderr.splitlines()
        self.assertIn(f"[berth:runtime] loading manifest from {FIXTURE}/berth.yml", lines)
        self.assertIn(f"[berth:runtime] loading app entry {FIXTURE}/src/app.py", lines)
        self.assertIn('[berth:runtime] "fixture-py" ready', lines)
        self.assertEqual(stat.S_IMODE(os.stat(self.sock).st_mode), 0o600)
        rt.stop()
        self.assertEqual(rt.proc.returncode, 0)
        self.assertFalse(os.path.exists(self.sock))

    def test_protocol_strings(self):
        self.boot()
        c = Client(self.sock)
        c.send({"id": "u", "export": "does_not_exist", "input": {}})
        self.assertEqual(c.line(), '{"id":"u","error":"no such export \\"does_not_exist\\""}')
        c.send({"id": "n", "export": "nothing"})
        self.assertEqual(c.line(), '{"id":"n","result":null}')
        self.assertEqual(c.call("echo", {"text": "hi"}), {"id": "1", "result": {"text": "hi"}})
        self.assertEqual(c.call("fail", {}), {"id": "1", "error": "boom: the handler failed"})
        self.assertEqual(c.call("async_echo", {"text": "hi"}), {"id": "1", "result": {"text": "HI"}})
        # Validation errors are pydantic's own text.
        sys.path.insert(0, os.path.join(FIXTURE, "src"))
        from pydantic import ValidationError
        from berth_sdk import _pydantic
        spec_ns = {}
        exec("from pydantic import BaseModel\nclass EchoIn(BaseModel):\n    text: str\n", spec_ns)
        try:
            _pydantic.validate(spec_ns["EchoIn"], {"text": None})
            self.fail("no validation error")
        except ValidationError as e:
            expected = str(e)
        self.assertEqual(c.call("echo", {"text": None}), {"id": "1", "error": expected})
        missing = c.call("echo")
        self.assertIn("validation error for EchoIn", missing["error"])
        c.close()

    def test_hooks_order_install_before_bus(self):
        rt = self.boot()
        c = Client(self.sock)
        self.assertEqual(c.call("hooks")["result"], {"events": ["install", "ready:fixture-py:1.2.3"]})
        c.close()
        # on_install runs before the context bus is tried.
        self.assertNotIn("running on_install", rt.stderr)

    def test_non_json_ignored_and_serial_per_connection(self):
        rt = self.boot()
        c = Client(self.sock)
        c.send_raw(b"not json at all\n\n")
        c.send({"id": "slow", "export": "sleep", "input": {"ms": 300}})
        c.send({"id": "fast", "export": "echo", "input": {"text": "x"}})
        self.assertEqual(json.loads(c.line())["id"], "slow")
        self.assertEqual(json.loads(c.line())["id"], "fast")
        self.assertIn("[berth:runtime] ignoring non-JSON RPC line: not json at all\n", rt.stderr)
        c.close()

    def test_connections_are_threaded(self):
        self.boot()
        a, b = Client(self.sock), Client(self.sock)
        a.send({"id": "slow", "export": "sleep", "input": {"ms": 1500}})
        time.sleep(0.1)
        t0 = time.monotonic()
        self.assertEqual(b.call("echo", {"text": "b"}, "b")["result"], {"text": "b"})
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(json.loads(a.line())["id"], "slow")
        a.close()
        b.close()

    def test_stale_socket_replaced(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.sock)
        s.close()  # the file stays
        self.boot()
        c = Client(self.sock)
        self.assertEqual(c.call("echo", {"text": "fresh"})["result"], {"text": "fresh"})
        c.close()

    def test_stdio_mode(self):
        rt = Runtime(FIXTURE)
        out = rt.feed(b'{"id":"1","export":"echo","input":{"text":"stdio"}}\njunk\n{"id":"2","export":"nope"}\n')
        rt.stop()
        self.assertEqual(rt.proc.returncode, 0)
        self.assertEqual(out.decode().splitlines(), [
            '{"id":"1","result":{"text":"stdio"}}',
            '{"id":"2","error":"no such export \\"nope\\""}',
        ])

    def test_exports_mismatch_exit_1(self):
        app = os.path.join(self.tmp, "app")
        shutil.copytree(FIXTURE, app)
        with open(os.path.join(app, "berth.yml")) as f:
            text = f.read()
        with open(os.path.join(app, "berth.yml"), "w") as f:
            f.write(text.replace("  - name: nothing\n", "  - name: missing_one\n"))
        rt = Runtime(app, socket_path=self.sock)
        rt.proc.wait(20)
        rt.wait_ready()
        rt.stop()
        self.assertEqual(rt.proc.returncode, 1)
        self.assertIn(
            "[berth:runtime] fatal error during startup: exports mismatch between berth.yml and app code — "
            "declared in berth.yml but not implemented: missing_one; implemented in code but not declared in berth.yml: nothing\n",
            rt.stderr)
        self.assertNotIn("ready", rt.stderr)

    def test_entry_without_app(self):
        app = os.path.join(self.tmp, "app")
        shutil.copytree(FIXTURE, app)
        with open(os.path.join(app, "src", "app.py"), "w") as f:
            f.write("thing = 1\n")
        rt = Runtime(app)
        rt.proc.wait(20)
        rt.wait_ready()
        rt.stop()
        self.assertEqual(rt.proc.returncode, 1)
        self.assertIn(f"[berth:runtime] fatal error during startup: {app}/src/app.py must define a module-level `app = define_app(...)`\n",
                      rt.stderr)

    def test_context_bus(self):
        bus_path = os.path.join(self.tmp, "bus.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(bus_path)
        srv.listen(1)
        frames = []
        conns = []

        def serve():
            conn, _ = srv.accept()
            conns.append(conn)
            buf = b""
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = struct.unpack(">I", buf[:4])[0]
                    frames.append(cb.decode_envelope(buf[4:4 + n]))
                    buf = buf[4 + n:]

        threading.Thread(target=serve, daemon=True).start()
        rt = self.boot({"BERTH_CONTEXT_BUS_SOCKET": bus_path})
        self.assertIn(f"[berth:runtime] context bus connected at {bus_path}", rt.stderr)
        deadline = time.monotonic() + 5
        while len(frames) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(frames[:2], [{"kind": "register", "app": "fixture-py"}, {"kind": "subscribe", "topic": "fixture.in"}])
        conns[0].sendall(cb.frame(cb.encode_envelope("event", topic="fixture.in", payload=b'{"n":1}')))
        conns[0].sendall(cb.frame(cb.encode_envelope("event", topic="fixture.in")))
        time.sleep(0.2)
        c = Client(self.sock)
        self.assertEqual(c.call("received")["result"], {"received": [{"n": 1}, None]})
        self.assertEqual(c.call("publish", {"topic": "fs.file_created", "payload": {"path": "x", "createdBy": "me"}}),
                         {"id": "1", "result": None})
        time.sleep(0.2)
        pub = [f for f in frames if f["kind"] == "publish"]
        self.assertEqual(pub, [{"kind": "publish", "topic": "fs.file_created", "payload": b'{"path":"x","createdBy":"me"}'}])
        c.close()
        srv.close()


class EgressProxyTest(unittest.TestCase):
    """configure_egress_proxy() against a real proxy on 127.0.0.1, in a child process so
    the proxy variables it sets do not leak into the other tests."""

    def test_urllib_goes_through_the_proxy(self):
        seen = []
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def serve():
            c, _ = srv.accept()
            seen.append(c.recv(4096).decode())
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nproxied")
            c.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        code = ("import urllib.request, berth_sdk\n"
                "print(berth_sdk.configure_egress_proxy())\n"
                "print(urllib.request.urlopen('http://api.example.test/v1?q=1', timeout=10).read().decode())")
        env = dict(os.environ, PYTHONPATH=SDK,
                   BERTH_EGRESS_PROXY_URL="http://127.0.0.1:%d" % srv.getsockname()[1])
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        t.join(10)
        srv.close()
        self.assertEqual(out.stdout.split(), ["True", "proxied"], out.stderr)
        self.assertTrue(seen and seen[0].startswith("GET http://api.example.test/v1?q=1 HTTP/1.1\r\n"), seen)

    def test_api_github_com_goes_to_the_github_broker(self):
        def proxy(seen, body):
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(1)

            def serve():
                c, _ = srv.accept()
                seen.append(c.recv(4096).decode())
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                c.close()

            threading.Thread(target=serve, daemon=True).start()
            return srv

        via_egress, via_github = [], []
        egress, github = proxy(via_egress, b"egress"), proxy(via_github, b"github")
        code = ("import urllib.request, berth_sdk\n"
                "print(berth_sdk.configure_egress_proxy())\n"
                "print(urllib.request.urlopen('http://api.github.com/repos/o/r', timeout=10).read().decode())\n"
                "print(urllib.request.urlopen('http://api.example.test/x', timeout=10).read().decode())\n"
                "print(berth_sdk.github_proxies()['https'] == __import__('os').environ['BERTH_GITHUB_API_PROXY'])")
        env = dict(os.environ, PYTHONPATH=SDK,
                   BERTH_EGRESS_PROXY_URL="http://127.0.0.1:%d" % egress.getsockname()[1],
                   BERTH_GITHUB_API_PROXY="http://127.0.0.1:%d" % github.getsockname()[1])
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        egress.close()
        github.close()
        self.assertEqual(out.stdout.split(), ["True", "github", "egress", "True"], out.stderr)
        self.assertTrue(via_github and via_github[0].startswith("GET http://api.github.com/repos/o/r HTTP/1.1"), via_github)
        self.assertTrue(via_egress and via_egress[0].startswith("GET http://api.example.test/x HTTP/1.1"), via_egress)

    def test_nothing_without_the_variable(self):
        env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
        env["PYTHONPATH"] = SDK
        code = "import os, berth_sdk; print(berth_sdk.configure_egress_proxy(), os.environ.get('HTTPS_PROXY'))"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "False None", out.stderr)


class CodecTest(unittest.TestCase):
    VECTORS = [
        (("register", {"app": "notes"}), "0a070a056e6f746573"),
        (("publish", {"topic": "notes.added", "payload": b'{"id":"a"}'}), "12190a0b6e6f7465732e6164646564120a7b226964223a2261227d"),
        (("subscribe", {"topic": "fs.file_created"}), "1a110a0f66732e66696c655f63726561746564"),
        (("unsubscribe", {"topic": "t"}), "22030a0174"),
        (("event", {"topic": "t"}), "2a030a0174"),
        (("ack", {"ok": True}), "32020801"),
        (("ack", {"ok": False, "error": "bad"}), "32051203626164"),
    ]

    def test_vectors(self):
        for (kind, fields), hexed in self.VECTORS:
            self.assertEqual(cb.encode_envelope(kind, **fields).hex(), hexed, kind)
            self.assertEqual(cb.decode_envelope(bytes.fromhex(hexed))["kind"], kind)

    def test_against_the_proto(self):
        """WIRE is sdk/context_bus.proto's table, and the codec makes the protobuf
        library's bytes, by the descriptor meson compiles from that file."""
        desc = os.path.join(os.environ.get("BERTH_BUILD_DIR", ""), "src", "context-bus", "context_bus.desc")
        if not os.path.exists(desc):
            self.skipTest(f"{desc} is not built")
        r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "proto_vectors.py"), desc],
                           capture_output=True, text=True)
        if r.returncode != 0 and "No module named 'google'" in r.stderr:
            self.skipTest("python3-protobuf is not installed")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        wire = {m: {k: list(v) for k, v in fields.items()} for m, fields in cb.WIRE.items()}
        self.assertEqual(wire, got["wire"])
        for v in got["vectors"]:
            fields = {k: bytes.fromhex(x["hex"]) if isinstance(x, dict) else x for k, x in v["fields"].items()}
            self.assertEqual(cb.encode_envelope(v["kind"], **fields).hex(), v["hex"], v)
            back = cb.decode_envelope(bytes.fromhex(v["hex"]))
            self.assertEqual(back["kind"], v["kind"])
            for k, x in fields.items():
                if x or k in ("ok", "payload"):
                    self.assertEqual(back[k], x, (v, k))
        u = got["unknownFields"]
        self.assertEqual(cb.decode_envelope(bytes.fromhex(u["hex"])), {"kind": u["kind"], "app": u["app"]})

    def test_local_bus(self):
        bus = cb.create_local_context_bus()
        got = []
        off = bus.subscribe("t", got.append)
        bus.publish("t", {"a": 1})
        bus.publish("t", None)
        off()
        bus.publish("t", 2)
        self.assertEqual(got, [{"a": 1}, None])


class ExampleAppsTest(unittest.TestCase):
    def load(self, app_dir):
        app = runtime.load_entry(os.path.join(app_dir, "src", "app.py"))
        bus = cb.create_local_context_bus()
        published = []
        original = bus.publish

        def record(topic, payload):
            published.append((topic, payload))
            original(topic, payload)

        bus.publish = record
        from berth_sdk.manifest import load_manifest
        manifest = load_manifest(os.path.join(app_dir, "berth.yml"))
        self.assertIsNone(runtime.exports_mismatch([e.name for e in manifest.exports], app.export_names))
        for h in app._install_hooks:
            h()
        for h in app._ready_hooks:
            h(AppContext(manifest, bus))
        return app, published

    def test_hello_world_py(self):
        app, published = self.load(os.path.join(ROOT, "apps", "hello-world-py"))
        call = lambda exp, inp: rpc.invoke_export(app, {"id": "1", "export": exp, "input": inp})  # noqa: E731
        self.assertEqual(call("greet", {"name": "World"}),
                         {"id": "1", "result": {"message": "Hello, World! (from a real Python resident app)"}})
        self.assertEqual(call("does_not_exist", {}), {"id": "1", "error": 'no such export "does_not_exist"'})
        self.assertEqual(call("publish_file_created", {"path": "x", "created_by": "hello-world-py"}), {"id": "1", "result": None})
        self.assertEqual(published, [("fs.file_created", {"path": "x", "createdBy": "hello-world-py"})])

    def test_hello_world_py_runtime(self):
        rt = Runtime(os.path.join(ROOT, "apps", "hello-world-py"))
        out = rt.feed(b'{"id":"1","export":"greet","input":{"name":"World"}}\n')
        rt.stop()
        self.assertEqual(out, b'{"id":"1","result":{"message":"Hello, World! (from a real Python resident app)"}}\n')
        self.assertIn('[berth:runtime] "hello-world-py" ready', rt.stderr)

    def test_python_template(self):
        tmp = tempfile.mkdtemp(prefix="berth-py-tmpl-")
        try:
            app_dir = os.path.join(tmp, "my-app")
            shutil.copytree(os.path.join(ROOT, "templates", "python"), app_dir)
            for rel in ("berth.yml", "src/app.py", "README.md"):
                p = os.path.join(app_dir, rel)
                with open(p) as f:
                    text = f.read()
                with open(p, "w") as f:
                    f.write(text.replace("{{name}}", "my-app"))
            app, _ = self.load(app_dir)
            self.assertEqual(rpc.invoke_export(app, {"id": "p", "export": "ping"}), {"id": "p", "result": {"message": "pong"}})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_capability_matching(self):
        from berth_sdk import matches_capability
        self.assertTrue(matches_capability("filesystem:write:/workspace/*", "filesystem:write:/workspace/a"))
        self.assertTrue(matches_capability("browser:navigate:a?b", "browser:navigate:a?b"))
        self.assertFalse(matches_capability("browser:navigate:a?b", "browser:navigate:ab"))
        self.assertFalse(matches_capability("network:connect:80", "network:bind:80"))


class DurableWriteTest(unittest.TestCase):
    """write_file_durable: the data is there and nothing else is, os.fsync reaches the file
    and then its directory, concurrent calls keep to their own temporary files, and a
    failure at any step raises, names the target and leaves the directory as it was."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="berth-py-durable-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def spy_fsync(self, on_fsync=None):
        """Patch os.fsync: each call records what the descriptor is, then may fail."""
        calls = []
        real = os.fsync

        def fsync(fd):
            link = os.readlink(f"/proc/self/fd/{fd}")
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
            call = {"path": link, "is_dir": is_dir}
            if not is_dir:
                with open(f"/proc/self/fd/{fd}", "rb") as f:
                    call["content"] = f.read()
            calls.append(call)
            if on_fsync:
                on_fsync(call)
            return real(fd)

        patcher = mock.patch("os.fsync", side_effect=fsync)
        patcher.start()
        self.addCleanup(patcher.stop)
        return calls, patcher

    def assert_fails(self, exc_type, path, fn):
        with self.assertRaises(exc_type) as cm:
            fn()
        self.assertEqual(cm.exception.filename, path)
        self.assertNotIn(".tmp", str(cm.exception))
        return cm.exception

    def test_exported(self):
        import berth_sdk
        self.assertIs(berth_sdk.write_file_durable, durable.write_file_durable)
        self.assertIn("write_file_durable", berth_sdk.__all__)

    def test_data_is_there_and_nothing_else(self):
        f = self.path("notes.json")
        self.assertIsNone(durable.write_file_durable(f, '[{"text":"héllo"}]\n'))
        with open(f, encoding="utf-8") as fh:
            self.assertEqual(fh.read(), '[{"text":"héllo"}]\n')
        self.assertEqual(stat.S_IMODE(os.stat(f).st_mode), 0o600)
        self.assertEqual(os.listdir(self.dir), ["notes.json"])
        for data, want in ((b"\x00\x01\xff", b"\x00\x01\xff"), (bytearray(b"ab"), b"ab"),
                           (memoryview(b"mv"), b"mv"), ("", b"")):
            durable.write_file_durable(f, data)
            with open(f, "rb") as fh:
                self.assertEqual(fh.read(), want)
        self.assertEqual(os.listdir(self.dir), ["notes.json"])
        old = os.umask(0o022)
        try:
            durable.write_file_durable(self.path("shared.txt"), "x", mode=0o666)
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("shared.txt")).st_mode), 0o644)
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            durable.write_file_durable("rel.txt", "relative")
        finally:
            os.chdir(cwd)
        with open(self.path("rel.txt")) as fh:
            self.assertEqual(fh.read(), "relative")
        self.assertEqual(sorted(os.listdir(self.dir)), ["notes.json", "rel.txt", "shared.txt"])

    def test_fsync_file_before_rename_then_directory(self):
        f = self.path("notes.json")
        with open(f, "w") as fh:
            fh.write("old")
        seen = []

        def look(call):
            with open(f) as fh:
                seen.append(fh.read())

        calls, _ = self.spy_fsync(look)
        durable.write_file_durable(f, "new")
        self.assertEqual(len(calls), 2, calls)
        file_call, dir_call = calls
        self.assertFalse(file_call["is_dir"])
        self.assertEqual(os.path.dirname(file_call["path"]), self.dir)
        name = os.path.basename(file_call["path"])
        self.assertTrue(name.startswith(".notes.json.") and name.endswith(".tmp"), name)
        self.assertEqual(file_call["content"], b"new")
        self.assertEqual(seen[0], "old", "the target is untouched until the data is synced")
        self.assertEqual((dir_call["path"], dir_call["is_dir"]), (self.dir, True))
        self.assertEqual(seen[1], "new", "the directory is synced after the rename")

    def test_directory_fd_is_o_directory(self):
        flags = []
        real_open = os.open

        def spy_open(path, fl, *a, **kw):
            flags.append((path, fl))
            return real_open(path, fl, *a, **kw)

        with mock.patch("os.open", side_effect=spy_open):
            durable.write_file_durable(self.path("x"), "x")
        (temp, temp_flags), (d, dir_flags) = flags
        self.assertEqual(temp_flags & (os.O_CREAT | os.O_EXCL), os.O_CREAT | os.O_EXCL)
        self.assertEqual(d, self.dir)
        self.assertEqual(dir_flags & (os.O_DIRECTORY | os.O_ACCMODE), os.O_DIRECTORY | os.O_RDONLY)

    def test_concurrent_writers(self):
        f = self.path("same.json")
        n = 24
        datas = [(f"writer {i} " * 5000).encode() for i in range(n)]
        calls, _ = self.spy_fsync()
        errors = []

        def write(data):
            try:
                durable.write_file_durable(f, data)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=write, args=(d,)) for d in datas]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        files = [c for c in calls if not c["is_dir"]]
        self.assertEqual(len({c["path"] for c in files}), n, "a temporary name per call")
        self.assertEqual(sorted(c["content"] for c in files), sorted(datas), "each synced its own data, whole")
        self.assertEqual(len([c for c in calls if c["is_dir"]]), n)
        with open(f, "rb") as fh:
            self.assertIn(fh.read(), datas)
        self.assertEqual(os.listdir(self.dir), ["same.json"])
        # Child processes too (the names carry the pid).
        script = ("import sys; sys.path.insert(0, sys.argv[1]); from berth_sdk.durable import write_file_durable as w; "
                  "[w(sys.argv[2], sys.argv[3] * 1000) for _ in range(20)]")
        procs = [subprocess.Popen([PYTHON, "-c", script, SDK, f, str(i)]) for i in range(4)]
        self.assertEqual([p.wait(60) for p in procs], [0] * 4)
        self.assertEqual(os.listdir(self.dir), ["same.json"])

    def test_missing_directory(self):
        f = self.path("missing", "x.json")
        e = self.assert_fails(FileNotFoundError, f, lambda: durable.write_file_durable(f, "x"))
        self.assertEqual(str(e), f"[Errno 2] No such file or directory: '{f}'")
        self.assertEqual(os.listdir(self.dir), [])

    def test_read_only_directory(self):
        f = self.path("kept.json")
        with open(f, "w") as fh:
            fh.write("old")
        if os.geteuid() == 0:
            # root ignores modes: try it as nobody, in a child (the directory is root's, 0755).
            os.chmod(self.dir, 0o755)
            script = ("import json, sys; sys.path.insert(0, sys.argv[1]); from berth_sdk.durable import write_file_durable\n"
                      "try:\n    write_file_durable(sys.argv[2], 'new'); print('wrote')\n"
                      "except OSError as e:\n    print(json.dumps([type(e).__name__, e.filename, str(e)]))\n")
            r = subprocess.run([PYTHON, "-c", script, SDK, f], user=65534, group=65534,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout), ["PermissionError", f, f"[Errno 13] Permission denied: '{f}'"])
        else:
            os.chmod(self.dir, 0o555)
            try:
                self.assert_fails(PermissionError, f, lambda: durable.write_file_durable(f, "new"))
            finally:
                os.chmod(self.dir, 0o755)
        self.assertEqual(os.listdir(self.dir), ["kept.json"])
        with open(f) as fh:
            self.assertEqual(fh.read(), "old")

    def test_failing_fsync_removes_the_temporary_file(self):
        f = self.path("kept.json")
        with open(f, "w") as fh:
            fh.write("old")

        def fail(call):
            if not call["is_dir"]:
                raise OSError(5, "Input/output error")

        calls, _ = self.spy_fsync(fail)
        e = self.assert_fails(OSError, f, lambda: durable.write_file_durable(f, "new"))
        self.assertEqual(e.errno, 5)
        self.assertEqual(len(calls), 1, "nothing is renamed or synced after the failure")
        self.assertEqual(os.listdir(self.dir), ["kept.json"])
        with open(f) as fh:
            self.assertEqual(fh.read(), "old")

    def test_failing_rename_removes_the_temporary_file(self):
        f = self.path("becomes-a-dir")

        def race(call):
            if not call["is_dir"]:
                os.mkdir(f)
                with open(os.path.join(f, "inside"), "w"):
                    pass

        self.spy_fsync(race)
        self.assert_fails(IsADirectoryError, f, lambda: durable.write_file_durable(f, "new"))
        self.assertEqual(os.listdir(self.dir), ["becomes-a-dir"])

    def test_failing_write_removes_the_temporary_file(self):
        f = self.path("x")
        with mock.patch("os.write", side_effect=OSError(28, "No space left on device")):
            e = self.assert_fails(OSError, f, lambda: durable.write_file_durable(f, "new"))
        self.assertEqual(e.errno, 28)
        self.assertEqual(os.listdir(self.dir), [])

    def test_directory_target_and_bad_arguments(self):
        os.mkdir(self.path("sub"))
        self.assert_fails(IsADirectoryError, self.path("sub"), lambda: durable.write_file_durable(self.path("sub"), "x"))
        slash = self.path("nodir") + "/"
        self.assert_fails(IsADirectoryError, slash, lambda: durable.write_file_durable(slash, "x"))
        with self.assertRaises(TypeError):
            durable.write_file_durable(self.path("x"), 5)
        with self.assertRaises(ValueError):
            durable.write_file_durable("", "x")
        self.assertEqual(os.listdir(self.dir), ["sub"])
        self.assertEqual(os.listdir(self.path("sub")), [])

    def test_mkdir_syncs_each_new_directory_entry(self):
        os.mkdir(self.path("a"))
        f = self.path("a", "b", "c", "x.json")
        calls, patcher = self.spy_fsync()
        durable.write_file_durable(f, "deep", mkdir=True)
        with open(f) as fh:
            self.assertEqual(fh.read(), "deep")
        dirs = [c["path"] for c in calls if c["is_dir"]]
        for want in (self.path("a"), self.path("a", "b"), self.path("a", "b", "c")):
            self.assertIn(want, dirs)
        self.assertNotIn(self.dir, dirs)
        self.assertEqual(dirs[-1], self.path("a", "b", "c"))
        calls.clear()
        durable.write_file_durable(f, "again", mkdir=True)
        self.assertEqual([c["path"] for c in calls if c["is_dir"]], [self.path("a", "b", "c")])
        missing = self.path("q", "x")
        self.assert_fails(FileNotFoundError, missing, lambda: durable.write_file_durable(missing, "x"))

    def test_symlink_written_through_and_device_in_place(self):
        os.mkdir(self.path("real"))
        with open(self.path("real", "f"), "w") as fh:
            fh.write("old")
        os.symlink("real/f", self.path("link"))
        os.symlink("real", self.path("dirlink"))
        durable.write_file_durable(self.path("link"), "through the link")
        with open(self.path("real", "f")) as fh:
            self.assertEqual(fh.read(), "through the link")
        self.assertTrue(os.path.islink(self.path("link")))
        durable.write_file_durable(self.path("dirlink", "g"), "through a directory link")
        self.assertEqual(sorted(os.listdir(self.path("real"))), ["f", "g"])
        durable.write_file_durable("/dev/null", "discarded")
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
