// SPDX-License-Identifier: Apache-2.0
// berth.yml.json, which the bundler leaves in a share beside berth.yml: what the YAML
// parser made of berth.yml's bytes, keyed by their sha256, so that the runtime need not
// load the parser (bundle.mjs, runtime.mjs).
import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

export const PARSED_COPY_NAME = "berth.yml.json";

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/**
 * The copy's bytes for `value`, parsed from `bytes`; null when JSON cannot carry the value
 * exactly (a YAML .inf, say), and the runtime must parse berth.yml itself.
 * @param {Buffer} bytes @param {unknown} value
 */
export function parsedCopy(bytes, value) {
	const text = JSON.stringify({ berthYmlSha256: sha256(bytes), value });
	return isDeepStrictEqual(JSON.parse(text).value, value) ? Buffer.from(text + "\n") : null;
}

/**
 * The value a copy holds when it was made from these very bytes, else undefined (no copy,
 * not JSON, another berth.yml's).
 * @param {Buffer} bytes @param {string | null} copyText
 */
export function valueFromCopy(bytes, copyText) {
	if (copyText === null) return undefined;
	try {
		const copy = JSON.parse(copyText);
		return copy?.berthYmlSha256 === sha256(bytes) ? copy.value : undefined;
	} catch {
		return undefined;
	}
}
