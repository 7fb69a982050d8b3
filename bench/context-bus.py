#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Context bus benchmark (docs/context-bus.md): publish → deliver latency between two
clients of the daemon in build/, on this host, against a baseline in the same run:

  * bus: client A sends one PublishRequest frame, the time until client B has read the
    whole Event frame (A→daemon, decode, fan-out, encode, daemon→B). One event in flight;
  * baseline: the same bytes through a plain unix-socket echo in C (bench/unix-echo.c):
    A→echo→A, the same two socket hops and one process wake-up, nothing else;
  * sdk: two Node SDK clients, publish() to the subscriber's handler (JSON both ways),
    for what an app sees.

The bus and the baseline are interleaved round by round, at each payload size. No VM, no
root. Prints medians, p99 and ratios; --json for a machine-readable record. Inside a VM
the same path runs under the guest's CPU (TCG or KVM): this measures the daemon itself.

Usage: bench/context-bus.py [-n ROUNDS] [--sizes 64,65536] [--build DIR] [--json]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def frame(env):
    return struct.pack(">I", len(env)) + env


def recv_exact(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            raise RuntimeError("connection closed")
        got += k
    return buf


def recv_frame(s):
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    return recv_exact(s, n)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def summary(ms):
    return {"median": statistics.median(ms), "p99": pct(ms, 0.99), "mean": statistics.mean(ms), "n": len(ms)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000, help="rounds per payload size")
    ap.add_argument("--sizes", default="64,65536")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bus_bin = os.path.join(args.build, "src/context-bus/context-bus")
    if not os.access(bus_bin, os.X_OK):
        sys.exit(f"{bus_bin} is missing: build the project first (ninja -C {args.build})")
    work = tempfile.mkdtemp(prefix="berth-bench-bus-")
    procs = []
    try:
        echo_bin = os.path.join(work, "unix-echo")
        subprocess.run(["gcc", "-O2", "-o", echo_bin, os.path.join(ROOT, "bench/unix-echo.c")], check=True)
        bus_path, echo_path = os.path.join(work, "bus.sock"), os.path.join(work, "echo.sock")
        log = open(os.path.join(work, "bus.log"), "wb")
        procs.append(subprocess.Popen([bus_bin], stdin=subprocess.DEVNULL, stderr=log, env={
            "PATH": "/usr/bin:/bin", "BERTH_CONTEXT_BUS_SOCKET": bus_path, "BERTH_SHARED_GID": "0"}))
        echo = subprocess.Popen([echo_bin, echo_path], stdout=subprocess.PIPE, text=True)
        procs.append(echo)
        if echo.stdout.readline().strip() != "ready":
            sys.exit("the echo baseline did not start")
        end = time.time() + 5
        while not os.path.exists(bus_path) and time.time() < end:
            time.sleep(0.01)
        a, b, e = (socket.socket(socket.AF_UNIX) for _ in range(3))
        a.connect(bus_path)
        b.connect(bus_path)
        e.connect(echo_path)
        b.sendall(frame(ld(3, ld(1, b"bench"))))
        recv_frame(b)  # its ack
        results = {}
        for size in [int(x) for x in args.sizes.split(",")]:
            payload = b"x" * size
            pub = frame(ld(2, ld(1, b"bench") + ld(2, payload)))
            event_len = len(frame(ld(5, ld(1, b"bench") + ld(2, payload))))
            bus_ms, echo_ms = [], []
            for i in range(args.n + 50):
                t0 = time.perf_counter_ns()
                a.sendall(pub)
                recv_frame(b)
                t1 = time.perf_counter_ns()
                recv_frame(a)  # the publisher's ack, outside the timing
                t2 = time.perf_counter_ns()
                e.sendall(pub)
                recv_exact(e, len(pub))
                t3 = time.perf_counter_ns()
                if i >= 50:  # warm-up
                    bus_ms.append((t1 - t0) / 1e6)
                    echo_ms.append((t3 - t2) / 1e6)
            results[size] = {"bus": summary(bus_ms), "echo": summary(echo_ms), "eventBytes": event_len}
        for s in (a, b, e):
            s.close()
        node = shutil.which("node")
        if node:
            for size in [int(x) for x in args.sizes.split(",")]:
                r = subprocess.run([node, os.path.join(ROOT, "bench/context-bus-sdk.mjs"), bus_path,
                                    str(min(args.n, 1000)), str(size)], capture_output=True, text=True, timeout=300)
                if r.returncode == 0:
                    results[size]["sdk"] = summary(json.loads(r.stdout.splitlines()[-1])["ms"])
                else:
                    print(f"# the Node SDK path failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
    finally:
        for p in procs:
            p.terminate()
            p.wait(5)
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps({"rounds": args.n, "results": results}, indent=2))
        return
    print(f"context bus publish → deliver, {args.n} rounds per size, one event in flight (µs)")
    print(f"{'payload':>9}  {'path':<38} {'median':>8} {'p99':>8}")
    for size, r in results.items():
        e = r["echo"]["median"]
        rows = [("unix-socket echo in C (baseline)", r["echo"]), ("bus: publish → Event read", r["bus"])]
        if "sdk" in r:
            rows.append(("Node SDK publish() → handler", r["sdk"]))
        for name, s in rows:
            ratio = "" if s is r["echo"] else f"  ({s['median'] / e:.1f}× the echo, +{(s['median'] - e) * 1000:.1f} µs)"
            print(f"{size:>8}B  {name:<38} {s['median'] * 1000:>8.1f} {s['p99'] * 1000:>8.1f}{ratio}")


if __name__ == "__main__":
    main()
