// SPDX-License-Identifier: Apache-2.0
// defineConnectorApp(): an app whose exports are REST operations described by config.
import { z } from "zod";
import { defineApp } from "./app.mjs";
import { configureEgressProxy } from "./egress.mjs";

const BODYLESS = new Set(["GET", "DELETE"]);
const TYPES = { string: () => z.string(), number: () => z.number(), boolean: () => z.boolean() };

function inputSchema(params = {}) {
	const shape = {};
	for (const [name, p] of Object.entries(params)) {
		const make = TYPES[p.type];
		if (!make) throw new Error(`connector param "${name}" has unknown type "${p.type}"`);
		let s = make();
		if (p.description) s = s.describe(p.description);
		shape[name] = p.required === false ? s.optional() : s;
	}
	return z.object(shape);
}

function credentialHeaders(auth) {
	if (!auth || auth.type === "none") return {};
	const value = process.env[auth.envVar];
	if (!value) return null;
	if (auth.type === "bearer") return { authorization: `Bearer ${value}` };
	if (auth.type === "header") return { [auth.headerName]: value };
	throw new Error(`unknown connector auth type "${auth.type}"`);
}

/**
 * @param {{baseUrl: string, auth?: {type: "none"|"bearer"|"header", envVar?: string, headerName?: string},
 *          operations: {export: string, method: string, path: string, params?: Record<string, any>, description?: string}[]}} config
 */
export function defineConnectorApp(config) {
	configureEgressProxy();
	const base = String(config.baseUrl).replace(/\/+$/, "");
	return defineApp((app) => {
		for (const op of config.operations) {
			const method = op.method.toUpperCase();
			app.export({
				name: op.export,
				input: inputSchema(op.params),
				handler: async (input) => {
					const headers = credentialHeaders(config.auth);
					if (headers === null)
						return { stub: true, note: `set ${config.auth.envVar} for live data (this call was not sent)` };
					let path = op.path;
					const query = new URLSearchParams();
					const body = {};
					for (const [name, p] of Object.entries(op.params ?? {})) {
						const v = input[name];
						if (v === undefined) continue;
						if (p.in === "path") path = path.split(`{${name}}`).join(encodeURIComponent(String(v)));
						else if (p.in === "query") query.append(name, String(v));
						else body[name] = v;
					}
					const qs = query.toString();
					const init = { method, headers: { accept: "application/json", ...headers } };
					if (!BODYLESS.has(method)) {
						init.headers["content-type"] = "application/json";
						init.body = JSON.stringify(body);
					}
					const res = await fetch(base + path + (qs ? `?${qs}` : ""), init);
					const text = await res.text();
					let data = text;
					try {
						data = JSON.parse(text);
					} catch {}
					return { status: res.status, data };
				},
			});
		}
		app.onAgentReady(async (ctx) => {
			await ctx.contextBus.register({ app: ctx.manifest.name });
		});
	});
}
