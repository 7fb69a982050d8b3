// SPDX-License-Identifier: Apache-2.0
// The Node example apps (SPEC §10), bundled and then driven in-process through the same
// invokeExport the runtime uses, with a local context bus recording what they publish;
// plus notes through its runtime over several connections.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { bundleApp, connectRpc, ROOT, SDK, startRuntime, tempDir } from "./helpers.mjs";

const { appRegistry } = await import(join(SDK, "src", "app.mjs"));
const { invokeExport } = await import(join(SDK, "src", "rpc.mjs"));
const { createLocalContextBus } = await import(join(SDK, "src", "context-bus.mjs"));
const { createLocalSemanticFs } = await import(join(SDK, "src", "semantic-fs.mjs"));

const work = tempDir();
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Bundle an app, import its dist/index.mjs (with the share's zod, as the runtime gives
 * it), run its hooks against local stand-ins. */
async function loadApp(name) {
	const share = join(work, `${name}-share`);
	await bundleApp(join(ROOT, "apps", name), share);
	globalThis[Symbol.for("berth.runtime.zod")] ??= await import(pathToFileURL(join(share, "runtime-zod.mjs")).href);
	const mod = await import(pathToFileURL(join(share, "dist", "index.mjs")).href);
	const reg = appRegistry(mod.default);
	assert.ok(reg, "default export is a defineApp() result");
	const bus = createLocalContextBus();
	const published = [];
	const origPublish = bus.publish;
	bus.publish = async (topic, payload) => {
		published.push([topic, JSON.parse(JSON.stringify(payload ?? null))]);
		return origPublish(topic, payload);
	};
	const manifest = { name, version: "0.1.0", capabilities: [], exports: [] };
	for (const h of reg.installHooks) await h();
	for (const h of reg.readyHooks) await h({ contextBus: bus, semanticFs: createLocalSemanticFs(), manifest });
	let n = 0;
	const call = (exp, input) => invokeExport(reg, { id: String(++n), export: exp, ...(input === undefined ? {} : { input }) });
	return { reg, call, published, share };
}

test("notes: add, list in order, complete, idempotent miss, zod errors", async () => {
	const ws = join(work, "notes-ws");
	mkdirSync(ws);
	process.env.BERTH_WORKSPACE_ROOT = ws;
	const { call, published } = await loadApp("notes");

	assert.deepEqual((await call("list_notes")).result, { notes: [] }, "missing file lists nothing");
	const a = (await call("add_note", { text: "buy milk" })).result;
	assert.match(a.id, UUID_V4);
	const b = (await call("add_note", { text: "call mum" })).result;
	const file = JSON.parse(readFileSync(join(ws, "notes.json"), "utf8"));
	assert.deepEqual(file, [
		{ id: a.id, text: "buy milk", completed: false },
		{ id: b.id, text: "call mum", completed: false },
	]);
	assert.equal(readFileSync(join(ws, "notes.json"), "utf8"), JSON.stringify(file, null, 2) + "\n", "pretty JSON");
	assert.deepEqual((await call("list_notes")).result.notes.map((n) => n.text), ["buy milk", "call mum"]);

	assert.deepEqual((await call("complete_note", { id: a.id })).result, { completed: true });
	assert.equal(JSON.parse(readFileSync(join(ws, "notes.json"), "utf8"))[0].completed, true);
	assert.deepEqual((await call("complete_note", { id: "does-not-exist" })).result, { completed: false });

	assert.deepEqual(published, [
		["notes.added", { id: a.id, text: "buy milk" }],
		["notes.added", { id: b.id, text: "call mum" }],
		["notes.completed", { id: a.id }],
	]);

	for (const input of [{}, { text: 5 }]) {
		const err = JSON.parse((await call("add_note", input)).error);
		assert.deepEqual(err[0].path, ["text"]);
		assert.equal(err[0].code, "invalid_type");
	}

	// Concurrent adds are not lost.
	await Promise.all(Array.from({ length: 10 }, (_, i) => call("add_note", { text: `n${i}` })));
	assert.equal((await call("list_notes")).result.notes.length, 12);

	writeFileSync(join(ws, "notes.json"), "{ not json");
	assert.deepEqual((await call("list_notes")).result, { notes: [] }, "unreadable file lists nothing");
});

test("notes through its runtime: 7 notes over several connections, one process", async () => {
	const share = join(work, "notes-rt");
	await bundleApp(join(ROOT, "apps", "notes"), share);
	const ws = join(work, "notes-rt-ws");
	mkdirSync(ws);
	const sock = join(work, "notes.sock");
	const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock, BERTH_WORKSPACE_ROOT: ws }).ready;
	assert.ok(rt.stderr.includes('[berth:runtime] "notes" ready'), rt.stderr);
	const clients = await Promise.all([1, 2, 3].map(() => connectRpc(sock)));
	await Promise.all(Array.from({ length: 7 }, (_, i) => clients[i % 3].call("add_note", { text: `note ${i}` })));
	const list = (await clients[0].call("list_notes")).result.notes;
	assert.deepEqual(list.map((n) => n.text).sort(), Array.from({ length: 7 }, (_, i) => `note ${i}`));
	for (const c of clients) c.close();
	await rt.stop();
});

test("filesystem: workspace files, events, truncate, /context, probes", async () => {
	const ws = join(work, "fs-ws");
	const ctxDir = join(work, "fs-context");
	mkdirSync(ws);
	mkdirSync(ctxDir);
	process.env.BERTH_WORKSPACE_ROOT = ws;
	process.env.BERTH_CONTEXT_MOUNT = ctxDir;
	const { call, published } = await loadApp("filesystem");

	assert.deepEqual(await call("write_file", { path: "allowed.txt", content: "hello from a sandbox" }), { id: "1", result: null });
	assert.equal(readFileSync(join(ws, "allowed.txt"), "utf8"), "hello from a sandbox");
	assert.deepEqual(published, [["fs.file_created", { path: "allowed.txt", createdBy: "filesystem" }]]);
	assert.deepEqual((await call("read_file", { path: "allowed.txt" })).result, { content: "hello from a sandbox" });
	await call("write_file", { path: "sub/dir/b.txt", content: "b" });
	assert.deepEqual((await call("list_files")).result, { files: ["allowed.txt", "sub"] });
	assert.deepEqual((await call("truncate_file", { path: "allowed.txt" })).result, null);
	assert.equal(readFileSync(join(ws, "allowed.txt"), "utf8"), "");
	assert.match((await call("read_file", { path: "missing.txt" })).error, /^ENOENT: no such file or directory, open '.*missing\.txt'$/);

	await call("write_context_file", { path: "plan.md", content: "the plan" });
	assert.deepEqual((await call("read_context_file", { path: "plan.md" })).result, { content: "the plan" });
	assert.equal((await call("tag_context_file", { path: "plan.md", task: "launch plan", relatedApps: ["notes"] })).result, null);
	const q = (await call("query_context", { text: "launch" })).result;
	assert.deepEqual(q.results.map((r) => r.path), ["plan.md"]);
	assert.equal((await call("publish_context_event", { topic: "custom.topic", payload: { x: 1 } })).result, null);
	assert.deepEqual(published.at(-1), ["custom.topic", { x: 1 }]);

	// A closed port: refused, and the answer has the documented shape.
	const closed = net.createServer();
	await new Promise((r) => closed.listen(0, "127.0.0.1", r));
	const port = closed.address().port;
	closed.close();
	const conn = (await call("probe_network_connect", { host: "127.0.0.1", port })).result;
	assert.equal(conn.connected, false);
	assert.match(conn.error, /ECONNREFUSED/);
	const udp = (await call("probe_network_udp", { host: "127.0.0.1", port })).result;
	assert.equal(typeof udp.sent, "boolean");
	const raw = (await call("probe_raw_socket", { host: "127.0.0.1" })).result;
	assert.equal(typeof raw.opened, "boolean");
	if (!raw.opened) assert.match(raw.error, /EPERM|not permitted/);
	const userns = (await call("probe_user_namespace")).result;
	assert.equal(typeof userns.created, "boolean");
	assert.equal(typeof userns.regainedCaps, "boolean");
	if (!userns.created) assert.match(userns.error, /EPERM|not permitted|ENOSPC|EINVAL/);

	// Paths are not sanitised by the app: a symlink or ../ reaches the kernel as given.
	symlinkSync(join(work, "outside"), join(ws, "escape"));
	mkdirSync(join(work, "outside"));
	await call("write_file", { path: "escape/x.txt", content: "x" });
	assert.equal(readFileSync(join(work, "outside", "x.txt"), "utf8"), "x");
});

// FileHandle.prototype.sync, held up a little so that an answer that did not wait for it
// would show: records what each sync was of and when it finished.
async function withSlowSync(fn) {
	const { open } = await import("node:fs/promises");
	const { readlinkSync } = await import("node:fs");
	const fh = await open(join(SDK, "src", "index.mjs"), "r");
	const proto = Object.getPrototypeOf(fh);
	await fh.close();
	const real = proto.sync;
	const syncs = [];
	proto.sync = async function () {
		const what = readlinkSync(`/proc/self/fd/${this.fd}`);
		await new Promise((r) => setTimeout(r, 30));
		await real.call(this);
		syncs.push({ what, done: performance.now() });
	};
	try {
		return await fn(syncs);
	} finally {
		proto.sync = real;
	}
}

test("notes and filesystem answer a write only after it is fsynced, file and directory", async () => {
	const ws = join(work, "durable-ws");
	const ctxDir = join(work, "durable-context");
	mkdirSync(ws);
	mkdirSync(ctxDir);
	process.env.BERTH_WORKSPACE_ROOT = ws;
	process.env.BERTH_CONTEXT_MOUNT = ctxDir;
	const notes = await loadApp("notes");
	const fsApp = await loadApp("filesystem");
	await withSlowSync(async (syncs) => {
		const answered = async (call) => {
			syncs.length = 0;
			const r = await call();
			assert.equal(r.error, undefined, r.error);
			const at = performance.now();
			assert.ok(syncs.length > 0 && syncs.every((s) => s.done <= at), "every sync finished before the answer");
			return syncs.map((s) => s.what);
		};
		const added = await answered(() => notes.call("add_note", { text: "kept" }));
		assert.equal(added.length, 2);
		assert.match(added[0], /\/\.notes\.json\.[^/]+\.tmp$/, "the new file, before its rename");
		assert.equal(added[1], ws, "then the workspace directory");
		const id = JSON.parse(readFileSync(join(ws, "notes.json"), "utf8"))[0].id;
		assert.deepEqual(await answered(() => notes.call("complete_note", { id })).then((w) => w.at(-1)), ws);

		const wrote = await answered(() => fsApp.call("write_file", { path: "d/e/f.txt", content: "x" }));
		assert.deepEqual(wrote.slice(-1), [join(ws, "d", "e")]);
		assert.ok(wrote.includes(ws) && wrote.includes(join(ws, "d")), `the new directories' entries too: ${wrote}`);
		assert.deepEqual((await answered(() => fsApp.call("write_context_file", { path: "c.md", content: "c" }))).at(-1), ctxDir);
		assert.deepEqual(await answered(() => fsApp.call("truncate_file", { path: "d/e/f.txt" })), [join(ws, "d", "e", "f.txt")]);
	});
	assert.equal(readFileSync(join(ws, "d", "e", "f.txt"), "utf8"), "");
	assert.deepEqual((await fsApp.call("list_files")).result, { files: ["d", "notes.json"] }, "no temporary file is left");
	const { statSync } = await import("node:fs");
	const umask = process.umask(0);
	process.umask(umask);
	assert.equal(statSync(join(ctxDir, "c.md")).mode & 0o777, 0o666 & ~umask, "the mode fs.writeFile would give");
});

test("hello-world template through its runtime over stdio: ping → pong", async () => {
	const app = join(work, "hello");
	mkdirSync(join(app, "src"), { recursive: true });
	for (const f of ["berth.yml", "package.json", "src/index.ts"])
		writeFileSync(join(app, f), readFileSync(join(ROOT, "templates", "hello-world", f), "utf8").replaceAll("{{name}}", "hello"));
	const share = join(work, "hello-share");
	await bundleApp(app, share);
	const rt = startRuntime(share, {});
	await rt.ready;
	rt.child.stdin.end('{"id":"1","export":"ping"}\n');
	await rt.exited;
	assert.equal(rt.stdout, '{"id":"1","result":{"message":"pong"}}\n');
	assert.ok(rt.stderr.includes('[berth:runtime] "hello" ready'));
});

test("github-assistant: SPEC 10's stub without a token; live through the API with one", async () => {
	const seen = [];
	const api = (await import("node:http")).createServer((req, res) => {
		let body = "";
		req.on("data", (d) => (body += d));
		req.on("end", () => {
			seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
			res.setHeader("content-type", "application/json");
			if (req.url === "/repos/o/r") res.end(JSON.stringify({ full_name: "o/r", description: "a repo", open_issues_count: 4 }));
			else if (req.method === "POST" && req.url === "/repos/o/r/issues") res.writeHead(201).end('{"number":1}');
			else res.writeHead(403).end('{"message":"denied: no declared capability covers github:read:user"}');
		});
	});
	await new Promise((r) => api.listen(0, "127.0.0.1", r));
	const saved = { ...process.env };
	delete process.env.GITHUB_TOKEN;
	delete process.env.GITHUB_REPO;
	process.env.GITHUB_API_BASE_URL = `http://127.0.0.1:${api.address().port}`;
	try {
		const { call } = await loadApp("github-assistant");
		assert.deepEqual((await call("get_repo_summary", { repo: "o/r" })).result, {
			summary: "o/r (stub — set GITHUB_TOKEN for live data)",
			open_issues: 0,
		});
		assert.deepEqual((await call("get_repo_summary", { repo: "berth" })).result, {
			summary: "berth (stub — set GITHUB_TOKEN for live data)",
			open_issues: 0,
		}, "the stub answers for any repo");
		assert.equal((await call("create_issue", { title: "t", body: "b" })).result, null, "no-op without GITHUB_REPO");
		assert.equal(seen.length, 0, "stub mode sends nothing");

		process.env.GITHUB_TOKEN = "berth-placeholder-the-github-broker-adds-the-token";
		assert.deepEqual((await call("get_repo_summary", { repo: "o/r" })).result, { summary: "a repo", open_issues: 4 });
		assert.deepEqual(seen.at(-1), { method: "GET", url: "/repos/o/r", auth: `Bearer ${process.env.GITHUB_TOKEN}`, body: "" });
		assert.equal((await call("create_issue", { title: "t", body: "b" })).result, null, "still a no-op without GITHUB_REPO");
		process.env.GITHUB_REPO = "o/r";
		assert.equal((await call("create_issue", { title: "t", body: "b" })).result, null);
		assert.deepEqual(seen.at(-1), { method: "POST", url: "/repos/o/r/issues", auth: `Bearer ${process.env.GITHUB_TOKEN}`, body: '{"title":"t","body":"b"}' });
		const n = seen.length;
		assert.match((await call("get_repo_summary", { repo: "../user" })).error, /repo must be "owner\/name"/);
		assert.match((await call("get_repo_summary", { repo: "o/../../user" })).error, /repo must be "owner\/name"/);
		assert.equal(seen.length, n, "a malformed repo is refused before any request");
		assert.match((await call("get_repo_summary", { repo: "other/x" })).error, /^GitHub API 403: .*denied/);
	} finally {
		for (const k of ["GITHUB_TOKEN", "GITHUB_REPO", "GITHUB_API_BASE_URL"]) {
			if (saved[k] === undefined) delete process.env[k];
			else process.env[k] = saved[k];
		}
		api.close();
	}
});
