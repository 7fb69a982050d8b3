# SPDX-License-Identifier: Apache-2.0
"""The warm Python runtime of a restored VM (src/berth-init/zygote.h, docs/warm-start.md).

berth-init starts this in the template boot, as root, with its end of a socketpair as fd 3.
It imports what every Python app's start imports (the SDK's runtime, pydantic), says
"ready" and waits. A request is one byte and four descriptors, nothing of an app: the
start socket, stdout, stderr and agent-init's report pipe. For each, the zygote forks
twice, so that the new process is berth-init's child, and goes back to waiting. In the
template berth-init also asks for a spare: a process forked the same way that waits on a
channel of its own for the request, so that a restored VM's first Python app skips the
forks.

The new process tells berth-init its pid on the start socket and reads its start from it:
the app's directory, its cgroup, and the environment berth-init built for agent-init. It
joins the cgroup, takes the environment, and calls agent-init's own confinement in place
(libberth-confine.so): capabilities, uid, no_new_privs, Landlock, seccomp, the fds an exec
would close. Only then does it run `berth_sdk.runtime` as `python3 -m` would, and with it
the app. Any failure before that exits the process with nothing of the app run."""
import ctypes
import fcntl
import os
import random
import signal
import socket
import sys
import time

CONFINE_LIBRARY = "/usr/libexec/berth/libberth-confine.so"
CHANNEL_FD = 3
START_MAX = 4 * 1024 * 1024  # bytes of a start: the directory, the cgroup, the environment


def fail(message, code=126):
    os.write(2, f"[berth-init] warm Python runtime: {message}\n".encode())
    os._exit(code)


def preload():
    # What `python3 -m berth_sdk.runtime` imports before it reaches the app, and the models
    # library the SDK's apps use. Read-only code from the root image; nothing is run.
    import berth_sdk.runtime  # noqa: F401
    import pydantic  # noqa: F401
    import runpy  # noqa: F401

    # The runtime module itself runs as __main__, as under `-m`: only what it imports stays.
    del sys.modules["berth_sdk.runtime"]
    del sys.modules["berth_sdk"].runtime
    confine = ctypes.CDLL(CONFINE_LIBRARY)
    # What any app's confinement needs (its seccomp filters), made once here; should it
    # fail, each confinement makes them itself.
    confine.berth_confine_preload()
    return confine


def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def read_start(sock):
    chunks, size = [], 0
    while True:
        b = sock.recv(65536)
        if not b:
            break
        size += len(b)
        if size > START_MAX:
            fail("the start is larger than %d bytes" % START_MAX)
        chunks.append(b)
    fields = b"".join(chunks).split(b"\0")
    if len(fields) < 4 or fields[-1] != b"":
        fail("berth-init sent no start")
    return fields[0].decode(), fields[1].decode(), fields[2] == b"1", fields[3:-1]


def wait_reparented():
    """berth-init's child, once the intermediate parent is gone."""
    for _ in range(5000):
        if os.getppid() == 1:
            return
        time.sleep(0.001)
    fail("not reparented to berth-init")


def receive_request(channel):
    """The next request on @channel as (kind, descriptors), or None at its end: b"f" with
    four (a process for an app), b"s" with one (the spare's channel). Others are dropped."""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(channel, 16, 4)
        except InterruptedError:
            continue
        if not msg:
            return None
        if (msg, len(fds)) in ((b"f", 4), (b"s", 1)):
            return msg, fds
        for fd in fds:
            os.close(fd)


def wait_as_spare(fd):
    """In the spare, forked in the template: wait on berth-init's channel @fd for the first
    Python app of a restored VM, as a fork would have been asked. Returns its descriptors."""
    wait_reparented()
    channel = socket.socket(fileno=fd)
    channel.send(b"ready")
    while True:
        request = receive_request(channel)
        if request is None:
            os._exit(0)  # berth-init has no Python app for it
        kind, fds = request
        if kind == b"f":
            break
        for fd in fds:
            os.close(fd)
    channel.close()
    # Forked in the template: every clone holds the state random reseeded at that fork.
    random.seed()
    return fds


def become_app(confine, fds):
    """In the forked process. Returns only once the process is the app's, confined."""
    start, out, err, report = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    # berth-init's child before it knows the pid: the intermediate parent is gone.
    wait_reparented()
    sock = socket.socket(fileno=start)
    sock.sendall(b"pid %d\n" % os.getpid())
    directory, cgroup, strict_cgroup, env = read_start(sock)
    sock.close()

    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.dup2(report, 3)  # BERTH_REPORT_FD, closed by the confinement
    for fd in (out, err, report):
        os.close(fd)
    # Nothing else is open: a descriptor a Python object still owned would be closed by the
    # confinement and, collected later, close whatever of the app's reused its number.
    for fd in (int(n) for n in os.listdir("/proc/self/fd")):
        if fd > 3 and is_open(fd):
            fail(f"descriptor {fd} is still open before the confinement")
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write("0")
        except OSError as e:
            if strict_cgroup:
                fail(f"cannot join {cgroup}: {e.strerror}")
    os.setsid()
    os.chdir(directory)
    os.environ.clear()
    for entry in env:
        name, sep, value = entry.partition(b"=")
        if not sep or not name:
            fail("a malformed variable in the start")
        os.environb[name] = value
    # agent-init's code: it exits the process rather than return unconfined.
    if confine.berth_confine_in_place() != 0:
        os._exit(1)


def serve(confine):
    """The zygote's loop. Returns only in a forked process, once it is the app's.

    b"f" and four descriptors: a process for an app. b"s" and one: the spare, a process
    made now that waits on that channel for its b"f" (berth-init asks for it in the
    template)."""
    channel = socket.socket(fileno=CHANNEL_FD)
    channel.send(b"ready")
    while True:
        request = receive_request(channel)
        if request is None:
            os._exit(0)  # berth-init closed its end
        kind, fds = request
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            if os.fork() != 0:
                os._exit(0)
            channel.detach()
            os.close(CHANNEL_FD)  # the app never reaches berth-init's zygote
            if kind == b"s":
                fds = wait_as_spare(fds[0])
            become_app(confine, fds)
            return
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)


def main():
    confine = preload()
    serve(confine)
    # The app's process, confined: what `python3 -m berth_sdk.runtime` does from here.
    sys.path[0] = os.getcwd()
    import runpy

    runpy.run_module("berth_sdk.runtime", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
