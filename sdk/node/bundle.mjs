#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// Build an app's share for the VM (SPEC §12.3).
//
//   node sdk/node/bundle.mjs <appDir> <outDir>
//
// Node app (berth.yml `runtime: node`, the default):
//   outDir/dist/index.mjs            the app with @berthos/sdk, zod and its other deps
//   outDir/runtime.mjs               the SDK runtime with its deps (yaml, undici)
//   outDir/berth.yml                 copied
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
import { createRequire } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const SDK_DIR = dirname(fileURLToPath(import.meta.url));
export const MAX_SHARE_FILES = 2000;
export const MAX_SHARE_BYTES = 32 << 20;
const EXCLUDED_NAMES = new Set(["__pycache__", "venv", "node_modules", "dist"]);
const ENTRY_CANDIDATES = ["src/index.ts", "src/index.mts", "src/index.js", "src/index.mjs", "index.ts", "index.mjs", "index.js"];
// CommonJS dependencies call require() for Node built-ins; an ESM bundle needs one.
const BANNER = 'import { createRequire as __berthCreateRequire } from "node:module";\nconst require = __berthCreateRequire(import.meta.url);';

export class BundleError extends Error {}

/** node_modules directories that hold the SDK's own dependencies (esbuild, zod, …). */
function sdkNodePaths() {
	const out = [];
	for (let d = SDK_DIR; ; d = dirname(d)) {
		const nm = join(d, "node_modules");
		if (existsSync(nm)) out.push(nm);
		if (dirname(d) === d) break;
	}
	return out;
}

async function loadEsbuild(appDir) {
	const tries = [
		() => import("esbuild"),
		() => import(pathToFileURL(createRequire(join(appDir, "package.json")).resolve("esbuild")).href),
	];
	for (const t of tries) {
		try {
			const m = await t();
			return m.default ?? m;
		} catch {}
	}
	throw new BundleError("esbuild is not installed: run `npm ci` in the Berth checkout or `npm install esbuild` in the app");
}

async function loadYaml(appDir) {
	try {
		return await import("yaml");
	} catch {
		try {
			return await import(pathToFileURL(createRequire(join(appDir, "package.json")).resolve("yaml")).href);
		} catch {
			throw new BundleError("the yaml package is not installed: run `npm ci` in the Berth checkout");
		}
	}
}

async function readManifest(appDir) {
	const path = join(appDir, "berth.yml");
	if (!existsSync(path)) throw new BundleError(`no berth.yml in ${appDir}`);
	const { parseManifestText } = await import("./src/manifest-load.mjs").catch(async () => {
		await loadYaml(appDir);
		return import("./src/manifest-load.mjs");
	});
	const { validateManifest } = await import("./src/manifest.mjs");
	const { value, lineOf } = parseManifestText(readFileSync(path, "utf8"), "berth.yml");
	return validateManifest(value ?? {}, { file: "berth.yml", path, lineOf });
}

function appEntry(appDir) {
	try {
		const pkg = JSON.parse(readFileSync(join(appDir, "package.json"), "utf8"));
		if (pkg?.berth?.entry) {
			const p = resolve(appDir, pkg.berth.entry);
			if (!existsSync(p)) throw new BundleError(`package.json berth.entry ${pkg.berth.entry} does not exist`);
			return p;
		}
	} catch (err) {
		if (err instanceof BundleError) throw err;
	}
	for (const c of ENTRY_CANDIDATES) if (existsSync(join(appDir, c))) return join(appDir, c);
	throw new BundleError(`no app entry in ${appDir}: expected ${ENTRY_CANDIDATES.slice(0, 4).join(", ")} (or package.json "berth": {"entry": …})`);
}

/** esbuild plugin: find @berthos/sdk (the app's own copy, else this one) and refuse .node addons. */
function berthPlugin(appDir) {
	return {
		name: "berth",
		setup(build) {
			build.onResolve({ filter: /^@berthos\/sdk(\/.*)?$/ }, async (args) => {
				if (args.pluginData?.berthInner) return undefined;
				const r = await build.resolve(args.path, {
					kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { berthInner: true },
				});
				if (!r.errors.length) return { path: r.path, namespace: r.namespace, external: r.external, sideEffects: r.sideEffects };
				const sub = args.path.slice("@berthos/sdk".length);
				const map = { "": "src/index.mjs", "/runtime": "runtime.mjs" };
				if (!(sub in map)) return { errors: [{ text: `@berthos/sdk has no export "${sub.slice(1)}"` }] };
				return { path: join(SDK_DIR, map[sub]) };
			});
			build.onLoad({ filter: /\.node$/ }, (args) => ({
				errors: [{
					text: `native addon ${relative(appDir, args.path) || args.path} cannot be bundled: .node files are compiled for the host and cannot run in the VM's Linux guest; use a pure JavaScript or WebAssembly alternative`,
				}],
			}));
		},
	};
}

function esbuildOptions(appDir) {
	return {
		bundle: true,
		platform: "node",
		format: "esm",
		target: "node18",
		write: false,
		absWorkingDir: appDir,
		nodePaths: sdkNodePaths(),
		banner: { js: BANNER },
		minifyWhitespace: true,
		minifySyntax: true,
		keepNames: true,
		charset: "utf8",
		logLevel: "silent",
		plugins: [berthPlugin(appDir)],
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

async function bundleNode(appDir, tmp, appEntryPath) {
	const esbuild = await loadEsbuild(appDir);
	const opts = esbuildOptions(appDir);
	const files = {};
	try {
		const app = await esbuild.build({ ...opts, entryPoints: [appEntryPath], outfile: join(tmp, "dist", "index.mjs") });
		const rt = await esbuild.build({ ...opts, entryPoints: [join(SDK_DIR, "runtime.mjs")], outfile: join(tmp, "runtime.mjs") });
		for (const f of [...app.outputFiles, ...rt.outputFiles]) files[relative(tmp, f.path)] = Buffer.from(f.contents);
	} catch (err) {
		throw esbuildFailure(err, appDir);
	}
	files["berth.yml"] = readFileSync(join(appDir, "berth.yml"));
	files["proto/context_bus.proto"] = readFileSync(join(SDK_DIR, "proto", "context_bus.proto"));
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
export async function bundleApp(appDirArg, outDirArg) {
	const appDir = resolve(appDirArg);
	const outDir = resolve(outDirArg);
	if (!existsSync(appDir) || !statSync(appDir).isDirectory()) throw new BundleError(`${appDir} is not a directory`);
	if (outDir === appDir || appDir.startsWith(outDir + sep)) throw new BundleError(`the output directory must not contain the app`);
	if (existsSync(outDir) && (!statSync(outDir).isDirectory() || !isPreviousBundle(outDir)))
		throw new BundleError(`${outDir} exists and is not an earlier bundle; refusing to replace it`);
	const manifest = await readManifest(appDir);
	mkdirSync(dirname(outDir), { recursive: true });
	const tmp = `${outDir}.tmp-${process.pid}`;
	rmSync(tmp, { recursive: true, force: true });
	mkdirSync(tmp, { recursive: true, mode: 0o755 });
	try {
		const files =
			manifest.runtime === "python"
				? collectPython(appDir, [outDir, tmp])
				: await bundleNode(appDir, tmp, appEntry(appDir));
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

async function cli(argv) {
	const t0 = Date.now();
	if (argv.length !== 2) {
		process.stderr.write("usage: node bundle.mjs <appDir> <outDir>\n");
		process.stdout.write(JSON.stringify({ ok: false, error: "usage: node bundle.mjs <appDir> <outDir>" }) + "\n");
		return 2;
	}
	try {
		const r = await bundleApp(argv[0], argv[1]);
		process.stdout.write(JSON.stringify({ ok: true, runtime: r.runtime, files: r.files, digest: r.digest, ms: Date.now() - t0 }) + "\n");
		return 0;
	} catch (err) {
		process.stdout.write(JSON.stringify({ ok: false, error: err instanceof Error ? err.message : String(err) }) + "\n");
		return 1;
	}
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = await cli(process.argv.slice(2));
