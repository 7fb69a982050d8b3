#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""containerd-shim-berth-v2, measured in one run on the same machine, interleaved run by
run with its baseline:

  * `ctr run -d --runtime io.containerd.berth.v2` of apps/notes' image (berth deploy's)
    until the first RPC (list_notes) is answered on the task's socket in the bundle;
  * the baseline: `berth dev` of apps/notes to its "VM ready" line, the same VM from the
    same snapshots;
  * what one sandbox costs the node: the resident memory of its berth-vmm and QEMU (PSS,
    from /proc/PID/smaps_rollup) once the app answers, for RuntimeClass overhead.podFixed;
  * density: DENSITY tasks started at once, until every one answers, and their memory.

Usage: bench/containerd.py [-n RUNS] [--density N] [--json]  (root; dockerd running to
build the image; containerd and ctr installed; artifacts and snapshots in BERTH_HOME or
~/.berth, e.g. by scripts/main-job.sh)
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apps as appsbench  # noqa: E402
import boot as bootbench  # noqa: E402

ROOT = bootbench.ROOT
BERTH = bootbench.BERTH
SHIM_DIR = os.path.join(ROOT, "build/src/shim")
VMM = os.path.join(ROOT, "build/src/berth-vmm/berth-vmm")


class Containerd:
    def __init__(self, work, env):
        self.state = f"/run/bctrb{os.getpid()}"
        self.sock = self.state + ".sock"
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(f'version = 2\nroot = "{work}/root"\nstate = "{self.state}"\n'
                    'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                    f'[grpc]\n  address = "{self.sock}"\n')
        env = dict(env, PATH=SHIM_DIR + ":" + env["PATH"], BERTH_VMM=VMM)
        self.proc = subprocess.Popen(["containerd", "--config", cfg], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if self.ctr("version", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("containerd did not start")

    def ctr(self, *args, check=True, **kw):
        return subprocess.run(["ctr", "-a", self.sock, *args], check=check,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)

    def bundle(self, task):
        return f"{self.state}/io.containerd.runtime.v2.task/default/{task}"

    def remove(self, task):
        self.ctr("task", "kill", "-s", "SIGKILL", task, check=False)
        for _ in range(100):
            if "STOPPED" in self.ctr("task", "ls", check=False).stdout or task not in self.ctr("task", "ls", check=False).stdout:
                break
            time.sleep(0.1)
        self.ctr("task", "delete", "-f", task, check=False)
        self.ctr("container", "rm", task, check=False)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.state, ignore_errors=True)
        for p in (self.sock, self.sock + ".ttrpc"):
            if os.path.exists(p):
                os.unlink(p)


def answered(sock_path, deadline):
    while time.monotonic() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            s.connect(sock_path)
            s.sendall(b'{"id":"1","export":"list_notes"}\n')
            if s.makefile("rb").readline():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def sandbox_pss_mib(run_dir):
    pids = subprocess.run(["pgrep", "-f", f"[b]erth-vmm run --name ctr-[0-9a-f]* --run-dir {run_dir} "],
                          capture_output=True, text=True).stdout.split()
    total = 0
    for p in pids:
        total += pss_kib(int(p))
        kids = subprocess.run(["pgrep", "-P", p], capture_output=True, text=True).stdout.split()
        total += sum(pss_kib(int(k)) for k in kids)
    return total / 1024


def ctr_run(c, image, task):
    t0 = time.monotonic()
    c.ctr("run", "-d", "--runtime", "io.containerd.berth.v2", image, task)
    ok = answered(os.path.join(c.bundle(task), "berth/rpc-0.sock"), time.monotonic() + 300)
    if not ok:
        raise RuntimeError(f"task {task} never answered")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--density", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    env = dict(os.environ, BERTH_HOME=home)
    env.pop("BERTH_SANDBOX", None)
    work = tempfile.mkdtemp(prefix="berth-bench-ctr.")
    c = None
    try:
        app = os.path.join(work, "notes")
        shutil.copytree(os.path.join(ROOT, "apps/notes"), app)
        subprocess.run([BERTH, "deploy", app, "--tag", "berth-bench-ctr:1"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = Containerd(work, env)
        save = subprocess.Popen(["docker", "save", "berth-bench-ctr:1"], stdout=subprocess.PIPE)
        subprocess.run(["ctr", "-a", c.sock, "image", "import", "--base-name", "berth-bench-ctr", "-"],
                       stdin=save.stdout, check=True, stdout=subprocess.DEVNULL)
        save.wait()
        image = next(l for l in c.ctr("image", "ls", "-q").stdout.split() if "berth-bench-ctr" in l)
        # One unmeasured run of each: the bundle, page caches.
        ctr_run(c, image, "warm")
        c.remove("warm")
        p, *_ = appsbench.dev_start(app, env)
        appsbench.dev_stop(p)
        ctr_t, dev_t, pss = [], [], []
        for i in range(args.n):
            ctr_t.append(ctr_run(c, image, f"b{i}"))
            pss.append(sandbox_pss_mib(os.path.join(c.bundle(f"b{i}"), "berth")))
            c.remove(f"b{i}")
            p, t, *_ = appsbench.dev_start(app, env)
            dev_t.append(t)
            appsbench.dev_stop(p)
        # Density: several at once, until all answer.
        t0 = time.monotonic()
        names = [f"d{i}" for i in range(args.density)]
        for n in names:
            c.ctr("run", "-d", "--runtime", "io.containerd.berth.v2", image, n)
        for n in names:
            if not answered(os.path.join(c.bundle(n), "berth/rpc-0.sock"), time.monotonic() + 600):
                raise RuntimeError(f"{n} never answered")
        dens_t = time.monotonic() - t0
        dens_pss = sum(sandbox_pss_mib(os.path.join(c.bundle(n), "berth")) for n in names)
        for n in names:
            c.remove(n)
        med = lambda xs: round(statistics.median(xs) * 1000)
        with open("/proc/meminfo") as f:
            mem_total = int(f.readline().split()[1]) // 1024
        r = {
            "runs": args.n,
            "ctrRunToFirstRpcMedianMs": med(ctr_t),
            "berthDevReadyMedianMs": med(dev_t),
            "ctrOverDevRatio": round(statistics.median(ctr_t) / statistics.median(dev_t), 2),
            "sandboxPssMedianMiB": round(statistics.median(pss)),
            "density": args.density,
            "densityAllAnsweredMs": round(dens_t * 1000),
            "densityPssMiB": round(dens_pss),
            "nodeMemMiB": mem_total,
            "cpus": os.cpu_count(),
        }
        if args.json:
            print(json.dumps(r, indent=2))
        else:
            print(f"containerd shim benchmark ({args.n} runs, {r['cpus']} CPUs, {mem_total} MiB)")
            print(f"  ctr run -> first RPC answered     median {r['ctrRunToFirstRpcMedianMs']} ms ({r['ctrOverDevRatio']}x berth dev's ready)")
            print(f"  berth dev notes -> VM ready        median {r['berthDevReadyMedianMs']} ms")
            print(f"  one sandbox's memory (PSS)         median {r['sandboxPssMedianMiB']} MiB (berth-vmm and QEMU)")
            print(f"  {args.density} tasks at once -> all answer      {r['densityAllAnsweredMs']} ms, {r['densityPssMiB']} MiB together")
    finally:
        if c:
            c.stop()
        subprocess.run(["docker", "rmi", "-f", "berth-bench-ctr:1"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
