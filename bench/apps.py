#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""App benchmark, all measured in one run on the same machine:

  * VM ready for apps/notes: `berth dev` to its "VM ready" line, split into bundle and
    boot as berth dev reports them, against the bare boot of the same pinned kernel with a
    trivial init (bench/boot.py's baseline), as a ratio;
  * reload: an edited export until "Reloaded in", reloaded in place (the default; once
    the VM has its next warm Node, as after a developer's first seconds), with its bundle
    step as berth dev reports it, and with --reboot-on-change (the VM restarted, restored from the snapshot when there is one);
  * RPC round trip: the median of many list_notes calls on one connection to the VM's
    rpc-0.sock, once four notes were added, against a plain unix-socket echo of the same
    line in this process.

Usage: bench/apps.py [-n RUNS] [--calls N] [--json]  (artifacts installed in BERTH_HOME or
~/.berth, e.g. by scripts/main-job.sh)
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boot as bootbench  # noqa: E402

NOTES = 4  # list_notes lists this many
ROOT = bootbench.ROOT
BERTH = bootbench.BERTH


def dev_start(app_dir, env, *extra):
    t0 = time.monotonic()
    p = subprocess.Popen([BERTH, "dev", *extra], cwd=app_dir, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        m = re.match(r"VM ready in (\d+) ms \(bundle (\d+) ms, (\w+), (?:boot|restore) (\d+) ms\)", line)
        if m:
            return p, time.monotonic() - t0, int(m.group(2)), int(m.group(4)), lines
    raise RuntimeError("berth dev ended before the VM was ready:\n" + "".join(lines))


def dev_stop(p):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)


def wait_line(p, pattern, timeout=300):
    deadline = time.monotonic() + timeout
    for line in p.stdout:
        m = re.search(pattern, line)
        if m:
            return m
        if time.monotonic() > deadline:
            break
    raise RuntimeError(f"no line matching {pattern}")


def wait_warm_runtime(home, vm_name, timeout=120):
    """Until the VM has a warm Node for the app's next start (berth dev's VMs start one once
    the app is up): what a developer who saves an edit seconds after the start reloads into.
    The RPC round trips are measured after it too, not beside its start."""
    log = os.path.join(home, "run/vm", vm_name, "vmm.log")
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(log, errors="replace") as f:
            if '"event":"warm_runtime_ready"' in f.read():
                return
        time.sleep(0.1)
    raise RuntimeError(f"{vm_name}: no warm_runtime_ready in {timeout} s")


def add_notes(s, f):
    """Bring apps/notes to NOTES notes over the connection @s (read through @f): a list
    that lists something (an absent notes.json is the app's failure path), as long in every
    run (the state disk is the app's, kept from run to run)."""
    s.sendall(b'{"id":"count","export":"list_notes"}\n')
    have = json.loads(f.readline()).get("result", {}).get("notes", [])
    for i in range(len(have), NOTES):
        s.sendall(json.dumps({"id": f"add-{i}", "export": "add_note", "input": {"text": f"note {i}"}}).encode() + b"\n")
        answer = f.readline()
        if b'"result"' not in answer:
            raise RuntimeError(f"add_note failed: {answer[:300]!r}")


def rpc_latencies(sock_path, calls):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    f = s.makefile("rb")
    add_notes(s, f)
    out = []
    for i in range(calls):
        line = json.dumps({"id": str(i), "export": "list_notes"}).encode() + b"\n"
        t0 = time.perf_counter()
        s.sendall(line)
        f.readline()
        out.append(time.perf_counter() - t0)
    s.close()
    return out


def echo_latencies(calls):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "echo.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        f = c.makefile("rb")
        for line in f:
            c.sendall(line)

    threading.Thread(target=serve, daemon=True).start()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("rb")
    out = []
    for i in range(calls):
        line = json.dumps({"id": str(i), "export": "list_notes"}).encode() + b"\n"
        t0 = time.perf_counter()
        s.sendall(line)
        f.readline()
        out.append(time.perf_counter() - t0)
    s.close()
    shutil.rmtree(d)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    env = dict(os.environ, BERTH_HOME=home)
    work = tempfile.mkdtemp(prefix="berth-bench-apps.")
    try:
        app = os.path.join(work, "notes")
        shutil.copytree(os.path.join(ROOT, "apps/notes"), app)
        initrd = bootbench.build_trivial_initrd(work)
        argv, vm = bootbench.engine_argv(home, "bench-probe")
        ready, bundle, boot, bare, reload, reload_bundle, reboot = [], [], [], [], [], [], []
        for i in range(args.n):
            bare.append(bootbench.bare_boot({"argv": argv}, initrd))
            p, t, b, bt, _ = dev_start(app, env)
            ready.append(t)
            bundle.append(b / 1000)
            boot.append(bt / 1000)
            wait_warm_runtime(home, "berth-dev-notes")
            if i == 0:
                rpc = rpc_latencies(os.path.join(home, "run/vm/berth-dev-notes/rpc-0.sock"), args.calls)
                echo = echo_latencies(args.calls)
            src = os.path.join(app, "src/index.ts")
            # A new named export changes the bundle, and nothing the VM was set up with:
            # berth dev reloads the app in place.
            with open(src, "a") as f:
                f.write(f"\nexport const benchmarkRevision{i} = {i};\n")
            m = wait_line(p, r"Reloaded in place in (\d+) ms \(bundle (\d+) ms")
            reload.append(int(m.group(1)) / 1000)
            reload_bundle.append(int(m.group(2)) / 1000)
            dev_stop(p)
            p, *_ = dev_start(app, env, "--reboot-on-change")
            with open(src, "a") as f:
                f.write(f"\nexport const benchmarkReboot{i} = {i};\n")
            m = wait_line(p, r"Reloaded in (\d+) ms")
            reboot.append(int(m.group(1)) / 1000)
            dev_stop(p)
        med = lambda xs: round(statistics.median(xs) * 1000)
        result = {
            "runs": args.n,
            "accelerator": vm["accelerator"],
            "bareKernelBootMedianMs": med(bare),
            "notesReadyMedianMs": med(ready),
            "notesBundleMedianMs": med(bundle),
            "notesBootMedianMs": med(boot),
            "readyOverBareRatio": round(statistics.median(ready) / statistics.median(bare), 2),
            "reloadMedianMs": med(reload),
            "reloadBundleMedianMs": med(reload_bundle),
            "reloadRebootMedianMs": med(reboot),
            "rpcCalls": args.calls,
            "rpcRoundTripMedianUs": round(statistics.median(rpc) * 1e6),
            "unixEchoRoundTripMedianUs": round(statistics.median(echo) * 1e6),
            "rpcOverEchoRatio": round(statistics.median(rpc) / statistics.median(echo), 1),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"apps benchmark ({args.n} runs, {result['accelerator']}, {os.cpu_count()} CPUs)")
            print(f"  bare kernel boot (trivial init)   median {result['bareKernelBootMedianMs']} ms")
            print(f"  notes: berth dev to VM ready      median {result['notesReadyMedianMs']} ms"
                  f"  (bundle {result['notesBundleMedianMs']} ms, boot {result['notesBootMedianMs']} ms),"
                  f" {result['readyOverBareRatio']}x the bare boot")
            print(f"  reload after an edited export     median {result['reloadMedianMs']} ms (in place;"
                  f" bundle {result['reloadBundleMedianMs']} ms)")
            print(f"  the same, --reboot-on-change      median {result['reloadRebootMedianMs']} ms")
            print(f"  RPC round trip (list_notes)       median {result['rpcRoundTripMedianUs']} us over {args.calls} calls")
            print(f"  unix-socket echo, same line       median {result['unixEchoRoundTripMedianUs']} us"
                  f"  (RPC is {result['rpcOverEchoRatio']}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
