// SPDX-License-Identifier: Apache-2.0
// The warm Node runtime of a restored VM (src/berth-init/node-warm.h, docs/warm-start.md).
//
// berth-init starts this in the template boot, as root, from Node's startup snapshot, with
// its end of a socketpair as fd 3. Being an ES module, its own load sets up Node's ES
// module loader; it then loads the modules of Node's own that an app's start loads, each
// compiled from source by the image's Node, runs the unix socket code an app's runtime
// runs, imports the root image's copy of the SDK runtime without running it and its copy of
// zod (which the bundler shares with apps, see sdk/node/bundle.mjs), and loads the
// addon, whose takeApp() says "ready" and returns only once berth-init has handed this
// process an app and agent-init's code has confined every thread of it as that app
// (src/agent-init/node-addon.c). Nothing of an app is read before that. Then it runs the app's runtime as `node <dir>/runtime.mjs` would:
// the preloaded one when the share's runtime.mjs is the same bytes.
import { readdirSync, readFileSync, statSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname } from "node:path";
import { pathToFileURL } from "node:url";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";

const CHANNEL_FD = 3;
const ADDON = "/usr/libexec/berth/berth-node-confine.node";
// The SDK runtime the bundler puts in every Node app's share (runtime.mjs and its chunks),
// byte for byte, made when the root image was.
const IMAGE_RUNTIME = "/usr/lib/berth/node-runtime/runtime.mjs";
// zod, which the bundler puts in a share beside the runtime when the app's `import "zod"`
// is Berth's copy; the app's bundle takes the module under ZOD_KEY instead when it is set.
// The file's name and the key are the SDK's SHARED_ZOD_FILE and SHARED_ZOD_KEY
// (sdk/node/src/zod-stand-in.mjs): this script is not bundled, and cannot import them.
const IMAGE_ZOD = "/usr/lib/berth/node-runtime/runtime-zod.mjs";
const ZOD_KEY = Symbol.for("berth.runtime.zod");
const ZOD_GLOBALS = ["__zod_globalConfig", "__zod_globalRegistry"];
const PRELOAD_MARK = Symbol.for("berth.runtime.preload");
// What the SDK runtime, the SDK in an app's bundle and undici (egress) load. Not a module
// that touches process.stdout or process.stderr as it loads (assert does): those streams
// are the app's, made once the app's stdio is in place.
const PRELOAD = ["async_hooks", "buffer", "child_process", "crypto", "diagnostics_channel", "events", "fs", "fs/promises", "http", "https", "module", "net", "os", "path", "perf_hooks", "querystring", "stream", "stream/web", "string_decoder", "timers", "tls", "url", "util", "util/types", "worker_threads", "zlib"];

/**
 * A unix socket served, connected to, written to and closed, on an abstract address (no
 * file, nothing left open): what an app's runtime does for its RPC socket and its
 * connections to the context daemons, compiled once here instead of in every app.
 */
async function exerciseUnixSockets(net) {
	const path = `\0berth-node-warm-${process.pid}`;
	const server = net.createServer((s) => s.on("data", (d) => s.end(d)));
	await new Promise((resolve, reject) => server.once("error", reject).listen(path, resolve));
	await new Promise((resolve, reject) => {
		const c = net.createConnection({ path }, () => c.write("warm\n"));
		c.on("data", () => {});
		c.on("end", resolve);
		c.on("error", reject);
	});
	await new Promise((resolve) => server.close(resolve));
}

/** A file of the root image's, or null when the image has none. */
function imageFile(path) {
	try {
		return readFileSync(path);
	} catch (err) {
		if (err.code === "ENOENT") return null;
		throw err;
	}
}

/**
 * The root image's SDK runtime, imported with PRELOAD_MARK set, so that its main() does not
 * run, and its bytes, to compare with an app's share; null when the image has none.
 */
async function preloadRuntime() {
	const bytes = imageFile(IMAGE_RUNTIME);
	if (bytes === null) return null;
	globalThis[PRELOAD_MARK] = true;
	try {
		const { main, warmUp } = await import(pathToFileURL(IMAGE_RUNTIME).href);
		return { bytes, main, warmUp };
	} finally {
		delete globalThis[PRELOAD_MARK];
	}
}

/**
 * The root image's zod module and its bytes, or null when the image has none. zod makes two
 * globals as it loads, which an app's own zod would take over: they are kept aside, and
 * given back only to an app that takes this module.
 */
async function preloadZod() {
	const bytes = imageFile(IMAGE_ZOD);
	if (bytes === null) return null;
	const module = await import(pathToFileURL(IMAGE_ZOD).href);
	const globals = {};
	for (const name of ZOD_GLOBALS) {
		globals[name] = globalThis[name];
		delete globalThis[name];
	}
	return { bytes, module, globals };
}

/**
 * Schemas of the kinds apps declare, built, checked and failed once, so that V8 has compiled
 * that much of zod here rather than in each app's start.
 */
function warmUpZod({ z }) {
	const item = z.object({
		id: z.string().min(1).max(64),
		text: z.string().describe("what it says"),
		count: z.number().int().optional(),
		done: z.boolean().default(false),
		kind: z.enum(["a", "b"]),
		tags: z.array(z.string()),
	});
	const list = z.object({ items: z.array(item), next: z.union([z.string(), z.null()]) });
	list.parse({ items: [{ id: "1", text: "t", kind: "a", tags: ["x"] }], next: null });
	list.safeParse({ items: [{ id: "", text: 1, kind: "c" }] });
}

/**
 * Math.random() made to throw until restore() is called: drawn before the app's seed
 * (below), its stream would be every clone's. `drawn` is the error it throws.
 */
function trapRandom() {
	const random = Math.random;
	const drawn = new Error("Math.random() was drawn before the app's seed");
	Math.random = () => {
		throw drawn;
	};
	return { drawn, restore: () => (Math.random = random) };
}

/** A warm-up: only a speed-up, so an error of its own is dropped; a draw of Math.random() is not. */
async function warmUp(fn) {
	const trap = trapRandom();
	try {
		await fn();
	} catch (err) {
		if (err === trap.drawn) throw err;
	} finally {
		trap.restore();
	}
}

/**
 * A full collection, so that the app's start inherits none of the warm-ups' garbage: a
 * collection of it in the app's first import cost 45 ms under emulation. gc() is made for
 * one throwaway context only; the app's contexts get none.
 */
function collectGarbage() {
	v8.setFlagsFromString("--expose-gc");
	const gc = runInNewContext("gc");
	v8.setFlagsFromString("--no-expose-gc");
	gc();
}

/** Whether the app's share holds `name` with these very bytes. */
function shareHas(name, bytes) {
	try {
		return readFileSync(`${app.dir}/${name}`).equals(bytes);
	} catch {
		return false;
	}
}

/**
 * In a restored VM, while berth-init makes it its own: what an app's start runs, once
 * more. Under emulation QEMU translates the guest's code afresh in every restored VM; this
 * has it translate that code on the other vCPU before an app's start needs it. Nothing of
 * an app is read, stdio is not touched (it is the app's, later) and errors are dropped.
 * Once an app has come it stops, after the step it is in: each is short, and none may be
 * left running in the app's process (Math.random() is trapped during each).
 */
async function rehearse(net) {
	const steps = [
		() => preloaded?.warmUp(),
		() => import("data:text/javascript,export default () => 1"),
		() => preloadedZod && warmUpZod(preloadedZod.module),
		() => exerciseUnixSockets(net),
		() => statSync(IMAGE_ZOD).isFile() && readdirSync(dirname(IMAGE_ZOD)).length,
	];
	for (const step of steps) {
		if (appWaiting(CHANNEL_FD)) return;
		try {
			await warmUp(step);
		} catch {} // a draw of Math.random() refused: nothing was drawn
	}
}

let takeApp, appWaiting, preloaded, preloadedZod, net;
try {
	// Imported as an app's ES modules import them: each becomes an ES module of its own
	// once per process, besides the module itself.
	for (const m of PRELOAD) await import(`node:${m}`);
	net = await import("node:net");
	await exerciseUnixSockets(net);
	// Neither may draw Math.random() as it loads: that fails the warm Node instead (and
	// the VM's Node apps are exec'd).
	const trap = trapRandom();
	preloaded = await preloadRuntime();
	preloadedZod = await preloadZod();
	trap.restore();
	if (preloaded !== null) await warmUp(() => preloaded.warmUp());
	if (preloadedZod !== null) await warmUp(() => warmUpZod(preloadedZod.module));
	collectGarbage();
	({ takeApp, appWaiting } = createRequire(import.meta.url)(ADDON));
} catch (err) {
	// Its stdio is /dev/null: berth-init reads this instead of "ready" and logs it.
	writeSync(CHANNEL_FD, String(err?.message ?? err).slice(0, 200));
	process.exit(1);
}
let app = takeApp(CHANNEL_FD);
if (app.rehearse) {
	await rehearse(net);
	app = takeApp(CHANNEL_FD);
}

// The app's from here on. Math.random() draws its state on its first call, from V8's
// generator, which every clone of the template shares: seed it from the kernel instead,
// then let later contexts and workers seed themselves as usual.
v8.setFlagsFromString(`--random-seed=${app.randomSeed}`);
Math.random();
v8.setFlagsFromString("--random-seed=0");
process.chdir(app.dir); // Node caches the directory it was started in
const runtime = `${app.dir}/runtime.mjs`;
process.argv = [process.argv[0], runtime];
// An app bundled by the SDK the root image was made with has these very bytes in its
// share: the runtime preloaded above is its runtime, already compiled, and runs it; so
// with zod, for an app whose bundle takes zod from the runtime (the runtime then loads no
// other).
if (preloadedZod !== null && shareHas(basename(IMAGE_ZOD), preloadedZod.bytes)) {
	process.stderr.write("[berth:runtime] runtime-zod.mjs is the root image's, loaded before the app\n");
	Object.assign(globalThis, preloadedZod.globals);
	globalThis[ZOD_KEY] = preloadedZod.module;
}
if (preloaded !== null && shareHas(basename(IMAGE_RUNTIME), preloaded.bytes)) {
	process.stderr.write("[berth:runtime] runtime.mjs is the root image's, loaded before the app\n");
	await preloaded.main();
} else await import(pathToFileURL(runtime).href);
