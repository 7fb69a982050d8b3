#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Egress benchmark (docs/egress.md), all measured in one run on the same machine:

  * connection setup: an app in the VM (the outbound fixture, timing itself with
    performance.now()) opens a tunnel with CONNECT through the egress broker, berth-init's
    dial socket, the channel and berth-vmm's dialer to a server in a network namespace,
    until its 200 arrives; against a plain TCP connect from the host to the same kind of
    server on 127.0.0.1, and to the namespace's server itself. A CONNECT the broker
    refuses (an undeclared host) shows the part that never leaves the guest;
  * throughput: GET /bytes/N (32 MiB by default) through such a tunnel, against the same
    download from the host over loopback and to the namespace's server.

The clients are the same code on both sides (Node, bench/egress-direct.mjs on the host),
but the guest's runs under the VM's CPU (QEMU TCG without KVM). Prints medians and ratios;
--json for a machine-readable record. Needs root (a network namespace, bind mounts), the
artifacts in out/artifacts and build/ (scripts/build-artifacts.sh).

Usage: bench/egress.py [-n RUNS] [--connects N] [--mib N] [--json]
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VMM = os.path.join(ROOT, "build/src/berth-vmm/berth-vmm")
BERTH = os.path.join(ROOT, "build/src/berth/berth")
ORIGIN = os.path.join(ROOT, "test/e2e/fixtures/egress-origin.py")
FIXTURE = os.path.join(ROOT, "test/e2e/fixtures/outbound")
DIRECT = os.path.join(ROOT, "bench/egress-direct.mjs")
NS_ADDR = "198.51.100.2"
LOOP_PORTS = ["18080", "18443", "18444"]


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def origin(addr, work, ports=None, netns=None):
    cmd = [sys.executable, ORIGIN, addr, os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")]
    cmd += ports or []
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the origin servers on {addr} did not start")
    return p


def rpc(env, export, **inp):
    r = sh(BERTH, "rpc", "outbound", "--export", export, "--input", json.dumps(inp), env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"berth rpc {export}: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)


def direct(mode, host, port, arg):
    r = sh("node", DIRECT, mode, host, str(port), str(arg), timeout=600)
    return json.loads(r.stdout)


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3, help="downloads per path (default 3)")
    ap.add_argument("--connects", type=int, default=20, help="connections per path (default 20)")
    ap.add_argument("--mib", type=int, default=32, help="download size in MiB (default 32)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/egress.py needs root (a network namespace and bind mounts)")
    if not os.environ.get("BERTH_EGRESS_BENCH_INNER"):
        # Its own mount namespace: the test /etc/hosts is seen by this run alone.
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable] + sys.argv,
                   dict(os.environ, BERTH_EGRESS_BENCH_INNER="1"))
    for f in (VMM, BERTH, os.path.join(ROOT, "out/artifacts/rootfs.erofs")):
        if not os.path.exists(f):
            sys.exit(f"{f} is missing: run scripts/build-artifacts.sh")

    work = tempfile.mkdtemp(prefix="berth-bench-egress.")
    home = os.path.join(work, "home")
    env = dict(os.environ, BERTH_HOME=home, BERTH_VMM_EGRESS_TEST_ALLOW_CIDR="198.51.100.0/24")
    tag = os.getpid() % 100000
    ns, vh, vn = f"berth-bench-{tag}", f"bbe{tag}h", f"bbe{tag}n"
    servers = []
    try:
        sh(BERTH, "vm", "install", "--from", os.path.join(ROOT, "out/artifacts"), "--no-download",
           "--vmm", VMM, env=env)
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=allowed.test",
           "-keyout", os.path.join(work, "key.pem"), "-out", os.path.join(work, "cert.pem"))
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", vh, "type", "veth", "peer", "name", vn)
        sh("ip", "link", "set", vn, "netns", ns)
        sh("ip", "addr", "add", "198.51.100.1/24", "dev", vh)
        sh("ip", "link", "set", vh, "up")
        sh("ip", "-n", ns, "addr", "add", NS_ADDR + "/24", "dev", vn)
        sh("ip", "-n", ns, "link", "set", vn, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        servers.append(origin(NS_ADDR, work, netns=ns))
        servers.append(origin("127.0.0.1", work, LOOP_PORTS))
        with open(os.path.join(work, "hosts"), "w") as f:
            f.write(f"127.0.0.1 localhost\n{NS_ADDR} allowed.test\n")
        sh("mount", "--bind", os.path.join(work, "hosts"), "/etc/hosts")

        share = os.path.join(work, "outbound")
        sh("node", os.path.join(ROOT, "sdk/node/bundle.mjs"), FIXTURE, share)
        sh(VMM, "run", "--name", "bench-egress", "--app", share, "--egress-allow", "allowed.test", env=env)
        deadline = time.monotonic() + 300
        while True:
            try:
                rpc(env, "env")
                break
            except (RuntimeError, json.JSONDecodeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

        n, size = args.connects, args.mib << 20
        rpc(env, "bench_connect", host="allowed.test", port=80, count=2)  # warm up both ends
        res = {
            "connect_egress_ms": rpc(env, "bench_connect", host="allowed.test", port=80, count=n)["ms"],
            "connect_refused_in_guest_ms": rpc(env, "bench_connect", host="undeclared.test", port=80, count=n)["ms"],
            "connect_loopback_ms": direct("connect", "127.0.0.1", LOOP_PORTS[0], n)["ms"],
            "connect_netns_ms": direct("connect", NS_ADDR, 80, n)["ms"],
            "download_egress": [], "download_loopback": [], "download_netns": [],
        }
        for _ in range(args.n):
            res["download_egress"].append(rpc(env, "bench_download", host="allowed.test", port=80, bytes=size))
            res["download_loopback"].append(direct("download", "127.0.0.1", LOOP_PORTS[0], size))
            res["download_netns"].append(direct("download", NS_ADDR, 80, size))
        for k in ("download_egress", "download_loopback", "download_netns"):
            for d in res[k]:
                if d.get("received", 0) < size:
                    raise RuntimeError(f"{k}: a download came up short: {d}")
        sh(BERTH, "vm", "stop", "bench-egress", env=env, check=False)
    finally:
        for p in servers:
            p.kill()
        sh("ip", "link", "del", vh, check=False)
        sh("ip", "netns", "del", ns, check=False)
        sh(BERTH, "vm", "stop", "bench-egress", env=env, check=False)
        shutil.rmtree(work, ignore_errors=True)

    def mibps(runs):
        return med([size / (1 << 20) / (d["ms"] / 1000) for d in runs])

    summary = {
        "connect_egress_ms": med(res["connect_egress_ms"]),
        "connect_refused_in_guest_ms": med(res["connect_refused_in_guest_ms"]),
        "connect_loopback_ms": med(res["connect_loopback_ms"]),
        "connect_netns_ms": med(res["connect_netns_ms"]),
        "download_egress_MiBps": mibps(res["download_egress"]),
        "download_loopback_MiBps": mibps(res["download_loopback"]),
        "download_netns_MiBps": mibps(res["download_netns"]),
        "mib": args.mib, "connects": n, "runs": args.n,
    }
    if args.json:
        print(json.dumps({"summary": summary, "raw": res}, indent=2))
        return
    s = summary
    print(f"connection setup, median of {n}:")
    print(f"  CONNECT through broker, channel and dialer  {s['connect_egress_ms']:8.2f} ms")
    print(f"  CONNECT the broker refuses (guest only)     {s['connect_refused_in_guest_ms']:8.2f} ms")
    print(f"  TCP connect from the host, loopback         {s['connect_loopback_ms']:8.3f} ms"
          f"   (egress is {s['connect_egress_ms'] / s['connect_loopback_ms']:.0f}x)")
    print(f"  TCP connect from the host, to the namespace {s['connect_netns_ms']:8.3f} ms"
          f"   (egress is {s['connect_egress_ms'] / s['connect_netns_ms']:.0f}x)")
    print(f"throughput, GET /bytes/{args.mib} MiB, median of {args.n}:")
    print(f"  through the tunnel                          {s['download_egress_MiBps']:8.1f} MiB/s")
    print(f"  from the host, loopback                     {s['download_loopback_MiBps']:8.1f} MiB/s"
          f"   (egress is {s['download_egress_MiBps'] / s['download_loopback_MiBps']:.3f}x)")
    print(f"  from the host, to the namespace             {s['download_netns_MiBps']:8.1f} MiB/s"
          f"   (egress is {s['download_egress_MiBps'] / s['download_netns_MiBps']:.3f}x)")


if __name__ == "__main__":
    main()
