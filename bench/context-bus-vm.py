#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Context bus between two apps in one VM (docs/context-bus.md), measured in the guest:

  * bus: app "pub" publishes one event at a time, each carrying CLOCK_MONOTONIC (shared
    by every process of the VM); app "sub" takes the difference when its handler runs:
    Python SDK → bus daemon (uid 9001, under agent-init) → Python SDK of another app;
  * baseline: a unix socketpair round trip in the subscriber's own Python process, in the
    same VM, on the same emulated or virtual CPU.

Both apps are test/e2e/fixtures/busprobe. Reports the median and p90 of the bus, the
baseline's median, and their ratio. Needs the artifacts installed (BERTH_HOME or ~/.berth,
e.g. by scripts/main-job.sh); boots one VM with berth-vmm.

Usage: bench/context-bus-vm.py [-n EVENTS] [--json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VMM = os.path.join(ROOT, "build/src/berth-vmm/berth-vmm")
BERTH = os.path.join(ROOT, "build/src/berth/berth")
VM = "bench-bus"


def rpc(app, export, inp=None):
    argv = [BERTH, "rpc", app, "--export", export]
    if inp is not None:
        argv += ["--input", json.dumps(inp)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{app}.{export}: {out.stdout}{out.stderr}")
    return json.loads(out.stdout)


def wait_ready(apps, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = subprocess.run([BERTH, "vm", "logs", VM], capture_output=True, text=True).stdout
        if all(f'"{a}" ready' in logs for a in apps):
            return
        time.sleep(1)
    raise RuntimeError("the apps did not get ready:\n" + logs[-3000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=300, help="events")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="berth-bench-bus.")
    try:
        shares = []
        for name in ("pub", "sub"):
            src = os.path.join(work, "src-" + name)
            shutil.copytree(os.path.join(ROOT, "test/e2e/fixtures/busprobe"), src)
            yml = os.path.join(src, "berth.yml")
            text = open(yml).read().replace("name: busprobe", f"name: {name}", 1)
            open(yml, "w").write(text)
            share = os.path.join(work, name)
            subprocess.run(["node", os.path.join(ROOT, "sdk/node/bundle.mjs"), src, share],
                           check=True, capture_output=True)
            shares += ["--app", share]
        run = subprocess.run([VMM, "run", "--name", VM, *shares, "--mem", "1024"],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError("berth-vmm run failed:\n" + run.stderr[-3000:])
        try:
            wait_ready(["pub", "sub"])
            rpc("sub", "listen", {"topic": "bench.latency"})
            rpc("pub", "burst", {"topic": "bench.latency", "count": 20})  # warm-up
            time.sleep(1)
            rpc("sub", "listen", {"topic": "bench.measured"})
            rpc("pub", "burst", {"topic": "bench.measured", "count": args.n})
            stats = rpc("sub", "stats")
            base = rpc("sub", "echo_baseline", {"count": args.n})
        finally:
            subprocess.run([BERTH, "vm", "stop", VM], capture_output=True)
        result = {
            "events": args.n,
            "delivered": stats["count"],
            "busMedianUs": stats["medianUs"],
            "busP90Us": stats["p90Us"],
            "socketpairMedianUs": base["medianUs"],
            "busOverSocketpairRatio": round(stats["medianUs"] / base["medianUs"], 1),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"context bus between two apps in one VM ({args.n} events)")
            print(f"  bus, publish -> handler       median {result['busMedianUs']} us, p90 {result['busP90Us']} us"
                  f" ({result['delivered']} of {args.n} delivered)")
            print(f"  socketpair round trip, same VM median {result['socketpairMedianUs']} us"
                  f" (the bus is {result['busOverSocketpairRatio']}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
