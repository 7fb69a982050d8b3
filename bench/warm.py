#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Warm-start benchmark (docs/warm-start.md), all measured in one run on the same machine,
interleaved run by run:

  * the bare boot of the same pinned kernel with a trivial init (bench/boot.py's baseline);
  * `berth dev` to its "VM ready" line for apps/notes (Node) and apps/hello-world-py
    (Python), restored from the warm-start snapshot and booted cold (`--cold`);
  * making the snapshot (`berth-vmm snapshot --force`), once, unmeasured warm-up first;
  * with --rehash, the restored runs again with berth-vmm's remembered digests removed
    before each (~/.berth/vm/hashed, docs/warm-start.md "Remembered digests"): every file
    hashed, as before they were remembered.

Each `berth dev` reports its restore (or boot) time, the rest of "VM ready" being the
bundle and the app's own start; the guest's events split the latter further (restored →
boot_complete → app_started → app_ready), from the VM's vmm.log.

Usage: bench/warm.py [-n RUNS] [--rehash] [--json]  (artifacts installed in BERTH_HOME or ~/.berth,
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apps as appbench  # noqa: E402
import boot as bootbench  # noqa: E402

ROOT = bootbench.ROOT


def guest_phases(home, vm_name):
    """restored/boot_complete/app_started/app_ready, ms since the first of them."""
    t = {}
    with open(os.path.join(home, "run/vm", vm_name, "vmm.log"), errors="replace") as f:
        for line in f:
            start = line.find("{")
            if start < 0:
                continue
            try:
                ev = json.loads(line[start:])
            except ValueError:
                continue
            if ev.get("event") in ("restored", "boot_complete", "app_started", "app_ready"):
                t.setdefault(ev["event"], ev.get("t"))
    return t


def forget_digests(home):
    """Remove what berth-vmm remembers of files that matched: the next start hashes them."""
    shutil.rmtree(os.path.join(home, "vm/hashed"), ignore_errors=True)


def one(app, env, cold, home):
    argv_extra = ["--cold"] if cold else []
    p, ready, bundle, boot, lines = start(app, env, argv_extra)
    name = os.path.basename(app)
    phases = guest_phases(home, "berth-dev-" + name)
    mode = json.load(open(os.path.join(home, "run/vm/berth-dev-" + name, "vm.json")))["boot"]["mode"]
    appbench.dev_stop(p)
    want = "cold" if cold else "restored"
    if mode != want:
        raise RuntimeError(f"{name}: wanted a {want} VM, got {mode}")
    start_ms = phases.get("app_ready", 0) - phases.get("app_started", 0)
    return ready, boot / 1000, start_ms / 1000, bundle / 1000


def start(app, env, extra):
    # apps.dev_start runs `berth dev` bare; --cold needs the flag.
    if not extra:
        return appbench.dev_start(app, env)
    real = appbench.BERTH
    wrapper = os.path.join(os.path.dirname(app), "berth-cold")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec "{real}" "$@" --cold\n')
    os.chmod(wrapper, 0o755)
    appbench.BERTH = wrapper
    try:
        return appbench.dev_start(app, env)
    finally:
        appbench.BERTH = real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--rehash", action="store_true",
                    help="also restore with the remembered digests removed before each run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    env = dict(os.environ, BERTH_HOME=home)
    vmm = os.path.join(home, "vm/bin/berth-vmm")
    if not os.access(vmm, os.X_OK):
        vmm = bootbench.VMM
    work = tempfile.mkdtemp(prefix="berth-bench-warm.")
    try:
        apps = {}
        for a in ("notes", "hello-world-py"):
            apps[a] = os.path.join(work, a)
            shutil.copytree(os.path.join(ROOT, "apps", a), apps[a])
        initrd = bootbench.build_trivial_initrd(work)
        argv, vm = bootbench.engine_argv(home, "bench-probe")
        snap = subprocess.run([vmm, "snapshot", "--force"], env=env, capture_output=True, text=True)
        if snap.returncode != 0:
            raise RuntimeError("berth-vmm snapshot failed:\n" + snap.stdout + snap.stderr)
        snapshot_line = snap.stdout.strip().splitlines()[-1]
        # Warm-up, unmeasured: the bundle cache, the page cache, QEMU's first start.
        for a in apps.values():
            one(a, env, False, home)
        r = {k: [] for k in ("bare", "notesWarm", "notesCold", "pyWarm", "pyCold",
                             "notesWarmRestore", "notesColdBoot", "notesWarmAppStart",
                             "notesColdAppStart", "pyWarmAppStart", "pyColdAppStart",
                             "notesBundleUnchanged")}
        if args.rehash:
            r.update({"notesWarmHashed": [], "pyWarmHashed": []})
        for _ in range(args.n):
            r["bare"].append(bootbench.bare_boot({"argv": argv}, initrd))
            t, b, s, bu = one(apps["notes"], env, False, home)
            r["notesWarm"].append(t), r["notesWarmRestore"].append(b), r["notesWarmAppStart"].append(s)
            r["notesBundleUnchanged"].append(bu)
            t, b, s, _ = one(apps["notes"], env, True, home)
            r["notesCold"].append(t), r["notesColdBoot"].append(b), r["notesColdAppStart"].append(s)
            t, _, s, _ = one(apps["hello-world-py"], env, False, home)
            r["pyWarm"].append(t), r["pyWarmAppStart"].append(s)
            t, _, s, _ = one(apps["hello-world-py"], env, True, home)
            r["pyCold"].append(t), r["pyColdAppStart"].append(s)
            if args.rehash:
                forget_digests(home)
                r["notesWarmHashed"].append(one(apps["notes"], env, False, home)[0])
                forget_digests(home)
                r["pyWarmHashed"].append(one(apps["hello-world-py"], env, False, home)[0])
        med = {k: round(statistics.median(v) * 1000) for k, v in r.items()}
        result = {"runs": args.n, "accelerator": vm["accelerator"], "snapshot": snapshot_line,
                  "medianMs": med,
                  "notesWarmOverBare": round(med["notesWarm"] / med["bare"], 2),
                  "notesColdOverBare": round(med["notesCold"] / med["bare"], 2),
                  "pyWarmOverBare": round(med["pyWarm"] / med["bare"], 2),
                  "pyColdOverBare": round(med["pyCold"] / med["bare"], 2)}
        if args.json:
            print(json.dumps(result, indent=2))
            return 0
        print(f"warm-start benchmark ({args.n} runs, {result['accelerator']}, {os.cpu_count()} CPUs)")
        print(f"  {snapshot_line}")
        print(f"  bare kernel boot (trivial init)        median {med['bare']} ms")
        print(f"  notes: bundle step, app unchanged      median {med['notesBundleUnchanged']} ms")
        for label, w, c, wr, cb, ws, cs in (
                ("notes (Node)", "notesWarm", "notesCold", "notesWarmRestore", "notesColdBoot",
                 "notesWarmAppStart", "notesColdAppStart"),
                ("hello-world-py", "pyWarm", "pyCold", None, None, "pyWarmAppStart", "pyColdAppStart")):
            print(f"  {label}: berth dev to VM ready, restored median {med[w]} ms"
                  f" ({med[w] / med['bare']:.2f}x the bare boot; app start {med[ws]} ms)")
            print(f"  {label}: berth dev to VM ready, --cold   median {med[c]} ms"
                  f" ({med[c] / med['bare']:.2f}x; app start {med[cs]} ms)")
            if wr:
                print(f"    restore {med[wr]} ms against a cold boot of {med[cb]} ms")
            if args.rehash:
                h = w.replace("Warm", "WarmHashed")
                print(f"    restored with every file hashed (no remembered digests) median {med[h]} ms"
                      f" ({med[h] / med['bare']:.2f}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
