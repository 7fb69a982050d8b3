// SPDX-License-Identifier: Apache-2.0
// Unit tests of the Node SDK's pieces: manifest rules, capability matching, the context
// bus wire codec (held against sdk/context_bus.proto through the protobuf library), the local
// stand-ins, defineApp and defineConnectorApp.
import assert from "node:assert/strict";
import http from "node:http";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { SDK } from "./helpers.mjs";

const { validateManifest } = await import(join(SDK, "src", "manifest.mjs"));
const { parseManifestText } = await import(join(SDK, "src", "manifest-load.mjs"));
const { matchesCapability, filesystemScopeIssue } = await import(join(SDK, "src", "capability.mjs"));
const bus = await import(join(SDK, "src", "context-bus.mjs"));
const sdk = await import(join(SDK, "src", "index.mjs"));
const { appRegistry } = await import(join(SDK, "src", "app.mjs"));
const { invokeExport } = await import(join(SDK, "src", "rpc.mjs"));

function manifestError(text) {
	const { value, lineOf } = parseManifestText(text);
	try {
		validateManifest(value, { lineOf });
	} catch (err) {
		return err.message;
	}
	return null;
}

test("manifest: defaults applied, unknown keys dropped", () => {
	const m = validateManifest({ name: "a-b", version: "1.0.0", whatever: 1, exports: [{ name: "x" }] });
	assert.deepEqual(m, {
		name: "a-b", version: "1.0.0", description: "", capabilities: [], exports: [{ name: "x" }],
		on_install: [], on_agent_ready: [], expose: { browser: true, terminal: true, preview: false },
		governs: false, governance: { exempt: false }, resources: {}, secrets: [], runtime: "node",
	});
});

test("manifest: report format with lines and dotted paths", () => {
	assert.equal(
		manifestError("name: ok\nversion: 1.0.0\ncapabilities:\n  - network:connect:80\n  - bogus\nexports:\n  - name: a\n    input: { x: strin }\n"),
		"invalid berth.yml:\nberth.yml:5 capabilities.1: capability must be 'namespace:action:scope'\n" +
			'berth.yml:8 exports.0.input.x: Invalid option: expected one of "string"|"number"|"boolean"|"object"|"array"',
	);
	assert.equal(manifestError("version: 1.0.0\n"), "invalid berth.yml:\nberth.yml:1 name: Invalid input: expected string, received undefined");
	assert.equal(
		manifestError("name: x\nversion: 1.0.0\ncapabilities: null\n"),
		"invalid berth.yml:\nberth.yml:3 capabilities: Invalid input: expected array, received null",
	);
	assert.equal(
		manifestError("name: x\nversion: 1.0.0\ngoverns: true\n"),
		"invalid berth.yml:\nberth.yml:3 governs: an app declaring governs: true must also declare an 'evaluate_action' export",
	);
	assert.equal(
		manifestError("name: x\nversion: 1.0.0\non_install: ['  ']\nsecrets: [1BAD]\n"),
		"invalid berth.yml:\nberth.yml:3 on_install.0: on_install command must not be empty\nberth.yml:4 secrets.0: secrets entries must be valid environment variable names",
	);
});

test("manifest: schema_version resolution and the v0 expose migration", () => {
	assert.deepEqual(validateManifest({ name: "x", version: "1.0.0", schema_version: 0, expose: false }).expose, {
		browser: false, terminal: false, preview: false,
	});
	assert.throws(() => validateManifest({ name: "x", version: "1.0.0", schema_version: "latest" }, { path: "/a/berth.yml" }), {
		message: 'invalid berth.yml (/a/berth.yml): schema_version must be a non-negative integer, got "latest"',
	});
	assert.throws(() => validateManifest({ name: "x", version: "1.0.0", schema_version: 2 }, { path: "p" }), {
		message: "invalid berth.yml (p): declares schema_version: 2, but this installed @berth/manifest-schema only supports up to 1. Upgrade @berth/manifest-schema to load this file.",
	});
});

test("filesystem scope rules (SPEC §1.4)", () => {
	for (const ok of ["/workspace", "/workspace/*", "/context", "/tmp/my-app", "/app", "/workspace/a/b"])
		assert.equal(filesystemScopeIssue(ok), null, ok);
	const bad = {
		"/etc": "filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc\"",
		"/workspacex": "filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/workspacex\"",
		"*": 'filesystem path must be absolute (start with "/"), got "*"',
		"workspace": 'filesystem path must be absolute (start with "/"), got "workspace"',
		"/workspace/../etc": 'filesystem path must be canonical — no empty, "." or ".." segments, and no trailing slash — got "/workspace/../etc"',
		"/workspace/": 'filesystem path must be canonical — no empty, "." or ".." segments, and no trailing slash — got "/workspace/"',
		"/workspace//x": 'filesystem path must be canonical — no empty, "." or ".." segments, and no trailing slash — got "/workspace//x"',
		"/workspace/*/src": 'filesystem path may only use a trailing "/*" glob (a "*" anywhere else becomes a literal directory name), got "/workspace/*/src"',
		"/": "filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead",
		"/a\0b": "filesystem path must not contain a null byte",
	};
	for (const [scope, msg] of Object.entries(bad)) assert.equal(filesystemScopeIssue(scope), msg, scope);
});

test("capability matching: exact namespace/action, * glob, ? literal", () => {
	assert.ok(matchesCapability("filesystem:write:/workspace/*", "filesystem:write:/workspace/a/b"));
	assert.ok(matchesCapability("network:connect:*", "network:connect:127.0.0.1:8080"));
	assert.ok(!matchesCapability("filesystem:read:/workspace/*", "filesystem:write:/workspace/a"));
	assert.ok(!matchesCapability("filesystem:*:/workspace", "filesystem:write:/workspace"));
	assert.ok(matchesCapability("browser:navigate:a?b", "browser:navigate:a?b"));
	assert.ok(!matchesCapability("browser:navigate:a?b", "browser:navigate:ab"));
	assert.ok(!matchesCapability("browser:navigate:[ab]", "browser:navigate:a"));
	assert.ok(!matchesCapability("bad", "bad"));
	assert.equal(sdk.matchesCapability, matchesCapability);
});

test("context bus codec matches protobuf's bytes", () => {
	const vectors = [
		[["register", { app: "notes" }], "0a070a056e6f746573"],
		[["publish", { topic: "notes.added", payload: Buffer.from('{"id":"a"}') }], "12190a0b6e6f7465732e6164646564120a7b226964223a2261227d"],
		[["subscribe", { topic: "fs.file_created" }], "1a110a0f66732e66696c655f63726561746564"],
		[["unsubscribe", { topic: "t" }], "22030a0174"],
		[["event", { topic: "t" }], "2a030a0174"],
		[["ack", { ok: true }], "32020801"],
		[["ack", { ok: false, error: "bad" }], "32051203626164"],
		[["register", { app: "" }], "0a00"],
	];
	for (const [[kind, fields], hex] of vectors) {
		assert.equal(bus.encodeEnvelope(kind, fields).toString("hex"), hex, kind);
		const back = bus.decodeEnvelope(Buffer.from(hex, "hex"));
		assert.equal(back.kind, kind);
	}
	assert.deepEqual(bus.decodeEnvelope(Buffer.from("12190a0b6e6f7465732e6164646564120a7b226964223a2261227d", "hex")), {
		kind: "publish", topic: "notes.added", payload: Buffer.from('{"id":"a"}'),
	});
	assert.deepEqual(bus.decodeEnvelope(Buffer.from("32051203626164", "hex")), { kind: "ack", ok: false, error: "bad" });
	// Unknown fields are skipped; truncated input is an error.
	assert.deepEqual(bus.decodeEnvelope(Buffer.from("0a070a056e6f74657338011d00000000", "hex")), { kind: "register", app: "notes" });
	assert.throws(() => bus.decodeEnvelope(Buffer.from("0a070a056e6f", "hex")));
	assert.equal(bus.frame(Buffer.from("ab", "hex")).toString("hex"), "00000001ab");
	assert.equal(bus.decodePayload(Buffer.alloc(0)), undefined);
	assert.equal(bus.encodePayload(undefined).toString(), "null");
});

test("context bus codec is sdk/context_bus.proto's: its field table and the protobuf library's bytes", (t) => {
	const desc = join(process.env.BERTH_BUILD_DIR ?? "", "src", "context-bus", "context_bus.desc");
	if (!existsSync(desc)) return t.skip(`${desc} is not built`);
	const helper = join(dirname(fileURLToPath(import.meta.url)), "proto_vectors.py");
	const r = spawnSync("/usr/bin/python3", [helper, desc], { encoding: "utf8" });
	if (r.status !== 0 && /No module named 'google'/.test(r.stderr)) return t.skip("python3-protobuf is not installed");
	assert.equal(r.status, 0, r.stderr);
	const got = JSON.parse(r.stdout);
	assert.deepEqual(bus.WIRE, got.wire);
	for (const v of got.vectors) {
		const fields = Object.fromEntries(
			Object.entries(v.fields).map(([k, x]) => [k, x && typeof x === "object" ? Buffer.from(x.hex, "hex") : x]),
		);
		assert.equal(bus.encodeEnvelope(v.kind, fields).toString("hex"), v.hex, JSON.stringify(v).slice(0, 200));
		const back = bus.decodeEnvelope(Buffer.from(v.hex, "hex"));
		assert.equal(back.kind, v.kind);
		for (const [k, x] of Object.entries(fields))
			if ((x && x.length !== 0) || k === "ok" || k === "payload") assert.deepEqual(back[k], x, `${v.kind}.${k}`);
	}
	const u = got.unknownFields;
	assert.deepEqual(bus.decodeEnvelope(Buffer.from(u.hex, "hex")), { kind: u.kind, app: u.app });
});

test("local context bus: publish reaches local subscribers; unsubscribe stops it", async () => {
	const b = sdk.createLocalContextBus();
	const got = [];
	const off = b.subscribe("t", (p) => got.push(p));
	await b.publish("t", { a: 1 });
	await b.publish("t");
	await b.publish("other", 1);
	off();
	await b.publish("t", 2);
	assert.deepEqual(got, [{ a: 1 }, null]);
});

test("local semantic fs: tag and query by keyword", async () => {
	const s = sdk.createLocalSemanticFs();
	await s.register({ app: "me" });
	await s.tag("notes/plan.md", { task: "plan the launch", relatedApps: ["notes"] });
	await s.tag("x.txt", { task: "unrelated" });
	const r = await s.query("launch plan");
	assert.equal(r.length, 1);
	assert.equal(r[0].path, "notes/plan.md");
	assert.equal(r[0].createdBy, "me");
	assert.deepEqual(await s.query("nothing matches"), []);
});

test("defineApp: duplicate export names throw; the registry is found across copies", async () => {
	assert.throws(
		() =>
			sdk.defineApp((a) => {
				a.export({ name: "x", handler: () => 1 });
				a.export({ name: "x", handler: () => 2 });
			}),
		{ message: 'export "x" is already registered' },
	);
	const app = sdk.defineApp((a) => a.export({ name: "x", handler: (i) => i }));
	assert.deepEqual(app.exportNames, ["x"]);
	const reg = appRegistry(app);
	assert.deepEqual(await invokeExport(reg, { id: "1", export: "x", input: [1] }), { id: "1", result: [1] });
	assert.deepEqual(await invokeExport(reg, { id: "2", export: "y" }), { id: "2", error: 'no such export "y"' });
	assert.equal(appRegistry({}), null);
});

test("defineConnectorApp: path, query and body params; stub without a credential", async () => {
	const seen = [];
	const server = http.createServer((req, res) => {
		let body = "";
		req.on("data", (d) => (body += d));
		req.on("end", () => {
			seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
			res.setHeader("content-type", "application/json");
			res.end(JSON.stringify({ ok: true }));
		});
	});
	await new Promise((r) => server.listen(0, "127.0.0.1", r));
	const base = `http://127.0.0.1:${server.address().port}/v1/`;
	delete process.env.BERTH_EGRESS_PROXY_URL;
	const app = sdk.defineConnectorApp({
		baseUrl: base,
		auth: { type: "bearer", envVar: "BERTH_TEST_TOKEN" },
		operations: [
			{ export: "get_widget", method: "GET", path: "/widgets/{id}", params: { id: { in: "path", type: "string" }, q: { in: "query", type: "number", required: false } } },
			{ export: "make", method: "POST", path: "/widgets", params: { name: { in: "body", type: "string" } } },
		],
	});
	const reg = appRegistry(app);
	delete process.env.BERTH_TEST_TOKEN;
	const stub = await invokeExport(reg, { id: "s", export: "get_widget", input: { id: "a" } });
	assert.equal(stub.result.stub, true);
	assert.match(stub.result.note, /^set BERTH_TEST_TOKEN for live data/);
	process.env.BERTH_TEST_TOKEN = "tok";
	assert.deepEqual((await invokeExport(reg, { id: "1", export: "get_widget", input: { id: "a b", q: 3 } })).result, { status: 200, data: { ok: true } });
	await invokeExport(reg, { id: "2", export: "make", input: { name: "w" } });
	const bad = await invokeExport(reg, { id: "3", export: "make", input: {} });
	assert.match(bad.error, /"path": \[\n\s+"name"/);
	assert.deepEqual(seen, [
		{ method: "GET", url: "/v1/widgets/a%20b?q=3", auth: "Bearer tok", body: "" },
		{ method: "POST", url: "/v1/widgets", auth: "Bearer tok", body: '{"name":"w"}' },
	]);
	server.close();
});
