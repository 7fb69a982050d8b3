// SPDX-License-Identifier: Apache-2.0
// GitHub through the sandbox's GitHub API broker (docs/github.md). The app never holds the
// token: in a sandbox GITHUB_TOKEN is a placeholder that says a token was given, and the
// broker, which checks each request against this app's github: capabilities, puts the real
// one into the requests it allows. configureEgressProxy() sends api.github.com to the
// broker (BERTH_GITHUB_API_PROXY), whose per-boot CA Node trusts through
// NODE_EXTRA_CA_CERTS. Without GITHUB_TOKEN the exports answer with stub data (SPEC 10).
import { configureEgressProxy, defineApp } from "@berthos/sdk";
import { z } from "zod";

// Tests point this at a local mock; in a sandbox it is GitHub's API, reached through the broker.
const API = (process.env.GITHUB_API_BASE_URL || "https://api.github.com").replace(/\/+$/, "");
const REPO = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

function checkRepo(repo: string): string {
	if (!REPO.test(repo) || repo.split("/").some((part) => part === "." || part === ".."))
		throw new Error(`repo must be "owner/name", got ${JSON.stringify(repo)}`);
	return repo;
}

/** The API's JSON answer, or null when no token was given (stub mode). */
async function github(path: string, init: { method?: string; body?: unknown } = {}): Promise<any | null> {
	const token = process.env.GITHUB_TOKEN;
	if (!token) return null;
	configureEgressProxy();
	const res = await fetch(API + path, {
		method: init.method ?? "GET",
		headers: {
			accept: "application/vnd.github+json",
			// The broker replaces this with the real token on requests it allows.
			authorization: `Bearer ${token}`,
			"user-agent": "berth-github-assistant",
			...(init.body === undefined ? {} : { "content-type": "application/json" }),
		},
		body: init.body === undefined ? undefined : JSON.stringify(init.body),
	});
	const text = await res.text();
	if (!res.ok) throw new Error(`GitHub API ${res.status}: ${text.slice(0, 2000)}`);
	return text ? JSON.parse(text) : null;
}

export default defineApp((app) => {
	app.export({
		name: "get_repo_summary",
		input: z.object({ repo: z.string() }),
		output: z.object({ summary: z.string(), open_issues: z.number() }),
		handler: async ({ repo }) => {
			// Stub mode answers for any repo (SPEC 10): the name is checked only when it
			// is about to become a path.
			if (!process.env.GITHUB_TOKEN) return { summary: `${repo} (stub — set GITHUB_TOKEN for live data)`, open_issues: 0 };
			const data = await github(`/repos/${checkRepo(repo)}`);
			if (!data) return { summary: repo, open_issues: 0 };
			return { summary: data.description ?? data.full_name ?? repo, open_issues: Number(data.open_issues_count ?? 0) };
		},
	});

	app.export({
		name: "create_issue",
		input: z.object({ title: z.string(), body: z.string() }),
		handler: async ({ title, body }) => {
			// The repository is the sandbox's, not the caller's: no GITHUB_REPO, nothing to do.
			const repo = process.env.GITHUB_REPO;
			if (!repo) return null;
			await github(`/repos/${checkRepo(repo)}/issues`, { method: "POST", body: { title, body } });
			return null;
		},
	});

	app.onAgentReady(async (ctx) => {
		await ctx.contextBus.register({ app: "github-assistant" });
	});
});
