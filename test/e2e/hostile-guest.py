#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A hostile guest against berth-vmm: berth-vmm boots a VM but connects its channel to
this test (--channel-connect), which plays the guest and, when berth-vmm opens the control
port for the boot events, floods it: many events, and large ones. What a guest can make
berth-vmm keep must be capped: its memory, vmm.log and the boot evidence stay bounded, and
what is past the caps is counted. Prints TAP."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mux_guest import CONTROL, Guest  # noqa: E402

SRC = os.environ["BERTH_SOURCE_ROOT"]
BLD = os.environ["BERTH_BUILD_DIR"]
ARTIFACTS = os.environ.get("BERTH_TEST_ARTIFACTS", os.path.join(SRC, "out/artifacts"))
VMM = os.path.join(BLD, "src/berth-vmm/berth-vmm")
BERTH = os.path.join(BLD, "src/berth/berth")
BIG = 64 * 1024  # bytes of one large event
N_BIG = 2000     # 125 MiB of them: without caps berth-vmm would keep it all, and more
N_SMALL = 20000
N_DIALS = 20000  # each a line in vmm.log: together past its cap
LOG_CAP = 9 * 1024 * 1024  # VMM_LOG_BYTES_MAX and the reserve for warnings (vmm-run.h)
results = []


def tap(ok, what, detail=None):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)
    if not ok and detail:
        for line in str(detail).splitlines()[-20:]:
            print(f"# {line}", flush=True)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    print("1..8", flush=True)
    home = tempfile.mkdtemp(prefix="berth-hostile.")
    env = dict(os.environ, BERTH_HOME=home)
    subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot", "--vmm", VMM],
                   env=env, check=True, capture_output=True)
    sock = os.path.join(home, "guest.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sock)
    listener.listen(1)
    run_dir = os.path.join(home, "run/vm/hostile")
    launch = subprocess.run([VMM, "run", "--name", "hostile", "--channel-connect", sock],
                            env=env, capture_output=True, text=True, timeout=180)
    tap(launch.returncode == 0, "berth-vmm starts with its channel to the test", launch.stderr)
    pid = int(open(os.path.join(run_dir, "berth-vmm.pid")).read())
    done = threading.Event()

    def flood(guest, sid, port):
        pad = "x" * BIG
        try:
            for i in range(N_BIG):
                guest.write(sid, json.dumps({"event": "flood", "n": i, "pad": pad}).encode() + b"\n")
            for i in range(N_SMALL):
                guest.write(sid, json.dumps({"event": f"flood-{i}"}).encode() + b"\n")
        except (OSError, EOFError):
            pass
        done.set()

    guest = Guest(listener, accept={CONTROL}, on_open=flood)
    peak = 0
    deadline = time.time() + 240
    while not done.is_set() and time.time() < deadline:
        peak = max(peak, rss_kib(pid))
        time.sleep(0.05)
    peak = max(peak, rss_kib(pid))
    tap(done.is_set(), f"the guest sent {N_BIG} events of {BIG // 1024} KiB and {N_SMALL} small ones")
    # Every dial gets a line in vmm.log; refused ones too.
    dials = 0
    try:
        for i in range(N_DIALS):
            sid, rep = guest.dial(f"flood-{i}.invalid", 443, timeout=10)
            guest.close(sid)
            dials += rep.get("ok") is False or "error" in rep
    except (OSError, EOFError):
        pass
    tap(dials == N_DIALS, f"the guest dialed {N_DIALS} refused hosts, each refused ({dials})")
    peak = max(peak, rss_kib(pid))
    tap(0 < peak < 150 * 1024, f"berth-vmm's memory stayed bounded (peak RSS {peak // 1024} MiB)")
    log_path = os.path.join(run_dir, "vmm.log")
    log_size = os.path.getsize(log_path)
    tap(log_size <= LOG_CAP + 64 * 1024, f"vmm.log stayed within its cap ({log_size // 1024} KiB)")
    with open(log_path, errors="replace") as f:
        tail = f.read()[-4096:]
    tap("reached its cap" in tail, "and says where it stopped", tail)

    # QEMU ends; berth-vmm writes the evidence and exits.
    doc = json.load(open(os.path.join(run_dir, "vm.json")))
    boot = doc["bootId"]
    os.kill(doc["enginePid"], signal.SIGKILL)
    for _ in range(300):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.1)
    path = os.path.join(home, "runs", boot, "evidence.json")
    size = os.path.getsize(path) if os.path.exists(path) else -1
    tap(0 < size < 16 * 1024 * 1024, f"evidence.json stayed bounded ({size // 1024} KiB)")
    ev = json.load(open(path)) if size > 0 else {}
    tap(ev.get("droppedEvents", 0) > 0 and len(ev.get("events", [])) <= 4096,
        f"what was past the caps is counted, not kept ({ev.get('droppedEvents')} dropped, "
        f"{len(ev.get('events', []))} kept)")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    subprocess.run(["rm", "-rf", home])
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
