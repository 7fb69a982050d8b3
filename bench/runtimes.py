#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The two runtimes side by side, measured in one run on the same machine and interleaved
run by run so both see the same load:

  * `berth dev` of apps/notes to its "VM ready" line, --runtime vm (restored from the
    warm-start snapshot when one is installed, else a cold boot) and --runtime docker;
  * the baselines each is measured against: the bare boot of the pinned kernel with a
    trivial init (bench/boot.py's), and `docker run --rm` of Berth's base image running
    /bin/true (a container's own start, no Berth in it);
  * an RPC round trip (list_notes, the median of many calls on one connection) in each;
  * berth test of apps/notes (the image build, cached after the first, and the stub run).

Usage: bench/runtimes.py [-n RUNS] [--calls N] [--json]  (root; dockerd running; the
artifacts installed in BERTH_HOME or ~/.berth, e.g. by scripts/main-job.sh)
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


def base_image(vm_json_path):
    with open(vm_json_path) as f:
        return json.load(f)["container"]["image"]


def docker_true(image):
    t0 = time.monotonic()
    subprocess.run(["docker", "run", "--rm", "--network=none", "--entrypoint=/bin/true", image],
                   check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def berth_test(app, env):
    t0 = time.monotonic()
    subprocess.run([BERTH, "test", app], env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = os.environ.get("BERTH_HOME") or os.path.expanduser("~/.berth")
    env = dict(os.environ, BERTH_HOME=home)
    env.pop("BERTH_SANDBOX", None)
    work = tempfile.mkdtemp(prefix="berth-bench-runtimes.")
    run_dir = os.path.join(home, "run/vm/berth-dev-notes")
    try:
        app = os.path.join(work, "notes")
        shutil.copytree(os.path.join(ROOT, "apps/notes"), app)
        initrd = bootbench.build_trivial_initrd(work)
        argv, vm = bootbench.engine_argv(home, "bench-probe")
        # One unmeasured start of each: the bundle, the base image, page caches.
        for runtime in ("vm", "docker"):
            p, *_ = appsbench.dev_start(app, env, "--runtime", runtime)
            if runtime == "docker":
                image = base_image(os.path.join(run_dir, "vm.json"))
            appsbench.dev_stop(p)
        berth_test(app, env)
        res = {k: [] for k in ("bare", "true", "vm", "docker", "test")}
        rpc = {}
        for i in range(args.n):
            res["bare"].append(bootbench.bare_boot({"argv": argv}, initrd))
            res["true"].append(docker_true(image))
            for runtime in ("vm", "docker"):
                p, t, *_ = appsbench.dev_start(app, env, "--runtime", runtime)
                res[runtime].append(t)
                if i == 0:
                    rpc[runtime] = appsbench.rpc_latencies(os.path.join(run_dir, "rpc-0.sock"), args.calls)
                appsbench.dev_stop(p)
            res["test"].append(berth_test(app, env))
        med = lambda xs: round(statistics.median(xs) * 1000)
        r = {
            "runs": args.n,
            "accelerator": vm["accelerator"],
            "hostKernel": os.uname().release,
            "bareKernelBootMedianMs": med(res["bare"]),
            "dockerRunTrueMedianMs": med(res["true"]),
            "vmReadyMedianMs": med(res["vm"]),
            "dockerReadyMedianMs": med(res["docker"]),
            "vmReadyOverBareBoot": round(statistics.median(res["vm"]) / statistics.median(res["bare"]), 2),
            "dockerReadyOverDockerTrue": round(statistics.median(res["docker"]) / statistics.median(res["true"]), 2),
            "dockerReadyOverVmReady": round(statistics.median(res["docker"]) / statistics.median(res["vm"]), 3),
            "rpcCalls": args.calls,
            "vmRpcMedianUs": round(statistics.median(rpc["vm"]) * 1e6),
            "dockerRpcMedianUs": round(statistics.median(rpc["docker"]) * 1e6),
            "berthTestMedianMs": med(res["test"]),
        }
        if args.json:
            print(json.dumps(r, indent=2))
            return 0
        print(f"runtimes benchmark ({args.n} runs, VM under {r['accelerator']}, host kernel {r['hostKernel']})")
        print(f"  bare kernel boot (trivial init)       median {r['bareKernelBootMedianMs']} ms")
        print(f"  docker run --rm base image /bin/true  median {r['dockerRunTrueMedianMs']} ms")
        print(f"  berth dev notes --runtime vm          median {r['vmReadyMedianMs']} ms ({r['vmReadyOverBareBoot']}x the bare boot)")
        print(f"  berth dev notes --runtime docker      median {r['dockerReadyMedianMs']} ms ({r['dockerReadyOverDockerTrue']}x docker run /bin/true, {r['dockerReadyOverVmReady']}x the VM)")
        print(f"  RPC round trip (list_notes)           vm {r['vmRpcMedianUs']} us, docker {r['dockerRpcMedianUs']} us")
        print(f"  berth test notes (image cached)       median {r['berthTestMedianMs']} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
