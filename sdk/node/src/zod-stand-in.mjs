// SPDX-License-Identifier: Apache-2.0
// The module an app's bundle has in place of zod when its `import "zod"` is Berth's copy
// (bundle.mjs): zod's named exports, bound once (zod reassigns none), from the zod module
// the runtime sets before it imports the app (runtime.mjs): the share's runtime-zod.mjs,
// or the root image's same bytes, which a restored VM's warm Node has loaded
// (src/berth-init/node-warm.mjs). No top-level await: an app's module that a CommonJS
// file require()s must still run as it is required.

export const SHARED_ZOD_FILE = "runtime-zod.mjs";
export const SHARED_ZOD_KEY = "berth.runtime.zod";

/** The stand-in's source, for zod's export names as esbuild lists them. */
export function zodStandIn(names) {
	const named = names.filter((n) => n !== "default" && /^[A-Za-z_$][\w$]*$/.test(n));
	return [
		`const zod = globalThis[Symbol.for(${JSON.stringify(SHARED_ZOD_KEY)})];`,
		`if (!zod) throw new Error("this app's bundle takes zod from Berth's runtime: start it with the share's runtime.mjs, which loads ${SHARED_ZOD_FILE}");`,
		// Binding names of their own: zod exports reserved words (enum, null, function, …).
		`const ${named.map((n, i) => `z${i} = zod[${JSON.stringify(n)}]`).join(", ")};`,
		`export { ${named.map((n, i) => `z${i} as ${n}`).join(", ")} };`,
		"export default zod.default;",
		"",
	].join("\n");
}
