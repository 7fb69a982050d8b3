# SPDX-License-Identifier: Apache-2.0
"""The guest's end of berth-vmm's channel (docs/channel-protocol.md), for tests that
play the guest on the socket berth-vmm connects to with --channel-connect."""
import json
import struct
import threading

HELLO, OPEN, OPEN_OK, OPEN_FAIL, DATA, CLOSE, WINDOW, RESET = range(1, 9)
EGRESS = 1026
CONTROL = 1024


def header(kind, epoch, stream, length):
    return struct.pack("<HBBIII", 0x4D42, kind, 0, epoch, stream, length)


class Stream:
    def __init__(self):
        self.data = b""
        self.closed = False  # the host sent CLOSE
        self.reset = False
        self.opened = None  # True (OPEN_OK), or the OPEN_FAIL error
        self.credit = 0


class Guest:
    """The guest end of the mux (docs/channel-protocol.md) on the socket berth-vmm
    connects to. A reader thread keeps per-stream state. Host-opened streams (the
    control stream berth-vmm opens for boot events) are refused, unless @accept names
    their port: then they are taken, and on_open(guest, sid, port) is called."""

    def __init__(self, listener, accept=(), on_open=None):
        self.accept, self.on_open = set(accept), on_open
        listener.settimeout(60)
        self.s, _ = listener.accept()
        self.lock = threading.Condition()
        self.streams = {}
        self.next_id = 2
        self.epoch = None
        self.window = 0
        self.buf = b""
        threading.Thread(target=self.reader, daemon=True).start()
        with self.lock:
            if not self.lock.wait_for(lambda: self.epoch is not None, timeout=30):
                raise TimeoutError("no HELLO from berth-vmm")

    def send(self, b):
        self.s.sendall(b)

    def reader(self):
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    break
                self.buf += d
                while len(self.buf) >= 16:
                    magic, kind, _, epoch, sid, length = struct.unpack("<HBBIII", self.buf[:16])
                    if len(self.buf) < 16 + length:
                        break
                    payload, self.buf = self.buf[16:16 + length], self.buf[16 + length:]
                    self.frame(kind, epoch, sid, payload)
        except OSError:
            pass
        with self.lock:
            for st in self.streams.values():
                st.reset = True
            self.lock.notify_all()

    def frame(self, kind, epoch, sid, payload):
        with self.lock:
            if kind == HELLO and payload[10] == 1 and self.epoch is None:
                self.epoch = epoch
                self.window = struct.unpack("<I", payload[16:20])[0]
                body = b"BERTHMUX" + struct.pack("<HBBIII", 1, 2, 0, 65536, 128 * 1024, 256) + b"\0" * 16
                self.send(header(HELLO, epoch, 0, len(body)) + body)
            elif epoch != self.epoch:
                pass
            elif kind == OPEN and struct.unpack("<I", payload[:4])[0] in self.accept:
                st = self.streams[sid] = Stream()
                st.credit, st.opened = self.window, True
                self.send(header(OPEN_OK, epoch, sid, 0))
                if self.on_open:
                    threading.Thread(target=self.on_open,
                                     args=(self, sid, struct.unpack("<I", payload[:4])[0]),
                                     daemon=True).start()
            elif kind == OPEN:
                self.send(header(OPEN_FAIL, epoch, sid, 4) + struct.pack("<I", 2))
            elif sid in self.streams:
                st = self.streams[sid]
                if kind == OPEN_OK:
                    st.opened = True
                elif kind == OPEN_FAIL:
                    st.opened = struct.unpack("<I", payload)[0]
                elif kind == DATA:
                    st.data += payload
                    self.send(header(WINDOW, epoch, sid, 4) + struct.pack("<I", len(payload)))
                elif kind == WINDOW:
                    st.credit += struct.unpack("<I", payload)[0]
                elif kind == CLOSE:
                    st.closed = True
                elif kind == RESET:
                    st.reset = True
            self.lock.notify_all()

    def open(self, port=EGRESS):
        with self.lock:
            sid = self.next_id
            self.next_id += 2
            st = self.streams[sid] = Stream()
            st.credit = self.window
            self.send(header(OPEN, self.epoch, sid, 4) + struct.pack("<I", port))
            self.lock.wait_for(lambda: st.opened is not None or st.reset, timeout=20)
        return sid

    def write(self, sid, data):
        st = self.streams[sid]
        while data:
            with self.lock:
                if not self.lock.wait_for(lambda: st.credit > 0 or st.reset, timeout=30) or st.reset:
                    raise EOFError("stream reset while writing")
                n = min(len(data), st.credit, 65536)
                self.send(header(DATA, self.epoch, sid, n) + data[:n])
                st.credit -= n
                data = data[n:]

    def close(self, sid):
        with self.lock:
            self.send(header(CLOSE, self.epoch, sid, 0))

    def wait(self, sid, cond, timeout=20):
        st = self.streams[sid]
        with self.lock:
            self.lock.wait_for(lambda: cond(st), timeout=timeout)
            return st

    def reply(self, sid, timeout=20):
        """The dialer's reply line, parsed, and the bytes after it."""
        st = self.wait(sid, lambda s: b"\n" in s.data or s.closed or s.reset, timeout)
        line, _, rest = st.data.partition(b"\n")
        try:
            return json.loads(line), rest
        except ValueError:
            return {"unparsed": line.decode(errors="replace")}, rest

    def dial(self, host, port, timeout=20):
        sid = self.open()
        self.write(sid, json.dumps({"op": "dial", "host": host, "port": port}).encode() + b"\n")
        return sid, self.reply(sid, timeout)[0]


