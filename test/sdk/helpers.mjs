// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the SDK tests: bundle an app, start its runtime, speak line-JSON.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SDK = join(ROOT, "sdk", "node");
export const FIXTURES = join(ROOT, "test", "sdk", "fixtures");

/** The node that runs app runtimes: the guest's Node 18 can be put in with this variable. */
export const RUNTIME_NODE = process.env.BERTH_TEST_RUNTIME_NODE || process.execPath;

const { bundleApp } = await import(join(SDK, "bundle.mjs"));
export { bundleApp };

const tempDirs = [];
process.on("exit", () => {
	for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

/** A temporary directory removed when the process exits. */
export function tempDir(prefix = "berth-sdk-test-") {
	const d = mkdtempSync(join(tmpdir(), prefix));
	tempDirs.push(d);
	return d;
}

/**
 * Start `node <share>/runtime.mjs` for a bundled share. Resolves once the ready line
 * (or the process's exit) is seen.
 */
export function startRuntime(share, env = {}, opts = {}) {
	const child = spawn(RUNTIME_NODE, [join(share, "runtime.mjs")], {
		cwd: opts.cwd ?? share,
		env: {
			PATH: process.env.PATH,
			BERTH_MANIFEST_PATH: join(share, "berth.yml"),
			BERTH_APP_ENTRY: join(share, "dist", "index.mjs"),
			BERTH_CONTEXT_BUS_SOCKET: join(share, "no-such-bus.sock"),
			...env,
		},
		stdio: ["pipe", "pipe", "pipe"],
	});
	return watchProcess(child, opts.name);
}

// Kill whatever a failed test left running.
const children = new Set();
process.on("exit", () => {
	for (const s of children) if (s.exitCode === undefined) s.child.kill("SIGKILL");
});

/** Collect a child's output and resolve when it prints its ready line or exits. */
export function watchProcess(child, name) {
	const state = { child, stdout: "", stderr: "", exitCode: undefined, exited: null };
	child.stdout.on("data", (d) => (state.stdout += d));
	child.stderr.on("data", (d) => (state.stderr += d));
	state.exited = new Promise((res) => child.on("exit", (code) => res((state.exitCode = code))));
	state.ready = new Promise((res, rej) => {
		const timer = setTimeout(() => rej(new Error(`no ready line within 20 s; stderr:\n${state.stderr}`)), 20000);
		const check = () => {
			if (/\[berth:runtime\] "[^"]+" ready\n/.test(state.stderr)) {
				clearTimeout(timer);
				res(state);
			}
		};
		child.stderr.on("data", check);
		state.exited.then(() => {
			clearTimeout(timer);
			res(state);
		});
	});
	state.stop = async () => {
		if (state.exitCode === undefined) child.kill("SIGTERM");
		return state.exited;
	};
	children.add(state);
	return state;
}

/** A line-JSON client on a unix socket. */
export function connectRpc(path) {
	return new Promise((res, rej) => {
		const sock = net.createConnection({ path });
		const lines = [];
		const waiters = [];
		let buf = "";
		sock.on("data", (d) => {
			buf += d;
			let nl;
			while ((nl = buf.indexOf("\n")) >= 0) {
				const line = buf.slice(0, nl);
				buf = buf.slice(nl + 1);
				lines.push(line);
				for (const w of [...waiters]) w();
			}
		});
		sock.once("error", rej);
		sock.once("connect", () => {
			const client = {
				sock,
				lines,
				sendRaw: (text) => sock.write(text),
				send: (req) => sock.write(JSON.stringify(req) + "\n"),
				/** Wait for the answer with this id (raw line and parsed). */
				answer(id, timeoutMs = 10000) {
					return new Promise((resolveA, rejectA) => {
						const look = () => {
							for (const l of lines) {
								const m = JSON.parse(l);
								if (m.id === id) {
									clearTimeout(t);
									waiters.splice(waiters.indexOf(look), 1);
									return resolveA({ line: l, msg: m }), true;
								}
							}
							return false;
						};
						const t = setTimeout(() => rejectA(new Error(`no answer for ${id}; got ${JSON.stringify(lines)}`)), timeoutMs);
						waiters.push(look);
						look();
					});
				},
				async call(exportName, input, id = `${exportName}-${Math.random()}`) {
					const req = { id, export: exportName };
					if (input !== undefined) req.input = input;
					client.send(req);
					return (await client.answer(id)).msg;
				},
				close: () => sock.end(),
			};
			res(client);
		});
	});
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll fn until it returns something truthy; fail naming what never happened. */
export async function until(what, fn, ms = 10000) {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		const v = await fn();
		if (v) return v;
		await sleep(20);
	}
	throw new Error(`timed out waiting for ${what}`);
}
