/**
 * For the operations tests: fleet-ctl processes started with the production command, each with its own
 * health port; a load that records every request's outcome; and a TCP balancer that stands in for a
 * Kubernetes Service (connections are spread over the endpoints; an endpoint removed takes no new
 * connection, while the ones it has stay, as with kube-proxy).
 */
import net from "node:net";
import type { AddressInfo } from "node:net";
import { ADMIN_TOKEN, boundPorts, hasExited, runServices, stopProc, type Proc } from "./harness";

/**
 * The services the operations tests' loads use (groups through the gateway: tokens to authenticate, audit
 * for writes, hosts and nodegroups for memberships): fewer processes' worth of start-up on a shared CI machine
 * than every service, and the same paths (storage, NATS, shutdown).
 */
export const LOAD_SERVICES = ["groups", "nodegroups", "hosts", "tokens", "audit", "settings"];

export interface Node {
	proc: Proc;
	health: string;
	services: string[];
	env: Record<string, string>;
	/** The port of its API (PORT=0: bound by the process, read back), for a node running the gateway. */
	apiPort(): Promise<number>;
}

/**
 * Starts the production command with `services`; its health listener (and API, if it runs the gateway) on ports
 * it binds itself (HEALTH_PORT=0, PORT=0), read back: answers once the health listener is there.
 */
export async function startNode(services: string[], env: Record<string, string>): Promise<Node> {
	// NeDB files unless the test names a MongoDB (CI sets MONGO_URI for the Mongo leg; it must not leak in here)
	const full = { MONGO_URI: "", PORT: "0", ...env, HEALTH_PORT: "0", HEALTH_HOST: "127.0.0.1" };
	const proc = runServices(services, full);
	// The health listener comes first (a broker middleware's `starting`); the API once the gateway has started.
	const { health } = await boundPorts(proc, { healthOnly: true });
	let api: Promise<number> | undefined;
	return {
		proc,
		health: `http://127.0.0.1:${health}`,
		services,
		env: full,
		apiPort: () =>
			(api ??= boundPorts(proc).then(p => {
				if (!p.api) throw new Error(`${services.join(",")}: no API port`);
				return p.api;
			})),
	};
}

export async function probe(node: Node, path: "/live" | "/ready"): Promise<{ status: number; body: any }> {
	try {
		const res = await fetch(`${node.health}${path}`);
		return { status: res.status, body: await res.json() };
	} catch {
		return { status: 0, body: null };
	}
}

export async function waitReady(node: Node, timeoutMs = 30_000): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	let last = { status: 0, body: null as unknown };
	while (Date.now() < deadline) {
		if (node.proc.child.exitCode !== null)
			throw new Error(`${node.services.join(",")} exited early:\n${node.proc.log.join("")}`);
		last = await probe(node, "/ready");
		if (last.status === 200) return;
		await sleep(100);
	}
	throw new Error(`${node.services.join(",")} not ready: ${JSON.stringify(last.body)}\n${node.proc.log.join("")}`);
}

export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

export function exited(node: Node): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
	const { child } = node.proc;
	if (hasExited(child)) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
	return new Promise(resolve => child.once("exit", (code, signal) => resolve({ code, signal })));
}

export const stopNode = (node: Node): Promise<void> => stopProc(node.proc, 20_000);

// ------------------------------------------------------------------ load

export interface Outcome {
	method: string;
	path: string;
	status: number;
	/** Eve's error body, or the network error of a request that got no answer. */
	error?: string;
	body?: any;
	started: number;
	ms: number;
}

/** Workers that send requests back to back until stopped; every request's outcome is kept. */
export class Load {
	readonly outcomes: Outcome[] = [];
	private running = true;
	private workers: Promise<void>[] = [];

	constructor(
		base: () => string,
		next: (worker: number, i: number) => { method: string; path: string; body?: unknown },
		workers: number,
		/** Per-request client timeout: a request that takes longer counts as hung. */
		timeoutMs = 40_000,
	) {
		for (let w = 0; w < workers; w++) {
			this.workers.push(
				(async () => {
					for (let i = 0; this.running; i++) {
						const { method, path, body } = next(w, i);
						const started = Date.now();
						try {
							const res = await fetch(`${base()}${path}`, {
								method,
								headers: {
									authorization: `Bearer ${ADMIN_TOKEN}`,
									...(body ? { "content-type": "application/json" } : {}),
								},
								body: body ? JSON.stringify(body) : undefined,
								signal: AbortSignal.timeout(timeoutMs),
							});
							const text = await res.text();
							let parsed: any;
							try {
								parsed = text ? JSON.parse(text) : undefined;
							} catch {
								parsed = text;
							}
							this.outcomes.push({
								method,
								path,
								status: res.status,
								body: parsed,
								error: res.status >= 400 ? (parsed?._error?.message ?? String(text).slice(0, 200)) : undefined,
								started,
								ms: Date.now() - started,
							});
						} catch (err) {
							const e = err as Error & { cause?: { code?: string; message?: string } };
							this.outcomes.push({
								method,
								path,
								status: 0,
								error: `${e.name}: ${e.message} ${e.cause?.code ?? e.cause?.message ?? ""}`,
								started,
								ms: Date.now() - started,
							});
						}
					}
				})(),
			);
		}
	}

	async stop(): Promise<Outcome[]> {
		this.running = false;
		await Promise.all(this.workers);
		return this.outcomes;
	}

	since(t: number): Outcome[] {
		return this.outcomes.filter(o => o.started >= t);
	}
}

/** A short summary of failed outcomes for assertion messages. */
export function failures(outcomes: Outcome[]): string[] {
	return outcomes
		.filter(o => o.status === 0 || o.status >= 400)
		.map(o => `${o.method} ${o.path} -> ${o.status} ${o.error ?? ""} (${o.ms} ms)`);
}

// ------------------------------------------------------------------ balancer

export class Balancer {
	private server = net.createServer(socket => this.route(socket));
	private endpoints: number[] = [];
	private next = 0;
	private sockets = new Set<net.Socket>();
	port = 0;

	async listen(endpoints: number[]): Promise<void> {
		this.endpoints = [...endpoints];
		await new Promise<void>(resolve => this.server.listen(0, "127.0.0.1", () => resolve()));
		this.port = (this.server.address() as AddressInfo).port;
	}

	get url(): string {
		return `http://127.0.0.1:${this.port}`;
	}

	add(port: number) {
		this.endpoints.push(port);
	}

	/** New connections go elsewhere; the ones already made stay (kube-proxy after an endpoint is removed). */
	remove(port: number) {
		this.endpoints = this.endpoints.filter(p => p !== port);
	}

	private route(client: net.Socket) {
		if (!this.endpoints.length) return client.destroy();
		const port = this.endpoints[this.next++ % this.endpoints.length];
		const upstream = net.connect(port, "127.0.0.1");
		for (const s of [client, upstream]) {
			this.sockets.add(s);
			s.once("close", () => this.sockets.delete(s));
		}
		// pipe passes each side's end on to the other (a server's Connection: close reaches the client whole)
		client.pipe(upstream).pipe(client);
		const abort = () => {
			client.destroy();
			upstream.destroy();
		};
		client.on("error", abort);
		upstream.on("error", abort);
	}

	/** Stops listening and cuts every connection (clients keep idle ones for as long as the gateway allows). */
	close(): Promise<void> {
		for (const s of this.sockets) s.destroy();
		return new Promise(resolve => this.server.close(() => resolve()));
	}
}
