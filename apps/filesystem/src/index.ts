// SPDX-License-Identifier: Apache-2.0
// Files in the workspace and in /context, plus probes that show what the sandbox
// refuses. Paths are joined to the root as given, on purpose: `../` is not filtered
// here, so a path outside the declared capabilities reaches the kernel, which denies it.
// Writes and truncates answer only once they are on the disk (fsync), so what an export
// acknowledged survives the VM being killed right after.
import { execFile } from "node:child_process";
import dgram from "node:dgram";
import { open, readdir, readFile } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { probes } from "./probes.js";
import { defineApp, writeFileDurable, type ContextBusClient, type SemanticFsClient } from "@berthos/sdk";
import { z } from "zod";

const workspace = () => process.env.BERTH_WORKSPACE_ROOT || "/workspace";
const contextMount = () => process.env.BERTH_CONTEXT_MOUNT || "/context";

let bus: ContextBusClient | undefined;
let semanticFs: SemanticFsClient | undefined;

function describe(err: unknown): string {
	const e = err as NodeJS.ErrnoException;
	if (e && typeof e.code === "string" && !String(e.message).includes(e.code)) return `${e.code}: ${e.message}`;
	return e instanceof Error ? e.message : String(err);
}

async function writeUnder(root: string, path: string, content: string): Promise<string> {
	const full = join(root, path);
	// 0o666 less the umask, the mode fs.writeFile gives a new file (an app that declares
	// filesystem:read:/context may read what this one writes there).
	await writeFileDurable(full, content, { mode: 0o666, mkdir: true });
	return full;
}

// fs.truncate (which opens the file "r+" too, so its errors are the same), then fsync.
async function truncateDurable(full: string, length: number): Promise<void> {
	const fh = await open(full, "r+");
	try {
		await fh.truncate(length);
		await fh.sync();
	} finally {
		await fh.close();
	}
}

function probeConnect(host: string, port: number): Promise<{ connected: boolean; error?: string }> {
	return new Promise((resolve) => {
		const sock = net.createConnection({ host, port });
		const done = (r: { connected: boolean; error?: string }) => {
			clearTimeout(timer);
			sock.destroy();
			resolve(r);
		};
		const timer = setTimeout(() => done({ connected: false, error: "timed out after 3000 ms" }), 3000);
		sock.once("connect", () => done({ connected: true }));
		sock.once("error", (err) => done({ connected: false, error: describe(err) }));
	});
}

function probeUdp(host: string, port: number): Promise<{ sent: boolean; error?: string }> {
	return new Promise((resolve) => {
		let sock: dgram.Socket;
		try {
			sock = dgram.createSocket("udp4");
		} catch (err) {
			return resolve({ sent: false, error: describe(err) });
		}
		sock.once("error", (err) => {
			sock.close();
			resolve({ sent: false, error: describe(err) });
		});
		sock.send(Buffer.from("berth-probe"), port, host, (err) => {
			sock.close();
			resolve(err ? { sent: false, error: describe(err) } : { sent: true });
		});
	});
}

// Node has no raw-socket or unshare API, so these two probes ask the image's python3.
function probeWithPython(script: string): Promise<Record<string, unknown>> {
	return new Promise((resolve) => {
		execFile("python3", ["-c", script], { timeout: 5000 }, (err, stdout) => {
			try {
				resolve(JSON.parse(stdout));
			} catch {
				resolve({ error: err ? describe(err) : "the probe printed no answer" });
			}
		});
	});
}

export default defineApp((app) => {
	app.export({
		name: "write_file",
		input: z.object({ path: z.string(), content: z.string() }),
		handler: async ({ path, content }) => {
			await writeUnder(workspace(), path, content);
			await bus?.publish("fs.file_created", { path, createdBy: "filesystem" });
		},
	});

	app.export({
		name: "read_file",
		input: z.object({ path: z.string() }),
		output: z.object({ content: z.string() }),
		handler: async ({ path }) => ({ content: await readFile(join(workspace(), path), "utf8") }),
	});

	app.export({
		name: "list_files",
		output: z.object({ files: z.array(z.string()) }),
		handler: async () => {
			try {
				return { files: (await readdir(workspace())).sort() };
			} catch (err) {
				if ((err as NodeJS.ErrnoException).code === "ENOENT") return { files: [] };
				throw err;
			}
		},
	});

	app.export({
		name: "truncate_file",
		input: z.object({ path: z.string(), length: z.number().int().nonnegative().optional() }),
		handler: async ({ path, length }) => {
			await truncateDurable(join(workspace(), path), length ?? 0);
		},
	});

	app.export({
		name: "probe_network_connect",
		input: z.object({ host: z.string(), port: z.number().int() }),
		output: z.object({ connected: z.boolean(), error: z.string().optional() }),
		handler: ({ host, port }) => probeConnect(host, port),
	});

	app.export({
		name: "probe_network_udp",
		input: z.object({ host: z.string(), port: z.number().int() }),
		output: z.object({ sent: z.boolean(), error: z.string().optional() }),
		handler: ({ host, port }) => probeUdp(host, port),
	});

	app.export({
		name: "probe_raw_socket",
		input: z.object({ host: z.string() }),
		output: z.object({ opened: z.boolean(), error: z.string().optional() }),
		handler: async ({ host }) => {
			const r = await probeWithPython(probes.rawSocketProbe(host));
			return { opened: r.opened === true, ...(typeof r.error === "string" ? { error: r.error } : {}) };
		},
	});

	app.export({
		name: "probe_user_namespace",
		output: z.object({ created: z.boolean(), regainedCaps: z.boolean(), error: z.string().optional() }),
		handler: async () => {
			const r = await probeWithPython(probes.userNamespaceProbe());
			return {
				created: r.created === true,
				regainedCaps: r.regainedCaps === true,
				...(typeof r.error === "string" ? { error: r.error } : {}),
			};
		},
	});

	app.export({
		name: "write_context_file",
		input: z.object({ path: z.string(), content: z.string() }),
		handler: async ({ path, content }) => {
			await writeUnder(contextMount(), path, content);
		},
	});

	app.export({
		name: "read_context_file",
		input: z.object({ path: z.string() }),
		output: z.object({ content: z.string() }),
		handler: async ({ path }) => ({ content: await readFile(join(contextMount(), path), "utf8") }),
	});

	app.export({
		name: "tag_context_file",
		input: z.object({ path: z.string(), task: z.string().optional(), relatedApps: z.array(z.string()).optional() }),
		handler: async ({ path, task, relatedApps }) => {
			if (!semanticFs) throw new Error("semantic-fs is not connected yet");
			await semanticFs.tag(path, { task, relatedApps });
		},
	});

	app.export({
		name: "query_context",
		input: z.object({ text: z.string(), limit: z.number().int().positive().optional() }),
		output: z.object({ results: z.array(z.record(z.string(), z.unknown())) }),
		handler: async ({ text, limit }) => {
			if (!semanticFs) throw new Error("semantic-fs is not connected yet");
			return { results: (await semanticFs.query(text, limit)) as unknown as Record<string, unknown>[] };
		},
	});

	app.export({
		name: "publish_context_event",
		input: z.object({ topic: z.string().min(1), payload: z.unknown().optional() }),
		handler: async ({ topic, payload }) => {
			if (!bus) throw new Error("the context bus is not connected yet");
			await bus.publish(topic, payload);
		},
	});

	app.onAgentReady(async (ctx) => {
		bus = ctx.contextBus;
		semanticFs = ctx.semanticFs;
		await bus.register({ app: ctx.manifest.name });
		try {
			await semanticFs.register({ app: ctx.manifest.name });
		} catch (err) {
			console.error(`[filesystem] semantic-fs register failed: ${describe(err)}`);
		}
	});
});
