# SPDX-License-Identifier: Apache-2.0
"""The exports: grammar's case corpus (test/manifest/exports-corpus.json), C's answers,
against the Python SDK's manifest loader. That loader is lenient by design (SPEC 1.6: the
host validates Python apps with the full rules), so what must agree is that every manifest
C accepts loads, with the same field types: an app whose berth.yml the host accepts must
never be refused at boot inside the VM."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

from berth_sdk.manifest import load_manifest  # noqa: E402

with open(os.path.join(ROOT, "test", "manifest", "exports-corpus.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)


def field_type(spec):
    return spec["type"] if isinstance(spec, dict) else spec


class ExportsCorpusTest(unittest.TestCase):
    def test_every_valid_case_loads_with_the_same_types(self):
        valid = [c for c in CORPUS["cases"] if not isinstance(c, str) and "exports" in c[1]]
        self.assertGreater(len(valid), 5)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "berth.yml")
            for exports, want in valid:
                # JSON is YAML: the file holds exactly the case's value.
                with open(path, "w", encoding="utf-8") as f:
                    json.dump({"name": "corpus", "version": "1.0.0", "exports": exports}, f)
                m = load_manifest(path)
                got = [(e.name, {k: field_type(v) for k, v in e.input.items()},
                        {k: field_type(v) for k, v in e.output.items()}) for e in m.exports]
                expected = [(e["name"], {k: field_type(v) for k, v in e.get("input", {}).items()},
                             {k: field_type(v) for k, v in e.get("output", {}).items()})
                            for e in want["exports"]]
                self.assertEqual(got, expected, json.dumps(exports))
                for e, w in zip(m.exports, want["exports"]):
                    self.assertEqual(e.description, w.get("description"))
                    self.assertEqual(e.title, w.get("title"))


if __name__ == "__main__":
    unittest.main()
