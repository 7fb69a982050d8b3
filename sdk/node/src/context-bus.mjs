// SPDX-License-Identifier: Apache-2.0
// Context bus client (SPEC §2.8, §5): a unix stream socket carrying frames of a 4-byte
// big-endian length and one protobuf Envelope (proto/context_bus.proto). The handful of
// messages is encoded by hand, so neither runtime.mjs nor an app bundle needs a
// protobuf library.
import net from "node:net";

export const DEFAULT_CONTEXT_BUS_SOCKET = "/tmp/berth-context-bus.sock";
export const CONNECT_TIMEOUT_MS = 2000;
/** Frames larger than this are a broken peer; the daemon drops such connections too. */
export const MAX_FRAME_BYTES = 8 << 20;

/** Envelope oneof field numbers. */
export const KIND = { register: 1, publish: 2, subscribe: 3, unsubscribe: 4, event: 5, ack: 6 };
const KIND_NAME = Object.fromEntries(Object.entries(KIND).map(([k, v]) => [v, k]));

function varint(n) {
	const out = [];
	while (n > 0x7f) {
		out.push((n & 0x7f) | 0x80);
		n = Math.floor(n / 128);
	}
	out.push(n);
	return Buffer.from(out);
}

function lenField(field, bytes) {
	return Buffer.concat([varint((field << 3) | 2), varint(bytes.length), bytes]);
}

/**
 * Encode one Envelope. Proto3 defaults (empty strings and bytes, false) are omitted.
 * @param {keyof typeof KIND} kind
 * @param {{app?: string, topic?: string, payload?: Uint8Array, ok?: boolean, error?: string}} [fields]
 */
export function encodeEnvelope(kind, fields = {}) {
	const parts = [];
	const str = (n, s) => s && parts.push(lenField(n, Buffer.from(s, "utf8")));
	const bytes = (n, b) => b && b.length && parts.push(lenField(n, Buffer.from(b)));
	switch (kind) {
		case "register":
			str(1, fields.app);
			break;
		case "publish":
		case "event":
			str(1, fields.topic);
			bytes(2, fields.payload);
			break;
		case "subscribe":
		case "unsubscribe":
			str(1, fields.topic);
			break;
		case "ack":
			if (fields.ok) parts.push(Buffer.from([0x08, 0x01]));
			str(2, fields.error);
			break;
		default:
			throw new Error(`unknown envelope kind ${kind}`);
	}
	return lenField(KIND[kind], Buffer.concat(parts));
}

/** Walk the fields of one protobuf message: yields [field, wireType, value]. */
function* fields(buf) {
	let i = 0;
	const readVarint = () => {
		let result = 0;
		let mul = 1;
		for (let n = 0; n < 10; n++) {
			if (i >= buf.length) throw new Error("truncated varint");
			const b = buf[i++];
			result += (b & 0x7f) * mul;
			if (!(b & 0x80)) return result;
			mul *= 128;
		}
		throw new Error("varint too long");
	};
	while (i < buf.length) {
		const key = readVarint();
		const field = Math.floor(key / 8);
		const wire = key & 7;
		if (wire === 0) yield [field, wire, readVarint()];
		else if (wire === 2) {
			const len = readVarint();
			if (i + len > buf.length) throw new Error("truncated field");
			yield [field, wire, buf.subarray(i, i + len)];
			i += len;
		} else if (wire === 1 || wire === 5) {
			const len = wire === 1 ? 8 : 4;
			if (i + len > buf.length) throw new Error("truncated field");
			i += len;
		} else throw new Error(`unsupported wire type ${wire}`);
	}
}

/**
 * Decode one Envelope. Returns null for an envelope with no known kind.
 * @param {Uint8Array} bytes
 * @returns {{kind: string, app?: string, topic?: string, payload?: Buffer, ok?: boolean, error?: string} | null}
 */
export function decodeEnvelope(bytes) {
	const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	let msg = null;
	for (const [field, wire, value] of fields(buf)) {
		if (wire !== 2 || !KIND_NAME[field]) continue;
		const kind = KIND_NAME[field];
		msg = { kind };
		if (kind === "publish" || kind === "event") msg.payload = Buffer.alloc(0);
		if (kind === "ack") msg.ok = false;
		for (const [f, w, v] of fields(value)) {
			if (kind === "register" && f === 1 && w === 2) msg.app = v.toString("utf8");
			else if (kind !== "ack" && kind !== "register" && f === 1 && w === 2) msg.topic = v.toString("utf8");
			else if ((kind === "publish" || kind === "event") && f === 2 && w === 2) msg.payload = Buffer.from(v);
			else if (kind === "ack" && f === 1 && w === 0) msg.ok = v !== 0;
			else if (kind === "ack" && f === 2 && w === 2) msg.error = v.toString("utf8");
		}
	}
	return msg;
}

/** Frame an encoded envelope with its 4-byte big-endian length. */
export function frame(envelope) {
	const head = Buffer.alloc(4);
	head.writeUInt32BE(envelope.length, 0);
	return Buffer.concat([head, envelope]);
}

/** Payload bytes for a published value: JSON of the value, `null` for undefined. */
export function encodePayload(payload) {
	return Buffer.from(JSON.stringify(payload ?? null), "utf8");
}

/** A delivered payload: empty means undefined, otherwise JSON. */
export function decodePayload(bytes) {
	if (!bytes || bytes.length === 0) return undefined;
	return JSON.parse(Buffer.from(bytes).toString("utf8"));
}

function log(msg) {
	process.stderr.write(`[berth:context-bus] ${msg}\n`);
}

function callHandler(handler, topic, payload) {
	try {
		const r = handler(payload);
		if (r && typeof r.then === "function")
			r.then(undefined, (err) => log(`subscriber of "${topic}" failed: ${err?.message ?? err}`));
	} catch (err) {
		log(`subscriber of "${topic}" failed: ${err?.message ?? err}`);
	}
}

/**
 * The in-process stand-in: publish reaches this process's own subscribers (payloads
 * go through JSON, as on the wire). Used outside a sandbox and in tests.
 */
export function createLocalContextBus() {
	/** @type {Map<string, Set<Function>>} */
	const subs = new Map();
	return {
		kind: "local",
		async register(_info) {},
		async publish(topic, payload) {
			const set = subs.get(topic);
			if (!set) return;
			const value = decodePayload(encodePayload(payload));
			for (const h of [...set]) callHandler(h, topic, value === undefined ? undefined : structuredClone(value));
		},
		subscribe(topic, handler) {
			if (!subs.has(topic)) subs.set(topic, new Set());
			subs.get(topic).add(handler);
			return () => {
				const set = subs.get(topic);
				if (set && set.delete(handler) && set.size === 0) subs.delete(topic);
			};
		},
		close() {},
	};
}

/**
 * Connect to the context bus daemon. Rejects when the socket cannot be reached within
 * `timeoutMs`.
 * @param {{socketPath?: string, timeoutMs?: number}} [opts]
 */
export function connectContextBus(opts = {}) {
	const socketPath = opts.socketPath ?? process.env.BERTH_CONTEXT_BUS_SOCKET ?? DEFAULT_CONTEXT_BUS_SOCKET;
	const timeoutMs = opts.timeoutMs ?? CONNECT_TIMEOUT_MS;
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
	/** @type {Map<string, Set<Function>>} */
	const subs = new Map();
	let closed = false;
	let pending = Buffer.alloc(0);
	// The bus must never keep an app alive on its own.
	sock.unref();
	sock.on("error", (err) => {
		if (!closed) log(`connection to ${socketPath} failed: ${err.message}`);
	});
	sock.on("close", () => {
		if (!closed) log(`connection to ${socketPath} closed; publishes are dropped from now on`);
		closed = true;
	});
	sock.on("data", (chunk) => {
		pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
		while (pending.length >= 4) {
			const len = pending.readUInt32BE(0);
			if (len > MAX_FRAME_BYTES) {
				log(`frame of ${len} bytes from the daemon is too large; disconnecting`);
				sock.destroy();
				return;
			}
			if (pending.length < 4 + len) break;
			const body = pending.subarray(4, 4 + len);
			pending = pending.subarray(4 + len);
			let env;
			try {
				env = decodeEnvelope(body);
			} catch (err) {
				log(`skipping undecodable frame: ${err.message}`);
				continue;
			}
			if (!env || env.kind !== "event") continue;
			const set = subs.get(env.topic ?? "");
			if (!set) continue;
			let payload;
			try {
				payload = decodePayload(env.payload);
			} catch (err) {
				log(`skipping event on "${env.topic}" whose payload is not JSON: ${err.message}`);
				continue;
			}
			for (const h of [...set]) callHandler(h, env.topic, payload);
		}
	});
	const send = (kind, f) => {
		if (closed || sock.destroyed) return;
		sock.write(frame(encodeEnvelope(kind, f)));
	};
	return {
		kind: "socket",
		socketPath,
		async register(info) {
			send("register", { app: typeof info === "string" ? info : info?.app ?? "" });
		},
		async publish(topic, payload) {
			send("publish", { topic, payload: encodePayload(payload) });
		},
		subscribe(topic, handler) {
			if (!subs.has(topic)) {
				subs.set(topic, new Set());
				send("subscribe", { topic });
			}
			subs.get(topic).add(handler);
			return () => {
				const set = subs.get(topic);
				if (set && set.delete(handler) && set.size === 0) {
					subs.delete(topic);
					send("unsubscribe", { topic });
				}
			};
		},
		close() {
			closed = true;
			sock.end();
		},
	};
}
