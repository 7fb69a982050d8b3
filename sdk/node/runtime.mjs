// SPDX-License-Identifier: Apache-2.0
// The Berth app runtime: `node runtime.mjs` with BERTH_APP_ENTRY and BERTH_MANIFEST_PATH.
// bundle.mjs turns this file and everything it imports into one self-contained file.
//
// The warm Node of a restored VM (src/berth-init/node-warm.mjs) imports the root image's
// copy of this bundle before any app exists, with PRELOAD_MARK set so that nothing runs,
// calls warmUp() there, and main() for an app whose share holds the same bytes.
import { main, warmUp } from "./src/runtime.mjs";

const PRELOAD_MARK = Symbol.for("berth.runtime.preload");

export { main, warmUp };
if (!globalThis[PRELOAD_MARK]) await main();
