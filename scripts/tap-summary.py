#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Count the TAP results of a meson test run (build/meson-logs/testlog.json) and print
one closing line, 'N passed, N failed, N skipped'. Exit 1 when anything failed."""
import json
import re
import sys

LINE = re.compile(r"^(not ok|ok)\b[^#]*(#\s*(SKIP|TODO)\b.*)?", re.IGNORECASE)


def main():
    passed = failed = skipped = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for raw in f:
            t = json.loads(raw)
            seen = bad = 0
            for line in (t.get("stdout") or "").splitlines():
                m = LINE.match(line)
                if not m:
                    continue
                seen += 1
                if m.group(3) and m.group(3).upper() == "SKIP":
                    skipped += 1
                elif m.group(1) == "ok":
                    passed += 1
                else:
                    bad += 1
                    print(f"failed: {t['name']}: {line}")
            # A program that crashed, broke its plan or exited non-zero without a
            # failing line still failed.
            if t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and not bad:
                bad = 1
                print(f"failed: {t['name']}: {t.get('result')} after {seen} results")
            failed += bad
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
