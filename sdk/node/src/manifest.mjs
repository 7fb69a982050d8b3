// SPDX-License-Identifier: Apache-2.0
// berth.yml validation (no YAML here: the caller parses, so an app bundle that never
// loads a manifest does not carry a YAML parser). Rules and messages: SPEC §1.1–§1.4.
import { readFileSync } from "node:fs";
import model from "../../capability-model.json" with { type: "json" };
import { CAPABILITY_RE, filesystemScopeIssue } from "./capability.mjs";

export const CURRENT_SCHEMA_VERSION = 1;
/** Largest manifest we read; anything bigger is not a hand-written berth.yml. */
export const MAX_MANIFEST_BYTES = 1 << 20;
// The export grammar's tables are the capability model's, as the C validator's are.
const IO_TYPES = model.exportFieldTypes;
const HINTS = model.exportHints;
const NAME_RE = /^[a-z0-9-]+$/;
const VERSION_RE = /^\d+\.\d+\.\d+$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One migration step per older schema_version: MIGRATIONS[v] turns v into v+1. */
const MIGRATIONS = {
	0: (doc) => {
		if (typeof doc.expose === "boolean") doc.expose = { browser: doc.expose, terminal: doc.expose, preview: false };
		return doc;
	},
};

export class ManifestError extends Error {
	/** @param {string} message @param {{path: (string|number)[], message: string, line?: number}[]} [issues] */
	constructor(message, issues = []) {
		super(message);
		this.name = "ManifestError";
		this.issues = issues;
	}
}

function typeName(v) {
	if (v === null) return "null";
	if (Array.isArray(v)) return "array";
	if (typeof v === "number" && Number.isNaN(v)) return "NaN";
	return typeof v;
}

function expected(type, v) {
	return `Invalid input: expected ${type}, received ${typeName(v)}`;
}

/**
 * Resolve schema_version (absent means current), run migrations, and strip the key.
 * @param {Record<string, unknown>} doc @param {string} file
 */
function resolveSchemaVersion(doc, file) {
	if (!("schema_version" in doc)) return doc;
	const v = doc.schema_version;
	if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
		throw new ManifestError(`invalid berth.yml (${file}): schema_version must be a non-negative integer, got ${JSON.stringify(v)}`);
	if (v > CURRENT_SCHEMA_VERSION)
		throw new ManifestError(
			`invalid berth.yml (${file}): declares schema_version: ${v}, but this installed @berth/manifest-schema only supports up to ${CURRENT_SCHEMA_VERSION}. Upgrade @berth/manifest-schema to load this file.`,
		);
	let out = { ...doc };
	delete out.schema_version;
	for (let cur = v; cur < CURRENT_SCHEMA_VERSION; cur++) {
		const step = MIGRATIONS[cur];
		if (!step)
			throw new ManifestError(
				`no migration registered from schema_version ${cur} to ${cur + 1} — this berth.yml cannot be upgraded automatically`,
			);
		out = step(out);
	}
	return out;
}

/**
 * Validate a parsed berth.yml and return it with defaults applied and unknown keys
 * dropped. Throws ManifestError whose message is the `invalid berth.yml:` report.
 * @param {unknown} raw the parsed document
 * @param {{file?: string, path?: string, lineOf?: (path: (string|number)[]) => number | undefined}} [opts]
 */
export function validateManifest(raw, opts = {}) {
	const file = opts.file ?? "berth.yml";
	const issues = [];
	const issue = (path, message) => issues.push({ path, message });

	if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
		issue([], expected("object", raw));
		throw report(issues, file, opts.lineOf);
	}
	const doc = resolveSchemaVersion(/** @type {Record<string, unknown>} */ (raw), opts.path ?? file);
	const has = (k) => Object.prototype.hasOwnProperty.call(doc, k) && doc[k] !== undefined;
	const out = {};

	const str = (k, re, msg, dflt) => {
		if (!has(k)) {
			if (dflt === undefined) issue([k], expected("string", undefined));
			else out[k] = dflt;
			return;
		}
		if (typeof doc[k] !== "string") return issue([k], expected("string", doc[k]));
		if (re && !re.test(doc[k])) return issue([k], msg);
		out[k] = doc[k];
	};
	const bool = (obj, k, path, dflt) => {
		if (obj[k] === undefined) return dflt;
		if (typeof obj[k] !== "boolean") {
			issue(path, expected("boolean", obj[k]));
			return dflt;
		}
		return obj[k];
	};
	const strArray = (k, check) => {
		if (!has(k)) return (out[k] = []);
		if (!Array.isArray(doc[k])) return issue([k], expected("array", doc[k]));
		doc[k].forEach((v, i) => {
			if (typeof v !== "string") return issue([k, i], expected("string", v));
			const m = check && check(v);
			if (m) issue([k, i], m);
		});
		out[k] = [...doc[k]];
	};
	const object = (k) => {
		if (!has(k)) return {};
		if (typeof doc[k] !== "object" || doc[k] === null || Array.isArray(doc[k])) {
			issue([k], expected("object", doc[k]));
			return {};
		}
		return doc[k];
	};

	str("name", NAME_RE, "name must be lowercase alphanumeric with dashes");
	str("version", VERSION_RE, "version must be semver (x.y.z)");
	str("description", null, null, "");
	strArray("capabilities", (c) => {
		if (!CAPABILITY_RE.test(c)) return "capability must be 'namespace:action:scope'";
		const [ns, action] = c.split(":");
		if (ns === "filesystem" && (action === "read" || action === "write"))
			return filesystemScopeIssue(c.split(":").slice(2).join(":"));
		return null;
	});

	out.exports = [];
	if (has("exports")) {
		if (!Array.isArray(doc.exports)) issue(["exports"], expected("array", doc.exports));
		else
			doc.exports.forEach((e, i) => {
				if (typeof e !== "object" || e === null || Array.isArray(e)) return issue(["exports", i], expected("object", e));
				out.exports.push(validateExport(e, ["exports", i], issue));
			});
	}

	strArray("on_install", (c) => {
		if (c.includes("\0")) return "on_install command must not contain a NUL byte";
		if (c.trim() === "") return "on_install command must not be empty";
		return null;
	});
	strArray("on_agent_ready");

	const expose = object("expose");
	out.expose = {
		browser: bool(expose, "browser", ["expose", "browser"], true),
		terminal: bool(expose, "terminal", ["expose", "terminal"], true),
		preview: bool(expose, "preview", ["expose", "preview"], false),
	};
	out.governs = bool(doc, "governs", ["governs"], false);
	const governance = object("governance");
	out.governance = { exempt: bool(governance, "exempt", ["governance", "exempt"], false) };

	const resources = object("resources");
	out.resources = {};
	for (const [k, integer] of [["cpu", false], ["memory_mb", true], ["gpu", true], ["pids", true]]) {
		const v = resources[k];
		if (v === undefined) continue;
		if (typeof v !== "number" || Number.isNaN(v)) issue(["resources", k], expected("number", v));
		else if (integer && !Number.isInteger(v)) issue(["resources", k], "Invalid input: expected int, received number");
		else if (v <= 0) issue(["resources", k], "Too small: expected number to be >0");
		else out.resources[k] = v;
	}

	strArray("secrets", (s) => (ENV_NAME_RE.test(s) ? null : "secrets entries must be valid environment variable names"));

	if (!has("runtime")) out.runtime = "node";
	else if (doc.runtime !== "node" && doc.runtime !== "python")
		issue(["runtime"], 'Invalid option: expected one of "node"|"python"');
	else out.runtime = doc.runtime;

	if (out.governs && !out.exports.some((e) => e.name === "evaluate_action"))
		issue(["governs"], "an app declaring governs: true must also declare an 'evaluate_action' export");

	if (issues.length) throw report(issues, file, opts.lineOf);
	return out;
}

const isMapping = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const badType = `Invalid option: expected one of ${IO_TYPES.map((t) => `"${t}"`).join("|")}`;

/** An optional string of an export or a field (NUL bytes refused, as C reads C strings). */
function text(obj, key, path, what, out, issue) {
	if (obj[key] === undefined) return;
	if (typeof obj[key] !== "string") return issue([...path, key], expected("string", obj[key]));
	if (obj[key].includes("\0")) issue([...path, key], `${what} must not contain a NUL byte`);
	out[key] = obj[key];
}

/** One field of an input or output: a type name, or {type, description}. */
function validateField(f, path, issue) {
	if (!isMapping(f)) {
		if (!IO_TYPES.includes(f)) return issue(path, badType);
		return f;
	}
	const spec = {};
	if (!IO_TYPES.includes(f.type)) issue([...path, "type"], badType);
	else spec.type = f.type;
	text(f, "description", path, "field description", spec, issue);
	return spec;
}

/** One entry of exports: (keys Berth does not know are dropped, as at the top level). */
function validateExport(e, path, issue) {
	const exp = {};
	if (typeof e.name !== "string") issue([...path, "name"], expected("string", e.name));
	else {
		if (e.name.includes("\0")) issue([...path, "name"], "export name must not contain a NUL byte");
		exp.name = e.name;
	}
	text(e, "description", path, "export description", exp, issue);
	text(e, "title", path, "export title", exp, issue);
	for (const side of ["input", "output"]) {
		if (e[side] === undefined) continue;
		if (!isMapping(e[side])) {
			issue([...path, side], expected("object", e[side]));
			continue;
		}
		exp[side] = {};
		for (const [field, f] of Object.entries(e[side])) {
			const spec = validateField(f, [...path, side, field], issue);
			if (spec !== undefined) exp[side][field] = spec;
		}
	}
	if (e.annotations !== undefined) {
		if (!isMapping(e.annotations)) issue([...path, "annotations"], expected("object", e.annotations));
		else {
			exp.annotations = {};
			for (const h of HINTS) {
				const b = e.annotations[h];
				if (b === undefined) continue;
				if (typeof b !== "boolean") issue([...path, "annotations", h], expected("boolean", b));
				else exp.annotations[h] = b;
			}
		}
	}
	return exp;
}

function report(issues, file, lineOf) {
	const lines = issues.map((i) => {
		const line = lineOf ? lineOf(i.path) : undefined;
		i.line = line;
		const where = line ? `${file}:${line}` : file;
		return `${where} ${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`;
	});
	return new ManifestError(["invalid berth.yml:", ...lines].join("\n"), issues);
}

/**
 * berth.yml's bytes, refused above MAX_MANIFEST_BYTES.
 * @param {string} path
 */
export function readManifestBytes(path) {
	const bytes = readFileSync(path);
	if (bytes.length > MAX_MANIFEST_BYTES) throw new ManifestError(`invalid berth.yml (${path}): larger than 1 MiB`);
	return bytes;
}
