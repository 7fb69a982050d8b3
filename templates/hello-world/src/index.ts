import { defineApp } from "@berthos/sdk";
import { z } from "zod";

// {{name}}: every export here must also be listed under `exports:` in berth.yml.
export default defineApp((app) => {
	app.export({
		name: "ping",
		output: z.object({ message: z.string() }),
		handler: () => ({ message: "pong" }),
	});

	app.onAgentReady(async (ctx) => {
		await ctx.contextBus.register({ app: ctx.manifest.name });
	});
});
