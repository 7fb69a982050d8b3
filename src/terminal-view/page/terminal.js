// SPDX-License-Identifier: Apache-2.0
// The terminal's web view: xterm.js on a websocket to the same server, which carries the
// shared tmux session (docs/terminal.md). Keys go as "0" + bytes, a new size as
// "1" + cols + "," + rows; the server sends the terminal's output as binary messages.
"use strict";
(function () {
	const status = document.getElementById("status");
	const term = new Terminal({ cursorBlink: true, scrollback: 5000, convertEol: false });
	const fit = new FitAddon.FitAddon();
	term.loadAddon(fit);
	term.open(document.getElementById("terminal"));
	fit.fit();

	const encoder = new TextEncoder();
	const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
	const ws = new WebSocket(url, ["berth-terminal"]);
	ws.binaryType = "arraybuffer";

	function send(kind, bytes) {
		if (ws.readyState !== WebSocket.OPEN) return;
		const msg = new Uint8Array(bytes.length + 1);
		msg[0] = kind.charCodeAt(0);
		msg.set(bytes, 1);
		ws.send(msg);
	}
	function sendSize() {
		send("1", encoder.encode(term.cols + "," + term.rows));
	}

	ws.onopen = () => {
		status.textContent = "connected: the shell the agent drives (type to take part)";
		sendSize();
		term.focus();
	};
	ws.onmessage = (ev) => term.write(new Uint8Array(ev.data));
	ws.onclose = (ev) => {
		status.textContent = "disconnected" + (ev.reason ? ": " + ev.reason : "") + "; reload the page to attach again";
		status.className = "ended";
	};
	term.onData((data) => send("0", encoder.encode(data)));
	term.onBinary((data) => send("0", Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
	term.onResize(sendSize);
	window.addEventListener("resize", () => fit.fit());
})();
