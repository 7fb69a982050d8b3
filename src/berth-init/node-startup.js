// SPDX-License-Identifier: Apache-2.0
// The Node startup snapshot of a template boot (src/berth-init/node-snapshot.h,
// docs/warm-start.md). The image's Node is built without Node's own startup snapshot, so
// every start runs Node's bootstrap JavaScript from source, about 1.5 s under emulation.
// berth-init builds a snapshot of that bootstrap once, in the template, with
//   node --snapshot-blob <blob> --build-snapshot node-startup.js
// and every Node app of a restored VM starts from it with `node --snapshot-blob <blob>
// <runtime.mjs>`. Nothing of an app is in it: this file is all the snapshot ran.
"use strict";

const v8 = require("v8");

v8.startupSnapshot.setDeserializeMainFunction(() => {
	// Run process.argv[1] as `node <file>` would, ES module or CommonJS by its name. The
	// "not yet supported in user snapshots" warning for `module` is about snapshotting it,
	// which this does not do: it is only required after the snapshot is deserialized.
	const emitWarning = process.emitWarning;
	let Module;
	process.emitWarning = () => {};
	try {
		Module = require("module");
	} finally {
		process.emitWarning = emitWarning;
	}
	Module.runMain();
});
