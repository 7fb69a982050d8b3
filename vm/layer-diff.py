#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Copy out what a layer adds to a base tree, for overlayfs to lay over it read-only.

  layer-diff.py BASE NEW OUT

Every entry of NEW that BASE lacks, or that differs from BASE's (type, mode, owner, link
target, size or content), is copied into OUT with its mode, owner and extended
attributes, along with the directories above it. A read-only overlay cannot hide a file
of the base, so an entry that NEW removed from BASE is an error: the layer must only add.
"""
import os
import shutil
import stat
import sys


def same_file(a: bytes, b: bytes) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def xattrs(path: bytes) -> dict:
    try:
        return {n: os.getxattr(path, n, follow_symlinks=False)
                for n in os.listxattr(path, follow_symlinks=False)}
    except OSError:
        return {}


def differs(base: bytes, new: bytes) -> bool:
    try:
        b = os.lstat(base)
    except FileNotFoundError:
        return True
    n = os.lstat(new)
    if stat.S_IFMT(b.st_mode) != stat.S_IFMT(n.st_mode):
        return True
    if (b.st_uid, b.st_gid) != (n.st_uid, n.st_gid) or xattrs(base) != xattrs(new):
        return True
    if stat.S_ISLNK(n.st_mode):
        return os.readlink(base) != os.readlink(new)
    if stat.S_IMODE(b.st_mode) != stat.S_IMODE(n.st_mode):
        return True
    if stat.S_ISREG(n.st_mode):
        return b.st_size != n.st_size or not same_file(base, new)
    if stat.S_ISCHR(n.st_mode) or stat.S_ISBLK(n.st_mode):
        return b.st_rdev != n.st_rdev
    return False


def copy_meta(src: bytes, dst: bytes, st) -> None:
    os.lchown(dst, st.st_uid, st.st_gid)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    for name, value in xattrs(src).items():
        os.setxattr(dst, name, value, follow_symlinks=False)


def ensure_dirs(new: bytes, out: bytes, rel: bytes) -> None:
    parts = rel.split(b"/")[:-1]
    for i in range(1, len(parts) + 1):
        d = b"/".join(parts[:i])
        dst = os.path.join(out, d)
        if not os.path.lexists(dst):
            st = os.lstat(os.path.join(new, d))
            os.mkdir(dst)
            copy_meta(os.path.join(new, d), dst, st)


def copy_entry(src: bytes, dst: bytes) -> None:
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(dst)
    elif stat.S_ISREG(st.st_mode):
        shutil.copyfile(src, dst)
    elif stat.S_ISFIFO(st.st_mode):
        os.mkfifo(dst)
    else:
        os.mknod(dst, st.st_mode, st.st_rdev)
    copy_meta(src, dst, st)


def main() -> int:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    base, new, out = (os.fsencode(a) for a in sys.argv[1:])
    os.makedirs(out, exist_ok=False)
    added = 0
    for root, dirs, files in os.walk(new):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, new)
            if not differs(os.path.join(base, rel), path):
                continue
            ensure_dirs(new, out, rel)
            if not os.path.lexists(os.path.join(out, rel)):
                copy_entry(path, os.path.join(out, rel))
                added += 1
    removed = []
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(root, name), base)
            if not os.path.lexists(os.path.join(new, rel)):
                removed.append(os.fsdecode(rel))
    if removed:
        sys.exit("layer-diff: the layer removes %d entries of the base, which a read-only "
                 "overlay cannot do; first: %s" % (len(removed), ", ".join(sorted(removed)[:10])))
    print("layer-diff: %d entries" % added, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
