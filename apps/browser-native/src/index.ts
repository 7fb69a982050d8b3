// SPDX-License-Identifier: Apache-2.0
// A Chromium an agent drives and a person watches (docs/browser.md).
//
// Chromium and Playwright's client both come from the browser layer, not from this bundle:
// the VM lays the layer over its root image and tells the app where they are
// (BERTH_BROWSER_EXECUTABLE, NODE_PATH). Playwright talks to Chromium over a pipe
// (--remote-debugging-pipe, its default for launch()): no DevTools port is ever opened.
// Every request goes through the egress broker, which lets through only the hosts the
// browser:navigate: capabilities name.
import { mkdir, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { defineApp } from "@berthos/sdk";
import { z } from "zod";

const PROXY = process.env.BERTH_EGRESS_PROXY_URL || "http://127.0.0.1:8090";
const WORKSPACE = process.env.BERTH_WORKSPACE_ROOT || "/workspace";
// Under emulation Chromium takes tens of seconds to start and to lay out a page.
const TIMEOUT_MS = Number(process.env.BROWSER_TIMEOUT_MS) || 120_000;
const TEXT_MAX = 200_000;

// Loaded at run time from the layer (NODE_PATH): a computed name, so the bundler leaves it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Playwright = any;
function playwright(): Playwright {
	const name = process.env.BERTH_PLAYWRIGHT_MODULE || "playwright-core";
	const paths = (process.env.NODE_PATH || "").split(":").filter(Boolean);
	const req = createRequire(import.meta.url);
	try {
		return req(req.resolve(name, { paths }));
	} catch (e) {
		throw new Error(
			`Playwright's client (${name}) is not here: this app needs the browser layer (berth vm install --layer browser); ${(e as Error).message}`,
		);
	}
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
let page: Promise<any> | undefined;

// One browser and one page for the app's life, started on first use. Chromium's own
// sandbox needs user namespaces, which the app's seccomp filter refuses: the app's
// Landlock, seccomp and uid confine Chromium instead (docs/browser.md).
function thePage() {
	page ??= (async () => {
		const executablePath = process.env.BERTH_BROWSER_EXECUTABLE;
		if (!executablePath) throw new Error("no BERTH_BROWSER_EXECUTABLE: this app needs the browser layer (berth vm install --layer browser)");
		const browser = await playwright().chromium.launch({
			executablePath,
			headless: false,
			chromiumSandbox: false,
			proxy: { server: PROXY, bypass: "<-loopback>" },
			timeout: TIMEOUT_MS,
			args: [
				// Without Chromium's sandbox its zygote only forks, through a clone() the
				// app's seccomp filter refuses; without it each process is a plain exec.
				"--no-zygote",
				// One process less to start under emulation: software drawing in the browser's.
				"--in-process-gpu",
				"--disable-gpu",
				"--disable-dev-shm-usage",
				"--disable-crash-reporter",
				"--no-first-run",
				"--window-position=0,0",
				"--window-size=1280,800",
			],
		});
		const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
		const p = await context.newPage();
		p.setDefaultTimeout(TIMEOUT_MS);
		return p;
	})().catch((e) => {
		page = undefined;
		throw e;
	});
	return page;
}

// The broker answers a refused host with a 403 of its own; Chromium shows that page for a
// plain http:// URL, and fails the tunnel (ERR_TUNNEL_CONNECTION_FAILED) for https://.
// Only the web: a file:, chrome:, view-source: or javascript: URL would not go through the
// broker, and would show the agent what the app's uid may read (/proc/self/environ, ...).
function webUrl(url: string): string {
	const scheme = new URL(url).protocol;
	if (scheme !== "http:" && scheme !== "https:") throw new Error(`only http: and https: URLs may be opened, not ${scheme}`);
	return url;
}

async function go(url: string) {
	webUrl(url);
	const p = await thePage();
	const response = await p.goto(url, { waitUntil: "load" });
	const status = response ? response.status() : 0;
	const body = status === 403 ? (await response.text()).trim() : "";
	if (body.startsWith("egress denied")) throw new Error(body);
	return { url: p.url(), title: await p.title(), status };
}

export default defineApp((app) => {
	app.export({
		name: "navigate",
		input: z.object({ url: z.string().url().refine((u) => /^https?:$/.test(new URL(u).protocol), "only http: and https: URLs") }),
		output: z.object({ url: z.string(), title: z.string(), status: z.number() }),
		handler: ({ url }) => go(url),
	});

	app.export({
		name: "click",
		input: z.object({ selector: z.string().min(1) }),
		output: z.object({ url: z.string(), title: z.string() }),
		handler: async ({ selector }) => {
			const p = await thePage();
			await Promise.all([p.waitForLoadState("load"), p.click(selector)]);
			await p.waitForLoadState("load");
			return { url: p.url(), title: await p.title() };
		},
	});

	app.export({
		name: "get_page_text",
		output: z.object({ text: z.string() }),
		handler: async () => {
			const p = await thePage();
			const text: string = await p.innerText("body").catch(() => "");
			return { text: text.slice(0, TEXT_MAX) };
		},
	});

	app.export({
		name: "screenshot",
		input: z.object({ path: z.string().optional() }).optional(),
		output: z.object({ width: z.number(), height: z.number(), png: z.string().optional(), path: z.string().optional() }),
		handler: async (input) => {
			const p = await thePage();
			const png: Buffer = await p.screenshot({ type: "png" });
			const { width, height } = p.viewportSize() ?? { width: 0, height: 0 };
			if (!input?.path) return { width, height, png: png.toString("base64") };
			const file = resolve(WORKSPACE, input.path);
			if (!file.startsWith(WORKSPACE + "/")) throw new Error(`path must be inside ${WORKSPACE}`);
			await mkdir(dirname(file), { recursive: true });
			await writeFile(file, png);
			return { width, height, path: file };
		},
	});

	app.export({
		name: "search",
		input: z.object({ query: z.string().min(1), maxResults: z.number().int().positive().max(50).optional() }),
		output: z.object({ results: z.array(z.object({ title: z.string(), url: z.string() })) }),
		handler: async ({ query, maxResults }) => {
			const template = process.env.BROWSER_SEARCH_URL || "https://html.duckduckgo.com/html/?q={query}";
			await go(template.replace("{query}", encodeURIComponent(query)));
			const p = await thePage();
			// DuckDuckGo's result links when it is that page; otherwise every outbound link.
			const results: { title: string; url: string }[] = await p.evaluate(() => {
				const ddg = Array.from(document.querySelectorAll("a.result__a"));
				const links = ddg.length ? ddg : Array.from(document.querySelectorAll("a[href^='http']"));
				return links.map((a) => ({ title: (a.textContent || "").trim(), url: (a as HTMLAnchorElement).href }));
			});
			return { results: results.filter((r) => r.title).slice(0, maxResults ?? 10) };
		},
	});
});
