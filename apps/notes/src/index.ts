// SPDX-License-Identifier: Apache-2.0
// Notes kept as a pretty-printed JSON array in $BERTH_WORKSPACE_ROOT/notes.json
// (/workspace/notes.json in a sandbox). Publishes notes.added and notes.completed.
// add_note and complete_note answer only once the file is on the disk (writeFileDurable),
// so an acknowledged note survives the VM being killed right after. The file is read with
// one synchronous call (node:fs/promises' readFile is four trips through libuv's thread
// pool, about 2 ms more under emulation), and only when it changed: reading and checking
// it was about 2 ms of list_notes' 4 under emulation (docs/benchmarks.md).
import { randomUUID } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { defineApp, writeFileDurable, type ContextBusClient } from "@berthos/sdk";
import { z } from "zod";

interface Note {
	id: string;
	text: string;
	completed: boolean;
}

const NoteSchema = z.object({ id: z.string(), text: z.string(), completed: z.boolean() });

function workspaceRoot(): string {
	return process.env.BERTH_WORKSPACE_ROOT || "/workspace";
}

function notesFile(): string {
	return join(workspaceRoot(), "notes.json");
}

function loadNotes(): Note[] {
	try {
		const parsed = JSON.parse(readFileSync(notesFile(), "utf8"));
		return Array.isArray(parsed) ? parsed.filter((n) => NoteSchema.safeParse(n).success) : [];
	} catch {
		return [];
	}
}

// The notes as last read, with the file's identity then (inode, size, times): a list_notes
// while notes.json is unchanged costs a stat, not a read and a check of every note. A file
// changed in the last 100 ms is read every time: the kernel's file times are coarse (a few
// ms), and an edit of the same length in the same tick would keep them. Callers get
// copies, which they may change.
let kept: { notes: Note[]; stamp: string } | undefined;

function stampOf(): string | undefined {
	try {
		const s = statSync(notesFile(), { bigint: true });
		if (BigInt(Date.now()) * 1_000_000n - s.ctimeNs < 100_000_000n) return undefined;
		return `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
	} catch {
		return "none";
	}
}

function readNotes(): Note[] {
	const stamp = stampOf();
	if (stamp === undefined || kept?.stamp !== stamp) kept = { notes: loadNotes(), stamp: stamp ?? "" };
	return kept.notes.map((n) => ({ ...n }));
}

async function writeNotes(notes: Note[]): Promise<void> {
	// 0o666 less the umask: the mode notes.json has always had (fs.writeFile's).
	await writeFileDurable(notesFile(), JSON.stringify(notes, null, 2) + "\n", { mode: 0o666, mkdir: true });
}

// Requests run concurrently; changes to the file go one at a time.
let queue: Promise<unknown> = Promise.resolve();
function serialised<T>(fn: () => Promise<T>): Promise<T> {
	const next = queue.then(fn, fn);
	queue = next.catch(() => undefined);
	return next;
}

let bus: ContextBusClient | undefined;

export default defineApp((app) => {
	app.export({
		name: "add_note",
		input: z.object({ text: z.string() }),
		output: z.object({ id: z.string() }),
		handler: ({ text }) =>
			serialised(async () => {
				const note: Note = { id: randomUUID(), text, completed: false };
				const notes = readNotes();
				notes.push(note);
				await writeNotes(notes);
				await bus?.publish("notes.added", { id: note.id, text: note.text });
				return { id: note.id };
			}),
	});

	app.export({
		name: "list_notes",
		output: z.object({ notes: z.array(NoteSchema) }),
		handler: async () => ({ notes: readNotes() }),
	});

	app.export({
		name: "complete_note",
		input: z.object({ id: z.string() }),
		output: z.object({ completed: z.boolean() }),
		handler: ({ id }) =>
			serialised(async () => {
				const notes = readNotes();
				const note = notes.find((n) => n.id === id);
				if (!note) return { completed: false };
				note.completed = true;
				await writeNotes(notes);
				await bus?.publish("notes.completed", { id });
				return { completed: true };
			}),
	});

	app.onAgentReady(async (ctx) => {
		bus = ctx.contextBus;
		await bus.register({ app: ctx.manifest.name });
	});
});
