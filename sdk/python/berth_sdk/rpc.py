# SPDX-License-Identifier: Apache-2.0
"""The line-JSON RPC protocol (SPEC §2.5): one JSON object per line.
Request {"id","export","input"} → {"id","result"} or {"id","error":"<string>"}.
Lines on one connection are handled one after another; each socket connection has its
own thread."""
import asyncio
import inspect
import json
import os
import socket
import stat
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional

from pydantic import ValidationError

from . import _pydantic

MAX_LINE_BYTES = 32 << 20


def log(msg: str) -> None:
    print(f"[berth:runtime] {msg}", file=sys.stderr, flush=True)


def _settle(value):
    """Run a coroutine a handler or hook returned."""
    if inspect.iscoroutine(value):
        return asyncio.run(value)
    return value


def _jsonable(value):
    if _pydantic.is_model(value) and not isinstance(value, type):
        return _pydantic.to_jsonable(value)
    return value


def invoke_export(app, request: Dict[str, Any], caller: str = "host",
                  gate: Optional[Callable[[str, Any, str], Optional[str]]] = None) -> Dict[str, Any]:
    """Lookup → governance gate → input model → handler → output model. Never raises."""
    rid = request.get("id")
    name = request.get("export")
    definition = app.get_export(name) if isinstance(name, str) else None
    if definition is None:
        return {"id": rid, "error": f'no such export "{name}"'}
    try:
        raw = request.get("input")
        if gate is not None:
            denial = gate(name, raw, caller)
            if denial:
                return {"id": rid, "error": denial}
        value = _pydantic.validate(definition.input_model, raw) if definition.input_model is not None else raw
        result = _settle(definition.handler(value) if definition.takes_input else definition.handler())
        if definition.output_model is not None:
            result = _pydantic.validate(definition.output_model, _jsonable(result))
        return {"id": rid, "result": _jsonable(result)}
    except ValidationError as e:
        return {"id": rid, "error": str(e)}
    except Exception as e:  # the handler's failure is the caller's answer
        return {"id": rid, "error": str(e)}


def response_line(resp: Dict[str, Any]) -> bytes:
    try:
        text = json.dumps(resp, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        text = json.dumps({"id": resp.get("id"), "error": f"result is not JSON-serialisable: {e}"},
                          ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def handle_line(raw: bytes, dispatch: Callable[[Dict[str, Any]], Dict[str, Any]]) -> Optional[bytes]:
    """One request line → one response line, or None when the line gets no answer."""
    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if not line.strip():
        return None
    try:
        req = json.loads(line)
    except ValueError:
        log(f"ignoring non-JSON RPC line: {line}")
        return None
    if not isinstance(req, dict):
        log(f"ignoring RPC line that is not a request object: {line}")
        return None
    return response_line(dispatch(req))


def serve_stream(rfile, write: Callable[[bytes], None], dispatch) -> None:
    """Serve request lines from a binary file object until EOF."""
    while True:
        raw = rfile.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            log(f"RPC request line longer than {MAX_LINE_BYTES} bytes; closing the connection")
            return
        out = handle_line(raw, dispatch)
        if out is not None:
            write(out)


def listen_unix(path: str, mode: int) -> socket.socket:
    """Bind a unix socket: a stale socket file is removed first, the mode set after bind."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, mode)
    srv.listen(64)
    return srv


def serve_socket(srv: socket.socket, dispatch_for_caller, caller: str) -> None:
    """Accept connections forever, one thread each."""
    def conn_thread(conn: socket.socket) -> None:
        lock = threading.Lock()

        def write(data: bytes) -> None:
            with lock:
                conn.sendall(data)

        try:
            with conn, conn.makefile("rb") as rfile:
                serve_stream(rfile, write, lambda req: dispatch_for_caller(req, caller))
        except OSError:
            pass

    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        threading.Thread(target=conn_thread, args=(conn,), daemon=True).start()


def governance_gate(app_name: str, env=os.environ):
    """When BERTH_GOVERNANCE_APP names a governor, put every call not made by the governor
    to its evaluate_action export; unreachable or slow means denied."""
    governor = env.get("BERTH_GOVERNANCE_APP")
    if not governor or env.get("BERTH_GOVERNANCE_EXEMPT") == "1" or governor == app_name:
        return None
    root = env.get("BERTH_GOVERNANCE_SOCKET_ROOT") or "/run/berth"
    path = os.path.join(root, governor, "peers", app_name, "rpc.sock")
    try:
        timeout = float(env.get("BERTH_GOVERNANCE_TIMEOUT_MS", "5000")) / 1000.0
    except ValueError:
        timeout = 5.0

    def gate(export: str, raw_input: Any, caller: str) -> Optional[str]:
        if caller == governor:
            return None
        rid = f"gate-{os.getpid()}-{int(time.time() * 1000)}"
        req = {"id": rid, "export": "evaluate_action",
               "input": {"app": app_name, "export": export, "input": raw_input, "caller": caller}}
        try:
            answer = _ask_once(path, req, timeout)
        except Exception as e:
            return f"governance denied {export}: governance unavailable ({e})"
        if isinstance(answer.get("error"), str):
            return f"governance denied {export}: governance unavailable ({answer['error']})"
        result = answer.get("result")
        if isinstance(result, dict) and result.get("allowed") is True:
            return None
        reason = result.get("reason") if isinstance(result, dict) and isinstance(result.get("reason"), str) else "not allowed"
        return f"governance denied {export}: {reason}"

    return gate


def _ask_once(path: str, req: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((json.dumps(req) + "\n").encode())
        deadline = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before an answer")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and msg.get("id") == req["id"]:
                    return msg
        raise TimeoutError(f"timed out after {int(timeout * 1000)} ms")
