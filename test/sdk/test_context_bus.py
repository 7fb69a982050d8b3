# SPDX-License-Identifier: Apache-2.0
"""The Python SDK's context bus client against the real daemon (src/context-bus, built by
meson) on this host: fan-out and no echo, one subscribe frame per topic, unsubscribe, a
Node publisher and a Python subscriber, and reconnecting after the daemon went away and
came back (SPEC 2.8, 5; docs/context-bus.md)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

from berth_sdk import context_bus as cb  # noqa: E402

BIN = os.environ.get("CONTEXT_BUS") or os.path.join(os.environ.get("BERTH_BUILD_DIR", ""), "src", "context-bus", "context-bus")


def until(what, fn, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Daemon:
    def __init__(self, d, path):
        self.log_path = os.path.join(d, f"bus-{time.time_ns()}.log")
        self.err = open(self.log_path, "wb")
        self.proc = subprocess.Popen([BIN], stdin=subprocess.DEVNULL, stderr=self.err, env={
            "PATH": "/usr/bin:/bin", "BERTH_CONTEXT_BUS_SOCKET": path, "BERTH_SHARED_GID": "0"})
        until("the bus to listen", lambda: f"listening on {path}" in self.log())

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
        self.err.close()


@unittest.skipUnless(os.path.exists(BIN), f"{BIN} is not built")
class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="berth-bus-py-")
        self.path = os.path.join(self.dir, "bus.sock")
        self.daemon = Daemon(self.dir, self.path)
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        self.daemon.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self):
        c = cb.connect_context_bus(self.path)
        self.clients.append(c)
        return c

    def test_fan_out_no_echo(self):
        a, b = self.client(), self.client()
        a.register("notes")
        b.register("activity-feed")
        got_a, got_b = [], []
        a.subscribe("notes.added", got_a.append)
        b.subscribe("notes.added", got_b.append)
        until("two subscriptions", lambda: self.daemon.log().count('subscribed to "notes.added"') == 2)
        a.publish("notes.added", {"id": "1", "text": "ü"})
        b.publish("notes.added", None)
        until("both events", lambda: len(got_a) == 1 and len(got_b) == 1)
        time.sleep(0.1)
        self.assertEqual(got_b, [{"id": "1", "text": "ü"}])
        self.assertEqual(got_a, [None])

    def test_one_subscribe_per_topic_and_unsubscribe(self):
        a, b = self.client(), self.client()
        b.register("code-editor")
        got = []
        off1 = b.subscribe("fs.file_created", lambda p: got.append(("h1", p)))
        off2 = b.subscribe("fs.file_created", lambda p: got.append(("h2", p)))
        subscribed = lambda: self.daemon.log().count('"code-editor" subscribed to "fs.file_created"')
        until("the subscription", lambda: subscribed() >= 1)
        time.sleep(0.15)  # a second subscribe frame, if one were sent, would be logged by now
        self.assertEqual(subscribed(), 1)
        a.publish("fs.file_created", {"path": "x"})
        until("both handlers", lambda: len(got) == 2)
        barrier = []
        a.subscribe("test.barrier", barrier.append)
        until("the barrier subscription", lambda: 'subscribed to "test.barrier"' in self.daemon.log())
        off1()
        off2()
        # b's unsubscribe and then its publish go down one connection in order: once a has
        # the barrier event, the bus has dropped b's subscription.
        b.publish("test.barrier", 1)
        until("the barrier event", lambda: barrier)
        a.publish("fs.file_created", {"path": "y"})
        time.sleep(0.2)
        self.assertEqual(len(got), 2)

    def test_node_publisher_python_subscriber(self):
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed")
        s = self.client()
        got = []
        before = self.daemon.log().count('subscribed to "notes.added"')
        s.subscribe("notes.added", got.append)
        until("the subscription", lambda: self.daemon.log().count('subscribed to "notes.added"') > before)
        script = (f"const bus = await import({json.dumps(os.path.join(ROOT, 'sdk', 'node', 'src', 'context-bus.mjs'))});"
                  f"const c = await bus.connectContextBus({{ socketPath: {json.dumps(self.path)} }});"
                  "await c.register({ app: 'notes' });"
                  "await c.publish('notes.added', { id: 'n1', text: 'from node' });"
                  "await new Promise((r) => setTimeout(r, 200)); c.close();")
        r = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        until("the Node event", lambda: got)
        self.assertEqual(got, [{"id": "n1", "text": "from node"}])

    def test_reconnect(self):
        sub, pub = self.client(), self.client()
        sub.register("activity-feed")
        got = []
        sub.subscribe("notes.completed", got.append)
        until("the subscription", lambda: '"activity-feed" subscribed to "notes.completed"' in self.daemon.log())
        self.daemon.stop()
        until("both clients to notice", lambda: not sub.connected and not pub.connected)
        pub.publish("notes.completed", {"id": "lost"})  # dropped: at most once
        self.daemon = Daemon(self.dir, self.path)
        until("the resubscription", lambda: '"activity-feed" subscribed to "notes.completed"' in self.daemon.log(), 10)
        self.assertIn('registered as "activity-feed"', self.daemon.log())
        until("the publisher to reconnect", lambda: pub.connected, 10)
        pub.publish("notes.completed", {"id": "after"})
        until("the event after the restart", lambda: got)
        self.assertEqual(got, [{"id": "after"}])


class NoDaemonTest(unittest.TestCase):
    def test_connect_fails_fast(self):
        with self.assertRaises(OSError):
            cb.connect_context_bus("/nonexistent/bus.sock", timeout=0.5)


if __name__ == "__main__":
    unittest.main()
