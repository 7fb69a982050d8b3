// SPDX-License-Identifier: Apache-2.0
// Read berth.yml with the `yaml` package (bundled into runtime.mjs) and validate it,
// attaching line numbers to each issue.
import { basename } from "node:path";
import { LineCounter, parseDocument, isMap, isSeq } from "yaml";
import { readManifestBytes, validateManifest, ManifestError } from "./manifest.mjs";

/**
 * Parse YAML text into a plain object, with a function mapping an issue path to a line.
 * @param {string} text @param {string} file
 */
export function parseManifestText(text, file = "berth.yml") {
	const lineCounter = new LineCounter();
	const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
	if (doc.errors.length) {
		const lines = doc.errors.map((e) => {
			const line = e.linePos?.[0]?.line ?? (e.pos ? lineCounter.linePos(e.pos[0]).line : undefined);
			return `${line ? `${file}:${line}` : file} (root): ${e.message.split("\n")[0]}`;
		});
		throw new ManifestError(["invalid berth.yml:", ...lines].join("\n"));
	}
	const lineOf = (path) => {
		for (let n = path.length; n >= 0; n--) {
			let node = doc.contents;
			let ok = true;
			for (const key of path.slice(0, n)) {
				if (isMap(node)) {
					const pair = node.items.find((p) => (p.key?.value ?? p.key) === key);
					node = pair && (pair.value ?? pair.key);
				} else if (isSeq(node)) node = node.items[key];
				else node = undefined;
				if (!node) {
					ok = false;
					break;
				}
			}
			if (ok && node?.range) return lineCounter.linePos(node.range[0]).line;
		}
		return undefined;
	};
	return { value: doc.toJS({ maxAliasCount: 100 }), lineOf };
}

/**
 * Parse and validate berth.yml's bytes: the manifest, and the parser's value it was
 * validated from.
 * @param {Buffer} bytes @param {string} path
 */
export function parseManifest(bytes, path) {
	const file = basename(path);
	const { value, lineOf } = parseManifestText(bytes.toString("utf8"), file);
	return { manifest: validateManifest(value ?? {}, { file, path, lineOf }), value: value ?? {} };
}

/**
 * Load and validate a berth.yml file.
 * @param {string} path
 */
export function loadManifest(path) {
	return parseManifest(readManifestBytes(path), path).manifest;
}
