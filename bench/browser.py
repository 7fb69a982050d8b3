#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Browser layer benchmark (docs/browser.md), all measured in one run on this machine:

  * the layer: its size packed and unpacked, and the time build.sh takes with the stage
    cached (what a change to Berth's own files costs);
  * first navigate: `berth dev` of apps/browser-native to "VM ready", then the first
    `navigate` answered (Chromium's start included), against a test host in a network
    namespace through the broker, the channel and the dialer;
  * warm navigate: the median of further `navigate` calls to the same page, against the
    host fetching the same page from the same test host (urllib, no browser), as a ratio.

Usage: bench/browser.py [-n CALLS] [--json]   (root: a network namespace; out/artifacts
built by scripts/build-artifacts.sh)
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.setdefault("BERTH_BUILD_DIR", os.path.join(ROOT, "build"))
os.environ.setdefault("BERTH_SOURCE_ROOT", ROOT)
ARTIFACTS = os.path.join(ROOT, "out/artifacts")
sys.path.insert(0, os.path.join(ROOT, "test/e2e"))
import browser as e2e  # noqa: E402  (the test host and the pty runner)
from dev_pty import Dev  # noqa: E402


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def accelerator(home):
    log = open(os.path.join(home, "run/vm/berth-dev-browser-native/vmm.log"), errors="replace").read()
    m = re.search(r"accelerator: (\w+)", log)
    return m.group(1) if m else "unknown"


def layer_facts():
    m = json.load(open(os.path.join(ARTIFACTS, "manifest-layer-browser.json")))
    out = tempfile.mkdtemp(prefix="berth-layer-bench-")
    try:
        t0 = time.monotonic()
        subprocess.run([os.path.join(ROOT, "vm/layers/browser/build.sh"), out, BUILD], check=True,
                       capture_output=True)
        build_s = time.monotonic() - t0
        same = sha256_file(os.path.join(out, "layer-browser.erofs")) == m["layer"]["sha256"]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"packedBytes": m["layer"]["size"], "treeBytes": m.get("treeBytes"), "buildCachedS": build_s,
            "sameBytesAsPinnedBuild": same}


def host_fetch(n):
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        with urllib.request.urlopen("http://198.51.100.2/", timeout=30) as r:
            r.read()
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5, help="warm navigate calls (default 5)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/browser.py needs root (a network namespace and bind mounts)")
    if not os.environ.get("BERTH_BROWSER_TEST_INNER"):
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable, *sys.argv],
                   dict(os.environ, BERTH_BROWSER_TEST_INNER="1"))
    facts = {"layer": layer_facts()}
    home = tempfile.mkdtemp(prefix="berth-browser-bench-")
    env = dict(os.environ, BERTH_HOME=home, BERTH_VMM_EGRESS_TEST_ALLOW_CIDR="198.51.100.0/24")
    os.environ.update(env)
    teardown = None
    dev = None
    try:
        subprocess.run([e2e.BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot",
                        "--layer", "browser", "--vmm", e2e.VMM], env=env, check=True, capture_output=True)
        _, teardown = e2e.setup_network(home, str(os.getpid() % 100000))
        app_dir = e2e.app_copy(home)
        t0 = time.monotonic()
        dev = Dev(home, app_dir)
        m = dev.wait_for(r"^VM ready in (\d+) ms", 600)
        if not m:
            sys.exit("berth dev did not get ready:\n" + dev.text())
        ready_s = time.monotonic() - t0
        t1 = time.monotonic()
        rc, r, err = e2e.rpc(home, "navigate", {"url": "http://allowed.test/"})
        if rc != 0:
            sys.exit(f"the first navigate failed: {err}")
        first_s = time.monotonic() - t1
        warm = []
        for _ in range(args.n):
            t = time.monotonic()
            rc, r, err = e2e.rpc(home, "navigate", {"url": "http://allowed.test/"})
            if rc != 0:
                sys.exit(f"a navigate failed: {err}")
            warm.append(time.monotonic() - t)
        host = host_fetch(max(args.n, 5))
        facts.update({"devReadyS": ready_s, "firstNavigateS": first_s, "devToFirstPageS": ready_s + first_s,
                      "warmNavigateMedianS": statistics.median(warm), "hostFetchMedianS": host,
                      "warmOverHost": statistics.median(warm) / host if host else None,
                      "accelerator": accelerator(home)})
    finally:
        if dev:
            dev.stop()
        if teardown:
            teardown()
        shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(facts, indent=2))
        return
    L = facts["layer"]
    print(f"browser layer: {L['packedBytes'] / 1e6:.0f} MB packed (erofs lz4hc), {L['treeBytes'] / 1e6:.0f} MB unpacked; "
          f"build.sh with the stage cached {L['buildCachedS']:.1f} s (same bytes: {L['sameBytesAsPinnedBuild']})")
    print(f"accelerator: {facts['accelerator']}")
    print(f"berth dev to VM ready:            {facts['devReadyS']:.1f} s")
    print(f"first navigate (Chromium starts): {facts['firstNavigateS']:.1f} s")
    print(f"berth dev to the first page:      {facts['devToFirstPageS']:.1f} s")
    print(f"warm navigate, median of {args.n}:     {facts['warmNavigateMedianS'] * 1000:.0f} ms")
    print(f"host fetch of the same page:      {facts['hostFetchMedianS'] * 1000:.1f} ms "
          f"(warm navigate is {facts['warmOverHost']:.0f}x)")


if __name__ == "__main__":
    main()
