#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GitHub broker benchmark (docs/github.md): what the broker adds to one allowed GET, both
measured in the same run on the same machine, against the same fake api.github.com (a
local HTTPS server with a CA of its own, test/e2e/github-broker.py's):

  * direct: a new TCP connection and TLS handshake to the server, GET /repos/o/r, the
    whole response read;
  * through the broker: CONNECT api.github.com:443 to github-api-broker on 127.0.0.1, TLS
    with the broker's per-boot CA, the same GET; the broker classifies it, dials through a
    stand-in dial socket (a unix socket in front of the server, where berth-init's bridge
    and berth-vmm's dialer would be), makes its own TLS connection verifying the server's
    certificate, forwards, and relays the response;
  * a denied GET (/user/emails): the part that never leaves the broker.

Both clients are the same Python code and make one request per connection, as the broker
serves one. The channel and the host dialer add what bench/egress.py measures for any
tunnel; this is the broker's own cost (a fork, two TLS handshakes, the classification).
Prints medians, the added milliseconds and the ratio; --json for a machine-readable
record. No VM, no root. Needs build/ (or --build) and the openssl command.

Usage: bench/github.py [-n RUNS] [--build DIR] [--json]
"""
import argparse
import importlib.util
import json
import os
import secrets
import socket
import ssl
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_test_module():
    spec = importlib.util.spec_from_file_location(
        "github_broker_test", os.path.join(ROOT, "test/e2e/github-broker.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def get_direct(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        with ctx.wrap_socket(s, server_hostname="api.github.com") as t:
            t.sendall(b"GET /repos/o/r HTTP/1.1\r\nHost: api.github.com\r\nUser-Agent: bench\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < content_length(data):
                d = t.recv(65536)
                if not d:
                    break
                data += d
    dt = time.perf_counter() - t0
    if not data.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"direct GET failed: {data[:200]!r}")
    return dt


def content_length(data):
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 1 << 30


def get_brokered(broker, path, want):
    t0 = time.perf_counter()
    r = broker.request("GET", path)
    dt = time.perf_counter() - t0
    if not isinstance(r, tuple) or not r[0].startswith(want):
        raise RuntimeError(f"brokered GET {path} failed: {r!r}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=50, help="requests per path (default 50)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("GITHUB_BROKER", os.path.join(args.build, "src/github-broker/github-api-broker"))
    t = load_test_module()
    if not os.access(t.BROKER, os.X_OK):
        sys.exit(f"bench/github.py: {t.BROKER} is not built (ninja -C {args.build})")
    tmp = tempfile.mkdtemp(prefix="github-bench.")
    pki = os.path.join(tmp, "pki")
    os.makedirs(pki)
    t.make_certs(pki)
    server = t.FakeGitHub(pki, "good")
    dialer = t.Dialer(os.path.join(tmp, "dial.sock"))
    dialer.target = server.port
    broker = t.Broker(tmp, ["github:read:repos"], "ghp_" + secrets.token_hex(18),
                      open(f"{pki}/testca.crt").read())
    try:
        cafile = f"{pki}/testca.crt"
        # One of each first: the page cache, the broker's first fork.
        get_direct(server.port, cafile)
        get_brokered(broker, "/repos/o/r", "HTTP/1.1 200")
        direct, brokered, denied = [], [], []
        for _ in range(args.n):
            direct.append(get_direct(server.port, cafile))
            brokered.append(get_brokered(broker, "/repos/o/r", "HTTP/1.1 200"))
            denied.append(get_brokered(broker, "/user/emails", "HTTP/1.1 403"))
    finally:
        broker.stop()
    med = {k: statistics.median(v) * 1000 for k, v in
           (("direct", direct), ("brokered", brokered), ("denied", denied))}
    out = {
        "runs": args.n,
        "medianMs": {k: round(v, 3) for k, v in med.items()},
        "addedMs": round(med["brokered"] - med["direct"], 3),
        "ratio": round(med["brokered"] / med["direct"], 2),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"one GET /repos/o/r, new connection each, median of {args.n}:")
    print(f"  direct to the fake api.github.com (TCP + TLS + GET)   {med['direct']:8.2f} ms")
    print(f"  through the GitHub broker (CONNECT, 2 x TLS, dial)    {med['brokered']:8.2f} ms"
          f"  (+{out['addedMs']:.2f} ms, {out['ratio']}x)")
    print(f"  a denied GET (/user/emails, never leaves the broker)  {med['denied']:8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
