/**
 * The read benchmarks' machinery (bench/run.ts, bench/curve.ts): seeding hosts into NeDB files, starting a
 * deployment (in one process or over NATS, read caches on or off), capturing and checking the answers, the
 * bare node:http server that replays them, and the load generator with the CPU it cost.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ServiceBroker } from "moleculer";
import brokerConfig from "../moleculer.config";
import { groupIds, makeHost } from "./hosts";
import { freePort, type Nats } from "../test/support/net";
import type { LoadOptions, LoadResult } from "./load";
import {
	DIST,
	envInt,
	procLogs,
	rawGet,
	runProductionCommand,
	serviceNames,
	sleep,
	spawnNode,
	stopProc,
	waitForHttp200,
	type Proc,
} from "./support";

export const DURATION = envInt("BENCH_DURATION", 10);
export const WARMUP = envInt("BENCH_WARMUP", 3, 0);
export const CONNECTIONS = envInt("BENCH_CONNECTIONS", 10);
const SEED_BATCH = 500;
export const PROFILE_DIR = process.env.BENCH_PROFILE ? path.resolve(process.env.BENCH_PROFILE) : "";

export type Deployment = "inproc" | "nats";
export type Cache = "on" | "off";
/** `filtered1`: the filtered list again, with one connection (its latency). */
export type RequestName = "list" | "item" | "root" | "filtered" | "filtered1";

const NO_GRAIN = encodeURIComponent(JSON.stringify({ grain: 0 }));
const DOWN = encodeURIComponent(JSON.stringify({ status: "down" }));

/** What each request asks. */
export function paths(fixedHost: string): Record<RequestName, string> {
	return {
		list: `/api/hosts?max_results=25&projection=${NO_GRAIN}`,
		item: `/api/hosts/${fixedHost}`,
		// Not measured by default: the gateway's floor (a tiny answer from an action that does nothing).
		root: "/api/",
		filtered: `/api/hosts?where=${DOWN}&max_results=25&projection=${NO_GRAIN}`,
		filtered1: `/api/hosts?where=${DOWN}&max_results=25&projection=${NO_GRAIN}`,
	};
}

/** VmRSS of a process in MiB; NaN when /proc cannot tell. */
export function rssMiB(pid: number | undefined): number {
	try {
		const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
		return m ? Number(m[1]) / 1024 : NaN;
	} catch {
		return NaN;
	}
}

// ------------------------------------------------------------------ seeding

export interface SeedInfo {
	dir: string;
	hosts: number;
	/** Hosts seeded down (what the filtered list selects). */
	down: number;
	avgDocBytes: number;
	avgGrainBytes: number;
	seconds: number;
}

/** Seeds `hosts` hosts through hosts.upsertMany on the compiled service, into NeDB files under `dir`. */
export async function seed(dir: string, hosts: number): Promise<SeedInfo> {
	const started = Date.now();
	const saved = { DATA_DIR: process.env.DATA_DIR, MONGO_URI: process.env.MONGO_URI };
	process.env.DATA_DIR = dir;
	process.env.MONGO_URI = "";
	const broker = new ServiceBroker({
		...brokerConfig,
		nodeID: `bench-seed-${process.pid}`,
		namespace: `bench-seed-${process.pid}`,
		transporter: null,
		logger: false,
	});
	try {
		broker.loadService(path.join(DIST, "services", "hosts", "hosts.service.js"));
		await broker.start();
		const groups = groupIds();
		const now = Date.now();
		let docBytes = 0;
		let grainBytes = 0;
		let down = 0;
		for (let from = 0; from < hosts; from += SEED_BATCH) {
			const batch = [];
			for (let i = from; i < Math.min(hosts, from + SEED_BATCH); i++) {
				const h = makeHost(i, now, groups);
				if (h.status === "down") down++;
				docBytes += JSON.stringify(h).length;
				grainBytes += JSON.stringify(h.grain).length;
				batch.push(h);
			}
			const res = await broker.call<{ created: number; updated: number }, { hosts: unknown[] }>("hosts.upsertMany", {
				hosts: batch,
			});
			if (res.created + res.updated !== batch.length)
				throw new Error(`hosts.upsertMany answered ${JSON.stringify(res)} for ${batch.length} hosts`);
		}
		return {
			dir,
			hosts,
			down,
			avgDocBytes: docBytes / hosts,
			avgGrainBytes: grainBytes / hosts,
			seconds: (Date.now() - started) / 1000,
		};
	} finally {
		await broker.stop();
		// process.env turns undefined into the string "undefined": put back what was there, or nothing.
		for (const [k, v] of Object.entries(saved)) {
			if (v === undefined) delete process.env[k];
			else process.env[k] = v;
		}
	}
}

// ------------------------------------------------------------------ deployments

export interface Running {
	deployment: Deployment;
	cache: Cache;
	base: string;
	servers: Proc[];
	/** The health listener of the in-process deployment (its /metrics), null when split. */
	health: string | null;
	stop(): Promise<void>;
}

export function profileFlags(name: string): string[] {
	if (!PROFILE_DIR) return [];
	return ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${name}.cpuprofile`];
}

/** The production command with the given services, profiled when BENCH_PROFILE is set. */
function runServices(name: string, services: string[], env: Record<string, string>): Proc {
	return runProductionCommand(name, services, env, profileFlags(name));
}

/** The deployment on `dataDir`, with its read caches on or off; resolves once it answers the item (and the list). */
export async function startDeployment(
	deployment: Deployment,
	cache: Cache,
	dataDir: string,
	namespace: string,
	nats: Nats | null,
	fixedHost: string,
): Promise<Running> {
	const port = await freePort();
	const base = `http://127.0.0.1:${port}`;
	const common = {
		PORT: String(port),
		HOST: "127.0.0.1",
		DATA_DIR: dataDir,
		NAMESPACE: namespace,
		...(cache === "off" ? { READ_CACHE_MS: "0" } : {}),
	};
	let servers: Proc[];
	let health: string | null = null;
	if (deployment === "inproc") {
		const healthPort = await freePort();
		health = `http://127.0.0.1:${healthPort}`;
		servers = [runServices("inproc-all", serviceNames(), { ...common, HEALTH_PORT: String(healthPort) })];
	} else {
		if (!nats) throw new Error("no NATS server");
		const env = { ...common, TRANSPORTER: nats.url };
		servers = [
			runServices(
				"nats-data",
				serviceNames().filter(s => s !== "api"),
				env,
			),
			runServices("nats-api", ["api"], env),
		];
	}
	const running: Running = {
		deployment,
		cache,
		base,
		servers,
		health,
		stop: () => Promise.all(servers.map(p => stopProc(p))).then(() => undefined),
	};
	try {
		await waitForHttp200(base + paths(fixedHost).item, 300_000, servers);
		await waitForHttp200(base + paths(fixedHost).list, 30_000, servers);
	} catch (err) {
		await running.stop();
		throw err;
	}
	return running;
}

// ------------------------------------------------------------------ capture, bare server, load

/** Headers the bare server repeats: everything but the per-connection and per-response ones. */
const NOT_REPLAYED = new Set(["date", "connection", "keep-alive", "transfer-encoding", "content-length"]);

export interface Captured {
	request: RequestName;
	path: string;
	status: number;
	headers: Record<string, string>;
	body: Buffer;
	bodyFile: string;
}

/** The answer to `request`, checked against the seed (a wrong answer would make every figure worthless) and kept for the bare server. */
export async function capture(
	base: string,
	request: RequestName,
	dir: string,
	label: string,
	seeded: SeedInfo,
	fixedHost: string,
): Promise<Captured> {
	const url = paths(fixedHost)[request];
	const res = await rawGet(base + url);
	if (res.status !== 200)
		throw new Error(`GET ${url} answered ${res.status}: ${res.body.toString("utf8").slice(0, 500)}`);
	const again = await rawGet(base + url);
	if (!again.body.equals(res.body))
		throw new Error(`GET ${url} is not deterministic: two calls gave different bodies; the bench cannot verify bodies`);
	const json = JSON.parse(res.body.toString("utf8"));
	if (request === "list" || request === "filtered" || request === "filtered1") {
		const items = json._items as Array<Record<string, unknown>>;
		const total = request === "list" ? seeded.hosts : seeded.down;
		if (!Array.isArray(items) || items.length !== Math.min(25, total))
			throw new Error(`${request} answered ${items?.length} items, expected ${Math.min(25, total)}`);
		if (json._meta?.total !== total)
			throw new Error(`${request} _meta.total is ${json._meta?.total}, expected ${total}`);
		if (items.some(i => "grain" in i)) throw new Error(`${request} items carry \`grain\` despite the projection`);
		if (request !== "list" && items.some(i => i.status !== "down"))
			throw new Error(`${request} answered hosts that are not down`);
	} else if (request === "root") {
		if (!Array.isArray(json._links?.child)) throw new Error("GET /api/ answered no _links.child");
	} else if (json._id !== fixedHost || typeof json.grain !== "object") {
		throw new Error(`item answered ${json._id} ${typeof json.grain}, expected ${fixedHost} with its grain`);
	}
	const headers: Record<string, string> = {};
	for (const [k, v] of Object.entries(res.headers))
		if (!NOT_REPLAYED.has(k) && v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
	const bodyFile = path.join(dir, `${label}-${request}.body`);
	fs.writeFileSync(bodyFile, res.body);
	if (PROFILE_DIR) fs.writeFileSync(path.join(PROFILE_DIR, `${label}-${request}.body`), res.body);
	return { request, path: url, status: res.status, headers, body: res.body, bodyFile };
}

/** Waits until the process prints `pattern`'s line; its first group, or "" without one. */
async function printed(proc: Proc, pattern: RegExp, what: string): Promise<string> {
	const deadline = Date.now() + 30_000;
	while (Date.now() < deadline) {
		const m = pattern.exec(proc.log.join(""));
		if (m) return m[1] ?? "";
		if (proc.child.exitCode !== null) break;
		await sleep(50);
	}
	throw new Error(`${what} did not start\n${procLogs(proc)}`);
}

/** A server replaying the captured answers, its processes (every one the CPU accounting must count). */
export interface Replayer {
	base: string;
	procs: Proc[];
}

/**
 * A server replaying the captured answers: `bare` (node:http alone, bench/bare-server.ts), `floor` (Moleculer
 * and moleculer-web with fleet-ctl's metrics settings and nothing of fleet-ctl, bench/floor-server.ts), or
 * `floor-nats` (the same split in two processes over the NATS server at `natsUrl`, as fleet-ctl's split deployment).
 */
export async function startBare(
	captured: Captured[],
	dir: string,
	label: string,
	kind: "bare" | "floor" | "floor-nats" = "bare",
	natsUrl?: string,
): Promise<Replayer> {
	const specFile = path.join(dir, `${label}-${kind}.json`);
	const routes: Record<string, unknown> = {};
	for (const c of captured) routes[c.path] = { status: c.status, headers: c.headers, body: c.body.toString("base64") };
	fs.writeFileSync(specFile, JSON.stringify({ routes }));
	const script = path.join(__dirname, `${kind === "bare" ? "bare" : "floor"}-server.js`);
	const procs: Proc[] = [];
	if (kind === "floor-nats") {
		if (!natsUrl) throw new Error("floor-nats needs a NATS server");
		const env = {
			...process.env,
			PORT: "0",
			FLOOR_TRANSPORTER: natsUrl,
			FLOOR_NAMESPACE: `floor-${process.pid}-${Date.now().toString(36)}`,
		};
		procs.push(
			spawnNode(
				`${kind}-${label}-answer`,
				[script, specFile],
				{ ...env, FLOOR_ROLE: "answer" },
				profileFlags(`${kind}-${label}-answer`),
			),
		);
		await printed(procs[0], /ANSWERING/, "the floor's answering process");
		procs.push(
			spawnNode(
				`${kind}-${label}-gateway`,
				[script, specFile],
				{ ...env, FLOOR_ROLE: "gateway" },
				profileFlags(`${kind}-${label}-gateway`),
			),
		);
	} else {
		procs.push(
			spawnNode(
				`${kind}-${label}`,
				[script, specFile],
				{ ...process.env, PORT: "0" },
				profileFlags(`${kind}-${label}`),
			),
		);
	}
	try {
		const base = `http://127.0.0.1:${await printed(procs[procs.length - 1], /LISTENING (\d+)/, `${kind} server`)}`;
		for (const c of captured) {
			const res = await rawGet(base + c.path);
			if (!res.body.equals(c.body) || res.headers["content-type"] !== c.headers["content-type"])
				throw new Error(`${kind} server does not replay ${c.path} faithfully`);
		}
		return { base, procs };
	} catch (err) {
		await Promise.all(procs.map(p => stopProc(p)));
		throw err;
	}
}

// ------------------------------------------------------------------ CPU accounting (Linux /proc)

const CLK_TCK = (() => {
	const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
	return Number(r.stdout?.trim()) || 100;
})();

/** CPU seconds (user + system) a process has used so far; NaN when /proc cannot tell. */
export function cpuSeconds(pid: number | undefined): number {
	if (!pid) return NaN;
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
		const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
		return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
	} catch {
		return NaN;
	}
}

/** The pid of a NATS server we did not start (for CPU accounting only). */
export function findPidByName(name: string): number | undefined {
	try {
		for (const entry of fs.readdirSync("/proc")) {
			if (!/^\d+$/.test(entry)) continue;
			try {
				if (fs.readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) return Number(entry);
			} catch {
				/* gone */
			}
		}
	} catch {
		/* no /proc */
	}
	return undefined;
}

/** CPU use over the measured phase, in % of one core. */
export interface CpuUse {
	server: number;
	/** Per server process, in the order given (nats: data services, then gateway). */
	perServer: number[];
	loader: number;
	nats: number;
}

/**
 * Load on `url` from a child process (autocannon), every body checked against `bodyFile`, with the CPU the servers
 * used meanwhile; with `vary`, a new value in place of that placeholder in the URL and the body of each request.
 */
export async function load(
	url: string,
	bodyFile: string,
	serverPids: number[],
	natsPid?: number,
	connections = CONNECTIONS,
	duration = DURATION,
	vary?: string,
): Promise<LoadResult & { cpu: CpuUse }> {
	const opts: LoadOptions = {
		url,
		connections,
		duration,
		warmup: WARMUP,
		expectBodyFile: bodyFile,
		...(vary ? { vary } : {}),
	};
	const proc = spawnNode("autocannon", [path.join(__dirname, "load.js"), JSON.stringify(opts)], { ...process.env });
	const sample = () => {
		const perServer = serverPids.map(cpuSeconds);
		return {
			at: performance.now(),
			perServer,
			server: perServer.reduce((a, b) => a + b, 0),
			loader: cpuSeconds(proc.child.pid),
			nats: natsPid ? cpuSeconds(natsPid) : NaN,
		};
	};
	let start: ReturnType<typeof sample> | null = null;
	let end: ReturnType<typeof sample> | null = null;
	let pending = "";
	proc.child.stdout?.on("data", (d: Buffer) => {
		pending += String(d);
		if (!start && pending.includes("MEASURE_START")) start = sample();
		if (!end && pending.includes("MEASURE_END")) end = sample();
	});
	const code = await new Promise<number | null>(resolve => proc.child.once("exit", c => resolve(c)));
	const out = proc.log.join("");
	const line = out
		.split("\n")
		.reverse()
		.find(l => l.startsWith("{"));
	if (code !== 0 || !line) throw new Error(`load generator failed (exit ${code}) on ${url}\n${out.slice(-3000)}`);
	const warn = out.split("\n").filter(l => l.startsWith("warm-up saw failures"));
	for (const w of warn) process.stderr.write(`  ! ${w}\n`);
	const s0 = start as ReturnType<typeof sample> | null;
	const s1 = end as ReturnType<typeof sample> | null;
	const pct = (k: "server" | "loader" | "nats") =>
		s0 && s1 ? (100 * (s1[k] - s0[k])) / ((s1.at - s0.at) / 1000) : NaN;
	const perServer = serverPids.map((_, i) =>
		s0 && s1 ? (100 * (s1.perServer[i] - s0.perServer[i])) / ((s1.at - s0.at) / 1000) : NaN,
	);
	return {
		...(JSON.parse(line) as LoadResult),
		cpu: { server: pct("server"), perServer, loader: pct("loader"), nats: pct("nats") },
	};
}
