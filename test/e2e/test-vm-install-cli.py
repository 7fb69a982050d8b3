#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`berth vm install` end to end: the real CLI binary, BERTH_HOME in a temporary
directory, small made-up artifacts, and a stand-in berth-vmm whose `pins --json` prints
their pins. Downloads go to http-artifacts-server.py on 127.0.0.1. Prints TAP.

Environment: BERTH_BUILD_ROOT (the meson build directory), BERTH_SOURCE_ROOT.
"""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import traceback

BUILD = os.environ.get("BERTH_BUILD_ROOT") or os.path.join(os.path.dirname(__file__), "../../build")
SOURCE = os.environ.get("BERTH_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "../..")
BERTH = os.path.join(BUILD, "src/berth/berth")
SERVER = os.path.join(SOURCE, "test/e2e/http-artifacts-server.py")

KINDS = ("kernel", "initrd", "rootfs")
FLAT = {"kernel": "vmlinux", "initrd": "initrd.cpio", "rootfs": "rootfs.erofs"}
SIZES = {"kernel": 200 * 1024 + 11, "initrd": 64 * 1024 + 3, "rootfs": 300 * 1024 + 7}

tests = []


def test(fn):
    tests.append(fn)
    return fn


class Fixture:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-test-cli-")
        self.home = os.path.join(self.tmp, "home")
        self.vm = os.path.join(self.home, "vm")
        self.flat = os.path.join(self.tmp, "out-artifacts")
        self.assets = os.path.join(self.tmp, "assets")
        os.makedirs(self.flat)
        os.makedirs(self.assets)
        self.data, self.pins = {}, {}
        for i, kind in enumerate(KINDS):
            data = hashlib.shake_256(f"berth-{kind}-{i}".encode()).digest(SIZES[kind])
            sha = hashlib.sha256(data).hexdigest()
            self.data[kind] = data
            self.pins[kind] = {"sha256": sha, "size": len(data)}
            self.write(os.path.join(self.flat, FLAT[kind]), data)
            self.write(os.path.join(self.assets, self.asset(kind)), data)
        self.vmm = os.path.join(self.tmp, "fake-berth-vmm")
        pins = dict(self.pins, linux="6.0.0-test")
        self.write(self.vmm, ("#!/bin/sh\n"
                              "[ \"$1 $2\" = 'pins --json' ] || exit 2\n"
                              f"echo '{json.dumps(pins, sort_keys=True, separators=(',', ':'))}'\n"
                              ).encode(), 0o755)
        self.server = None
        self.port = None

    @staticmethod
    def write(path, data, mode=0o644):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def asset(self, kind):
        sha = self.pins[kind]["sha256"]
        return {"kernel": f"vmlinux-{sha}", "initrd": f"initrd-{sha}.cpio",
                "rootfs": f"rootfs-{sha}.erofs"}[kind]

    def installed(self, kind):
        k, i, r = (self.pins[x]["sha256"] for x in KINDS)
        return os.path.join(self.vm, {"kernel": f"kernel/sha256/{k}/vmlinux",
                                      "initrd": f"kernel/sha256/{k}/initrd-{i}.cpio",
                                      "rootfs": f"rootfs/rootfs-{r}.erofs"}[kind])

    def env(self, **extra):
        # No proxy may get between the CLI and the server on 127.0.0.1.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("BERTH_") and not k.lower().endswith("_proxy")}
        env.update(BERTH_HOME=self.home, HOME=self.tmp, BERTH_VMM=self.vmm)
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run(self, *args, **env):
        # Artifacts here are fakes a template cannot boot: no warm-start snapshot.
        p = subprocess.run([BERTH, "vm", "install", *args, "--no-snapshot"], env=self.env(**env),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def start_server(self):
        self.server = subprocess.Popen([sys.executable, SERVER, "--root", self.assets,
                                        "--log", os.path.join(self.tmp, "server.log")],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.server.stdout.readline().decode()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])
        return f"http://127.0.0.1:{self.port}"

    def server_log(self):
        with open(os.path.join(self.tmp, "server.log"), encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def close(self):
        if self.server:
            self.server.stdin.close()
            self.server.wait(timeout=10)
        for root, dirs, _ in os.walk(self.tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(self.tmp)

    def assert_installed(self, kinds=KINDS):
        for kind in kinds:
            path = self.installed(kind)
            with open(path, "rb") as f:
                assert f.read() == self.data[kind], f"{kind}: wrong content at {path}"
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o444, oct(os.stat(path).st_mode)

    def leftovers(self):
        found = []
        for root, _, files in os.walk(self.vm):
            found += [os.path.join(root, f) for f in files if ".part" in f or ".tmp." in f]
        return found


def expect(cond, what, out="", err=""):
    if not cond:
        raise AssertionError(f"{what}\n--- stdout\n{out}\n--- stderr\n{err}")


@test
def help_and_usage_errors(f):
    rc, out, err = f.run("--help")
    expect(rc == 0 and "--from DIR" in out and "--no-download" in out, "--help", out, err)
    rc, out, err = f.run("--bogus")
    expect(rc == 2, "unknown option exits 2", out, err)
    rc, out, err = f.run("stray")
    expect(rc == 2 and "unexpected argument" in err, "stray argument", out, err)


@test
def install_from_build_output(f):
    rc, out, err = f.run("--from", f.flat, "--no-download", "--vmm", f.vmm, BERTH_VMM=None)
    expect(rc == 0, "exit 0", out, err)
    for kind in KINDS:
        sha16 = f.pins[kind]["sha256"][:16]
        size = f"{SIZES[kind]:,}"
        line = f"✔ {kind} {sha16}… verified (from {f.flat}), {size} B"
        expect(line in out, f"line {line!r}", out, err)
    expect("pinned by berth-vmm " + f.vmm in out, "names the berth-vmm whose pins it used", out, err)
    expect(out.rstrip().splitlines()[-1].startswith("Ready:"), "final line", out, err)
    f.assert_installed()
    vmm = os.path.join(f.vm, "bin/berth-vmm")
    expect(stat.S_IMODE(os.stat(vmm).st_mode) == 0o755, "berth-vmm is 0755")
    with open(vmm, "rb") as a, open(f.vmm, "rb") as b:
        expect(a.read() == b.read(), "berth-vmm copied")
    expect(not f.leftovers(), f"no temporary files: {f.leftovers()}")

    # The installed berth-vmm is found next time and its pins are used; nothing is copied.
    rc, out, err = f.run(BERTH_VMM=None)
    expect(rc == 0 and out.count("verified (already installed)") == 3, "already installed", out, err)
    expect("pinned by berth-vmm " + vmm in out, "pins from the installed berth-vmm", out, err)

    # --force replaces what is in place.
    rc, out, err = f.run("--from", f.flat, "--force")
    expect(rc == 0 and out.count(f"verified (from {f.flat})") == 3, "--force copies again", out, err)


@test
def damaged_installed_file_is_replaced(f):
    rc, out, err = f.run("--from", f.flat)
    expect(rc == 0, "first install", out, err)
    path = f.installed("rootfs")
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"X")
    rc, out, err = f.run("--from", f.flat)
    expect(rc == 0, "exit 0", out, err)
    expect("rootfs: the installed copy was damaged" in err, "says it was damaged", out, err)
    expect(f"verified (from {f.flat})" in out, "rootfs copied again", out, err)
    f.assert_installed()


@test
def tampered_source_is_refused(f):
    path = os.path.join(f.flat, "vmlinux")
    data = bytearray(f.data["kernel"])
    data[4242] ^= 1
    f.write(path, bytes(data))
    rc, out, err = f.run("--from", f.flat, "--no-download")
    expect(rc == 1, "exit 1", out, err)
    expect("1 of 3 artifacts are missing" in err, "counts what is missing", out, err)
    expect(f"kernel: not in {f.flat}" in err and "has sha256" in err, "names the bad file", out, err)
    expect(f.pins["kernel"]["sha256"] in err, "shows the pin", out, err)
    expect(not os.path.exists(f.installed("kernel")), "nothing installed for the kernel")
    expect(not f.leftovers(), f"no temporary files: {f.leftovers()}")


@test
def missing_artifacts_are_listed(f):
    os.unlink(os.path.join(f.flat, "rootfs.erofs"))
    os.unlink(os.path.join(f.flat, "initrd.cpio"))
    rc, out, err = f.run("--from", f.flat, "--no-download")
    expect(rc == 1, "exit 1", out, err)
    expect("2 of 3 artifacts are missing" in err, "count", out, err)
    expect("initrd: not in" in err and "rootfs: not in" in err, "lists both", out, err)
    expect("drop --no-download" in err, "says what to do", out, err)
    expect("✔ kernel" in out, "the kernel is still installed", out, err)


@test
def no_source_says_pass_from_or_url(f):
    rc, out, err = f.run()
    expect(rc == 1, "exit 1", out, err)
    expect("--from" in err and "out/artifacts" in err and "--url" in err, "hint", out, err)
    rc, out, err = f.run("--no-download")
    expect(rc == 1 and "--no-download copies from --from only" in err, "--no-download hint", out, err)


@test
def download_from_local_server(f):
    base = f.start_server()
    rc, out, err = f.run("--url", base + "/ok/{asset}")
    expect(rc == 0 and out.count("verified (downloaded)") == 3, "downloaded", out, err)
    f.assert_installed()
    names = sorted(r["name"] for r in f.server_log())
    expect(names == sorted(f.asset(k) for k in KINDS), f"asset names requested: {names}")


@test
def download_stall_is_retried(f):
    base = f.start_server()
    start = time.monotonic()
    rc, out, err = f.run("--url", base + "/stall/{asset}", BERTH_VM_DOWNLOAD_STALL_MS="300")
    expect(rc == 0 and out.count("downloaded in 2 attempts") == 3, "resumed", out, err)
    expect(time.monotonic() - start < 30, "the stall was cut short")
    log = f.server_log()
    expect(sum(1 for r in log if r["status"] == 206 and r["range"]) == 3, f"206 answers: {log}")
    f.assert_installed()


@test
def wrong_bytes_from_env_url(f):
    base = f.start_server()
    rc, out, err = f.run(BERTH_VM_ARTIFACTS_URL=base + "/wrong/{asset}")
    expect(rc == 1, "exit 1", out, err)
    expect("kernel: sha256 mismatch: expected " + f.pins["kernel"]["sha256"] in err, "mismatch", out, err)
    expect("is not the pinned kernel — check BERTH_VM_ARTIFACTS_URL" in err, "names the env var", out, err)
    expect("missing" not in err and "initrd" not in err, "stops at the refused download", out, err)
    expect(not os.path.exists(f.installed("kernel")) and not f.leftovers(), "nothing left")


@test
def config_file_settings(f):
    base = f.start_server()
    os.makedirs(f.home, exist_ok=True)
    config = os.path.join(f.home, "config.json")
    with open(config, "w", encoding="utf-8") as fh:
        json.dump({"vm": {"artifactsUrl": base + "/toobig/{asset}"}}, fh)
    rc, out, err = f.run()
    expect(rc == 1 and "more than the pinned" in err, "too big refused", out, err)
    expect(f"check vm.artifactsUrl in {config}" in err, "names the config key and file", out, err)
    expect(not f.leftovers(), "no .part left")

    # --url beats the file; vm.artifactsDir is a source; BERTH_VMM_ARTIFACTS beats it.
    with open(config, "w", encoding="utf-8") as fh:
        json.dump({"vm": {"artifactsUrl": base + "/missing/{asset}",
                          "artifactsDir": os.path.join(f.tmp, "nowhere")}}, fh)
    rc, out, err = f.run(BERTH_VMM_ARTIFACTS=f.flat)
    expect(rc == 0 and out.count(f"(from {f.flat})") == 3, "env dir beats config dir", out, err)
    rc, out, err = f.run("--force")
    expect(rc == 1 and "nowhere is not a directory (from vm.artifactsDir" in err, "config dir used", out, err)
    rc, out, err = f.run("--force", "--from", f.assets, "--url", base + "/ok/{asset}")
    expect(rc == 0 and out.count(f"(from {f.assets})") == 3, "flags beat the file", out, err)


@test
def malformed_config(f):
    os.makedirs(f.home, exist_ok=True)
    config = os.path.join(f.home, "config.json")
    with open(config, "w", encoding="utf-8") as fh:
        fh.write('{\n  "vm": {"artifactsUrl": "x",}\n}\n')
    rc, out, err = f.run("--from", f.flat)
    expect(rc == 1, "exit 1", out, err)
    expect(f"{config}:2:" in err and "fix the file" in err, "file, line and what to do", out, err)


@test
def bad_template(f):
    rc, out, err = f.run("--url", "https://mirror.example/{nope}")
    expect(rc == 1 and "unknown placeholder {nope}" in err and "(from --url)" in err, "template", out, err)


@test
def vmm_that_reports_no_pins(f):
    bad = os.path.join(f.tmp, "not-a-vmm")
    f.write(bad, b"#!/bin/sh\nexit 1\n", 0o755)
    rc, out, err = f.run("--from", f.flat, "--vmm", bad)
    expect(rc == 1 and "did not print a pin set" in err, "refused", out, err)
    expect(not os.path.exists(os.path.join(f.vm, "bin/berth-vmm")), "not installed")


@test
def located_vmm_without_pins_falls_back_with_a_warning(f):
    bad = os.path.join(f.tmp, "not-a-vmm")
    f.write(bad, b"#!/bin/sh\nexit 1\n", 0o755)
    rc, out, err = f.run("--from", f.flat, "--no-download", BERTH_VMM=bad)
    expect(f"{bad} did not report its pins" in err, "warns", out, err)
    expect("pinned by this CLI (its berth-vmm did not report any)" in out, "says whose pins", out, err)
    # The CLI's own pins are the real artifacts', which the made-up files are not.
    expect(rc == 1 and "3 of 3 artifacts are missing" in err, "compiled-in pins used", out, err)


def main():
    if not os.access(BERTH, os.X_OK):
        print(f"1..0 # SKIP {BERTH} is not built")
        return 0
    print(f"1..{len(tests)}", flush=True)
    failed = 0
    for i, fn in enumerate(tests, 1):
        f = Fixture()
        try:
            fn(f)
            print(f"ok {i} - {fn.__name__}", flush=True)
        except Exception:
            failed += 1
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            print(f"not ok {i} - {fn.__name__}", flush=True)
        finally:
            f.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
