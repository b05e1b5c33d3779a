/**
 * What the benchmarks share: child processes that never outlive the run (nor their temp dirs), the
 * production command, and small HTTP helpers.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { ensureNats, freePort, type Nats } from "../test/support/net";

export const DIST = path.resolve(__dirname, "..");
export const ROOT = path.resolve(DIST, "..");
const RUNNER = path.join(ROOT, "node_modules/moleculer/bin/moleculer-runner.js");

/** The admin token the measured services bootstrap with; the load generators send it too. */
process.env.BENCH_TOKEN ??= `fct_bench-${process.pid}-${Math.random().toString(36).slice(2)}`;

export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** The value below which a share `q` of the values lies (nearest rank). */
export function quantile(values: number[], q: number): number {
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** A figure for the report: thousands separated, `digits` decimals. */
export const fmt = (n: number, digits = 0) =>
	n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** A positive integer from the environment, or the fallback. */
export function envInt(name: string, fallback: number, min = 1): number {
	const raw = process.env[name];
	if (raw == null || raw === "") return fallback;
	const v = Number(raw);
	if (!Number.isFinite(v) || v < min) throw new Error(`${name} must be a number >= ${min}, got '${raw}'`);
	return v;
}

/**
 * Where a bench part runs fleet-ctl: the NATS server, a namespace of its own, a free port, and the
 * environment every fleet-ctl process of the part shares (extra settings on top).
 */
export async function benchCluster(
	part: string,
	dataDir: string,
	extra: Record<string, string> = {},
): Promise<{ nats: Nats; namespace: string; base: string; env: Record<string, string> }> {
	const nats = await benchNats();
	const namespace = `bench-${part}-${process.pid}-${Date.now().toString(36)}`;
	const port = await freePort();
	const env = {
		PORT: String(port),
		HOST: "127.0.0.1",
		DATA_DIR: dataDir,
		NAMESPACE: namespace,
		TRANSPORTER: nats.url,
		...extra,
	};
	return { nats, namespace, base: `http://127.0.0.1:${port}`, env };
}

// ------------------------------------------------------------------ processes and cleanup

export interface Proc {
	name: string;
	child: ChildProcess;
	log: string[];
	spawnedAt: number;
}

export const procs = new Set<Proc>();
export const tempDirs: string[] = [];
let cleaningUp: Promise<void> | null = null;

export function spawnNode(name: string, args: string[], env: NodeJS.ProcessEnv, nodeFlags: string[] = []): Proc {
	const child = spawn(process.execPath, [...nodeFlags, ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
	const p: Proc = { name, child, log: [], spawnedAt: Date.now() };
	const keep = (d: Buffer) => {
		p.log.push(String(d));
		if (p.log.length > 400) p.log.splice(0, p.log.length - 400);
	};
	child.stdout?.on("data", keep);
	child.stderr?.on("data", keep);
	procs.add(p);
	child.once("exit", () => procs.delete(p));
	return p;
}

export function stopProc(p: Proc, timeoutMs = 15_000): Promise<void> {
	return new Promise(resolve => {
		if (p.child.exitCode !== null || p.child.signalCode !== null) {
			procs.delete(p);
			return resolve();
		}
		const timer = setTimeout(() => p.child.kill("SIGKILL"), timeoutMs);
		p.child.once("exit", () => {
			clearTimeout(timer);
			procs.delete(p);
			resolve();
		});
		p.child.kill("SIGTERM");
	});
}

export function cleanup(): Promise<void> {
	cleaningUp ??= (async () => {
		await Promise.all([...procs].map(p => stopProc(p, 5_000)));
		for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
	})();
	return cleaningUp;
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
	process.on(signal, () => {
		process.stderr.write(`\nbench: ${signal}, stopping child processes and removing temp dirs...\n`);
		cleanup().finally(() => process.exit(130));
	});
}
// Last resort (an uncaught error, process.exit elsewhere): no child outlives the bench, no temp dir stays.
process.on("exit", () => {
	for (const p of procs) p.child.kill("SIGKILL");
	for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

export function procLogs(...ps: Proc[]): string {
	return ps.map(p => `--- ${p.name} (pid ${p.child.pid}) ---\n${p.log.join("").slice(-6000)}`).join("\n");
}

/** A part's failure, saying how fleet-ctl ended and what it logged. */
export function withProcLogs(err: unknown, proc: Proc): Error {
	return new Error(
		`${(err as Error).message}\nfleet-ctl exit code ${proc.child.exitCode}, signal ${proc.child.signalCode}\n${procLogs(proc)}`,
	);
}

/** Runs a part's work against fleet-ctl (`proc`, reached through `broker`), then stops both; a failure says how fleet-ctl ended. */
export async function againstFleetCtl<T>(
	proc: Proc,
	broker: { stop(): Promise<void> },
	work: () => Promise<T>,
): Promise<T> {
	try {
		return await work();
	} catch (err) {
		throw withProcLogs(err, proc);
	} finally {
		await broker.stop().catch(() => undefined);
		await stopProc(proc);
	}
}

export interface RawResponse {
	status: number;
	headers: http.IncomingHttpHeaders;
	body: Buffer;
}

/** One GET with the exact bytes of the answer (no decoding, no decompression). */
export function rawGet(url: string): Promise<RawResponse> {
	return new Promise((resolve, reject) => {
		const req = http.get(
			url,
			{ agent: false, headers: { authorization: `Bearer ${process.env.BENCH_TOKEN}` } },
			res => {
				const chunks: Buffer[] = [];
				res.on("data", c => chunks.push(c));
				res.on("end", () =>
					resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
				);
				res.on("error", reject);
			},
		);
		req.setTimeout(30_000, () => req.destroy(new Error(`timeout on GET ${url}`)));
		req.on("error", reject);
	});
}

export async function waitForHttp200(url: string, timeoutMs: number, watch: Proc[]): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	let last = "no answer";
	while (Date.now() < deadline) {
		const dead = watch.find(p => p.child.exitCode !== null || p.child.signalCode !== null);
		if (dead)
			throw new Error(
				`${dead.name} exited (code ${dead.child.exitCode}, signal ${dead.child.signalCode}) before ${url} answered\n${procLogs(...watch)}`,
			);
		try {
			const res = await rawGet(url);
			if (res.status === 200) return;
			last = `HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 200)}`;
		} catch (err) {
			last = (err as Error).message;
		}
		await sleep(250);
	}
	throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${url} (last: ${last})\n${procLogs(...watch)}`);
}

export function serviceNames(): string[] {
	return (fs.readdirSync(path.join(DIST, "services"), { recursive: true }) as string[])
		.filter(f => f.endsWith(".service.js"))
		.map(f => path.basename(f).replace(/\.service\.js$/, ""));
}

export function serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
	// Rate limiting is off: the benchmark is one token sending as fast as it can.
	// The VPN sync off: the seeded hosts carry a VPN identity in an organization fleet-ctl has no record of, which
	// the sync rightly clears a few seconds after start — the reads' reference bodies would then stop matching
	// (issue 20: every run was invalid). The read paths measured here do not depend on it.
	const env: NodeJS.ProcessEnv = {
		...process.env,
		LOGLEVEL: "warn",
		MONGO_URI: "",
		CTL_ADMIN_TOKEN: process.env.BENCH_TOKEN,
		RATE_LIMIT_PER_MINUTE: "0",
		HEALTH_PORT: "0",
		VPN_SYNC_INTERVAL_MS: "0",
		...extra,
	};
	if (!extra.TRANSPORTER) delete env.TRANSPORTER;
	return env;
}

/** The production command (moleculer-runner on the build) with the given services. */
export function runProductionCommand(
	name: string,
	services: string[],
	env: Record<string, string>,
	nodeFlags: string[] = [],
): Proc {
	return spawnNode(
		name,
		[RUNNER, "--config", path.join(DIST, "moleculer.config.js")],
		serverEnv({ SERVICES: services.join(","), SERVICEDIR: path.join(DIST, "services"), ...env }),
		nodeFlags,
	);
}

let natsShared: Promise<Nats> | null = null;

/** The NATS server for split deployments (NATS_URL, or one started for this run and stopped with it). */
export function benchNats(): Promise<Nats> {
	natsShared ??= ensureNats().then(nats => {
		if (nats.child) procs.add({ name: "nats-server", child: nats.child, log: [], spawnedAt: Date.now() });
		return nats;
	});
	return natsShared;
}

/** The NATS server of this run, if one was asked for. */
export function benchNatsIfStarted(): Promise<Nats> | null {
	return natsShared;
}

/** How many of a job's returns are `actions` records by now (GET /api/actions with a `where` on the jid). */
export async function recordedReturns(base: string, jid: string): Promise<number> {
	return (
		await apiJson(
			base,
			"GET",
			`/api/actions?where=${encodeURIComponent(JSON.stringify({ jid, state: "finished" }))}&max_results=1`,
		)
	).body._meta.total as number;
}

/**
 * One JSON request to the API with the bench token, on a connection of its own (no keep-alive: a
 * reused socket the server is closing makes a failure that is not the service's).
 */
export function apiJson(
	base: string,
	method: string,
	p: string,
	body?: unknown,
): Promise<{ status: number; body: any }> {
	const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
	return new Promise((resolve, reject) => {
		const req = http.request(
			base + p,
			{
				method,
				agent: false,
				headers: {
					authorization: `Bearer ${process.env.BENCH_TOKEN}`,
					...(payload ? { "content-type": "application/json", "content-length": String(payload.length) } : {}),
				},
			},
			res => {
				const chunks: Buffer[] = [];
				res.on("data", c => chunks.push(c));
				res.on("end", () => {
					const text = Buffer.concat(chunks).toString("utf8");
					try {
						resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
					} catch {
						reject(
							new Error(
								`${method} ${p}: answered ${res.statusCode} with a body that is not JSON: ${text.slice(0, 200)}`,
							),
						);
					}
				});
				res.on("error", reject);
			},
		);
		req.setTimeout(300_000, () => req.destroy(new Error(`timeout on ${method} ${p}`)));
		req.on("error", err => reject(new Error(`${method} ${p}: ${err.message}`)));
		req.end(payload);
	});
}
