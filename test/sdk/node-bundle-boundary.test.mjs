// SPDX-License-Identifier: Apache-2.0
// sdk/node/bundle.mjs against hostile apps: an app's share holds only the app's own files,
// its node_modules and Berth's SDK, and nothing of the app runs on the host.
//
// Every app here sits next to a directory outside it holding a canary file of random
// bytes; each attempt to pull the canary into the share must fail, naming the import and
// the file that made it, and leave no trace of the canary anywhere in the output.
// BERTH_TEST_BUNDLER runs these tests against another copy of bundle.mjs (one placed in
// sdk/node, since it finds the SDK beside itself).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
	cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync,
} from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { test } from "node:test";
import { FIXTURES, ROOT, SDK, tempDir } from "./helpers.mjs";

const BUNDLER = process.env.BERTH_TEST_BUNDLER || join(SDK, "bundle.mjs");
const FIXTURE = join(FIXTURES, "hostile-node-app");
const RULE = "an app's share may hold only its own files and its node_modules";
const work = tempDir("berth-bundle-boundary-");
const outside = join(work, "outside");
const canary = `CANARY-${randomBytes(24).toString("hex")}`;
const canaryFile = join(outside, "canary");
mkdirSync(outside);
writeFileSync(canaryFile, canary);
writeFileSync(join(outside, "canary.txt"), canary);
writeFileSync(join(outside, "canary.json"), JSON.stringify({ canary }));
writeFileSync(join(outside, "canary.css"), `body { content: "${canary}"; }\n`);
writeFileSync(join(outside, "entry.ts"), `export default "${canary}";\n`);
mkdirSync(join(outside, "pkg"));
writeFileSync(join(outside, "pkg", "package.json"), '{"name":"helper","main":"index.js"}');
writeFileSync(join(outside, "pkg", "index.js"), `module.exports = ${JSON.stringify(canary)};\n`);
writeFileSync(join(outside, "berth.yml"), `# ${canary}\nname: hostile\nversion: 0.1.0\nexports:\n  - name: leak\n`);

const marker = join(work, "ran-on-host");
let n = 0;

/** A copy of the fixture app in its own directory under `work`, planted modules as asked. */
function hostileApp({ index, planted = [], files = {}, parent = work } = {}) {
	const app = join(parent, `app-${++n}`);
	mkdirSync(app, { recursive: true });
	for (const f of ["berth.yml", "package.json", "src"]) cpSync(join(FIXTURE, f), join(app, f), { recursive: true });
	for (const p of planted) cpSync(join(FIXTURE, "planted", p), join(app, "node_modules", p), { recursive: true });
	if (index !== undefined) writeFileSync(join(app, "src", "index.ts"), index);
	for (const [rel, content] of Object.entries(files)) {
		mkdirSync(dirname(join(app, rel)), { recursive: true });
		writeFileSync(join(app, rel), content);
	}
	return app;
}

/** index.ts importing `what` (a whole import line) and handing its value to the app. */
const entry = (what) => `${what}\nimport { makeApp } from "./app";\nexport default makeApp(secret);\n`;

function bundle(app, bundler = BUNDLER) {
	const out = join(work, `${basename(app)}-out-${++n}`);
	const r = spawnSync(process.execPath, [bundler, app, out], {
		encoding: "utf8", timeout: 120000, env: { ...process.env, BERTH_TEST_MARKER: marker },
	});
	const lines = r.stdout.trim().split("\n");
	return { ...r, out, verdict: JSON.parse(lines[lines.length - 1]) };
}

/** Every byte the bundler wrote (the share and any leftover beside it) and said. */
function everythingWritten(r) {
	const chunks = [r.stdout, r.stderr];
	const walk = (p) => {
		const st = statSync(p);
		if (st.isDirectory()) for (const c of readdirSync(p)) walk(join(p, c));
		else chunks.push(readFileSync(p, "latin1"));
	};
	for (const name of readdirSync(dirname(r.out))) if (name.startsWith(basename(r.out))) walk(join(dirname(r.out), name));
	return chunks.join("\n");
}

/** The canary in any form a loader could give it: as text, as JSON, as base64. */
function assertNoCanary(r) {
	const all = everythingWritten(r);
	for (const form of [canary, Buffer.from(canary).toString("base64").replace(/=+$/, ""), Buffer.from(JSON.stringify({ canary })).toString("base64").replace(/=+$/, "")])
		assert.ok(!all.includes(form), `the canary (${form.slice(0, 16)}…) reached the output`);
}

function assertRefused(r, message) {
	assert.equal(r.status, 1, r.stdout + r.stderr);
	assert.equal(r.verdict.ok, false);
	assert.match(r.verdict.error, message);
	assert.ok(!existsSync(r.out), "nothing written on failure");
	assertNoCanary(r);
}

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const refusedImport = (spec, importer = "src/index.ts") =>
	new RegExp(`^${esc(importer)} imports "${esc(spec)}", which is outside the app: ${esc(RULE)}`);

test("an absolute import of a host file is refused, naming the import and the importer", () => {
	for (const [spec, attrs] of [[join(outside, "canary.txt"), ""], [canaryFile, ' with { type: "text" }']]) {
		const r = bundle(hostileApp({ index: entry(`import secret from ${JSON.stringify(spec)}${attrs};`) }));
		assertRefused(r, refusedImport(spec));
	}
});

test("a ../ import that climbs out of the app is refused", () => {
	const r = bundle(hostileApp({ index: entry('import secret from "../../outside/canary.txt";') }));
	assertRefused(r, refusedImport("../../outside/canary.txt"));
});

test('with { type: "text" } (and "bytes", "json") of a file outside, with or without an extension', () => {
	for (const [spec, type] of [
		["../../outside/canary", "text"],
		["../../outside/canary.json", "text"],
		["../../outside/canary", "bytes"],
		["../../outside/canary.json", "json"],
	]) {
		const r = bundle(hostileApp({ index: entry(`import secret from "${spec}" with { type: "${type}" };`) }));
		assertRefused(r, refusedImport(spec));
	}
});

test("require(), dynamic import(), CSS @import and url() of a file outside are refused", () => {
	const cases = [
		[entry('const secret = require("../../outside/canary.txt");'), refusedImport("../../outside/canary.txt")],
		[entry('const secret = () => import("../../outside/canary.json");'), refusedImport("../../outside/canary.json")],
		[entry('import "./style.css"; const secret = 1;'), refusedImport("../../outside/canary.css", "src/style.css")],
		[entry('import "./url.css"; const secret = 1;'), refusedImport("../../outside/canary.txt", "src/url.css")],
	];
	const files = { "src/style.css": '@import "../../outside/canary.css";\n', "src/url.css": "body { background: url(../../outside/canary.txt); }\n" };
	for (const [index, message] of cases) {
		const r = bundle(hostileApp({ index, files }));
		assertRefused(r, message);
	}
});

test("a glob-style require() cannot sweep in files outside the app", () => {
	const r = bundle(hostileApp({ index: entry('const secret = require("../../outside/" + process.env.K + ".txt");') }));
	assertRefused(r, new RegExp(`^the bundle would include ${esc(join(outside, "canary.txt"))}, which is outside the app: ${esc(RULE)} \\(src/index\\.ts:1\\)`));
});

test("a symbolic link in src/ pointing outside is refused, naming the link", () => {
	const app = hostileApp({ index: entry('import secret from "./creds.txt";') });
	symlinkSync(join(outside, "canary.txt"), join(app, "src", "creds.txt"));
	let r = bundle(app);
	assertRefused(r, new RegExp(`^src/index\\.ts imports "\\./creds\\.txt", but src/creds\\.txt is a symbolic link to ${esc(join(outside, "canary.txt"))}, outside the app: ${esc(RULE)}`));

	// The same link found by a glob-style require() instead of an import.
	const globbed = hostileApp({ index: entry('const secret = require("./data/" + process.env.K + ".txt");') });
	mkdirSync(join(globbed, "src", "data"));
	symlinkSync(join(outside, "canary.txt"), join(globbed, "src", "data", "creds.txt"));
	r = bundle(globbed);
	assertRefused(r, /outside the app/);
});

test("a symbolic link in node_modules pointing outside is refused, naming the link", () => {
	const app = hostileApp({ index: entry('import secret from "helper";') });
	mkdirSync(join(app, "node_modules"));
	symlinkSync(join(outside, "pkg"), join(app, "node_modules", "helper"));
	const r = bundle(app);
	assertRefused(r, new RegExp(`^src/index\\.ts imports "helper", but node_modules/helper is a symbolic link to ${esc(join(outside, "pkg"))}, outside the app: ${esc(RULE)}`));
});

test("a package.json main that points outside the app is refused", () => {
	const app = hostileApp({
		index: entry('import secret from "evil";'),
		files: { "node_modules/evil/package.json": JSON.stringify({ name: "evil", main: "../../../outside/canary.txt" }) },
	});
	const r = bundle(app);
	assertRefused(r, new RegExp(`^src/index\\.ts imports "evil", which resolves to ${esc(join(outside, "canary.txt"))}, outside the app: ${esc(RULE)}`));
});

test("tsconfig paths and baseUrl cannot redirect an import outside the app", () => {
	const cases = [
		[{ compilerOptions: { paths: { "@secrets/*": ["../outside/*"] } } }, 'import secret from "@secrets/canary.txt";', "@secrets/canary.txt", join(outside, "canary.txt")],
		[{ compilerOptions: { baseUrl: ".", paths: { secret: [canaryFile] } } }, 'import secret from "secret" with { type: "text" };', "secret", canaryFile],
		[{ compilerOptions: { baseUrl: "../outside" } }, 'import secret from "canary.txt";', "canary.txt", join(outside, "canary.txt")],
	];
	for (const [tsconfig, line, spec, real] of cases) {
		const r = bundle(hostileApp({ index: entry(line), files: { "tsconfig.json": JSON.stringify(tsconfig) } }));
		assertRefused(r, new RegExp(`^src/index\\.ts imports "${esc(spec)}", which resolves to ${esc(real)}, outside the app: ${esc(RULE)}`));
	}
});

test("the entry point and berth.yml must be the app's own files", () => {
	let app = hostileApp({ files: { "package.json": JSON.stringify({ name: "hostile", berth: { entry: "../outside/entry.ts" } }) } });
	let r = bundle(app);
	assertRefused(r, /^package\.json berth\.entry "\.\.\/outside\/entry\.ts" is outside the app directory/);

	app = hostileApp();
	rmSync(join(app, "src", "index.ts"));
	symlinkSync(join(outside, "entry.ts"), join(app, "src", "index.ts"));
	r = bundle(app);
	assertRefused(r, new RegExp(`^src/index\\.ts is a symbolic link to ${esc(join(outside, "entry.ts"))}, outside the app directory`));

	app = hostileApp();
	rmSync(join(app, "berth.yml"));
	symlinkSync(join(outside, "berth.yml"), join(app, "berth.yml"));
	r = bundle(app);
	assertRefused(r, new RegExp(`^berth\\.yml is a symbolic link to ${esc(join(outside, "berth.yml"))}, outside the app directory`));
});

test("a package from a node_modules above the app is not bundled; Berth's copy stands in for the SDK's", () => {
	// The app has no node_modules of its own; the directory above it has a planted zod and
	// a package that carries the canary.
	const parent = join(work, "monorepo");
	cpSync(join(FIXTURE, "planted", "zod"), join(parent, "node_modules", "zod"), { recursive: true });
	cpSync(join(outside, "pkg"), join(parent, "node_modules", "helper"), { recursive: true });
	let r = bundle(hostileApp({ parent, index: entry('import secret from "helper";') }));
	assertRefused(r, new RegExp(`^src/index\\.ts imports "helper", which resolves to ${esc(join(parent, "node_modules", "helper", "index.js"))}, outside the app: ${esc(RULE)}`));

	r = bundle(hostileApp({ parent, index: entry('import { z } from "zod";\nconst secret = z.string().parse("ok");') }));
	assert.equal(r.status, 0, r.stdout + r.stderr);
	assert.ok(!everythingWritten(r).includes("PLANTED-ZOD-COPY"), "zod came from above the app");
});

test("the app's own node_modules cannot replace the SDK, zod or the bundler's tools", () => {
	rmSync(marker, { force: true });
	const app = hostileApp({
		index: entry('import { greeting } from "berth-fixture-dep";\nconst secret = greeting;'),
		planted: ["esbuild", "yaml", "@berthos/sdk", "zod", "berth-fixture-dep"],
	});
	const r = bundle(app);
	assert.equal(r.status, 0, r.stdout + r.stderr);
	assert.ok(!existsSync(marker), `the app's code ran on the host: ${existsSync(marker) && readFileSync(marker, "utf8")}`);
	const index = readFileSync(join(r.out, "dist", "index.mjs"), "utf8");
	assert.ok(!index.includes("PLANTED-SDK-COPY"), "the app's @berthos/sdk was bundled");
	assert.ok(!index.includes("PLANTED-ZOD-COPY"), "the SDK's zod came from the app");
	assert.ok(index.includes("berth.app.v1"), "Berth's own SDK is in the bundle");
	// The app's own dependencies are still its own.
	assert.ok(index.includes("FIXTURE-DEP-GREETING"), "the app's own dependency is bundled");
});

/** A Berth checkout without node_modules of its own, whose bundler is the one under test. */
function bareBerth(parent, { withYaml = false } = {}) {
	const berth = join(parent, `berth-${++n}`);
	mkdirSync(join(berth, "sdk", "node"), { recursive: true });
	writeFileSync(join(berth, "package.json"), JSON.stringify({ name: "berth", private: true }));
	for (const f of ["package.json", "runtime.mjs", "index.d.ts", "src"]) cpSync(join(SDK, f), join(berth, "sdk", "node", f), { recursive: true });
	cpSync(join(ROOT, "sdk", "context_bus.proto"), join(berth, "sdk", "context_bus.proto"));
	cpSync(BUNDLER, join(berth, "sdk", "node", "bundle.mjs"));
	cpSync(join(ROOT, "sdk", "capability-model.json"), join(berth, "sdk", "capability-model.json"));
	if (withYaml) cpSync(join(ROOT, "node_modules", "yaml"), join(berth, "node_modules", "yaml"), { recursive: true });
	return join(berth, "sdk", "node", "bundle.mjs");
}

test("without esbuild or yaml of its own, the bundler refuses instead of running the app's", () => {
	const planted = ["esbuild", "yaml", "@berthos/sdk", "zod"];
	const setup = /run `npm ci` in the Berth checkout \(or scripts\/setup\.sh\)/;

	rmSync(marker, { force: true });
	let r = bundle(hostileApp({ planted }), bareBerth(work));
	assert.equal(r.status, 1, r.stdout + r.stderr);
	assert.ok(!existsSync(marker), `the app's code ran on the host: ${existsSync(marker) && readFileSync(marker, "utf8")}`);
	assert.match(r.verdict.error, /^the yaml package is not installed in Berth's checkout: /);
	assert.match(r.verdict.error, setup);

	r = bundle(hostileApp({ planted }), bareBerth(work, { withYaml: true }));
	assert.equal(r.status, 1, r.stdout + r.stderr);
	assert.ok(!existsSync(marker), `the app's code ran on the host: ${existsSync(marker) && readFileSync(marker, "utf8")}`);
	assert.match(r.verdict.error, /^esbuild is not installed in Berth's checkout: /);
	assert.match(r.verdict.error, setup);

	// A Berth checkout inside the app's folder: Node's own lookup from the SDK would reach
	// the app's node_modules.
	const app = hostileApp({ planted });
	r = bundle(app, bareBerth(join(app, "vendor")));
	assert.equal(r.status, 1, r.stdout + r.stderr);
	assert.ok(!existsSync(marker), `the app's code ran on the host: ${existsSync(marker) && readFileSync(marker, "utf8")}`);
	assert.match(r.verdict.error, new RegExp(`^the bundler would load yaml from ${esc(join(app, "node_modules", "yaml"))}, which is not Berth's own copy: `));
});

test("a file of one of Berth's packages importing outside Berth is refused, and nothing of it written", () => {
	// esbuild resolves a Berth package's imports of its own files by itself (bundle.mjs);
	// the check of every file it loads must still stop one that leaves Berth's tree.
	const bundler = bareBerth(work, { withYaml: true });
	const modules = join(dirname(dirname(dirname(bundler))), "node_modules");
	for (const p of ["esbuild", "@esbuild", "zod"]) cpSync(join(ROOT, "node_modules", p), join(modules, p), { recursive: true });
	const pkg = join(modules, "leaky");
	mkdirSync(pkg);
	writeFileSync(join(pkg, "package.json"), '{"name":"leaky","main":"index.js"}');
	const climb = relative(pkg, join(outside, "canary.txt"));
	writeFileSync(join(pkg, "index.js"), `module.exports = require(${JSON.stringify(climb)});\n`);
	const r = bundle(hostileApp({ index: entry('import secret from "leaky";') }), bundler);
	assertRefused(r, new RegExp(`^the bundle would include ${esc(join(outside, "canary.txt"))}, which is outside the app: ${esc(RULE)}`));
});

test("the example apps still bundle", () => {
	for (const name of ["notes", "filesystem", "hello-world-py"]) {
		const r = bundle(join(ROOT, "apps", name));
		assert.equal(r.status, 0, `${name}: ${r.stdout}${r.stderr}`);
		rmSync(r.out, { recursive: true, force: true });
	}
});
