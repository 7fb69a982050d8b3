#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-guest-event (test/fuzz/corpus/guest-event/).

Layout of an input: one byte that picks the caps (odd: the real ones; even: small ones, see
fuzz-guest-event.c), then the lines the guest sends on the control port, each ending in
'\\n' (a last line without one is never handed out). A line of the one byte 0x1e stands
for a new session. The real events are shaped as berth-init's journal_event() writes them
(src/berth-init: compact, keys sorted, "source" and "t" added); the rest are what a
compromised guest could send instead.
"""
import json
import os
import sys

REAL, SMALL = b"1", b"n"  # n: 8 events, 296 bytes of evidence, 97 of vmm.log
RESTART = b"\x1e"
LINE_MAX = 1024 * 1024  # GUEST_EVENT_LINE_MAX
t = 0


def ev(event, **fields):
    global t
    t += 7
    o = dict(fields, event=event, source="berth-init", t=t)
    return json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def lines(*ls, caps=REAL):
    return caps + b"".join(l + b"\n" for l in ls)


policy = {"event": "capability_policy_applied", "source": "agent-init", "bootId": "b-1f3a",
          "app": "notes", "writePaths": ["/var/lib/berth/apps/notes"], "readPaths": ["/usr"],
          "networkPorts": [443], "networkUnrestricted": False, "bindPorts": [],
          "meshPeers": [], "ruleset": "FullyEnforced", "timestamp": 1733050000}
apps = [{"name": "notes", "state": "exited", "pid": 212, "uid": 1001, "port": 1100,
         "runtime": "python", "cgroup": {"path": "notes", "limits": {"memory.max": "268435456",
         "pids.max": "64"}, "summary": "memory.max=268435456 pids.max=64"},
         "policy": {"path": "/run/berth/policy/notes.json", "sha256": "ab" * 32}, "exit": 0}]
boot = [
    b'{"event":"hello","protocol":1,"source":"berth-init"}',
    ev("boot_start", pid=1, kernel="6.1.0-berth", cmdlineBytes=312, cgroup2="nsdelegate",
       lsm="lockdown,capability,landlock,yama", landlockAbi=3),
    ev("boot_phase", phase="state", persistent=True, device="/dev/vdc", formatted=False,
       bootCount=4),
    ev("secrets_loaded", names=["API_TOKEN"]),
    ev("policy_compiled", app="notes", path="/run/berth/policy/notes.json", sha256="ab" * 32),
    ev("cgroup_limits_applied", app="notes", path="notes", limits={"pids.max": "64"}),
    ev("identities", apps=[{"app": "notes", "uid": 1001, "gid": 1001}]),
    ev("boot_complete", uptimeMs=840, apps=1),
    ev("app_started", app="notes", pid=212, runtime="python"),
    ev("agent_init_report", app="notes", report=policy),
    ev("app_ready", app="notes", pid=212),
    ev("daemon_started", name="egress-broker", pid=230),
    ev("app_exited", app="notes", pid=212, exit=0),
    ev("shutting_down", reason="SIGTERM"),
    ev("power_off", reason="all apps exited", exitCode=0, apps=apps, killed=False,
       unmountFailed=0),
]
seeds = {
    "boot-sequence": lines(*boot),
    "boot-sequence-small-caps": lines(*boot, caps=SMALL),
    "boot-sequence-replayed": lines(*boot[:8], RESTART, *boot, caps=SMALL),
    "boot-failed": lines(ev("boot_start", pid=1), ev("boot_failed", phase="apps",
                         reason="No such file or directory"),
                         ev("power_off", reason="boot failed", exitCode=1, apps=[], killed=False,
                            unmountFailed=0)),
    "boot-complete-twice": lines(ev("boot_complete", uptimeMs=1, apps=0),
                                 ev("boot_complete", uptimeMs=2, apps=0)),
    "app-refused": lines(ev("app_refused", app="wide2", reason="at most one app may declare a "
                            "browser:navigate:*/network:host:* capability — found 2: wide, wide2"),
                         ev("egress_refused", apps=["wide", "wide2"], reason="busy")),
    "power-off-exit-3": lines(ev("power_off", reason="app exited", exitCode=3)),
    "power-off-no-code": lines(b'{"event":"power_off"}'),
    "power-off-code-string": lines(b'{"event":"power_off","exitCode":"0"}'),
    "power-off-code-real": lines(b'{"event":"power_off","exitCode":0.0}'),
    "power-off-code-null": lines(b'{"event":"power_off","exitCode":null}'),
    "power-off-code-2p32": lines(b'{"event":"power_off","exitCode":4294967296}'),
    "power-off-code-negative": lines(b'{"event":"power_off","exitCode":-9223372036854775808}'),
    "power-off-code-too-big": lines(b'{"event":"power_off","exitCode":9223372036854775808}'),
    "huge-numbers": lines(b'{"event":"x","n":1e400}', b'{"event":"x","n":-1e400}',
                          b'{"event":"x","n":1e-400}', b'{"event":"x","n":123456789012345678901234567890}',
                          b'{"event":"x","n":' + b"9" * 5000 + b"}",
                          b'{"event":"x","n":0.' + b"0" * 5000 + b"1}"),
    "reals-grow": lines(b'{"event":"x","n":[' + b",".join([b"3e-5"] * 400) + b"]}", caps=SMALL),
    "not-json": lines(b"hello", b"{", b"}", b'{"event":', b'{"event":"x"', b"[]", b'"event"',
                      b"null", b"0", b"true"),
    "not-object": lines(b'["event","boot_complete"]', b'"boot_complete"', b"42"),
    "event-not-string": lines(b'{"event":1}', b'{"event":null}', b'{"event":["boot_complete"]}',
                              b'{"event":{"event":"boot_complete"}}', b'{"Event":"boot_complete"}'),
    "event-empty": lines(b'{"event":""}'),
    "empty-lines": lines(b"", b" ", b"\r", b"\t", b"{}"),
    "duplicate-keys": lines(b'{"event":"boot_complete","event":"boot_failed"}',
                            b'{"event":"x","a":{"b":1,"b":2}}',
                            b'{"event":"power_off","exitCode":0,"exitCode":1}'),
    "trailing-garbage": lines(b'{"event":"boot_complete"}x', b'{"event":"boot_complete"}{}',
                              b'{"event":"boot_complete"} ', b' {"event":"boot_complete"}'),
    "nul-bytes": lines(b'{"event":"boot_complete"}\0', b'\0{"event":"boot_complete"}',
                       b'{"event":"boot\0complete"}', b'{"event":"boot_complete\\u0000"}',
                       b'{"event":"x","k\\u0000":1}', b'{"ev\0ent":"boot_complete"}'),
    "non-utf8": lines(b'{"event":"\xff"}', b'{"event":"\xc0\xaf"}', b'{"event":"\xed\xa0\x80"}',
                      b'{"event":"x","s":"\xe2\x82"}', b'{"event":"\\ud800"}',
                      b'\xef\xbb\xbf{"event":"boot_complete"}', b'{"event":"\xf4\x90\x80\x80"}'),
    "utf8-controls": lines(ev("x", s="\u009b31m \u202e evil \u2028 \x7f"),
                           b'{"event":"x","s":"\\u001b]52;c;cHduZWQ=\\u0007"}',
                           b'{"event":"x",\r"spoof":"line"}', b'{"event":"x","s":"\x1b[2J"}'),
    "cr-line-ends": b"1" + b'{"event":"boot_complete"}\r\n{"event":"power_off","exitCode":0}\r\n',
    "no-final-newline": b'1{"event":"boot_complete"}\n{"event":"power_off","exitCode":0}',
    "strings-with-brackets": lines(b'{"event":"x","s":"[[[[{{{{' + b"[" * 100 + b'"}',
                                   b'{"event":"x","s":"\\"[[[[","t":"\\\\"}',
                                   b'{"event":"x","s":"]]]]}}}}' + b"]" * 100 + b'"}',
                                   b'{"event":"x","s":"\\' + b"[" * 40 + b'"}'),
    "restart-only": lines(RESTART, RESTART, b'{"event":"boot_complete"}', RESTART),
    "flood-small-caps": lines(*[b'{"event":"flood-%d","pad":"%s"}' % (i, b"x" * (i * 7 % 50))
                                for i in range(40)], caps=SMALL),
    "flood-count-cap": lines(*[b'{"event":"flood-%d"}' % i for i in range(4100)]),
}


def nested(depth, inner=b"0"):
    """An event whose deepest [ is at @depth, the event's object being 1."""
    return b'{"event":"x","a":' + b"[" * (depth - 1) + inner + b"]" * (depth - 1) + b"}"


seeds["depth-32"] = lines(nested(32))
seeds["depth-33"] = lines(nested(33))
seeds["depth-2048"] = lines(nested(2047), nested(2048), nested(2049))
seeds["depth-unbalanced"] = lines(b'{"event":"x","a":' + b"[" * 5000)
seeds["depth-objects"] = lines(b'{"event":"x","a":' + b'{"a":' * 31 + b"0" + b"}" * 31 + b"}",
                               b'{"event":"x","a":' + b'{"a":' * 32 + b"0" + b"}" * 32 + b"}")
# Shallow enough to be accepted, and wide: indented in evidence.json it takes many times
# its bytes, which the evidence cap must count (three of these are past the real one).
seeds["evidence-grows"] = lines(nested(30, b",".join([b"0"] * 2000)), caps=SMALL)
seeds["evidence-grows-real-caps"] = lines(*[nested(30, b",".join([b"[]"] * 30000))] * 3)
pad = b'{"event":"big","pad":"'
at_cap = pad + b"x" * (LINE_MAX - len(pad) - 2) + b'"}'
assert len(at_cap) == LINE_MAX
seeds["line-at-cap"] = lines(at_cap, b'{"event":"boot_complete"}')
seeds["line-over-cap"] = lines(at_cap[:-2] + b'x"}', b'{"event":"boot_complete"}')

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus",
                                                         "guest-event")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
