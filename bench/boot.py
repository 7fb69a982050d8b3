#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Boot benchmark: `berth-vmm run` to the guest's boot_complete event (state disk already
formatted, as on every boot after the first), booted cold and restored from the warm-start
snapshot, against the bare
boot of the same pinned kernel (same QEMU machine and command-line options) with a
trivial init that powers off at once, measured in the same run and interleaved so both
see the same machine load. Prints medians and the ratio; --json for a machine-readable
record.

For restores it also reports berth-vmm's own account of the snapshot's memory (vmm.log:
"copied in N ms (waited M ms for it)"): the copy and hash into the VM's memory, and how
long QEMU's load waited for them.

--against VMM also restores with another berth-vmm binary (an A/B of two builds, say
main's and a branch's, built with the same pins), interleaved with the rest: it gets a
BERTH_HOME of its own beside the first, holding links to the same artifacts and the
snapshots it makes itself, since a snapshot is made for exactly one berth-vmm.

Usage: bench/boot.py [-n RUNS] [--json] [--against VMM]   (needs build/ and the artifacts
installed in BERTH_HOME or ~/.berth, e.g. by scripts/main-job.sh)
"""
import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VMM = os.path.join(ROOT, "build/src/berth-vmm/berth-vmm")
BERTH = os.path.join(ROOT, "build/src/berth/berth")


def build_trivial_initrd(work):
    """A cpio holding only a static /init that powers off."""
    init_dir = os.path.join(work, "initramfs")
    os.makedirs(init_dir)
    subprocess.run(["gcc", "-static", "-O2", "-o", os.path.join(init_dir, "init"),
                    os.path.join(ROOT, "bench/trivial-init.c")], check=True)
    cpio = os.path.join(work, "trivial.cpio")
    with open(cpio, "wb") as out:
        subprocess.run("find . | cpio -o -H newc --quiet", shell=True, cwd=init_dir,
                       stdout=out, check=True)
    return cpio


def bare_boot(vm_json, initrd):
    """Same kernel, same machine options, the trivial init: QEMU start → QEMU exit."""
    cmd = bare_boot_argv(vm_json["argv"], initrd)
    t0 = time.monotonic()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=120, pass_fds=())
    return time.monotonic() - t0


def bare_boot_argv(argv, initrd):
    """berth-vmm's QEMU command line with the trivial initrd and no disks or channels."""
    cmd = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("-initrd",):
            cmd += [a, initrd]
            skip = True
            continue
        if a == "-chardev" and argv[i + 1].startswith(("socket,", "file,")) or a == "-device" and (
                argv[i + 1].startswith(("virtio-serial", "virtserialport", "virtio-blk"))) or (
                a == "-drive") or (a == "-serial"):
            skip = True
            continue
        cmd.append(a)
    cmd += ["-serial", "null"]
    return cmd


def berth_boot(home, name, cold=True, vmm=VMM):
    """berth-vmm run → the guest's boot_complete event on the control port: a kernel boot, or
    (cold=False) a restore from the warm-start snapshot. Returns the seconds, the boot mode and
    for a restore (copy ms, waited ms) of the snapshot's memory from vmm.log, else None."""
    env = dict(os.environ, BERTH_HOME=home)
    run_dir = os.path.join(home, "run/vm", name)
    t0 = time.monotonic()
    subprocess.run([vmm, "run", "--name", name, "--state", os.path.join(home, "bench-state.img")]
                   + (["--cold"] if cold else []),
                   env=env, check=True, stderr=subprocess.DEVNULL, timeout=60)
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(run_dir, "control.sock"))
    buf = b""
    deadline = time.monotonic() + 120
    while b'"event":"boot_complete"' not in buf:
        if time.monotonic() > deadline:
            raise RuntimeError("no boot_complete within 120 s")
        s.settimeout(max(0.1, deadline - time.monotonic()))
        d = s.recv(65536)
        if not d:
            raise RuntimeError("control port closed before boot_complete")
        buf += d
    elapsed = time.monotonic() - t0
    s.close()
    mode = json.load(open(os.path.join(run_dir, "vm.json")))["boot"]["mode"]
    with open(os.path.join(run_dir, "vmm.log"), errors="replace") as f:
        copy = re.search(r"snapshot's memory: \d+ MiB copied in (\d+) ms \(waited (\d+) ms", f.read())
    subprocess.run([BERTH, "vm", "stop", name], env=env, check=True, stdout=subprocess.DEVNULL,
                   timeout=60)
    return elapsed, mode, (int(copy.group(1)), int(copy.group(2))) if copy else None


def engine_argv(home, name):
    """The QEMU command line berth-vmm used (from /proc while it runs)."""
    env = dict(os.environ, BERTH_HOME=home)
    subprocess.run([VMM, "run", "--name", name, "--cold"], env=env, check=True, stderr=subprocess.DEVNULL)
    pid = int(json.load(open(os.path.join(home, "run/vm", name, "vm.json")))["enginePid"])
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    vm = json.load(open(os.path.join(home, "run/vm", name, "vm.json")))
    subprocess.run([BERTH, "vm", "stop", name], env=env, check=True, stdout=subprocess.DEVNULL)
    # The kernel is passed as /proc/self/fd/N of berth-vmm; use the installed path.
    kernel = os.path.join(home, "vm/kernel/sha256", vm["measurements"]["kernel"]["sha256"], "vmlinux")
    argv = [kernel if a.startswith("/proc/self/fd/") and argv[i - 1] == "-kernel" else a
            for i, a in enumerate(argv)]
    return argv, vm


def home_for(vmm, home):
    """A BERTH_HOME beside @home for another berth-vmm: the same artifacts (hard links where
    the file system allows, copies otherwise), and that berth-vmm's own snapshots."""
    other = tempfile.mkdtemp(prefix=".bench-against.", dir=os.path.dirname(os.path.abspath(home)))
    os.makedirs(os.path.join(other, "vm"))
    for part in ("kernel", "rootfs", "layers", "accel.json"):
        src = os.path.join(home, "vm", part)
        if os.path.exists(src):
            dst = os.path.join(other, "vm", part)
            if subprocess.run(["cp", "-al", src, dst], stderr=subprocess.DEVNULL).returncode != 0:
                shutil.rmtree(dst, ignore_errors=True)
                subprocess.run(["cp", "-a", src, dst], check=True)
    subprocess.run([vmm, "snapshot"], env=dict(os.environ, BERTH_HOME=other), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    return other


def copy_medians(copies):
    """{copyMs, waitedMs} medians of berth_boot()'s copy figures, or None without any."""
    found = [c for c in copies if c]
    if not found:
        return None
    return {"copyMs": round(statistics.median(c[0] for c in found)),
            "waitedMs": round(statistics.median(c[1] for c in found))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--against", metavar="VMM", help="also restore with this berth-vmm")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    work = tempfile.mkdtemp(prefix="berth-bench.")
    other = None
    try:
        initrd = build_trivial_initrd(work)
        argv, vm = engine_argv(home, "bench-probe")
        bare, ours, restored, copies, against_copies = [], [], [], [], []
        berth_boot(home, "bench-warmup")  # formats the state disk once, outside the timing
        # A restore needs the snapshot of this very berth-vmm (`berth vm install` makes it).
        can_restore = berth_boot(home, "bench-warmup", cold=False)[1] == "restored"
        against = []
        if args.against:
            other = home_for(os.path.abspath(args.against), home)
            berth_boot(other, "bench-warmup", vmm=args.against)
            if berth_boot(other, "bench-warmup", cold=False, vmm=args.against)[1] != "restored":
                raise RuntimeError(f"{args.against} did not restore from the snapshot it made")
        for i in range(args.n):
            bare.append(bare_boot({"argv": argv}, initrd))
            ours.append(berth_boot(home, f"bench-{i}")[0])
            if can_restore:
                t, _, copy = berth_boot(home, f"bench-r{i}", cold=False)
                restored.append(t)
                copies.append(copy)
            if other:
                t, _, copy = berth_boot(other, f"bench-a{i}", cold=False, vmm=args.against)
                against.append(t)
                against_copies.append(copy)
        os.unlink(os.path.join(home, "bench-state.img"))
        result = {
            "runs": args.n,
            "accelerator": vm["accelerator"],
            "bareBootToPowerOffMedianMs": round(statistics.median(bare) * 1000),
            "berthRunToBootCompleteMedianMs": round(statistics.median(ours) * 1000),
            "ratio": round(statistics.median(ours) / statistics.median(bare), 2),
            "bareMs": [round(x * 1000) for x in bare],
            "berthMs": [round(x * 1000) for x in ours],
            "restoredToBootCompleteMedianMs": round(statistics.median(restored) * 1000) if restored else None,
            "restoredMs": [round(x * 1000) for x in restored],
            "againstVmm": args.against,
            "againstRestoredToBootCompleteMedianMs": round(statistics.median(against) * 1000) if against else None,
            "againstRestoredMs": [round(x * 1000) for x in against],
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, kernel {platform.release()}",
            "restoredMemoryCopy": copy_medians(copies),
            "againstRestoredMemoryCopy": copy_medians(against_copies),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"boot benchmark ({args.n} runs each, interleaved, {result['accelerator']}, {result['machine']})")
            print(f"  bare kernel boot to power-off (trivial init):  median {result['bareBootToPowerOffMedianMs']} ms  {result['bareMs']}")
            print(f"  berth-vmm run to boot_complete:                 median {result['berthRunToBootCompleteMedianMs']} ms  {result['berthMs']}")
            print(f"  ratio (berth / bare):                           {result['ratio']}")
            if restored:
                print(f"  berth-vmm run, restored, to boot_complete:      median {result['restoredToBootCompleteMedianMs']} ms  {result['restoredMs']}"
                      f"  ({round(statistics.median(restored) / statistics.median(bare), 2)}x the bare boot)")
                if result["restoredMemoryCopy"]:
                    print(f"    the snapshot's memory copied in median {result['restoredMemoryCopy']['copyMs']} ms, "
                          f"QEMU's load waited {result['restoredMemoryCopy']['waitedMs']} ms for it")
            else:
                print("  (no restore: no warm-start snapshot for this berth-vmm; run `berth vm install --vmm build/src/berth-vmm/berth-vmm`)")
            if against:
                print(f"  restored with {args.against}:  median {result['againstRestoredToBootCompleteMedianMs']} ms  {result['againstRestoredMs']}"
                      f"  ({round(statistics.median(against) / statistics.median(bare), 2)}x the bare boot)")
                if result["againstRestoredMemoryCopy"]:
                    print(f"    the snapshot's memory copied in median {result['againstRestoredMemoryCopy']['copyMs']} ms, "
                          f"QEMU's load waited {result['againstRestoredMemoryCopy']['waitedMs']} ms for it")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if other:
            shutil.rmtree(other, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
