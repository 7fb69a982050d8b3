// SPDX-License-Identifier: Apache-2.0
// Opens files of the workspace: on request (open_file), and on its own whenever another
// app announces one on the context bus (fs.file_created), which it logs. It may only read
// /workspace: what it opens, the kernel lets it read.
import { readFile } from "node:fs/promises";
import { isAbsolute, join, normalize } from "node:path";
import { defineApp } from "@berthos/sdk";
import { z } from "zod";

function workspacePath(path: string): string {
	const root = process.env.BERTH_WORKSPACE_ROOT || "/workspace";
	return isAbsolute(path) ? normalize(path) : join(root, path);
}

const FileCreated = z.object({ path: z.string(), createdBy: z.string().optional() });

export default defineApp((app) => {
	app.export({
		name: "open_file",
		input: z.object({ path: z.string() }),
		output: z.object({ content: z.string() }),
		handler: async ({ path }) => ({ content: await readFile(workspacePath(path), "utf8") }),
	});

	app.onAgentReady(async (ctx) => {
		await ctx.contextBus.register({ app: ctx.manifest.name });
		ctx.contextBus.subscribe("fs.file_created", async (payload) => {
			const event = FileCreated.safeParse(payload);
			if (!event.success) return;
			const { path, createdBy } = event.data;
			// The event's words are another app's: quoted, never trusted as a path outside
			// what this app may read anyway.
			try {
				const content = await readFile(workspacePath(path), "utf8");
				console.error(`[code-editor] reactively opened ${JSON.stringify(path)} (${content.length} characters, announced by ${JSON.stringify(createdBy ?? "?")})`);
			} catch (err) {
				console.error(`[code-editor] could not open ${JSON.stringify(path)}: ${(err as Error).message}`);
			}
		});
	});
});
