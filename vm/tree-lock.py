#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The record of an image's inputs: one line per file of the tree that is packed.

  tree-lock.py write TREE [--source PATH]... [--meta KEY=VALUE]...   record to stdout
  tree-lock.py diff LOCKED BUILT [--max N]                           what differs

A record line is `PATH TYPE MODE UID:GID` and then, by type:
  f SIZE SHA256 [=FIRST]   a regular file; =FIRST when it is a hard link of FIRST
  l TARGET                 a symbolic link (no mode: a link's mode means nothing)
  d                        a directory (its size depends on the host's filesystem)
  c / b MAJOR,MINOR        a device node; p and s for a FIFO and a socket
followed by ` xattr:NAME=HEX` for each extended attribute, in name order. Paths are
relative to the tree with a leading /; bytes outside ! to ~ and the backslash are
written \\xNN, so a line splits on spaces and `LC_ALL=C sort` keeps the order.
Lines starting with `#` come first: the format, the paths this source tree supplies
(`# source:`), and what the tree was made by (`# KEY: VALUE`, from --meta). The whole
record is in `LC_ALL=C sort` order.

diff prints one line per differing path (+ added, - removed, ~ changed, with what
changed), at most --max of them and a count, and a line per differing `# KEY:`.
Its exit status is the sum of what differs:
  1  paths under a `# source:` path, in content (size, sha256) or presence
  2  paths from Debian's packages (the stage), or a source path's type, mode or owner
  4  the `# recipe:` line (the scripts and lists the image is made by)
"""
import hashlib
import os
import stat
import sys

FORMAT = "# berth tree record 1: path type mode uid:gid size sha256 | -> target | major,minor"


def esc(b: bytes) -> str:
    out = []
    for c in b:
        if c <= 0x20 or c >= 0x7F or c == 0x5C:
            out.append("\\x%02x" % c)
        else:
            out.append(chr(c))
    return "".join(out)


def sha256_file(path: bytes) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def entry(root: bytes, rel: bytes, seen: dict) -> str:
    full = root + rel if rel != b"/" else root
    st = os.lstat(full)
    m = st.st_mode
    owner = "%d:%d" % (st.st_uid, st.st_gid)
    mode = "%04o" % stat.S_IMODE(m)
    if stat.S_ISREG(m):
        fields = ["f", mode, owner, str(st.st_size), sha256_file(full)]
        if st.st_nlink > 1:
            key = (st.st_dev, st.st_ino)
            if key in seen:
                fields.append("=" + seen[key])
            else:
                seen[key] = esc(rel)
    elif stat.S_ISLNK(m):
        fields = ["l", owner, "->", esc(os.readlink(full))]
    elif stat.S_ISDIR(m):
        fields = ["d", mode, owner]
    elif stat.S_ISCHR(m) or stat.S_ISBLK(m):
        fields = ["c" if stat.S_ISCHR(m) else "b", mode, owner,
                  "%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))]
    elif stat.S_ISFIFO(m):
        fields = ["p", mode, owner]
    elif stat.S_ISSOCK(m):
        fields = ["s", mode, owner]
    else:
        raise SystemExit(f"tree-lock: {full!r}: unknown file type")
    try:
        names = sorted(os.listxattr(full, follow_symlinks=False))
    except OSError:
        names = []
    for n in names:
        v = os.getxattr(full, n, follow_symlinks=False)
        fields.append("xattr:%s=%s" % (esc(n.encode()), v.hex()))
    return esc(rel) + " " + " ".join(fields)


def walk(root: bytes):
    """Every path under root, relative with a leading /, in byte order (LC_ALL=C)."""
    paths = [b"/"]
    stack = [b""]
    while stack:
        d = stack.pop()
        with os.scandir(root + d if d else root) as it:
            for e in it:
                rel = d + b"/" + e.name
                paths.append(rel)
                if e.is_dir(follow_symlinks=False):
                    stack.append(rel)
    # In the order of the escaped paths, which is the order `LC_ALL=C sort` gives the
    # record's lines: the space after a path sorts below every byte a path is written with.
    return sorted(paths, key=lambda p: esc(p).encode())


def resolve(root: bytes, path: str) -> str:
    """PATH as it is found in the tree: through the tree's own symbolic links (/sbin is
    usr/sbin in Debian's merged /usr), so that a --source path names the record's entry."""
    parts = [p for p in os.fsencode(path).split(b"/") if p]
    done, hops = [], 0
    while parts:
        name = parts.pop(0)
        full = root + b"/" + b"/".join(done + [name])
        if os.path.islink(full) and hops < 40:
            hops += 1
            target = os.readlink(full)
            parts = [p for p in target.split(b"/") if p] + parts
            if target.startswith(b"/"):
                done = []
        elif name == b"..":
            done = done[:-1]
        elif name != b".":
            done.append(name)
    return esc(b"/" + b"/".join(done))


def write(argv):
    root, source, meta = None, [], []
    it = iter(argv)
    for a in it:
        if a == "--source":
            source.append(next(it))
        elif a == "--meta":
            meta.append(next(it))
        elif root is None:
            root = a
        else:
            raise SystemExit(__doc__)
    if root is None:
        raise SystemExit(__doc__)
    rootb = os.fsencode(root.rstrip("/") or "/")
    head = [FORMAT]
    if source:
        head.append("# source: " + " ".join(sorted(resolve(rootb, p) for p in source)))
    for kv in meta:
        k, _, v = kv.partition("=")
        head.append(f"# {k}: {v}")
    out = sys.stdout
    out.write("".join(h + "\n" for h in sorted(head, key=str.encode)))
    seen = {}
    for rel in walk(rootb):
        out.write(entry(rootb, rel, seen) + "\n")


def load(path):
    head, entries, source = {}, {}, []
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# source: "):
                source = line[len("# source: "):].split()
            elif line.startswith("# berth tree record"):
                continue
            elif line.startswith("# "):
                k, _, v = line[2:].partition(": ")
                head[k] = v
            elif line:
                p, _, rest = line.partition(" ")
                entries[p] = rest
    return head, entries, source


def what_changed(a: str, b: str) -> str:
    fa, fb = a.split(), b.split()
    if fa[0] != fb[0]:
        return f"type {fa[0]} -> {fb[0]}"
    names = {"f": ["mode", "owner", "size", "sha256"], "l": ["owner", "->", "target"],
             "c": ["mode", "owner", "device"], "b": ["mode", "owner", "device"]}.get(
        fa[0], ["mode", "owner"])
    parts = []
    for i, n in enumerate(names, 1):
        x = fa[i] if i < len(fa) else ""
        y = fb[i] if i < len(fb) else ""
        if x != y and n != "->":
            parts.append(f"{n} {x[:16]} -> {y[:16]}" if n == "sha256" else f"{n} {x} -> {y}")
    xa, xb = fa[len(names) + 1:], fb[len(names) + 1:]
    if xa != xb:
        parts.append("hard link or xattrs: %s -> %s" % (" ".join(xa) or "none", " ".join(xb) or "none"))
    return ", ".join(parts)


def content_only(a: str, b: str) -> bool:
    """True when only a regular file's size or sha256 changed."""
    fa, fb = a.split(), b.split()
    return fa[0] == fb[0] == "f" and fa[1:3] == fb[1:3] and fa[5:] == fb[5:]


def diff(argv):
    maxn = 40
    args = []
    it = iter(argv)
    for a in it:
        if a == "--max":
            maxn = int(next(it))
        else:
            args.append(a)
    if len(args) != 2:
        raise SystemExit(__doc__)
    ha, ea, sa = load(args[0])
    hb, eb, sb = load(args[1])
    source = set(sa) | set(sb)

    def ours(p):
        while p:
            if p in source:
                return True
            p = p.rpartition("/")[0]
        return False

    lines, status = [], 0
    for k in sorted(set(ha) | set(hb)):
        if ha.get(k) != hb.get(k):
            lines.append(f"# {k}: {ha.get(k, '(none)')} -> {hb.get(k, '(none)')}")
            if k == "recipe":
                status |= 4
    n_stage = n_source = 0
    for p in sorted(set(ea) | set(eb)):
        a, b = ea.get(p), eb.get(p)
        if a == b:
            continue
        src = ours(p)
        if a is None:
            line, benign = f"+ {p} {b}", src
        elif b is None:
            line, benign = f"- {p}", src
        else:
            line, benign = f"~ {p} {what_changed(a, b)}", src and content_only(a, b)
        if src:
            n_source += 1
            line += "  (from this source tree)"
        else:
            n_stage += 1
        lines.append(line)
        status |= 1 if benign else 2
    if lines:
        if n_stage + n_source:
            print(f"{n_stage + n_source} paths differ from {args[0]}: {n_stage} from Debian's "
                  f"packages, {n_source} from this source tree")
        else:
            print(f"no path differs from {args[0]}, only what the tree was made by:")
        for line in lines[:maxn]:
            print("  " + line)
        if len(lines) > maxn:
            print(f"  ... and {len(lines) - maxn} more lines (diff the two records for all)")
    return status


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cmd, argv = sys.argv[1], sys.argv[2:]
    if cmd == "write":
        write(argv)
        return 0
    if cmd == "diff":
        return diff(argv)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
