// SPDX-License-Identifier: Apache-2.0
// The app runtime (SPEC §2.3): load the manifest, import the app, check its exports,
// connect the context bus and semantic-fs, run the hooks, serve RPC, say "ready".
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import net from "node:net";
import { basename, dirname, join, resolve } from "node:path";
import { timingSafeEqual } from "node:crypto";
import { pathToFileURL } from "node:url";
import { appRegistry } from "./app.mjs";
import { checkExports } from "./check-exports.mjs";
import { connectContextBus, createLocalContextBus } from "./context-bus.mjs";
import { installProxyAgent, RUNTIME_KEY } from "./egress.mjs";
import { readManifestBytes, validateManifest } from "./manifest.mjs";
import { PARSED_COPY_NAME, parsedCopy, valueFromCopy } from "./manifest-copy.mjs";
import { governanceGate, invokeExport, logRuntime, responseLine, serveLines } from "./rpc.mjs";
import { connectSemanticFs, createLocalSemanticFs, createUnavailableSemanticFs } from "./semantic-fs.mjs";
import { SHARED_ZOD_FILE, SHARED_ZOD_KEY } from "./zod-stand-in.mjs";

class StartupError extends Error {}

/** The exports bijection check's message, or null when code and manifest agree. */
export function exportsMismatch(declared, implemented) {
	const missing = declared.filter((n) => !implemented.includes(n));
	const extra = implemented.filter((n) => !declared.includes(n));
	if (!missing.length && !extra.length) return null;
	const parts = [];
	if (missing.length) parts.push(`declared in berth.yml but not implemented: ${missing.join(", ")}`);
	if (extra.length) parts.push(`implemented in code but not declared in berth.yml: ${extra.join(", ")}`);
	return `exports mismatch between berth.yml and app code — ${parts.join("; ")}`;
}

function defaultEntry(cwd) {
	const mjs = join(cwd, "dist", "index.mjs");
	return existsSync(mjs) ? mjs : join(cwd, "dist", "index.js");
}

/** Keep stdout for RPC answers only: console output from the app goes to stderr. */
function routeConsoleToStderr() {
	for (const k of ["log", "info", "debug"]) console[k] = console.error;
}

async function connectBus(env) {
	const socketPath = env.BERTH_CONTEXT_BUS_SOCKET || "/tmp/berth-context-bus.sock";
	try {
		const bus = await connectContextBus({ socketPath });
		logRuntime(`context bus connected at ${socketPath}`);
		return bus;
	} catch (err) {
		logRuntime(`context bus unavailable at ${socketPath} (${err.message}); using an in-process bus`);
		return createLocalContextBus();
	}
}

async function connectSfs(env, appName) {
	const socketPath = env.BERTH_SEMANTIC_FS_SOCKET || "/tmp/berth-semantic-fs.sock";
	const inSandbox = Boolean(env.BERTH_BOOT_ID);
	if (env.BERTH_NO_SEMANTIC_FS === "1")
		return inSandbox ? createUnavailableSemanticFs("this sandbox runs no semantic-fs daemon") : createLocalSemanticFs();
	try {
		const sfs = await connectSemanticFs({ socketPath });
		logRuntime(`semantic-fs connected at ${socketPath}`);
		// The daemon answers with the name the kernel gives this process; a different one
		// would mean the app is not who its manifest says, which the daemon logs too. The
		// app does not wait for it (the daemon may still be starting beside it): later
		// calls go out behind it on the same connection, and are answered in order.
		sfs.register({ app: appName }).then(
			(known) => known && logRuntime(`semantic-fs knows this app as "${known}"`),
			(err) => logRuntime(`semantic-fs register failed (${err.message})`),
		);
		return sfs;
	} catch (err) {
		if (inSandbox) {
			logRuntime(`semantic-fs unavailable at ${socketPath} (${err.message}); /context tagging and queries will fail`);
			return createUnavailableSemanticFs(`cannot reach ${socketPath}: ${err.message}`);
		}
		return createLocalSemanticFs();
	}
}

/** Listen on a unix socket path: stale file unlinked first, mode set after bind. */
function listenUnix(path, mode, onConnection) {
	try {
		if (statSync(path).isSocket()) unlinkSync(path);
	} catch {}
	return new Promise((resolvePromise, reject) => {
		const server = net.createServer(onConnection);
		server.once("error", reject);
		server.listen(path, () => {
			server.removeListener("error", reject);
			chmodSync(path, mode);
			resolvePromise(server);
		});
	});
}

function connectionHandler(dispatch, caller) {
	return (sock) => {
		sock.on("error", () => {});
		serveLines(sock, (line) => !sock.destroyed && sock.write(line), (req) => dispatch(req, caller), {
			closeOnOversize: () => sock.destroy(),
		});
	};
}

async function startHttpBridge(env, appName, dispatch) {
	const port = Number(env.BERTH_HTTP_RPC_PORT);
	const token = env.BERTH_HTTP_RPC_TOKEN;
	if (!token) throw new StartupError("BERTH_HTTP_RPC_PORT is set but BERTH_HTTP_RPC_TOKEN is not; refusing to serve RPC over HTTP without a token");
	const expected = Buffer.from(`Bearer ${token}`);
	const send = (res, status, body) => {
		res.writeHead(status, { "content-type": "application/json" });
		res.end(JSON.stringify(body));
	};
	const handler = (req, res) => {
		if (req.method === "GET" && req.url === "/healthz") return send(res, 200, { ok: true });
		if (req.method !== "POST" || req.url !== "/rpc") return send(res, 404, { error: "not found" });
		const got = Buffer.from(req.headers.authorization ?? "");
		if (got.length !== expected.length || !timingSafeEqual(got, expected))
			return send(res, 401, { error: "invalid or missing bearer token" });
		const chunks = [];
		let size = 0;
		req.on("data", (c) => {
			size += c.length;
			if (size > 32 << 20) req.destroy();
			else chunks.push(c);
		});
		req.on("end", async () => {
			let body;
			try {
				body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
			} catch {
				return send(res, 400, { error: "invalid JSON body" });
			}
			if (typeof body !== "object" || body === null || Array.isArray(body)) return send(res, 400, { error: "invalid JSON body" });
			const resp = await dispatch(body, "http");
			res.writeHead(200, { "content-type": "application/json" });
			res.end(responseLine(resp));
		});
	};
	const cert = env.BERTH_HTTP_RPC_TLS_CERT;
	const key = env.BERTH_HTTP_RPC_TLS_KEY;
	if (Boolean(cert) !== Boolean(key)) throw new StartupError("set both BERTH_HTTP_RPC_TLS_CERT and BERTH_HTTP_RPC_TLS_KEY, or neither");
	// Imported here: compiling them costs an app that serves no HTTP a good part of a
	// second under emulation.
	const { default: protocol } = await import(cert ? "node:https" : "node:http");
	const server = cert ? protocol.createServer({ cert: readFileSync(cert), key: readFileSync(key) }, handler) : protocol.createServer(handler);
	return new Promise((res, rej) => {
		server.once("error", rej);
		server.listen(port, "0.0.0.0", () => {
			logRuntime(`serving "${appName}" over ${cert ? "HTTPS" : "HTTP"} on port ${port}`);
			res(server);
		});
	});
}

/**
 * The manifest at `path`. The bundler leaves berth.yml parsed beside it (manifest-copy.mjs);
 * when that copy was made from these very bytes, the YAML parser, most of the runtime's
 * code, is neither loaded nor run. Beside berth.yml, not beside this module, which a warm
 * Node loads from the root image (node-warm.mjs).
 */
async function loadAppManifest(path) {
	const bytes = readManifestBytes(path);
	let copy = null;
	try {
		copy = readFileSync(join(dirname(path), PARSED_COPY_NAME), "utf8");
	} catch {}
	const value = valueFromCopy(bytes, copy);
	if (value !== undefined) {
		try {
			return validateManifest(value, { file: basename(path), path });
		} catch {
			// The same value parsed again below says what is wrong, with line numbers.
		}
	}
	const { parseManifest } = await import("./manifest-load.mjs");
	return parseManifest(bytes, path).manifest;
}

/**
 * What every app's start runs before the app's code, run once on a sample manifest: the warm
 * Node of a restored VM calls this before any app exists (src/berth-init/node-warm.mjs), so
 * that V8 has compiled it there, not in each app's start under emulation. Reads nothing.
 */
export function warmUp() {
	const value = {
		name: "warm-up",
		version: "0.1.0",
		description: "what an app's start validates",
		capabilities: ["filesystem:write:/workspace", "network:host:api.example.com"],
		secrets: ["WARM_UP_TOKEN"],
		exports: [{ name: "hello", description: "says hello", input: { name: "string", count: "number" }, output: { text: "string" } }, { name: "bye" }],
	};
	const bytes = Buffer.from(JSON.stringify(value));
	const copy = parsedCopy(bytes, value);
	validateManifest(valueFromCopy(bytes, copy === null ? null : copy.toString("utf8")), { file: "berth.yml", path: "/warm-up/berth.yml" });
}

/**
 * Boot and serve. Resolves once the app is ready; the process then lives as long as
 * its servers do.
 * @param {NodeJS.ProcessEnv} [env]
 */
export async function main(env = process.env) {
	routeConsoleToStderr();
	const cwd = process.cwd();
	const manifestPath = resolve(env.BERTH_MANIFEST_PATH || join(cwd, "berth.yml"));
	const entry = resolve(env.BERTH_APP_ENTRY || defaultEntry(cwd));
	const cleanup = [];
	try {
		logRuntime(`loading manifest from ${manifestPath}`);
		const manifest = await loadAppManifest(manifestPath);

		// Services the app's own copy of the SDK picks up (egress.mjs).
		let undici = null;
		// A chunk of the bundled runtime of its own (bundle.mjs), whose default export is
		// undici's module.exports; unbundled, Node's namespace of the package has it too.
		if (env.BERTH_EGRESS_PROXY_URL || env.BERTH_GITHUB_API_PROXY) {
			const m = await import("undici");
			undici = m.default ?? m;
		}
		let proxied = null;
		globalThis[RUNTIME_KEY] = {
			manifest,
			manifestPath,
			configureEgressProxy(routes) {
				const r = typeof routes === "string" ? { egress: routes, github: null } : routes;
				const key = JSON.stringify(r);
				if (proxied === key) return true;
				if (!undici) throw new Error("configureEgressProxy: the runtime has no proxy support loaded");
				installProxyAgent(undici, r);
				proxied = key;
				if (r.egress) logRuntime(`fetch() goes through the egress proxy at ${r.egress}`);
				if (r.github) logRuntime(`fetch() to api.github.com goes through the GitHub broker at ${r.github}`);
				return true;
			},
		};

		// A bundle whose zod is Berth's takes it from here (zod-stand-in.mjs): the share's
		// copy, unless a restored VM's warm Node set the root image's, the same bytes.
		const zodKey = Symbol.for(SHARED_ZOD_KEY);
		const sharedZod = join(dirname(entry), "..", SHARED_ZOD_FILE);
		if (!globalThis[zodKey] && existsSync(sharedZod)) globalThis[zodKey] = await import(pathToFileURL(sharedZod).href);
		logRuntime(`loading app entry ${entry}`);
		const mod = await import(pathToFileURL(entry).href);
		const registry = appRegistry(mod.default);
		if (!registry) throw new StartupError(`${entry} must have a default export from defineApp()`);

		const mismatch = exportsMismatch(
			manifest.exports.map((e) => e.name),
			[...registry.exports.keys()],
		);
		// berth test: the stub invocation instead of serving (check-exports.mjs), with the
		// app connected as when it serves, but no on_install hook (those run at build).
		const checking = env.BERTH_CHECK_EXPORTS === "1";
		const reportCheck = async (why) => {
			const report = await checkExports(manifest, registry, why);
			process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(report.ok ? 0 : 1));
		};
		if (mismatch && checking) return reportCheck(mismatch);
		if (mismatch) throw new StartupError(mismatch);

		const contextBus = await connectBus(env);
		const semanticFs = await connectSfs(env, manifest.name);
		const ctx = { contextBus, semanticFs, manifest };
		if (!checking) for (const hook of registry.installHooks) await hook();
		for (const hook of registry.readyHooks) await hook(ctx);
		if (checking) return reportCheck(null);

		const gate = governanceGate(manifest.name, env);
		const dispatch = (req, caller) => {
			if (caller !== "host" && caller !== "http" && caller !== "tcp")
				logRuntime(`"${caller}" invoked export "${String(req.export)}"`);
			return invokeExport(registry, req, { caller, gate: gate ?? undefined });
		};

		const servers = [];
		const socketPath = env.BERTH_RPC_SOCKET;
		if (socketPath) {
			servers.push(await listenUnix(socketPath, 0o600, connectionHandler(dispatch, "host")));
			cleanup.push(() => {
				try {
					unlinkSync(socketPath);
				} catch {}
			});
			const peersDir = join(dirname(socketPath), "peers");
			let peers = [];
			try {
				peers = readdirSync(peersDir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
			} catch {}
			for (const caller of peers) {
				const p = join(peersDir, caller, "rpc.sock");
				try {
					servers.push(await listenUnix(p, 0o660, connectionHandler(dispatch, caller)));
				} catch (err) {
					logRuntime(`cannot serve peer "${caller}" at ${p}: ${err.message}`);
				}
			}
		}
		if (env.BERTH_NETWORK_PORT) {
			const port = Number(env.BERTH_NETWORK_PORT);
			const server = net.createServer(connectionHandler(dispatch, "tcp"));
			await new Promise((res, rej) => server.once("error", rej).listen(port, "0.0.0.0", res));
			servers.push(server);
		}
		if (env.BERTH_HTTP_RPC_PORT && (!env.BERTH_HTTP_RPC_APP || env.BERTH_HTTP_RPC_APP === manifest.name))
			servers.push(await startHttpBridge(env, manifest.name, dispatch));
		if (!socketPath) {
			// stdin/stdout: the transport when no socket is given. stdout carries only answers.
			const out = process.stdout;
			const { inflight } = serveLines(process.stdin, (line) => out.write(line), (req) => dispatch(req, "host"));
			process.stdin.on("end", async () => {
				while (inflight.size) await Promise.allSettled([...inflight]);
				if (servers.length === 0) out.write("", () => process.exit(0));
			});
		}

		const stop = () => {
			for (const fn of cleanup) fn();
			process.exit(0);
		};
		process.on("SIGTERM", stop);
		process.on("SIGINT", stop);
		process.on("unhandledRejection", (err) => logRuntime(`unhandled promise rejection: ${err?.stack ?? err}`));
		logRuntime(`"${manifest.name}" ready`);
	} catch (err) {
		for (const fn of cleanup) fn();
		const message = err instanceof Error ? err.message : String(err);
		process.stderr.write(`[berth:runtime] fatal error during startup: ${message}\n`);
		const expected = err instanceof StartupError || err?.name === "ManifestError";
		if (!expected && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
		process.exit(1);
	}
}
