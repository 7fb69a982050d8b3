# SPDX-License-Identifier: Apache-2.0
"""A small HTTP and websocket client (RFC 6455) for the tests of the terminal's web view,
so that they need nothing but Python's standard library. It speaks to one host:port; the
web view's own message format is in docs/terminal.md."""
import base64
import hashlib
import os
import socket
import struct
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def basic(credential):
    return "Basic " + base64.b64encode(credential.encode()).decode()


def http(port, path="/", headers=None, method="GET", host="127.0.0.1", raw=None, timeout=10):
    """One request; returns (status, headers dict with lowercase names, body bytes)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        if raw is None:
            lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
            lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode()
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                hdrs = parse_headers(head)
                n = int(hdrs.get("content-length", "-1"))
                if n >= 0 and len(body) >= n:
                    break
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        return None, {}, b""
    status = int(head.split(b" ", 2)[1])
    return status, parse_headers(head), body


def parse_headers(head):
    out = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.decode(errors="replace").partition(":")
        out[k.strip().lower()] = v.strip()
    return out


class WebSocket:
    """A client websocket. connect() returns (status, headers); status 101 means open."""

    def __init__(self, port, headers=None, host="127.0.0.1", protocol="berth-terminal", timeout=10,
                 path="/ws"):
        self.s = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if protocol:
            lines.append(f"Sec-WebSocket-Protocol: {protocol}")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.s.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, self.buf = data.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1]) if head else None
        self.headers = parse_headers(head) if head else {}
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.accepted = self.status == 101 and self.headers.get("sec-websocket-accept") == want
        self.closed = False

    def send(self, payload, opcode=2, fin=True, mask=True):
        if isinstance(payload, str):
            payload = payload.encode()
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        m = 0x80 if mask else 0
        if n < 126:
            head += bytes([m | n])
        elif n < 65536:
            head += bytes([m | 126]) + struct.pack(">H", n)
        else:
            head += bytes([m | 127]) + struct.pack(">Q", n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            head += key
        self.s.sendall(head + payload)

    def keys(self, text):
        self.send(b"0" + (text.encode() if isinstance(text, str) else text))

    def resize(self, cols, rows):
        self.send(f"1{cols},{rows}".encode())

    def _need(self, n, deadline):
        while len(self.buf) < n:
            self.s.settimeout(max(0.05, deadline - time.time()))
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the server closed the connection")
            self.buf += chunk

    def recv(self, timeout=5):
        """One frame: (opcode, payload). Raises socket.timeout or EOFError."""
        deadline = time.time() + timeout
        self._need(2, deadline)
        b0, b1 = self.buf[0], self.buf[1]
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._need(4, deadline)
            n, off = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10, deadline)
            n, off = struct.unpack(">Q", self.buf[2:10])[0], 10
        self._need(off + n, deadline)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        if b0 & 0x0F == 8:
            self.closed = True
        return b0 & 0x0F, payload

    def read_until(self, needle, timeout=10):
        """Terminal output until @needle (bytes) shows; returns all of it."""
        got, deadline = b"", time.time() + timeout
        while needle not in got:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"{needle!r} not seen; got {got[-400:]!r}")
            try:
                op, payload = self.recv(timeout=left)
            except socket.timeout:
                continue
            if op == 8:
                raise EOFError(f"closed before {needle!r}: {payload!r}")
            if op == 9:
                self.send(payload, opcode=10)
            got += payload
        return got

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
