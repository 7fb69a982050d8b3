// SPDX-License-Identifier: Apache-2.0
// requestCapability(): is a capability covered by what this app declared? (SPEC §2.9)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { matchesCapability } from "./capability.mjs";
import { runtimeServices } from "./egress.mjs";

const GRANTS_TIMEOUT_MS = 3000;

function fromPolicy() {
	const path = process.env.BERTH_CAPABILITY_POLICY || join(process.cwd(), ".berth", "capability-policy.json");
	try {
		const policy = JSON.parse(readFileSync(path, "utf8"));
		return Array.isArray(policy?.declaredCapabilities) ? policy.declaredCapabilities.filter((c) => typeof c === "string") : null;
	} catch {
		return null;
	}
}

function fromManifest() {
	const rt = runtimeServices();
	if (rt?.manifest) return rt.manifest.capabilities ?? [];
	const path = process.env.BERTH_MANIFEST_PATH || join(process.cwd(), "berth.yml");
	try {
		const yaml = createRequire(import.meta.url)("yaml");
		const doc = yaml.parse(readFileSync(path, "utf8"));
		return Array.isArray(doc?.capabilities) ? doc.capabilities.filter((c) => typeof c === "string") : [];
	} catch {
		return [];
	}
}

/**
 * Report whether `capability` is covered by the app's declarations: the compiled policy's
 * declaredCapabilities, else the manifest. When it is not and a grants server is
 * configured, ask it; `pending` then says whether the request was accepted for review.
 * @param {string} appName @param {string} capability
 * @returns {Promise<{granted: boolean, pending?: boolean}>}
 */
export async function requestCapability(appName, capability) {
	const declared = fromPolicy() ?? fromManifest();
	if (declared.some((d) => matchesCapability(d, capability))) return { granted: true };
	const url = process.env.BERTH_GRANTS_SERVER_URL;
	if (!url) return { granted: false };
	try {
		const res = await fetch(url.replace(/\/+$/, "") + "/grants", {
			method: "POST",
			headers: { "content-type": "application/json" },
			body: JSON.stringify({ appName, capability }),
			signal: AbortSignal.timeout(GRANTS_TIMEOUT_MS),
		});
		return { granted: false, pending: res.ok };
	} catch {
		return { granted: false, pending: false };
	}
}
