#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pull the uncompressed ELF vmlinux out of a zstd-compressed bzImage.

Usage: extract-vmlinux.py BZIMAGE OUT
Tries each zstd frame magic in the image until one decompresses to an ELF.
"""
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def main():
    data = open(sys.argv[1], "rb").read()
    pos = data.find(ZSTD_MAGIC)
    while pos >= 0:
        p = subprocess.run(["zstd", "-dc"], input=data[pos:], capture_output=True)
        if p.stdout[:4] == b"\x7fELF":
            with open(sys.argv[2], "wb") as f:
                f.write(p.stdout)
            return
        pos = data.find(ZSTD_MAGIC, pos + 1)
    sys.exit(f"{sys.argv[1]}: no zstd-compressed ELF inside")


if __name__ == "__main__":
    main()
