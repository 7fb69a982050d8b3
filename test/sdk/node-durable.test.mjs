// SPDX-License-Identifier: Apache-2.0
// writeFileDurable(): the data is there and nothing else is, fsync reaches the file and
// then its directory (seen through a spy on FileHandle.prototype.sync, and under strace),
// concurrent calls keep to their own temporary files, and a failure at any step rejects,
// names the target and leaves the directory as it was.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
	chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync,
} from "node:fs";
import { open } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { test } from "node:test";
import { SDK, tempDir } from "./helpers.mjs";

const sdk = await import(join(SDK, "src", "index.mjs"));
const { writeFileDurable } = sdk;
const DURABLE = join(SDK, "src", "durable.mjs");

const work = tempDir("berth-durable-test-");
let n = 0;
/** A fresh, empty directory for one test. */
function freshDir() {
	const d = join(work, `d${++n}`);
	mkdirSync(d);
	return d;
}

// FileHandle is not exported by node:fs; its prototype is, through any open handle.
const FileHandleProto = await (async () => {
	const fh = await open(DURABLE, "r");
	const proto = Object.getPrototypeOf(fh);
	await fh.close();
	return proto;
})();
const realSync = FileHandleProto.sync;

/**
 * Spy on every FileHandle.sync() while fn runs: each call records what the descriptor
 * is (its /proc/self/fd link) and runs onSync first, which may throw to make it fail.
 */
async function withSyncSpy(fn, onSync = () => {}) {
	const calls = [];
	FileHandleProto.sync = async function () {
		const what = readlinkSync(`/proc/self/fd/${this.fd}`);
		const st = statSync(`/proc/self/fd/${this.fd}`);
		const call = { path: what, isDirectory: st.isDirectory() };
		if (!call.isDirectory) call.content = readFileSync(`/proc/self/fd/${this.fd}`);
		calls.push(call);
		await onSync(call, this);
		return realSync.call(this);
	};
	try {
		await fn();
	} finally {
		FileHandleProto.sync = realSync;
	}
	return calls;
}

const isTemp = (name, target) => name.startsWith(`.${basename(target)}.`) && name.endsWith(".tmp");

test("exported from @berthos/sdk, and declared in index.d.ts", () => {
	assert.equal(typeof sdk.writeFileDurable, "function");
	const dts = readFileSync(join(SDK, "index.d.ts"), "utf8");
	assert.match(dts, /export function writeFileDurable\(path: string, data: string \| ArrayBufferView, options\?: WriteFileDurableOptions\): Promise<void>;/);
});

test("the data is there after the call, at mode 0600, and nothing else is", async () => {
	const d = freshDir();
	const f = join(d, "notes.json");
	assert.equal(await writeFileDurable(f, '[{"text":"héllo"}]\n'), undefined);
	assert.equal(readFileSync(f, "utf8"), '[{"text":"héllo"}]\n', "a string is written as UTF-8");
	assert.equal(statSync(f).mode & 0o777, 0o600);
	assert.deepEqual(readdirSync(d), ["notes.json"], "no temporary file is left behind");

	// Replacing: the whole new content, still nothing else in the directory.
	await writeFileDurable(f, Buffer.from([0, 1, 2, 255]));
	assert.deepEqual([...readFileSync(f)], [0, 1, 2, 255]);
	await writeFileDurable(f, new Uint16Array([0x4241]));
	assert.equal(readFileSync(f, "latin1"), "AB");
	await writeFileDurable(f, new DataView(new Uint8Array([104, 105]).buffer));
	assert.equal(readFileSync(f, "utf8"), "hi");
	await writeFileDurable(f, "");
	assert.equal(readFileSync(f, "utf8"), "");
	assert.deepEqual(readdirSync(d), ["notes.json"]);

	// A mode of its own, less the umask (as open(2) applies it).
	const g = join(d, "shared.txt");
	const umask = process.umask(0o022);
	try {
		await writeFileDurable(g, "x", { mode: 0o666 });
	} finally {
		process.umask(umask);
	}
	assert.equal(statSync(g).mode & 0o777, 0o644);

	// A relative path works from the working directory.
	const cwd = process.cwd();
	process.chdir(d);
	try {
		await writeFileDurable("rel.txt", "relative");
	} finally {
		process.chdir(cwd);
	}
	assert.equal(readFileSync(join(d, "rel.txt"), "utf8"), "relative");
	assert.deepEqual(readdirSync(d).sort(), ["notes.json", "rel.txt", "shared.txt"]);
});

test("fsync reaches the temporary file before the rename, then the directory after it", async () => {
	const d = freshDir();
	const f = join(d, "notes.json");
	writeFileSync(f, "old");
	const seen = [];
	const calls = await withSyncSpy(
		() => writeFileDurable(f, "new"),
		(call) => seen.push(readFileSync(f, "utf8")),
	);
	assert.equal(calls.length, 2, JSON.stringify(calls));
	const [file, dir] = calls;
	assert.equal(file.isDirectory, false);
	assert.equal(dirname(file.path), d, "the temporary file is in the target's directory");
	assert.ok(isTemp(basename(file.path), f), file.path);
	assert.equal(file.content.toString(), "new", "the file is synced with all of the data in it");
	assert.equal(seen[0], "old", "the target is untouched until the data is synced");
	assert.deepEqual({ path: dir.path, isDirectory: dir.isDirectory }, { path: d, isDirectory: true });
	assert.equal(seen[1], "new", "the directory is synced after the rename");
	assert.equal(readFileSync(f, "utf8"), "new");
});

test("under strace: O_EXCL create, fsync, rename, then fsync of the directory opened O_DIRECTORY", (t) => {
	const probe = spawnSync("strace", ["-o", "/dev/null", "true"], { encoding: "utf8" });
	if (probe.error || probe.status !== 0) return t.skip(`strace cannot run here: ${probe.error?.message ?? probe.stderr.trim()}`);
	const d = freshDir();
	const f = join(d, "traced.json");
	const log = join(work, `strace-${n}.log`);
	const script = `import { writeFileDurable } from ${JSON.stringify(DURABLE)}; await writeFileDurable(${JSON.stringify(f)}, "traced");`;
	const r = spawnSync("strace", ["-f", "-qq", "-o", log, "-e", "trace=openat,open,fsync,fdatasync,rename,renameat,renameat2,close",
		process.execPath, "--input-type=module", "-e", script], { encoding: "utf8" });
	assert.equal(r.status, 0, r.stderr);
	assert.equal(readFileSync(f, "utf8"), "traced");
	const lines = readFileSync(log, "utf8").split("\n").map((l) => l.replace(/^\d+\s+/, ""));
	const at = (re, from = 0) => {
		for (let i = from; i < lines.length; i++) {
			const m = lines[i].match(re);
			if (m) return { i, m };
		}
		assert.fail(`no line matching ${re} after line ${from} in:\n${lines.join("\n")}`);
	};
	const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
	const create = at(new RegExp(`open(?:at)?\\(.*"(${esc(d)}/\\.traced\\.json\\.[^"]+\\.tmp)", ([^)]*)\\)\\s*= (\\d+)`));
	const [, temp, flags, fd] = create.m;
	assert.match(flags, /O_CREAT/);
	assert.match(flags, /O_EXCL/);
	assert.match(flags, /0600/);
	const sync = at(new RegExp(`^f(?:data)?sync\\(${fd}\\)\\s*= 0`), create.i);
	const rename = at(new RegExp(`rename(?:at2?)?\\(.*"${esc(temp)}".*"${esc(f)}".*\\)\\s*= 0`), sync.i);
	const dirOpen = at(new RegExp(`open(?:at)?\\(.*"${esc(d)}", [^)]*O_DIRECTORY[^)]*\\)\\s*= (\\d+)`), rename.i);
	at(new RegExp(`^f(?:data)?sync\\(${dirOpen.m[1]}\\)\\s*= 0`), dirOpen.i);
});

test("concurrent writers each use a temporary file of their own", async () => {
	const d = freshDir();
	const f = join(d, "same.json");
	const N = 40;
	const datas = Array.from({ length: N }, (_, i) => `writer ${i} `.repeat(2000));
	const calls = await withSyncSpy(() => Promise.all(datas.map((data) => writeFileDurable(f, data))));
	const files = calls.filter((c) => !c.isDirectory);
	assert.equal(files.length, N);
	assert.equal(new Set(files.map((c) => c.path)).size, N, "a temporary name per call");
	assert.deepEqual(files.map((c) => c.content.toString()).sort(), [...datas].sort(), "each synced its own data, whole");
	assert.equal(calls.filter((c) => c.isDirectory).length, N, "and each synced the directory");
	assert.ok(datas.includes(readFileSync(f, "utf8")), "the target holds one writer's data, whole");
	assert.deepEqual(readdirSync(d), ["same.json"]);

	// And side by side in one directory, different targets.
	await Promise.all(Array.from({ length: N }, (_, i) => writeFileDurable(join(d, `f${i}`), `content ${i}`)));
	for (let i = 0; i < N; i++) assert.equal(readFileSync(join(d, `f${i}`), "utf8"), `content ${i}`);
	assert.equal(readdirSync(d).length, N + 1);
});

/** A failed write: rejects with code, names the target, and leaves the directory as it was. */
async function assertFails(promise, code, path, syscall = "open") {
	await assert.rejects(promise, (err) => {
		assert.equal(err.code, code, err.stack);
		assert.equal(err.path, path);
		assert.ok(!String(err.message).includes(".tmp"), err.message);
		if (syscall) assert.ok(String(err.message).startsWith(`${code}: `) && err.message.endsWith(`, ${syscall} '${path}'`), err.message);
		return true;
	});
}

test("a directory that does not exist: ENOENT, as fs.writeFile says it, and nothing is made", async () => {
	const d = freshDir();
	const f = join(d, "missing", "x.json");
	await assertFails(writeFileDurable(f, "x"), "ENOENT", f);
	assert.deepEqual(readdirSync(d), []);
});

test("a read-only directory: EACCES naming the target, nothing left, the old file kept", async () => {
	const d = freshDir();
	const f = join(d, "kept.json");
	writeFileSync(f, "old");
	if (process.getuid?.() === 0) {
		// root ignores modes: try it as nobody, in a child (the directory is root's, 0755).
		chmodSync(work, 0o755);
		chmodSync(d, 0o755);
		const script = `import { writeFileDurable } from ${JSON.stringify(DURABLE)};
			try { await writeFileDurable(${JSON.stringify(f)}, "new"); console.log("wrote"); }
			catch (e) { console.log(JSON.stringify({ code: e.code, path: e.path, message: e.message })); }`;
		const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { uid: 65534, gid: 65534, encoding: "utf8" });
		assert.equal(r.status, 0, r.stderr);
		assert.deepEqual(JSON.parse(r.stdout), { code: "EACCES", path: f, message: `EACCES: permission denied, open '${f}'` });
	} else {
		chmodSync(d, 0o555);
		try {
			await assertFails(writeFileDurable(f, "new"), "EACCES", f);
		} finally {
			chmodSync(d, 0o755);
		}
	}
	assert.deepEqual(readdirSync(d), ["kept.json"]);
	assert.equal(readFileSync(f, "utf8"), "old");
});

test("a failing fsync of the data: rejects, removes the temporary file, keeps the old file", async () => {
	const d = freshDir();
	const f = join(d, "kept.json");
	writeFileSync(f, "old");
	const calls = await withSyncSpy(
		() => assertFails(writeFileDurable(f, "new"), "EIO", f, null),
		(call) => {
			if (!call.isDirectory) throw Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO", errno: -5, syscall: "fsync", path: f });
		},
	);
	assert.equal(calls.length, 1, "nothing is renamed or synced after the failure");
	assert.deepEqual(readdirSync(d), ["kept.json"]);
	assert.equal(readFileSync(f, "utf8"), "old");
});

test("a failing rename: rejects naming the target, the temporary file is removed", async () => {
	const d = freshDir();
	const f = join(d, "becomes-a-dir");
	// A directory appears at the target between the checks and the rename.
	await withSyncSpy(
		() => assertFails(writeFileDurable(f, "new"), "EISDIR", f, "rename"),
		(call) => {
			if (!call.isDirectory) {
				mkdirSync(f);
				writeFileSync(join(f, "inside"), "x");
			}
		},
	);
	assert.deepEqual(readdirSync(d), ["becomes-a-dir"]);
	assert.ok(lstatSync(f).isDirectory());
});

test("a directory at the target, or a trailing slash: EISDIR, as fs.writeFile says it", async () => {
	const d = freshDir();
	mkdirSync(join(d, "sub"));
	await assertFails(writeFileDurable(join(d, "sub"), "x"), "EISDIR", join(d, "sub"));
	await assertFails(writeFileDurable(join(d, "nodir") + "/", "x"), "EISDIR", join(d, "nodir") + "/");
	assert.deepEqual(readdirSync(d), ["sub"]);
	assert.deepEqual(readdirSync(join(d, "sub")), []);
});

test("bad arguments are a TypeError, before anything is touched", async () => {
	const d = freshDir();
	await assert.rejects(writeFileDurable(join(d, "x"), 5), TypeError);
	await assert.rejects(writeFileDurable(join(d, "x"), { toString: () => "x" }), TypeError);
	await assert.rejects(writeFileDurable("", "x"), TypeError);
	await assert.rejects(writeFileDurable(join(d, "x"), "x", { mode: "rw" }));
	assert.deepEqual(readdirSync(d), []);
});

test("mkdir: creates the parents and syncs the directory that holds each new one", async () => {
	const d = freshDir();
	mkdirSync(join(d, "a"));
	const f = join(d, "a", "b", "c", "x.json");
	const calls = await withSyncSpy(() => writeFileDurable(f, "deep", { mkdir: true }));
	assert.equal(readFileSync(f, "utf8"), "deep");
	const dirs = calls.filter((c) => c.isDirectory).map((c) => c.path);
	for (const want of [join(d, "a"), join(d, "a", "b"), join(d, "a", "b", "c")]) assert.ok(dirs.includes(want), `${want} synced: ${dirs}`);
	assert.ok(!dirs.includes(d), "nothing above the first new directory's parent");
	assert.equal(dirs.at(-1), join(d, "a", "b", "c"), "the file's directory last, after the rename");
	// Existing parents: no extra syncs.
	const again = await withSyncSpy(() => writeFileDurable(f, "again", { mkdir: true }));
	assert.deepEqual(again.filter((c) => c.isDirectory).map((c) => c.path), [join(d, "a", "b", "c")]);
	// Without the option a missing parent is ENOENT.
	await assertFails(writeFileDurable(join(d, "q", "x"), "x"), "ENOENT", join(d, "q", "x"));
});

test("a symbolic link is written through, as fs.writeFile would; a device is written in place", async () => {
	const d = freshDir();
	mkdirSync(join(d, "real"));
	writeFileSync(join(d, "real", "f"), "old");
	symlinkSync("real/f", join(d, "link"));
	symlinkSync("real", join(d, "dirlink"));
	await writeFileDurable(join(d, "link"), "through the link");
	assert.equal(readFileSync(join(d, "real", "f"), "utf8"), "through the link");
	assert.ok(lstatSync(join(d, "link")).isSymbolicLink(), "the link stays a link");
	await writeFileDurable(join(d, "dirlink", "g"), "through a directory link");
	assert.equal(readFileSync(join(d, "real", "g"), "utf8"), "through a directory link");
	assert.deepEqual(readdirSync(join(d, "real")).sort(), ["f", "g"]);
	await writeFileDurable("/dev/null", "discarded");
	assert.ok(statSync("/dev/null").isCharacterDevice());
});
