# SPDX-License-Identifier: Apache-2.0
"""write_file_durable(): a write that is on the disk when it returns.

The data goes to a new temporary file beside the target, which is fsynced and renamed over
the target, and then the directory is fsynced, so after a crash the target is either its
old self or the whole new content, never a part of it. A plain ``open(path, "w").write()``
stays in the guest's page cache until the kernel writes it back (ext4 commits every 5 s),
so a VM killed before then loses it, acknowledged or not.
"""
import errno
import itertools
import os
import secrets
import stat

__all__ = ["write_file_durable"]

_serial = itertools.count(1)


def _temp_path(target: str) -> str:
    # At most 32 characters of the name (128 bytes of UTF-8), so the result fits NAME_MAX.
    name = os.path.basename(target)[:32]
    return os.path.join(os.path.dirname(target),
                        f".{name}.{os.getpid()}.{next(_serial)}.{secrets.token_hex(6)}.tmp")


def _sync_directory(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_parents(directory: str) -> None:
    """mkdir -p, and the entries of the directories it made durable (the last is the caller's)."""
    directory = os.path.abspath(directory)
    missing = []
    d = directory
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    os.makedirs(directory, exist_ok=True)
    if not missing:
        return
    top = os.path.dirname(missing[-1])
    d = os.path.dirname(directory)
    while True:
        _sync_directory(d)
        if d == top or os.path.dirname(d) == d:
            break
        d = os.path.dirname(d)


def _retarget(err: OSError, path: str) -> OSError:
    """The same error about the caller's path (the temporary name is ours)."""
    return OSError(err.errno, err.strerror, path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_in_place(path: str, data: bytes) -> None:
    """A device or a FIFO cannot be replaced by a rename: written in place, as open() would."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        _write_all(fd, data)
        try:
            os.fsync(fd)
        except OSError as e:
            if e.errno != errno.EINVAL:  # a device without a cache (/dev/null)
                raise
    finally:
        os.close(fd)


def write_file_durable(path, data, *, mode: int = 0o600, mkdir: bool = False) -> None:
    """Write ``data`` (``str`` as UTF-8, or bytes) to ``path`` so that it is on the disk
    when this returns.

    A temporary file in the same directory (created with ``O_EXCL``, ``mode`` less the
    umask) is written, fsynced and renamed over ``path`` (``os.replace``), and the
    directory is fsynced. On failure the temporary file is removed, ``path`` is left as it
    was, and the ``OSError`` names ``path``. A symbolic link at ``path`` is written
    through, as ``open()`` would. ``mkdir=True`` creates missing parent directories
    first, durably.
    """
    path = os.fsdecode(os.fspath(path))
    if not path:
        raise ValueError("write_file_durable: path must not be empty")
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
    else:
        raise TypeError("write_file_durable: data must be str or bytes-like")
    if mkdir:
        _make_parents(os.path.dirname(path) or ".")
    if path.endswith("/"):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)

    # Write through a symbolic link, as open() does; a missing target is created.
    target = os.path.realpath(path) if os.path.exists(path) else path
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_in_place(path, data)
        return

    for attempt in itertools.count():
        temp = _temp_path(target)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            if attempt >= 8:
                raise
        except OSError as e:
            raise _retarget(e, path) from None
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException as e:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _retarget(e, path) from None
        raise
    _sync_directory(os.path.dirname(target))
