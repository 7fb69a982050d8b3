// SPDX-License-Identifier: Apache-2.0
// Context bus client (SPEC §2.8, §5): a unix stream socket carrying frames of a 4-byte
// big-endian length and one protobuf Envelope. The wire format is sdk/context_bus.proto;
// WIRE below is its field table, which test/sdk holds against the descriptor protoc
// compiles from that file. The handful of messages is encoded from the table by hand, so
// neither runtime.mjs nor an app bundle needs a protobuf library (docs/context-bus.md).
import net from "node:net";

export const DEFAULT_CONTEXT_BUS_SOCKET = "/tmp/berth-context-bus.sock";
export const CONNECT_TIMEOUT_MS = 2000;
/** Frames larger than this are a broken peer; the daemon skips such frames too. */
export const MAX_FRAME_BYTES = 8 << 20;
/** After the daemon went away: the first retry, and the longest wait between two. */
export const RECONNECT_MIN_MS = 100;
export const RECONNECT_MAX_MS = 5000;
/** What may wait in the socket's buffer for the daemon to read; past it, publishes drop. */
export const SEND_BUFFER_MAX = 16 << 20;

/**
 * sdk/context_bus.proto as a table: the Envelope's oneof members (field number, message)
 * and each message's fields (field number, proto3 type).
 */
export const WIRE = {
	Envelope: {
		register: [1, "RegisterRequest"],
		publish: [2, "PublishRequest"],
		subscribe: [3, "SubscribeRequest"],
		unsubscribe: [4, "UnsubscribeRequest"],
		event: [5, "Event"],
		ack: [6, "Ack"],
	},
	RegisterRequest: { app: [1, "string"] },
	PublishRequest: { topic: [1, "string"], payload: [2, "bytes"] },
	SubscribeRequest: { topic: [1, "string"] },
	UnsubscribeRequest: { topic: [1, "string"] },
	Event: { topic: [1, "string"], payload: [2, "bytes"] },
	Ack: { ok: [1, "bool"], error: [2, "string"] },
};

/** Envelope oneof field numbers. */
export const KIND = Object.fromEntries(Object.entries(WIRE.Envelope).map(([k, [n]]) => [k, n]));
const KIND_NAME = Object.fromEntries(Object.entries(KIND).map(([k, v]) => [v, k]));
const DEFAULTS = { string: "", bytes: Buffer.alloc(0), bool: false };

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
 * Encode one Envelope. Proto3 defaults (empty strings and bytes, false) are omitted, and
 * fields are written in field-number order, as protobuf's own encoders do.
 * @param {keyof typeof KIND} kind
 * @param {{app?: string, topic?: string, payload?: Uint8Array, ok?: boolean, error?: string}} [fields]
 */
export function encodeEnvelope(kind, fields = {}) {
	const member = WIRE.Envelope[kind];
	if (!member) throw new Error(`unknown envelope kind ${kind}`);
	const parts = [];
	const table = Object.entries(WIRE[member[1]]).sort((a, b) => a[1][0] - b[1][0]);
	for (const [name, [num, type]] of table) {
		const v = fields[name];
		if (type === "string" && v) parts.push(lenField(num, Buffer.from(String(v), "utf8")));
		else if (type === "bytes" && v && v.length) parts.push(lenField(num, Buffer.from(v)));
		else if (type === "bool" && v) parts.push(Buffer.from([num << 3, 0x01]));
	}
	return lenField(member[0], Buffer.concat(parts));
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
 * Decode one Envelope. Returns null for an envelope with no known kind; unknown fields
 * are skipped, as protobuf does.
 * @param {Uint8Array} bytes
 * @returns {{kind: string, app?: string, topic?: string, payload?: Buffer, ok?: boolean, error?: string} | null}
 */
export function decodeEnvelope(bytes) {
	const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	let msg = null;
	for (const [field, wire, value] of fields(buf)) {
		if (wire !== 2 || !KIND_NAME[field]) continue;
		const kind = KIND_NAME[field];
		const table = WIRE[WIRE.Envelope[kind][1]];
		const byNum = Object.fromEntries(Object.entries(table).map(([name, [num, type]]) => [num, [name, type]]));
		msg = { kind };
		// The defaults a reader sees for absent fields, where the SDK's callers look (ack.ok,
		// an event's payload); absent strings stay absent.
		for (const [name, [, type]] of Object.entries(table))
			if (type === "bool" || (type === "bytes" && name === "payload")) msg[name] = DEFAULTS[type];
		for (const [f, w, v] of fields(value)) {
			const spec = byNum[f];
			if (!spec) continue;
			const [name, type] = spec;
			if (type === "bool" && w === 0) msg[name] = v !== 0;
			else if (type === "string" && w === 2) msg[name] = v.toString("utf8");
			else if (type === "bytes" && w === 2) msg[name] = Buffer.from(v);
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

/** Open one connection, or reject within `timeoutMs`. */
function dial(socketPath, timeoutMs) {
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
 * Connect to the context bus daemon. Rejects when the socket cannot be reached within
 * `timeoutMs` (the runtime then falls back to the in-process bus, SPEC §2.3). Once
 * connected, a lost connection is dialled again (RECONNECT_MIN_MS doubling up to
 * RECONNECT_MAX_MS) and the client's register and subscriptions are sent again; what is
 * published meanwhile is dropped, as the bus promises at most once (docs/context-bus.md).
 * @param {{socketPath?: string, timeoutMs?: number, reconnect?: boolean}} [opts]
 */
export async function connectContextBus(opts = {}) {
	const socketPath = opts.socketPath ?? process.env.BERTH_CONTEXT_BUS_SOCKET ?? DEFAULT_CONTEXT_BUS_SOCKET;
	const timeoutMs = opts.timeoutMs ?? CONNECT_TIMEOUT_MS;
	const sock = await dial(socketPath, timeoutMs);
	return socketClient(sock, socketPath, { timeoutMs, reconnect: opts.reconnect ?? true });
}

function socketClient(first, socketPath, { timeoutMs, reconnect }) {
	/** @type {Map<string, Set<Function>>} */
	const subs = new Map();
	let sock = null;
	let closed = false;
	let registered = null;
	let dropped = 0;
	let delay = RECONNECT_MIN_MS;
	let timer = null;

	const onFrame = (body) => {
		let env;
		try {
			env = decodeEnvelope(body);
		} catch (err) {
			log(`skipping undecodable frame: ${err.message}`);
			return;
		}
		if (!env || env.kind !== "event") return;
		const set = subs.get(env.topic ?? "");
		if (!set) return;
		let payload;
		try {
			payload = decodePayload(env.payload);
		} catch (err) {
			log(`skipping event on "${env.topic}" whose payload is not JSON: ${err.message}`);
			return;
		}
		for (const h of [...set]) callHandler(h, env.topic, payload);
	};

	const write = (kind, f) => sock && !sock.destroyed && sock.write(frame(encodeEnvelope(kind, f)));

	const attach = (s) => {
		let pending = Buffer.alloc(0);
		sock = s;
		// The bus must never keep an app alive on its own.
		s.unref();
		s.on("error", (err) => {
			if (!closed) log(`connection to ${socketPath} failed: ${err.message}`);
		});
		s.on("close", () => {
			if (sock !== s) return;
			sock = null;
			if (closed) return;
			if (!reconnect) {
				closed = true;
				log(`connection to ${socketPath} closed; publishes are dropped from now on`);
				return;
			}
			log(`connection to ${socketPath} closed; reconnecting, and publishes are dropped until then`);
			schedule();
		});
		s.on("data", (chunk) => {
			pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
			while (pending.length >= 4) {
				const len = pending.readUInt32BE(0);
				if (len > MAX_FRAME_BYTES) {
					log(`frame of ${len} bytes from the daemon is too large; disconnecting`);
					s.destroy();
					return;
				}
				if (pending.length < 4 + len) break;
				const body = pending.subarray(4, 4 + len);
				pending = pending.subarray(4 + len);
				onFrame(body);
			}
		});
	};

	const schedule = () => {
		timer = setTimeout(async () => {
			timer = null;
			if (closed) return;
			try {
				const s = await dial(socketPath, timeoutMs);
				if (closed) {
					s.destroy();
					return;
				}
				attach(s);
				delay = RECONNECT_MIN_MS;
				// What the daemon forgot with the old connection (SPEC 5: a disconnect
				// removes its subscriptions): one register, one subscribe per topic.
				if (registered !== null) write("register", { app: registered });
				for (const topic of subs.keys()) write("subscribe", { topic });
				log(`reconnected to ${socketPath}${dropped ? `; ${dropped} publish(es) were dropped meanwhile` : ""}`);
				dropped = 0;
			} catch {
				delay = Math.min(delay * 2, RECONNECT_MAX_MS);
				schedule();
			}
		}, delay);
		timer.unref();
	};

	attach(first);
	let overflowing = false;
	const send = (kind, f) => {
		if (closed) return;
		if (!sock || sock.destroyed) {
			if (kind === "publish") dropped++;
			return;
		}
		// Node would buffer without end for a daemon that stopped reading: past the cap a
		// publish is dropped, as the bus itself drops what a subscriber cannot take.
		if (kind === "publish" && sock.writableLength > SEND_BUFFER_MAX) {
			if (!overflowing) log(`the daemon is not reading; publishes are dropped until it catches up`);
			overflowing = true;
			return;
		}
		overflowing = false;
		write(kind, f);
	};
	return {
		kind: "socket",
		socketPath,
		get connected() {
			return Boolean(sock && !sock.destroyed);
		},
		async register(info) {
			registered = typeof info === "string" ? info : info?.app ?? "";
			send("register", { app: registered });
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
			if (timer) clearTimeout(timer);
			if (sock) sock.end();
		},
	};
}
