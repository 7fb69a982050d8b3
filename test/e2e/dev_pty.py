# SPDX-License-Identifier: Apache-2.0
"""berth dev on a pseudo-terminal of its own, as a person runs it: what it prints there
(the URLs of published ports, and the secrets it shows on a terminal only), for the tests
of the terminal and the browser layer."""
import os
import pty
import re
import select
import signal
import subprocess
import threading
import time

BERTH = os.path.join(os.environ["BERTH_BUILD_DIR"], "src/berth/berth")


class Dev:
    """berth dev in @app_dir on a pseudo-terminal of its own."""

    def __init__(self, home, app_dir, args=()):
        self.home, self.out = home, b""
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([BERTH, "dev", *args], cwd=app_dir, env=dict(os.environ, BERTH_HOME=home),
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.master = master
        threading.Thread(target=self.reader, daemon=True).start()

    def reader(self):
        while True:
            try:
                r, _, _ = select.select([self.master], [], [], 1)
                if r:
                    d = os.read(self.master, 65536)
                    if not d:
                        return
                    self.out += d
            except OSError:
                return

    def text(self):
        return self.out.decode(errors="replace").replace("\r\n", "\n")

    def wait_for(self, pattern, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.text(), re.M)
            if m or self.proc.poll() is not None:
                return m
            time.sleep(0.2)
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
