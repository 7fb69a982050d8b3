#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""MCP benchmark, all measured in one run on the same machine: the time from spawning
`berth mcp` to the first answered tools/call (initialize, notifications/initialized,
tools/call list_notes), for apps/notes

  * with its own VM (berth mcp boots berth-mcp-notes and stops it at the end), and
  * attached to the VM `berth dev` already runs,

against the bare boot of the same pinned kernel with a trivial init (bench/boot.py's
baseline), interleaved so all three see the same machine load. Prints medians and
ratios; --json for a machine-readable record.

Usage: bench/mcp.py [-n RUNS] [--json]  (artifacts installed in BERTH_HOME or ~/.berth,
e.g. by scripts/main-job.sh)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apps as appsbench  # noqa: E402
import boot as bootbench  # noqa: E402

ROOT = bootbench.ROOT
BERTH = bootbench.BERTH


def first_call(app_dir, env):
    """Seconds from spawning berth mcp to the answer of its first tools/call."""
    t0 = time.monotonic()
    p = subprocess.Popen([BERTH, "mcp", "--app", "notes", "--app-dir", app_dir], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
    send = lambda m: (p.stdin.write(json.dumps(m) + "\n"), p.stdin.flush())
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "0"}}})
    answered = None
    for line in p.stdout:
        msg = json.loads(line)
        if msg.get("id") == 1:
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "list_notes", "arguments": {}}})
        elif msg.get("id") == 2:
            if msg.get("result", {}).get("isError"):
                raise RuntimeError(f"list_notes failed: {msg}")
            answered = time.monotonic() - t0
            break
    p.stdin.close()
    p.wait(timeout=120)
    if answered is None:
        raise RuntimeError("berth mcp ended before answering")
    return answered


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    env = dict(os.environ, BERTH_HOME=home)
    work = tempfile.mkdtemp(prefix="berth-bench-mcp.")
    try:
        app = os.path.join(work, "notes")
        shutil.copytree(os.path.join(ROOT, "apps/notes"), app)
        initrd = bootbench.build_trivial_initrd(work)
        argv, vm = bootbench.engine_argv(home, "bench-probe")
        own, attached, bare = [], [], []
        # One unmeasured session first, so the bundle cache is as warm as a user's second start.
        first_call(app, env)
        for _ in range(args.n):
            bare.append(bootbench.bare_boot({"argv": argv}, initrd))
            own.append(first_call(app, env))
            p, _, _, _, _ = appsbench.dev_start(app, env)
            try:
                attached.append(first_call(app, env))
            finally:
                appsbench.dev_stop(p)
        med = lambda xs: round(statistics.median(xs) * 1000)
        result = {
            "runs": args.n,
            "accelerator": vm["accelerator"],
            "bareKernelBootMedianMs": med(bare),
            "ownVmFirstCallMedianMs": med(own),
            "attachedFirstCallMedianMs": med(attached),
            "ownOverBareRatio": round(statistics.median(own) / statistics.median(bare), 2),
            "attachedOverBareRatio": round(statistics.median(attached) / statistics.median(bare), 2),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"mcp benchmark ({args.n} runs, {result['accelerator']}, {os.cpu_count()} CPUs)")
            print(f"  bare kernel boot (trivial init)        median {result['bareKernelBootMedianMs']} ms")
            print(f"  spawn to first tools/call, own VM      median {result['ownVmFirstCallMedianMs']} ms"
                  f"  ({result['ownOverBareRatio']}x the bare boot)")
            print(f"  spawn to first tools/call, attached    median {result['attachedFirstCallMedianMs']} ms"
                  f"  ({result['attachedOverBareRatio']}x the bare boot)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
