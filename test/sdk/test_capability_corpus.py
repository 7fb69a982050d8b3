# SPDX-License-Identifier: Apache-2.0
"""The capability model's case corpus (test/capability/corpus.json), whose expected values
are the C implementation's answers, replayed against the Python SDK; and the SDK's tables,
read from sdk/capability-model.json. A bare string in a section is a heading."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK = os.path.join(ROOT, "sdk", "python")
sys.path.insert(0, SDK)

from berth_sdk import capability as cap  # noqa: E402

with open(os.path.join(ROOT, "test", "capability", "corpus.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)


def _parse_or_none(s):
    try:
        ns, action, scope = cap.parse_capability(s)
    except ValueError:
        return None
    return {"namespace": ns, "action": action, "scope": scope}


SECTIONS = {
    "wellFormed": (1, lambda s: cap.CAPABILITY_RE.match(s) is not None),
    "issues": (1, cap.capability_issue),
    "matches": (2, cap.matches_capability),
    "parse": (1, _parse_or_none),
}


class CapabilityCorpusTest(unittest.TestCase):
    def replay(self, name):
        n_inputs, answer = SECTIONS[name]
        cases = [c for c in CORPUS[name] if not isinstance(c, str)]
        self.assertTrue(cases, f"no {name} cases")
        wrong = []
        for c in cases:
            self.assertEqual(len(c), n_inputs + 1, f"not a {name} case: {c!r}")
            got = answer(*c[:n_inputs])
            if got != c[n_inputs] or type(got) is not type(c[n_inputs]):
                wrong.append(f"{json.dumps(c)}: Python says {json.dumps(got)}")
        self.assertEqual(wrong, [], f"{len(wrong)} of {len(cases)} {name} cases disagree with C")

    def test_well_formed(self):
        self.replay("wellFormed")

    def test_issues(self):
        self.replay("issues")

    def test_matches(self):
        self.replay("matches")

    def test_parse(self):
        self.replay("parse")

    def test_no_other_sections(self):
        for k in CORPUS:
            self.assertTrue(k.startswith("_") or k in SECTIONS, k)


class CapabilityModelTest(unittest.TestCase):
    def test_tables_from_the_model_file(self):
        with open(os.path.join(ROOT, "sdk", "capability-model.json"), encoding="utf-8") as f:
            model = json.load(f)
        self.assertEqual(cap.ALLOWED_FILESYSTEM_SCOPE_PREFIXES, tuple(model["filesystemPrefixes"]))
        self.assertIn(", ".join(model["filesystemPrefixes"]), cap.filesystem_scope_issue("/etc"))

    def _import_from(self, package_dir, model=None):
        """Import a copy of berth_sdk laid out as the image lays it out: the package alone,
        with ``model`` written beside its modules."""
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site-packages")
            os.makedirs(os.path.join(site, "berth_sdk"))
            for name in os.listdir(package_dir):
                if name.endswith(".py"):
                    with open(os.path.join(package_dir, name), "rb") as src, \
                            open(os.path.join(site, "berth_sdk", name), "wb") as dst:
                        dst.write(src.read())
            if model is not None:
                with open(os.path.join(site, "berth_sdk", "capability-model.json"), "w") as f:
                    json.dump(model, f)
            code = "from berth_sdk import capability as c; print(','.join(c.ALLOWED_FILESYSTEM_SCOPE_PREFIXES))"
            return subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": site, "PATH": "/usr/bin:/bin"},
                                  capture_output=True, text=True, timeout=60)

    def test_image_layout_reads_the_file_beside_the_package(self):
        r = self._import_from(os.path.join(SDK, "berth_sdk"), {"filesystemPrefixes": ["/only"]})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "/only")

    def test_no_model_file_fails_loudly(self):
        r = self._import_from(os.path.join(SDK, "berth_sdk"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the capability model's tables are missing", r.stderr)
        self.assertIn("capability-model.json", r.stderr)


if __name__ == "__main__":
    unittest.main()
