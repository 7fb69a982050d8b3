#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A hostile host on a real VM's channel: berth-vmm boots the VM but leaves the channel
socket to this test (--channel-external), which speaks the mux protocol itself
(docs/channel-protocol.md) and sends garbage, a malformed frame, an oversized frame and
an oversized control line. The guest must refuse each one, reset when the protocol says
so, and keep serving: a fresh handshake and a control request work after every attack.
Prints TAP."""
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.environ["BERTH_SOURCE_ROOT"]
BLD = os.environ["BERTH_BUILD_DIR"]
ARTIFACTS = os.environ.get("BERTH_TEST_ARTIFACTS", os.path.join(SRC, "out/artifacts"))
VMM = os.path.join(BLD, "src/berth-vmm/berth-vmm")
BERTH = os.path.join(BLD, "src/berth/berth")
HELLO, OPEN, OPEN_OK, OPEN_FAIL, DATA, CLOSE, WINDOW, RESET = range(1, 9)
results = []


def tap(ok, what):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {what}", flush=True)


def header(kind, epoch, stream, length):
    return struct.pack("<HBBIII", 0x4D42, kind, 0, epoch, stream, length)


def hello(epoch):
    body = b"BERTHMUX" + struct.pack("<HBBIII", 1, 1, 0, 65536, 128 * 1024, 256) + b"\0" * 16
    return header(HELLO, epoch, 0, len(body)) + body


class Peer:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = b""
        self.epoch = 0
        self.next_stream = 1

    def send(self, b):
        self.s.sendall(b)

    def frame(self, timeout=20):
        """The next frame of the current epoch: (kind, stream, payload)."""
        deadline = time.time() + timeout
        while True:
            while len(self.buf) >= 16:
                magic, kind, flags, epoch, stream, length = struct.unpack("<HBBIII", self.buf[:16])
                if magic != 0x4D42:
                    self.buf = self.buf[1:]
                    continue
                if len(self.buf) < 16 + length:
                    break
                payload = self.buf[16:16 + length]
                self.buf = self.buf[16 + length:]
                if epoch == self.epoch:
                    return kind, stream, payload
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no frame from the guest")
            self.s.settimeout(left)
            d = self.s.recv(65536)
            if not d:
                raise EOFError("channel closed")
            self.buf += d

    def handshake(self):
        self.epoch = random.randrange(1, 2**32)
        self.next_stream = 1
        self.send(hello(self.epoch))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                kind, _, payload = self.frame(timeout=1)
            except TimeoutError:
                self.send(hello(self.epoch))  # the first may have been eaten by stale bytes
                continue
            if kind == HELLO and payload[10] == 2:
                return True
        return False

    def open(self, port):
        sid = self.next_stream
        self.next_stream += 2
        self.send(header(OPEN, self.epoch, sid, 4) + struct.pack("<I", port))
        return sid

    def write(self, sid, data):
        for i in range(0, len(data), 65536):
            chunk = data[i:i + 65536]
            self.send(header(DATA, self.epoch, sid, len(chunk)) + chunk)

    def read_lines(self, sid, until, timeout=20):
        """Collect DATA of stream sid until `until(text)` holds; returns (text, closed)."""
        text, deadline = b"", time.time() + timeout
        while time.time() < deadline:
            kind, stream, payload = self.frame(timeout=deadline - time.time())
            if stream == sid and kind == DATA:
                text += payload
                self.send(header(WINDOW, self.epoch, sid, 4) + struct.pack("<I", len(payload)))
                if until(text):
                    return text, False
            elif stream == sid and kind in (CLOSE, RESET, OPEN_FAIL):
                return text, True
        return text, False


def control_status(peer):
    sid = peer.open(1024)
    peer.write(sid, b'{"op":"status"}\n')
    text, _ = peer.read_lines(sid, lambda t: b'"op":"status"' in t)
    return b'"ok":true' in text and b'"op":"status"' in text


def main():
    print("1..10", flush=True)
    home = tempfile.mkdtemp(prefix="berth-hostile.")
    env = dict(os.environ, BERTH_HOME=home)
    inst = subprocess.run([BERTH, "vm", "install", "--from", ARTIFACTS, "--no-download", "--no-snapshot", "--vmm", VMM],
                          env=env, capture_output=True, text=True)
    if inst.returncode != 0:
        print("Bail out! cannot install artifacts: " + inst.stderr)
        return 1
    vmm = subprocess.Popen([VMM, "run", "--name", "hostile", "--foreground", "--channel-external"],
                           env=env, stderr=subprocess.DEVNULL)
    path = os.path.join(home, "run/vm/hostile/qemu-mux.sock")
    try:
        for _ in range(100):
            if os.path.exists(path):
                break
            time.sleep(0.1)
        peer = Peer(path)
        # 1. garbage before any handshake
        peer.send(os.urandom(8192) + b"BM" + os.urandom(100))
        tap(peer.handshake(), "the guest finds the handshake behind 8 KiB of garbage")
        tap(control_status(peer), "the control port answers in that session")

        # 2. a frame of an unknown kind: a protocol error, the session resets
        peer.send(header(99, peer.epoch, 0, 0))
        tap(peer.handshake() and control_status(peer),
            "after a malformed frame the guest resets and serves a new session")

        # 3. an oversized frame: refused on its header alone
        peer.send(header(DATA, peer.epoch, 1, 10 * 1024 * 1024) + b"x" * 1000)
        tap(peer.handshake() and control_status(peer),
            "after a frame announcing 10 MiB the guest resets and serves a new session")

        # 4. DATA beyond the credit the guest granted
        sid = peer.open(1024)
        peer.read_lines(sid, lambda t: b'"event":"hello"' in t)
        peer.write(sid, b"y" * (1024 * 1024))
        tap(peer.handshake() and control_status(peer),
            "after a credit overrun the guest resets and serves a new session")

        # 5. a frame for a stream never opened
        peer.send(header(DATA, peer.epoch, 777, 4) + b"oops")
        tap(peer.handshake() and control_status(peer),
            "after a frame for a stream never opened the guest resets and serves again")

        # 6. a control line over 64 KiB closes that connection only
        sid = peer.open(1024)
        peer.read_lines(sid, lambda t: b'"event":"hello"' in t)
        peer.write(sid, b"z" * 70000 + b"\n")
        _, closed = peer.read_lines(sid, lambda t: False, timeout=15)
        tap(closed, "a control line over 64 KiB closes the control connection")
        tap(control_status(peer), "and the same session still answers on a new stream")

        # 7. a clean shutdown still works
        sid = peer.open(1024)
        peer.write(sid, b'{"op":"shutdown"}\n')
        text, _ = peer.read_lines(sid, lambda t: b'"event":"power_off"' in t, timeout=30)
        tap(b'"event":"power_off"' in text, "the guest powers off on request afterwards")
        vmm.wait(timeout=60)
        tap(vmm.returncode == 0, "and QEMU exits cleanly")
    except Exception as e:  # a failed step fails the rest
        print(f"# {type(e).__name__}: {e}")
        while len(results) < 10:
            tap(False, "not reached")
    finally:
        if vmm.poll() is None:
            vmm.kill()
        subprocess.run(["rm", "-rf", home])
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
