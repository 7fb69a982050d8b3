#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What sdk/context_bus.proto says, by Debian's protobuf library, for the SDKs' codecs to be
held against: the descriptor meson compiles from the file (src/context-bus/context_bus.desc,
protoc-c --descriptor_set_out) as a field table in the shape of the SDKs' WIRE, and
Envelopes encoded by the library. Prints one JSON object; bytes are hex.

Usage: proto_vectors.py [DESCRIPTOR]   (default: $BERTH_BUILD_DIR/src/context-bus/context_bus.desc)"""
import json
import os
import sys

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory

TYPES = {descriptor.FieldDescriptor.TYPE_STRING: "string", descriptor.FieldDescriptor.TYPE_BYTES: "bytes",
         descriptor.FieldDescriptor.TYPE_BOOL: "bool"}


def load(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return pool


def envelope_class(pool):
    desc = pool.FindMessageTypeByName("berth.contextbus.Envelope")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def wire(pool):
    env = pool.FindMessageTypeByName("berth.contextbus.Envelope")
    out = {"Envelope": {}}
    for f in env.fields:
        if f.containing_oneof is None or f.containing_oneof.name != "kind":
            raise SystemExit(f"Envelope.{f.name} is outside the oneof kind")
        out["Envelope"][f.name] = [f.number, f.message_type.name]
        out[f.message_type.name] = {g.name: [g.number, TYPES.get(g.type, f"type-{g.type}")]
                                    for g in f.message_type.fields}
    return out


# Every kind, empty and full, and lengths that need a second varint byte.
CASES = [
    ("register", {"app": "notes"}), ("register", {"app": ""}), ("register", {"app": "ü-名"}),
    ("publish", {"topic": "notes.added", "payload": b'{"id":"a"}'}),
    ("publish", {"topic": "t", "payload": b""}), ("publish", {"topic": "", "payload": b"null"}),
    ("publish", {"topic": "fs.file_created", "payload": b"x" * 300}),
    ("publish", {"topic": "t" * 200, "payload": b"y" * 70000}),
    ("subscribe", {"topic": "fs.file_created"}), ("subscribe", {"topic": ""}),
    ("unsubscribe", {"topic": "t"}),
    ("event", {"topic": "t", "payload": b'{"n":1}'}), ("event", {"topic": "t"}),
    ("ack", {"ok": True}), ("ack", {"ok": False, "error": "bad"}), ("ack", {"ok": True, "error": "e"}),
    ("ack", {}),
]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ["BERTH_BUILD_DIR"], "src", "context-bus", "context_bus.desc")
    pool = load(path)
    Envelope = envelope_class(pool)
    vectors = []
    for kind, fields in CASES:
        e = Envelope()
        getattr(e, kind).SetInParent()
        for k, v in fields.items():
            setattr(getattr(e, kind), k, v)
        vectors.append({"kind": kind,
                        "fields": {k: ({"hex": v.hex()} if isinstance(v, bytes) else v) for k, v in fields.items()},
                        "hex": e.SerializeToString().hex()})
    # Bytes another encoder may send: unknown fields inside and outside the message.
    inner = bytes.fromhex("0a056e6f746573") + bytes.fromhex("3801") + bytes.fromhex("1d00000000")
    unknown = bytes([0x0A, len(inner)]) + inner + bytes.fromhex("5001")
    check = Envelope.FromString(unknown)
    print(json.dumps({"wire": wire(pool), "vectors": vectors,
                      "unknownFields": {"hex": unknown.hex(), "kind": check.WhichOneof("kind"),
                                        "app": check.register.app}}))


if __name__ == "__main__":
    main()
