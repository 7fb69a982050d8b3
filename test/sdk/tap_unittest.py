#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run unittest test modules and print TAP: 'ok N - name' per test, '# ' diagnostics.
Usage: tap_unittest.py path/to/test_module.py ..."""
import importlib.util
import os
import sys
import traceback
import unittest


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0
        self.failed = 0

    def _emit(self, test, ok, detail=None, directive=""):
        self.n += 1
        name = test.id().split(".", 1)[-1]
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}{directive}", flush=True)
        if detail:
            for line in detail.rstrip().splitlines():
                print(f"# {line}", flush=True)

    def addSuccess(self, test):
        self._emit(test, True)

    def addFailure(self, test, err):
        self.failed += 1
        self._emit(test, False, "".join(traceback.format_exception(*err)))

    def addError(self, test, err):
        self.failed += 1
        self._emit(test, False, "".join(traceback.format_exception(*err)))

    def addSkip(self, test, reason):
        self._emit(test, True, directive=f" # SKIP {reason}")

    def addExpectedFailure(self, test, err):
        self._emit(test, True, directive=" # TODO expected failure")

    def addUnexpectedSuccess(self, test):
        self.failed += 1
        self._emit(test, False, "unexpected success")


def main(paths):
    loader = unittest.TestLoader()
    tests = []
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        tests.extend(flatten(loader.loadTestsFromModule(module)))
    print("TAP version 13")
    print(f"1..{len(tests)}", flush=True)
    result = TapResult()
    unittest.TestSuite(tests).run(result)
    print(f"# {result.n - result.failed} passed, {result.failed} failed", flush=True)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
