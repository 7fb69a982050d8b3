#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`berth audit verify|list` end to end: trails written by the real sink (the audit-append
helper, which appends exactly as berth mcp does), read by the real CLI binary, with the
chain recomputed here independently with hashlib. No VM. Prints TAP.

Environment: BERTH_BUILD_ROOT (the meson build directory), BERTH_AUDIT_APPEND (the helper).
"""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback

BUILD = os.environ.get("BERTH_BUILD_ROOT") or os.path.join(os.path.dirname(__file__), "../../build")
BERTH = os.path.join(BUILD, "src/berth/berth")
APPEND = os.environ.get("BERTH_AUDIT_APPEND") or os.path.join(BUILD, "test/unit/audit-append")
GENESIS = "0" * 64
RUN = "mcp-notes-20261130T024520Z-a1b2c3"

tests = []


def test(fn):
    tests.append(fn)
    return fn


def actor(kind, ident, by="self-asserted"):
    return {"kind": kind, "id": ident, "verifiedBy": by}


EVENTS = [
    {"actor": actor("operator", "me"), "action": "sandbox.boot", "target": "container:berth-dev-notes",
     "decision": "allowed", "meta": {"runId": RUN, "evidence": {"bootId": "b-1"}}},
    {"actor": actor("agent", "claude"), "action": "tool.call", "target": "notes.add_note",
     "decision": "allowed", "durationMs": 7, "input": {"text": "hello", "token": "t0p"},
     "output": {"id": 1}, "meta": {"runId": RUN}},
    {"actor": actor("agent", "claude"), "action": "tool.call", "target": "notes.write_file",
     "decision": "denied", "reason": "BERTH CAPABILITY DENIAL — é", "meta": {"runId": RUN}},
    {"actor": actor("agent", "cursor", "token"), "action": "tool.call", "target": "notes.list",
     "decision": "unavailable", "reason": "no answer from \"list\"\u001b[31m red",
     "meta": {"runId": RUN, "failed": True, "outcome": "unknown"}},
    {"actor": actor("agent", "claude"), "action": "tool.call", "target": "notes.add_note",
     "decision": "allowed", "meta": {"runId": RUN}},
]


class Env:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-test-audit-")
        self.trail = os.path.join(self.tmp, "audit", "audit.jsonl")
        self.env = dict(os.environ, BERTH_HOME=os.path.join(self.tmp, "home"),
                        BERTH_AUDIT_PATH=self.trail)

    def write(self, events, *args):
        data = "".join(json.dumps(e) + "\n" for e in events)
        subprocess.run([APPEND, self.trail, *args], input=data.encode(), check=True)

    def berth(self, *args):
        p = subprocess.run([BERTH, *args], env=self.env, capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def records(self, path=None):
        with open(path or self.trail, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def canonical(rec):
    ev = {k: v for k, v in rec.items() if k not in ("prevHash", "hash")}
    return json.dumps(ev, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


@test
def missing_trail_is_explained(e):
    rc, out, err = e.berth("audit", "verify")
    expect(rc == 0, f"verify exit {rc}")
    expect(f"No audit trail at {e.trail} yet." in out, out)
    expect("berth mcp creates it" in err, err)
    rc, out, err = e.berth("audit", "list")
    expect(rc == 0 and out == "" and "No audit trail" in err, (rc, out, err))
    rc, out, err = e.berth("audit")
    expect(rc == 2 and "verify or list" in err, (rc, err))


@test
def chain_recomputed_independently(e):
    e.write(EVENTS, "--capture")
    recs = e.records()
    expect(len(recs) == 5, len(recs))
    prev = GENESIS
    for i, r in enumerate(recs):
        expect(r["seq"] == i + 1, r["seq"])
        expect(r["prevHash"] == prev, f"record {i + 1} prevHash")
        h = hashlib.sha256((prev + canonical(r)).encode("utf-8")).hexdigest()
        expect(r["hash"] == h, f"record {i + 1}: {r['hash']} != {h}")
        expect(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["ts"]), r["ts"])
        prev = h
    expect(recs[1]["input"] == {"text": "hello", "token": "[redacted]"}, recs[1]["input"])
    expect(stat.S_IMODE(os.stat(e.trail).st_mode) == 0o600, "mode")


@test
def verify_passes_on_a_fresh_trail(e):
    e.write(EVENTS)
    head = e.records()[-1]["hash"]
    rc, out, err = e.berth("audit", "verify")
    expect(rc == 0, (rc, out, err))
    expect(out == f"{e.trail}: 5 records OK\nChain intact across 5 records. Head: {head[:16]}…\n", out)
    rc, out2, _ = e.berth("audit", "verify", "--file", e.trail)
    expect(rc == 0 and out2 == out, out2)


@test
def verify_names_the_edited_record(e):
    e.write(EVENTS)
    with open(e.trail, encoding="utf-8") as f:
        lines = f.readlines()
    expect('"decision":"denied"' in lines[2], lines[2])
    lines[2] = lines[2].replace('"decision":"denied"', '"decision":"allowed"')
    with open(e.trail, "w", encoding="utf-8") as f:
        f.writelines(lines)
    rc, out, err = e.berth("audit", "verify")
    expect(rc == 1, (rc, out, err))
    expect(re.fullmatch(re.escape(e.trail) + r": BROKEN at record 3 — hash [0-9a-f]{16}… does not "
                        r"match its contents \([0-9a-f]{16}…\)\n", out), out)
    expect("cannot be trusted" in err, err)
    # list shows only what comes before the break, and fails.
    rc, out, err = e.berth("audit", "list")
    expect(rc == 1 and len(out.splitlines()) == 2 and "BROKEN at record 3" in err, (rc, out, err))


@test
def list_format_and_filters(e):
    e.write(EVENTS)
    recs = e.records()
    rc, out, err = e.berth("audit", "list")
    expect(rc == 0, (rc, err))
    lines = out.splitlines()
    expect(len(lines) == 5, out)
    expect(lines[0] == f"{recs[0]['ts']}  ALLOWED      me (operator, self-asserted)  sandbox.boot  "
           "container:berth-dev-notes", lines[0])
    expect(lines[2] == f"{recs[2]['ts']}  DENIED       claude (agent, self-asserted)  tool.call  "
           "notes.write_file  — BERTH CAPABILITY DENIAL — é", lines[2])
    # The escape character an app put in its reason does not reach the terminal.
    expect(lines[3] == f"{recs[3]['ts']}  UNAVAILABLE  cursor (agent, token)  tool.call  notes.list  "
           "— no answer from \"list\"?[31m red", lines[3])

    def listed(*args):
        rc, out, err = e.berth("audit", "list", *args)
        expect(rc == 0, (args, rc, err))
        return out.splitlines(), err

    got, _ = listed("--decision", "denied")
    expect(got == [lines[2]], got)
    got, _ = listed("--actor", "cursor")
    expect(got == [lines[3]], got)
    got, _ = listed("--action", "sandbox.")
    expect(got == [lines[0]], got)
    got, _ = listed("--action", "tool.", "--actor", "claude")
    expect(got == [lines[1], lines[2], lines[4]], got)
    got, err = listed("--limit", "2")
    expect(got == lines[3:], got)
    expect("the last 2 of 5 matching records" in err, err)
    got, _ = listed("--limit", "0")
    expect(got == lines, got)
    got, err = listed("--decision", "allowed", "--actor", "nobody")
    expect(got == [] and "matches" in err, (got, err))
    got, _ = listed("--json", "--decision", "unavailable")
    expect([json.loads(x) for x in got] == [recs[3]], got)
    rc, _, err = e.berth("audit", "list", "--decision", "maybe")
    expect(rc == 2 and "allowed, denied or unavailable" in err, err)
    rc, _, err = e.berth("audit", "list", "--limit", "-1")
    expect(rc == 2 and "--limit" in err, err)


@test
def list_neutralises_bidi_and_separators(e):
    # An agent's id and an app's reason with a bidi override, an isolate, a line separator,
    # a UTF-8 C1 CSI and OSC 52: none reaches the terminal; --json keeps them.
    hostile = "\u202eevil\u2066 x\u2028y \u009b2J \x1b]52;c;cHduZWQ=\x07"
    e.write([{"actor": actor("agent", "claude" + hostile), "action": "tool.call",
              "target": "notes.list" + hostile, "decision": "denied", "reason": "why" + hostile,
              "meta": {"runId": RUN}}])
    rec = e.records()[0]
    rc, out, err = e.berth("audit", "list")
    expect(rc == 0, (rc, err))
    shown = "?evil? x?y ?2J ?]52;c;cHduZWQ=?"
    expect(out == f"{rec['ts']}  DENIED       claude{shown} (agent, self-asserted)  tool.call  "
           f"notes.list{shown}  — why{shown}\n", out)
    rc, out, err = e.berth("audit", "list", "--json")
    expect(rc == 0 and json.loads(out)["reason"] == "why" + hostile, (rc, out, err))
    expect("\u202e" in out and "\u009b" in out, out)


@test
def rotated_segments_verify_oldest_first(e):
    events = [EVENTS[1 + i % 4] for i in range(12)]
    e.write(events, "--rotate-bytes", "900")
    segs = [f"{e.trail}.{n}" for n in range(5, 0, -1) if os.path.exists(f"{e.trail}.{n}")] + [e.trail]
    expect(len(segs) >= 4, segs)
    counts = [len(e.records(s)) for s in segs]
    rc, out, err = e.berth("audit", "verify")
    expect(rc == 0, (rc, out, err))
    want = "".join(f"{s}: {n} record{'s' if n != 1 else ''} OK\n" for s, n in zip(segs, counts))
    head = e.records()[-1]["hash"]
    want += f"Chain intact across {sum(counts)} records. Head: {head[:16]}…\n"
    expect(out == want, out + "\n---\n" + want)
    # Seqs run on across segments.
    seqs = [r["seq"] for s in segs for r in e.records(s)]
    expect(seqs == list(range(1, 13)), seqs)


def main():
    if not os.access(BERTH, os.X_OK) or not os.access(APPEND, os.X_OK):
        print(f"1..0 # SKIP {BERTH} or {APPEND} not built")
        return 0
    print(f"1..{len(tests)}")
    failed = 0
    for i, fn in enumerate(tests, 1):
        e = Env()
        try:
            fn(e)
            print(f"ok {i} - {fn.__name__}")
        except Exception:
            failed += 1
            print(f"not ok {i} - {fn.__name__}")
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
        finally:
            e.close()
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
