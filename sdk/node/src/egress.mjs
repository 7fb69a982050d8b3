// SPDX-License-Identifier: Apache-2.0
// configureEgressProxy(): route this process's fetch() through the sandbox's CONNECT
// proxies: api.github.com through the GitHub broker (BERTH_GITHUB_API_PROXY), every other
// host through the egress broker (BERTH_EGRESS_PROXY_URL), or directly when there is none. Node 18 has no public undici export, so the ProxyAgent
// comes from the undici package, carried once by runtime.mjs rather than by every app
// bundle; the runtime hands it over through RUNTIME_KEY.
import { createRequire } from "node:module";

export const RUNTIME_KEY = Symbol.for("berth.runtime.v1");

/** The runtime's services when this process runs under runtime.mjs, else undefined. */
export function runtimeServices() {
	return globalThis[RUNTIME_KEY];
}

/** The host only the GitHub broker reaches (the egress broker refuses it). */
export const GITHUB_API_HOST = "api.github.com";

/**
 * The proxies this process was told about.
 * @returns {{egress: string|null, github: string|null}}
 */
export function proxyRoutes(env = process.env) {
	return { egress: env.BERTH_EGRESS_PROXY_URL || null, github: env.BERTH_GITHUB_API_PROXY || null };
}

/**
 * Install the global fetch dispatcher for @routes: a ProxyAgent for the egress broker, and,
 * with a GitHub broker, one that sends api.github.com there and everything else on.
 * @param {any} undici
 * @param {{egress: string|null, github: string|null}|string} routes (a string: the egress URL)
 */
export function installProxyAgent(undici, routes) {
	const r = typeof routes === "string" ? { egress: routes, github: null } : routes;
	const other = r.egress ? new undici.ProxyAgent(r.egress) : null;
	if (!r.github) {
		undici.setGlobalDispatcher(other);
		return;
	}
	const github = new undici.ProxyAgent(r.github);
	const rest = other ?? new undici.Agent();
	class GithubRouting extends undici.Dispatcher {
		dispatch(opts, handler) {
			const host = new URL(String(opts.origin)).hostname.toLowerCase();
			return (host === GITHUB_API_HOST ? github : rest).dispatch(opts, handler);
		}
		async close() {
			await Promise.all([github.close(), rest.close()]);
		}
		async destroy(err) {
			await Promise.all([github.destroy(err), rest.destroy(err)]);
		}
	}
	undici.setGlobalDispatcher(new GithubRouting());
}

/**
 * Route global fetch() through the sandbox's proxies when it has any (BERTH_EGRESS_PROXY_URL,
 * BERTH_GITHUB_API_PROXY). Returns whether a proxy was installed; a no-op (false) when
 * neither variable is set.
 * @returns {boolean}
 */
export function configureEgressProxy() {
	const routes = proxyRoutes();
	if (!routes.egress && !routes.github) return false;
	const rt = runtimeServices();
	if (rt && typeof rt.configureEgressProxy === "function") return rt.configureEgressProxy(routes);
	// Not under runtime.mjs (a test, a plain `node dist/index.mjs`): use an installed undici.
	let undici;
	try {
		undici = createRequire(import.meta.url)("undici");
	} catch {
		throw new Error(
			"configureEgressProxy: a proxy is set (BERTH_EGRESS_PROXY_URL or BERTH_GITHUB_API_PROXY) but the undici package is not installed (it is provided by the Berth runtime inside a sandbox)",
		);
	}
	installProxyAgent(undici, routes);
	return true;
}
