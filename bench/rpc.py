#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where an RPC round trip's time goes, layer by layer, in one VM (docs/benchmarks.md).
Each row is the median of many calls on one connection, made in blocks that take turns:

  * baseline: a unix-socket echo of the same line in this process, on the host;
  * channel: {"op":"status"} on control.sock: the host socket, berth-vmm's multiplexer,
    QEMU's virtio-serial port and berth-init's answer, no app;
  * framing: an export bench/fixtures/rpc-layers does not have: plus berth-init's splice
    to the app's unix socket, Node woken, and the SDK's line framing, JSON parse, export
    lookup and error answer;
  * handler: its `bare` export (four notes, no schema): plus calling a handler and
    serialising its answer;
  * validation: its `validated` export (the same, with list_notes' output schema): plus
    zod checking the answer;
  * app: apps/notes' list_notes of the four notes added first: plus the app's own work
    (reading notes.json, checking each note).

Each layer's cost is its difference with the row above. Three more rows stand beside
them: the echo fixture (a bare Node server without the SDK, exec'd rather than started
warm) and rpc-layers' `read_async` and `read_sync`, the same small file read through
node:fs/promises and through one synchronous call. Needs the artifacts installed
(BERTH_HOME or ~/.berth); boots one VM with berth-vmm.

Usage: bench/rpc.py [--calls N] [--json]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apps as appsbench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VMM = os.path.join(ROOT, "build/src/berth-vmm/berth-vmm")
BERTH = os.path.join(ROOT, "build/src/berth/berth")
VM = "bench-rpc"
ROUNDS = 3  # blocks of calls per row


class Line:
    """One connection that sends a line and reads until the answer it is waiting for."""

    def __init__(self, path, is_answer):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.is_answer = is_answer

    def call(self, line):
        t0 = time.perf_counter()
        self.s.sendall(line)
        while True:
            got = self.f.readline()
            if not got:
                raise RuntimeError("the connection closed")
            if self.is_answer(got):
                return time.perf_counter() - t0


def add_notes(path):
    """A list_notes that lists something, as bench/apps.py's does."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    appsbench.add_notes(s, s.makefile("rb"))
    s.close()


def echo_server():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "echo.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        for line in c.makefile("rb"):
            c.sendall(line)

    threading.Thread(target=serve, daemon=True).start()
    return d, path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    run = os.path.join(home, "run/vm", VM)
    work = tempfile.mkdtemp(prefix="berth-bench-rpc.")
    echo_dir = None
    try:
        shares = []
        for app in ("apps/notes", "test/e2e/fixtures/echo", "bench/fixtures/rpc-layers"):
            name = os.path.basename(app)
            out = os.path.join(work, name)
            if app.endswith("echo"):
                shutil.copytree(os.path.join(ROOT, app), out)
            else:
                subprocess.run(["node", os.path.join(ROOT, "sdk/node/bundle.mjs"), os.path.join(ROOT, app), out],
                               check=True, capture_output=True)
            shares += ["--app", out]
        r = subprocess.run([VMM, "run", "--name", VM, *shares, "--mem", "1024"], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise RuntimeError("berth-vmm run failed:\n" + r.stderr[-3000:])
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                logs = subprocess.run([BERTH, "vm", "logs", VM], capture_output=True, text=True).stdout
                if all(f'"{a}" ready' in logs for a in ("notes", "echo", "rpc-layers")):
                    break
                time.sleep(1)
            add_notes(os.path.join(run, "rpc-0.sock"))
            echo_dir, echo_path = echo_server()
            rid = lambda line: b'"id"' in line
            layers = lambda: Line(os.path.join(run, "rpc-2.sock"), rid)
            rows = {
                "baseline": (Line(echo_path, rid), {"export": "list_notes"}),
                "channel": (Line(os.path.join(run, "control.sock"), lambda l: b'"op":"status"' in l), None),
                "framing": (layers(), {"export": "no_such_export"}),
                "handler": (layers(), {"export": "bare"}),
                "validation": (layers(), {"export": "validated"}),
                "app": (Line(os.path.join(run, "rpc-0.sock"), rid), {"export": "list_notes"}),
                "echoFixture": (Line(os.path.join(run, "rpc-1.sock"), rid), {"export": "ping", "input": {}}),
                "readAsync": (layers(), {"export": "read_async"}),
                "readSync": (layers(), {"export": "read_sync"}),
            }
            times = {k: [] for k in rows}
            # In blocks, as a client calling one export does (a call to another process
            # in between costs each call about 1 ms more under emulation); the blocks take
            # turns, so that the machine's drift is shared.
            block = max(1, args.calls // ROUNDS)
            for rnd in range(ROUNDS):
                for k, (conn, req) in rows.items():
                    for i in range(block + 10):
                        line = (json.dumps({"op": "status"}) if req is None else json.dumps({"id": str(i), **req})).encode() + b"\n"
                        t = conn.call(line)
                        if i >= 10:  # the first calls of a block warm up
                            times[k].append(t)
        finally:
            subprocess.run([BERTH, "vm", "stop", VM], capture_output=True)
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        order = ["baseline", "channel", "framing", "handler", "validation", "app"]
        beside = ["echoFixture", "readAsync", "readSync"]
        result = {"calls": args.calls, "medianUs": {k: round(med[k]) for k in order + beside},
                  "layerUs": {order[i]: round(med[order[i]] - med[order[i - 1]]) for i in range(1, len(order))},
                  "readAsyncOverSyncUs": round(med["readAsync"] - med["readSync"]),
                  "appOverBaselineRatio": round(med["app"] / med["baseline"], 1)}
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            what = {"baseline": "unix-socket echo on the host", "channel": "control.sock status (no app)",
                    "framing": "SDK, an unknown export", "handler": "SDK, an export without schemas",
                    "validation": "SDK, the same with an output schema", "app": "notes list_notes",
                    "echoFixture": "echo fixture (no SDK, exec'd)", "readAsync": "a file read, node:fs/promises",
                    "readSync": "a file read, one synchronous call"}
            print(f"RPC round trip, layer by layer ({args.calls} calls each, in {ROUNDS} blocks)")
            for k in order:
                extra = f"  (+{result['layerUs'][k]} us)" if k in result["layerUs"] else ""
                print(f"  {what[k]:<38} median {result['medianUs'][k]} us{extra}")
            print("beside them")
            for k in beside:
                print(f"  {what[k]:<38} median {result['medianUs'][k]} us")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if echo_dir:
            shutil.rmtree(echo_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
