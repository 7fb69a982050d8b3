// SPDX-License-Identifier: Apache-2.0
// One shared shell: a tmux session an agent drives through the exports, and a person
// watches and types into from a browser through the web view (docs/terminal.md).
// Both start on the first call: tmux's session "berth-terminal" (500 x 50, in the
// workspace), then terminal-view on 127.0.0.1:7681, which attaches tmux for each browser
// tab. Everything runs as this app, under its Landlock rules and seccomp filter.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineApp } from "@berthos/sdk";
import { z } from "zod";

const SESSION = "berth-terminal";
const TIMEOUT_MS = 15000;
const POLL_MS = 200;
const CAPTURE_MAX = 16 * 1024 * 1024; // of what one capture-pane prints

// The VM's paths and port; the tests of this app outside a VM point them elsewhere.
const VIEW = process.env.BERTH_TERMINAL_VIEW || "/usr/libexec/berth/terminal-view";
const VIEW_ASSETS = process.env.BERTH_TERMINAL_VIEW_ASSETS;
const VIEW_PORT = process.env.BERTH_TERMINAL_VIEW_PORT || "7681";

const workspace = process.env.BERTH_WORKSPACE_ROOT || "/workspace";
const socket = join(process.env.TMPDIR || tmpdir(), "tmux.sock");

// The web view's login comes from the host, on the secrets disk, for this app alone. It is
// kept here and taken out of the environment, so that neither tmux nor the shell inherits it.
function takeCredential(): string {
	const given = process.env.BERTH_TERMINAL_CREDENTIAL;
	delete process.env.BERTH_TERMINAL_CREDENTIAL;
	if (given && /^berth:[A-Za-z0-9_-]{16,122}$/.test(given)) return given;
	process.stderr.write(
		"[terminal] WARNING: no BERTH_TERMINAL_CREDENTIAL was provided (berth dev provides one), so the web view's login was made up here and nobody outside this VM knows it\n",
	);
	return `berth:${randomBytes(24).toString("base64url")}`;
}
const credential = takeCredential();

// What tmux, and so the shell, run with: this app's environment, with a shell to run.
function shellEnv(): NodeJS.ProcessEnv {
	return { ...process.env, SHELL: "/bin/bash" };
}

function tmux(args: string[]): Promise<string> {
	return new Promise((resolve, reject) => {
		execFile("tmux", ["-S", socket, ...args], { env: shellEnv(), maxBuffer: CAPTURE_MAX }, (err, stdout, stderr) => {
			if (err) reject(new Error(`tmux ${args[0]} failed: ${String(stderr).trim() || err.message}`));
			else resolve(stdout);
		});
	});
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let view: ChildProcess | undefined;

function startView(): void {
	if (view) return;
	const args = ["--port", VIEW_PORT, ...(VIEW_ASSETS ? ["--assets", VIEW_ASSETS] : []), "--"];
	args.push("tmux", "-S", socket, "attach-session", "-t", SESSION);
	const child = spawn(VIEW, args, { env: shellEnv(), stdio: ["pipe", "ignore", "pipe"] });
	view = child;
	child.on("error", (err) => {
		process.stderr.write(`[terminal] the web view did not start: ${err.message}\n`);
		if (view === child) view = undefined;
	});
	child.on("exit", (code, signal) => {
		process.stderr.write(`[terminal] the web view exited (${signal ?? `status ${code}`}); the next call starts it again\n`);
		if (view === child) view = undefined;
	});
	child.stderr?.on("data", (d) => process.stderr.write(d));
	// The login goes on its standard input, never on a command line.
	child.stdin?.on("error", () => undefined);
	child.stdin?.end(`${credential}\n`);
}

// tmux's session and the web view, started on the first call and again after either went.
let starting: Promise<void> | undefined;
async function start(): Promise<void> {
	const alive = await tmux(["has-session", "-t", SESSION]).then(
		() => true,
		() => false,
	);
	if (!alive) await tmux(["new-session", "-d", "-s", SESSION, "-x", "500", "-y", "50", "-c", workspace]);
	startView();
}
function ensureStarted(): Promise<void> {
	starting ??= start().finally(() => (starting = undefined));
	return starting;
}

// Calls type into one shell: one at a time, in order.
let queue: Promise<unknown> = Promise.resolve();
function serialised<T>(fn: () => Promise<T>): Promise<T> {
	const next = queue.then(fn, fn);
	queue = next.catch(() => undefined);
	return next;
}

// Type the command and an echo of a fresh sentinel, then read the whole pane (wrapped lines
// joined) until the sentinel's echo is there; what lies between is the command's output.
async function runCommand(command: string): Promise<{ output: string }> {
	await ensureStarted();
	const sentinel = `bd${randomBytes(5).toString("hex")}`;
	const typed = `echo ${sentinel}`;
	await tmux(["send-keys", "-t", SESSION, "-l", `${command}; ${typed}`, ";", "send-keys", "-t", SESSION, "Enter"]);
	const deadline = Date.now() + TIMEOUT_MS;
	while (Date.now() < deadline) {
		await sleep(POLL_MS);
		const pane = await tmux(["capture-pane", "-p", "-J", "-t", SESSION, "-S", "-"]);
		const at = pane.lastIndexOf(typed);
		if (at < 0) continue;
		const end = pane.indexOf(sentinel, at + typed.length);
		if (end < 0) continue;
		return { output: pane.slice(at + typed.length, end).replace(/^\n/, "").trimEnd() };
	}
	throw new Error(`command timed out after ${TIMEOUT_MS}ms: ${JSON.stringify(command)}`);
}

export default defineApp((app) => {
	app.export({
		name: "run_command",
		input: z.object({ command: z.string() }),
		output: z.object({ output: z.string() }),
		handler: ({ command }) => serialised(() => runCommand(command)),
	});
	app.export({
		name: "send_keys",
		input: z.object({ keys: z.string() }),
		handler: ({ keys }) =>
			serialised(async () => {
				await ensureStarted();
				const tokens = keys.split(/\s+/).filter(Boolean);
				if (tokens.length > 0) await tmux(["send-keys", "-t", SESSION, ...tokens]);
			}),
	});
	app.export({
		name: "read_screen",
		output: z.object({ text: z.string() }),
		handler: () =>
			serialised(async () => {
				await ensureStarted();
				return { text: await tmux(["capture-pane", "-p", "-t", SESSION]) };
			}),
	});
});
