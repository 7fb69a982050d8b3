// SPDX-License-Identifier: Apache-2.0
// The capability model's case corpus (test/capability/corpus.json), whose expected values
// are the C implementation's answers, replayed against the Node SDK. A bare string in a
// section is a heading.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT, SDK } from "./helpers.mjs";

const cap = await import(join(SDK, "src", "capability.mjs"));
const corpus = JSON.parse(readFileSync(join(ROOT, "test", "capability", "corpus.json"), "utf8"));

function parseOrNull(s) {
	try {
		return { ...cap.parseCapability(s) };
	} catch {
		return null;
	}
}

const sections = {
	wellFormed: [1, (s) => cap.CAPABILITY_RE.test(s)],
	issues: [1, (s) => cap.capabilityIssue(s)],
	matches: [2, (g, r) => cap.matchesCapability(g, r)],
	parse: [1, parseOrNull],
};

for (const [name, [nInputs, answer]] of Object.entries(sections)) {
	test(`corpus: ${name}`, () => {
		const cases = corpus[name].filter((c) => typeof c !== "string");
		assert.ok(cases.length > 0, `no ${name} cases`);
		const wrong = [];
		for (const c of cases) {
			assert.equal(c.length, nInputs + 1, `not a ${name} case: ${JSON.stringify(c)}`);
			const got = answer(...c.slice(0, nInputs));
			try {
				assert.deepEqual(got, c[nInputs]);
			} catch {
				wrong.push(`${JSON.stringify(c)}: Node says ${JSON.stringify(got)}`);
			}
		}
		assert.deepEqual(wrong, [], `${wrong.length} of ${cases.length} ${name} cases disagree with C`);
	});
}

test("corpus: the issues of well-formed filesystem capabilities, through filesystemScopeIssue", () => {
	for (const [s, want] of corpus.issues.filter((c) => typeof c !== "string")) {
		const m = /^filesystem:(read|write):([^]*)$/.exec(s);
		if (m && cap.CAPABILITY_RE.test(s)) assert.equal(cap.filesystemScopeIssue(m[2]), want, JSON.stringify(s));
	}
});

test("corpus: no other sections", () => {
	for (const k of Object.keys(corpus)) assert.ok(k.startsWith("_") || k in sections, k);
});
