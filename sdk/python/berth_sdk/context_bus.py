# SPDX-License-Identifier: Apache-2.0
"""Context bus client (SPEC §2.8, §5). Frames: a 4-byte big-endian length and one
protobuf Envelope. The wire format is sdk/context_bus.proto; WIRE below is its field
table, which test/sdk holds against the descriptor protoc compiles from that file. The few
messages are encoded from the table by hand, so the client works with any protobuf
version, or none (docs/context-bus.md)."""
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
# After the daemon went away: the first retry, and the longest wait between two.
RECONNECT_MIN_S = 0.1
RECONNECT_MAX_S = 5.0
# How long a publish may wait for a daemon that stopped reading; then the connection is
# given up (a frame may be half sent) and dialled again.
SEND_TIMEOUT_S = 5

# sdk/context_bus.proto as a table: the Envelope's oneof members (field number, message)
# and each message's fields (field number, proto3 type).
WIRE = {
    "Envelope": {
        "register": (1, "RegisterRequest"),
        "publish": (2, "PublishRequest"),
        "subscribe": (3, "SubscribeRequest"),
        "unsubscribe": (4, "UnsubscribeRequest"),
        "event": (5, "Event"),
        "ack": (6, "Ack"),
    },
    "RegisterRequest": {"app": (1, "string")},
    "PublishRequest": {"topic": (1, "string"), "payload": (2, "bytes")},
    "SubscribeRequest": {"topic": (1, "string")},
    "UnsubscribeRequest": {"topic": (1, "string")},
    "Event": {"topic": (1, "string"), "payload": (2, "bytes")},
    "Ack": {"ok": (1, "bool"), "error": (2, "string")},
}
KIND = {k: n for k, (n, _) in WIRE["Envelope"].items()}
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


def encode_envelope(kind: str, **fields) -> bytes:
    """One Envelope; proto3 defaults (empty strings and bytes, False) are omitted, and
    fields are written in field-number order, as protobuf's own encoders do."""
    if kind not in WIRE["Envelope"]:
        raise ValueError(f"unknown envelope kind {kind}")
    number, message = WIRE["Envelope"][kind]
    table = WIRE[message]
    unknown = set(fields) - set(table)
    if unknown:
        raise ValueError(f"{message} has no field {sorted(unknown)[0]!r}")
    parts = []
    for name, (num, typ) in sorted(table.items(), key=lambda kv: kv[1][0]):
        v = fields.get(name)
        if typ == "string" and v:
            parts.append(_len_field(num, v.encode()))
        elif typ == "bytes" and v:
            parts.append(_len_field(num, bytes(v)))
        elif typ == "bool" and v:
            parts.append(bytes([num << 3, 1]))
    return _len_field(number, b"".join(parts))


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
    """One Envelope as a dict, or None with no known kind; unknown fields are skipped."""
    msg = None
    for field, wire, value in _fields(bytes(buf)):
        if wire != 2 or field not in KIND_NAME:
            continue
        kind = KIND_NAME[field]
        table = WIRE[WIRE["Envelope"][kind][1]]
        by_num = {num: (name, typ) for name, (num, typ) in table.items()}
        msg = {"kind": kind}
        # The defaults a reader sees for absent fields, where callers look (an ack's ok,
        # an event's payload); absent strings stay absent.
        for name, (_, typ) in table.items():
            if typ == "bool":
                msg[name] = False
            elif typ == "bytes" and name == "payload":
                msg[name] = b""
        for f, w, v in _fields(value):
            if f not in by_num:
                continue
            name, typ = by_num[f]
            if typ == "bool" and w == 0:
                msg[name] = v != 0
            elif typ == "string" and w == 2:
                msg[name] = v.decode()
            elif typ == "bytes" and w == 2:
                msg[name] = bytes(v)
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
    delivered to handlers on a reader thread. A lost connection is dialled again
    (RECONNECT_MIN_S doubling up to RECONNECT_MAX_S) and the register and subscriptions
    are sent again; publishes meanwhile are dropped, as the bus promises at most once."""

    kind = "socket"

    def __init__(self, sock: socket.socket, path: str, reconnect: bool = True,
                 timeout: float = CONNECT_TIMEOUT_S):
        self._sock: Optional[socket.socket] = sock
        self.socket_path = path
        self._reconnect = reconnect
        self._timeout = timeout
        self._subs: Dict[str, List[Callable]] = {}
        self._registered: Optional[str] = None
        self._dropped = 0
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = False
        self._wake = threading.Event()
        self._reader = threading.Thread(target=self._run, name="berth-context-bus", daemon=True)
        self._reader.start()

    @property
    def connected(self) -> bool:
        return self._sock is not None and not self._closed

    def _write(self, sock: socket.socket, kind: str, **fields) -> bool:
        data = frame(encode_envelope(kind, **fields))
        try:
            with self._send_lock:
                sock.sendall(data)
            return True
        except OSError as e:
            if not self._closed:
                _log(f"send to {self.socket_path} failed: {e}")
            # The reader sees the same connection end and takes it from there.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return False

    def _send(self, kind: str, **fields) -> None:
        if self._closed:
            return
        sock = self._sock
        if sock is None:
            if kind == "publish":
                with self._lock:
                    self._dropped += 1
            return
        self._write(sock, kind, **fields)

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _dispatch(self, body: bytes) -> None:
        try:
            env = decode_envelope(body)
        except ValueError as e:
            _log(f"skipping undecodable frame: {e}")
            return
        if not env or env["kind"] != "event":
            return
        topic = env.get("topic", "")
        with self._lock:
            handlers = list(self._subs.get(topic, ()))
        if not handlers:
            return
        try:
            payload = decode_payload(env["payload"])
        except ValueError as e:
            _log(f'skipping event on "{topic}" whose payload is not JSON: {e}')
            return
        for h in handlers:
            _call(h, topic, payload)

    def _read(self, sock: socket.socket) -> None:
        try:
            while True:
                head = self._recv_exact(sock, 4)
                if head is None:
                    return
                (length,) = struct.unpack(">I", head)
                if length > MAX_FRAME_BYTES:
                    _log(f"frame of {length} bytes from the daemon is too large; disconnecting")
                    return
                body = self._recv_exact(sock, length)
                if body is None:
                    return
                self._dispatch(body)
        except OSError:
            pass

    def _redial(self) -> Optional[socket.socket]:
        delay = RECONNECT_MIN_S
        while not self._closed:
            if self._wake.wait(delay):
                return None
            try:
                return _dial(self.socket_path, self._timeout)
            except OSError:
                delay = min(delay * 2, RECONNECT_MAX_S)
        return None

    def _run(self) -> None:
        sock = self._sock
        while sock is not None:
            self._read(sock)
            self._sock = None
            try:
                sock.close()
            except OSError:
                pass
            if self._closed:
                return
            if not self._reconnect:
                _log(f"connection to {self.socket_path} closed; publishes are dropped from now on")
                self._closed = True
                return
            _log(f"connection to {self.socket_path} closed; reconnecting, and publishes are dropped until then")
            sock = self._redial()
            if sock is None:
                return
            # What the daemon forgot with the old connection (SPEC 5: a disconnect removes
            # its subscriptions): one register, one subscribe per topic.
            with self._lock:
                topics = list(self._subs)
                registered = self._registered
            if registered is not None:
                self._write(sock, "register", app=registered)
            for t in topics:
                self._write(sock, "subscribe", topic=t)
            self._sock = sock
            with self._lock:
                dropped, self._dropped = self._dropped, 0
            _log(f"reconnected to {self.socket_path}" + (f"; {dropped} publish(es) were dropped meanwhile" if dropped else ""))

    def register(self, app: str) -> None:
        if isinstance(app, dict):
            app = app.get("app", "")
        self._registered = app or ""
        self._send("register", app=self._registered)

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
        self._wake.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _dial(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT_S, 0))
    return sock


def connect_context_bus(path: Optional[str] = None, timeout: float = CONNECT_TIMEOUT_S,
                        reconnect: bool = True) -> SocketContextBus:
    path = path or os.environ.get("BERTH_CONTEXT_BUS_SOCKET") or DEFAULT_SOCKET
    return SocketContextBus(_dial(path, timeout), path, reconnect=reconnect, timeout=timeout)
