// SPDX-License-Identifier: Apache-2.0
// zod as one module of the SDK runtime's bundle (runtime-zod.mjs), which the root image's
// warm Node loads before any app: an app whose `import "zod"` is Berth's copy gets that
// module instead of its own copy of zod (bundle.mjs, src/berth-init/node-warm.mjs).
export * from "zod";
export { default } from "zod";
