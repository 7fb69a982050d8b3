// SPDX-License-Identifier: Apache-2.0
// The Node SDK's capability tables come from sdk/capability-model.json (the file the C
// implementation is generated from): unbundled, through the import, and bundled, inlined
// into the share, which then needs no file outside it. The bundler lets Berth's own
// modules reach that one file, and an app's modules not even that.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { bundleApp, connectRpc, ROOT, SDK, startRuntime, tempDir } from "./helpers.mjs";

const MODEL_PATH = join(ROOT, "sdk", "capability-model.json");
const model = JSON.parse(readFileSync(MODEL_PATH, "utf8"));
const cap = await import(join(SDK, "src", "capability.mjs"));
const work = tempDir("berth-capability-model-");
const PREFIXES = model.filesystemPrefixes.join(", ");

function app(name, index, yml = `name: ${name}\nversion: 0.1.0\nexports:\n  - name: probe\n`) {
	const dir = join(work, name);
	mkdirSync(join(dir, "src"), { recursive: true });
	writeFileSync(join(dir, "berth.yml"), yml);
	writeFileSync(join(dir, "src", "index.mjs"), index);
	return dir;
}

test("the prefixes and the messages naming them come from the model file", () => {
	assert.deepEqual([...cap.ALLOWED_FILESYSTEM_SCOPE_PREFIXES], model.filesystemPrefixes);
	assert.equal(cap.filesystemScopeIssue("/etc"), `filesystem path must be ${PREFIXES} or a path beneath one of them, got "/etc"`);
	assert.equal(cap.filesystemScopeIssue("/"), `filesystem:*:/ would grant the entire container filesystem — declare a path under ${PREFIXES} instead`);
});

test("a bundled share carries the model inlined and works away from the checkout", async () => {
	const dir = app("probe", [
		'import { defineApp, matchesCapability } from "@berthos/sdk";',
		"export default defineApp((app) => {",
		'\tapp.export({ name: "probe", handler: () => ({ star: matchesCapability("a:b:*", "a:b:x/y.z"), lineBreak: matchesCapability("a:b:*", "a:b:x\\ny") }) });',
		"});",
	].join("\n") + "\n");
	const share = join(work, "probe-share");
	await bundleApp(dir, share);
	// runtime.mjs and its chunks (the manifest validator sits in one it shares with the
	// YAML parser's chunk).
	const runtime = readdirSync(share)
		.filter((f) => /^runtime(-chunk-[A-Z0-9]+)?\.mjs$/.test(f))
		.map((f) => readFileSync(join(share, f), "utf8"))
		.join("\n");
	assert.ok(runtime.includes(JSON.stringify(model.filesystemPrefixes)), "the model's prefixes are inlined into the runtime");
	assert.ok(!/from\s*"[^"]*capability-model\.json"/.test(runtime), "the runtime imports no model file at run time");

	const sock = join(work, "probe.sock");
	const rt = await startRuntime(share, { BERTH_RPC_SOCKET: sock }).ready;
	try {
		assert.equal(rt.exitCode, undefined, rt.stderr);
		const client = await connectRpc(sock);
		const r = await client.call("probe");
		client.close();
		assert.deepEqual(r.result, { star: true, lineBreak: false }, JSON.stringify(r));
	} finally {
		await rt.stop();
	}

	// The runtime's own manifest check uses the inlined table.
	writeFileSync(join(share, "berth.yml"), "name: probe\nversion: 0.1.0\ncapabilities:\n  - filesystem:read:/etc\nexports:\n  - name: probe\n");
	const bad = await startRuntime(share, { BERTH_RPC_SOCKET: join(work, "bad.sock") }).ready;
	await bad.exited;
	assert.notEqual(bad.exitCode, 0);
	assert.ok(bad.stderr.includes(`capabilities.0: filesystem path must be ${PREFIXES} or a path beneath one of them, got "/etc"`), bad.stderr);
});

test("an app's own modules may not import the model file", () => {
	const dir = app("thief", `import m from ${JSON.stringify(MODEL_PATH)} with { type: "json" };\nexport default m;\n`);
	const out = join(work, "thief-share");
	const r = spawnSync(process.execPath, [join(SDK, "bundle.mjs"), dir, out], { encoding: "utf8", timeout: 120000 });
	assert.equal(r.status, 1, r.stdout + r.stderr);
	const verdict = JSON.parse(r.stdout.trim().split("\n").pop());
	assert.match(verdict.error, /^src\/index\.mjs imports ".*capability-model\.json", which is outside the app: /);
	assert.ok(!existsSync(out));
});
