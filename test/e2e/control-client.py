#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Talk to a VM's control socket the way a host client does: send each argument as one
line, then print every line received until the socket goes quiet for --quiet seconds
(default 2) or closes. Prints 'CLOSED' when the guest closed the connection."""
import socket
import sys
import time


def main():
    path, lines = sys.argv[1], sys.argv[2:]
    quiet = 2.0
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(0.2)
    for line in lines:
        if line.startswith("@repeat:"):
            _, count, ch = line.split(":", 2)
            line = ch * int(count)
        s.sendall(line.encode() + b"\n")
    buf, last, closed = b"", time.time(), False
    while time.time() - last < quiet:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not d:
            closed = True
            break
        buf += d
        last = time.time()
    sys.stdout.write(buf.decode(errors="replace"))
    if closed:
        print("CLOSED")


if __name__ == "__main__":
    main()
