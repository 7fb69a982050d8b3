// SPDX-License-Identifier: Apache-2.0
// berth mcp end to end with no VM: the real CLI against a stand-in berth-vmm
// (fixtures/fake-vmm.py) that keeps a made-up VM's run dir and answers the RPC of
// fixtures/mcp-fixture's exports as that app does. Driven by the official MCP TypeScript
// SDK client (newest 1.x), the MCP Inspector's CLI (a client no one here wrote, of the
// 2026-07-28 era), raw 2026-07-28 requests, and a boot through the stand-in that reports
// its progress. mcp.test.mjs runs the same kinds of checks against real VMs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const src = process.env.BERTH_SOURCE_ROOT;
const bld = process.env.BERTH_BUILD_DIR;
const berth = join(bld, "src/berth/berth");
const fakeVmm = join(src, "test/e2e/fixtures/fake-vmm.py");
const appDir = join(src, "test/e2e/fixtures/mcp-fixture");
const inspector = join(src, "node_modules/.bin/mcp-inspector");
const MODERN = "2026-07-28";
const META = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" } };

let home;
let env;
const fakes = [];
const clients = [];

/** A made-up running VM of the fixture app, named @vmName, until after(). */
async function startFakeVm(vmName, extraEnv = {}) {
	const runDir = join(home, "run/vm", vmName);
	const p = spawn("python3", [fakeVmm, runDir, "--app", appDir], { argv0: "berth-vmm", env: { ...env, ...extraEnv }, stdio: "ignore" });
	fakes.push(p);
	await waitFor("the stand-in VM", () => existsSync(join(runDir, "rpc-0.sock")) && existsSync(join(runDir, "berth-vmm.pid")));
	return p;
}

async function stopFakeVm(p) {
	p.kill("SIGTERM");
	await new Promise((res) => (p.exitCode !== null ? res() : p.on("exit", res)));
}

async function waitFor(what, fn, seconds = 30) {
	for (let i = 0; i < seconds * 20; i++) {
		if (await fn()) return;
		await new Promise((r) => setTimeout(r, 50));
	}
	assert.fail(`timed out waiting for ${what}`);
}

/** An MCP SDK client on `berth mcp ARGS`; its stderr is kept for the checks. */
async function connect(args, extraEnv = {}) {
	const transport = new StdioClientTransport({ command: berth, args: ["mcp", ...args], env: { ...env, ...extraEnv }, stderr: "pipe" });
	const log = { text: "" };
	transport.stderr.on("data", (d) => (log.text += d));
	const client = new Client({ name: "berth-fake-e2e", version: "1.0.0" });
	clients.push(client);
	await client.connect(transport);
	return { client, log };
}

/** Raw lines to `berth mcp ARGS`, read back until @until says the answers are in. */
function rawSession(args, lines, until, extraEnv = {}) {
	return new Promise((resolve, reject) => {
		const p = spawn(berth, ["mcp", ...args], { env: { ...env, ...extraEnv }, stdio: ["pipe", "pipe", "pipe"] });
		let out = "";
		let err = "";
		const timer = setTimeout(() => {
			p.kill("SIGKILL");
			reject(new Error(`no complete answer: ${out}\n${err}`));
		}, 60_000);
		const msgs = () => out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
		p.stdout.on("data", (d) => {
			out += d;
			if (until(msgs())) p.stdin.end();
		});
		p.stderr.on("data", (d) => (err += d));
		p.on("exit", (code) => {
			clearTimeout(timer);
			resolve({ code, msgs: msgs(), stdout: out, stderr: err });
		});
		for (const l of lines) p.stdin.write((typeof l === "string" ? l : JSON.stringify(l)) + "\n");
	});
}

const text = (r) => r.content.map((c) => c.text).join("\n");

before(() => {
	home = mkdtempSync(join(tmpdir(), "berth-mcp-fake."));
	mkdirSync(join(home, "run/vm"), { recursive: true });
	env = { ...process.env, BERTH_HOME: home, BERTH_AUDIT_PATH: join(home, "audit/audit.jsonl") };
	delete env.BERTH_VMM;
});

after(async () => {
	for (const c of clients) await c.close().catch(() => {});
	for (const p of fakes) if (p.exitCode === null) p.kill("SIGKILL");
	if (home) rmSync(home, { recursive: true, force: true });
});

test("the official SDK client: descriptions, schemas, hints and structuredContent it validates", async () => {
	const vm = await startFakeVm("berth-dev-mcp-fixture");
	try {
		const { client, log } = await connect(["--app", "mcp-fixture", "--app-dir", appDir]);
		// Standard error is a stream of its own: the line may come after initialize's answer.
		await waitFor("the attach line", () => /attached to the running VM "berth-dev-mcp-fixture"/.test(log.text));
		assert.deepEqual(client.getServerVersion(), { name: "berth-mcp-fixture", version: "0.4.0" });
		const { tools } = await client.listTools();
		assert.deepEqual(tools.map((t) => t.name), ["add_note", "list_notes", "echo", "sleep", "fail", "bad_output"]);
		const add = tools.find((t) => t.name === "add_note");
		assert.equal(add.title, "Add a note");
		assert.equal(add.description, "Add a note and return its id and how many notes there are.");
		assert.deepEqual(add.inputSchema, {
			$schema: "http://json-schema.org/draft-07/schema#",
			type: "object",
			properties: { text: { type: "string", description: "what the note says" } },
			required: ["text"],
		});
		assert.deepEqual(add.outputSchema, {
			$schema: "http://json-schema.org/draft-07/schema#",
			type: "object",
			properties: { id: { type: "string", description: "the new note's id" }, count: { type: "number" } },
		});
		// Derived from the capabilities (it may write /workspace, reaches nothing outside)...
		assert.deepEqual(add.annotations, { readOnlyHint: false, openWorldHint: false });
		// ...unless berth.yml says otherwise for the export.
		assert.deepEqual(tools.find((t) => t.name === "list_notes").annotations, { readOnlyHint: true, openWorldHint: false, idempotentHint: true });
		assert.equal(tools.find((t) => t.name === "fail").outputSchema, undefined);
		assert.equal(tools.find((t) => t.name === "echo").description, 'Berth resident app export "echo" (from mcp-fixture\'s berth.yml)');

		// The SDK checks structuredContent against the outputSchema it was given, and refuses
		// a result without it: these calls pass only if both are right.
		let r = await client.callTool({ name: "add_note", arguments: { text: "from the SDK" } });
		assert.ok(!r.isError, text(r));
		assert.match(r.structuredContent.id, /^[0-9a-f-]{36}$/);
		assert.deepEqual(JSON.parse(text(r)), r.structuredContent, "the text item is the same result");
		r = await client.callTool({ name: "list_notes", arguments: {} });
		assert.ok(r.structuredContent.notes.some((n) => n.text === "from the SDK"));
		r = await client.callTool({ name: "bad_output", arguments: {} });
		assert.equal(r.isError, true);
		assert.match(text(r), /^"bad_output" returned a result that does not match the output its berth\.yml declares \(id: expected string, received number\)/);
		assert.equal(r.structuredContent, undefined);
		r = await client.callTool({ name: "fail", arguments: { message: "nothing to see" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /nothing to see/);
		r = await client.callTool({ name: "echo", arguments: { text: 3 } });
		assert.equal(r.isError, true);
		assert.equal(text(r), "MCP error -32602: Input validation error: Invalid arguments for tool echo: Invalid input: expected string, received number at text");
		r = await client.callTool({ name: "no_such_tool", arguments: {} });
		assert.equal(text(r), "MCP error -32602: Tool no_such_tool not found");
		assert.deepEqual(await client.ping(), {});
		await client.close();
		await waitFor("the enforcement line", () => /kernel enforcement in this VM: enforced/.test(log.text));
	} finally {
		await stopFakeVm(vm);
	}
});

test("the MCP Inspector's CLI lists and calls the tools, in either era", { skip: !existsSync(inspector) && "no node_modules/.bin/mcp-inspector: npm ci" }, async () => {
	const vm = await startFakeVm("berth-dev-mcp-fixture");
	try {
		// The Inspector gives the server an environment of its own: BERTH_HOME is passed
		// on. It keeps a catalog under HOME, which is this test's.
		const pass = ["-e", `BERTH_HOME=${home}`, "-e", `BERTH_AUDIT_PATH=${env.BERTH_AUDIT_PATH}`];
		const inspectorEnv = { ...env, HOME: home, MCP_CATALOG_PATH: join(home, "inspector-catalog.json") };
		const run = (era, args) =>
			spawnSync(inspector, ["--cli", "--protocol-era", era, ...pass, ...args, "--", berth, "mcp", "--app", "mcp-fixture", "--app-dir", appDir], {
				env: inspectorEnv,
				encoding: "utf8",
				timeout: 120_000,
			});
		// legacy: initialize (2025-11-25); modern: 2026-07-28 only; auto: server/discover
		// first, as a dual-era client does.
		for (const era of ["legacy", "modern", "auto"]) {
			let r = run(era, ["--method", "tools/list"]);
			assert.equal(r.status, 0, `${era}: ${r.stderr}${r.stdout}`);
			const listed = JSON.parse(r.stdout);
			assert.deepEqual(listed.tools.map((t) => t.name), ["add_note", "list_notes", "echo", "sleep", "fail", "bad_output"], era);
			assert.equal(listed.tools[0].description, "Add a note and return its id and how many notes there are.");
			assert.ok(listed.tools[0].outputSchema, `${era}: the Inspector sees the output schema`);
			r = run(era, ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", `text=from the inspector, ${era}`]);
			assert.equal(r.status, 0, `${era}: ${r.stderr}${r.stdout}`);
			const called = JSON.parse(r.stdout);
			assert.deepEqual(called.structuredContent, { text: `from the inspector, ${era}` });
			assert.equal(JSON.parse(called.content[0].text).text, `from the inspector, ${era}`);
		}
	} finally {
		await stopFakeVm(vm);
	}
});

test("raw 2026-07-28: server/discover and stateless tools/list and tools/call, no initialize", async () => {
	const vm = await startFakeVm("berth-dev-mcp-fixture");
	try {
		const req = (id, method, params = {}) => ({ jsonrpc: "2.0", id, method, params: { ...params, _meta: { ...META, ...(params._meta || {}) } } });
		const lines = [
			req(1, "server/discover"),
			req(2, "tools/list"),
			req(3, "tools/call", { name: "echo", arguments: { text: "stateless" } }),
			req(4, "tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": "2030-01-01" } }),
			{ jsonrpc: "2.0", id: 5, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": MODERN } } },
			req(6, "ping"),
			req(7, "initialize", { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: "x", version: "0" } }),
			req(8, "tools/call", { name: "nope", arguments: {} }),
			{ jsonrpc: "2.0", id: 9, method: "server/discover" },
			req(10, "tools/call", { name: "bad_output", arguments: {} }),
		];
		const { code, msgs, stderr } = await rawSession(["--app", "mcp-fixture", "--app-dir", appDir], lines, (m) => m.length >= 10);
		assert.equal(code, 0, stderr);
		const byId = (id) => msgs.find((m) => m.id === id);
		for (const m of msgs) assert.equal(m.jsonrpc, "2.0");

		const discover = byId(1).result;
		assert.equal(discover.resultType, "complete");
		assert.deepEqual(discover.supportedVersions, [MODERN]);
		assert.deepEqual(discover.capabilities, { tools: {} });
		assert.deepEqual(discover._meta["io.modelcontextprotocol/serverInfo"], { name: "berth-mcp-fixture", version: "0.4.0" });
		assert.equal(typeof discover.ttlMs, "number");
		assert.ok(["public", "private"].includes(discover.cacheScope));

		const list = byId(2).result;
		assert.equal(list.resultType, "complete");
		assert.equal(list.tools.length, 6);
		assert.ok(list.tools.every((t) => !("execution" in t)), "tasks are an extension in 2026-07-28");
		assert.ok(list.tools[0].outputSchema && list.tools[0].annotations);

		const call = byId(3).result;
		assert.equal(call.resultType, "complete");
		assert.deepEqual(call.structuredContent, { text: "stateless" });

		assert.deepEqual(byId(4).error, { code: -32022, message: "Unsupported protocol version", data: { supported: [MODERN], requested: "2030-01-01" } });
		assert.equal(byId(5).error.code, -32602, "clientCapabilities is required");
		assert.equal(byId(6).error.code, -32601, "ping is not a method of 2026-07-28");
		assert.equal(byId(7).error.code, -32601, "nor is initialize");
		assert.deepEqual(byId(8).error, { code: -32602, message: "Unknown tool: nope" }, "the tools page's protocol error");
		assert.equal(byId(9).error.code, -32602, "server/discover needs its _meta too");
		assert.equal(byId(10).result.isError, true);
		assert.equal(byId(10).result.resultType, "complete");
		assert.equal(msgs.length, 10, "one answer per request, nothing else on standard output");
	} finally {
		await stopFakeVm(vm);
	}
});

test("both eras on one stream; legacy answers stay as they were", async () => {
	const vm = await startFakeVm("berth-dev-mcp-fixture");
	try {
		const lines = [
			{ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2024-11-05", capabilities: {}, clientInfo: { name: "old", version: "0" } } },
			{ jsonrpc: "2.0", method: "notifications/initialized" },
			{ jsonrpc: "2.0", id: 2, method: "tools/list" },
			{ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "add_note", arguments: { text: "old client" } } },
			{ jsonrpc: "2.0", id: 4, method: "server/discover", params: { _meta: META } },
			{ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "echo", arguments: { text: "modern" }, _meta: META } },
			{ jsonrpc: "2.0", id: 5, method: "ping" },
			"{not json",
			"x".repeat(5 * 1024 * 1024),
			{ jsonrpc: "2.0", id: 6, method: "no/such" },
		];
		const { code, msgs, stderr } = await rawSession(["--app", "mcp-fixture", "--app-dir", appDir, "--run-id", "both-eras"], lines, (m) => m.length >= 9);
		assert.equal(code, 0, stderr);
		const byId = (id) => msgs.find((m) => m.id === id);
		assert.equal(byId(1).result.protocolVersion, "2024-11-05");
		const tools = byId(2).result.tools;
		// 2024-11-05 has neither annotations nor output schemas nor titles.
		assert.ok(tools.every((t) => !("annotations" in t) && !("outputSchema" in t) && !("title" in t) && !("execution" in t)));
		assert.equal(byId(2).result.resultType, undefined);
		const call = byId(3).result;
		assert.equal(call.structuredContent, undefined, "2024-11-05 has no structuredContent");
		assert.match(JSON.parse(call.content[0].text).id, /^[0-9a-f-]{36}$/);
		assert.equal(byId(4).result.resultType, "complete");
		assert.deepEqual(byId(5).result, {});
		assert.equal(msgs.filter((m) => m.id === null && m.error?.code === -32700).length, 2);
		assert.equal(byId(6).error.code, -32601);
		assert.equal(byId(7).result.resultType, "complete");
		assert.equal(byId(7).result.structuredContent.text, "modern");
		for (const line of stderr.trim().split("\n")) assert.match(line, /^\[berth:mcp\] /);
		// Who called is each request's own word: initialize's for the legacy call, the
		// 2026-07-28 request's _meta for its call.
		const records = readFileSync(join(home, "audit/audit.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
		const actor = (tool) => records.find((x) => x.meta?.runId === "both-eras" && x.target === `mcp-fixture.${tool}`)?.actor.id;
		assert.equal(actor("add_note"), "old");
		assert.equal(actor("echo"), "raw");
	} finally {
		await stopFakeVm(vm);
	}
});

test("progress while the session boots its own VM, and a call cancelled before it was sent", async () => {
	// A stand-in berth-vmm for the boot, and stand-in artifacts to install first.
	const artifacts = join(home, "fake-artifacts");
	const source = join(home, "fake-source");
	mkdirSync(artifacts, { recursive: true });
	mkdirSync(join(source, "out"), { recursive: true });
	for (const f of ["vmlinux", "initrd.cpio", "rootfs.erofs"]) writeFileSync(join(artifacts, f), `stand-in ${f}\n`);
	writeFileSync(join(artifacts, "manifest-rootfs.json"), "{}\n");
	symlinkSync(artifacts, join(source, "out/artifacts"));
	symlinkSync(join(src, "sdk"), join(source, "sdk"));
	symlinkSync(join(src, "node_modules"), join(source, "node_modules"));
	const wrapper = join(home, "fake-berth-vmm");
	writeFileSync(wrapper, `#!/bin/sh\nexec python3 '${fakeVmm}' "$@"\n`);
	chmodSync(wrapper, 0o755);
	const bootEnv = { BERTH_VMM: wrapper, FAKE_VMM_ARTIFACTS: artifacts, BERTH_SOURCE_DIR: source, FAKE_VM_BOOT_STEP_MS: "400" };

	const { client, log } = await connect(["--app", "mcp-fixture", "--app-dir", appDir], bootEnv);
	const progress = [];
	const early = new AbortController();
	// Settled into a value at once: the rejection comes while the test awaits another call.
	const cancelled = client.callTool({ name: "sleep", arguments: { ms: 1 } }, undefined, { signal: early.signal }).then(
		(x) => x,
		(e) => e,
	);
	const r = await client.callTool({ name: "echo", arguments: { text: "after the boot" } }, undefined, {
		onprogress: (p) => {
			progress.push(p);
			if (progress.length === 1) early.abort("not needed");
		},
		timeout: 60_000,
	});
	assert.ok((await cancelled) instanceof Error, "the SDK rejects the call it cancelled");
	assert.deepEqual(r.structuredContent, { text: "after the boot" });
	assert.ok(progress.length >= 1, `progress during the boot: ${JSON.stringify(progress)}\n${log.text}`);
	for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress, "progress increases");
	for (const p of progress) {
		assert.equal(p.total, 3);
		assert.match(p.message, /^(installing "mcp-fixture" for its VM: bundling the app|installing the pinned kernel and root image|booting the VM berth-mcp-mcp-fixture|starting "mcp-fixture" in the VM)$/);
	}
	assert.equal(progress.at(-1).message, 'starting "mcp-fixture" in the VM', "the last stage before the app answers");
	assert.match(log.text, /installing them/, "the stand-in artifacts were installed");
	await client.close();
	await waitFor("the VM it booted to stop", () => !existsSync(join(home, "run/vm/berth-mcp-mcp-fixture/berth-vmm.pid")), 30);
	assert.match(log.text, /stopping the VM berth-mcp-mcp-fixture it booted/);

	// The audit trail has the cancelled call, never sent, and the one that ran.
	const records = readFileSync(join(home, "audit/audit.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
	const early_ = records.find((x) => x.target === "mcp-fixture.sleep" && x.meta.cancelled);
	assert.equal(early_?.reason, '"sleep" was cancelled by the client before it was sent');
	assert.ok(records.some((x) => x.target === "mcp-fixture.echo" && x.decision === "allowed"));
});

test("--print-config prints each client's snippet with absolute paths", () => {
	const run = (client) => spawnSync(berth, ["mcp", "--print-config", client, "--app", "mcp-fixture", "--app-dir", appDir, "--only", "echo,sleep"], { env, encoding: "utf8" });
	const args = ["mcp", "--app", "mcp-fixture", "--app-dir", appDir, "--only", "echo,sleep"];
	let r = run("claude-code");
	assert.equal(r.status, 0, r.stderr);
	assert.equal(r.stdout, `claude mcp add mcp-fixture -- ${berth} ${args.join(" ")}\n`);
	for (const client of ["claude-desktop", "cursor"]) {
		r = run(client);
		assert.equal(r.status, 0, r.stderr);
		assert.deepEqual(JSON.parse(r.stdout), { mcpServers: { "mcp-fixture": { command: berth, args } } });
	}
	r = run("vscode");
	assert.deepEqual(JSON.parse(r.stdout), { servers: { "mcp-fixture": { type: "stdio", command: berth, args } } });
	r = run("codex");
	assert.equal(r.stdout, `[mcp_servers.mcp-fixture]\ncommand = ${JSON.stringify(berth)}\nargs = ${JSON.stringify(args)}\n`);
	r = run("notepad");
	assert.equal(r.status, 2);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /--print-config takes claude-code, claude-desktop, cursor, vscode or codex, not 'notepad'/);
});
