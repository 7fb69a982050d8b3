#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Accelerator benchmark: the bare boot of the pinned kernel (same QEMU machine and
command-line options as berth-vmm, a trivial init that powers off at once) under TCG and
under KVM, interleaved in one run, and berth-vmm's own probe (`berth-vmm accel --reprobe`)
on the same host. KVM is tried as berth-vmm would run it (-cpu host) and without cx16
(-cpu host,-cx16), which a nested, paravirtual KVM may need. A KVM boot that QEMU reports
as a KVM internal error is recorded as such and killed (QEMU pauses rather than exits).

Prints medians and each one's ratio to the TCG bare boot; --json for a record.

Usage: bench/accel.py [-n RUNS] [--kvm-timeout S] [--json]   (needs build/ and the artifacts
installed in BERTH_HOME or ~/.berth, e.g. by scripts/main-job.sh)
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boot  # noqa: E402  (the bare-boot command line and the trivial initrd)


def variant(argv, accel, cpu):
    """The bare-boot argv with another accelerator (and CPU model)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "-accel":
            out += ["-accel", accel]
            if cpu:
                out += ["-cpu", cpu]
            i += 2
            continue
        if a == "-cpu":
            i += 2
            continue
        if a == "-append" and not accel.startswith("tcg"):
            # The TSC hint is for TCG only, as in berth-vmm.
            out += [a, re.sub(r" ?tsc=reliable tsc_early_khz=\d+", "", argv[i + 1])]
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def timed_boot(cmd, timeout):
    """QEMU start → exit; (seconds, None) or (seconds, why it failed)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    failure = []

    def watch():
        for line in p.stderr:
            if b"KVM internal error" in line:
                failure.append(line.decode(errors="replace").strip())
                p.kill()
                return
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return time.monotonic() - t0, f"no power-off within {timeout} s"
    t.join(timeout=1)
    elapsed = time.monotonic() - t0
    if failure:
        return elapsed, failure[0]
    if p.returncode != 0:
        return elapsed, f"QEMU exit status {p.returncode}"
    return elapsed, None


def probe(home):
    env = dict(os.environ, BERTH_HOME=home)
    out = subprocess.run([boot.VMM, "accel", "--reprobe", "--json"], env=env,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def summary(runs):
    ok = [s for s, why in runs if why is None]
    whys = sorted({why for _, why in runs if why})
    return {
        "booted": len(ok),
        "runs": len(runs),
        "medianMs": round(statistics.median(ok) * 1000) if ok else None,
        "ms": [round(s * 1000) for s, _ in runs],
        "failures": whys,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--kvm-timeout", type=int, default=120)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    kvm = os.access("/dev/kvm", os.R_OK | os.W_OK)
    work = tempfile.mkdtemp(prefix="berth-bench.")
    try:
        initrd = boot.build_trivial_initrd(work)
        argv, _ = boot.engine_argv(home, "bench-accel")
        bare = boot.bare_boot_argv(argv, initrd)
        tcg_cmd = variant(bare, "tcg,thread=single", None)
        kinds = {"tcg": tcg_cmd}
        if kvm:
            kinds["kvm -cpu host"] = variant(bare, "kvm", "host")
            kinds["kvm -cpu host,-cx16"] = variant(bare, "kvm", "host,-cx16")
        runs = {k: [] for k in kinds}
        probes = []
        for _ in range(args.n):
            for k, cmd in kinds.items():
                runs[k].append(timed_boot(cmd, 120 if k == "tcg" else args.kvm_timeout))
            probes.append(probe(home))
        result = {k: summary(v) for k, v in runs.items()}
        base = result["tcg"]["medianMs"]
        for k, v in result.items():
            v["ratioToTcg"] = round(v["medianMs"] / base, 2) if v["medianMs"] and base else None
        trials = [p["probe"]["trials"] for p in probes]
        record = {
            "runs": args.n,
            "bareBoot": result,
            "probe": {
                "chosen": sorted({p["chosen"] for p in probes}),
                "tcgMedianMs": round(statistics.median(t["tcg"]["ms"] for t in trials)),
                "kvm": [{k: t["kvm"].get(k) for k in ("booted", "ms", "why")} for t in trials],
                "reason": probes[-1]["reason"],
            },
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, kernel {platform.release()}"
                       + (", kvm_pvm loaded" if os.path.exists("/sys/module/kvm_pvm") else ""),
        }
        if args.json:
            print(json.dumps(record, indent=2))
            return 0
        print(f"accelerator benchmark ({args.n} runs each, interleaved, {record['machine']})")
        for k, v in result.items():
            med = f"median {v['medianMs']} ms" if v["medianMs"] else "never booted"
            ratio = f"  {v['ratioToTcg']}x TCG" if v["ratioToTcg"] else ""
            fails = f"  failures: {'; '.join(v['failures'])}" if v["failures"] else ""
            print(f"  bare boot, {k:22} {v['booted']}/{v['runs']} booted, {med}{ratio}  {v['ms']}{fails}")
        print(f"  berth-vmm's probe chose {', '.join(record['probe']['chosen'])}: {record['probe']['reason']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
