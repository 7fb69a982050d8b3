# SPDX-License-Identifier: Apache-2.0
"""Context bus client (SPEC §2.8, §5). Frames: a 4-byte big-endian length and one
protobuf Envelope (context_bus.proto beside this file). The few messages are encoded
by hand, so the client works with any protobuf version, or none."""
import json
import os
import socket
import struct
import sys
import threading
from typing import Any, Callable, Dict, List, Optional

DEFAULT_SOCKET = "/tmp/berth-context-bus.sock"
CONNECT_TIMEOUT_S = 2.0
MAX_FRAME_BYTES = 8 << 20
KIND = {"register": 1, "publish": 2, "subscribe": 3, "unsubscribe": 4, "event": 5, "ack": 6}
KIND_NAME = {v: k for k, v in KIND.items()}


def _log(msg: str) -> None:
    print(f"[berth:context-bus] {msg}", file=sys.stderr, flush=True)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(field: int, data: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(data)) + data


def encode_envelope(kind: str, app: str = "", topic: str = "", payload: bytes = b"",
                    ok: bool = False, error: str = "") -> bytes:
    parts = []
    if kind == "register":
        if app:
            parts.append(_len_field(1, app.encode()))
    elif kind in ("publish", "event"):
        if topic:
            parts.append(_len_field(1, topic.encode()))
        if payload:
            parts.append(_len_field(2, bytes(payload)))
    elif kind in ("subscribe", "unsubscribe"):
        if topic:
            parts.append(_len_field(1, topic.encode()))
    elif kind == "ack":
        if ok:
            parts.append(b"\x08\x01")
        if error:
            parts.append(_len_field(2, error.encode()))
    else:
        raise ValueError(f"unknown envelope kind {kind}")
    return _len_field(KIND[kind], b"".join(parts))


def _fields(buf: bytes):
    i = 0
    n = len(buf)

    def varint():
        nonlocal i
        result = shift = 0
        for _ in range(10):
            if i >= n:
                raise ValueError("truncated varint")
            b = buf[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise ValueError("varint too long")

    while i < n:
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, wire, varint()
        elif wire == 2:
            length = varint()
            if i + length > n:
                raise ValueError("truncated field")
            yield field, wire, buf[i:i + length]
            i += length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
            if i > n:
                raise ValueError("truncated field")
        else:
            raise ValueError(f"unsupported wire type {wire}")


def decode_envelope(buf: bytes) -> Optional[Dict[str, Any]]:
    msg = None
    for field, wire, value in _fields(bytes(buf)):
        if wire != 2 or field not in KIND_NAME:
            continue
        kind = KIND_NAME[field]
        msg = {"kind": kind}
        if kind in ("publish", "event"):
            msg["payload"] = b""
        if kind == "ack":
            msg["ok"] = False
        for f, w, v in _fields(value):
            if kind == "register" and f == 1 and w == 2:
                msg["app"] = v.decode()
            elif kind not in ("ack", "register") and f == 1 and w == 2:
                msg["topic"] = v.decode()
            elif kind in ("publish", "event") and f == 2 and w == 2:
                msg["payload"] = bytes(v)
            elif kind == "ack" and f == 1 and w == 0:
                msg["ok"] = v != 0
            elif kind == "ack" and f == 2 and w == 2:
                msg["error"] = v.decode()
    return msg


def frame(envelope: bytes) -> bytes:
    return struct.pack(">I", len(envelope)) + envelope


def encode_payload(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def decode_payload(data: bytes) -> Any:
    if not data:
        return None
    return json.loads(data.decode())


def _call(handler: Callable, topic: str, payload: Any) -> None:
    try:
        handler(payload)
    except Exception as e:  # a subscriber's failure must not stop the others
        _log(f'subscriber of "{topic}" failed: {e}')


class ContextBusClient:
    """The interface both clients share: register, publish, subscribe → unsubscribe."""

    kind = "abstract"

    def register(self, app: str) -> None:
        raise NotImplementedError

    def publish(self, topic: str, payload: Any) -> None:
        raise NotImplementedError

    def subscribe(self, topic: str, handler: Callable[[Any], None]) -> Callable[[], None]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalContextBus(ContextBusClient):
    """In-process stand-in: publish reaches this process's own subscribers."""

    kind = "local"

    def __init__(self):
        self._subs: Dict[str, List[Callable]] = {}
        self._lock = threading.Lock()

    def register(self, app: str) -> None:
        pass

    def publish(self, topic: str, payload: Any) -> None:
        with self._lock:
            handlers = list(self._subs.get(topic, ()))
        if not handlers:
            return
        data = encode_payload(payload)
        for h in handlers:
            _call(h, topic, decode_payload(data))

    def subscribe(self, topic, handler):
        with self._lock:
            self._subs.setdefault(topic, []).append(handler)

        def unsubscribe():
            with self._lock:
                hs = self._subs.get(topic)
                if hs and handler in hs:
                    hs.remove(handler)
                    if not hs:
                        del self._subs[topic]

        return unsubscribe


def create_local_context_bus() -> LocalContextBus:
    return LocalContextBus()


class SocketContextBus(ContextBusClient):
    """A connection to the context bus daemon. Sends are fire-and-forget; events are
    delivered to handlers on a reader thread."""

    kind = "socket"

    def __init__(self, sock: socket.socket, path: str):
        self._sock = sock
        self.socket_path = path
        self._subs: Dict[str, List[Callable]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="berth-context-bus", daemon=True)
        self._reader.start()

    def _send(self, kind: str, **fields) -> None:
        if self._closed:
            return
        data = frame(encode_envelope(kind, **fields))
        try:
            with self._send_lock:
                self._sock.sendall(data)
        except OSError as e:
            if not self._closed:
                _log(f"send to {self.socket_path} failed: {e}")
            self._closed = True

    def _recv_exact(self, n: int) -> Optional[bytes]:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _read_loop(self) -> None:
        try:
            while True:
                head = self._recv_exact(4)
                if head is None:
                    break
                (length,) = struct.unpack(">I", head)
                if length > MAX_FRAME_BYTES:
                    _log(f"frame of {length} bytes from the daemon is too large; disconnecting")
                    break
                body = self._recv_exact(length)
                if body is None:
                    break
                try:
                    env = decode_envelope(body)
                except ValueError as e:
                    _log(f"skipping undecodable frame: {e}")
                    continue
                if not env or env["kind"] != "event":
                    continue
                topic = env.get("topic", "")
                with self._lock:
                    handlers = list(self._subs.get(topic, ()))
                if not handlers:
                    continue
                try:
                    payload = decode_payload(env["payload"])
                except ValueError as e:
                    _log(f'skipping event on "{topic}" whose payload is not JSON: {e}')
                    continue
                for h in handlers:
                    _call(h, topic, payload)
        except OSError:
            pass
        if not self._closed:
            _log(f"connection to {self.socket_path} closed; publishes are dropped from now on")
        self._closed = True

    def register(self, app: str) -> None:
        if isinstance(app, dict):
            app = app.get("app", "")
        self._send("register", app=app or "")

    def publish(self, topic: str, payload: Any) -> None:
        self._send("publish", topic=topic, payload=encode_payload(payload))

    def subscribe(self, topic, handler):
        with self._lock:
            first = topic not in self._subs
            self._subs.setdefault(topic, []).append(handler)
        if first:
            self._send("subscribe", topic=topic)

        def unsubscribe():
            last = False
            with self._lock:
                hs = self._subs.get(topic)
                if hs and handler in hs:
                    hs.remove(handler)
                    if not hs:
                        del self._subs[topic]
                        last = True
            if last:
                self._send("unsubscribe", topic=topic)

        return unsubscribe

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def connect_context_bus(path: Optional[str] = None, timeout: float = CONNECT_TIMEOUT_S) -> SocketContextBus:
    path = path or os.environ.get("BERTH_CONTEXT_BUS_SOCKET") or DEFAULT_SOCKET
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    return SocketContextBus(sock, path)
