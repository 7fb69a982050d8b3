# SPDX-License-Identifier: Apache-2.0
"""The Python app runtime: ``python3 -m berth_sdk.runtime`` (cwd = the app directory).

Order (SPEC §2.3): manifest → app entry → exports check → on_install hooks → context
bus → semantic-fs → on_agent_ready hooks → RPC servers → the ready line; stdio serving
blocks last."""
import importlib.util
import io
import json
import os
import signal
import sys
import threading
import traceback

from . import rpc
from .app import AppContext, BerthApp
from .context_bus import DEFAULT_SOCKET, LocalContextBus, connect_context_bus
from .manifest import ManifestError, load_manifest
from .semantic_fs import DEFAULT_SOCKET as DEFAULT_SFS_SOCKET
from .semantic_fs import LocalSemanticFs, UnavailableSemanticFs, connect_semantic_fs

log = rpc.log


class StartupError(Exception):
    pass


def exports_mismatch(declared, implemented):
    missing = [n for n in declared if n not in implemented]
    extra = [n for n in implemented if n not in declared]
    if not missing and not extra:
        return None
    parts = []
    if missing:
        parts.append("declared in berth.yml but not implemented: " + ", ".join(missing))
    if extra:
        parts.append("implemented in code but not declared in berth.yml: " + ", ".join(extra))
    return "exports mismatch between berth.yml and app code — " + "; ".join(parts)


def load_entry(entry: str) -> BerthApp:
    sys.path.insert(0, os.path.dirname(entry))
    spec = importlib.util.spec_from_file_location("berth_app_entry", entry)
    if spec is None or spec.loader is None:
        raise StartupError(f"cannot load {entry}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["berth_app_entry"] = module
    spec.loader.exec_module(module)
    app = getattr(module, "app", None)
    if not isinstance(app, BerthApp):
        raise StartupError(f"{entry} must define a module-level `app = define_app(...)`")
    return app


def connect_bus(env):
    path = env.get("BERTH_CONTEXT_BUS_SOCKET") or DEFAULT_SOCKET
    try:
        bus = connect_context_bus(path)
        log(f"context bus connected at {path}")
        return bus
    except OSError as e:
        log(f"context bus unavailable at {path} ({e}); using an in-process bus")
        return LocalContextBus()


def connect_sfs(env, app_name):
    """The daemon's client; inside a sandbox (BERTH_BOOT_ID set) one that fails every call
    when the daemon is absent or unreachable, outside an in-process stand-in."""
    path = env.get("BERTH_SEMANTIC_FS_SOCKET") or DEFAULT_SFS_SOCKET
    in_sandbox = bool(env.get("BERTH_BOOT_ID"))
    if env.get("BERTH_NO_SEMANTIC_FS") == "1":
        return UnavailableSemanticFs("this sandbox runs no semantic-fs daemon") if in_sandbox else LocalSemanticFs()
    try:
        sfs = connect_semantic_fs(path)
    except OSError as e:
        if in_sandbox:
            log(f"semantic-fs unavailable at {path} ({e}); /context tagging and queries will fail")
            return UnavailableSemanticFs(f"cannot reach {path}: {e}")
        return LocalSemanticFs()
    log(f"semantic-fs connected at {path}")

    # Registering only gets the name the daemon knows the app by, for the log: the app does
    # not wait for it (the daemon may still be starting beside it); calls queue behind it.
    def known_as(known, err):
        if err is not None:  # a failed register is logged, the client kept
            log(f"semantic-fs register failed ({err})")
        elif known:
            log(f'semantic-fs knows this app as "{known}"')

    sfs.register_in_background(app_name, known_as)
    return sfs


def _report_check(out, manifest, app, mismatch) -> int:
    from .check_exports import check_exports

    report = check_exports(manifest, app, mismatch, rpc.invoke_export)
    out.write((json.dumps(report) + "\n").encode())
    return 0 if report["ok"] else 1


def main(env=None) -> int:
    env = os.environ if env is None else env
    # The app share is read-only; do not try to write bytecode next to it.
    sys.dont_write_bytecode = True
    # stdout carries only RPC answers: keep a private handle on it, and send everything
    # else written to fd 1 or sys.stdout (print() in an app) to stderr.
    rpc_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    cwd = os.getcwd()
    manifest_path = os.path.abspath(env.get("BERTH_MANIFEST_PATH") or os.path.join(cwd, "berth.yml"))
    entry = os.path.abspath(env.get("BERTH_APP_ENTRY") or os.path.join(cwd, "src", "app.py"))
    cleanup = []
    try:
        log(f"loading manifest from {manifest_path}")
        manifest = load_manifest(manifest_path)
        log(f"loading app entry {entry}")
        app = load_entry(entry)
        mismatch = exports_mismatch([e.name for e in manifest.exports], app.export_names)
        # berth test: the stub invocation instead of serving (check_exports.py), with the
        # app connected as when it serves, but no on_install hook (those run at build).
        checking = env.get("BERTH_CHECK_EXPORTS") == "1"
        if mismatch and checking:
            return _report_check(rpc_out, manifest, app, mismatch)
        if mismatch:
            raise StartupError(mismatch)
        for hook in [] if checking else app._install_hooks:
            rpc._settle(hook())
        bus = connect_bus(env)
        sfs = connect_sfs(env, manifest.name)
        ctx = AppContext(manifest, bus, sfs)
        for hook in app._ready_hooks:
            rpc._settle(hook(ctx))
        if checking:
            return _report_check(rpc_out, manifest, app, None)

        gate = rpc.governance_gate(manifest.name, env)

        def dispatch(req, caller):
            if caller != "host":
                log(f'"{caller}" invoked export "{req.get("export")}"')
            return rpc.invoke_export(app, req, caller, gate)

        socket_path = env.get("BERTH_RPC_SOCKET")
        main_server = None
        if socket_path:
            main_server = rpc.listen_unix(socket_path, 0o600)
            cleanup.append(lambda: os.path.exists(socket_path) and os.unlink(socket_path))
            peers_dir = os.path.join(os.path.dirname(socket_path), "peers")
            try:
                peers = sorted(d for d in os.listdir(peers_dir) if os.path.isdir(os.path.join(peers_dir, d)))
            except OSError:
                peers = []
            for caller in peers:
                path = os.path.join(peers_dir, caller, "rpc.sock")
                try:
                    srv = rpc.listen_unix(path, 0o660)
                except OSError as e:
                    log(f'cannot serve peer "{caller}" at {path}: {e}')
                    continue
                threading.Thread(target=rpc.serve_socket, args=(srv, dispatch, caller), daemon=True).start()
    except Exception as e:
        for fn in cleanup:
            try:
                fn()
            except OSError:
                pass
        message = str(e) if str(e) else type(e).__name__
        print(f"[berth:runtime] fatal error during startup: {message}", file=sys.stderr, flush=True)
        if not isinstance(e, (StartupError, ManifestError)):
            traceback.print_exc(file=sys.stderr)
        return 1

    def stop(signum, frame):
        for fn in cleanup:
            try:
                fn()
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    log(f'"{manifest.name}" ready')
    try:
        if main_server is not None:
            rpc.serve_socket(main_server, dispatch, "host")
        else:
            stdin = os.fdopen(os.dup(0), "rb", buffering=0)
            write_lock = threading.Lock()

            def write(data: bytes) -> None:
                with write_lock:
                    rpc_out.write(data)

            rpc.serve_stream(io.BufferedReader(stdin), write, lambda req: dispatch(req, "host"))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
