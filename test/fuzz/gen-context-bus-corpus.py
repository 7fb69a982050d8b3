#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-context-bus-frames (test/fuzz/corpus/context-bus-frames/).

Layout of an input (see fuzz-context-bus-frames.c): chunks of one control byte (bit 7:
client B, bit 6: leave the clients' frames unread, bits 0-5: length - 1) and their bytes.
The bytes are frames of sdk/context_bus.proto: a 4-byte big-endian length, an Envelope.
"""
import os
import struct
import sys

B = 0x80
HOLD = 0x40


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def env(kind, body):
    return ld({"register": 1, "publish": 2, "subscribe": 3, "unsubscribe": 4,
               "event": 5, "ack": 6}[kind], body)


def frame(data, length=None):
    return struct.pack(">I", len(data) if length is None else length) + data


def register(app):
    return frame(env("register", ld(1, app.encode())))


def subscribe(topic):
    return frame(env("subscribe", ld(1, topic.encode())))


def unsubscribe(topic):
    return frame(env("unsubscribe", ld(1, topic.encode())))


def publish(topic, payload):
    return frame(env("publish", ld(1, topic.encode()) + ld(2, payload)))


def chunks(data, ctl=0, size=64):
    out = bytearray()
    for i in range(0, len(data), size):
        part = data[i:i + size]
        out.append(ctl | (len(part) - 1))
        out += part
    return bytes(out)


SEEDS = {
    "register": chunks(register("notes")),
    "register-spoof": chunks(register("feed") + register("")),
    "subscribe-publish": chunks(subscribe("t"), B) + chunks(publish("t", b'{"a":1}')),
    "no-echo": chunks(subscribe("t") + publish("t", b"1")),
    "unsubscribe": chunks(subscribe("t"), B) + chunks(unsubscribe("t"), B) + chunks(publish("t", b"2")),
    "split-byte-at-a-time": chunks(subscribe("fs.file_created"), B, 1)
    + chunks(publish("fs.file_created", b'{"path":"x"}'), 0, 1),
    "interleaved": chunks(subscribe("a"), B, 3) + chunks(subscribe("a"), 0, 5)
    + chunks(publish("a", b"x") + publish("a", b"y"), B, 7),
    "empty-frame": chunks(frame(b"") + frame(b"") + register("x")),
    "oversized": chunks(struct.pack(">I", 8 * 1024 * 1024 + 1) + b"\x00" * 200 + publish("t", b"z")),
    "huge-length": chunks(struct.pack(">I", 0xFFFFFFFF) + b"junk"),
    "undecodable": chunks(frame(b"\x0a\x05x") + frame(b"\xff\xff\xff") + register("a")),
    "unknown-fields": chunks(frame(env("register", ld(1, b"a") + b"\x38\x01\x1d\x00\x00\x00\x00") + b"\x50\x01")),
    "client-event-ack": chunks(frame(env("event", ld(1, b"t"))) + frame(env("ack", b"\x08\x01"))),
    "no-kind": chunks(frame(b"\x50\x01")),
    "flood-unread": chunks(subscribe("f"), B) + b"".join(
        chunks(publish("f", b"%d" % i), HOLD) for i in range(300)),
    "long-topic": chunks(subscribe("t" * 1100) + publish("t" * 1100, b"")),
    "many-topics": b"".join(chunks(subscribe("t%d" % i), B) for i in range(40))
    + b"".join(chunks(publish("t%d" % i, b"p")) for i in range(40)),
    "disconnect-mid-frame": chunks(subscribe("t"), B) + chunks(struct.pack(">I", 100) + b"\x12"),
    "utf8-bad-topic": chunks(frame(env("subscribe", ld(1, b"\xff\xfe"))), B)
    + chunks(frame(env("publish", ld(1, b"\xff\xfe") + ld(2, b"x")))),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "context-bus-frames")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
