// SPDX-License-Identifier: Apache-2.0
// The baseline of bench/egress.py: the same client work as the outbound fixture's
// bench_connect and bench_download exports, straight to a server, no proxy.
//   node bench/egress-direct.mjs connect HOST PORT COUNT
//   node bench/egress-direct.mjs download HOST PORT BYTES
// Prints one JSON line: {"ms":[...]} or {"ms":N,"received":N}.
import net from "node:net";

const [mode, host, portText, arg] = process.argv.slice(2);
const port = Number(portText);

function connectOnce() {
	return new Promise((resolve, reject) => {
		const t0 = performance.now();
		const s = net.connect({ host, port });
		s.on("connect", () => {
			const ms = performance.now() - t0;
			s.destroy();
			resolve(ms);
		});
		s.on("error", reject);
	});
}

if (mode === "connect") {
	const ms = [];
	for (let i = 0; i < Number(arg); i++) ms.push(await connectOnce());
	console.log(JSON.stringify({ ms }));
} else if (mode === "download") {
	const s = net.connect({ host, port });
	await new Promise((resolve) => s.on("connect", resolve));
	let got = 0;
	const t0 = performance.now();
	s.on("data", (d) => (got += d.length));
	s.on("end", () => console.log(JSON.stringify({ ms: performance.now() - t0, received: got })));
	s.write(`GET /bytes/${arg} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
} else {
	console.error("usage: egress-direct.mjs connect|download HOST PORT COUNT|BYTES");
	process.exit(2);
}
