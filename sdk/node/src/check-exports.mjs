// SPDX-License-Identifier: Apache-2.0
// berth test's stub invocation (SPEC §2.9): every export of berth.yml called once, in
// process, with inputs made from its declared fields, and one JSON line of results.
import { invokeExport } from "./rpc.mjs";

const HINTS = { url: "https://example.com", selector: "body", email: "test@example.com" };

/** A stub value for one declared field: its type name, or {type, ...}. */
export function stubValue(name, spec) {
	const type = typeof spec === "string" ? spec : spec?.type;
	switch (type) {
		case "number":
		case "integer":
			return 1;
		case "boolean":
			return true;
		case "array":
			return [];
		case "object":
			return typeof spec === "object" && spec.properties ? stubInput(spec.properties) : {};
		default:
			return HINTS[name] ?? "berth-test-stub";
	}
}

/** The stub input of an export whose berth.yml `input` is @fields. */
export function stubInput(fields = {}) {
	return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, stubValue(k, v)]));
}

/**
 * Call each export with its stub input. Returns {ok, results: [{export, ok, error?}]};
 * @mismatch (the bijection check's message, or null) fails the run before any call.
 */
export async function checkExports(manifest, registry, mismatch) {
	if (mismatch) return { ok: false, error: mismatch, results: [] };
	const results = [];
	for (const e of manifest.exports) {
		const resp = await invokeExport(registry, { id: e.name, export: e.name, input: stubInput(e.input) });
		results.push(resp.error === undefined ? { export: e.name, ok: true } : { export: e.name, ok: false, error: resp.error });
	}
	return { ok: results.every((r) => r.ok), results };
}
