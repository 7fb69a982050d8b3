// SPDX-License-Identifier: Apache-2.0
// defineApp: the object an app's entry module exports by default.
//
// The runtime (runtime.mjs) and the app bundle (dist/index.mjs) each carry their own
// copy of this SDK, so the runtime must not rely on `instanceof` or on module identity.
// It finds the app's registry through APP_BRAND, a Symbol.for() key that is the same
// in every copy, and calls schemas only through their `parse`/`parseAsync` methods.

export const APP_BRAND = Symbol.for("berth.app.v1");

/**
 * @typedef {object} ExportDefinition
 * @property {string} name
 * @property {{parse: Function, parseAsync?: Function}} [input]
 * @property {{parse: Function, parseAsync?: Function}} [output]
 * @property {(input: any) => any} handler
 */

/**
 * Define an app. `setup(app)` runs synchronously and registers exports and hooks.
 * @param {(app: any) => void} setup
 */
export function defineApp(setup) {
	/** @type {Map<string, ExportDefinition>} */
	const exports = new Map();
	const installHooks = [];
	const readyHooks = [];
	const app = {
		/** @param {ExportDefinition} def */
		export(def) {
			if (!def || typeof def.name !== "string" || def.name === "")
				throw new TypeError("app.export() needs a definition with a non-empty string name");
			if (typeof def.handler !== "function") throw new TypeError(`export "${def.name}" needs a handler function`);
			if (exports.has(def.name)) throw new Error(`export "${def.name}" is already registered`);
			exports.set(def.name, { name: def.name, input: def.input, output: def.output, handler: def.handler });
		},
		/** @param {() => unknown} fn */
		onInstall(fn) {
			if (typeof fn !== "function") throw new TypeError("app.onInstall() needs a function");
			installHooks.push(fn);
		},
		/** @param {(ctx: any) => unknown} fn */
		onAgentReady(fn) {
			if (typeof fn !== "function") throw new TypeError("app.onAgentReady() needs a function");
			readyHooks.push(fn);
		},
		/** Names of the registered exports, in registration order. */
		get exportNames() {
			return [...exports.keys()];
		},
	};
	Object.defineProperty(app, APP_BRAND, { value: { version: 1, exports, installHooks, readyHooks } });
	if (typeof setup !== "function") throw new TypeError("defineApp() needs a setup function");
	setup(app);
	return app;
}

/**
 * The registry behind an app object, or null when `value` is not a defineApp() result.
 * @param {unknown} value
 * @returns {{version: number, exports: Map<string, ExportDefinition>, installHooks: Function[], readyHooks: Function[]} | null}
 */
export function appRegistry(value) {
	if (value === null || (typeof value !== "object" && typeof value !== "function")) return null;
	const reg = value[APP_BRAND];
	return reg && reg.version === 1 && reg.exports instanceof Map ? reg : null;
}
