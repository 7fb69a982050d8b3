# SPDX-License-Identifier: Apache-2.0
"""The semantic-fs control client (SPEC §2.9; docs/context.md).

Frames of a 4-byte big-endian length and UTF-8 JSON: a request ``{"id", "op", ...}`` and
its answer ``{"id", "ok", "error"?, "results"?}``. The daemon decides who the caller is by
SO_PEERCRED, so ``register``'s app name is a courtesy it logs, never an identity.

Results are dicts with the SDK's keys (the Node SDK's): ``path``, ``createdBy``, ``task``,
``relatedApps``, ``createdAt``, ``updatedAt`` (milliseconds), ``ranking`` ("keyword") and,
from the daemon, ``score`` (higher is better)."""
import json
import os
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Optional

DEFAULT_SOCKET = "/tmp/berth-semantic-fs.sock"
CALL_TIMEOUT_S = 5.0
MAX_FRAME_BYTES = 8 << 20
# The daemon refuses a request over 1 MiB; refused here first, without sending it.
MAX_REQUEST_BYTES = 1 << 20


class SemanticFsError(Exception):
    """The daemon refused a request (its message), or could not be reached."""


def _to_result(r: Dict[str, Any]) -> Dict[str, Any]:
    out = {
        "path": r.get("path"),
        "createdBy": r.get("created_by", r.get("createdBy")),
        "task": r.get("task"),
        "relatedApps": list(r.get("related_apps", r.get("relatedApps")) or []),
        "createdAt": r.get("created_at", r.get("createdAt")),
        "updatedAt": r.get("updated_at", r.get("updatedAt")),
        "ranking": r.get("ranking", "keyword"),
    }
    if isinstance(r.get("score"), (int, float)):
        out["score"] = r["score"]
    return out


class LocalSemanticFs:
    """An in-process stand-in (tags in memory, keyword matching): outside a sandbox it lets
    an app run and be tested without the daemon."""

    kind = "local"

    def __init__(self):
        self._tags: Dict[str, Dict[str, Any]] = {}
        self._app = "local"
        self._lock = threading.Lock()

    def register(self, app: str = "") -> str:
        self._app = app or self._app
        return self._app

    def tag(self, path: str, task: Optional[str] = None, related_apps: Optional[List[str]] = None):
        now = int(time.time() * 1000)
        with self._lock:
            prev = self._tags.get(path, {})
            entry = {
                "path": path,
                "createdBy": prev.get("createdBy", self._app),
                "task": task if task is not None else prev.get("task", ""),
                "relatedApps": list(related_apps if related_apps is not None else prev.get("relatedApps", [])),
                "createdAt": prev.get("createdAt", now),
                "updatedAt": now,
                "ranking": "keyword",
            }
            self._tags[path] = entry
            return dict(entry)

    def query(self, text: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        words = [w for w in str(text).lower().split() if w]
        with self._lock:
            scored = []
            for t in self._tags.values():
                hay = " ".join([t["path"], t["createdBy"], t["task"], *t["relatedApps"]]).lower()
                score = sum(1 for w in words if w in hay)
                if score > 0 or not words:
                    scored.append((score, t))
        scored.sort(key=lambda st: (-st[0], -st[1]["updatedAt"]))
        out = [dict(t, relatedApps=list(t["relatedApps"])) for _, t in scored]
        return out if limit is None else out[:limit]

    def close(self):
        pass


class UnavailableSemanticFs:
    """Fails every call: inside a sandbox an unreachable daemon is an error, never a silent
    empty answer."""

    kind = "unavailable"

    def __init__(self, reason: str):
        self.reason = reason

    def _fail(self, *_args, **_kwargs):
        raise SemanticFsError(f"semantic-fs is unavailable: {self.reason}")

    register = tag = query = _fail

    def close(self):
        pass


class SemanticFsClient:
    """A connection to the daemon. Calls are serialised (one request in flight per client;
    threads share it safely), and a connection that broke is opened again on the next call."""

    kind = "socket"

    def __init__(self, socket_path: str, connect_timeout: float = 2.0):
        self.socket_path = socket_path
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._seq = 0
        self._sock: Optional[socket.socket] = None
        self._closed = False
        self._connect()

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self._connect_timeout)
        try:
            s.connect(self.socket_path)
        except OSError:
            s.close()
            raise
        self._sock = s

    def _drop(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None

    def _recv_exact(self, n: int, deadline: float) -> bytes:
        buf = b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("timed out")
            self._sock.settimeout(left)
            chunk = self._sock.recv(min(n - len(buf), 1 << 16))
            if not chunk:
                raise ConnectionError("semantic-fs connection closed")
            buf += chunk
        return buf

    def _call(self, op: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        with self._lock:
            return self._call_locked(op, fields)

    def _call_locked(self, op: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        if self._closed:
            raise SemanticFsError("semantic-fs client closed")
        self._seq += 1
        rid = f"sfs-{os.getpid()}-{self._seq}"
        body = json.dumps({"id": rid, "op": op, **fields}).encode("utf-8")
        if len(body) > MAX_REQUEST_BYTES:
            raise SemanticFsError(
                f"semantic-fs {op} request is {len(body)} bytes, over the {MAX_REQUEST_BYTES}-byte cap")
        try:
            if self._sock is None:
                self._connect()
            deadline = time.monotonic() + CALL_TIMEOUT_S
            self._sock.settimeout(CALL_TIMEOUT_S)
            self._sock.sendall(struct.pack(">I", len(body)) + body)
            while True:
                (n,) = struct.unpack(">I", self._recv_exact(4, deadline))
                if n > MAX_FRAME_BYTES:
                    raise ConnectionError(f"semantic-fs answer of {n} bytes is over the cap")
                try:
                    msg = json.loads(self._recv_exact(n, deadline))
                except ValueError:
                    continue
                # An answer to an earlier call that timed out is not this one's.
                if isinstance(msg, dict) and msg.get("id") == rid:
                    break
        except socket.timeout:
            self._drop()
            raise SemanticFsError(f"semantic-fs {op} timed out after {int(CALL_TIMEOUT_S * 1000)} ms")
        except OSError as e:
            self._drop()
            raise SemanticFsError(f"semantic-fs connection failed: {e}") from e
        if not msg.get("ok"):
            raise SemanticFsError(msg.get("error") or "semantic-fs request failed")
        return msg

    def register(self, app: str = "") -> Optional[str]:
        """Returns the name the daemon knows this app by (the kernel's word, not @app)."""
        return self._call("register", {"pid": os.getpid(), "app": app}).get("app")

    def register_in_background(self, app: str, on_answer: Callable[[Optional[str], Optional[Exception]], None]):
        """register() on a thread of its own, so that an app need not wait for the daemon to
        start. The client is taken now and handed to the thread: any later call goes after
        it, and after @on_answer(known, error) has run."""
        self._lock.acquire()

        def run():
            try:
                try:
                    known, err = self._call_locked("register", {"pid": os.getpid(), "app": app}).get("app"), None
                except Exception as e:  # noqa: BLE001 - handed to on_answer
                    known, err = None, e
                on_answer(known, err)
            finally:
                self._lock.release()

        try:
            threading.Thread(target=run, name="semantic-fs-register", daemon=True).start()
        except BaseException:
            self._lock.release()
            raise

    def tag(self, path: str, task: Optional[str] = None, related_apps: Optional[List[str]] = None,
            embedding: Optional[List[float]] = None, model: Optional[str] = None):
        fields: Dict[str, Any] = {"path": path}
        if task is not None:
            fields["task"] = task
        if related_apps is not None:
            fields["related_apps"] = list(related_apps)
        if embedding:
            fields["embedding"] = list(embedding)
        if model:
            fields["model"] = model
        res = self._call("tag", fields)
        return _to_result(res["file"]) if isinstance(res.get("file"), dict) else None

    def query(self, text: str, limit: Optional[int] = None, embedding: Optional[List[float]] = None,
              model: Optional[str] = None) -> List[Dict[str, Any]]:
        fields: Dict[str, Any] = {"text": text}
        if limit is not None:
            fields["limit"] = limit
        if embedding:
            fields["embedding"] = list(embedding)
        if model:
            fields["model"] = model
        res = self._call("query", fields)
        return [_to_result(r) for r in res.get("results") or [] if isinstance(r, dict)]

    def close(self):
        with self._lock:
            self._closed = True
            self._drop()


def connect_semantic_fs(socket_path: Optional[str] = None, timeout: float = 2.0) -> SemanticFsClient:
    """Connect to the daemon (OSError when it cannot be reached)."""
    path = socket_path or os.environ.get("BERTH_SEMANTIC_FS_SOCKET") or DEFAULT_SOCKET
    return SemanticFsClient(path, timeout)
