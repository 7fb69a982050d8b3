// SPDX-License-Identifier: Apache-2.0
// The line-JSON RPC protocol (SPEC §2.5): one JSON object per "\n"-terminated line.
// Request {"id","export","input"} → {"id","result"} or {"id","error":"<string>"}.
import net from "node:net";
import { join } from "node:path";

/** A request line longer than this closes the connection (stdio: the line is dropped). */
export const MAX_LINE_BYTES = 32 << 20;

export function logRuntime(msg) {
	process.stderr.write(`[berth:runtime] ${msg}\n`);
}

function errorText(err) {
	if (err instanceof Error) return err.message;
	if (err && typeof err === "object" && typeof err.message === "string") return err.message;
	return String(err);
}

async function parseWith(schema, value) {
	return typeof schema.parseAsync === "function" ? schema.parseAsync(value) : schema.parse(value);
}

/**
 * Call one export the way every transport does: lookup → governance gate → input schema
 * → handler → output schema. Never throws; returns the response object.
 * @param {{exports: Map<string, any>}} registry
 * @param {{id?: unknown, export?: unknown, input?: unknown}} request
 * @param {{caller?: string, gate?: (exportName: string, input: unknown, caller: string) => Promise<string | null>}} [opts]
 */
export async function invokeExport(registry, request, opts = {}) {
	const id = request.id === undefined ? null : request.id;
	const name = request.export;
	const def = typeof name === "string" ? registry.exports.get(name) : undefined;
	if (!def) return { id, error: `no such export "${String(name)}"` };
	try {
		if (opts.gate) {
			const denial = await opts.gate(name, request.input, opts.caller ?? "host");
			if (denial) return { id, error: denial };
		}
		const input = def.input ? await parseWith(def.input, request.input) : request.input;
		let result = await def.handler(input);
		if (def.output) result = await parseWith(def.output, result);
		return { id, result: result === undefined ? null : result };
	} catch (err) {
		return { id, error: errorText(err) };
	}
}

/** Serialise a response as one line; a result JSON cannot carry becomes an error. */
export function responseLine(resp) {
	try {
		return JSON.stringify(resp) + "\n";
	} catch (err) {
		return JSON.stringify({ id: resp.id, error: `result is not JSON-serialisable: ${errorText(err)}` }) + "\n";
	}
}

/**
 * Read request lines from `readable` and answer each through `write`. Requests run
 * concurrently; answers go out as they finish, so callers correlate by id.
 * @param {import("node:stream").Readable} readable
 * @param {(line: string) => void} write
 * @param {(request: object) => Promise<object>} handle
 * @param {{closeOnOversize?: () => void}} [opts]
 * @returns {{inflight: Set<Promise<void>>}}
 */
export function serveLines(readable, write, handle, opts = {}) {
	const inflight = new Set();
	let chunks = [];
	let size = 0;
	let discarding = false;
	const onLine = (buf) => {
		const line = buf.toString("utf8").replace(/\r$/, "");
		if (line.trim() === "") return;
		let req;
		try {
			req = JSON.parse(line);
		} catch {
			logRuntime(`ignoring non-JSON RPC line: ${line}`);
			return;
		}
		if (typeof req !== "object" || req === null || Array.isArray(req)) {
			logRuntime(`ignoring RPC line that is not a request object: ${line}`);
			return;
		}
		const p = handle(req).then(
			(resp) => write(responseLine(resp)),
			(err) => write(responseLine({ id: req.id ?? null, error: errorText(err) })),
		);
		inflight.add(p);
		p.finally(() => inflight.delete(p));
	};
	readable.on("data", (chunk) => {
		let start = 0;
		for (;;) {
			const nl = chunk.indexOf(10, start);
			if (nl < 0) break;
			const piece = chunk.subarray(start, nl);
			start = nl + 1;
			if (discarding) {
				discarding = false;
				continue;
			}
			const line = size ? Buffer.concat([...chunks, piece]) : piece;
			chunks = [];
			size = 0;
			onLine(line);
		}
		if (start < chunk.length && !discarding) {
			const rest = chunk.subarray(start);
			chunks.push(rest);
			size += rest.length;
			if (size > MAX_LINE_BYTES) {
				logRuntime(`RPC request line longer than ${MAX_LINE_BYTES} bytes; dropping it`);
				chunks = [];
				size = 0;
				discarding = true;
				opts.closeOnOversize?.();
			}
		}
	});
	return { inflight };
}

/**
 * The governance gate (SPEC §9.2): when BERTH_GOVERNANCE_APP names a governor, every
 * call not made by the governor itself is put to the governor's `evaluate_action`
 * export over its per-caller socket. Unreachable or slow ⇒ denied (fail closed).
 * Returns null when there is no gate for this app.
 * @param {string} appName
 */
export function governanceGate(appName, env = process.env) {
	const governor = env.BERTH_GOVERNANCE_APP;
	if (!governor || env.BERTH_GOVERNANCE_EXEMPT === "1" || governor === appName) return null;
	const root = env.BERTH_GOVERNANCE_SOCKET_ROOT || "/run/berth";
	const socketPath = join(root, governor, "peers", appName, "rpc.sock");
	const timeoutMs = Number(env.BERTH_GOVERNANCE_TIMEOUT_MS) > 0 ? Number(env.BERTH_GOVERNANCE_TIMEOUT_MS) : 5000;
	return async (exportName, input, caller) => {
		if (caller === governor) return null;
		let answer;
		try {
			answer = await askOnce(socketPath, {
				id: `gate-${process.pid}-${Date.now()}`,
				export: "evaluate_action",
				input: { app: appName, export: exportName, input: input ?? null, caller },
			}, timeoutMs);
		} catch (err) {
			return `governance denied ${exportName}: governance unavailable (${errorText(err)})`;
		}
		if (typeof answer.error === "string") return `governance denied ${exportName}: governance unavailable (${answer.error})`;
		if (answer.result && answer.result.allowed === true) return null;
		const reason = answer.result && typeof answer.result.reason === "string" ? answer.result.reason : "not allowed";
		return `governance denied ${exportName}: ${reason}`;
	};
}

/** Send one request line to a unix socket and wait for the answer with the same id. */
export function askOnce(socketPath, request, timeoutMs) {
	return new Promise((resolve, reject) => {
		const sock = net.createConnection({ path: socketPath });
		let buf = "";
		const done = (fn, v) => {
			clearTimeout(timer);
			sock.destroy();
			fn(v);
		};
		const timer = setTimeout(() => done(reject, new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
		sock.on("error", (err) => done(reject, err));
		sock.on("connect", () => sock.write(JSON.stringify(request) + "\n"));
		sock.on("data", (d) => {
			buf += d.toString("utf8");
			let nl;
			while ((nl = buf.indexOf("\n")) >= 0) {
				const line = buf.slice(0, nl);
				buf = buf.slice(nl + 1);
				try {
					const msg = JSON.parse(line);
					if (msg && msg.id === request.id) return done(resolve, msg);
				} catch {}
			}
		});
		sock.on("end", () => done(reject, new Error("connection closed before an answer")));
	});
}
