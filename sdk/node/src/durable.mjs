// SPDX-License-Identifier: Apache-2.0
// writeFileDurable(): a write that is on the disk when its promise resolves. The data goes
// to a new temporary file beside the target, which is fsynced and renamed over the target,
// and then the directory is fsynced, so after a crash the target is either its old self or
// the whole new content, never a part of it. A plain fs.writeFile() stays in the guest's
// page cache until the kernel writes it back (ext4 commits every 5 s), so a VM killed
// before then loses it, acknowledged or not.
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, realpath, rename, stat, unlink } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import { basename, dirname, join, resolve } from "node:path";

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY;
let serial = 0;

/** A name of its own in the target's directory, for one call. */
function tempPath(target) {
	// At most 32 characters of the name (128 bytes of UTF-8), so the result fits NAME_MAX.
	const name = Array.from(basename(target)).slice(0, 32).join("");
	return join(dirname(target), `.${name}.${process.pid}.${++serial}.${randomBytes(6).toString("hex")}.tmp`);
}

/** fs.writeFile's EISDIR, in Node's own form. */
function isDirectoryError(path) {
	const err = new Error(`EISDIR: illegal operation on a directory, open '${path}'`);
	return Object.assign(err, { errno: -osConstants.errno.EISDIR, code: "EISDIR", syscall: "open", path });
}

/** An error about the temporary file, told about the caller's path (the temp name is ours). */
function retarget(err, temp, path) {
	if (err && typeof err === "object" && err.path === temp) {
		err.message = String(err.message).replace(`'${temp}' -> '${err.dest}'`, `'${path}'`).replace(`'${temp}'`, `'${path}'`);
		err.path = path;
		delete err.dest;
	}
	return err;
}

/** fsync a directory: what makes a new, renamed or removed entry in it durable. */
async function syncDirectory(dir) {
	const fh = await open(dir, DIR_FLAGS);
	try {
		await fh.sync();
	} finally {
		await fh.close();
	}
}

/** mkdir -p, and the entries of the directories it made durable (the last one is left to the caller). */
async function makeParents(dir) {
	const first = await mkdir(dir, { recursive: true });
	if (first === undefined) return;
	const top = dirname(resolve(first));
	for (let d = dirname(resolve(dir)); ; d = dirname(d)) {
		await syncDirectory(d);
		if (d === top || d === dirname(d)) break;
	}
}

/** A device or a FIFO cannot be replaced by a rename: it is written in place, as fs.writeFile would. */
async function writeInPlace(path, data) {
	const fh = await open(path, "w");
	try {
		await fh.writeFile(data);
		try {
			await fh.sync();
		} catch (err) {
			if (err?.code !== "EINVAL") throw err; // a device without a cache (/dev/null)
		}
	} finally {
		await fh.close();
	}
}

/**
 * Write `data` (a string, as UTF-8, or bytes) to `path` so that it is on the disk when the
 * promise resolves: a temporary file in the same directory (created with O_EXCL, mode
 * `options.mode`, default 0o600, less the umask), written, fsynced, renamed over `path`,
 * and the directory fsynced. On failure the temporary file is removed and `path` is left
 * as it was. A symbolic link at `path` is written through, like fs.writeFile.
 * `options.mkdir`: create missing parent directories first, durably.
 */
export async function writeFileDurable(path, data, options = {}) {
	const { mode = 0o600, mkdir: makeDirs = false } = options ?? {};
	if (typeof path !== "string" || path === "") throw new TypeError("writeFileDurable: path must be a non-empty string");
	if (typeof data !== "string" && !ArrayBuffer.isView(data))
		throw new TypeError("writeFileDurable: data must be a string, a Buffer, a TypedArray or a DataView");
	if (makeDirs) await makeParents(dirname(path));
	if (path.endsWith("/")) throw isDirectoryError(path);

	// Write through a symbolic link, as fs.writeFile does; a missing target is created.
	let target = path;
	try {
		target = await realpath(path);
	} catch {
		target = path;
	}
	let st = null;
	try {
		st = await stat(target);
	} catch {
		st = null;
	}
	if (st?.isDirectory()) throw isDirectoryError(path);
	if (st && !st.isFile()) return writeInPlace(path, data);

	let temp, fh;
	for (let attempt = 0; ; attempt++) {
		temp = tempPath(target);
		try {
			fh = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
			break;
		} catch (err) {
			if (err?.code === "EEXIST" && attempt < 8) continue;
			throw retarget(err, temp, path);
		}
	}
	let renamed = false;
	try {
		try {
			await fh.writeFile(data);
			await fh.sync();
		} finally {
			const f = fh;
			fh = undefined;
			await f.close();
		}
		await rename(temp, target);
		renamed = true;
	} catch (err) {
		if (fh) await fh.close().catch(() => {});
		if (!renamed) await unlink(temp).catch(() => {});
		throw retarget(err, temp, path);
	}
	await syncDirectory(dirname(target));
}
