// SPDX-License-Identifier: Apache-2.0
// configureEgressProxy(): route this process's fetch() through the sandbox's CONNECT
// proxy (BERTH_EGRESS_PROXY_URL). Node 18 has no public undici export, so the ProxyAgent
// comes from the undici package, carried once by runtime.mjs rather than by every app
// bundle; the runtime hands it over through RUNTIME_KEY.
import { createRequire } from "node:module";

export const RUNTIME_KEY = Symbol.for("berth.runtime.v1");

/** The runtime's services when this process runs under runtime.mjs, else undefined. */
export function runtimeServices() {
	return globalThis[RUNTIME_KEY];
}

/**
 * Install an undici ProxyAgent as the global fetch dispatcher.
 * @param {{ProxyAgent: any, setGlobalDispatcher: Function}} undici
 * @param {string} url
 */
export function installProxyAgent(undici, url) {
	undici.setGlobalDispatcher(new undici.ProxyAgent(url));
}

/**
 * Route global fetch() through BERTH_EGRESS_PROXY_URL when it is set. Returns whether
 * a proxy was installed; a no-op (false) when the variable is unset.
 * @returns {boolean}
 */
export function configureEgressProxy() {
	const url = process.env.BERTH_EGRESS_PROXY_URL;
	if (!url) return false;
	const rt = runtimeServices();
	if (rt && typeof rt.configureEgressProxy === "function") return rt.configureEgressProxy(url);
	// Not under runtime.mjs (a test, a plain `node dist/index.mjs`): use an installed undici.
	let undici;
	try {
		undici = createRequire(import.meta.url)("undici");
	} catch {
		throw new Error(
			"configureEgressProxy: BERTH_EGRESS_PROXY_URL is set but the undici package is not installed (it is provided by the Berth runtime inside a sandbox)",
		);
	}
	installProxyAgent(undici, url);
	return true;
}
