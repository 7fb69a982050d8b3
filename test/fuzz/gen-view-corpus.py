#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpora of fuzz-view-checks and fuzz-view-server
(test/fuzz/corpus/view-checks/, test/fuzz/corpus/view-server/): headers, messages and
whole connections to the terminal's web view, right and wrong (docs/terminal.md)."""
import base64
import os
import struct
import sys

LOGIN = b"berth:fuzzfuzzfuzzfuzzfuzz0123456789"
TOKEN = base64.b64encode(LOGIN)
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="


def fragments(*parts):
    out = b""
    for final, body in parts:
        out += bytes([1 if final else 0]) + struct.pack("<H", len(body)) + body
    return out


def ws_frame(payload, opcode=2, fin=True, mask=b"\x01\x02\x03\x04"):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def request(path=b"/", method=b"GET", headers=(), login=True):
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1:7681"]
    if login:
        lines.append(b"Authorization: Basic " + TOKEN)
    lines += list(headers)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def upgrade(login=True, origin=None, extra=()):
    h = [b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Key: " + KEY,
         b"Sec-WebSocket-Version: 13", b"Sec-WebSocket-Protocol: berth-terminal"]
    if origin:
        h.append(b"Origin: " + origin)
    return request(b"/ws", headers=h + list(extra), login=login)


CHECKS = {
    "auth-right": b"\0Basic " + TOKEN,
    "auth-blanks": b"\0  bAsIc\t " + TOKEN + b" \t",
    "auth-wrong": b"\0Basic " + base64.b64encode(b"berth:nope"),
    "auth-unpadded": b"\0Basic " + TOKEN.rstrip(b"="),
    "auth-bearer": b"\0Bearer " + TOKEN,
    "auth-long": b"\0Basic " + b"A" * 2000,
    "origin-same": b"\1http://127.0.0.1:7681\n127.0.0.1:7681",
    "origin-other": b"\1http://evil.example\n127.0.0.1:7681",
    "origin-null": b"\1null\n127.0.0.1:7681",
    "origin-no-host": b"\1http://127.0.0.1:7681",
    "msg-input": b"\2" + fragments((True, b"0ls -l\r")),
    "msg-resize": b"\2" + fragments((True, b"1120,40")),
    "msg-fragments": b"\2" + fragments((False, b"0ec"), (False, b""), (True, b"ho hi\r"), (True, b"180,24")),
    "msg-bad": b"\2" + fragments((True, b"1120,0"), (True, b"9"), (True, b""), (True, b"11001,1")),
    "msg-too-big": b"\2" + fragments(*[(False, b"0" * 65535)] * 2, (True, b"x")),
}

SERVER = {
    "page": request(),
    "page-no-login": request(login=False),
    "page-wrong-login": request(headers=[b"Authorization: Basic " + base64.b64encode(b"berth:nope")], login=False),
    "assets": request(b"/xterm.js") + request(b"/terminal.js") + request(b"/nope"),
    "head": request(method=b"HEAD"),
    "post": request(method=b"POST", headers=[b"Content-Length: 5"]) + b"hello",
    "traversal": request(b"/../../etc/passwd") + request(b"/%2e%2e/etc/passwd"),
    "keepalive": request() + request(b"/terminal.css") + request(login=False),
    "ws": upgrade() + ws_frame(b"1120,40") + ws_frame(b"0echo hi\r") + ws_frame(b"", opcode=8),
    "ws-no-login": upgrade(login=False) + ws_frame(b"0echo hi\r"),
    "ws-other-origin": upgrade(origin=b"http://evil.example"),
    "ws-same-origin": upgrade(origin=b"http://127.0.0.1:7681") + ws_frame(b"0x"),
    "ws-fragments": upgrade() + ws_frame(b"0ab", fin=False) + ws_frame(b"cd", opcode=0, fin=False)
    + ws_frame(b"ping", opcode=9) + ws_frame(b"ef", opcode=0) + ws_frame(b"1200,50", opcode=1),
    "ws-bad-message": upgrade() + ws_frame(b"7what"),
    "ws-too-big": upgrade() + ws_frame(b"0" * 70000),
    "ws-unmasked": upgrade() + b"\x82\x03" + b"0ab",
    "ws-bad-version": request(b"/ws", headers=[b"Upgrade: websocket", b"Connection: Upgrade",
                                               b"Sec-WebSocket-Key: " + KEY, b"Sec-WebSocket-Version: 8"]),
    "garbage": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\0" * 64,
    "huge-header": b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n",
    "http10": b"GET / HTTP/1.0\r\nAuthorization: Basic " + TOKEN + b"\r\n\r\n",
}


def write(dirname, seeds):
    os.makedirs(dirname, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(dirname, name), "wb") as f:
            f.write(data)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    write(os.path.join(base, "view-checks"), CHECKS)
    write(os.path.join(base, "view-server"), SERVER)


if __name__ == "__main__":
    main()
