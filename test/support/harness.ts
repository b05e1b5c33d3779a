/**
 * Ways to run fleet-ctl for the end-to-end suites:
 *  - embedded: every service in this process, NeDB files in a fresh directory (or MongoDB when a URI is given);
 *  - split: the gateway and the data services in two child processes (the production command on the
 *    compiled build) talking over a real NATS server; this process joins the cluster to seed data.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import util from "node:util";
import type { AddressInfo } from "node:net";
import { ensureNats, isHealthListener, waitListening } from "./net";

export { ensureNats, freePort, listeningPorts, startOwnNats, waitListening, type Nats } from "./net";
import { Loggers, ServiceBroker, type BrokerOptions } from "moleculer";

export const ROOT = path.resolve(__dirname, "../..");

/**
 * The admin token every test process bootstraps its services with (CTL_ADMIN_TOKEN) and that
 * test/support/http.ts sends by default. Rate limiting is turned way up so suites are not throttled;
 * its own test sets a low limit.
 */
export const ADMIN_TOKEN =
	(process.env.FLEET_TEST_TOKEN ??= `fct_test-admin-${process.pid}-${Math.random().toString(36).slice(2)}`);
const AUTH_ENV = { CTL_ADMIN_TOKEN: ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: "1000000" };
/**
 * The simulators the services are pointed at through the API (Pritunl, the IP resolver) and the webhook
 * receivers listen on 127.0.0.1, which the outbound address guard refuses (lib/security/address-guard.ts): the
 * suites' deployment names it in its allow list, as a deployment with such services on loopback would.
 * The guard's own tests set OUTBOUND_ALLOW to "" or to what they test.
 */
const OUTBOUND_ENV = { OUTBOUND_ALLOW: "127.0.0.1/32" };
export const DIST = path.join(ROOT, "dist");

export interface Harness {
	/** e.g. http://127.0.0.1:40123/api */
	api: string;
	/** DATA_DIR of the services when they keep their collections in NeDB files; undefined on MongoDB. */
	dataDir?: string;
	/** Calls any action (including internal ones) in the running cluster. */
	call<T = any>(action: string, params?: Record<string, unknown>): Promise<T>;
	/** The broker running the services (embedded harness only). */
	broker?: ServiceBroker;
	/** Stops everything and starts it again on the same storage. */
	restart(): Promise<void>;
	/**
	 * What the services logged since the harness started: everything the service processes printed (split
	 * harness), or every line their brokers logged (embedded harness with captureLogs); else undefined.
	 */
	logs?(): string;
	stop(): Promise<void>;
}

export function tempDir(prefix: string): string {
	return fs.mkdtempSync(path.join(os.tmpdir(), `fleet-ctl-${prefix}-`));
}

/** A MongoDB URI with a database of its own, so test files never share data. */
export function uniqueMongoUri(base: string): string {
	const url = new URL(base);
	url.pathname = `/fleetctl_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
	return url.toString();
}

/** Every service file, relative to services/: `hosts.service.ts`, and in a service's folder `cm-gateway/cm-gateway.service.ts` (as moleculer-runner finds them). */
const SERVICE_FILES = () =>
	(fs.readdirSync(path.join(ROOT, "services"), { recursive: true }) as string[])
		.filter(f => f.endsWith(".service.ts"))
		.sort();

export interface EmbeddedOptions {
	dataDir?: string;
	mongoUri?: string;
	env?: Record<string, string>;
	/** Broker options on top of the test defaults (e.g. metrics). */
	broker?: Partial<BrokerOptions>;
	/**
	 * Keep every line the services log (at LOGLEVEL from `env`, default info; formatted as the production
	 * command's Console logger does, "short"), for logs(): what the split leg reads from its processes' output.
	 */
	captureLogs?: boolean;
}

/** The production logger's formatting, into `lines` instead of the console (and to it too with TEST_LOG). */
type FormattedOptions = Loggers.Formatted.FormattedLoggerOptions;
class CaptureLogger extends Loggers.Formatted<FormattedOptions> {
	constructor(
		private readonly lines: string[],
		opts: FormattedOptions,
	) {
		super(opts);
	}

	override getLogHandler(bindings: Parameters<Loggers.Formatted<FormattedOptions>["getLogHandler"]>[0]) {
		const level = bindings ? this.getLogLevel(bindings.mod) : null;
		if (!level) return null;
		const max = Loggers.Base.LEVELS.indexOf(level);
		const format = this.getFormatter(bindings);
		return (type: string, args: unknown[]) => {
			if (Loggers.Base.LEVELS.indexOf(type) > max) return;
			const line = util.format(...format(type, args));
			this.lines.push(line);
			if (process.env.TEST_LOG) console.log(line);
		};
	}
}

/** All services in this process, from the TypeScript sources. */
export async function startEmbedded(opts: EmbeddedOptions = {}): Promise<Harness> {
	const dataDir = opts.dataDir ?? tempDir("data");
	const env: Record<string, string> = {
		...AUTH_ENV,
		...OUTBOUND_ENV,
		PORT: "0",
		HOST: "127.0.0.1",
		DATA_DIR: dataDir,
		MONGO_URI: opts.mongoUri ?? "",
		...opts.env,
	};
	let broker: ServiceBroker;
	let api = "";
	const lines: string[] = [];
	const logger = opts.captureLogs
		? {
				logger: new CaptureLogger(lines, { formatter: "short", colors: false, moduleColors: false }),
				logLevel: (env.LOGLEVEL || "info") as BrokerOptions["logLevel"],
			}
		: { logger: (process.env.TEST_LOG ? { type: "Console" } : false) as BrokerOptions["logger"] };

	const start = async () => {
		Object.assign(process.env, env);
		broker = new ServiceBroker({
			...logger,
			nodeID: `test-${process.pid}`,
			transporter: null,
			tracking: { enabled: true, shutdownTimeout: 5000 },
			...opts.broker,
		});
		for (const file of SERVICE_FILES()) broker.loadService(path.join(ROOT, "services", file));
		await broker.start();
		const gateway = broker.getLocalService("api") as unknown as { server: { address(): AddressInfo } };
		api = `http://127.0.0.1:${gateway.server.address().port}/api`;
	};
	await start();
	return {
		get api() {
			return api;
		},
		dataDir: opts.mongoUri ? undefined : dataDir,
		call: (action, params) => broker.call(action, params ?? {}),
		get broker() {
			return broker;
		},
		async restart() {
			await broker.stop();
			await start();
		},
		...(opts.captureLogs ? { logs: () => lines.join("\n") } : {}),
		stop: () => broker.stop(),
	};
}

// ------------------------------------------------------------------ NATS

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		if (await check()) return;
		await new Promise(r => setTimeout(r, 100));
	}
	throw new Error(`timed out waiting for ${what}`);
}

export interface Proc {
	child: ChildProcess;
	log: string[];
	/** The services it runs (SERVICES; empty: all of them). */
	services: string[];
}

/**
 * Runs the production command (moleculer-runner on the build) with the given services. PORT and HEALTH_PORT
 * default to 0: the process binds ports the kernel picks, and the test reads them back (boundPorts). Storage is
 * NeDB files under the test's DATA_DIR unless the test names a MongoDB (MONGO_URI): CI sets MONGO_URI for the
 * whole run (the Mongo leg), and inherited it would put every such process of every suite in one database,
 * where a suite running alongside changed another's tokens and records.
 */
export function runServices(services: string[], env: Record<string, string>): Proc {
	const runner = path.join(ROOT, "node_modules/moleculer/bin/moleculer-runner.js");
	const child = spawn(process.execPath, [runner, "--config", path.join(DIST, "moleculer.config.js")], {
		cwd: ROOT,
		env: {
			...process.env,
			...AUTH_ENV,
			...OUTBOUND_ENV,
			MONGO_URI: "",
			SERVICES: services.join(","),
			SERVICEDIR: path.join(DIST, "services"),
			LOGLEVEL: "warn",
			PORT: "0",
			HEALTH_PORT: "0",
			...env,
		},
		stdio: ["ignore", "pipe", "pipe"],
	});
	const log: string[] = [];
	child.stdout?.on("data", d => log.push(String(d)));
	child.stderr?.on("data", d => log.push(String(d)));
	return { child, log, services };
}

/**
 * The ports a service process bound: its health listener (every process has one, HEALTH_PORT=0 by default) and,
 * when it runs the gateway, the API (PORT=0). Read back from the kernel (listeningPorts), told apart by asking
 * each for /live. Waits for the API too unless `healthOnly` (a gateway waiting for its services listens late).
 * Fails at once if the process exits.
 */
export async function boundPorts(
	proc: Proc,
	opts: { healthOnly?: boolean; timeoutMs?: number } = {},
): Promise<{ api?: number; health: number }> {
	const gateway = !opts.healthOnly && (proc.services.length === 0 || proc.services.includes("api"));
	const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
	for (;;) {
		const ports = await waitListening(proc.child, gateway ? 2 : 1, Math.max(0, deadline - Date.now()), () =>
			proc.log.join(""),
		);
		const health: number[] = [];
		const other: number[] = [];
		for (const port of ports) ((await isHealthListener(port)) ? health : other).push(port);
		if (health.length > 1 || other.length > 1)
			throw new Error(
				`cannot tell the ports ${ports.join(", ")} apart (health: ${health.join(", ") || "none"})\n${proc.log.join("")}`,
			);
		if (health.length === 1 && (!gateway || other.length === 1)) return { api: other[0], health: health[0] };
		if (Date.now() > deadline)
			throw new Error(`no health listener among the ports ${ports.join(", ")}\n${proc.log.join("")}`);
		await new Promise(r => setTimeout(r, 50));
	}
}

/** The API address of a process running the gateway on PORT=0, e.g. http://127.0.0.1:40123/api. */
export async function apiOf(proc: Proc, timeoutMs?: number): Promise<string> {
	const { api } = await boundPorts(proc, { timeoutMs });
	if (!api) throw new Error(`${proc.services.join(",")}: no API port`);
	return `http://127.0.0.1:${api}/api`;
}

/** Waits until the production command answers an authenticated read; fails at once if it exited. */
export async function waitForApi(api: string, proc: Proc): Promise<void> {
	const deadline = Date.now() + 30_000;
	while (Date.now() < deadline) {
		if (proc.child.exitCode !== null) throw new Error(`process exited early:\n${proc.log.join("")}`);
		try {
			if ((await fetch(`${api}/settings/0`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status === 200)
				return;
		} catch {
			/* not listening yet */
		}
		await new Promise(r => setTimeout(r, 100));
	}
	throw new Error(`API did not come up:\n${proc.log.join("")}`);
}

/** Whether the process has ended: by itself (exit code) or by a signal (then the exit code is null). */
export function hasExited(child: ChildProcess): boolean {
	return child.exitCode !== null || child.signalCode !== null;
}

/** Stops a process (SIGTERM, then SIGKILL after `killAfterMs`) and waits for it to exit; one that ended already is left. */
export function stopProc(p: Proc, killAfterMs = 15_000): Promise<void> {
	return new Promise(resolve => {
		if (hasExited(p.child)) return resolve();
		const timer = setTimeout(() => p.child.kill("SIGKILL"), killAfterMs);
		p.child.once("exit", () => {
			clearTimeout(timer);
			resolve();
		});
		p.child.kill("SIGTERM");
	});
}

/** Stops the processes still running and waits for them to exit. */
export async function stopProcs(procs: Proc[]): Promise<void> {
	await Promise.all(procs.map(p => stopProc(p)));
}

export const ALL_SERVICES = () => SERVICE_FILES().map(f => path.basename(f).replace(/\.service\.ts$/, ""));

export interface SplitOptions {
	mongoUri?: string;
	/** Extra environment of every service process. */
	env?: Record<string, string>;
	/** Services that run in a process of their own each, instead of with the other data services. */
	own?: string[];
}

/** The gateway in one process, every data service in another, over NATS. */
export async function startSplit(opts: SplitOptions = {}): Promise<Harness> {
	if (!fs.existsSync(path.join(DIST, "moleculer.config.js")))
		throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
	const nats = await ensureNats();
	const namespace = `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
	const dataDir = tempDir("split");
	// PORT 0: the gateway binds a port of the kernel's choosing, read back after every start (a restart may move it).
	const env = {
		...opts.env,
		TRANSPORTER: nats.url,
		NAMESPACE: namespace,
		DATA_DIR: dataDir,
		MONGO_URI: opts.mongoUri ?? "",
		PORT: "0",
		HOST: "127.0.0.1",
	};
	const own = opts.own ?? [];
	const dataServices = ALL_SERVICES().filter(s => s !== "api" && !own.includes(s));
	let procs: Proc[] = [];
	// Output of processes stopped by a restart, so logs() covers the harness's whole life.
	const earlierLogs: string[] = [];
	const client = new ServiceBroker({
		logger: false,
		namespace,
		nodeID: `test-client-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		serializer: "JSONExt",
		requestTimeout: 30_000,
	});
	await client.start();
	let api = "";

	const start = async () => {
		procs = [runServices(dataServices, env), ...own.map(s => runServices([s], env)), runServices(["api"], env)];
		const gateway = procs[procs.length - 1];
		try {
			api = await apiOf(gateway);
			await client.waitForServices([...dataServices, ...own, "api"], 30_000);
			await waitFor(
				async () => {
					try {
						const res = await fetch(`${api}/settings/0`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
						return res.status === 200;
					} catch {
						return false;
					}
				},
				30_000,
				"the gateway to reach the data services",
			);
		} catch (err) {
			throw new Error(
				`${(err as Error).message}\n--- process output ---\n${procs.map(p => p.log.join("")).join("\n---\n")}`,
			);
		}
	};
	const stopAll = async () => {
		await stopProcs(procs);
		await client.stop();
		await nats.stop();
	};
	try {
		await start();
	} catch (err) {
		// Nothing is left running after a start that failed: no test gets a harness to stop, and a process or the
		// client's NATS connection left open would keep jest from exiting (CI would wait for its time limit).
		await stopAll();
		throw err;
	}
	return {
		get api() {
			return api;
		},
		dataDir: opts.mongoUri ? undefined : dataDir,
		call: (action, params) => client.call(action, params ?? {}),
		async restart() {
			await Promise.all(procs.map(p => stopProc(p)));
			earlierLogs.push(...procs.map(p => p.log.join("")));
			await start();
		},
		logs: () => [...earlierLogs, ...procs.map(p => p.log.join(""))].join("\n"),
		stop: stopAll,
	};
}

// ------------------------------------------------------------------ multi-process suites on shared storage

/** A suite whose replicas share storage: run with MONGO_URI, skipped (and saying so) without it. */
export function describeWithMongo(title: string, body: (mongoUri: string) => void): void {
	const uri = process.env.MONGO_URI;
	(uri ? describe : describe.skip)(`${title}${uri ? "" : " (skipped: MONGO_URI is not set)"}`, () => body(uri ?? ""));
}
