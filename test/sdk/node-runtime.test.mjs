// SPDX-License-Identifier: Apache-2.0
// The bundled Node runtime, started as a subprocess, spoken to over its socket and stdio.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { bundleApp, connectRpc, FIXTURES, RUNTIME_NODE, SDK, sleep, startRuntime, tempDir, until } from "./helpers.mjs";

const { decodeEnvelope, encodeEnvelope, frame } = await import(join(SDK, "src", "context-bus.mjs"));

const work = tempDir();
const share = join(work, "share");
await bundleApp(join(FIXTURES, "node-app"), share);

async function boot(env = {}) {
	const run = join(work, `run-${Math.random().toString(36).slice(2)}`);
	mkdirSync(run);
	const sock = join(run, "rpc.sock");
	const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock, ...env }).ready;
	assert.equal(rt.exitCode, undefined, `runtime exited early:\n${rt.stderr}`);
	return { rt, sock, run };
}

const ZOD_TEXT_ERROR = JSON.stringify(
	[{ expected: "string", code: "invalid_type", path: ["text"], message: "Invalid input: expected string, received number" }],
	null,
	2,
);

test("imported with the preload mark, runtime.mjs runs nothing; warmUp() says nothing; its main() then starts the app", async () => {
	// What a warm Node does (src/berth-init/node-warm.mjs), in a Node of its own.
	const sock = join(work, "preload.sock");
	const script = [
		`globalThis[Symbol.for("berth.runtime.preload")] = true;`,
		`const { main, warmUp } = await import(${JSON.stringify("file://" + join(share, "runtime.mjs"))});`,
		`delete globalThis[Symbol.for("berth.runtime.preload")];`,
		`process.stderr.write("[preload] imported, " + typeof main + "\\n");`,
		`warmUp();`,
		`await new Promise((r) => setTimeout(r, 200));`,
		`process.stderr.write("[preload] calling main\\n");`,
		`await main();`,
		`process.stderr.write("[preload] main returned\\n");`,
		`process.exit(0);`,
	].join("\n");
	const child = spawnSync(RUNTIME_NODE, ["--input-type=module", "-e", script], {
		cwd: share,
		env: {
			PATH: process.env.PATH,
			BERTH_MANIFEST_PATH: join(share, "berth.yml"),
			BERTH_APP_ENTRY: join(share, "dist", "index.mjs"),
			BERTH_CONTEXT_BUS_SOCKET: join(share, "no-such-bus.sock"),
			BERTH_RPC_SOCKET: sock,
		},
		encoding: "utf8",
		timeout: 60000,
	});
	const lines = child.stderr.split("\n");
	const imported = lines.indexOf("[preload] imported, function");
	const calling = lines.indexOf("[preload] calling main");
	const loading = lines.findIndex((l) => l.startsWith("[berth:runtime] loading manifest"));
	assert.ok(imported >= 0 && calling > imported, child.stderr);
	assert.ok(loading > calling, `nothing of the runtime ran before main():\n${child.stderr}`);
	// main() ran the app until its ready line, and resolved then.
	const ready = lines.indexOf('[berth:runtime] "fixture" ready');
	assert.ok(ready > loading && lines.indexOf("[preload] main returned") > ready, child.stderr);
	assert.equal(child.status, 0, child.stderr);
});

test("boot prints the steps and the exact ready line; the socket is 0600", async () => {
	const { rt, sock } = await boot();
	const lines = rt.stderr.split("\n");
	assert.ok(lines.includes(`[berth:runtime] loading manifest from ${join(share, "berth.yml")}`), rt.stderr);
	assert.ok(lines.includes(`[berth:runtime] loading app entry ${join(share, "dist", "index.mjs")}`), rt.stderr);
	assert.ok(lines.includes('[berth:runtime] "fixture" ready'), rt.stderr);
	assert.ok(lines.some((l) => l.startsWith("[berth:runtime] context bus unavailable at ")), rt.stderr);
	assert.equal(statSync(sock).mode & 0o777, 0o600);
	assert.equal(rt.stdout, "");
	await rt.stop();
	assert.equal(rt.exitCode, 0);
	assert.equal(existsSync(sock), false, "socket removed on SIGTERM");
});

test("unknown export, zod errors, handler errors and null results", async () => {
	const { rt, sock } = await boot();
	const c = await connectRpc(sock);
	c.send({ id: "u1", export: "does_not_exist", input: {} });
	assert.equal((await c.answer("u1")).line, '{"id":"u1","error":"no such export \\"does_not_exist\\""}');
	assert.deepEqual(await c.call("echo", { text: 5 }, "z1"), { id: "z1", error: ZOD_TEXT_ERROR });
	const missing = await c.call("echo", undefined, "z2");
	assert.deepEqual(JSON.parse(missing.error), [
		{ expected: "object", code: "invalid_type", path: [], message: "Invalid input: expected object, received undefined" },
	]);
	assert.deepEqual(await c.call("echo", { text: "hi" }, "ok1"), { id: "ok1", result: { text: "hi" } });
	c.send({ id: "n1", export: "nothing" });
	assert.equal((await c.answer("n1")).line, '{"id":"n1","result":null}');
	assert.deepEqual(await c.call("fail", undefined, "f1"), { id: "f1", error: "boom: the handler failed" });
	const bad = await c.call("bad_output", undefined, "b1");
	assert.equal(JSON.parse(bad.error)[0].path[0], "n");
	assert.deepEqual((await c.call("with_default", undefined, "d1")).result, { kept: "yes", added: "from the schema" });
	c.send({ id: 42, export: "echo", input: { text: "numeric id" } });
	assert.equal((await c.answer(42)).line, '{"id":42,"result":{"text":"numeric id"}}');
	c.close();
	await rt.stop();
});

test("hooks run in order before serving: onInstall, then each onAgentReady", async () => {
	const { rt, sock } = await boot();
	const c = await connectRpc(sock);
	assert.deepEqual((await c.call("hooks")).result, { events: ["install", "ready:fixture:1.2.3", "ready-2"] });
	c.close();
	await rt.stop();
});

test("requests on one connection run concurrently; answers come as they finish", async () => {
	const { rt, sock } = await boot();
	const c = await connectRpc(sock);
	c.send({ id: "slow", export: "sleep", input: { ms: 400 } });
	c.send({ id: "fast", export: "echo", input: { text: "quick" } });
	await c.answer("slow");
	assert.deepEqual(c.lines.map((l) => JSON.parse(l).id), ["fast", "slow"]);
	// And many connections at once.
	const clients = await Promise.all(Array.from({ length: 8 }, () => connectRpc(sock)));
	const t0 = Date.now();
	const answers = await Promise.all(clients.map((cl, i) => cl.call("sleep", { ms: 300 }, `s${i}`)));
	assert.ok(Date.now() - t0 < 2500, "eight 300 ms calls overlapped");
	answers.forEach((a, i) => assert.deepEqual(a, { id: `s${i}`, result: { slept: 300 } }));
	for (const cl of [c, ...clients]) cl.close();
	await rt.stop();
});

test("a non-JSON line is logged and gets no answer; blank lines are ignored", async () => {
	const { rt, sock } = await boot();
	const c = await connectRpc(sock);
	c.sendRaw("this is not json\n\n   \n");
	c.send({ id: "after", export: "echo", input: { text: "still here" } });
	await c.answer("after");
	await sleep(100);
	assert.equal(c.lines.length, 1, `exactly one answer: ${c.lines}`);
	assert.ok(rt.stderr.includes("[berth:runtime] ignoring non-JSON RPC line: this is not json\n"), rt.stderr);
	c.close();
	await rt.stop();
});

test("a stale socket file is replaced", async () => {
	const run = join(work, "stale");
	mkdirSync(run);
	const sock = join(run, "rpc.sock");
	// A process that dies without closing its listener leaves the socket file behind.
	spawnSync(process.execPath, ["-e", `require("net").createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, "SIGKILL"))`]);
	assert.ok(statSync(sock).isSocket(), "stale socket exists");
	const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock }).ready;
	const c = await connectRpc(sock);
	assert.deepEqual((await c.call("echo", { text: "fresh" })).result, { text: "fresh" });
	c.close();
	await rt.stop();
});

test("stdio transport when no socket is set; exits 0 at end of input", async () => {
	const rt = startRuntime(share, {});
	await rt.ready;
	rt.child.stdin.write('{"id":"1","export":"echo","input":{"text":"over stdio"}}\nnot json\n{"id":"2","export":"nope"}\n');
	rt.child.stdin.end();
	await rt.exited;
	assert.equal(rt.exitCode, 0, rt.stderr);
	assert.deepEqual(rt.stdout.trim().split("\n").map((l) => JSON.parse(l)).sort((a, b) => a.id.localeCompare(b.id)), [
		{ id: "1", result: { text: "over stdio" } },
		{ id: "2", error: 'no such export "nope"' },
	]);
	assert.ok(rt.stderr.includes("[berth:runtime] ignoring non-JSON RPC line: not json"));
});

test("exports mismatch: exact message, exit 1, no ready line", async () => {
	const app = join(work, "mismatch-app");
	cpSync(join(FIXTURES, "node-app"), app, { recursive: true });
	const yml = join(app, "berth.yml");
	const text = readFileSync(yml, "utf8");
	writeFileSync(yml, text.replace("  - name: nothing\n", "  - name: extra_one\n  - name: extra_two\n").replace("  - name: fail\n", ""));
	const out = join(work, "mismatch-share");
	await bundleApp(app, out);
	const rt = await startRuntime(out, { BERTH_RPC_SOCKET: join(work, "mm.sock") }).ready;
	await rt.exited;
	assert.equal(rt.exitCode, 1);
	assert.ok(
		rt.stderr.includes(
			"[berth:runtime] fatal error during startup: exports mismatch between berth.yml and app code — declared in berth.yml but not implemented: extra_one, extra_two; implemented in code but not declared in berth.yml: nothing, fail\n",
		),
		rt.stderr,
	);
	assert.ok(!rt.stderr.includes("ready"));
});

test("berth.yml.json is used only for the bytes it was made from; else berth.yml is parsed", async () => {
	const copy = (name) => {
		const dir = join(work, name);
		cpSync(share, dir, { recursive: true });
		return dir;
	};
	const startup = async (dir) => {
		const rt = await startRuntime(dir, { BERTH_RPC_SOCKET: join(dir, "rpc.sock") }).ready;
		if (rt.exitCode === undefined) {
			await rt.stop();
			return { ready: true, stderr: rt.stderr };
		}
		await rt.exited;
		return { ready: false, stderr: rt.stderr };
	};
	const mismatch = "exports mismatch between berth.yml and app code — declared in berth.yml but not implemented: extra_one";

	// A parsed copy that matches berth.yml's sha256 is what the runtime goes by.
	let dir = copy("parsed-used");
	const parsed = JSON.parse(readFileSync(join(dir, "berth.yml.json"), "utf8"));
	parsed.value.exports.push({ name: "extra_one" });
	writeFileSync(join(dir, "berth.yml.json"), JSON.stringify(parsed));
	let r = await startup(dir);
	assert.equal(r.ready, false);
	assert.ok(r.stderr.includes(mismatch), r.stderr);

	// berth.yml edited after the bundle: the stale copy is ignored.
	dir = copy("parsed-stale");
	const yml = join(dir, "berth.yml");
	writeFileSync(yml, readFileSync(yml, "utf8").replace("exports:\n", "exports:\n  - name: extra_one\n"));
	r = await startup(dir);
	assert.equal(r.ready, false);
	assert.ok(r.stderr.includes(mismatch), r.stderr);

	// A copy that is not JSON, or none: berth.yml is parsed and the app starts.
	dir = copy("parsed-garbage");
	writeFileSync(join(dir, "berth.yml.json"), "{not json");
	r = await startup(dir);
	assert.ok(r.ready, r.stderr);
	assert.ok(r.stderr.includes('[berth:runtime] "fixture" ready'), r.stderr);
	dir = copy("parsed-missing");
	rmSync(join(dir, "berth.yml.json"));
	r = await startup(dir);
	assert.ok(r.ready, r.stderr);
	assert.ok(r.stderr.includes('[berth:runtime] "fixture" ready'), r.stderr);

	// A copy keyed by the right bytes whose value does not validate: berth.yml itself is
	// parsed, and what it says (valid here) is what counts.
	dir = copy("parsed-invalid");
	const bad = JSON.parse(readFileSync(join(dir, "berth.yml.json"), "utf8"));
	bad.value.name = "Bad_Name";
	writeFileSync(join(dir, "berth.yml.json"), JSON.stringify(bad));
	r = await startup(dir);
	assert.ok(r.ready, r.stderr);
	assert.ok(r.stderr.includes('[berth:runtime] "fixture" ready'), r.stderr);
});

test("startup failures: no defineApp default export, invalid manifest, missing entry", async () => {
	const entry = join(work, "not-an-app.mjs");
	writeFileSync(entry, "export default { hello: 1 };\n");
	let rt = await startRuntime(share, { BERTH_APP_ENTRY: entry }).ready;
	await rt.exited;
	assert.equal(rt.exitCode, 1);
	assert.ok(rt.stderr.includes(`[berth:runtime] fatal error during startup: ${entry} must have a default export from defineApp()\n`), rt.stderr);

	const yml = join(work, "bad.yml");
	writeFileSync(yml, "name: Bad_Name\nversion: 1.0\ncapabilities:\n  - filesystem:write:/etc\n");
	rt = await startRuntime(share, { BERTH_MANIFEST_PATH: yml }).ready;
	await rt.exited;
	assert.equal(rt.exitCode, 1);
	assert.ok(
		rt.stderr.includes(
			"[berth:runtime] fatal error during startup: invalid berth.yml:\n" +
				"bad.yml:1 name: name must be lowercase alphanumeric with dashes\n" +
				"bad.yml:2 version: Invalid input: expected string, received number\n" +
				'bad.yml:4 capabilities.0: filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got "/etc"\n',
		),
		rt.stderr,
	);

	rt = await startRuntime(share, { BERTH_APP_ENTRY: join(work, "missing.mjs") }).ready;
	await rt.exited;
	assert.equal(rt.exitCode, 1);
	assert.match(rt.stderr, /\[berth:runtime\] fatal error during startup: Cannot find module/);
});

test("context bus: register, subscribe, events in, publishes out", async (t) => {
	const busPath = join(work, "bus.sock");
	const frames = [];
	let conn;
	const server = net.createServer((s) => {
		conn = s;
		let buf = Buffer.alloc(0);
		s.on("data", (d) => {
			buf = Buffer.concat([buf, d]);
			while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
				const len = buf.readUInt32BE(0);
				frames.push(decodeEnvelope(buf.subarray(4, 4 + len)));
				buf = buf.subarray(4 + len);
			}
		});
	});
	await new Promise((r) => server.listen(busPath, r));
	// A failed check must not leave the runtime and the server keeping this file alive.
	t.after(() => {
		conn?.destroy();
		server.close();
	});
	const { rt, sock } = await boot({ BERTH_CONTEXT_BUS_SOCKET: busPath });
	t.after(() => rt.child.kill("SIGKILL"));
	assert.ok(rt.stderr.includes(`[berth:runtime] context bus connected at ${busPath}`), rt.stderr);
	// The frames come over the bus socket, the ready line over stderr: either may be first.
	await until("register and subscribe", () => frames.length >= 2);
	assert.deepEqual(frames.slice(0, 2), [
		{ kind: "register", app: "fixture" },
		{ kind: "subscribe", topic: "fixture.in" },
	]);
	conn.write(frame(encodeEnvelope("ack", { ok: true })));
	conn.write(frame(encodeEnvelope("event", { topic: "fixture.in", payload: Buffer.from('{"n":1}') })));
	conn.write(frame(encodeEnvelope("event", { topic: "fixture.in" })));
	conn.write(frame(encodeEnvelope("event", { topic: "other.topic", payload: Buffer.from("2") })));
	const c = await connectRpc(sock);
	let received;
	await until("both events to reach the app", async () => {
		received = (await c.call("received")).result;
		return received.received.length >= 2;
	});
	await sleep(100); // the event on another topic, if it were delivered, would be in by now
	assert.deepEqual((await c.call("received")).result, { received: [{ n: 1 }, null] });
	await c.call("publish", { topic: "notes.added", payload: { id: "a", text: "ü" } });
	assert.deepEqual(await c.call("publish", { topic: "t.empty" }, "p2"), { id: "p2", result: null });
	const pubs = () => frames.filter((f) => f.kind === "publish");
	await until("both publishes", () => pubs().length >= 2);
	assert.deepEqual(pubs().map((p) => [p.topic, p.payload.toString("utf8")]), [
		["notes.added", '{"id":"a","text":"ü"}'],
		["t.empty", "null"],
	]);
	c.close();
	await rt.stop();
});

test("peer sockets: 0660, calls are attributed to the peer", async () => {
	const run = join(work, "peers-run");
	mkdirSync(join(run, "peers", "caller-app"), { recursive: true });
	const sock = join(run, "rpc.sock");
	const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock }).ready;
	const peerSock = join(run, "peers", "caller-app", "rpc.sock");
	assert.equal(statSync(peerSock).mode & 0o777, 0o660);
	const c = await connectRpc(peerSock);
	assert.deepEqual((await c.call("echo", { text: "from a peer" })).result, { text: "from a peer" });
	// The line goes to standard error, a pipe of its own: it may come after the answer.
	const logged = () => rt.stderr.includes('[berth:runtime] "caller-app" invoked export "echo"');
	for (let i = 0; i < 100 && !logged(); i++) await new Promise((r) => setTimeout(r, 20));
	assert.ok(logged(), rt.stderr);
	c.close();
	await rt.stop();
});

test("governance: the governor's answer decides; unreachable means denied", async () => {
	const root = join(work, "gov");
	const govSock = join(root, "gov", "peers", "fixture", "rpc.sock");
	mkdirSync(join(root, "gov", "peers", "fixture"), { recursive: true });
	const asked = [];
	const gov = net.createServer((s) => {
		s.on("data", (d) => {
			for (const line of d.toString().split("\n").filter(Boolean)) {
				const req = JSON.parse(line);
				asked.push(req);
				const allowed = req.input.input?.text !== "forbidden";
				s.write(JSON.stringify({ id: req.id, result: allowed ? { allowed } : { allowed, reason: "not today" } }) + "\n");
			}
		});
	});
	await new Promise((r) => gov.listen(govSock, r));
	const { rt, sock } = await boot({ BERTH_GOVERNANCE_APP: "gov", BERTH_GOVERNANCE_SOCKET_ROOT: root });
	const c = await connectRpc(sock);
	assert.deepEqual((await c.call("echo", { text: "fine" })).result, { text: "fine" });
	assert.deepEqual((await c.call("echo", { text: "forbidden" }, "g2")).error, "governance denied echo: not today");
	assert.equal(asked[0].export, "evaluate_action");
	assert.deepEqual(asked[0].input, { app: "fixture", export: "echo", input: { text: "fine" }, caller: "host" });
	gov.close();
	await sleep(50);
	const denied = await c.call("echo", { text: "fine" }, "g3");
	assert.match(denied.error, /^governance denied echo: governance unavailable \(/);
	c.close();
	await rt.stop();
});

test("configureEgressProxy routes fetch() through BERTH_EGRESS_PROXY_URL", async (t) => {
	const target = http.createServer((req, res) => res.end("hello through the proxy"));
	await new Promise((r) => target.listen(0, "127.0.0.1", r));
	t.after(() => target.close());
	const connects = [];
	const proxy = http.createServer((req, res) => res.writeHead(405).end());
	proxy.on("connect", (req, client, head) => {
		connects.push(req.url);
		const [host, port] = req.url.split(":");
		const up = net.connect(Number(port), host, () => {
			client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
			up.write(head);
			up.pipe(client);
			client.pipe(up);
		});
		up.on("error", () => client.destroy());
	});
	await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
	t.after(() => proxy.close());
	const { rt, sock } = await boot({ BERTH_EGRESS_PROXY_URL: `http://127.0.0.1:${proxy.address().port}` });
	// A failed assert below must not leave the runtime holding the test file open.
	t.after(() => rt.child.kill("SIGKILL"));
	const c = await connectRpc(sock);
	t.after(() => c.close());
	const url = `http://127.0.0.1:${target.address().port}/x`;
	const r = await c.call("fetch_text", { url });
	assert.deepEqual(r.result, { proxied: true, status: 200, body: "hello through the proxy" }, JSON.stringify(r));
	assert.deepEqual(connects, [`127.0.0.1:${target.address().port}`]);
	await rt.stop();
});

test("configureEgressProxy sends api.github.com to BERTH_GITHUB_API_PROXY, the rest to the egress proxy", async (t) => {
	const target = http.createServer((req, res) => res.end(`hello ${req.url}`));
	await new Promise((r) => target.listen(0, "127.0.0.1", r));
	t.after(() => target.close());
	const port = target.address().port;
	// A CONNECT proxy that tunnels to the target whatever host it is asked for.
	const makeProxy = async (seen) => {
		const proxy = http.createServer((req, res) => res.writeHead(405).end());
		proxy.on("connect", (req, client, head) => {
			seen.push(req.url);
			const up = net.connect(port, "127.0.0.1", () => {
				client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
				up.write(head);
				up.pipe(client);
				client.pipe(up);
			});
			up.on("error", () => client.destroy());
		});
		await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
		t.after(() => proxy.close());
		return proxy;
	};
	const viaEgress = [], viaGithub = [];
	const egress = await makeProxy(viaEgress), github = await makeProxy(viaGithub);
	const { rt, sock } = await boot({
		BERTH_EGRESS_PROXY_URL: `http://127.0.0.1:${egress.address().port}`,
		BERTH_GITHUB_API_PROXY: `http://127.0.0.1:${github.address().port}`,
	});
	t.after(() => rt.child.kill("SIGKILL"));
	const c = await connectRpc(sock);
	t.after(() => c.close());
	const a = await c.call("fetch_text", { url: `http://api.github.com:${port}/repos/o/r` });
	assert.deepEqual(a.result, { proxied: true, status: 200, body: "hello /repos/o/r" }, JSON.stringify(a));
	const b = await c.call("fetch_text", { url: `http://127.0.0.1:${port}/other` }, "2");
	assert.deepEqual(b.result, { proxied: true, status: 200, body: "hello /other" }, JSON.stringify(b));
	assert.deepEqual(viaGithub, [`api.github.com:${port}`]);
	assert.deepEqual(viaEgress, [`127.0.0.1:${port}`]);
	await rt.stop();
});

test("requestCapability reads the compiled policy, else the manifest", async () => {
	const { rt, sock, run } = await boot();
	const c = await connectRpc(sock);
	assert.deepEqual((await c.call("can", { capability: "filesystem:write:/workspace" })).result, { granted: true });
	assert.deepEqual((await c.call("can", { capability: "network:connect:443" })).result, { granted: false });
	c.close();
	await rt.stop();
	const policy = join(run, "policy.json");
	writeFileSync(policy, JSON.stringify({ declaredCapabilities: ["network:connect:*"] }));
	const again = await boot({ BERTH_CAPABILITY_POLICY: policy });
	const c2 = await connectRpc(again.sock);
	assert.deepEqual((await c2.call("can", { capability: "network:connect:443" })).result, { granted: true });
	assert.deepEqual((await c2.call("can", { capability: "filesystem:write:/workspace" })).result, { granted: false });
	c2.close();
	await again.rt.stop();
});

test("runtime.mjs runs without node_modules (self-contained share)", () => {
	const r = spawnSync(RUNTIME_NODE, ["--input-type=module", "-e", `await import(${JSON.stringify(join(share, "runtime.mjs"))})`], {
		cwd: "/",
		env: { PATH: process.env.PATH, BERTH_MANIFEST_PATH: join(share, "berth.yml"), BERTH_APP_ENTRY: join(share, "dist", "index.mjs"), BERTH_CONTEXT_BUS_SOCKET: "/nonexistent/bus.sock", NODE_PATH: "" },
		input: '{"id":"1","export":"echo","input":{"text":"standalone"}}\n',
		encoding: "utf8",
		timeout: 20000,
	});
	assert.equal(r.status, 0, r.stderr);
	assert.equal(r.stdout, '{"id":"1","result":{"text":"standalone"}}\n');
});

test("HTTP bridge: healthz, bearer token, 400/401/404", async () => {
	const probe = net.createServer();
	await new Promise((r) => probe.listen(0, "127.0.0.1", r));
	const port = probe.address().port;
	probe.close();
	const { rt } = await boot({ BERTH_HTTP_RPC_PORT: String(port), BERTH_HTTP_RPC_TOKEN: "s3cret" });
	const base = `http://127.0.0.1:${port}`;
	assert.deepEqual(await (await fetch(`${base}/healthz`)).json(), { ok: true });
	const rpc = (body, token) =>
		fetch(`${base}/rpc`, { method: "POST", body, headers: token ? { authorization: `Bearer ${token}` } : {} });
	const ok = await rpc('{"id":"h1","export":"echo","input":{"text":"http"}}', "s3cret");
	assert.equal(ok.status, 200);
	assert.deepEqual(await ok.json(), { id: "h1", result: { text: "http" } });
	const wrong = await rpc('{"id":"h2","export":"echo"}', "nope");
	assert.equal(wrong.status, 401);
	assert.deepEqual(await wrong.json(), { error: "invalid or missing bearer token" });
	assert.equal((await rpc('{"id":"h3"}')).status, 401);
	const bad = await rpc("not json", "s3cret");
	assert.equal(bad.status, 400);
	assert.deepEqual(await bad.json(), { error: "invalid JSON body" });
	const missing = await fetch(`${base}/other`);
	assert.equal(missing.status, 404);
	assert.deepEqual(await missing.json(), { error: "not found" });
	await rt.stop();
	// No token: refuses to start.
	const refused = await startRuntime(share, { BERTH_HTTP_RPC_PORT: String(port) }).ready;
	await refused.exited;
	assert.equal(refused.exitCode, 1);
	assert.match(refused.stderr, /fatal error during startup: BERTH_HTTP_RPC_PORT is set but BERTH_HTTP_RPC_TOKEN is not/);
});
