// SPDX-License-Identifier: Apache-2.0
// The Berth app runtime: `node runtime.mjs` with BERTH_APP_ENTRY and BERTH_MANIFEST_PATH.
// bundle.mjs turns this file and everything it imports into one self-contained file.
import { main } from "./src/runtime.mjs";

await main();
