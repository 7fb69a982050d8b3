// SPDX-License-Identifier: Apache-2.0
// Semantic-fs control client (SPEC §2.9): frames of a 4-byte big-endian length and
// UTF-8 JSON, request {"id","op",...} → response {"id","ok","error"?,"results"?}.
// The daemon is src/semantic-fs (docs/context.md): it decides who the caller is by
// SO_PEERCRED, so register's `app` is a courtesy it logs, never an identity.
import net from "node:net";

export const DEFAULT_SEMANTIC_FS_SOCKET = "/tmp/berth-semantic-fs.sock";
const CALL_TIMEOUT_MS = 5000;
const MAX_FRAME_BYTES = 8 << 20;
// The daemon refuses a request over 1 MiB; refused here first, without sending it.
const MAX_REQUEST_BYTES = 1 << 20;

function toResult(r) {
	return {
		path: r.path,
		createdBy: r.created_by ?? r.createdBy,
		task: r.task,
		relatedApps: r.related_apps ?? r.relatedApps ?? [],
		createdAt: r.created_at ?? r.createdAt,
		updatedAt: r.updated_at ?? r.updatedAt,
		ranking: r.ranking ?? "keyword",
		...(typeof r.score === "number" ? { score: r.score } : {}),
	};
}

/**
 * An in-process stand-in that keeps tags in memory and answers queries by keyword.
 * Outside a sandbox it lets an app run and be tested without the daemon.
 */
export function createLocalSemanticFs() {
	/** @type {Map<string, any>} */
	const tags = new Map();
	let app = "local";
	return {
		kind: "local",
		async register(info) {
			app = info?.app ?? app;
		},
		async tag(path, meta = {}) {
			const now = Date.now();
			const prev = tags.get(path);
			tags.set(path, {
				path,
				createdBy: prev?.createdBy ?? app,
				task: meta.task ?? prev?.task ?? "",
				relatedApps: meta.relatedApps ?? prev?.relatedApps ?? [],
				createdAt: prev?.createdAt ?? now,
				updatedAt: now,
				ranking: "keyword",
			});
		},
		async query(text, limit) {
			const words = String(text).toLowerCase().split(/\s+/).filter(Boolean);
			const scored = [];
			for (const t of tags.values()) {
				const hay = [t.path, t.createdBy, t.task, ...t.relatedApps].join(" ").toLowerCase();
				const score = words.filter((w) => hay.includes(w)).length;
				if (score > 0 || words.length === 0) scored.push([score, t]);
			}
			scored.sort((a, b) => b[0] - a[0] || b[1].updatedAt - a[1].updatedAt);
			const out = scored.map(([, t]) => ({ ...t, relatedApps: [...t.relatedApps] }));
			return limit === undefined ? out : out.slice(0, limit);
		},
		close() {},
	};
}

/**
 * A client that fails every call with `reason`: inside a sandbox an unreachable daemon
 * must be an error, never a silent empty answer.
 * @param {string} reason
 */
export function createUnavailableSemanticFs(reason) {
	const fail = async () => {
		throw new Error(`semantic-fs is unavailable: ${reason}`);
	};
	return { kind: "unavailable", register: fail, tag: fail, query: fail, close() {} };
}

/** Open one connection to @socketPath within @timeoutMs. */
function openSocket(socketPath, timeoutMs) {
	return new Promise((resolve, reject) => {
		const sock = net.createConnection({ path: socketPath });
		const timer = setTimeout(() => {
			sock.destroy();
			reject(new Error(`timed out after ${timeoutMs} ms connecting to ${socketPath}`));
		}, timeoutMs);
		sock.once("error", (err) => {
			clearTimeout(timer);
			reject(err);
		});
		sock.once("connect", () => {
			clearTimeout(timer);
			sock.removeAllListeners("error");
			resolve(sock);
		});
	});
}

/**
 * Connect to the semantic-fs daemon's control socket. A connection that breaks later (the
 * daemon restarted) is opened again on the next call; the calls that were waiting fail.
 * @param {{socketPath?: string, timeoutMs?: number}} [opts]
 */
export async function connectSemanticFs(opts = {}) {
	const socketPath = opts.socketPath ?? process.env.BERTH_SEMANTIC_FS_SOCKET ?? DEFAULT_SEMANTIC_FS_SOCKET;
	const timeoutMs = opts.timeoutMs ?? 2000;
	const sock = await openSocket(socketPath, timeoutMs);
	return socketClient(sock, socketPath, timeoutMs);
}

function socketClient(firstSock, socketPath, timeoutMs) {
	const waiting = new Map();
	let seq = 0;
	let conn = null;
	let closed = false;
	const failAll = (err) => {
		for (const w of waiting.values()) w.reject(err);
		waiting.clear();
	};
	const attach = (sock) => {
		const c = { sock, pending: Buffer.alloc(0), broken: null };
		sock.unref();
		const broke = (err) => {
			if (c.broken) return;
			c.broken = err;
			if (conn === c) conn = null;
			failAll(err);
		};
		sock.on("error", (err) => broke(new Error(`semantic-fs connection failed: ${err.message}`)));
		sock.on("close", () => broke(new Error("semantic-fs connection closed")));
		sock.on("data", (chunk) => {
			c.pending = c.pending.length ? Buffer.concat([c.pending, chunk]) : chunk;
			while (c.pending.length >= 4) {
				const len = c.pending.readUInt32BE(0);
				if (len > MAX_FRAME_BYTES) {
					sock.destroy();
					return;
				}
				if (c.pending.length < 4 + len) break;
				const body = c.pending.subarray(4, 4 + len).toString("utf8");
				c.pending = c.pending.subarray(4 + len);
				let msg;
				try {
					msg = JSON.parse(body);
				} catch {
					continue;
				}
				const w = waiting.get(msg?.id);
				if (!w) continue;
				waiting.delete(msg.id);
				if (msg.ok) w.resolve(msg);
				else w.reject(new Error(msg.error || "semantic-fs request failed"));
			}
		});
		conn = c;
		return c;
	};
	attach(firstSock);
	const connection = async () => {
		if (closed) throw new Error("semantic-fs client closed");
		if (conn) return conn;
		return attach(await openSocket(socketPath, timeoutMs));
	};
	const call = async (op, fields) => {
		const c = await connection();
		const id = `sfs-${process.pid}-${++seq}`;
		const body = Buffer.from(JSON.stringify({ id, op, ...fields }), "utf8");
		if (body.length > MAX_REQUEST_BYTES)
			throw new Error(`semantic-fs ${op} request is ${body.length} bytes, over the ${MAX_REQUEST_BYTES}-byte cap`);
		const head = Buffer.alloc(4);
		head.writeUInt32BE(body.length, 0);
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				waiting.delete(id);
				reject(new Error(`semantic-fs ${op} timed out after ${CALL_TIMEOUT_MS} ms`));
			}, CALL_TIMEOUT_MS);
			waiting.set(id, {
				resolve: (v) => (clearTimeout(timer), resolve(v)),
				reject: (e) => (clearTimeout(timer), reject(e)),
			});
			c.sock.write(Buffer.concat([head, body]));
		});
	};
	return {
		kind: "socket",
		socketPath,
		/** Returns the name the daemon knows this app by (the kernel's word, not `info.app`). */
		async register(info) {
			const res = await call("register", { pid: process.pid, app: info?.app ?? "" });
			return res.app;
		},
		async tag(path, meta = {}) {
			const f = { path };
			if (meta.task !== undefined) f.task = meta.task;
			if (meta.relatedApps !== undefined) f.related_apps = meta.relatedApps;
			if (meta.embedding) f.embedding = meta.embedding;
			if (meta.model) f.model = meta.model;
			const res = await call("tag", f);
			return res.file ? toResult(res.file) : undefined;
		},
		async query(text, limit, extra = {}) {
			const f = { text };
			if (limit !== undefined) f.limit = limit;
			if (extra.embedding) f.embedding = extra.embedding;
			if (extra.model) f.model = extra.model;
			const res = await call("query", f);
			return (res.results ?? []).map(toResult);
		},
		close() {
			closed = true;
			conn?.sock.end();
			conn = null;
		},
	};
}
