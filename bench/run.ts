/**
 * `npm run bench`: throughput and latency of the two hot read paths of the Eve API, measured through
 * the HTTP gateway on the compiled build, each next to a bare node:http server that answers the same
 * bytes (the ceiling on this machine for this response size).
 *
 *   deployments  inproc: every service in one process (the production command, no transporter)
 *                nats:   the gateway in one process, the data services in another, over NATS
 *   requests     list:   GET /api/hosts?max_results=25&projection={"grain":0}
 *                item:   GET /api/hosts/<a fixed existing host>
 *
 * Storage: BENCH_HOSTS (default 10,000) realistic hosts in NeDB files in a fresh temp DATA_DIR, seeded
 * through hosts.upsertMany. The load generator (autocannon) runs in a child process of its own.
 *
 * Environment:
 *   BENCH_DURATION     seconds measured per scenario (default 10)
 *   BENCH_WARMUP       seconds of warm-up load before each measurement (default 3)
 *   BENCH_CONNECTIONS  concurrent connections (default 10)
 *   BENCH_HOSTS        hosts seeded (default 10000)
 *   BENCH_ONLY         comma list of what to run: inproc, nats (the read paths), cm (the cm-gateway
 *                      against the salt-api simulator, bench/cm.ts; BENCH_MINIONS, BENCH_EVENTS,
 *                      BENCH_EXEC_RUNS), groups (resolution, memberships and the graph, bench/groups.ts),
 *                      tasks (the scheduler, bench/tasks.ts; BENCH_TASKS; three replicas when MONGO_URI is
 *                      set), webhooks (deliveries next to hanging receivers, bench/webhooks.ts;
 *                      BENCH_ALERTS, BENCH_HANGING), vpn (the VPN sync against the Pritunl simulator, bench/vpn.ts);
 *                      stats (snapshots and the aggregated statistics over 30 days of history,
 *                      bench/stats.ts; BENCH_STATS_HOSTS, BENCH_STATS_DAYS, BENCH_STATS_CHANGE); default all eight
 *   BENCH_REQUESTS     comma list of requests to measure: list,item (default both); `root` (GET /api/,
 *                      an action that does nothing) shows the floor of the gateway path
 *   BENCH_PROFILE      a directory: the server processes run with --cpu-prof and write their profiles
 *                      there, with a timeline.json of the measured windows (see bench/profile-top.ts)
 *                      and the captured response bodies
 *   NATS_URL           NATS server for the split deployment (default nats://127.0.0.1:4222; when nothing
 *                      answers there, a nats-server from PATH is started on a free port)
 *
 * Exit code: 0 whether or not the targets are met (the figures are for the record); 1 when any
 * measurement saw a non-2xx answer, a socket error, a timeout or a body that differs from the
 * captured one (such figures are worthless), or when the bench itself could not run.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { ServiceBroker } from "moleculer";
import brokerConfig from "../moleculer.config";
import { groupIds, hostId, makeHost } from "./hosts";
import { freePort, type Nats } from "../test/support/net";
import type { LoadOptions, LoadResult } from "./load";
import { benchCm } from "./cm";
import { benchGroups } from "./groups";
import { benchTasks } from "./tasks";
import { benchWebhooks } from "./webhooks";
import { benchVpn } from "./vpn";
import { benchStats } from "./stats";
import { DIST, envInt, benchNats, benchNatsIfStarted, cleanup, procLogs, rawGet, runProductionCommand, serviceNames, sleep, spawnNode, stopProc, tempDirs, waitForHttp200, type Proc } from "./support";



const DURATION = envInt("BENCH_DURATION", 10);
const WARMUP = envInt("BENCH_WARMUP", 3, 0);
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 10);
const HOSTS = envInt("BENCH_HOSTS", 10_000);
const SEED_BATCH = 500;
const ONLY = (process.env.BENCH_ONLY || "inproc,nats,cm,groups,tasks,webhooks,vpn,stats").split(",").map(s => s.trim());
const READ_DEPLOYMENTS = ONLY.filter(d => d === "inproc" || d === "nats");
const REQUESTS = (process.env.BENCH_REQUESTS || "list,item").split(",").map(s => s.trim());
const PROFILE_DIR = process.env.BENCH_PROFILE ? path.resolve(process.env.BENCH_PROFILE) : "";

/** Targets: requests/s of the list through fleet-ctl over requests/s of the bare server. */
const TARGETS: Array<{ deployment: Deployment; request: RequestName; minRatio: number }> = [
	{ deployment: "inproc", request: "list", minRatio: 0.5 },
	{ deployment: "nats", request: "list", minRatio: 0.35 },
];

type Deployment = "inproc" | "nats";
type RequestName = "list" | "item" | "root";

const FIXED_HOST = hostId(Math.min(4242, HOSTS - 1));
const PATHS: Record<RequestName, string> = {
	list: `/api/hosts?max_results=25&projection=${encodeURIComponent(JSON.stringify({ grain: 0 }))}`,
	item: `/api/hosts/${FIXED_HOST}`,
	// Not measured by default: the gateway's floor (a tiny answer from an action that does nothing).
	root: "/api/",
};

// ------------------------------------------------------------------ seeding

interface SeedInfo {
	dir: string;
	hosts: number;
	avgDocBytes: number;
	avgGrainBytes: number;
	seconds: number;
}

/** Seeds the hosts through hosts.upsertMany on the compiled service, into NeDB files under `dir`. */
async function seed(dir: string): Promise<SeedInfo> {
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
		for (let from = 0; from < HOSTS; from += SEED_BATCH) {
			const batch = [];
			for (let i = from; i < Math.min(HOSTS, from + SEED_BATCH); i++) {
				const h = makeHost(i, now, groups);
				docBytes += JSON.stringify(h).length;
				grainBytes += JSON.stringify(h.grain).length;
				batch.push(h);
			}
			const res = await broker.call<{ created: number; updated: number }, { hosts: unknown[] }>("hosts.upsertMany", { hosts: batch });
			if (res.created + res.updated !== batch.length) throw new Error(`hosts.upsertMany answered ${JSON.stringify(res)} for ${batch.length} hosts`);
		}
		return { dir, hosts: HOSTS, avgDocBytes: docBytes / HOSTS, avgGrainBytes: grainBytes / HOSTS, seconds: (Date.now() - started) / 1000 };
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

interface Running {
	deployment: Deployment;
	base: string;
	servers: Proc[];
	stop(): Promise<void>;
}

function profileFlags(name: string): string[] {
	if (!PROFILE_DIR) return [];
	return ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${name}.cpuprofile`];
}

/** The production command with the given services, profiled when BENCH_PROFILE is set. */
function runServices(name: string, services: string[], env: Record<string, string>): Proc {
	return runProductionCommand(name, services, env, profileFlags(name));
}

async function startDeployment(deployment: Deployment, dataDir: string, namespace: string, nats: Nats | null): Promise<Running> {
	const port = await freePort();
	const base = `http://127.0.0.1:${port}`;
	const common = { PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, NAMESPACE: namespace };
	let servers: Proc[];
	if (deployment === "inproc") {
		servers = [runServices("inproc-all", serviceNames(), common)];
	} else {
		if (!nats) throw new Error("no NATS server");
		const env = { ...common, TRANSPORTER: nats.url };
		servers = [runServices("nats-data", serviceNames().filter(s => s !== "api"), env), runServices("nats-api", ["api"], env)];
	}
	const running: Running = { deployment, base, servers, stop: () => Promise.all(servers.map(p => stopProc(p))).then(() => undefined) };
	try {
		await waitForHttp200(base + PATHS.item, 180_000, servers);
		await waitForHttp200(base + PATHS.list, 30_000, servers);
	} catch (err) {
		await running.stop();
		throw err;
	}
	return running;
}

// ------------------------------------------------------------------ capture, bare server, load

/** Headers the bare server repeats: everything but the per-connection and per-response ones. */
const NOT_REPLAYED = new Set(["date", "connection", "keep-alive", "transfer-encoding", "content-length"]);

interface Captured {
	request: RequestName;
	path: string;
	status: number;
	headers: Record<string, string>;
	body: Buffer;
	bodyFile: string;
}

async function capture(base: string, request: RequestName, dir: string, label: string): Promise<Captured> {
	const res = await rawGet(base + PATHS[request]);
	if (res.status !== 200) throw new Error(`GET ${PATHS[request]} answered ${res.status}: ${res.body.toString("utf8").slice(0, 500)}`);
	const again = await rawGet(base + PATHS[request]);
	if (!again.body.equals(res.body)) throw new Error(`GET ${PATHS[request]} is not deterministic: two calls gave different bodies; the bench cannot verify bodies`);
	const json = JSON.parse(res.body.toString("utf8"));
	if (request === "list") {
		const items = json._items as Array<Record<string, unknown>>;
		if (!Array.isArray(items) || items.length !== 25) throw new Error(`list answered ${items?.length} items, expected 25`);
		if (json._meta?.total !== HOSTS) throw new Error(`list _meta.total is ${json._meta?.total}, expected ${HOSTS}`);
		if (items.some(i => "grain" in i)) throw new Error("list items carry `grain` despite the projection");
	} else if (request === "root") {
		if (!Array.isArray(json._links?.child)) throw new Error("GET /api/ answered no _links.child");
	} else if (json._id !== FIXED_HOST || typeof json.grain !== "object") {
		throw new Error(`item answered ${json._id} ${typeof json.grain}, expected ${FIXED_HOST} with its grain`);
	}
	const headers: Record<string, string> = {};
	for (const [k, v] of Object.entries(res.headers)) if (!NOT_REPLAYED.has(k) && v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
	const bodyFile = path.join(dir, `${label}-${request}.body`);
	fs.writeFileSync(bodyFile, res.body);
	if (PROFILE_DIR) fs.writeFileSync(path.join(PROFILE_DIR, `${label}-${request}.body`), res.body);
	return { request, path: PATHS[request], status: res.status, headers, body: res.body, bodyFile };
}

async function startBare(captured: Captured[], dir: string, label: string): Promise<{ base: string; proc: Proc }> {
	const specFile = path.join(dir, `${label}-bare.json`);
	const routes: Record<string, unknown> = {};
	for (const c of captured) routes[c.path] = { status: c.status, headers: c.headers, body: c.body.toString("base64") };
	fs.writeFileSync(specFile, JSON.stringify({ routes }));
	const proc = spawnNode(`bare-${label}`, [path.join(__dirname, "bare-server.js"), specFile], { ...process.env, PORT: "0" }, profileFlags(`bare-${label}`));
	const deadline = Date.now() + 15_000;
	while (Date.now() < deadline) {
		const m = /LISTENING (\d+)/.exec(proc.log.join(""));
		if (m) {
			const base = `http://127.0.0.1:${m[1]}`;
			for (const c of captured) {
				const res = await rawGet(base + c.path);
				if (!res.body.equals(c.body) || res.headers["content-type"] !== c.headers["content-type"]) throw new Error(`bare server does not replay ${c.path} faithfully`);
			}
			return { base, proc };
		}
		if (proc.child.exitCode !== null) break;
		await sleep(50);
	}
	throw new Error(`bare server did not start\n${procLogs(proc)}`);
}

// ------------------------------------------------------------------ CPU accounting (Linux /proc)

const CLK_TCK = (() => {
	const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
	return Number(r.stdout?.trim()) || 100;
})();

/** CPU seconds (user + system) a process has used so far; NaN when /proc cannot tell. */
function cpuSeconds(pid: number | undefined): number {
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
function findPidByName(name: string): number | undefined {
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

async function load(url: string, bodyFile: string, serverPids: number[], natsPid?: number): Promise<LoadResult & { cpu: CpuUse }> {
	const opts: LoadOptions = { url, connections: CONNECTIONS, duration: DURATION, warmup: WARMUP, expectBodyFile: bodyFile };
	const proc = spawnNode("autocannon", [path.join(__dirname, "load.js"), JSON.stringify(opts)], { ...process.env });
	const sample = () => {
		const perServer = serverPids.map(cpuSeconds);
		return { at: performance.now(), perServer, server: perServer.reduce((a, b) => a + b, 0), loader: cpuSeconds(proc.child.pid), nats: natsPid ? cpuSeconds(natsPid) : NaN };
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
	const pct = (k: "server" | "loader" | "nats") => (s0 && s1 ? (100 * (s1[k] - s0[k])) / ((s1.at - s0.at) / 1000) : NaN);
	const perServer = serverPids.map((_, i) => (s0 && s1 ? (100 * (s1.perServer[i] - s0.perServer[i])) / ((s1.at - s0.at) / 1000) : NaN));
	return { ...(JSON.parse(line) as LoadResult), cpu: { server: pct("server"), perServer, loader: pct("loader"), nats: pct("nats") } };
}

// ------------------------------------------------------------------ reporting

interface Row {
	deployment: Deployment;
	request: RequestName;
	bytes: number;
	ours: LoadResult & { cpu: CpuUse };
	bare: LoadResult & { cpu: CpuUse };
}

const LABELS: Record<Deployment, string> = { inproc: "in-process", nats: "over NATS" };

function fmtNum(n: number, digits = 0): string {
	return Number.isFinite(n) ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : "-";
}

function table(header: string[], rows: string[][], alignLeft = 1): string {
	const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)));
	const line = (cells: string[]) => cells.map((c, i) => (i < alignLeft ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
	return [line(header), widths.map(w => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

function failures(r: LoadResult): number {
	return r.non2xx + r.errors + r.timeouts + r.mismatches;
}

function report(rows: Row[], seedInfo: SeedInfo): boolean {
	const out: string[] = [];
	out.push("");
	out.push(`fleet-ctl bench — node ${process.version}, ${os.cpus().length} cpu (${os.cpus()[0]?.model ?? "?"}), ${CONNECTIONS} connections, ${WARMUP}s warm-up + ${DURATION}s measured per line`);
	out.push(`storage: NeDB, ${seedInfo.hosts.toLocaleString("en-US")} hosts (avg ${fmtNum(seedInfo.avgDocBytes)} B per host as JSON, grain ${fmtNum(seedInfo.avgGrainBytes)} B), seeded in ${seedInfo.seconds.toFixed(1)}s`);
	out.push(`list = GET ${PATHS.list}`);
	out.push(`item = GET ${PATHS.item}`);
	out.push("");
	out.push(
		table(
			["scenario", "body B", "req/s", "p50 ms", "p99 ms", "bare req/s", "bare p50", "bare p99", "ratio"],
			rows.map(r => [
				`${LABELS[r.deployment]} ${r.request}`,
				fmtNum(r.bytes),
				fmtNum(r.ours.rps),
				fmtNum(r.ours.p50, 2),
				fmtNum(r.ours.p99, 2),
				fmtNum(r.bare.rps),
				fmtNum(r.bare.p50, 2),
				fmtNum(r.bare.p99, 2),
				(r.ours.rps / r.bare.rps).toFixed(3),
			]),
		),
	);
	out.push("");
	out.push("CPU over the measured phase, % of one core (2 cores in all; a server at ~100% is saturated, a load generator at ~100% caps the figure):");
	const cpu = (v: number) => (Number.isFinite(v) ? `${v.toFixed(0)}%` : "-");
	out.push(
		table(
			["scenario", "fleet-ctl processes", "CPU µs/req", "NATS server", "loader (ours)", "bare server", "CPU µs/req", "loader (bare)"],
			rows.map(r => [
				`${LABELS[r.deployment]} ${r.request}`,
				r.ours.cpu.perServer.length === 2 ? `${cpu(r.ours.cpu.server)} (data ${cpu(r.ours.cpu.perServer[0])} + gateway ${cpu(r.ours.cpu.perServer[1])})` : cpu(r.ours.cpu.server),
				fmtNum((r.ours.cpu.server / 100 / r.ours.rps) * 1e6),
				cpu(r.ours.cpu.nats),
				cpu(r.ours.cpu.loader),
				cpu(r.bare.cpu.server),
				fmtNum((r.bare.cpu.server / 100 / r.bare.rps) * 1e6),
				cpu(r.bare.cpu.loader),
			]),
		),
	);
	for (const r of rows) {
		if (r.bare.cpu.loader >= 90) out.push(`  note: ${LABELS[r.deployment]} ${r.request}: the load generator was the bottleneck of the bare run (${cpu(r.bare.cpu.loader)}), so the bare figure understates the ceiling and the ratio flatters fleet-ctl.`);
	}
	out.push("");
	out.push("failures (ours / bare) — all must be 0:");
	out.push(
		table(
			["scenario", "requests", "non-2xx", "errors", "timeouts", "body mismatches"],
			rows.map(r => [
				`${LABELS[r.deployment]} ${r.request}`,
				`${fmtNum(r.ours.requests)} / ${fmtNum(r.bare.requests)}`,
				`${r.ours.non2xx} / ${r.bare.non2xx}`,
				`${r.ours.errors} / ${r.bare.errors}`,
				`${r.ours.timeouts} / ${r.bare.timeouts}`,
				`${r.ours.mismatches} / ${r.bare.mismatches}`,
			]),
		),
	);
	out.push("");
	out.push("targets (requests/s through fleet-ctl over requests/s of the bare server):");
	for (const t of TARGETS) {
		const r = rows.find(x => x.deployment === t.deployment && x.request === t.request);
		const name = `${LABELS[t.deployment]} ${t.request} ratio >= ${t.minRatio}`;
		if (!r) out.push(`  ${name.padEnd(34)} not measured in this run`);
		else {
			const ratio = r.ours.rps / r.bare.rps;
			out.push(`  ${name.padEnd(34)} ${ratio.toFixed(3)}  ${ratio >= t.minRatio ? "MET" : "NOT MET"}`);
		}
	}
	const bad = rows.filter(r => failures(r.ours) + failures(r.bare) > 0);
	if (bad.length) {
		out.push("");
		out.push("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
		out.push("!!! INVALID RUN: some requests failed; the figures above measure errors, not work.");
		for (const r of bad) {
			for (const [who, x] of [["ours", r.ours], ["bare", r.bare]] as const) {
				if (!failures(x)) continue;
				out.push(`!!! ${LABELS[r.deployment]} ${r.request} (${who}): non-2xx ${x.non2xx} ${JSON.stringify(x.statusCodes)}, errors ${x.errors}, timeouts ${x.timeouts}, mismatches ${x.mismatches}`);
				if (x.firstError) out.push(`!!!   first error: ${x.firstError}`);
				if (x.firstMismatch) out.push(`!!!   first mismatching body: ${x.firstMismatch}`);
			}
		}
		out.push("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
	}
	process.stdout.write(out.join("\n") + "\n");
	return bad.length === 0;
}

// ------------------------------------------------------------------ main

interface TimelineEntry {
	process: string;
	label: string;
	/** ms since the server process was spawned (≈ since its profile started). */
	fromMs: number;
	toMs: number;
}

async function main(): Promise<number> {
	if (!fs.existsSync(path.join(DIST, "moleculer.config.js"))) throw new Error("dist/ is missing: run `npm run build` (npm run bench does)");
	for (const d of ONLY) if (!["inproc", "nats", "cm", "groups", "tasks", "webhooks", "vpn", "stats"].includes(d)) throw new Error(`BENCH_ONLY: unknown part '${d}'`);
	for (const r of REQUESTS) if (r !== "list" && r !== "item" && r !== "root") throw new Error(`BENCH_REQUESTS: unknown request '${r}'`);
	if (PROFILE_DIR) fs.mkdirSync(PROFILE_DIR, { recursive: true });

	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-ctl-bench-"));
	tempDirs.push(tmp);
	const log = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

	let valid = true;
	if (READ_DEPLOYMENTS.length) valid = await benchReads(tmp, log);
	if (ONLY.includes("cm")) {
		const cm = await benchCm(path.join(tmp, "cm-data"), log);
		process.stdout.write(`\ncm-gateway bench — node ${process.version}, ${os.cpus().length} cpu, salt-api simulator in the bench process\n\n${cm.report}\n`);
		valid &&= cm.valid;
	}
	if (ONLY.includes("groups")) {
		const groups = await benchGroups(path.join(tmp, "groups-data"), log);
		process.stdout.write(`\ngroups bench — node ${process.version}, ${os.cpus().length} cpu\n\n${groups.report}\n`);
		valid &&= groups.valid;
	}
	if (ONLY.includes("tasks")) {
		const tasks = await benchTasks(path.join(tmp, "tasks-data"), log);
		process.stdout.write(`\nscheduler bench — node ${process.version}, ${os.cpus().length} cpu\n\n${tasks.report}\n`);
		valid &&= tasks.valid;
	}
	if (ONLY.includes("webhooks")) {
		const webhooks = await benchWebhooks(path.join(tmp, "webhooks-data"), log);
		process.stdout.write(`\nwebhooks bench — node ${process.version}, ${os.cpus().length} cpu\n\n${webhooks.report}\n`);
		valid &&= webhooks.valid;
	}
	if (ONLY.includes("vpn")) {
		const vpn = await benchVpn(path.join(tmp, "vpn-data"), log);
		process.stdout.write(`\nVPN bench — node ${process.version}, ${os.cpus().length} cpu, Pritunl simulator in the bench process\n\n${vpn.report}\n`);
		valid &&= vpn.valid;
	}
	if (ONLY.includes("stats")) {
		const stats = await benchStats(log);
		process.stdout.write(`\nstatistics bench — node ${process.version}, ${os.cpus().length} cpu, stats service on NeDB in memory\n\n${stats.report}\n`);
		valid &&= stats.valid;
	}
	await (await benchNatsIfStarted())?.stop();
	return valid ? 0 : 1;
}

/** The read paths (list and item), in each deployment of BENCH_ONLY, next to the bare server. */
async function benchReads(tmp: string, log: (msg: string) => void): Promise<boolean> {
	log(`seeding ${HOSTS} hosts through hosts.upsertMany (batches of ${SEED_BATCH}) into ${tmp}/seed ...`);
	const seedInfo = await seed(path.join(tmp, "seed"));
	log(`seeded in ${seedInfo.seconds.toFixed(1)}s (avg host ${fmtNum(seedInfo.avgDocBytes)} B, grain ${fmtNum(seedInfo.avgGrainBytes)} B)`);

	const rows: Row[] = [];
	const timeline: TimelineEntry[] = [];
	let nats: Nats | null = null;
	for (const deployment of READ_DEPLOYMENTS as Deployment[]) {
		const dataDir = path.join(tmp, `${deployment}-data`);
		fs.cpSync(seedInfo.dir, dataDir, { recursive: true });
		if (deployment === "nats" && !nats) {
			nats = await benchNats();
			log(`NATS at ${nats.url}${nats.external ? "" : " (started for this run)"}`);
		}
		const namespace = `bench-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
		log(`${LABELS[deployment]}: starting (${deployment === "inproc" ? "one process, all services" : `gateway + data services over NATS, namespace ${namespace}`}) ...`);
		const running = await startDeployment(deployment, dataDir, namespace, nats);
		let bare: { base: string; proc: Proc } | null = null;
		try {
			const captured: Captured[] = [];
			for (const request of REQUESTS as RequestName[]) captured.push(await capture(running.base, request, tmp, deployment));
			bare = await startBare(captured, tmp, deployment);
			for (const c of captured) {
				log(`${LABELS[deployment]} ${c.request}: fleet-ctl (${c.body.length} B, ${CONNECTIONS} connections, ${WARMUP}s warm-up + ${DURATION}s) ...`);
				const natsPid = deployment === "nats" ? (nats?.child?.pid ?? findPidByName("nats-server")) : undefined;
				const ours = await load(running.base + c.path, c.bodyFile, running.servers.map(p => p.child.pid ?? 0), natsPid);
				for (const s of running.servers) timeline.push({ process: s.name, label: `${c.request} (measured phase)`, fromMs: ours.measuredFrom - s.spawnedAt, toMs: ours.measuredTo - s.spawnedAt });
				log(`  ${fmtNum(ours.rps)} req/s, p50 ${fmtNum(ours.p50, 2)} ms, p99 ${fmtNum(ours.p99, 2)} ms${failures(ours) ? `, ${failures(ours)} FAILURES` : ""}`);
				log(`${LABELS[deployment]} ${c.request}: bare node:http ...`);
				const b = await load(bare.base + c.path, c.bodyFile, [bare.proc.child.pid ?? 0]);
				log(`  ${fmtNum(b.rps)} req/s, p50 ${fmtNum(b.p50, 2)} ms, p99 ${fmtNum(b.p99, 2)} ms${failures(b) ? `, ${failures(b)} FAILURES` : ""}`);
				rows.push({ deployment, request: c.request, bytes: c.body.length, ours, bare: b });
			}
		} finally {
			await Promise.all([running.stop(), bare ? stopProc(bare.proc) : Promise.resolve()]);
		}
	}
	if (PROFILE_DIR) {
		fs.writeFileSync(path.join(PROFILE_DIR, "timeline.json"), JSON.stringify(timeline, null, 2));
		log(`CPU profiles and timeline.json in ${PROFILE_DIR} (summarize: node dist/bench/profile-top.js ${PROFILE_DIR}/inproc-all.cpuprofile)`);
	}
	return report(rows, seedInfo);
}

main()
	.then(
		code => cleanup().then(() => code),
		async err => {
			process.stderr.write(`\nbench FAILED: ${(err as Error)?.stack ?? err}\n`);
			await cleanup();
			return 1;
		},
	)
	.then(code => process.exit(code));
