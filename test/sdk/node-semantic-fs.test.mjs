// SPDX-License-Identifier: Apache-2.0
// The Node SDK's semantic-fs client against the real daemon (src/semantic-fs), run on this
// host in a temporary directory: register, tag and query over SPEC §2.9's frames, the
// daemon's errors as rejections, a reconnect after the daemon restarts, and apps/filesystem
// through its runtime (write_context_file, tag_context_file, query_context).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { bundleApp, connectRpc, ROOT, SDK, startRuntime, tempDir, until } from "./helpers.mjs";

const { connectSemanticFs } = await import(join(SDK, "src", "semantic-fs.mjs"));

const DAEMON = join(process.env.BERTH_BUILD_DIR ?? join(ROOT, "build"), "src", "semantic-fs", "semantic-fs");
const isRoot = process.getuid?.() === 0;
const work = tempDir("berth-sfs-node-");
const context = join(work, "context");
const sock = join(work, "sfs.sock");
mkdirSync(context);
writeFileSync(join(work, "apps.json"), JSON.stringify({ schema: 1, apps: [{ uid: 10000, name: "filesystem" }] }));

/** Start the daemon; resolves once it says it listens. */
function startDaemon() {
	const child = spawn(
		DAEMON,
		["--socket", sock, "--context", context, "--index", join(work, "index"), "--apps", join(work, "apps.json"), "--socket-group", "0"],
		{ stdio: ["ignore", "ignore", "pipe"] },
	);
	let stderr = "";
	const ready = new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`the daemon did not listen:\n${stderr}`)), 20000);
		child.stderr.on("data", (d) => {
			stderr += d;
			if (stderr.includes(`listening on ${sock}`)) {
				clearTimeout(timer);
				resolve();
			}
		});
		child.on("exit", (code) => reject(new Error(`the daemon exited ${code}:\n${stderr}`)));
	});
	const exited = new Promise((resolve) => child.on("exit", resolve));
	return { child, ready, exited, log: () => stderr };
}

const skip = existsSync(DAEMON) ? false : `no daemon at ${DAEMON} (build first)`;
let daemon;

test("the client speaks to the daemon: register, tag, query, errors", { skip }, async (t) => {
	daemon = startDaemon();
	await daemon.ready;
	const sfs = await connectSemanticFs({ socketPath: sock });
	t.after(() => sfs.close());

	const me = await sfs.register({ app: "somebody-else" });
	assert.equal(me, isRoot ? "root" : `uid-${process.getuid()}`, "the kernel's name, not the claim");

	writeFileSync(join(context, "plan.md"), "The launch plan: rockets, fuel and a window.\n");
	writeFileSync(join(context, "shopping.txt"), "milk and eggs\n");
	if (isRoot) chownSync(join(context, "plan.md"), 10000, 10000);
	const tagged = await sfs.tag("plan.md", { task: "quarterly zebra review", relatedApps: ["notes"] });
	assert.equal(tagged.path, "plan.md");
	assert.equal(tagged.task, "quarterly zebra review");
	assert.deepEqual(tagged.relatedApps, ["notes"]);
	if (isRoot) assert.equal(tagged.createdBy, "filesystem", "created_by from the owner uid");

	const results = await sfs.query("launch plan");
	assert.equal(results[0].path, "plan.md", "the matching file first");
	assert.ok(results.every((r) => r.ranking === "keyword"), "every result names its ranking");
	assert.equal(typeof results[0].score, "number");
	assert.ok(results[0].createdAt > 0 && results[0].updatedAt > 0);
	assert.deepEqual(
		(await sfs.query("zebra")).map((r) => r.path),
		["plan.md"],
		"the task is searched",
	);
	// A tag without a task keeps the one it had.
	await sfs.tag("plan.md", {});
	assert.equal((await sfs.query("zebra"))[0]?.task, "quarterly zebra review");

	await assert.rejects(sfs.tag("nope.txt", { task: "x" }), /no such file in \/context: "nope.txt"/);
	await assert.rejects(sfs.tag("../etc/passwd", {}), /hidden segments/);
	assert.ok((await sfs.query("milk", 1000)).length <= 50);
	assert.ok(daemon.log().includes('claims to be "somebody-else"'), "the daemon logged the claim");
});

test("a restarted daemon is reconnected to on the next call, with its tags", { skip }, async (t) => {
	const sfs = await connectSemanticFs({ socketPath: sock });
	t.after(() => sfs.close());
	assert.equal((await sfs.query("zebra")).length, 1);
	daemon.child.kill("SIGTERM");
	await daemon.exited;
	daemon = startDaemon();
	await daemon.ready;
	// The old connection is gone; the call opens a new one.
	let results;
	for (let i = 0; i < 3 && !results; i++) results = await sfs.query("zebra").catch(() => undefined);
	assert.deepEqual(results.map((r) => r.path), ["plan.md"], "tags survived the restart");
});

test("apps/filesystem through its runtime: write, tag and query /context", { skip }, async (t) => {
	const share = join(work, "filesystem-share");
	await bundleApp(join(ROOT, "apps", "filesystem"), share);
	const ws = join(work, "ws");
	mkdirSync(ws);
	const rpcSock = join(work, "filesystem.sock");
	const rt = await startRuntime(share, {
		BERTH_RPC_SOCKET: rpcSock,
		BERTH_WORKSPACE_ROOT: ws,
		BERTH_CONTEXT_MOUNT: context,
		BERTH_SEMANTIC_FS_SOCKET: sock,
		BERTH_BOOT_ID: "test-boot",
	}).ready;
	t.after(() => rt.stop());
	assert.match(rt.stderr, /semantic-fs connected at /, rt.stderr);
	await until("the daemon's name for the app", () => /semantic-fs knows this app as "/.test(rt.stderr));
	const c = await connectRpc(rpcSock);
	t.after(() => c.close());
	const ok = async (exp, input) => {
		const m = await c.call(exp, input);
		assert.equal(m.error, undefined, `${exp}: ${m.error}`);
		return m.result;
	};
	await ok("write_context_file", { path: "notes/okapi.md", content: "An okapi census of the forest.\n" });
	await ok("write_context_file", { path: "notes/other.md", content: "Nothing to see.\n" });
	assert.equal((await ok("read_context_file", { path: "notes/okapi.md" })).content, "An okapi census of the forest.\n");
	await ok("tag_context_file", { path: "notes/okapi.md", task: "wildlife survey", relatedApps: ["notes"] });
	const { results } = await ok("query_context", { text: "okapi census" });
	assert.equal(results[0].path, "notes/okapi.md");
	assert.equal(results[0].task, "wildlife survey");
	assert.equal(results[0].ranking, "keyword");
	const survey = await ok("query_context", { text: "survey", limit: 1 });
	assert.equal(survey.results.length, 1);
	const bad = await c.call("tag_context_file", { path: "notes/missing.md" });
	assert.match(bad.error, /no such file in \/context/);
	daemon.child.kill("SIGTERM");
	await daemon.exited;
	assert.ok(readFileSync(join(context, "notes", "okapi.md"), "utf8").includes("okapi"));
});

test("without the daemon, inside a sandbox, the runtime says /context will fail", async (t) => {
	const share = join(work, "filesystem-share-2");
	await bundleApp(join(ROOT, "apps", "filesystem"), share);
	const rpcSock = join(work, "filesystem-2.sock");
	const rt = await startRuntime(share, {
		BERTH_RPC_SOCKET: rpcSock,
		BERTH_SEMANTIC_FS_SOCKET: join(work, "absent.sock"),
		BERTH_BOOT_ID: "test-boot",
	}).ready;
	t.after(() => rt.stop());
	assert.match(rt.stderr, /semantic-fs unavailable at .*absent\.sock .*\/context tagging and queries will fail/);
	const c = await connectRpc(rpcSock);
	t.after(() => c.close());
	const m = await c.call("query_context", { text: "x" });
	assert.match(m.error, /semantic-fs is unavailable/);
});
