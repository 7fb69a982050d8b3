// SPDX-License-Identifier: Apache-2.0
// sdk/node/bundle.mjs: the CLI contract, deterministic output, native addon refusal and
// the Python share rules (SPEC §12.3).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
	cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, truncateSync, utimesSync, writeFileSync,
} from "node:fs";
import { createInterface } from "node:readline";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { connectRpc, FIXTURES, ROOT, SDK, startRuntime, tempDir } from "./helpers.mjs";

const work = tempDir();
const BUNDLER = join(SDK, "bundle.mjs");

function runBundler(...args) {
	const r = spawnSync(process.execPath, [BUNDLER, ...args], { encoding: "utf8", timeout: 120000 });
	const lines = r.stdout.trim().split("\n");
	return { status: r.status, stdout: r.stdout, stderr: r.stderr, verdict: JSON.parse(lines[lines.length - 1]) };
}

function tree(dir) {
	const out = {};
	const walk = (d) => {
		for (const name of readdirSync(d).sort()) {
			const p = join(d, name);
			const st = statSync(p);
			if (st.isDirectory()) walk(p);
			else out[relative(dir, p)] = { sha: createHash("sha256").update(readFileSync(p)).digest("hex"), mode: st.mode & 0o777, mtime: st.mtimeMs };
		}
	};
	walk(dir);
	return out;
}

function pythonApp(name, files) {
	const dir = join(work, name);
	for (const [rel, content] of Object.entries(files)) {
		mkdirSync(join(dir, rel, ".."), { recursive: true });
		writeFileSync(join(dir, rel), content);
	}
	return dir;
}

const PY_YML = "name: py-app\nversion: 0.1.0\nruntime: python\nexports:\n  - name: greet\n";

test("--runtime: the SDK runtime alone, the same bytes as in every Node app's share", () => {
	const share = join(work, "notes-runtime-share");
	const out = join(work, "runtime-only");
	assert.equal(runBundler(join(ROOT, "apps", "notes"), share).status, 0);
	const r = runBundler("--runtime", out);
	assert.equal(r.status, 0, r.stdout + r.stderr);
	assert.equal(r.verdict.ok, true);
	const files = r.verdict.files;
	assert.ok(files.includes("runtime.mjs"), files);
	assert.ok(files.includes("runtime-zod.mjs"), files);
	assert.ok(files.every((f) => f === "runtime.mjs" || f === "runtime-zod.mjs" || /^runtime-chunk-[A-Z0-9]+\.mjs$/.test(f)), files);
	const shareTree = tree(share);
	for (const [name, entry] of Object.entries(tree(out))) assert.deepEqual(entry, shareTree[name], name);
	// It refuses to replace what is there.
	const again = runBundler("--runtime", out);
	assert.equal(again.status, 1);
	assert.match(again.verdict.error, /exists; refusing to replace it/);
});

test("node app: one JSON line, the share's files, exit 0", () => {
	const out = join(work, "notes-a");
	const r = runBundler(join(ROOT, "apps", "notes"), out);
	assert.equal(r.status, 0, r.stdout + r.stderr);
	assert.equal(r.stdout.trim().split("\n").length, 1);
	assert.equal(r.verdict.ok, true);
	const chunks = r.verdict.files.filter((f) => /^runtime-chunk-[A-Z0-9]+\.mjs$/.test(f));
	assert.deepEqual(r.verdict.files.filter((f) => !chunks.includes(f)), ["berth.yml", "berth.yml.json", "dist/index.mjs", "proto/context_bus.proto", "runtime-zod.mjs", "runtime.mjs"]);
	// undici is a chunk of its own, which runtime.mjs loads only for egress: not parsed at
	// every app's start.
	const runtime = readFileSync(join(out, "runtime.mjs"), "utf8");
	const undici = chunks.filter((f) => readFileSync(join(out, f), "utf8").includes("undici"));
	assert.equal(undici.length, 1, `one chunk holds undici: ${chunks}`);
	assert.ok(runtime.includes(`import("./${undici[0]}")`), "runtime.mjs imports it dynamically");
	assert.ok(!runtime.includes("node_modules/undici/"), "and holds none of it");
	// berth.yml comes parsed too, keyed by its bytes: the YAML parser is a chunk that
	// runtime.mjs loads only when that copy does not match.
	const yml = readFileSync(join(out, "berth.yml"));
	const parsed = JSON.parse(readFileSync(join(out, "berth.yml.json"), "utf8"));
	assert.equal(parsed.berthYmlSha256, createHash("sha256").update(yml).digest("hex"));
	assert.equal(parsed.value.name, "notes");
	assert.deepEqual(parsed.value.capabilities, ["filesystem:write:/workspace"]);
	const yamlChunks = chunks.filter((f) => readFileSync(join(out, f), "utf8").includes("parseDocument"));
	assert.equal(yamlChunks.length, 1, `one chunk holds the YAML parser: ${chunks}`);
	assert.ok(!runtime.includes("parseDocument"), "runtime.mjs holds none of it");
	assert.equal(r.verdict.runtime, "node");
	assert.match(r.verdict.digest, /^[0-9a-f]{64}$/);
	assert.equal(typeof r.verdict.ms, "number");
	assert.deepEqual(Object.keys(tree(out)), r.verdict.files);
	assert.equal(readFileSync(join(out, "berth.yml"), "utf8"), readFileSync(join(ROOT, "apps", "notes", "berth.yml"), "utf8"));
	const index = readFileSync(join(out, "dist", "index.mjs"), "utf8");
	assert.ok(!/from\s*["'](zod|@berthos\/sdk)["']/.test(index), "the SDK is inlined, and zod is no package import");
	assert.ok(index.includes('globalThis[Symbol.for("berth.runtime.zod")]'), "zod is the module the runtime gives it");
	assert.ok(!existsSync(join(out, ".berth-runtime")));
});

test("deterministic: the same app gives the same bytes, modes and times", () => {
	const a = join(work, "det-a");
	const b = join(work, "det-b");
	const ra = runBundler(join(ROOT, "apps", "filesystem"), a);
	const rb = runBundler(join(ROOT, "apps", "filesystem"), b);
	assert.equal(ra.verdict.digest, rb.verdict.digest);
	assert.deepEqual(tree(a), tree(b));
	// Rebundling into an earlier bundle's directory replaces it, same result.
	const again = runBundler(join(ROOT, "apps", "filesystem"), a);
	assert.equal(again.verdict.digest, ra.verdict.digest);
	for (const f of Object.values(tree(a))) {
		assert.equal(f.mode, 0o644);
		assert.equal(f.mtime, 0);
	}
	// A source change changes the digest.
	const copy = join(work, "fs-copy");
	cpSync(join(ROOT, "apps", "filesystem"), copy, { recursive: true });
	writeFileSync(join(copy, "src", "index.ts"), readFileSync(join(copy, "src", "index.ts"), "utf8") + "\nexport const extra = 1;\n");
	assert.notEqual(runBundler(copy, join(work, "fs-copy-out")).verdict.digest, ra.verdict.digest);
});

/** `bundle.mjs --serve` as berth dev runs it: ask() sends one line and resolves to the
 * verdict line it answers with, or null once the bundler has closed its output. */
function serveSession(bundler = BUNDLER) {
	const child = spawn(process.execPath, [bundler, "--serve"], { stdio: ["pipe", "pipe", "ignore"] });
	const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
	const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
	return {
		async ask(request) {
			child.stdin.write((typeof request === "string" ? request : JSON.stringify(request)) + "\n");
			const { value, done } = await lines.next();
			return done ? null : JSON.parse(value);
		},
		end() {
			child.stdin.end();
			return exited;
		},
		kill: () => child.kill("SIGKILL"),
	};
}

test("--serve: a verdict per request line, the bundles a one-shot run makes, edits rebuilt", async () => {
	const app = join(work, "serve-app");
	cpSync(join(ROOT, "apps", "filesystem"), app, { recursive: true });
	const s = serveSession();
	try {
		const first = await s.ask({ app, out: join(work, "serve-1") });
		assert.equal(first.ok, true, JSON.stringify(first));
		const oneShot = runBundler(app, join(work, "serve-os-1"));
		assert.equal(first.digest, oneShot.verdict.digest);
		assert.deepEqual(tree(join(work, "serve-1")), tree(join(work, "serve-os-1")));
		// The kept esbuild context sees the edit; the result is again a one-shot run's.
		writeFileSync(join(app, "src", "index.ts"), readFileSync(join(app, "src", "index.ts"), "utf8") + "\nexport const extra = 1;\n");
		const second = await s.ask({ app, out: join(work, "serve-2") });
		assert.equal(second.ok, true, JSON.stringify(second));
		assert.notEqual(second.digest, first.digest);
		assert.equal(second.digest, runBundler(app, join(work, "serve-os-2")).verdict.digest);
		// A line that is not a request, and a failing build, are answered; serving goes on.
		for (const bad of ["not json", JSON.stringify({ app: 1 }), "x".repeat(70 * 1024)]) {
			const v = await s.ask(bad);
			assert.equal(v.ok, false);
			assert.match(v.error, /^a request is one line of/);
		}
		const missing = await s.ask({ app: join(work, "no-such-app"), out: join(work, "serve-x") });
		assert.deepEqual(missing, { ok: false, error: `${join(work, "no-such-app")} is not a directory` });
		const python = await s.ask({ app: join(ROOT, "apps", "hello-world-py"), out: join(work, "serve-py") });
		assert.equal(python.ok, true, JSON.stringify(python));
		assert.equal(python.runtime, "python");
		assert.equal(await s.end(), 0, "it ends with its input");
	} finally {
		s.kill();
	}
});

test("--serve ends, unanswered, once its own code changed on the disk", async () => {
	// A Berth checkout of its own, whose SDK this test may touch.
	const berth = join(work, "serve-berth");
	mkdirSync(join(berth, "sdk", "node"), { recursive: true });
	writeFileSync(join(berth, "package.json"), JSON.stringify({ name: "berth", private: true }));
	for (const f of ["package.json", "runtime.mjs", "index.d.ts", "src", "bundle.mjs"]) cpSync(join(SDK, f), join(berth, "sdk", "node", f), { recursive: true });
	for (const f of ["context_bus.proto", "capability-model.json"]) cpSync(join(ROOT, "sdk", f), join(berth, "sdk", f));
	cpSync(join(ROOT, "node_modules", "yaml"), join(berth, "node_modules", "yaml"), { recursive: true });
	const app = join(ROOT, "apps", "hello-world-py");
	// Its modules, and the capability model they check a berth.yml against.
	for (const [i, changed] of [join("sdk", "node", "src", "manifest.mjs"), join("sdk", "capability-model.json")].entries()) {
		const s = serveSession(join(berth, "sdk", "node", "bundle.mjs"));
		try {
			const before = await s.ask({ app, out: join(work, `serve-code-${i}-1`) });
			assert.equal(before.ok, true, JSON.stringify(before));
			const later = new Date(Date.now() + 60000 * (i + 1));
			utimesSync(join(berth, changed), later, later);
			assert.equal(await s.ask({ app, out: join(work, `serve-code-${i}-2`) }), null, `no answer after ${changed} changed`);
			assert.equal(await s.end(), 0);
			assert.ok(!existsSync(join(work, `serve-code-${i}-2`)), "nothing written");
		} finally {
			s.kill();
		}
	}
});

/** A Node app in the work directory: berth.yml with `exports`, and src/index.mjs. */
function nodeApp(name, index, exports = "  - name: check\n") {
	const dir = join(work, name);
	mkdirSync(join(dir, "src"), { recursive: true });
	writeFileSync(join(dir, "berth.yml"), `name: ${name}\nversion: 0.1.0\nexports:\n${exports}`);
	writeFileSync(join(dir, "src", "index.mjs"), index);
	return dir;
}

/** nodeApp(), with `extra` files under src/, bundled into <name>-out: {app, out, verdict},
 * or a failed assertion. */
function bundledNodeApp(name, index, extra = {}) {
	const app = nodeApp(name, index);
	for (const [file, text] of Object.entries(extra)) writeFileSync(join(app, "src", file), text);
	const out = join(work, `${name}-out`);
	const r = runBundler(app, out);
	assert.equal(r.status, 0, r.stdout + r.stderr);
	return { app, out, verdict: r.verdict };
}

/** Node run on an ES module's source in `dir`: its stdout, or a failed assertion. */
function runModule(dir, source) {
	const r = spawnSync(process.execPath, ["--input-type=module", "-e", source], { cwd: dir, encoding: "utf8", timeout: 60000 });
	assert.equal(r.status, 0, r.stdout + r.stderr);
	return r.stdout.trim();
}

test("zod: an app's import of Berth's zod is the share's runtime-zod.mjs, or the module a warm Node set", async () => {
	const { app: sharing, out, verdict } = bundledNodeApp(
		"zod-shared",
		'import { z } from "zod";\nimport { defineApp } from "@berthos/sdk";\nexport const zodRef = z;\n' +
			'export default defineApp((app) => app.export({ name: "check", input: z.object({ n: z.number() }), handler: ({ n }) => ({ n }) }));\n',
	);
	assert.ok(verdict.files.includes("runtime-zod.mjs"), verdict.files);
	// The very file the root image's warm Node loads (bundle.mjs --runtime).
	const runtimeOnly = join(work, "zod-runtime-only");
	assert.equal(runBundler("--runtime", runtimeOnly).status, 0);
	assert.deepEqual(readFileSync(join(out, "runtime-zod.mjs")), readFileSync(join(runtimeOnly, "runtime-zod.mjs")));
	assert.ok(statSync(join(out, "dist", "index.mjs")).size < 64 * 1024, "none of zod's code is in the app's bundle");
	const index = pathToFileURL(join(out, "dist", "index.mjs")).href;
	// The bundle takes the zod module it is given (the runtime gives the share's, or a warm
	// Node the image's), and says what to do when there is none.
	const given = (file) => `const z = await import(${JSON.stringify(pathToFileURL(file).href)}); globalThis[Symbol.for("berth.runtime.zod")] = z;`;
	assert.equal(runModule(out, `${given(join(out, "runtime-zod.mjs"))} const m = await import(${JSON.stringify(index)}); console.log(m.zodRef === z.z, m.zodRef.object === z.object);`), "true true");
	assert.equal(
		runModule(out, `${given(join(runtimeOnly, "runtime-zod.mjs"))} const m = await import(${JSON.stringify(index)}); const own = await import("./runtime-zod.mjs"); console.log(m.zodRef === z.z, m.zodRef === own.z);`),
		"true false",
	);
	const alone = spawnSync(process.execPath, ["--input-type=module", "-e", `await import(${JSON.stringify(index)});`], { encoding: "utf8" });
	assert.notEqual(alone.status, 0);
	assert.match(alone.stderr, /this app's bundle takes zod from Berth's runtime: start it with the share's runtime\.mjs/);
	// It validates as zod does: the runtime answers through it.
	const sock = join(work, "zod-shared.sock");
	const rt = await startRuntime(out, { BERTH_RPC_SOCKET: sock }).ready;
	try {
		assert.match(rt.stderr, /"zod-shared" ready/);
		const c = await connectRpc(sock);
		assert.match((await c.call("check", { n: "x" })).error, /expected number/i);
		assert.deepEqual(await c.call("check", { n: 2 }, "2"), { id: "2", result: { n: 2 } });
		c.close();
	} finally {
		await rt.stop();
	}

	// An app that also imports another of zod's entry points needs one zod: its own.
	const mixed = bundledNodeApp(
		"zod-mixed",
		'import { z } from "zod";\nimport * as core from "zod/v4/core";\nimport { defineApp } from "@berthos/sdk";\n' +
			"export const same = z.string() instanceof core.$ZodType;\nexport default defineApp((app) => app.export({ name: \"check\", handler: () => ({}) }));\n",
	);
	assert.ok(!mixed.verdict.files.includes("runtime-zod.mjs"), mixed.verdict.files);
	assert.ok(!readFileSync(join(mixed.out, "dist", "index.mjs"), "utf8").includes('Symbol.for("berth.runtime.zod")'), "no stand-in");
	assert.equal(runModule(mixed.out, `console.log((await import("./dist/index.mjs")).same);`), "true");
	// No top-level await in the stand-in: an app's ES module that uses zod still runs as a
	// CommonJS file require()s it.
	const required = bundledNodeApp(
		"zod-required",
		'import b from "./b.cjs";\nimport { defineApp } from "@berthos/sdk";\nexport const kind = typeof b.s?.parse;\nexport default defineApp((app) => app.export({ name: "check", handler: () => ({}) }));\n',
		{ "b.cjs": 'module.exports = require("./a.mjs");\n', "a.mjs": 'import { z } from "zod";\nexport const s = z.string();\n' },
	);
	assert.equal(runModule(required.out, `${given(join(required.out, "runtime-zod.mjs"))} console.log((await import("./dist/index.mjs")).kind);`), "function");
	// An app that uses none of zod has no copy of it.
	const none = bundledNodeApp("zod-none", 'import { defineApp } from "@berthos/sdk";\nexport default defineApp((app) => app.export({ name: "check", handler: () => ({}) }));\n');
	assert.ok(!none.verdict.files.includes("runtime-zod.mjs"), none.verdict.files);

	// --serve's kept context: the same shares, and an edit that adds another entry point of
	// zod's makes the app bundle its own.
	const s = serveSession();
	try {
		const first = await s.ask({ app: sharing, out: join(work, "zod-serve-1") });
		assert.equal(first.digest, verdict.digest);
		writeFileSync(join(sharing, "src", "index.mjs"), readFileSync(join(sharing, "src", "index.mjs"), "utf8") + 'import * as core from "zod/v4/core";\nexport const same = z.string() instanceof core.$ZodType;\n');
		const second = await s.ask({ app: sharing, out: join(work, "zod-serve-2") });
		assert.equal(second.ok, true, JSON.stringify(second));
		assert.ok(!second.files.includes("runtime-zod.mjs"), second.files);
		assert.equal(second.digest, runBundler(sharing, join(work, "zod-serve-os-2")).verdict.digest);
		assert.equal(runModule(join(work, "zod-serve-2"), `console.log((await import("./dist/index.mjs")).same);`), "true");
		// And when that import goes again, the app shares zod again.
		writeFileSync(join(sharing, "src", "index.mjs"), readFileSync(join(sharing, "src", "index.mjs"), "utf8").replace(/import \* as core[^]*$/, ""));
		const third = await s.ask({ app: sharing, out: join(work, "zod-serve-3") });
		assert.equal(third.ok, true, JSON.stringify(third));
		assert.equal(third.digest, first.digest);
		assert.ok(third.files.includes("runtime-zod.mjs"), third.files);
		assert.equal(await s.end(), 0);
	} finally {
		s.kill();
	}
});

test("native .node addons are refused, naming the file", () => {
	const app = join(work, "native-app");
	cpSync(join(ROOT, "templates", "hello-world"), app, { recursive: true });
	writeFileSync(join(app, "berth.yml"), readFileSync(join(app, "berth.yml"), "utf8").replaceAll("{{name}}", "native-app"));
	mkdirSync(join(app, "node_modules", "fast-thing", "build"), { recursive: true });
	writeFileSync(join(app, "node_modules", "fast-thing", "build", "binding.node"), "\x7fELF");
	writeFileSync(join(app, "node_modules", "fast-thing", "package.json"), '{"name":"fast-thing","main":"build/binding.node"}');
	writeFileSync(join(app, "src", "index.ts"), 'import "fast-thing";\n' + readFileSync(join(app, "src", "index.ts"), "utf8"));
	const out = join(work, "native-out");
	const r = runBundler(app, out);
	assert.equal(r.status, 1);
	assert.equal(r.verdict.ok, false);
	assert.match(r.verdict.error, /native addon node_modules\/fast-thing\/build\/binding\.node cannot be bundled/);
	assert.ok(!existsSync(out), "nothing written on failure");
});

test("errors: usage, missing berth.yml, invalid or oversized manifest, no entry, foreign output dir", () => {
	let r = runBundler(join(ROOT, "apps", "notes"));
	assert.notEqual(r.status, 0);
	assert.equal(r.verdict.ok, false);
	r = runBundler(work, join(work, "x"));
	assert.equal(r.status, 1);
	assert.match(r.verdict.error, /^no berth\.yml in /);
	const bad = pythonApp("bad-manifest", { "berth.yml": "name: Bad\nversion: 1\n" });
	r = runBundler(bad, join(work, "bad-out"));
	assert.equal(r.status, 1);
	assert.match(r.verdict.error, /^invalid berth\.yml:\nberth\.yml:1 name: name must be lowercase alphanumeric with dashes/);
	const huge = pythonApp("huge-manifest", { "berth.yml": `name: huge\nversion: 1.0.0\n#${"x".repeat(1 << 20)}\n` });
	r = runBundler(huge, join(work, "huge-out"));
	assert.equal(r.status, 1);
	assert.match(r.verdict.error, /^invalid berth\.yml \(.*huge-manifest\/berth\.yml\): larger than 1 MiB$/);
	assert.equal(existsSync(join(work, "huge-out")), false);
	const noEntry = pythonApp("no-entry", { "berth.yml": "name: x\nversion: 1.0.0\n" });
	r = runBundler(noEntry, join(work, "no-entry-out"));
	assert.match(r.verdict.error, /^no app entry in /);
	const foreign = join(work, "foreign");
	mkdirSync(foreign);
	writeFileSync(join(foreign, "precious.txt"), "keep me");
	r = runBundler(join(ROOT, "apps", "notes"), foreign);
	assert.equal(r.status, 1);
	assert.match(r.verdict.error, /exists and is not an earlier bundle/);
	assert.equal(readFileSync(join(foreign, "precious.txt"), "utf8"), "keep me");
});

test("python app: own files only, .berth-runtime, modes kept", () => {
	const app = pythonApp("py-share", {
		"berth.yml": PY_YML,
		"src/app.py": "app = None\n",
		"src/lib/util.py": "X = 1\n",
		"src/__pycache__/app.cpython-311.pyc": "junk",
		"data/table.csv": "a,b\n",
		"run.sh": "#!/bin/sh\n",
		".env": "SECRET=1\n",
		".git/HEAD": "ref\n",
		".berth/capability-policy.json": "{}",
		"venv/bin/python": "",
		"node_modules/x/index.js": "",
		"dist/old.js": "",
	});
	spawnSync("chmod", ["755", join(app, "run.sh")]);
	const out = join(work, "py-share-out");
	const r = runBundler(app, out);
	assert.equal(r.status, 0, r.stdout);
	assert.equal(r.verdict.runtime, "python");
	assert.deepEqual(r.verdict.files, [".berth-runtime", "berth.yml", "data/table.csv", "run.sh", "src/app.py", "src/lib/util.py"]);
	assert.equal(readFileSync(join(out, ".berth-runtime"), "utf8"), "python\n");
	const t = tree(out);
	assert.equal(t["run.sh"].mode, 0o755);
	assert.equal(t["src/app.py"].mode, 0o644);
	const again = runBundler(app, join(work, "py-share-out2"));
	assert.equal(again.verdict.digest, r.verdict.digest);
});

test("python app: needs src/app.py; at most 2000 files and 32 MiB; no links out", () => {
	let r = runBundler(pythonApp("py-noentry", { "berth.yml": PY_YML, "app.py": "" }), join(work, "o1"));
	assert.equal(r.status, 1);
	assert.match(r.verdict.error, /^a python app needs src\/app\.py/);

	const many = pythonApp("py-many", { "berth.yml": PY_YML, "src/app.py": "" });
	mkdirSync(join(many, "data"));
	for (let i = 0; i < 2000; i++) writeFileSync(join(many, "data", `f${i}`), "");
	r = runBundler(many, join(work, "o2"));
	assert.equal(r.verdict.error, "the app share would hold more than 2000 files");

	const big = pythonApp("py-big", { "berth.yml": PY_YML, "src/app.py": "" });
	writeFileSync(join(big, "blob"), "");
	truncateSync(join(big, "blob"), 32 * 1024 * 1024 + 1);
	r = runBundler(big, join(work, "o3"));
	assert.equal(r.verdict.error, "the app share would be larger than 32 MiB");

	const linked = pythonApp("py-link", { "berth.yml": PY_YML, "src/app.py": "" });
	symlinkSync("/etc/hostname", join(linked, "host"));
	r = runBundler(linked, join(work, "o4"));
	assert.match(r.verdict.error, /^host is a symbolic link to \/etc\/hostname, outside the app directory/);
});

test("templates bundle once {{name}} is filled in", () => {
	for (const t of ["hello-world", "python"]) {
		const app = join(work, `tmpl-${t}`);
		cpSync(join(ROOT, "templates", t), app, { recursive: true });
		for (const f of ["berth.yml", "package.json", "README.md", "src/index.ts", "src/app.py"]) {
			const p = join(app, f);
			if (existsSync(p)) writeFileSync(p, readFileSync(p, "utf8").replaceAll("{{name}}", "my-app"));
		}
		const r = runBundler(app, join(work, `tmpl-${t}-out`));
		assert.equal(r.status, 0, r.stdout);
		assert.equal(r.verdict.runtime, t === "python" ? "python" : "node");
	}
});
