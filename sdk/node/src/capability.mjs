// SPDX-License-Identifier: Apache-2.0
// Capability strings: `namespace:action:scope`, the filesystem scope rules (SPEC §1.3,
// §1.4), and the glob match used to answer "is this request covered by what the app
// declared?". The tables come from sdk/capability-model.json, which the C implementation
// (src/capability) is generated from too; test/capability/corpus.json holds the cases
// every implementation must answer alike.
import model from "../../capability-model.json" with { type: "json" };

// "." matches anything but a line terminator (\n, \r, U+2028, U+2029), as in C.
export const CAPABILITY_RE = /^[a-z0-9_-]+:[a-z0-9_-]+:.+$/;
export const ALLOWED_FILESYSTEM_SCOPE_PREFIXES = Object.freeze([...model.filesystemPrefixes]);
const PREFIXES_TEXT = ALLOWED_FILESYSTEM_SCOPE_PREFIXES.join(", ");

/**
 * Split a capability into its parts. The scope keeps any further colons.
 * @param {string} cap
 * @returns {{namespace: string, action: string, scope: string}}
 */
export function parseCapability(cap) {
	const parts = String(cap).split(":");
	// A NUL is shown as \0, as the C implementation shows it.
	if (parts.length < 3)
		throw new Error(`invalid capability string "${String(cap).replaceAll("\0", "\\0")}": expected 'namespace:action:scope'`);
	return { namespace: parts[0], action: parts[1], scope: parts.slice(2).join(":") };
}

/**
 * Whether a scope glob matches a scope. `*` matches any run of characters (including
 * `/`, `.` and `:`) but a line break; every other character, `?` and `[` included, is
 * literal.
 * @param {string} pattern
 * @param {string} value
 */
export function scopeMatches(pattern, value) {
	const re = "^" + pattern.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&")).join(".*") + "$";
	return new RegExp(re).test(value);
}

/**
 * Whether a granted (declared) capability covers a requested one. Not symmetric; a
 * malformed capability on either side never matches.
 * @param {string} granted
 * @param {string} requested
 */
export function matchesCapability(granted, requested) {
	if (!CAPABILITY_RE.test(granted) || !CAPABILITY_RE.test(requested)) return false;
	const g = parseCapability(granted);
	const r = parseCapability(requested);
	return g.namespace === r.namespace && g.action === r.action && scopeMatches(g.scope, r.scope);
}

/**
 * The first problem with a filesystem capability's scope, or null when it is fine. The
 * scope is quoted in messages as JSON.stringify() quotes it.
 * @param {string} scope
 * @returns {string | null}
 */
export function filesystemScopeIssue(scope) {
	const q = JSON.stringify(scope);
	if (scope.includes("\0")) return "filesystem path must not contain a null byte";
	if (!scope.startsWith("/")) return `filesystem path must be absolute (start with "/"), got ${q}`;
	const base = scope.endsWith("/*") ? scope.slice(0, -2) : scope;
	if (base.includes("*"))
		return `filesystem path may only use a trailing "/*" glob (a "*" anywhere else becomes a literal directory name), got ${q}`;
	if (base === "/" || base === "")
		return `filesystem:*:/ would grant the entire container filesystem — declare a path under ${PREFIXES_TEXT} instead`;
	const segments = base.slice(1).split("/");
	if (segments.some((s) => s === "" || s === "." || s === ".."))
		return `filesystem path must be canonical — no empty, "." or ".." segments, and no trailing slash — got ${q}`;
	if (!ALLOWED_FILESYSTEM_SCOPE_PREFIXES.some((p) => base === p || base.startsWith(p + "/")))
		return `filesystem path must be ${PREFIXES_TEXT} or a path beneath one of them, got ${q}`;
	return null;
}

/**
 * What is wrong with a capability, as a manifest reports it: fewer than three parts, or a
 * filesystem:read/write scope that breaks the scope rules; null otherwise. Not the
 * grammar: check CAPABILITY_RE first.
 * @param {string} cap
 * @returns {string | null}
 */
export function capabilityIssue(cap) {
	let p;
	try {
		p = parseCapability(cap);
	} catch (err) {
		return err.message;
	}
	if (p.namespace === "filesystem" && (p.action === "read" || p.action === "write")) return filesystemScopeIssue(p.scope);
	return null;
}
