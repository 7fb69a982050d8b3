// SPDX-License-Identifier: Apache-2.0
// Semantic-fs control client (SPEC §2.9): frames of a 4-byte big-endian length and
// UTF-8 JSON, request {"id","op",...} → response {"id","ok","error"?,"results"?}.
import net from "node:net";

export const DEFAULT_SEMANTIC_FS_SOCKET = "/tmp/berth-semantic-fs.sock";
const CALL_TIMEOUT_MS = 5000;
const MAX_FRAME_BYTES = 8 << 20;

function toResult(r) {
	return {
		path: r.path,
		createdBy: r.created_by ?? r.createdBy,
		task: r.task,
		relatedApps: r.related_apps ?? r.relatedApps ?? [],
		createdAt: r.created_at ?? r.createdAt,
		updatedAt: r.updated_at ?? r.updatedAt,
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

/**
 * Connect to the semantic-fs daemon's control socket.
 * @param {{socketPath?: string, timeoutMs?: number}} [opts]
 */
export function connectSemanticFs(opts = {}) {
	const socketPath = opts.socketPath ?? process.env.BERTH_SEMANTIC_FS_SOCKET ?? DEFAULT_SEMANTIC_FS_SOCKET;
	const timeoutMs = opts.timeoutMs ?? 2000;
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
			resolve(socketClient(sock, socketPath));
		});
	});
}

function socketClient(sock, socketPath) {
	const waiting = new Map();
	let seq = 0;
	let pending = Buffer.alloc(0);
	let broken = null;
	sock.unref();
	const failAll = (err) => {
		broken = err;
		for (const w of waiting.values()) w.reject(err);
		waiting.clear();
	};
	sock.on("error", (err) => failAll(new Error(`semantic-fs connection failed: ${err.message}`)));
	sock.on("close", () => failAll(new Error("semantic-fs connection closed")));
	sock.on("data", (chunk) => {
		pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
		while (pending.length >= 4) {
			const len = pending.readUInt32BE(0);
			if (len > MAX_FRAME_BYTES) {
				sock.destroy();
				return;
			}
			if (pending.length < 4 + len) break;
			const body = pending.subarray(4, 4 + len).toString("utf8");
			pending = pending.subarray(4 + len);
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
	const call = (op, fields) =>
		new Promise((resolve, reject) => {
			if (broken) return reject(broken);
			const id = `sfs-${process.pid}-${++seq}`;
			const body = Buffer.from(JSON.stringify({ id, op, ...fields }), "utf8");
			const head = Buffer.alloc(4);
			head.writeUInt32BE(body.length, 0);
			const timer = setTimeout(() => {
				waiting.delete(id);
				reject(new Error(`semantic-fs ${op} timed out after ${CALL_TIMEOUT_MS} ms`));
			}, CALL_TIMEOUT_MS);
			waiting.set(id, {
				resolve: (v) => (clearTimeout(timer), resolve(v)),
				reject: (e) => (clearTimeout(timer), reject(e)),
			});
			sock.write(Buffer.concat([head, body]));
		});
	return {
		kind: "socket",
		socketPath,
		async register(info) {
			await call("register", { pid: process.pid, app: info?.app ?? "" });
		},
		async tag(path, meta = {}) {
			const f = { path, task: meta.task ?? "", related_apps: meta.relatedApps ?? [] };
			if (meta.embedding) f.embedding = meta.embedding;
			if (meta.model) f.model = meta.model;
			await call("tag", f);
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
			sock.end();
		},
	};
}
