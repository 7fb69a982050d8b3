// SPDX-License-Identifier: Apache-2.0
// apps/terminal through its runtime on this host, against the host's real tmux and the
// built terminal-view (no VM: the same exports, without the guest's confinement, which
// test/e2e/terminal.sh checks on a real VM). SPEC §9.3: run_command's sentinel, trimming
// and exact timeout error, send_keys and read_screen, the lazy start, the web view's login.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { bundleApp, connectRpc, ROOT, startRuntime, tempDir } from "./helpers.mjs";

const BUILD = process.env.BERTH_BUILD_DIR || join(ROOT, "build");
const VIEW = join(BUILD, "src", "terminal-view", "terminal-view");
const haveTmux = (() => {
	try {
		execFileSync("tmux", ["-V"], { stdio: "ignore" });
		return true;
	} catch {
		return false;
	}
})();
const skip = !haveTmux ? "tmux is not installed (scripts/setup.sh installs it)" : !existsSync(VIEW) ? `no ${VIEW}` : false;

function freePort() {
	return new Promise((res) => {
		const s = net.createServer().listen(0, "127.0.0.1", () => {
			const { port } = s.address();
			s.close(() => res(port));
		});
	});
}

/** The page's files as the root image lays them out (vm/rootfs/build.sh). */
function assets(dir) {
	mkdirSync(dir);
	for (const f of readdirSync(join(ROOT, "src", "terminal-view", "page"))) copyFileSync(join(ROOT, "src", "terminal-view", "page", f), join(dir, f));
	copyFileSync(join(ROOT, "node_modules", "@xterm", "xterm", "lib", "xterm.js"), join(dir, "xterm.js"));
	copyFileSync(join(ROOT, "node_modules", "@xterm", "xterm", "css", "xterm.css"), join(dir, "xterm.css"));
	copyFileSync(join(ROOT, "node_modules", "@xterm", "addon-fit", "lib", "addon-fit.js"), join(dir, "addon-fit.js"));
	return dir;
}

/** A minimal websocket client: the handshake, then unmasked server frames as they come. */
function openWebSocket(port, headers) {
	return new Promise((resolve, reject) => {
		const sock = net.createConnection({ host: "127.0.0.1", port });
		const key = randomBytes(16).toString("base64");
		let buf = Buffer.alloc(0);
		let opened = false;
		const client = { status: 0, output: Buffer.alloc(0), sock };
		client.send = (payload) => {
			const body = Buffer.from(payload);
			const mask = randomBytes(4);
			const head = body.length < 126 ? Buffer.from([0x82, 0x80 | body.length]) : Buffer.from([0x82, 0xfe, body.length >> 8, body.length & 0xff]);
			const masked = Buffer.from(body.map((b, i) => b ^ mask[i % 4]));
			sock.write(Buffer.concat([head, mask, masked]));
		};
		client.until = (text, ms = 10000) =>
			new Promise((res, rej) => {
				const t = setTimeout(() => rej(new Error(`"${text}" not seen; got ${JSON.stringify(client.output.toString().slice(-300))}`)), ms);
				const check = () => {
					if (client.output.includes(text)) {
						clearTimeout(t);
						sock.off("data", check);
						res();
					}
				};
				sock.on("data", check);
				setImmediate(check);
			});
		sock.on("connect", () => {
			const lines = ["GET /ws HTTP/1.1", `Host: 127.0.0.1:${port}`, "Upgrade: websocket", "Connection: Upgrade", `Sec-WebSocket-Key: ${key}`, "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: berth-terminal"];
			for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
			sock.write(lines.join("\r\n") + "\r\n\r\n");
		});
		sock.on("error", reject);
		sock.on("data", (d) => {
			buf = Buffer.concat([buf, d]);
			if (!opened) {
				const end = buf.indexOf("\r\n\r\n");
				if (end < 0) return;
				client.status = Number(buf.subarray(0, end).toString().split(" ")[1]);
				buf = buf.subarray(end + 4);
				opened = true;
				resolve(client);
			}
			while (buf.length >= 2) {
				let n = buf[1] & 0x7f;
				let off = 2;
				if (n === 126) {
					if (buf.length < 4) return;
					n = buf.readUInt16BE(2);
					off = 4;
				} else if (n === 127) {
					if (buf.length < 10) return;
					n = Number(buf.readBigUInt64BE(2));
					off = 10;
				}
				if (buf.length < off + n) return;
				if ((buf[0] & 0x0f) === 2) client.output = Buffer.concat([client.output, buf.subarray(off, off + n)]);
				buf = buf.subarray(off + n);
			}
		});
	});
}

/** The pids of @root's descendants. */
function descendants(root) {
	const children = new Map();
	for (const d of readdirSync("/proc")) {
		if (!/^\d+$/.test(d)) continue;
		try {
			const ppid = Number(readFileSync(`/proc/${d}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")[1]);
			if (!children.has(ppid)) children.set(ppid, []);
			children.get(ppid).push(Number(d));
		} catch {}
	}
	const out = [];
	const walk = (p) => {
		for (const c of children.get(p) ?? []) {
			out.push(c);
			walk(c);
		}
	};
	walk(root);
	return out;
}

test("terminal: run_command, send_keys, read_screen, the timeout, and the web view", { skip, timeout: 120000 }, async () => {
	const work = tempDir("berth-terminal-test-");
	const share = join(work, "share");
	await bundleApp(join(ROOT, "apps", "terminal"), share);
	const ws = join(work, "workspace");
	const tmp = join(work, "tmp");
	mkdirSync(ws);
	mkdirSync(tmp);
	const port = await freePort();
	const secret = randomBytes(24).toString("base64url");
	const credential = `berth:${secret}`;
	const sock = join(work, "rpc.sock");
	const rt = await startRuntime(share, {
		BERTH_RPC_SOCKET: sock,
		BERTH_WORKSPACE_ROOT: ws,
		TMPDIR: tmp,
		HOME: tmp,
		LANG: "C.UTF-8",
		BERTH_TERMINAL_CREDENTIAL: credential,
		BERTH_TERMINAL_VIEW: VIEW,
		BERTH_TERMINAL_VIEW_ASSETS: assets(join(work, "assets")),
		BERTH_TERMINAL_VIEW_PORT: String(port),
	}).ready;
	try {
		assert.ok(rt.stderr.includes('[berth:runtime] "terminal" ready'), rt.stderr);
		assert.ok(!existsSync(join(tmp, "tmux.sock")), "tmux starts on the first call, not before");
		const c = await connectRpc(sock);

		const hi = await c.call("run_command", { command: "echo hi" }, "hi");
		assert.deepEqual(hi, { id: "hi", result: { output: "hi" } }, 'run_command echo hi gives {"output":"hi"}');
		assert.ok(existsSync(join(tmp, "tmux.sock")), "the first call started tmux");
		assert.equal((await c.call("run_command", { command: "pwd" })).result.output, ws, "the shell starts in the workspace");
		assert.equal((await c.call("run_command", { command: "printf 'a\\n\\nb  \\n'; false" })).result.output, "a\n\nb", "lines kept, trailing blanks trimmed");
		assert.equal((await c.call("run_command", { command: "true" })).result.output, "", "no output");

		assert.equal((await c.call("send_keys", { keys: "echo Space typed-by-keys Enter" })).result, null);
		let screen = "";
		for (let i = 0; i < 25 && !/^typed-by-keys$/m.test(screen); i++) {
			await new Promise((r) => setTimeout(r, 200));
			screen = (await c.call("read_screen")).result.text;
		}
		assert.match(screen, /echo typed-by-keys/, "read_screen shows the keys");
		assert.match(screen, /^typed-by-keys$/m, "and what they ran");

		// The web view started with the first call: the login on every request.
		const base = `http://127.0.0.1:${port}/`;
		assert.equal((await fetch(base)).status, 401, "no login: 401");
		const wrong = await fetch(base, { headers: { Authorization: `Basic ${Buffer.from("berth:wrong-password-0123456").toString("base64")}` } });
		assert.equal(wrong.status, 401, "a wrong login: 401");
		assert.match(wrong.headers.get("www-authenticate") ?? "", /^Basic realm=/);
		const auth = { Authorization: `Basic ${Buffer.from(credential).toString("base64")}` };
		const page = await fetch(base, { headers: auth });
		assert.equal(page.status, 200);
		assert.match(await page.text(), /<script src="xterm.js">/);
		assert.equal((await fetch(`${base}xterm.js`, { headers: auth })).status, 200);
		assert.equal((await fetch(`${base}../../etc/passwd`, { headers: auth })).status, 404);
		assert.equal((await openWebSocket(port, {})).status, 401, "a websocket without the login: 401");
		const other = await openWebSocket(port, { ...auth, Origin: "http://evil.example" });
		assert.equal(other.status, 403, "a websocket from another site's page: 403");
		other.sock.destroy();
		const tab = await openWebSocket(port, { ...auth, Origin: `http://127.0.0.1:${port}` });
		assert.equal(tab.status, 101, "a websocket with the login opens");
		tab.send("1120,40");
		const run = c.call("run_command", { command: "echo seen-by-$((6*7))" });
		await tab.until("seen-by-42");
		assert.equal((await run).result.output, "seen-by-42");
		// And a person's keys reach the same shell.
		tab.send("0echo typed-in-browser-$((2+3))\r");
		await tab.until("typed-in-browser-5");
		tab.sock.destroy();

		// The login is in no process's arguments or environment (the app's own took it out).
		for (const pid of [rt.child.pid, ...descendants(rt.child.pid)]) {
			for (const f of ["cmdline", "environ"]) {
				let text = "";
				try {
					text = readFileSync(`/proc/${pid}/${f}`, "latin1");
				} catch {
					continue; // terminal-view is not dumpable: its environ is root's to read
				}
				assert.ok(!text.includes(secret) || (f === "environ" && pid === rt.child.pid), `the login is not in /proc/${pid}/${f}`);
			}
		}

		// A command that outlives the timeout: the exact error, after 15 s.
		const t0 = Date.now();
		const id = "timeout";
		c.send({ id, export: "run_command", input: { command: "sleep 30" } });
		const late = (await c.answer(id, 25000)).msg;
		assert.equal(late.error, 'command timed out after 15000ms: "sleep 30"');
		assert.ok(Date.now() - t0 >= 15000, "not before 15 s");
		await c.call("send_keys", { keys: "C-c" });
		assert.equal((await c.call("run_command", { command: "echo after" })).result.output, "after", "the shell goes on");
		c.close();
	} finally {
		await rt.stop();
		try {
			execFileSync("tmux", ["-S", join(tmp, "tmux.sock"), "kill-server"], { stdio: "ignore" });
		} catch {}
	}
});
