// SPDX-License-Identifier: Apache-2.0
// @berthos/sdk: what an app imports.
export { defineApp } from "./app.mjs";
export { createLocalContextBus } from "./context-bus.mjs";
export { createLocalSemanticFs } from "./semantic-fs.mjs";
export { requestCapability } from "./request-capability.mjs";
export { configureEgressProxy } from "./egress.mjs";
export { defineConnectorApp } from "./connector.mjs";
export { matchesCapability } from "./capability.mjs";
export { writeFileDurable } from "./durable.mjs";
