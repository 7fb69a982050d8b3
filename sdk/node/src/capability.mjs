// SPDX-License-Identifier: Apache-2.0
// Capability strings: `namespace:action:scope`, and the glob match used to answer
// "is this request covered by what the app declared?".

export const CAPABILITY_RE = /^[a-z0-9_-]+:[a-z0-9_-]+:.+$/;
export const ALLOWED_FILESYSTEM_SCOPE_PREFIXES = ["/workspace", "/context", "/tmp", "/app"];

/**
 * Split a capability into its parts. The scope keeps any further colons.
 * @param {string} cap
 * @returns {{namespace: string, action: string, scope: string}}
 */
export function parseCapability(cap) {
	const parts = String(cap).split(":");
	if (parts.length < 3)
		throw new Error(`invalid capability string "${cap}": expected 'namespace:action:scope'`);
	return { namespace: parts[0], action: parts[1], scope: parts.slice(2).join(":") };
}

/**
 * Whether a scope glob matches a scope. `*` matches any run of characters (including
 * `/`, `.` and `:`); every other character, `?` and `[` included, is literal.
 * @param {string} pattern
 * @param {string} value
 */
export function scopeMatches(pattern, value) {
	const re = "^" + pattern.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&")).join(".*") + "$";
	return new RegExp(re, "s").test(value);
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
 * The first problem with a filesystem capability's scope, or null when it is fine.
 * @param {string} scope
 * @returns {string | null}
 */
export function filesystemScopeIssue(scope) {
	if (scope.includes("\0")) return "filesystem path must not contain a null byte";
	if (!scope.startsWith("/")) return `filesystem path must be absolute (start with "/"), got "${scope}"`;
	const base = scope.endsWith("/*") ? scope.slice(0, -2) : scope;
	if (base.includes("*"))
		return `filesystem path may only use a trailing "/*" glob (a "*" anywhere else becomes a literal directory name), got "${scope}"`;
	if (base === "/" || base === "")
		return "filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead";
	const segments = base.slice(1).split("/");
	if (segments.some((s) => s === "" || s === "." || s === ".."))
		return `filesystem path must be canonical — no empty, "." or ".." segments, and no trailing slash — got "${scope}"`;
	if (!ALLOWED_FILESYSTEM_SCOPE_PREFIXES.some((p) => base === p || base.startsWith(p + "/")))
		return `filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got "${scope}"`;
	return null;
}
