#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-manifest (test/fuzz/corpus/manifest/).

Each seed is a whole berth.yml: valid manifests using every field, one invalid manifest per
message of docs/manifest.md, the YAML constructs the loader refuses, and inputs at the caps.
Run it again after changing the list; it rewrites the directory.
"""
import os
import shutil
import sys

HEAD = "name: app\nversion: 1.0.0\n"

SEEDS = {
    # Valid.
    "valid-minimal": HEAD,
    "valid-full": """name: my-app
version: 12.0.3
description: Does things
runtime: python
schema_version: 1
capabilities:
  - github:read:repos
  - network:connect:127.0.0.1:8080
  - github:read:repos
  - filesystem:write:/workspace/*
  - filesystem:read:/context
  - browser:navigate:*.github.com
  - app:invoke:indexer
exports:
  - name: evaluate_action
    input: {action: object}
    output: {allowed: boolean, why: string}
  - name: ping
    input:
      a: string
      b: number
      c: array
on_install: ["apt-get install -y jq"]
on_agent_ready: ["echo hi"]
expose: {browser: false, terminal: true, preview: true}
governs: true
governance: {exempt: true}
resources: {cpu: 0.5, memory_mb: 512, gpu: 1, pids: 64}
secrets: [GITHUB_TOKEN, _x1]
future_field: {anything: [1, 2]}
""",
    "valid-schema-0-expose": HEAD + "schema_version: 0\nexpose: false\n",
    "valid-flow": '{"name": "app", "version": "1.0.0", "capabilities": ["a:b:c"]}\n',
    "valid-block-scalars": HEAD + "description: |\n  line one\n  line two\non_install:\n  - >\n    folded\n    text\n",
    "valid-core-schema": HEAD + "description: no\nx: [yes, on, off, 0o17, 0x1F, .5, ~, True]\n",
    # One issue each.
    "invalid-not-a-mapping": "not a mapping\n",
    "invalid-empty": "",
    "invalid-missing-name": "version: 1.0.0\n",
    "invalid-name": "name: My_App\nversion: 1.0.0\n",
    "invalid-name-type": "name: 7\nversion: 1.0.0\n",
    "invalid-version": "name: app\nversion: 1.0.0-rc.1\n",
    "invalid-version-float": "name: app\nversion: 1.0\n",
    "invalid-null-capabilities": HEAD + "capabilities: null\n",
    "invalid-null-description": HEAD + "description: ~\n",
    "invalid-capability-grammar": HEAD + "capabilities:\n  - github:read:repos\n  - github:read\n",
    "invalid-capability-nul": HEAD + 'capabilities: ["browser:navigate:*\\0x"]\n',
    "invalid-fs-nul": HEAD + 'capabilities: ["filesystem:write:/workspace/a\\0b"]\n',
    "invalid-fs-relative": HEAD + "capabilities: [filesystem:write:workspace]\n",
    "invalid-fs-glob": HEAD + "capabilities: [filesystem:write:/workspace/*/src]\n",
    "invalid-fs-root": HEAD + "capabilities: [filesystem:write:/]\n",
    "invalid-fs-root-glob": HEAD + "capabilities: [filesystem:write:/*]\n",
    "invalid-fs-canonical": HEAD + "capabilities: [filesystem:read:/workspace/../etc, filesystem:read:/workspace//x, filesystem:read:/workspace/]\n",
    "invalid-fs-outside": HEAD + "capabilities: [filesystem:write:/etc, filesystem:write:/workspacex]\n",
    "invalid-export-name": HEAD + "exports:\n  - input: {a: string}\n",
    "invalid-export-type": HEAD + "exports:\n  - name: f\n    input: {a: int, b: 5}\n    output: [x]\n",
    "invalid-governs": HEAD + "governs: true\nexports:\n  - name: other\n",
    "invalid-on-install": HEAD + "on_install: ['', '  ', \"a\\0b\"]\n",
    "invalid-expose": HEAD + "expose: true\n",
    "invalid-expose-member": HEAD + "expose: {browser: yes}\n",
    "invalid-resources": HEAD + "resources: {cpu: 0, memory_mb: 1.5, gpu: -1, pids: 1e20}\n",
    "invalid-secrets": HEAD + "secrets: [OK, 1BAD, A-B]\n",
    "invalid-runtime": HEAD + "runtime: ruby\n",
    "invalid-schema-latest": HEAD + "schema_version: latest\n",
    "invalid-schema-negative": HEAD + "schema_version: -1\n",
    "invalid-schema-float": HEAD + "schema_version: 1.5\n",
    "invalid-schema-future": HEAD + "schema_version: 2\n",
    "invalid-schema-object": HEAD + "schema_version: {a: [1, 'x']}\n",
    "invalid-everything": "name: My_App\nversion: 1.0\ncapabilities: [ok:ok:ok, bad, filesystem:write:/etc]\non_install: ['']\ngoverns: true\nruntime: go\n",
    # YAML the loader refuses.
    "yaml-anchor-alias": HEAD + "description: &d text\nx: *d\n",
    "yaml-billion-laughs": 'a: &a ["lol","lol","lol"]\nb: &b [*a,*a,*a]\nc: &c [*b,*b,*b]\n',
    "yaml-tag": HEAD + "governs: !!bool true\ny: !custom x\n",
    "yaml-tag-directive": "%TAG !e! tag:example.com,2000:\n---\n" + HEAD,
    "yaml-merge-key": HEAD + "base: &b {x: 1}\nexpose:\n  <<: *b\n",
    "yaml-merge-key-plain": HEAD + "expose:\n  <<: {browser: false}\n",
    "yaml-duplicate-key": "name: a\nversion: 1.0.0\nname: b\n",
    "yaml-duplicate-nested": HEAD + "exports:\n  - name: a\n    name: b\n",
    "yaml-two-documents": HEAD + "---\n" + HEAD,
    "yaml-complex-key": HEAD + "? [a, b]\n: 1\n",
    "yaml-nan": HEAD + "description: .nan\nx: -.inf\n",
    "yaml-huge-float": HEAD + "x: 1e999\n",
    "yaml-huge-int": HEAD + "x: 99999999999999999999999\ny: 0xFFFFFFFFFFFFFFFFFFFF\n",
    "yaml-syntax": HEAD + "description: [1, 2\nx: 3\n",
    "yaml-unterminated": HEAD + 'description: "unterminated\n',
    "yaml-control-char": HEAD + "description: a\x01b\n",
    "yaml-bad-utf8": HEAD + "description: a\xff\n",
    "yaml-utf16-bom": HEAD,
    "yaml-nul-key": HEAD + '"a\\0b": 1\n',
    "yaml-deep": HEAD + "x: " + "[" * 70 + "]" * 70 + "\n",
    "yaml-deep-ok": HEAD + "x: " + "[" * 63 + "]" * 63 + "\n",
    "yaml-many-capabilities": HEAD + "capabilities:\n" + "".join("  - x%d\n" % i for i in range(300)),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "manifest")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for name, text in sorted(SEEDS.items()):
        if name == "yaml-utf16-bom":
            data = text.encode("utf-16")  # with its byte order mark
        elif name == "yaml-bad-utf8":
            data = text.encode("latin-1")
        else:
            data = text.encode("utf-8")
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(SEEDS), out))


if __name__ == "__main__":
    main()
