// SPDX-License-Identifier: Apache-2.0
// bench/context-bus.py's app-level path: two Node SDK clients on the bus, one publishing
// a JSON payload and the other's handler receiving it, one event in flight at a time.
// Prints one JSON line {"ms":[...]}.  Usage: node context-bus-sdk.mjs SOCKET N BYTES
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const [socketPath, n, bytes] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const sdk = join(fileURLToPath(import.meta.url), "..", "..", "sdk", "node", "src", "context-bus.mjs");
const bus = await import(sdk);
// The SDK's sockets never keep a process alive on their own (an app's RPC server does).
const keepAlive = setInterval(() => {}, 1000);
const pub = await bus.connectContextBus({ socketPath });
const sub = await bus.connectContextBus({ socketPath });
const text = "x".repeat(Math.max(0, bytes - 20));
let waiting = null;
sub.subscribe("bench", (p) => waiting && waiting(p));
await new Promise((r) => setTimeout(r, 200));
const ms = [];
for (let i = 0; i < n + 20; i++) {
	const got = new Promise((r) => (waiting = r));
	const t0 = process.hrtime.bigint();
	await pub.publish("bench", { i, text });
	await got;
	if (i >= 20) ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
process.stdout.write(JSON.stringify({ ms }) + "\n");
pub.close();
sub.close();
clearInterval(keepAlive);
