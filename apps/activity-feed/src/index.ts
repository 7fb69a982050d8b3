// SPDX-License-Identifier: Apache-2.0
// Keeps the last 50 events the other apps publish on the context bus about files and
// notes, newest first, in memory only. It declares no capability at all.
import { defineApp } from "@berthos/sdk";
import { z } from "zod";

const TOPICS = ["fs.file_created", "notes.added", "notes.completed"];
const KEEP = 50;

interface Activity {
	topic: string;
	payload: unknown;
	receivedAt: string;
}

const recent: Activity[] = [];

export default defineApp((app) => {
	app.export({
		name: "get_recent_activity",
		output: z.object({ events: z.array(z.object({ topic: z.string(), payload: z.unknown(), receivedAt: z.string() })) }),
		handler: async () => ({ events: [...recent] }),
	});

	app.onAgentReady(async (ctx) => {
		await ctx.contextBus.register({ app: ctx.manifest.name });
		for (const topic of TOPICS)
			ctx.contextBus.subscribe(topic, (payload) => {
				recent.unshift({ topic, payload, receivedAt: new Date().toISOString() });
				recent.length = Math.min(recent.length, KEEP);
			});
	});
});
