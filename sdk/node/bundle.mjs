#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// Build an app's share for the VM (SPEC §12.3).
//
//   node sdk/node/bundle.mjs <appDir> <outDir>
//   node sdk/node/bundle.mjs --runtime <outDir>    the SDK runtime alone (the root image's)
//   node sdk/node/bundle.mjs --serve               app after app, for berth dev (see serve())
//
// Node app (berth.yml `runtime: node`, the default):
//   outDir/dist/index.mjs            the app with @berthos/sdk and its other deps
//   outDir/runtime.mjs               the SDK runtime
//   outDir/runtime-chunk-<hash>.mjs  undici and yaml, which runtime.mjs imports only when
//                                    needed (egress; no matching berth.yml.json)
//   outDir/runtime-zod.mjs           zod, when the app's `import "zod"` is Berth's copy
//                                    (see sharedZod())
//   outDir/berth.yml                 copied
//   outDir/berth.yml.json            berth.yml parsed, so that the runtime need not parse it
//   outDir/proto/context_bus.proto   the context bus wire format
// Python app (`runtime: python`): the app's own files (no dot entries, __pycache__,
// venv, node_modules, dist; needs src/app.py; at most 2000 files and 32 MiB) plus
// `.berth-runtime` holding "python\n".
//
// Prints one JSON line: {"ok":true,"runtime":…,"files":[…],"digest":…,"ms":N}, or
// {"ok":false,"error":"…"} and exits 1. The same input gives the same bytes.
import { createHash } from "node:crypto";
import {
	chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync,
	realpathSync, renameSync, rmSync, statSync, utimesSync, writeFileSync,
} from "node:fs";
import { createRequire, isBuiltin } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { SHARED_ZOD_FILE, zodStandIn } from "./src/zod-stand-in.mjs";

const SDK_DIR = dirname(fileURLToPath(import.meta.url));
export const MAX_SHARE_FILES = 2000;
export const MAX_SHARE_BYTES = 32 << 20;
const EXCLUDED_NAMES = new Set(["__pycache__", "venv", "node_modules", "dist"]);
const ENTRY_CANDIDATES = ["src/index.ts", "src/index.mts", "src/index.js", "src/index.mjs", "index.ts", "index.mjs", "index.js"];
const SERVE_LINE_MAX = 64 * 1024; // a --serve request: two paths
const SERVE_CONTEXTS_MAX = 16; // esbuild contexts --serve keeps, one per app
// CommonJS dependencies call require() for Node built-ins; an ESM bundle needs one.
const BANNER = 'import { createRequire as __berthCreateRequire } from "node:module";\nconst require = __berthCreateRequire(import.meta.url);';

export class BundleError extends Error {}

// The Berth checkout the SDK sits in (sdk/node), when it is one.
const BERTH_ROOT = resolve(SDK_DIR, "..", "..");
const OUTSIDE_RULE = "an app's share may hold only its own files and its node_modules";
const SETUP_HINT = "run `npm ci` in the Berth checkout (or scripts/setup.sh)";

// The capability model's tables, which src/capability.mjs imports (the C implementation is
// generated from the same file): the one file outside sdk/node that Berth's own modules
// may reach. An app's modules may not.
const CAPABILITY_MODEL = resolve(SDK_DIR, "..", "capability-model.json");
const MODEL_MARK = "berth.capabilityModel";

const inside = (p, dir) => p === dir || p.startsWith(dir.endsWith(sep) ? dir : dir + sep);

function realOrNull(p) {
	try {
		return realpathSync(p);
	} catch {
		return null;
	}
}

/**
 * Berth's own node_modules: the SDK's and, in a Berth checkout, the checkout's. The
 * bundler's tools and the SDK's dependencies come from these only, never from the app
 * nor from whatever node_modules happens to lie above the checkout.
 */
function berthNodeModules() {
	const dirs = [join(SDK_DIR, "node_modules")];
	try {
		if (JSON.parse(readFileSync(join(BERTH_ROOT, "package.json"), "utf8"))?.name === "berth")
			dirs.push(join(BERTH_ROOT, "node_modules"));
	} catch {}
	return dirs.filter((d) => existsSync(d));
}

/** The real directories whose files are Berth's: the SDK and its node_modules. */
function berthRoots() {
	return [SDK_DIR, ...berthNodeModules()].map(realOrNull).filter(Boolean);
}

/**
 * Check that the package Node would load for `import "<name>"` from a module in `fromDir`
 * is Berth's own copy. Node looks for node_modules/<name> in fromDir and each parent; the
 * first that exists wins, so one in the app or above the checkout would run on the host.
 * Returns that package's real directory, or null when there is none.
 */
function berthPackage(name, fromDir) {
	const roots = berthRoots();
	for (let d = fromDir; ; d = dirname(d)) {
		const candidate = join(d, "node_modules", name);
		if (existsSync(candidate)) {
			const real = realOrNull(candidate);
			if (real && roots.some((r) => inside(real, r))) return real;
			throw new BundleError(`the bundler would load ${name} from ${candidate}, which is not Berth's own copy: ${SETUP_HINT}`);
		}
		if (dirname(d) === d) return null;
	}
}

async function loadEsbuild() {
	const dir = berthPackage("esbuild", SDK_DIR);
	if (!dir) throw new BundleError(`esbuild is not installed in Berth's checkout: ${SETUP_HINT}`);
	// esbuild runs a native binary from its platform package, found the same way.
	berthPackage(`@esbuild/${process.platform}-${process.arch}`, join(dir, "lib"));
	const m = await import(pathToFileURL(createRequire(join(dir, "package.json")).resolve(dir)).href);
	return m.default ?? m;
}

async function loadManifestModule() {
	if (!berthPackage("yaml", join(SDK_DIR, "src")))
		throw new BundleError(`the yaml package is not installed in Berth's checkout: ${SETUP_HINT}`);
	return import("./src/manifest-load.mjs");
}

/**
 * A regular file the share may copy from the app: its real path stays inside the app.
 * Returns the real path; throws naming the link that leaves the app.
 */
function appFile(appDir, rel, what = rel) {
	const abs = join(appDir, rel);
	const real = realOrNull(abs);
	if (!real) throw new BundleError(`${what} is a dangling symbolic link`);
	if (!inside(real, realpathSync(appDir))) {
		const link = firstLinkOut(appDir, abs);
		throw new BundleError(
			link
				? `${link.rel} is a symbolic link to ${link.target}, outside the app directory; the share holds only the app's own files`
				: `${what} is outside the app directory; the share holds only the app's own files`,
		);
	}
	if (!statSync(real).isFile()) throw new BundleError(`${what} is not a regular file`);
	return real;
}

/** The first symbolic link on the way from appDir to abs, if any (for error messages). */
function firstLinkOut(appDir, abs) {
	const rel = relative(appDir, abs);
	if (rel.startsWith("..") || rel === "") return null;
	let cur = appDir;
	for (const part of rel.split(sep)) {
		cur = join(cur, part);
		let st;
		try {
			st = lstatSync(cur);
		} catch {
			return null;
		}
		if (st.isSymbolicLink()) return { rel: relative(appDir, cur), target: realOrNull(cur) ?? cur };
	}
	return null;
}

async function readManifest(appDir) {
	if (!lstatSync(join(appDir, "berth.yml"), { throwIfNoEntry: false })) throw new BundleError(`no berth.yml in ${appDir}`);
	const path = appFile(appDir, "berth.yml");
	const { parseManifest } = await loadManifestModule();
	const { readManifestBytes } = await import("./src/manifest.mjs");
	const { parsedCopy, PARSED_COPY_NAME } = await import("./src/manifest-copy.mjs");
	const bytes = readManifestBytes(path);
	const { manifest, value } = parseManifest(bytes, path);
	// berth.yml and its parsed copy for a Node share: the copy is of these very bytes.
	return { manifest, shareFiles: { "berth.yml": bytes, [PARSED_COPY_NAME]: parsedCopy(bytes, value) } };
}

function appEntry(appDir) {
	let pkg = null;
	try {
		pkg = JSON.parse(readFileSync(join(appDir, "package.json"), "utf8"));
	} catch {}
	const entry = pkg?.berth?.entry;
	if (entry) {
		if (typeof entry !== "string") throw new BundleError(`package.json berth.entry must be a path in the app`);
		const what = `package.json berth.entry "${entry}"`;
		if (!lstatSync(resolve(appDir, entry), { throwIfNoEntry: false })) throw new BundleError(`package.json berth.entry ${entry} does not exist`);
		return appFile(appDir, relative(appDir, resolve(appDir, entry)), what);
	}
	for (const c of ENTRY_CANDIDATES) if (lstatSync(join(appDir, c), { throwIfNoEntry: false })) return appFile(appDir, c);
	throw new BundleError(`no app entry in ${appDir}: expected ${ENTRY_CANDIDATES.slice(0, 4).join(", ")} (or package.json "berth": {"entry": …})`);
}

const INNER = "berth.inner";
const SHARED_NS = "berth-shared";
const SDK_EXPORTS = { "": "src/index.mjs", "/runtime": "runtime.mjs" };
const isBare = (spec) => !/^(\.\.?(\/|$)|\/|#|[a-z][a-z0-9+.-]*:)/i.test(spec);

/**
 * esbuild plugin, the share's boundary: every module and every file an import pulls in
 * (whatever its loader: js, json, text, bytes, css, …) is checked on its real path, which
 * must lie inside the app or inside Berth's SDK and node_modules; Berth's own modules may
 * reach only Berth's, except that a package's relative imports among its own files are
 * left to esbuild and only the file check holds for them (the app cannot steer those).
 * @berthos/sdk is always Berth's copy, never one in the app's node_modules, and .node
 * addons are refused.
 */
function berthPlugin(appDir, shared = null) {
	const app = realpathSync(appDir);
	const berth = berthRoots();
	const isBerth = (p) => berth.some((r) => inside(p, r));
	const packages = berthNodeModules().map(realOrNull).filter(Boolean);
	const isPackage = (p) => packages.some((r) => inside(p, r));
	const allowed = (p) => isBerth(p) || inside(p, app);
	const model = realOrNull(CAPABILITY_MODEL);
	const isModel = (p) => model !== null && p === model;
	const show = (p) => {
		if (inside(p, app) && !isBerth(p)) return relative(app, p) || p;
		if (isBerth(p) && inside(p, BERTH_ROOT)) return relative(BERTH_ROOT, p);
		return p;
	};
	// The link inside the app that an import went through to leave it, for the message.
	const linkOnTheWay = (spec, resolveDir) => {
		if (!isBare(spec)) return spec.startsWith("#") || /^[a-z][a-z0-9+.-]*:/i.test(spec) ? null : firstLinkOut(app, resolve(resolveDir, spec));
		const pkg = spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/");
		for (let d = resolveDir; inside(d, app); d = dirname(d)) {
			const cand = join(d, "node_modules", pkg);
			if (lstatSync(cand, { throwIfNoEntry: false })) return firstLinkOut(app, cand);
			if (d === app) break;
		}
		return null;
	};
	return {
		name: "berth",
		setup(build) {
			build.onResolve({ filter: /.*/ }, async (args) => {
				if (args.pluginData?.[INNER]) return undefined;
				// A package of Berth's importing one of its own files: esbuild resolves it,
				// and onLoad below still refuses a file that is neither Berth's nor the app's.
				// Most of a bundle's imports are these (zod's, among its own files), and
				// asking esbuild again for each cost about half of a bundle's time.
				if (args.namespace === "file" && /^\.\.?\//.test(args.path) && isPackage(args.importer)) return undefined;
				const fromBerth = args.namespace === "file" && args.importer !== "" && isBerth(args.importer);
				const who = args.kind === "entry-point" ? "the app's entry point" : show(args.importer);
				const sdk = /^@berthos\/sdk(\/.*)?$/.exec(args.path);
				if (sdk) {
					const file = SDK_EXPORTS[sdk[1] ?? ""];
					if (!file) return { errors: [{ text: `@berthos/sdk has no export "${sdk[1].slice(1)}"` }] };
					return { path: realpathSync(join(SDK_DIR, file)) };
				}
				const opts = {
					kind: args.kind, importer: args.importer, namespace: args.namespace, resolveDir: args.resolveDir,
					with: args.with, pluginData: { [INNER]: true },
				};
				let r = await build.resolve(args.path, opts);
				if (r.errors.length) return { errors: r.errors, warnings: r.warnings };
				if (r.external) {
					if (r.path.startsWith("node:") || isBuiltin(r.path)) return { path: r.path, external: true, sideEffects: r.sideEffects };
					return { errors: [{ text: `${who} imports "${args.path}", which would be loaded from outside the bundle at run time: ${OUTSIDE_RULE}` }] };
				}
				// data: URLs carry their content in the importing module itself.
				if (r.namespace === "dataurl") return { path: r.path, namespace: r.namespace, sideEffects: r.sideEffects };
				if (r.namespace !== "file") return { errors: [{ text: `${who} imports "${args.path}", which resolves outside the file system (${r.namespace})` }] };
				let real = realOrNull(r.path);
				let ok = real !== null && (fromBerth ? isBerth(real) || isModel(real) : allowed(real));
				const link = !ok && !fromBerth ? linkOnTheWay(args.path, args.resolveDir) : null;
				if (!ok && !fromBerth && !link && isBare(args.path)) {
					// A package from a node_modules above the app: Berth's copy stands in, if it has one.
					const again = await build.resolve(args.path, { ...opts, importer: join(SDK_DIR, "bundle.mjs"), resolveDir: SDK_DIR });
					const againReal = !again.errors.length && !again.external && again.namespace === "file" ? realOrNull(again.path) : null;
					if (againReal && isBerth(againReal)) [r, real, ok] = [again, againReal, true];
				}
				if (!ok) {
					let text;
					if (fromBerth) text = `${who} imports "${args.path}", which resolves to ${real ?? r.path}, outside Berth's installation: ${SETUP_HINT}`;
					else if (link) text = `${who} imports "${args.path}", but ${link.rel} is a symbolic link to ${link.target}, outside the app: ${OUTSIDE_RULE}`;
					else if (isBare(args.path)) text = `${who} imports "${args.path}", which resolves to ${real ?? r.path}, outside the app: ${OUTSIDE_RULE}`;
					else text = `${who} imports "${args.path}", which is outside the app: ${OUTSIDE_RULE}`;
					return { errors: [{ text }] };
				}
				if (shared && args.path === "zod" && real === shared.entry) return { path: "zod", namespace: SHARED_NS, sideEffects: false };
				const pluginData = fromBerth && isModel(real) ? { [MODEL_MARK]: true } : r.pluginData;
				return { path: real, namespace: "file", sideEffects: r.sideEffects, suffix: r.suffix || undefined, pluginData };
			});
			// Files esbuild finds without asking onResolve (the matches of a glob-style
			// import such as require("./data/" + name)) are stopped here.
			build.onLoad({ filter: /.*/, namespace: "file" }, (args) => {
				const real = realOrNull(args.path);
				if (!real || !(allowed(real) || (isModel(real) && args.pluginData?.[MODEL_MARK]))) {
					const link = firstLinkOut(app, args.path);
					return {
						errors: [{
							text: link
								? `${link.rel} is a symbolic link to ${link.target}, outside the app: ${OUTSIDE_RULE}`
								: `the bundle would include ${args.path}, which is outside the app: ${OUTSIDE_RULE}`,
						}],
					};
				}
				if (!statSync(real).isFile()) return { errors: [{ text: `${show(real)} is not a regular file` }] };
				return undefined;
			});
			if (shared) build.onLoad({ filter: /.*/, namespace: SHARED_NS }, async () => ({ contents: zodStandIn(await shared.exports()), loader: "js" }));
			build.onLoad({ filter: /\.node$/ }, (args) => ({
				errors: [{
					text: `native addon ${relative(appDir, args.path) || args.path} cannot be bundled: .node files are compiled for the host and cannot run in the VM's Linux guest; use a pure JavaScript or WebAssembly alternative`,
				}],
			}));
		},
	};
}

function esbuildOptions(appDir, shared = null) {
	return {
		bundle: true,
		platform: "node",
		format: "esm",
		target: "node18",
		write: false,
		absWorkingDir: appDir,
		nodePaths: berthNodeModules(),
		banner: { js: BANNER },
		minifyWhitespace: true,
		minifySyntax: true,
		keepNames: true,
		charset: "utf8",
		logLevel: "silent",
		plugins: [berthPlugin(appDir, shared)],
	};
}

function esbuildFailure(err, appDir) {
	if (!Array.isArray(err?.errors) || !err.errors.length) return new BundleError(err?.message ?? String(err));
	const lines = err.errors.slice(0, 5).map((e) => {
		const loc = e.location ? ` (${relative(appDir, resolve(appDir, e.location.file)) || e.location.file}:${e.location.line})` : "";
		return e.text + loc;
	});
	if (err.errors.length > 5) lines.push(`… and ${err.errors.length - 5} more`);
	return new BundleError(lines.join("\n"));
}

/**
 * zod is most of a Node app's bundle (its locales alone half of it), and compiling and
 * running its top level most of the app's start under emulation. When an app's
 * `import "zod"` is Berth's own copy, the app's bundle has a stand-in instead
 * (src/zod-stand-in.mjs), which takes the zod module the runtime sets: the share's
 * runtime-zod.mjs, or in a restored VM the root image's same bytes, loaded in the template.
 * Returns {entry, dir}: the file an ES module's `import "zod"` loads, and its package.
 */
let sharedZodInfo;
function sharedZod() {
	if (sharedZodInfo) return sharedZodInfo;
	const dir = berthPackage("zod", SDK_DIR);
	if (!dir) throw new BundleError(`zod is not installed in Berth's checkout: ${SETUP_HINT}`);
	// The plugin shares zod only when esbuild resolves an import to this very file.
	const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
	const main = pkg.exports?.["."]?.import ?? pkg.exports?.["."] ?? pkg.module ?? pkg.main;
	const entry = typeof main === "string" ? realOrNull(join(dir, main)) : null;
	if (!entry) throw new BundleError(`Berth's zod (${dir}) has no ES module entry point: ${SETUP_HINT}`);
	sharedZodInfo = { entry, dir };
	return sharedZodInfo;
}

/**
 * The SDK's runtime is the same bundle for every app: built from Berth's root (so that no
 * path in it depends on where the app is), and kept in ~/.berth/vm/cache/runtime/ with the
 * sha256 of every file esbuild read for it (its metafile). It is built again when one of
 * them, esbuild or the options change. A cache that cannot be read or written only costs
 * the build.
 */
const sha256 = (data) => createHash("sha256").update(data).digest("hex");

function runtimeCacheFile(esbuild) {
	const home = process.env.BERTH_HOME || join(process.env.HOME || "/nonexistent", ".berth");
	const key = sha256(JSON.stringify({ esbuild: esbuild.version, options: runtimeOptions(), sdk: SDK_DIR }));
	return join(home, "vm", "cache", "runtime", `${key}.json`);
}

// What the runtime imports with import() is a chunk of its own: undici (three quarters of
// the runtime's code) is only parsed by an app that reaches the network through a broker,
// yaml only when berth.yml.json does not match berth.yml.
function runtimeOptions() {
	const { plugins, ...opts } = esbuildOptions(BERTH_ROOT);
	return {
		...opts,
		entryPoints: { runtime: join(SDK_DIR, "runtime.mjs"), [SHARED_ZOD_FILE.replace(/\.mjs$/, "")]: join(SDK_DIR, "src", "zod-shared.mjs") },
		outdir: BERTH_ROOT,
		splitting: true,
		entryNames: "[name]",
		chunkNames: "runtime-chunk-[hash]",
		outExtension: { ".js": ".mjs" },
		metafile: true,
	};
}

/** The cached runtime: {files: {name: Buffer}, zodExports}, or null. */
function cachedRuntime(file) {
	try {
		const entry = JSON.parse(readFileSync(file, "utf8"));
		for (const [path, digest] of Object.entries(entry.inputs)) if (sha256(readFileSync(path)) !== digest) return null;
		const files = {};
		for (const [name, { data, sha }] of Object.entries(entry.outputs)) {
			files[name] = Buffer.from(data, "base64");
			if (sha256(files[name]) !== sha) return null;
		}
		return files["runtime.mjs"] && Array.isArray(entry.zodExports) ? { files, zodExports: entry.zodExports } : null;
	} catch {
		return null;
	}
}

async function runtimeBundle(esbuild) {
	const file = runtimeCacheFile(esbuild);
	const cached = cachedRuntime(file);
	if (cached) return cached;
	const r = await esbuild.build({ ...runtimeOptions(), plugins: [berthPlugin(BERTH_ROOT)] });
	const files = {};
	for (const f of r.outputFiles) files[relative(BERTH_ROOT, f.path)] = Buffer.from(f.contents);
	const zodExports = r.metafile.outputs[SHARED_ZOD_FILE]?.exports;
	if (!zodExports) throw new BundleError(`the SDK runtime's bundle has no ${SHARED_ZOD_FILE}`);
	try {
		const inputs = {};
		for (const p of Object.keys(r.metafile.inputs)) {
			const abs = resolve(BERTH_ROOT, p);
			inputs[abs] = sha256(readFileSync(abs));
		}
		const outputs = {};
		for (const [name, data] of Object.entries(files)) outputs[name] = { data: data.toString("base64"), sha: sha256(data) };
		mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
		const tmpFile = `${file}.tmp-${process.pid}`;
		writeFileSync(tmpFile, JSON.stringify({ inputs, outputs, zodExports }), { mode: 0o600 });
		renameSync(tmpFile, file);
	} catch {
		// Only a speed-up.
	}
	return { files, zodExports };
}

/**
 * How an app's build used the shared zod: "shared" (through the stand-in only), "mixed"
 * (the stand-in and files of zod's own, from another of its entry points: their objects
 * must be the same zod's, so such an app bundles zod itself), or "none".
 */
function zodUse(metafile, appDir, shared) {
	let standIn = false;
	let own = false;
	// What the output holds: the stand-in of an app that imports zod but uses none of it
	// is left out, and so is the share's runtime-zod.mjs.
	for (const p of Object.values(metafile.outputs).flatMap((o) => Object.keys(o.inputs))) {
		if (p === `${SHARED_NS}:zod`) standIn = true;
		else if (inside(resolve(appDir, p), shared.dir)) own = true;
	}
	return standIn ? (own ? "mixed" : "shared") : "none";
}

/**
 * The app's build: a fresh one, or with `contexts` (--serve) a rebuild of the esbuild
 * context kept for this app and entry point, which parses again only the files that
 * changed. An app whose build is "mixed" (zodUse()) is built again whole, as a one-shot
 * build, each time. Resolves to {result, base, sharesZod}: the output files' paths are
 * under `base`.
 */
async function buildApp(esbuild, appDir, tmp, appEntryPath, contexts, runtime) {
	const shared = sharedZod();
	// Set for each build: a kept context's plugin holds this very object.
	shared.exports = () => runtime.then((rt) => rt.zodExports);
	const options = (share) => ({
		...esbuildOptions(appDir, share ? shared : null),
		entryPoints: [appEntryPath],
		outfile: join(tmp, "dist", "index.mjs"),
		metafile: true,
	});
	const whole = async () => ({ result: await esbuild.build(options(false)), base: tmp, sharesZod: false });
	if (!contexts) {
		const result = await esbuild.build(options(true));
		const use = zodUse(result.metafile, appDir, shared);
		return use === "mixed" ? whole() : { result, base: tmp, sharesZod: use === "shared" };
	}
	let kept = contexts.get(appDir);
	contexts.delete(appDir);
	if (kept && kept.entry !== appEntryPath) {
		await kept.ctx.dispose();
		kept = undefined;
	}
	if (!kept) {
		if (contexts.size >= SERVE_CONTEXTS_MAX) {
			const [oldest, old] = contexts.entries().next().value;
			contexts.delete(oldest);
			await old.ctx.dispose();
		}
		kept = { entry: appEntryPath, base: tmp, ctx: await esbuild.context(options(true)) };
	}
	// Most recently used last: the first is the one to let go of.
	contexts.set(appDir, kept);
	let result;
	try {
		result = await kept.ctx.rebuild();
	} catch (err) {
		// Errors in the app's code leave the context as sound as a success does (the next
		// save, with the fix, rebuilds on it); anything else starts the next from scratch.
		if (!Array.isArray(err?.errors)) {
			contexts.delete(appDir);
			await kept.ctx.dispose();
		}
		throw err;
	}
	const use = zodUse(result.metafile, appDir, shared);
	return use === "mixed" ? whole() : { result, base: kept.base, sharesZod: use === "shared" };
}

async function bundleNode(appDir, tmp, appEntryPath, manifestFiles, contexts) {
	const esbuild = await loadEsbuild();
	const files = {};
	try {
		// Side by side: esbuild's service builds both at once, on every core.
		// Both settled before either's failure is reported (the app's first): a build of a
		// kept context must not still run when the next request starts one.
		const runtime = runtimeBundle(esbuild);
		const [appBuild, rtBuild] = await Promise.allSettled([buildApp(esbuild, appDir, tmp, appEntryPath, contexts, runtime), runtime]);
		for (const b of [appBuild, rtBuild]) if (b.status === "rejected") throw b.reason;
		const { result: app, base, sharesZod } = appBuild.value;
		for (const f of app.outputFiles) files[relative(base, f.path)] = Buffer.from(f.contents);
		for (const [name, data] of Object.entries(rtBuild.value.files)) if (name !== SHARED_ZOD_FILE || sharesZod) files[name] = data;
	} catch (err) {
		throw esbuildFailure(err, appDir);
	}
	for (const [name, data] of Object.entries(manifestFiles)) if (data) files[name] = data;
	files["proto/context_bus.proto"] = readFileSync(join(SDK_DIR, "..", "context_bus.proto"));
	return files;
}

/** The Python share: the app's own files under SPEC §12.3's rules. */
function collectPython(appDir, skip) {
	if (!existsSync(join(appDir, "src", "app.py"))) throw new BundleError(`a python app needs src/app.py, and ${appDir} has none`);
	const root = realpathSync(appDir);
	const files = {};
	let count = 0;
	let bytes = 0;
	const walk = (dir) => {
		for (const name of readdirSync(dir).sort()) {
			if (name.startsWith(".") || EXCLUDED_NAMES.has(name)) continue;
			const abs = join(dir, name);
			if (skip.some((s) => abs === s)) continue;
			const rel = relative(appDir, abs);
			let st = lstatSync(abs);
			if (st.isSymbolicLink()) {
				let real;
				try {
					real = realpathSync(abs);
				} catch {
					throw new BundleError(`${rel} is a dangling symbolic link`);
				}
				if (real !== root && !real.startsWith(root + sep))
					throw new BundleError(`${rel} is a symbolic link to ${real}, outside the app directory; the share holds only the app's own files`);
				st = statSync(abs);
			}
			if (st.isDirectory()) walk(abs);
			else if (st.isFile()) {
				if (++count > MAX_SHARE_FILES) throw new BundleError(`the app share would hold more than ${MAX_SHARE_FILES} files`);
				bytes += st.size;
				if (bytes > MAX_SHARE_BYTES) throw new BundleError(`the app share would be larger than ${MAX_SHARE_BYTES >> 20} MiB`);
				files[rel.split(sep).join("/")] = { from: abs, mode: st.mode & 0o111 ? 0o755 : 0o644 };
			}
		}
	};
	walk(appDir);
	files[".berth-runtime"] = Buffer.from("python\n");
	return files;
}

function writeShare(tmp, files, mtime) {
	const names = Object.keys(files).sort();
	const digest = createHash("sha256");
	for (const name of names) {
		const dest = join(tmp, ...name.split("/"));
		mkdirSync(dirname(dest), { recursive: true, mode: 0o755 });
		const f = files[name];
		let content;
		if (Buffer.isBuffer(f)) {
			writeFileSync(dest, f, { mode: 0o644 });
			content = f;
		} else {
			copyFileSync(f.from, dest);
			content = readFileSync(dest);
		}
		// The mode must not depend on the caller's umask.
		chmodSync(dest, Buffer.isBuffer(f) ? 0o644 : f.mode);
		digest.update(`${name}\0${createHash("sha256").update(content).digest("hex")}\n`);
	}
	// Fixed times, so a share packed into an image is byte-identical too.
	const dirs = new Set([tmp]);
	for (const name of names) {
		const dest = join(tmp, ...name.split("/"));
		utimesSync(dest, mtime, mtime);
		for (let d = dirname(dest); d.startsWith(tmp); d = dirname(d)) dirs.add(d);
	}
	for (const d of [...dirs].sort().reverse()) {
		chmodSync(d, 0o755);
		utimesSync(d, mtime, mtime);
	}
	return { files: names, digest: digest.digest("hex") };
}

function isPreviousBundle(dir) {
	const entries = readdirSync(dir);
	if (entries.length === 0) return true;
	return entries.includes("berth.yml") && (entries.includes("runtime.mjs") || entries.includes(".berth-runtime"));
}

/**
 * Bundle `appDir` into `outDir` (replaced as a whole).
 * @returns {Promise<{runtime: "node"|"python", files: string[], digest: string}>}
 */
export async function bundleApp(appDirArg, outDirArg, contexts = null) {
	const appDir = resolve(appDirArg);
	const outDir = resolve(outDirArg);
	if (!existsSync(appDir) || !statSync(appDir).isDirectory()) throw new BundleError(`${appDir} is not a directory`);
	if (outDir === appDir || appDir.startsWith(outDir + sep)) throw new BundleError(`the output directory must not contain the app`);
	if (existsSync(outDir) && (!statSync(outDir).isDirectory() || !isPreviousBundle(outDir)))
		throw new BundleError(`${outDir} exists and is not an earlier bundle; refusing to replace it`);
	const { manifest, shareFiles: manifestFiles } = await readManifest(appDir);
	mkdirSync(dirname(outDir), { recursive: true });
	const tmp = `${outDir}.tmp-${process.pid}`;
	rmSync(tmp, { recursive: true, force: true });
	mkdirSync(tmp, { recursive: true, mode: 0o755 });
	try {
		const files =
			manifest.runtime === "python"
				? collectPython(appDir, [outDir, tmp])
				: await bundleNode(appDir, tmp, appEntry(appDir), manifestFiles, contexts);
		const epoch = Number(process.env.SOURCE_DATE_EPOCH);
		const mtime = Number.isFinite(epoch) && epoch >= 0 ? epoch : 0;
		const result = writeShare(tmp, files, mtime);
		rmSync(outDir, { recursive: true, force: true });
		renameSync(tmp, outDir);
		utimesSync(outDir, mtime, mtime);
		return { runtime: manifest.runtime, ...result };
	} catch (err) {
		rmSync(tmp, { recursive: true, force: true });
		throw err;
	}
}

/**
 * The SDK runtime alone (runtime.mjs, its chunks and runtime-zod.mjs), the very files of
 * every Node app's share, into `outDirArg`, which must not exist: the root image holds them for its warm
 * Node (src/berth-init/node-warm.mjs).
 */
export async function writeRuntime(outDirArg) {
	const outDir = resolve(outDirArg);
	if (existsSync(outDir)) throw new BundleError(`${outDir} exists; refusing to replace it`);
	const { files } = await runtimeBundle(await loadEsbuild());
	mkdirSync(outDir, { recursive: true, mode: 0o755 });
	const epoch = Number(process.env.SOURCE_DATE_EPOCH);
	return writeShare(outDir, files, Number.isFinite(epoch) && epoch >= 0 ? epoch : 0);
}

const USAGE = "usage: node bundle.mjs <appDir> <outDir> | node bundle.mjs --runtime <outDir> | node bundle.mjs --serve";

/** What the one-shot form prints for bundling `app` into `out`, as an object. */
async function bundleVerdict(app, out, contexts) {
	const t0 = Date.now();
	try {
		const r = await bundleApp(app, out, contexts);
		return { ok: true, runtime: r.runtime, files: r.files, digest: r.digest, ms: Date.now() - t0 };
	} catch (err) {
		return { ok: false, error: err instanceof Error ? err.message : String(err) };
	}
}

/** Where the bundler's own code stands: this file, the SDK's modules it loads with the
 * capability model they check manifests against, and the packages npm installed for Berth
 * (their lockfile), by size and modification time. */
function ownCodeStamp() {
	const files = [fileURLToPath(import.meta.url), CAPABILITY_MODEL, ...berthNodeModules().map((d) => join(d, ".package-lock.json"))];
	try {
		for (const name of readdirSync(join(SDK_DIR, "src")).sort()) files.push(join(SDK_DIR, "src", name));
	} catch {}
	return files.map((f) => {
		const st = statSync(f, { throwIfNoEntry: false });
		return st ? `${f}:${st.size}:${st.mtimeMs}` : `${f}:-`;
	}).join("\n");
}

/**
 * --serve: bundle app after app for `berth dev`, which keeps this process between
 * reloads: one request per line on stdin ({"app": <appDir>, "out": <outDir>}), one
 * verdict per line on stdout, the line the one-shot form prints. Node, the manifest's
 * parser and esbuild are loaded once, and each app's esbuild context is kept for its next
 * build. Ends with stdin, and before answering once its own code changed on the disk.
 */
async function serve() {
	const contexts = new Map();
	const code = ownCodeStamp();
	// What every build needs, loaded before the first request: esbuild with its service
	// started, and the manifest's parser. A failure here is the first request's to report.
	await Promise.allSettled([loadEsbuild().then((esbuild) => esbuild.transform("")), loadManifestModule(), import("./src/manifest-copy.mjs")]);
	const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
	for await (const line of lines) {
		// Bundles made by code that is no longer on the disk would not be the ones a fresh
		// bundler makes: end, unanswered, and berth dev runs the new code.
		if (ownCodeStamp() !== code) process.exit(0);
		let req = null;
		try {
			req = line.length <= SERVE_LINE_MAX ? JSON.parse(line) : null;
		} catch {}
		const verdict =
			typeof req?.app === "string" && typeof req?.out === "string"
				? await bundleVerdict(req.app, req.out, contexts)
				: { ok: false, error: 'a request is one line of {"app": <appDir>, "out": <outDir>}' };
		process.stdout.write(JSON.stringify(verdict) + "\n");
	}
	for (const { ctx } of contexts.values()) await ctx.dispose();
	return 0;
}

async function cli(argv) {
	const t0 = Date.now();
	if (argv.length === 1 && argv[0] === "--serve") return serve();
	if (argv.length !== 2) {
		process.stderr.write(`${USAGE}\n`);
		process.stdout.write(JSON.stringify({ ok: false, error: USAGE }) + "\n");
		return 2;
	}
	try {
		if (argv[0] === "--runtime") {
			const r = await writeRuntime(argv[1]);
			process.stdout.write(JSON.stringify({ ok: true, runtime: "node", files: r.files, digest: r.digest, ms: Date.now() - t0 }) + "\n");
			return 0;
		}
		const verdict = await bundleVerdict(argv[0], argv[1], null);
		process.stdout.write(JSON.stringify(verdict) + "\n");
		return verdict.ok ? 0 : 1;
	} catch (err) {
		process.stdout.write(JSON.stringify({ ok: false, error: err instanceof Error ? err.message : String(err) }) + "\n");
		return 1;
	}
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = await cli(process.argv.slice(2));
