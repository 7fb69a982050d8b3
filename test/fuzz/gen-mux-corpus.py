#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-mux-frames (test/fuzz/corpus/mux-frames/).

Layout of an input: one setup byte (see fuzz-mux-frames.c), then transport bytes.
Frames follow docs/channel-protocol.md: a 16-byte little-endian header
(magic 'BM', kind, flags, epoch, stream, length) and a payload.
"""
import os
import struct
import sys

HELLO, OPEN, OPEN_OK, OPEN_FAIL, DATA, CLOSE, WINDOW, RESET = range(1, 9)
EPOCH = 1  # FUZZ_EPOCH: the first epoch a host uses in the fuzz target
GUEST, HOST = 0, 1
READY = 2  # handshake with a real peer first
CHUNK1, CHUNK7, CHUNK4K = 4, 8, 12
HOLD_OUTPUT = 16
TRICKLE_OUTPUT = 32


def frame(kind, stream, payload=b"", epoch=EPOCH, flags=0, length=None):
    if length is None:
        length = len(payload)
    return struct.pack("<HBBIII", 0x4D42, kind, flags, epoch, stream, length) + payload


def u32(kind, stream, value, epoch=EPOCH):
    return frame(kind, stream, struct.pack("<I", value), epoch)


def hello(role, epoch=EPOCH, max_frame=65536, window=131072, max_streams=256, token=b"\0" * 16,
          version=1):
    p = b"BERTHMUX" + struct.pack("<HBBIII", version, role, 0, max_frame, window, max_streams)
    return frame(HELLO, 0, p + token, epoch)


ROLE_HOST, ROLE_GUEST = 1, 2


def seeds():
    # Guest side in a READY session: host-initiated streams have odd ids.
    yield "guest-open-data-close", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 5000) + frame(DATA, 1, b"hello") + u32(WINDOW, 2, 4096) +
        frame(DATA, 1, b"Close-now") + frame(CLOSE, 1))
    yield "guest-open-odd-port-refused", bytes([GUEST | READY]) + u32(OPEN, 1, 5001) + u32(OPEN, 3, 2003)
    yield "guest-stream-reset", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 1024) + frame(DATA, 1, b"x" * 100) + u32(RESET, 1, 4) + frame(DATA, 1, b"late"))
    yield "guest-abort-release", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 1024) + u32(OPEN, 3, 1026) + frame(DATA, 1, b"Abort") + frame(DATA, 3, b"Release") +
        frame(DATA, 3, b"late"))
    yield "guest-session-reset-then-new-hello", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 5000) + u32(RESET, 0, 5) + hello(ROLE_HOST, epoch=9) + frame(DATA, 1, b"x", epoch=9) +
        u32(OPEN, 1, 5002, epoch=9))
    yield "guest-new-host-without-eof", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 5000) + hello(ROLE_HOST, epoch=2) + u32(OPEN, 1, 5000, epoch=2) +
        frame(DATA, 1, b"new session", epoch=2))
    yield "guest-stale-epoch", bytes([GUEST | READY]) + (
        u32(OPEN, 1, 5000, epoch=77) + frame(DATA, 5, b"stale", epoch=77) + u32(OPEN, 1, 5000))
    yield "guest-open-ok-for-control", bytes([GUEST | READY]) + (
        frame(OPEN_OK, 2) + u32(WINDOW, 2, 1000) + frame(DATA, 2, b"reply") + frame(CLOSE, 2))
    yield "guest-open-fail-for-control", bytes([GUEST | READY]) + u32(OPEN_FAIL, 2, 2)
    yield "guest-sync-hello", bytes([GUEST]) + (
        b"\x00garbage BM\x01" + hello(ROLE_HOST, epoch=7) + u32(OPEN, 1, 5000, epoch=7) +
        frame(DATA, 1, b"C", epoch=7))
    yield "guest-sync-hello-1byte", bytes([GUEST | CHUNK1]) + hello(ROLE_HOST, epoch=7) + u32(OPEN, 1, 1025, epoch=7)
    # Host side: guest-initiated streams have even ids.
    yield "host-guest-dials-egress", bytes([HOST | READY]) + (
        u32(OPEN, 2, 1026) + frame(DATA, 2, b"CONNECT example.org:443") + frame(CLOSE, 2) +
        frame(OPEN_OK, 1) + u32(WINDOW, 1, 8192))
    yield "host-sync-stale-then-hello", bytes([HOST]) + (
        frame(DATA, 4, b"old bytes", epoch=1234) + b"\x42\x4d\x05" + hello(ROLE_GUEST) +
        u32(OPEN, 2, 1026))
    yield "host-sync-wrong-epoch-hello", bytes([HOST]) + hello(ROLE_GUEST, epoch=2) + hello(ROLE_GUEST)
    yield "host-guest-reset-request", bytes([HOST | READY]) + u32(RESET, 0, 5) + hello(ROLE_GUEST, epoch=2)
    yield "host-chunk7", bytes([HOST | READY | CHUNK7]) + (
        u32(OPEN, 2, 1026) + frame(DATA, 2, bytes(range(200))) + frame(CLOSE, 2))
    yield "host-chunk4k-hold-output", bytes([HOST | READY | CHUNK4K | HOLD_OUTPUT]) + b"".join(
        u32(OPEN, 2 * i, 1027) for i in range(1, 400))
    # Malformed: each resets the session.
    yield "bad-magic", bytes([GUEST | READY]) + b"XX" + frame(CLOSE, 1)[2:]
    yield "bad-kind", bytes([GUEST | READY]) + frame(99, 1)
    yield "bad-flags", bytes([GUEST | READY]) + frame(CLOSE, 1, flags=1)
    yield "oversized-length", bytes([GUEST | READY]) + frame(DATA, 1, b"", length=0xFFFFFFFF)
    yield "length-over-cap", bytes([GUEST | READY]) + frame(DATA, 1, b"", length=65537)
    yield "wrong-fixed-length", bytes([GUEST | READY]) + frame(WINDOW, 1, b"12345678")
    yield "empty-data", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(DATA, 1, b"")
    yield "credit-overrun", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + b"".join(
        frame(DATA, 1, b"z" * 2000) for _ in range(5))
    yield "credit-overrun-split", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + b"".join(
        frame(DATA, 1, b"z" * 1000) for _ in range(5))
    yield "window-overflow", bytes([GUEST | READY]) + frame(OPEN_OK, 2) + u32(WINDOW, 2, 0xFFFFFFFF)
    yield "window-zero", bytes([GUEST | READY]) + frame(OPEN_OK, 2) + u32(WINDOW, 2, 0)
    yield "unknown-stream", bytes([GUEST | READY]) + frame(DATA, 101, b"who")
    yield "own-parity-open", bytes([GUEST | READY]) + u32(OPEN, 2, 5000)
    yield "id-not-increasing", bytes([GUEST | READY]) + u32(OPEN, 5, 5000) + u32(OPEN, 3, 5000)
    yield "port-zero", bytes([GUEST | READY]) + u32(OPEN, 1, 0)
    yield "port-too-big", bytes([GUEST | READY]) + u32(OPEN, 1, 65536)
    yield "too-many-streams", bytes([GUEST | READY]) + b"".join(u32(OPEN, 2 * i + 1, 5000) for i in range(10))
    yield "data-after-close", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(CLOSE, 1) + frame(DATA, 1, b"x")
    yield "double-close", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(CLOSE, 1) + frame(CLOSE, 1)
    yield "open-ok-on-incoming", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(OPEN_OK, 1)
    yield "data-before-open-ok", bytes([GUEST | READY]) + frame(DATA, 2, b"early")
    yield "hello-on-stream", bytes([GUEST | READY]) + hello(ROLE_HOST, epoch=3)[:8] + struct.pack("<I", 5) + hello(ROLE_HOST)[12:]
    yield "hello-bad-version", bytes([GUEST]) + hello(ROLE_HOST, epoch=3, version=2)
    yield "hello-bad-token", bytes([GUEST]) + hello(ROLE_HOST, epoch=3, token=b"\1" * 16)
    yield "hello-bad-caps", bytes([GUEST]) + hello(ROLE_HOST, epoch=3, max_frame=10, window=0, max_streams=1000)
    yield "hello-same-role", bytes([GUEST]) + hello(ROLE_GUEST, epoch=3)
    yield "data-over-max-frame", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(DATA, 1, b"m" * 3000)
    yield "reset-with-partly-written-output", bytes([HOST | READY | TRICKLE_OUTPUT]) + (
        u32(OPEN, 2, 1026) + frame(DATA, 2, b"q" * 1500) + frame(DATA, 2, b"w" * 1500) + frame(99, 2))
    yield "guest-window-for-control", bytes([GUEST | READY | TRICKLE_OUTPUT]) + (
        frame(OPEN_OK, 2) + u32(WINDOW, 2, 100) + u32(WINDOW, 2, 0x7FFFFFFF))
    yield "host-open-fail-for-control", bytes([HOST | READY]) + u32(OPEN_FAIL, 1, 3) + u32(OPEN_FAIL, 1, 3)
    yield "truncated-frame", bytes([GUEST | READY]) + u32(OPEN, 1, 5000) + frame(DATA, 1, b"y" * 300)[:100]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "mux-frames")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
