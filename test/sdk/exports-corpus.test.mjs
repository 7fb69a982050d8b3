// SPDX-License-Identifier: Apache-2.0
// The exports: grammar's case corpus (test/manifest/exports-corpus.json), whose expected
// values are the C validator's answers, replayed against the Node SDK's validator: the same
// normalised exports, and the same problems at the same paths. Node words a type error as
// zod does ("Invalid input: expected string, received number"), so C's type messages are
// put in those words before they are compared; every other message is the same text.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT, SDK } from "./helpers.mjs";

const { validateManifest } = await import(join(SDK, "src", "manifest.mjs"));
const corpus = JSON.parse(readFileSync(join(ROOT, "test", "manifest", "exports-corpus.json"), "utf8"));
const model = JSON.parse(readFileSync(join(ROOT, "sdk", "capability-model.json"), "utf8"));
const TYPES = model.exportFieldTypes;

/** C's message in the Node validator's dialect. */
function nodeWords(message) {
	const enumOf = `Expected ${TYPES.map((t) => `'${t}'`).join(" | ")}`;
	if (message.startsWith(`Invalid enum value. ${enumOf}`) || message.startsWith(`${enumOf}, received`))
		return `Invalid option: expected one of ${TYPES.map((t) => `"${t}"`).join("|")}`;
	if (message === "Required") return null; // Node says which type it wanted; see below
	const m = /^Expected (\w+), received (\w+)$/.exec(message);
	if (m) return `Invalid input: expected ${m[1]}, received ${m[2]}`;
	return message;
}

function nodeAnswer(exports) {
	try {
		return { exports: validateManifest({ name: "corpus", version: "1.0.0", exports }).exports };
	} catch (err) {
		if (!err.issues) throw err;
		return { issues: err.issues.map((i) => [i.path.join("."), i.message]) };
	}
}

test("corpus: Node's validator agrees with C on every exports case", () => {
	const cases = corpus.cases.filter((c) => typeof c !== "string");
	assert.ok(cases.length > 20, "the corpus has its cases");
	const wrong = [];
	for (const [exports, want] of cases) {
		const got = nodeAnswer(exports);
		let same;
		if (want.exports) same = JSON.stringify(got.exports) === JSON.stringify(want.exports);
		else
			same =
				got.issues?.length === want.issues.length &&
				want.issues.every(([path, message], k) => {
					const [gpath, gmessage] = got.issues[k];
					const words = nodeWords(message);
					// A missing key: Node names the type it wanted (a string, or a field type).
					const ok = words === null ? /^Invalid (input: expected string, received undefined|option: expected one of )/.test(gmessage) : gmessage === words;
					return gpath === path && ok;
				});
		if (!same) wrong.push(`${JSON.stringify(exports)}: C ${JSON.stringify(want)}, Node ${JSON.stringify(got)}`);
	}
	assert.deepEqual(wrong, [], `${wrong.length} of ${cases.length} cases disagree with C`);
});
