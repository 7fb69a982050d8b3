// SPDX-License-Identifier: Apache-2.0
// Types for @berthos/sdk (the implementation is plain ESM JavaScript in src/).

/** Anything with zod's parse/parseAsync shape; in practice a zod schema. */
export interface Schema<T> {
	parse(value: unknown): T;
	parseAsync?(value: unknown): Promise<T>;
}

type Infer<S> = S extends Schema<infer T> ? T : unknown;

export interface ExportDefinition<I extends Schema<any> | undefined, O extends Schema<any> | undefined> {
	name: string;
	input?: I;
	output?: O;
	handler: (input: I extends Schema<any> ? Infer<I> : any) =>
		| (O extends Schema<any> ? Infer<O> : unknown)
		| Promise<O extends Schema<any> ? Infer<O> : unknown>;
}

export interface IOSpec {
	[field: string]: "string" | "number" | "boolean" | "object" | "array";
}

export interface BerthManifest {
	name: string;
	version: string;
	description: string;
	capabilities: string[];
	exports: { name: string; input?: IOSpec; output?: IOSpec }[];
	on_install: string[];
	on_agent_ready: string[];
	expose: { browser: boolean; terminal: boolean; preview: boolean };
	governs: boolean;
	governance: { exempt: boolean };
	resources: { cpu?: number; memory_mb?: number; gpu?: number; pids?: number };
	secrets: string[];
	runtime: "node" | "python";
}

export interface ContextBusClient {
	register(info: { app: string }): Promise<void>;
	publish(topic: string, payload: unknown): Promise<void>;
	subscribe(topic: string, handler: (payload: unknown) => void | Promise<void>): () => void;
}

export interface SemanticFsQueryResult {
	path: string;
	createdBy?: string;
	task?: string;
	relatedApps?: string[];
	createdAt: number;
	updatedAt: number;
	/** How the results were ranked: "keyword" (SQLite FTS5 bm25) is the only ranking today. */
	ranking: "keyword";
	/** Higher is a better match (bm25, negated); absent from the in-process stand-in. */
	score?: number;
}

export interface SemanticFsClient {
	/** Resolves to the name the daemon knows this app by (the kernel's word). */
	register(info: { app: string }): Promise<string | void>;
	tag(path: string, meta: { task?: string; relatedApps?: string[] }): Promise<SemanticFsQueryResult | void>;
	query(text: string, limit?: number): Promise<SemanticFsQueryResult[]>;
}

export interface AppContext {
	contextBus: ContextBusClient;
	semanticFs: SemanticFsClient;
	manifest: BerthManifest;
}

export interface BerthAppBuilder {
	export<I extends Schema<any> | undefined = undefined, O extends Schema<any> | undefined = undefined>(
		definition: ExportDefinition<I, O>,
	): void;
	onInstall(fn: () => void | Promise<void>): void;
	onAgentReady(fn: (ctx: AppContext) => void | Promise<void>): void;
	readonly exportNames: string[];
}

export type BerthApp = BerthAppBuilder;

export function defineApp(setup: (app: BerthAppBuilder) => void): BerthApp;
export function createLocalContextBus(): ContextBusClient;
export function createLocalSemanticFs(): SemanticFsClient;
export function requestCapability(appName: string, capability: string): Promise<{ granted: boolean; pending?: boolean }>;
export function configureEgressProxy(): boolean;
export function matchesCapability(granted: string, requested: string): boolean;

export interface WriteFileDurableOptions {
	/** The new file's mode, less the umask, as with open(2). Default 0o600. */
	mode?: number;
	/** Create missing parent directories first (like mkdir -p), and make their entries durable too. */
	mkdir?: boolean;
}

/**
 * Write `data` (a string is written as UTF-8) to `path` so that it is on the disk when the
 * promise resolves: a temporary file in the same directory is written, fsynced and renamed
 * over `path`, and the directory is fsynced. After a crash `path` holds either its old
 * content or all of `data`. On failure it rejects, removes the temporary file and leaves
 * `path` as it was; errors name `path`, in fs's own form (`EACCES: permission denied, open '<path>'`).
 */
export function writeFileDurable(path: string, data: string | ArrayBufferView, options?: WriteFileDurableOptions): Promise<void>;

export interface ConnectorParam {
	in: "path" | "query" | "body";
	type: "string" | "number" | "boolean";
	required?: boolean;
	description?: string;
}

export interface ConnectorOperation {
	export: string;
	method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
	path: string;
	params?: Record<string, ConnectorParam>;
	description?: string;
}

export type ConnectorAuth =
	| { type: "none" }
	| { type: "bearer"; envVar: string }
	| { type: "header"; envVar: string; headerName: string };

export interface ConnectorConfig {
	baseUrl: string;
	auth?: ConnectorAuth;
	operations: ConnectorOperation[];
}

export function defineConnectorApp(config: ConnectorConfig): BerthApp;
