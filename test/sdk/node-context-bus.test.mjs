// SPDX-License-Identifier: Apache-2.0
// The Node SDK's context bus client against the real daemon (src/context-bus, built by
// meson) on this host: fan-out and no echo, one subscribe frame per topic, unsubscribe,
// JSON payloads both ways, a Python publisher and a Node subscriber, and reconnecting
// after the daemon went away and came back (SPEC §2.8, §5; docs/context-bus.md).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { bundleApp, connectRpc, FIXTURES, ROOT, SDK, sleep, startRuntime, tempDir, until, watchProcess } from "./helpers.mjs";

const bus = await import(join(SDK, "src", "context-bus.mjs"));
const BIN = process.env.CONTEXT_BUS || join(process.env.BERTH_BUILD_DIR ?? "", "src", "context-bus", "context-bus");
const work = tempDir("berth-bus-sdk-");
const socketPath = join(work, "bus.sock");
const daemons = [];
after(() => daemons.forEach((d) => d.kill("SIGKILL")));

async function startDaemon() {
	const log = join(work, `bus-${daemons.length}.log`);
	const { openSync } = await import("node:fs");
	const d = spawn(BIN, [], {
		env: { PATH: "/usr/bin:/bin", BERTH_CONTEXT_BUS_SOCKET: socketPath, BERTH_SHARED_GID: "0" },
		stdio: ["ignore", "ignore", openSync(log, "w")],
	});
	d.logPath = log;
	d.log = () => readFileSync(log, "utf8");
	d.exited = new Promise((r) => d.once("exit", r));
	daemons.push(d);
	await until("the bus to listen", () => d.log().includes(`listening on ${socketPath}`));
	return d;
}

const skip = !existsSync(BIN) && `${BIN} is not built`;
let daemon;

test("fan-out to other subscribers, no echo, JSON payloads", { skip }, async () => {
	daemon = await startDaemon();
	const a = await bus.connectContextBus({ socketPath });
	const b = await bus.connectContextBus({ socketPath });
	await a.register({ app: "notes" });
	await b.register({ app: "activity-feed" });
	const gotA = [];
	const gotB = [];
	a.subscribe("notes.added", (p) => gotA.push(p));
	b.subscribe("notes.added", (p) => gotB.push(p));
	await until("two subscriptions", () => (daemon.log().match(/subscribed to "notes.added"/g) ?? []).length === 2);
	await a.publish("notes.added", { id: "1", text: "ü milk" });
	await b.publish("notes.added");
	await until("both events", () => gotA.length === 1 && gotB.length === 1);
	await sleep(100);
	assert.deepEqual(gotB, [{ id: "1", text: "ü milk" }]);
	assert.deepEqual(gotA, [null]); // undefined is published as null
	a.close();
	b.close();
});

test("one subscribe frame per topic; unsubscribe when the last handler goes", { skip }, async () => {
	const a = await bus.connectContextBus({ socketPath });
	const b = await bus.connectContextBus({ socketPath });
	await b.register({ app: "code-editor" });
	const got = [];
	const before = (daemon.log().match(/"code-editor" subscribed to "fs.file_created"/g) ?? []).length;
	const off1 = b.subscribe("fs.file_created", (p) => got.push(["h1", p]));
	const off2 = b.subscribe("fs.file_created", (p) => got.push(["h2", p]));
	const subscribed = () => (daemon.log().match(/"code-editor" subscribed to "fs.file_created"/g) ?? []).length - before;
	await until("the subscription", () => subscribed() >= 1);
	await sleep(150); // a second subscribe frame, if one were sent, would be logged by now
	assert.equal(subscribed(), 1);
	await a.publish("fs.file_created", { path: "x", createdBy: "filesystem" });
	await until("the event", () => got.length === 2);
	off1();
	await a.publish("fs.file_created", { path: "y" });
	await until("the second event", () => got.length === 3);
	assert.deepEqual(got[2], ["h2", { path: "y" }]);
	const barrier = [];
	a.subscribe("test.barrier", (p) => barrier.push(p));
	await until("the barrier subscription", () => daemon.log().includes('subscribed to "test.barrier"'));
	off2();
	// b's unsubscribe and then its publish go down one connection in order: once a has the
	// barrier event, the bus has dropped b's subscription.
	await b.publish("test.barrier", 1);
	await until("the barrier event", () => barrier.length === 1);
	await a.publish("fs.file_created", { path: "z" });
	await sleep(200);
	assert.equal(got.length, 3);
	a.close();
	b.close();
});

test("a Python publisher reaches a Node subscriber", { skip }, async () => {
	const n = await bus.connectContextBus({ socketPath });
	const got = [];
	const subs = () => (daemon.log().match(/subscribed to "fs.file_created"/g) ?? []).length;
	const before = subs();
	n.subscribe("fs.file_created", (p) => got.push(p));
	await until("the subscription", () => subs() > before);
	const py = spawnSync(
		"/usr/bin/python3",
		[
			"-c",
			`import sys, time
sys.path.insert(0, ${JSON.stringify(join(ROOT, "sdk", "python"))})
from berth_sdk.context_bus import connect_context_bus
b = connect_context_bus(${JSON.stringify(socketPath)})
b.register("hello-world-py")
b.publish("fs.file_created", {"path": "x", "createdBy": "hello-world-py"})
time.sleep(0.2)
b.close()`,
		],
		{ encoding: "utf8" },
	);
	assert.equal(py.status, 0, py.stderr);
	await until("the Python event", () => got.length === 1);
	assert.deepEqual(got, [{ path: "x", createdBy: "hello-world-py" }]);
	n.close();
});

test("the client reconnects and subscribes again after the daemon came back", { skip }, async () => {
	const sub = await bus.connectContextBus({ socketPath });
	const pub = await bus.connectContextBus({ socketPath });
	await sub.register({ app: "activity-feed" });
	const got = [];
	sub.subscribe("notes.completed", (p) => got.push(p));
	await until("the subscription", () => daemon.log().includes('"activity-feed" subscribed to "notes.completed"'));
	daemon.kill("SIGTERM");
	await daemon.exited;
	await until("both clients to notice", () => !sub.connected && !pub.connected);
	await pub.publish("notes.completed", { id: "lost" }); // dropped: at most once
	daemon = await startDaemon();
	await until("the resubscription", () => daemon.log().includes('"activity-feed" subscribed to "notes.completed"'), 10000);
	assert.ok(daemon.log().includes('registered as "activity-feed"'), daemon.log());
	await until("the publisher to reconnect", () => pub.connected, 10000);
	await pub.publish("notes.completed", { id: "after" });
	await until("the event after the restart", () => got.length === 1);
	assert.deepEqual(got, [{ id: "after" }]);
	sub.close();
	pub.close();
});

test("app runtimes on the daemon: a bundled Node app and a Python app reach another Node app, never themselves", { skip }, async () => {
	const share = join(work, "share");
	await bundleApp(join(FIXTURES, "node-app"), share);
	const boot = async (name) => {
		const sock = join(work, `${name}.sock`);
		const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock, BERTH_CONTEXT_BUS_SOCKET: socketPath }, { name }).ready;
		assert.ok(rt.stderr.includes(`[berth:runtime] context bus connected at ${socketPath}`), rt.stderr);
		return { rt, rpc: await connectRpc(sock) };
	};
	const a = await boot("node-a");
	const b = await boot("node-b");
	const pySock = join(work, "py.sock");
	const py = watchProcess(
		spawn("/usr/bin/python3", ["-m", "berth_sdk.runtime"], {
			cwd: join(FIXTURES, "python-app"),
			env: {
				PATH: process.env.PATH,
				PYTHONPATH: join(ROOT, "sdk", "python"),
				BERTH_RPC_SOCKET: pySock,
				BERTH_CONTEXT_BUS_SOCKET: socketPath,
			},
			stdio: ["pipe", "pipe", "pipe"],
		}),
		"python-app",
	);
	await py.ready;
	assert.ok(py.stderr.includes(`context bus connected at ${socketPath}`), py.stderr);
	const p = await connectRpc(pySock);
	// Each runtime registers and subscribes to fixture.in at start.
	await until("three subscriptions", () => (daemon.log().match(/subscribed to "fixture.in"/g) ?? []).length >= 3);
	await a.rpc.call("publish", { topic: "fixture.in", payload: { from: "node-a" } });
	await p.call("publish", { topic: "fixture.in", payload: { from: "python" } });
	await until("node-b's two events", async () => (await b.rpc.call("received")).result.received.length === 2);
	assert.deepEqual((await b.rpc.call("received")).result.received, [{ from: "node-a" }, { from: "python" }]);
	assert.deepEqual((await a.rpc.call("received")).result.received, [{ from: "python" }]);
	assert.deepEqual((await p.call("received")).result.received, [{ from: "node-a" }]);
	for (const c of [a.rpc, b.rpc, p]) c.close();
	await Promise.all([a.rt.stop(), b.rt.stop(), py.stop()]);
});

test("connecting to no daemon fails within the timeout (the runtime then falls back)", async () => {
	await assert.rejects(bus.connectContextBus({ socketPath: join(work, "none.sock"), timeoutMs: 500 }), /ENOENT/);
});
