#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An HTTP server on 127.0.0.1 that serves files and misbehaves on request, for testing
`berth vm install` downloads against a real socket.

Usage: http-artifacts-server.py --root DIR --log FILE

Prints "PORT <n>" on stdout once it listens, and exits when its stdin reaches end of file,
so a test that dies takes the server with it.

A URL is /<mode>/<name>, where <name> is a file in DIR. "First request" means the first
one for that mode and name.
  ok               the file; "Range: bytes=N-" is answered 206 with the rest
  stall            first request: headers and half the body, then silence; later as ok
  drop             first request: headers and half the body, then the connection closes;
                   later as ok
  norange          first request as drop; later ones ignore Range and answer 200 with
                   the whole file
  wrong            as ok, but one byte in the middle of the file is changed
  toobig           the file and 4 KiB more, with a Content-Length that says so
  toobig-nolength  the file and 4 KiB more, no Content-Length, closed at the end
  short-nolength   the first half of the file, no Content-Length, closed at the end
  flaky            first request: 503; later as ok
  missing          404

Each response is logged before its body is sent, one JSON object a line with sorted keys
and no spaces: {"length":..,"mode":..,"name":..,"range":..,"status":..}, so a client that
has the body can already find the line.
"""
import argparse
import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXTRA = 4096
STALL_SECONDS = 60
MODES = {"ok", "stall", "drop", "norange", "wrong", "toobig", "toobig-nolength",
         "short-nolength", "flaky", "missing"}


class State:
    def __init__(self, root, log):
        self.root = root
        self.log_path = log
        self.lock = threading.Lock()
        self.counts = {}
        self.stop = threading.Event()

    def count(self, mode, name):
        with self.lock:
            n = self.counts.get((mode, name), 0) + 1
            self.counts[(mode, name)] = n
            return n

    def log(self, **record):
        line = json.dumps(record, sort_keys=True, separators=(",", ":"))
        with self.lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def parse_range(value):
    """The N of "bytes=N-", or None."""
    if not value or not value.startswith("bytes=") or not value.endswith("-"):
        return None
    try:
        return int(value[len("bytes="):-1])
    except ValueError:
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    def reply(self, status, body, length=True, content_range=None, partial=None):
        st = self.state
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Connection", "close")
        if length:
            self.send_header("Content-Length", str(len(body)))
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()
        self.close_connection = True
        st.log(mode=self.mode, name=self.name, range=self.headers.get("Range"),
               status=status, length=len(body))
        try:
            if partial is None:
                self.wfile.write(body)
                self.wfile.flush()
                return
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            if partial == "stall":
                st.stop.wait(STALL_SECONDS)
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self):
        parts = self.path.split("/")
        self.mode, self.name = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
        if self.mode not in MODES or not self.name or self.name.startswith("."):
            return self.reply(404, b"no such mode or name\n")
        first = self.state.count(self.mode, self.name) == 1
        path = os.path.join(self.state.root, self.name)
        if self.mode == "missing" or not os.path.isfile(path):
            return self.reply(404, b"not found\n")
        if self.mode == "flaky" and first:
            return self.reply(503, b"try again\n")
        with open(path, "rb") as f:
            data = f.read()
        self.serve(data, first)

    def serve(self, data, first):
        mode = self.mode
        if mode == "wrong":
            mid = len(data) // 2
            data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
        if mode in ("toobig", "toobig-nolength"):
            data = data + b"\0" * EXTRA
        if mode == "short-nolength":
            return self.reply(200, data[:len(data) // 2], length=False)
        if mode == "toobig-nolength":
            return self.reply(200, data, length=False)
        partial = None
        if first and mode in ("stall", "drop", "norange"):
            partial = "stall" if mode == "stall" else "drop"
        start = parse_range(self.headers.get("Range"))
        if start is None or (mode == "norange" and not first):
            return self.reply(200, data, partial=partial)
        if start >= len(data):
            return self.reply(416, b"", content_range=f"bytes */{len(data)}")
        return self.reply(206, data[start:], partial=partial,
                          content_range=f"bytes {start}-{len(data) - 1}/{len(data)}")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that aborts on purpose (a refused download) is not news.
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()

    Handler.state = State(args.root, args.log)
    server = Server(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)

    def watch_stdin():
        sys.stdin.buffer.read()
        Handler.state.stop.set()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
