// SPDX-License-Identifier: Apache-2.0
// berth mcp driven by the official MCP TypeScript SDK client over stdio, against real VMs
// (SPEC §3.2-3.5, §8.6). Each boot takes seconds under TCG, so the sessions are few and
// each checks several things.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const src = process.env.BERTH_SOURCE_ROOT;
const bld = process.env.BERTH_BUILD_DIR;
const artifacts = process.env.BERTH_TEST_ARTIFACTS || join(src, "out/artifacts");
const berth = join(bld, "src/berth/berth");
const vmm = join(bld, "src/berth-vmm/berth-vmm");
const have = ["vmlinux", "initrd.cpio", "rootfs.erofs"].every((f) => existsSync(join(artifacts, f)));
const skip = have ? false : `no artifacts in ${artifacts}: run scripts/build-artifacts.sh`;
const LONG = { timeout: 900_000, skip };

let home;
let env;
const clients = []; // closed in after(), whatever a test left open

function run(args, opts = {}) {
	return spawnSync(berth, args, { env, encoding: "utf8", timeout: 300_000, ...opts });
}

function running(vmName) {
	const r = run(["vm", "status", "--json"]);
	return r.status === 0 && JSON.parse(r.stdout).vms.some((v) => v.name === vmName);
}

async function waitFor(what, fn, seconds = 120) {
	for (let i = 0; i < seconds * 5; i++) {
		if (await fn()) return;
		await new Promise((r) => setTimeout(r, 200));
	}
	assert.fail(`timed out waiting for ${what}`);
}

/** An MCP client on `berth mcp ARGS`; its stderr is kept for the checks. */
async function connect(args, extraEnv = {}) {
	const transport = new StdioClientTransport({
		command: berth,
		args: ["mcp", ...args],
		env: { ...env, ...extraEnv },
		stderr: "pipe",
	});
	const log = { text: "" };
	transport.stderr.on("data", (d) => (log.text += d));
	const client = new Client({ name: "berth-e2e", version: "1.0.0" });
	clients.push(client);
	const stray = [];
	transport.onerror = (e) => stray.push(String(e));
	await client.connect(transport);
	return { client, transport, log, stray };
}

function text(result) {
	return result.content.map((c) => c.text).join("\n");
}

before(() => {
	if (skip) return;
	home = mkdtempSync(join(tmpdir(), "berth-mcp-e2e."));
	env = { ...process.env, BERTH_HOME: home, BERTH_AUDIT_PATH: join(home, "audit/audit.jsonl") };
	const r = run(["vm", "install", "--from", artifacts, "--no-download", "--vmm", vmm]);
	assert.equal(r.status, 0, r.stderr);
});

after(async () => {
	for (const c of clients) await c.close().catch(() => {});
	if (!home) return;
	for (const name of ["berth-mcp-filesystem", "berth-mcp-mcp-slow", "berth-dev-notes", "berth-mcp-mcp-fixture", "berth-dev-mcp-fixture", "berth-dev-mcp-slow"]) run(["vm", "stop", name]);
	rmSync(home, { recursive: true, force: true });
});

test("refusals before anything boots keep standard output empty", { skip }, () => {
	let r = run(["mcp", "--app", "notes", "--app-dir", join(src, "apps/notes"), "--only", "add_note,nope"], { input: "" });
	assert.notEqual(r.status, 0);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /\[berth:mcp\] .*--only names export\(s\) not declared in "notes"'s berth.yml: nope — declared exports: add_note, list_notes, complete_note/);
	r = run(["mcp", "--app", "notes", "--app-dir", join(src, "apps/notes"), "--no-boot"], { input: "" });
	assert.notEqual(r.status, 0);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /no VM runs "notes" and --no-boot was given/);
	r = run(["mcp", "--app", "x", "--app-dir", join(home, "nowhere")], { input: "" });
	assert.notEqual(r.status, 0);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /couldn't load berth.yml from/);
	for (const line of r.stderr.trim().split("\n")) assert.match(line, /^\[berth:mcp\] /);
});

test("own VM: tools, a kernel denial explained, the VM stopped when the client goes", LONG, async () => {
	const appDir = join(src, "apps/filesystem");
	const { client, transport, log, stray } = await connect(["--app", "filesystem", "--app-dir", appDir, "--run-id", "mcp-e2e-fs"]);
	// initialize and tools/list are answered while the VM boots; calls wait for it.
	assert.equal(client.getServerVersion().name, "berth-filesystem");
	assert.equal(client.getServerVersion().version, "0.1.0");
	const { tools } = await client.listTools();
	const manifestExports = [...readFileSync(join(appDir, "berth.yml"), "utf8").matchAll(/^  - name: (\S+)/gm)].map((m) => m[1]);
	assert.deepEqual(tools.map((t) => t.name), manifestExports);
	const write = tools.find((t) => t.name === "write_file");
	assert.equal(write.description, 'Berth resident app export "write_file" (from filesystem\'s berth.yml)');
	assert.deepEqual(write.inputSchema, {
		$schema: "http://json-schema.org/draft-07/schema#",
		type: "object",
		properties: { path: { type: "string" }, content: { type: "string" } },
		required: ["path", "content"],
	});
	assert.deepEqual(tools.find((t) => t.name === "list_files").inputSchema, {
		$schema: "http://json-schema.org/draft-07/schema#",
		type: "object",
		properties: {},
	});
	assert.deepEqual(tools.find((t) => t.name === "publish_context_event").inputSchema.properties.payload, {
		type: "object",
		propertyNames: { type: "string" },
		additionalProperties: {},
	});

	// A write inside the workspace works; a write to /etc is the kernel's refusal, explained.
	let r = await client.callTool({ name: "write_file", arguments: { path: "hello.txt", content: "hi" } });
	// berth mcp's own log says why a boot failed: keep it with the failure.
	assert.ok(!r.isError, `${text(r)}\n--- berth mcp's standard error ---\n${log.text}`);
	assert.match(log.text, /calls wait for the VM/);
	assert.match(log.text, /booting "filesystem" in VM berth-mcp-filesystem/);
	assert.match(log.text, /kernel enforcement in this VM: enforced/);
	assert.ok(running("berth-mcp-filesystem"));
	r = await client.callTool({ name: "write_file", arguments: { path: "../../../etc/berth-should-not-exist.txt", content: "x" } });
	assert.equal(r.isError, true);
	const denial = text(r);
	assert.match(denial, /^BERTH CAPABILITY DENIAL$/m);
	assert.match(denial, /^denied-by: the kernel/m);
	assert.match(denial, /berth\.yml/);
	assert.doesNotMatch(denial, /filesystem:write:\/etc/);

	// Argument checks and unknown tools are results, not protocol errors.
	r = await client.callTool({ name: "write_file", arguments: { path: 3 } });
	assert.equal(r.isError, true);
	assert.equal(
		text(r),
		"MCP error -32602: Input validation error: Invalid arguments for tool write_file: " +
			"Invalid input: expected string, received number at path\nInvalid input: expected string, received undefined at content",
	);
	r = await client.callTool({ name: "no_such_tool", arguments: {} });
	assert.equal(r.isError, true);
	assert.equal(text(r), "MCP error -32602: Tool no_such_tool not found");
	assert.deepEqual(await client.ping(), {});

	await client.close();
	await waitFor("the VM berth mcp booted to stop", () => !running("berth-mcp-filesystem"), 120);
	assert.match(log.text, /stopping the VM berth-mcp-filesystem it booted/);
	assert.deepEqual(stray, []);
});

const docker = spawnSync("docker", ["info"], { encoding: "utf8" }).status === 0;
test("--runtime docker: the same tools in a container, the denial explained, the audit says docker", { ...LONG, skip: skip || (!docker && "no dockerd answers") }, async () => {
	const appDir = join(src, "apps/filesystem");
	const { client, log, stray } = await connect(["--app", "filesystem", "--app-dir", appDir, "--runtime", "docker", "--run-id", "mcp-e2e-docker"]);
	const { tools } = await client.listTools();
	assert.ok(tools.some((t) => t.name === "write_file"));
	let r = await client.callTool({ name: "write_file", arguments: { path: "hello.txt", content: "hi from a container" } });
	assert.ok(!r.isError, text(r));
	const vm = JSON.parse(readFileSync(join(home, "run/vm/berth-mcp-filesystem/vm.json"), "utf8"));
	assert.equal(vm.engine, "docker");
	r = await client.callTool({ name: "write_file", arguments: { path: "../../../etc/berth-should-not-exist.txt", content: "x" } });
	assert.equal(r.isError, true);
	assert.match(text(r), /^BERTH CAPABILITY DENIAL$/m);
	assert.match(text(r), /^denied-by: the kernel/m);
	await client.close();
	await waitFor("the container berth mcp started to stop", () => !running("berth-mcp-filesystem"), 120);
	const left = spawnSync("docker", ["ps", "-aq", "--filter", `label=org.berth.run-dir=${join(home, "run/vm/berth-mcp-filesystem")}`], { encoding: "utf8" });
	assert.equal(left.stdout.trim(), "", "no container is left");
	const records = readFileSync(join(home, "audit/audit.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
	const boot = records.find((e) => e.action === "sandbox.boot" && e.meta?.runId === "mcp-e2e-docker");
	assert.ok(boot, "the session's boot is audited");
	assert.equal(boot.meta.evidence.runtime, "docker");
	assert.equal(boot.meta.evidence.isolation.kind, "container");
	assert.equal(boot.meta.evidence.isolation.kernel.enforcedBy, "host");
	assert.equal(boot.meta.evidence.doctorProbe.status, "enforcing");
	assert.deepEqual(stray, []);
	assert.match(log.text, /booting "filesystem"/);
});

test("attach to berth dev's VM, round trip, across a reload, leave it running; stdout is only JSON-RPC", LONG, async () => {
	// A copy, so the test can edit it to make berth dev reload.
	const appDir = join(home, "notes");
	cpSync(join(src, "apps/notes"), appDir, { recursive: true });
	const dev = spawn(berth, ["dev"], { cwd: appDir, env, stdio: ["ignore", "pipe", "pipe"] });
	let devOut = "";
	dev.stdout.on("data", (d) => (devOut += d));
	dev.stderr.on("data", (d) => (devOut += d));
	try {
		await waitFor("berth dev to be ready", () => /^VM ready in/m.test(devOut), 600);

		const { client, log, stray } = await connect(["--app", "notes", "--app-dir", appDir, "--only", "add_note,list_notes", "--run-id", "mcp-e2e-notes"]);
		// Standard error is a stream of its own: the line may come after initialize's answer.
		await waitFor("the attach line", () => /attached to the running VM "berth-dev-notes"/.test(log.text));
		const { tools } = await client.listTools();
		assert.deepEqual(tools.map((t) => t.name), ["add_note", "list_notes"]);
		const note = `from mcp ${process.pid}`;
		let r = await client.callTool({ name: "add_note", arguments: { text: note, extra: "stripped" } });
		assert.ok(!r.isError, text(r));
		const { id } = JSON.parse(text(r));
		assert.match(id, /^[0-9a-f-]{36}$/);
		r = await client.callTool({ name: "list_notes", arguments: {} });
		assert.ok(JSON.parse(text(r)).notes.some((n) => n.id === id && n.text === note));
		r = await client.callTool({ name: "complete_note", arguments: { id } });
		assert.equal(r.isError, true, "complete_note is not served with --only");

		// berth dev reloads the app in place on a change; the session follows and records it.
		const reloads = (devOut.match(/^Reloaded in/gm) || []).length;
		appendFileSync(join(appDir, "src/index.ts"), "\nexport const mcpTestRevision = 1;\n");
		await waitFor("berth dev to reload", () => (devOut.match(/^Reloaded in/gm) || []).length > reloads, 600);
		r = await client.callTool({ name: "list_notes", arguments: {} });
		assert.ok(JSON.parse(text(r)).notes.some((n) => n.id === id), "the note survived the reload on the state disk");
		assert.match(devOut, /^Reloaded in place in /m);
		await waitFor("the session to record the reload", () => /was reloaded in place \(share [0-9a-f]{12}\); recording it/.test(log.text));
		await client.close();
		await new Promise((res) => setTimeout(res, 1000));
		assert.ok(running("berth-dev-notes"), "berth dev's VM keeps running after the client goes");
		assert.deepEqual(stray, []);

		// A raw client: malformed input gets JSON-RPC errors, and stdout holds nothing else.
		const raw = spawnSync(berth, ["mcp", "--app", "notes", "--app-dir", appDir], {
			env,
			encoding: "utf8",
			timeout: 120_000,
			input: [
				JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2024-11-05", capabilities: {}, clientInfo: { name: "raw", version: "0" } } }),
				JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
				"{not json",
				"[1,2]",
				JSON.stringify({ jsonrpc: "2.0", id: 2, method: "no/such" }),
				JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "list_notes", arguments: {} } }),
				JSON.stringify({ jsonrpc: "2.0", id: 4, method: "ping" }),
				"x".repeat(5 * 1024 * 1024),
				JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/list" }),
				"",
			].join("\n"),
		});
		assert.equal(raw.status, 0, raw.stderr);
		const lines = raw.stdout.trim().split("\n");
		const msgs = lines.map((l) => JSON.parse(l));
		for (const m of msgs) assert.equal(m.jsonrpc, "2.0");
		const byId = (id) => msgs.find((m) => m.id === id);
		assert.equal(byId(1).result.protocolVersion, "2024-11-05");
		assert.deepEqual(byId(1).result.capabilities, { tools: { listChanged: true } });
		assert.equal(msgs.filter((m) => m.id === null && m.error?.code === -32700).length, 2, raw.stdout);
		assert.ok(msgs.some((m) => m.id === null && m.error?.code === -32600));
		assert.equal(byId(2).error.code, -32601);
		assert.ok(JSON.parse(byId(3).result.content[0].text).notes.length >= 1);
		assert.deepEqual(byId(4).result, {});
		assert.equal(byId(5).result.tools.length, 3);
		assert.equal(msgs.length, 8);
		for (const line of raw.stderr.trim().split("\n")) assert.match(line, /^\[berth:mcp\] /);
		assert.ok(running("berth-dev-notes"));
	} finally {
		dev.kill("SIGINT");
		await new Promise((res) => dev.on("exit", res));
	}
});

test("cancelled and unanswered calls, app errors, --warm", LONG, async () => {
	const appDir = join(src, "test/e2e/fixtures/mcp-slow");
	let r = run(["mcp", "--app", "mcp-slow", "--app-dir", appDir, "--warm"], { input: "" });
	assert.equal(r.status, 0, r.stderr);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /warm: "mcp-slow" boots/);
	assert.ok(!running("berth-mcp-mcp-slow"), "--warm stops what it booted");

	const secret = `s3cr3t-${process.pid}-${Date.now()}`;
	const { client, log, stray } = await connect(
		["--app", "mcp-slow", "--app-dir", appDir, "--run-id", "mcp-e2e-slow", "--env", "MCP_E2E_SECRET"],
		{ BERTH_MCP_CALL_TIMEOUT_MS: "4000", MCP_E2E_SECRET: secret },
	);
	// A call cancelled while it waits for the VM to boot never reaches the app.
	await waitFor("the session to serve while booting", () => /calls wait for the VM/.test(log.text), 60);
	const early = new AbortController();
	const queued = client.callTool({ name: "echo", arguments: { text: "never sent" } }, undefined, { signal: early.signal });
	await waitFor("the call to wait for the VM", () => /"echo" waits for the VM to be ready/.test(log.text), 60);
	early.abort("too early");
	await assert.rejects(queued);
	// --env reaches the app of a VM berth mcp boots, and the value is shown nowhere.
	r = await client.callTool({ name: "env_length", arguments: { name: "MCP_E2E_SECRET" } });
	assert.deepEqual(JSON.parse(text(r)), { length: secret.length });
	// Cancelled by the client: the SDK sends notifications/cancelled and rejects.
	const ac = new AbortController();
	const pending = client.callTool({ name: "sleep", arguments: { ms: 3000 } }, undefined, { signal: ac.signal, timeout: 60_000 });
	setTimeout(() => ac.abort("changed my mind"), 500);
	await assert.rejects(pending);
	// The session goes on.
	r = await client.callTool({ name: "echo", arguments: { text: "still here" } });
	assert.deepEqual(JSON.parse(text(r)), { text: "still here" });
	// No answer within the per-call timeout.
	r = await client.callTool({ name: "sleep", arguments: { ms: 9000 } }, undefined, { timeout: 60_000 });
	assert.equal(r.isError, true);
	assert.match(text(r), /^no answer from "sleep": it did not answer within 4 s\. The request may have reached the app, so it may have run — check before retrying anything that isn't safe to repeat\.$/);
	// An app's own error comes back verbatim (it is no denial).
	r = await client.callTool({ name: "fail", arguments: { message: "nothing to see" } });
	assert.equal(r.isError, true);
	assert.match(text(r), /nothing to see/);
	assert.doesNotMatch(text(r), /BERTH CAPABILITY DENIAL/);
	await client.close();
	await waitFor("the VM to stop", () => !running("berth-mcp-mcp-slow"), 120);
	assert.deepEqual(stray, []);
	assert.match(log.text, /serving mcp-slow's exports/);
	assert.ok(!log.text.includes(secret), "the secret is not in berth mcp's log");
	assert.ok(!readFileSync(join(home, "audit/audit.jsonl"), "utf8").includes(secret), "nor in the audit trail");
});

test("a real app's tool metadata, structuredContent the SDK validates, and progress during its boot", LONG, async () => {
	const appDir = join(src, "test/e2e/fixtures/mcp-fixture");
	const { client, log, stray } = await connect(["--app", "mcp-fixture", "--app-dir", appDir, "--run-id", "mcp-e2e-fixture"]);
	const { tools } = await client.listTools();
	const add = tools.find((t) => t.name === "add_note");
	assert.equal(add.title, "Add a note");
	assert.equal(add.description, "Add a note and return its id and how many notes there are.");
	assert.deepEqual(add.inputSchema.properties.text, { type: "string", description: "what the note says" });
	assert.deepEqual(add.outputSchema.properties, { id: { type: "string", description: "the new note's id" }, count: { type: "number" } });
	assert.deepEqual(add.annotations, { readOnlyHint: false, openWorldHint: false });
	assert.deepEqual(tools.find((t) => t.name === "list_notes").annotations, { readOnlyHint: true, openWorldHint: false, idempotentHint: true });

	// The first call waits for the boot and hears its stages.
	const progress = [];
	let r = await client.callTool({ name: "add_note", arguments: { text: "in a real VM" } }, undefined, { onprogress: (p) => progress.push(p), timeout: 600_000 });
	assert.ok(!r.isError, text(r));
	assert.match(r.structuredContent.id, /^[0-9a-f-]{36}$/);
	assert.equal(r.structuredContent.count, 1);
	assert.ok(progress.length >= 2, JSON.stringify(progress));
	for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
	assert.ok(progress.some((p) => p.message === "booting the VM berth-mcp-mcp-fixture"), JSON.stringify(progress));
	assert.equal(progress.at(-1).message, 'starting "mcp-fixture" in the VM');
	r = await client.callTool({ name: "list_notes", arguments: {} });
	assert.equal(r.structuredContent.notes[0].text, "in a real VM");
	r = await client.callTool({ name: "bad_output", arguments: {} });
	assert.equal(r.isError, true);
	assert.match(text(r), /does not match the output its berth\.yml declares \(id: expected string, received number\)/);
	await client.close();
	await waitFor("the VM berth mcp booted to stop", () => !running("berth-mcp-mcp-fixture"), 120);
	assert.deepEqual(stray, []);
	assert.match(log.text, /kernel enforcement in this VM: enforced/);
});

test("the MCP Inspector's CLI in both eras, and raw 2026-07-28 requests, against berth dev's VM", LONG, async () => {
	const inspector = join(src, "node_modules/.bin/mcp-inspector");
	const appDir = join(home, "mcp-fixture");
	cpSync(join(src, "test/e2e/fixtures/mcp-fixture"), appDir, { recursive: true });
	const dev = spawn(berth, ["dev"], { cwd: appDir, env, stdio: ["ignore", "pipe", "pipe"] });
	let devOut = "";
	dev.stdout.on("data", (d) => (devOut += d));
	dev.stderr.on("data", (d) => (devOut += d));
	try {
		await waitFor("berth dev to be ready", () => /^VM ready in/m.test(devOut), 600);
		const pass = ["-e", `BERTH_HOME=${home}`, "-e", `BERTH_AUDIT_PATH=${env.BERTH_AUDIT_PATH}`];
		for (const era of ["legacy", "modern", "auto"]) {
			const r = spawnSync(
				inspector,
				["--cli", "--protocol-era", era, ...pass, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", `text=${era}`, "--", berth, "mcp", "--app", "mcp-fixture", "--app-dir", appDir],
				{ env: { ...env, HOME: home, MCP_CATALOG_PATH: join(home, "inspector.json") }, encoding: "utf8", timeout: 300_000 },
			);
			assert.equal(r.status, 0, `${era}: ${r.stderr}${r.stdout}`);
			assert.deepEqual(JSON.parse(r.stdout).structuredContent, { text: era });
		}
		const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
		const raw = spawnSync(berth, ["mcp", "--app", "mcp-fixture", "--app-dir", appDir], {
			env,
			encoding: "utf8",
			timeout: 120_000,
			input: [
				{ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta } },
				{ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "add_note", arguments: { text: "stateless" }, _meta: meta } },
				{ jsonrpc: "2.0", id: 3, method: "tools/list", params: { _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2030-01-01" } } },
			]
				.map((m) => JSON.stringify(m))
				.join("\n") + "\n",
		});
		assert.equal(raw.status, 0, raw.stderr);
		const msgs = raw.stdout.trim().split("\n").map((l) => JSON.parse(l));
		const byId = (id) => msgs.find((m) => m.id === id);
		assert.deepEqual(byId(1).result.supportedVersions, ["2026-07-28"]);
		assert.equal(byId(2).result.resultType, "complete");
		assert.match(byId(2).result.structuredContent.id, /^[0-9a-f-]{36}$/);
		assert.equal(byId(3).error.code, -32022);
		assert.ok(running("berth-dev-mcp-fixture"));
	} finally {
		dev.kill("SIGINT");
		await new Promise((res) => dev.on("exit", res));
	}
});

test("attached to berth dev's VM while its app still starts: answered at once, progress, then the call", LONG, async () => {
	// An app that takes a while to be ready, so that the session attaches before it is.
	const appDir = join(home, "mcp-late");
	cpSync(join(src, "test/e2e/fixtures/mcp-slow"), appDir, { recursive: true });
	const entry = join(appDir, "src/index.ts");
	writeFileSync(entry, readFileSync(entry, "utf8").replace('import { z } from "zod";', 'import { z } from "zod";\nawait new Promise((resolve) => setTimeout(resolve, 8000));'));
	const dev = spawn(berth, ["dev"], { cwd: appDir, env, stdio: ["ignore", "pipe", "pipe"] });
	let devOut = "";
	dev.stdout.on("data", (d) => (devOut += d));
	dev.stderr.on("data", (d) => (devOut += d));
	try {
		// The VM is up (its app started) but the app is not ready: attach now.
		await waitFor("the app to start in berth dev's VM", () => {
			const log = join(home, "run/vm/berth-dev-mcp-slow/vmm.log");
			return existsSync(log) && readFileSync(log, "utf8").includes('"event":"app_started"');
		}, 600);
		assert.ok(!/^VM ready in/m.test(devOut), "the app is not ready yet");
		const { client, log } = await connect(["--app", "mcp-slow", "--app-dir", appDir, "--no-boot"]);
		// The handshake did not wait for the app, which sleeps 8 s before it is ready.
		assert.ok(!/^VM ready in/m.test(devOut), "initialize was answered before the app was ready");
		const progress = [];
		const r = await client.callTool({ name: "echo", arguments: { text: "late" } }, undefined, {
			onprogress: (p) => progress.push(p),
			timeout: 120_000,
		});
		assert.deepEqual(r.structuredContent, { text: "late" });
		assert.ok(/^VM ready in/m.test(devOut) || running("berth-dev-mcp-slow"), "berth dev's VM is the one that answered");
		assert.ok(progress.length >= 1, `progress while the app starts: ${JSON.stringify(progress)}\n${log.text}`);
		for (const p of progress) assert.match(p.message, /^(waiting for the VM berth-dev-mcp-slow to boot|starting "mcp-slow" in the VM)$/);
		assert.match(log.text, /attached to the running VM "berth-dev-mcp-slow"/);
		assert.match(log.text, /"echo" waits for the VM to be ready/);
		await client.close();
	} finally {
		dev.kill("SIGINT");
		await new Promise((resolve) => dev.once("exit", resolve));
	}
});

test("the audit trail: every call recorded, verify passes, an edited record is caught", { skip }, () => {
	const path = join(home, "audit/audit.jsonl");
	const records = readFileSync(path, "utf8").trim().split("\n").map((l) => JSON.parse(l));
	const boots = records.filter((r) => r.action === "sandbox.boot");
	assert.ok(boots.length >= 3, `sandbox.boot records: ${boots.length}`);
	for (const b of boots) {
		assert.match(b.meta.evidence.bootId, /^[0-9a-f-]{36}$/);
		assert.match(b.meta.evidence.imageDigest, /^sha256:[0-9a-f]{64}$/);
		// The --runtime docker session's boot was a container (its own test checks it).
		assert.equal(b.meta.evidence.isolation.kind, b.meta.evidence.runtime === "docker" ? "container" : "microvm");
	}
	const calls = records.filter((r) => r.action === "tool.call");
	const denied = calls.find((r) => r.target === "filesystem.write_file" && r.decision === "denied");
	assert.ok(denied, "the /etc write is recorded as denied");
	assert.equal(denied.reason, "BERTH CAPABILITY DENIAL");
	assert.equal(denied.meta.runId, "mcp-e2e-fs");
	assert.equal(denied.input, undefined, "payloads are not captured by default");
	const cancelled = calls.find((r) => r.target === "mcp-slow.sleep" && r.meta.cancelled);
	assert.ok(cancelled, "the cancelled call is recorded");
	const early = calls.find((r) => r.target === "mcp-slow.echo" && r.meta.cancelled);
	assert.equal(early.reason, '"echo" was cancelled by the client before it was sent');
	const timedOut = calls.find((r) => r.target === "mcp-slow.sleep" && !r.meta.cancelled);
	assert.equal(timedOut.meta.outcome, "unknown");
	assert.equal(timedOut.meta.failed, true);
	assert.ok(calls.some((r) => r.target === "notes.add_note" && r.decision === "allowed"));
	for (const r of calls) assert.match(r.meta.bridge, /^[0-9a-f]{16}$/);
	assert.equal(statMode(path), 0o600);

	// The session with its own VM is attested from its run id: the VM has ended, its
	// evidence is on disk, and the trail names the boot.
	let r = run(["attest", "mcp-e2e-fs"]);
	assert.equal(r.status, 0, r.stderr);
	const att = JSON.parse(r.stdout);
	assert.equal(att.runId, "mcp-e2e-fs");
	assert.equal(att.boot.bootId, boots.find((b) => b.meta.runId === "mcp-e2e-fs").meta.evidence.bootId);
	assert.equal(att.run.records, 3, "sandbox.boot and the two write_file calls that reached the app");
	assert.equal(att.enforcement.status, "ACTIVE");

	// The attached session saw berth dev reload the app in place: two records of one boot,
	// and attest takes the run, its record counting the reload.
	const notesBoots = boots.filter((b) => b.meta.runId === "mcp-e2e-notes");
	assert.equal(notesBoots.length, 2);
	assert.equal(notesBoots[0].meta.evidence.bootId, notesBoots[1].meta.evidence.bootId);
	r = run(["attest", "mcp-e2e-notes"]);
	assert.equal(r.status, 0, r.stderr);
	assert.ok(JSON.parse(r.stdout).boot.isolation.apps[0].reloads >= 1, r.stdout);

	r = run(["audit", "verify"]);
	assert.equal(r.status, 0, r.stdout + r.stderr);
	assert.match(r.stdout, new RegExp(`Chain intact across ${records.length} records\\. Head: [0-9a-f]{16}…`));

	r = run(["audit", "list", "--decision", "denied"]);
	assert.equal(r.status, 0, r.stderr);
	assert.match(r.stdout, /DENIED .*tool\.call {2}filesystem\.write_file {2}— BERTH CAPABILITY DENIAL/);

	// Edit one record's decision in place: the chain breaks at exactly that record.
	const lines = readFileSync(path, "utf8").split("\n");
	const at = lines.findIndex((l) => l.includes('"target":"notes.add_note"'));
	lines[at] = lines[at].replace('"decision":"allowed"', '"decision":"denied"');
	writeFileSync(path, lines.join("\n"));
	r = run(["audit", "verify"]);
	assert.notEqual(r.status, 0);
	assert.match(r.stdout + r.stderr, new RegExp(`audit\\.jsonl: BROKEN at record ${at + 1} — `));
});

function statMode(p) {
	return spawnSync("stat", ["-c", "%a", p], { encoding: "utf8" }).stdout.trim() === "600" ? 0o600 : -1;
}
