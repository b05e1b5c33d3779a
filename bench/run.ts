/**
 * `npm run bench`: throughput and latency of the two hot read paths of the Eve API, measured through
 * the HTTP gateway on the compiled build, each next to a bare node:http server that answers the same
 * bytes (the ceiling on this machine for this response size).
 *
 *   deployments  inproc: every service in one process (the production command, no transporter)
 *                nats:   the gateway in one process, the data services in another, over NATS
 *   caches       on:     as shipped (a repeated read is served from the collection's and the gateway's cache)
 *                off:    READ_CACHE_MS=0, every read reaches the storage (and over NATS, the transporter)
 *   requests     list:     GET /api/hosts?max_results=25&projection={"grain":0}
 *                item:     GET /api/hosts/<a fixed existing host>
 *                filtered: GET /api/hosts?where={"status":"down"}&max_results=25&projection={"grain":0},
 *                          caches off only (a `where` that misses every cache), BENCH_FILTER_CONNECTIONS
 *                          connections (default 32), then once more with one connection (its latency)
 *
 * Every read is also measured on the stack's floor (bench/floor-server.ts: Moleculer and moleculer-web with
 * fleet-ctl's metrics settings, answering the same bytes with no fleet-ctl code; over NATS from a second process
 * for the NATS reads with the caches off), so that a ratio target is read against what the fixed stack can reach
 * on this machine for a routed request. A cached read is not routed: the gateway sends its kept answer first
 * (services/api/kept-reads.ts), so it can beat the floor. Each line measures fleet-ctl, then the bare server,
 * then the floor, in the same run.
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
 *                      BENCH_EXEC_RUNS), scale (the rows of the real 1,000-minion run on the simulator, and the
 *                      start cost of the master's nodegroups at 10,000 hosts, bench/scale.ts; BENCH_SCALE_MINIONS,
 *                      BENCH_SCALE_ROUNDS, BENCH_SCALE_IDLE_S, BENCH_NODEGROUP_MINIONS, BENCH_NODEGROUPS), groups (resolution, memberships and the graph, bench/groups.ts),
 *                      jobs (the job history at 1,000,000 actions records, bench/jobs.ts; BENCH_JOB_RECORDS),
 *                      rollouts (a rollout's overhead per batch at 10,000 minions, bench/rollouts.ts;
 *                      BENCH_ROLLOUT_MINIONS), conformity (checks of 10,000 hosts × 200 states: bytes stored
 *                      per check, the fleet view, bench/conformity.ts; BENCH_CONF_HOSTS, BENCH_CONF_STATES),
 *                      governance (a run's cost of maintenance windows and approval policies, bench/governance.ts;
 *                      BENCH_GOV_MINIONS, BENCH_GOV_RULES, BENCH_GOV_RUNS),
 *                      tasks (the scheduler, bench/tasks.ts; BENCH_TASKS; three replicas when MONGO_URI is
 *                      set), webhooks (deliveries next to hanging receivers, bench/webhooks.ts;
 *                      BENCH_ALERTS, BENCH_HANGING), vpn (the VPN sync against the Pritunl simulator, bench/vpn.ts);
 *                      stats (snapshots and the aggregated statistics over 30 days of history,
 *                      bench/stats.ts; BENCH_STATS_HOSTS, BENCH_STATS_DAYS, BENCH_STATS_CHANGE); ui (the hosts page at 50,000 hosts
 *                      in Chromium: time to first rows and to a filtered page, bench/ui.ts; BENCH_UI_HOSTS, BENCH_UI_ROUNDS);
 *                      unindexed (a filter no index serves, a new value each request, against the same filter
 *                      written by hand over the same hosts in memory, bench/unindexed.ts; BENCH_UNINDEXED_ROUNDS);
 *                      engines (the embedded engine's filtered reads against node:sqlite on the same hosts, in
 *                      process, bench/engines.ts; BENCH_ENGINE_ROUNDS);
 *                      default all seventeen
 *   BENCH_REQUESTS     comma list of requests to measure: list,item,filtered (default all three); `root`
 *                      (GET /api/, an action that does nothing) shows the floor of the gateway path
 *   BENCH_CACHES       comma list of read-cache settings to run each deployment with: on,off (default both)
 *   BENCH_CURVE        host counts of the cost curve (part `curve`, bench/curve.ts; default 1000,10000,50000)
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
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { hostId } from "./hosts";
import type { Nats } from "../test/support/net";
import type { LoadResult } from "./load";
import { benchCm } from "./cm";
import { benchGroups } from "./groups";
import { benchJobs } from "./jobs";
import { benchRollouts } from "./rollouts";
import { benchScale } from "./scale";
import { benchConformity } from "./conformity";
import { benchGovernance } from "./governance";
import { benchTasks } from "./tasks";
import { benchWebhooks } from "./webhooks";
import { benchVpn } from "./vpn";
import { benchStats } from "./stats";
import { benchCurve } from "./curve";
import { benchUi } from "./ui";
import { benchUnindexed } from "./unindexed";
import { benchEngines } from "./engines";
import { DIST, envInt, benchNats, benchNatsIfStarted, cleanup, stopProc, tempDirs } from "./support";
import {
	CONNECTIONS,
	DURATION,
	PROFILE_DIR,
	WARMUP,
	capture,
	findPidByName,
	load,
	paths,
	seed,
	startBare,
	startDeployment,
	type Cache,
	type Captured,
	type CpuUse,
	type Deployment,
	type Replayer,
	type RequestName,
	type SeedInfo,
} from "./reads";

/** The pids of a replaying server's processes. */
const pids = (r: Replayer) => r.procs.map(p => p.child.pid ?? 0);

const HOSTS = envInt("BENCH_HOSTS", 10_000);
const PARTS = [
	"inproc",
	"nats",
	"unindexed",
	"engines",
	"curve",
	"cm",
	"scale",
	"groups",
	"jobs",
	"rollouts",
	"conformity",
	"governance",
	"tasks",
	"webhooks",
	"vpn",
	"stats",
	"ui",
];
const ONLY = (process.env.BENCH_ONLY || PARTS.join(",")).split(",").map(s => s.trim());
const READ_DEPLOYMENTS = ONLY.filter(d => d === "inproc" || d === "nats") as Deployment[];
const REQUESTS = (process.env.BENCH_REQUESTS || "list,item,filtered").split(",").map(s => s.trim());
const CACHES = (process.env.BENCH_CACHES || "on,off").split(",").map(s => s.trim()) as Cache[];
const FILTER_CONNECTIONS = envInt("BENCH_FILTER_CONNECTIONS", 32);
const FIXED_HOST = hostId(Math.min(4242, HOSTS - 1));

/** Targets (issue 20): requests/s through fleet-ctl over requests/s of the bare server; p99 and p50 latencies in ms. */
const TARGETS: Array<{
	deployment: Deployment;
	cache: Cache;
	request: RequestName;
	minRatio?: number;
	maxP99?: number;
	maxP50?: number;
}> = [
	{ deployment: "inproc", cache: "on", request: "list", minRatio: 0.5 },
	{ deployment: "inproc", cache: "on", request: "item", minRatio: 0.5 },
	{ deployment: "nats", cache: "on", request: "list", minRatio: 0.5 },
	{ deployment: "nats", cache: "off", request: "list", minRatio: 0.5 },
	{ deployment: "nats", cache: "off", request: "item", minRatio: 0.5 },
	{ deployment: "inproc", cache: "off", request: "filtered", minRatio: 0.2, maxP99: 20 },
	{ deployment: "inproc", cache: "off", request: "filtered1", maxP50: 2 },
];

// ------------------------------------------------------------------ reporting

interface Row {
	deployment: Deployment;
	cache: Cache;
	connections: number;
	request: RequestName;
	bytes: number;
	ours: LoadResult & { cpu: CpuUse };
	bare: LoadResult & { cpu: CpuUse };
	/** The stack's floor (bench/floor-server.ts) answering the same bytes: in the gateway, or over NATS (floor-nats). */
	floor: LoadResult & { cpu: CpuUse };
	floorKind: "floor" | "floor-nats";
}

const LABELS: Record<Deployment, string> = { inproc: "in-process", nats: "over NATS" };
const REQUEST_LABELS: Record<RequestName, string> = {
	list: "list",
	item: "item",
	root: "root",
	filtered: "filtered list",
	filtered1: "filtered list, 1 conn",
};

function label(r: { deployment: Deployment; cache: Cache; request: RequestName }): string {
	return `${LABELS[r.deployment]} ${REQUEST_LABELS[r.request]}${r.cache === "off" ? " (caches off)" : ""}`;
}

function fmtNum(n: number, digits = 0): string {
	return Number.isFinite(n)
		? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
		: "-";
}

function table(header: string[], rows: string[][], alignLeft = 1): string {
	const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)));
	const line = (cells: string[]) =>
		cells.map((c, i) => (i < alignLeft ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
	return [line(header), widths.map(w => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

function failures(r: LoadResult): number {
	return r.non2xx + r.errors + r.timeouts + r.mismatches;
}

function report(rows: Row[], seedInfo: SeedInfo): boolean {
	const out: string[] = [];
	out.push("");
	out.push(
		`fleet-ctl bench — node ${process.version}, ${os.cpus().length} cpu (${os.cpus()[0]?.model ?? "?"}), ${CONNECTIONS} connections, ${WARMUP}s warm-up + ${DURATION}s measured per line`,
	);
	out.push(
		`storage: NeDB, ${seedInfo.hosts.toLocaleString("en-US")} hosts (avg ${fmtNum(seedInfo.avgDocBytes)} B per host as JSON, grain ${fmtNum(seedInfo.avgGrainBytes)} B), seeded in ${seedInfo.seconds.toFixed(1)}s`,
	);
	const p = paths(FIXED_HOST);
	out.push(`list = GET ${p.list}`);
	out.push(`item = GET ${p.item}`);
	out.push(
		`filtered list = GET ${p.filtered} (${fmtNum(seedInfo.down)} hosts down; ${FILTER_CONNECTIONS} connections, then 1)`,
	);
	out.push("");
	out.push(
		table(
			["scenario", "body B", "req/s", "p50 ms", "p99 ms", "bare req/s", "bare p50", "bare p99", "ratio"],
			rows.map(r => [
				label(r),
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
	out.push(
		"CPU over the measured phase, % of one core (2 cores in all; a server at ~100% is saturated, a load generator at ~100% caps the figure):",
	);
	const cpu = (v: number) => (Number.isFinite(v) ? `${v.toFixed(0)}%` : "-");
	out.push(
		table(
			[
				"scenario",
				"fleet-ctl processes",
				"CPU µs/req",
				"NATS server",
				"loader (ours)",
				"bare server",
				"CPU µs/req",
				"loader (bare)",
			],
			rows.map(r => [
				label(r),
				r.ours.cpu.perServer.length === 2
					? `${cpu(r.ours.cpu.server)} (data ${cpu(r.ours.cpu.perServer[0])} + gateway ${cpu(r.ours.cpu.perServer[1])})`
					: cpu(r.ours.cpu.server),
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
		if (r.bare.cpu.loader >= 90)
			out.push(
				`  note: ${label(r)}: the load generator was the bottleneck of the bare run (${cpu(r.bare.cpu.loader)}), so the bare figure understates the ceiling and the ratio flatters fleet-ctl.`,
			);
	}
	out.push("");
	out.push("failures (ours / bare) — all must be 0:");
	out.push(
		table(
			["scenario", "requests", "non-2xx", "errors", "timeouts", "body mismatches"],
			rows.map(r => [
				label(r),
				`${fmtNum(r.ours.requests)} / ${fmtNum(r.bare.requests)}`,
				`${r.ours.non2xx} / ${r.bare.non2xx}`,
				`${r.ours.errors} / ${r.bare.errors}`,
				`${r.ours.timeouts} / ${r.bare.timeouts}`,
				`${r.ours.mismatches} / ${r.bare.mismatches}`,
			]),
		),
	);
	out.push("");
	out.push("targets (ratio = requests/s through fleet-ctl over requests/s of the bare server; latencies in ms):");
	for (const t of TARGETS) {
		const r = rows.find(x => x.deployment === t.deployment && x.cache === t.cache && x.request === t.request);
		if (!r) {
			out.push(`  ${label(t).padEnd(48)} not measured in this run`);
			continue;
		}
		const checks: Array<[string, number, boolean]> = [];
		if (t.minRatio !== undefined)
			checks.push([`ratio >= ${t.minRatio}`, r.ours.rps / r.bare.rps, r.ours.rps / r.bare.rps >= t.minRatio]);
		if (t.maxP99 !== undefined) checks.push([`p99 < ${t.maxP99}`, r.ours.p99, r.ours.p99 < t.maxP99]);
		if (t.maxP50 !== undefined) checks.push([`p50 <= ${t.maxP50}`, r.ours.p50, r.ours.p50 <= t.maxP50]);
		const floorRatio = r.floor.rps / r.bare.rps;
		const floorNote =
			r.cache === "on"
				? "; a cached read is answered before routing, so it can go beyond it"
				: floorRatio < (t.minRatio ?? 0)
					? ", under the target: no request routed by moleculer-web can meet it on this machine"
					: "";
		const floor =
			t.minRatio !== undefined
				? `  (the stack's floor for a routed read here: ${floorRatio.toFixed(3)}${floorNote})`
				: "";
		for (const [what, value, met] of checks)
			out.push(
				`  ${(label(t) + " " + what).padEnd(60)} ${value.toFixed(3)}  ${met ? "MET" : "NOT MET"}${what.startsWith("ratio") ? floor : ""}`,
			);
	}
	out.push("");
	out.push(
		"the stack's floor: Moleculer + moleculer-web with fleet-ctl's metrics settings and no fleet-ctl code, answering the same bytes (bench/floor-server.ts);",
	);
	out.push(
		"in the gateway's process for cached and in-process reads, over NATS from an action in a second process for the NATS reads with the caches off:",
	);
	out.push(
		table(
			[
				"scenario",
				"floor",
				"floor req/s",
				"floor CPU µs/req",
				"floor ÷ bare",
				"fleet-ctl ÷ floor",
				"fleet-ctl CPU µs/req over the floor's",
			],
			rows.map(r => {
				const f = r.floor;
				const cpuPerReq = (x: LoadResult & { cpu: CpuUse }) =>
					((x.cpu.server + (Number.isFinite(x.cpu.nats) ? x.cpu.nats : 0)) / 100 / x.rps) * 1e6;
				return [
					label(r),
					r.floorKind === "floor-nats" ? "over NATS" : "gateway",
					fmtNum(f.rps),
					fmtNum(cpuPerReq(f)),
					(f.rps / r.bare.rps).toFixed(3),
					(r.ours.rps / f.rps).toFixed(3),
					fmtNum(cpuPerReq(r.ours) - cpuPerReq(f)),
				];
			}),
		),
	);
	out.push(
		"  The floor is a request that moleculer-web routes: with the caches off, a target above `floor ÷ bare` cannot be met by any code on this stack on this machine,",
	);
	out.push(
		"  and `fleet-ctl ÷ floor` is what fleet-ctl's own code leaves of it. With the caches on, the gateway sends a kept answer before routing the read",
	);
	out.push(
		"  (services/api/kept-reads.ts): fleet-ctl can then go beyond the floor (a ratio over 1, a negative CPU difference).",
	);
	out.push("  CPU per request here counts the NATS server too where there is one.");
	const bad = rows.filter(r => failures(r.ours) + failures(r.bare) + failures(r.floor) > 0);
	if (bad.length) {
		out.push("");
		out.push("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
		out.push("!!! INVALID RUN: some requests failed; the figures above measure errors, not work.");
		for (const r of bad) {
			for (const [who, x] of [
				["ours", r.ours],
				["bare", r.bare],
				["floor", r.floor],
			] as const) {
				if (!failures(x)) continue;
				out.push(
					`!!! ${label(r)} (${who}): non-2xx ${x.non2xx} ${JSON.stringify(x.statusCodes)}, errors ${x.errors}, timeouts ${x.timeouts}, mismatches ${x.mismatches}`,
				);
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
	if (!fs.existsSync(path.join(DIST, "moleculer.config.js")))
		throw new Error("dist/ is missing: run `npm run build` (npm run bench does)");
	for (const d of ONLY) if (!PARTS.includes(d)) throw new Error(`BENCH_ONLY: unknown part '${d}'`);
	for (const r of REQUESTS)
		if (!["list", "item", "root", "filtered"].includes(r)) throw new Error(`BENCH_REQUESTS: unknown request '${r}'`);
	for (const c of CACHES) if (c !== "on" && c !== "off") throw new Error(`BENCH_CACHES: unknown setting '${c}'`);
	if (PROFILE_DIR) fs.mkdirSync(PROFILE_DIR, { recursive: true });

	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-ctl-bench-"));
	tempDirs.push(tmp);
	const log = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

	let valid = true;
	if (READ_DEPLOYMENTS.length) valid = await benchReads(tmp, log);
	if (ONLY.includes("unindexed")) {
		const unindexed = await benchUnindexed(path.join(tmp, "unindexed"), log);
		process.stdout.write(
			`\na filter no index serves, against the work's own limit — node ${process.version}, ${os.cpus().length} cpu, load average ${os
				.loadavg()
				.map(l => l.toFixed(1))
				.join(" ")}\n\n${unindexed.report}\n`,
		);
		valid &&= unindexed.valid;
	}
	if (ONLY.includes("engines")) {
		const engines = await benchEngines(log);
		process.stdout.write(
			`\nthe embedded engine against node:sqlite — node ${process.version}, ${os.cpus().length} cpu, load average ${os
				.loadavg()
				.map(l => l.toFixed(1))
				.join(" ")}\n\n${engines.report}\n`,
		);
		valid &&= engines.valid;
	}
	if (ONLY.includes("curve")) {
		const curve = await benchCurve(path.join(tmp, "curve"), log);
		process.stdout.write(
			`\ncost curve — node ${process.version}, ${os.cpus().length} cpu, in-process, caches off\n\n${curve.report}\n`,
		);
		valid &&= curve.valid;
	}
	if (ONLY.includes("cm")) {
		const cm = await benchCm(path.join(tmp, "cm-data"), log);
		process.stdout.write(
			`\ncm-gateway bench — node ${process.version}, ${os.cpus().length} cpu, salt-api simulator in the bench process\n\n${cm.report}\n`,
		);
		valid &&= cm.valid;
	}
	if (ONLY.includes("scale")) {
		const scale = await benchScale(path.join(tmp, "scale-data"), log);
		process.stdout.write(
			`\nscale bench (the real 1,004-minion run's rows) — node ${process.version}, ${os.cpus().length} cpu, salt-api simulator in the bench process\n\n${scale.report}\n`,
		);
		valid &&= scale.valid;
	}
	if (ONLY.includes("groups")) {
		const groups = await benchGroups(path.join(tmp, "groups-data"), log);
		process.stdout.write(`\ngroups bench — node ${process.version}, ${os.cpus().length} cpu\n\n${groups.report}\n`);
		valid &&= groups.valid;
	}
	if (ONLY.includes("jobs")) {
		const jobs = await benchJobs(path.join(tmp, "jobs-data"), log);
		process.stdout.write(`\njob history bench — node ${process.version}, ${os.cpus().length} cpu\n\n${jobs.report}\n`);
		valid &&= jobs.valid;
	}
	if (ONLY.includes("rollouts")) {
		const rollouts = await benchRollouts(path.join(tmp, "rollouts-data"), log);
		process.stdout.write(
			`\nrollouts bench — node ${process.version}, ${os.cpus().length} cpu, salt-api simulator in the bench process\n\n${rollouts.report}\n`,
		);
		valid &&= rollouts.valid;
	}
	if (ONLY.includes("conformity")) {
		const conformity = await benchConformity(path.join(tmp, "conformity-data"), log);
		process.stdout.write(
			`\nconformity bench — node ${process.version}, ${os.cpus().length} cpu\n\n${conformity.report}\n`,
		);
		valid &&= conformity.valid;
	}
	if (ONLY.includes("governance")) {
		const governance = await benchGovernance(path.join(tmp, "governance-data"), log);
		process.stdout.write(
			`\ngovernance bench — node ${process.version}, ${os.cpus().length} cpu, salt-api simulator in the bench process\n\n${governance.report}\n`,
		);
		valid &&= governance.valid;
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
		process.stdout.write(
			`\nVPN bench — node ${process.version}, ${os.cpus().length} cpu, Pritunl simulator in the bench process\n\n${vpn.report}\n`,
		);
		valid &&= vpn.valid;
	}
	if (ONLY.includes("stats")) {
		const stats = await benchStats(log);
		process.stdout.write(
			`\nstatistics bench — node ${process.version}, ${os.cpus().length} cpu, stats service on NeDB in memory\n\n${stats.report}\n`,
		);
		valid &&= stats.valid;
	}
	if (ONLY.includes("ui")) {
		const ui = await benchUi(path.join(tmp, "ui"), log);
		process.stdout.write(
			`\nhosts page bench — node ${process.version}, ${os.cpus().length} cpu, the built dashboard in Chromium\n\n${ui.report}\n`,
		);
		valid &&= ui.valid;
	}
	await (await benchNatsIfStarted())?.stop();
	return valid ? 0 : 1;
}

/** The read paths, in each deployment of BENCH_ONLY with each cache setting of BENCH_CACHES, each next to the bare server. */
async function benchReads(tmp: string, log: (msg: string) => void): Promise<boolean> {
	log(`seeding ${HOSTS} hosts through hosts.upsertMany into ${tmp}/seed ...`);
	const seedInfo = await seed(path.join(tmp, "seed"), HOSTS);
	log(
		`seeded in ${seedInfo.seconds.toFixed(1)}s (avg host ${fmtNum(seedInfo.avgDocBytes)} B, grain ${fmtNum(seedInfo.avgGrainBytes)} B, ${seedInfo.down} down)`,
	);

	const rows: Row[] = [];
	const timeline: TimelineEntry[] = [];
	let nats: Nats | null = null;
	for (const deployment of READ_DEPLOYMENTS) {
		for (const cache of CACHES) {
			// A filter is worth measuring only where it misses the caches; the one-connection run repeats it.
			const requests = REQUESTS.flatMap(r =>
				r !== "filtered" ? [r] : cache === "off" && deployment === "inproc" ? ["filtered", "filtered1"] : [],
			) as RequestName[];
			if (!requests.length) continue;
			const dataDir = path.join(tmp, `${deployment}-${cache}-data`);
			fs.cpSync(seedInfo.dir, dataDir, { recursive: true });
			if (deployment === "nats" && !nats) {
				nats = await benchNats();
				log(`NATS at ${nats.url}${nats.external ? "" : " (started for this run)"}`);
			}
			const namespace = `bench-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
			log(
				`${LABELS[deployment]}, caches ${cache}: starting (${deployment === "inproc" ? "one process, all services" : `gateway + data services over NATS, namespace ${namespace}`}) ...`,
			);
			const running = await startDeployment(deployment, cache, dataDir, namespace, nats, FIXED_HOST);
			let bare: Replayer | null = null;
			let floor: Replayer | null = null;
			try {
				const captured: Captured[] = [];
				for (const request of requests)
					captured.push(await capture(running.base, request, tmp, `${deployment}-${cache}`, seedInfo, FIXED_HOST));
				bare = await startBare(captured, tmp, `${deployment}-${cache}`);
				// The floor answers what fleet-ctl answers, from the process fleet-ctl answers it from: the gateway for
				// cached reads and in one process; over NATS with the caches off, an action in another process.
				const floorKind = deployment === "nats" && cache === "off" ? "floor-nats" : "floor";
				floor = await startBare(captured, tmp, `${deployment}-${cache}`, floorKind, nats?.url);
				for (const c of captured) {
					const connections =
						c.request === "filtered" ? FILTER_CONNECTIONS : c.request === "filtered1" ? 1 : CONNECTIONS;
					const name = label({ deployment, cache, request: c.request });
					log(
						`${name}: fleet-ctl (${c.body.length} B, ${connections} connections, ${WARMUP}s warm-up + ${DURATION}s) ...`,
					);
					const natsPid = deployment === "nats" ? (nats?.child?.pid ?? findPidByName("nats-server")) : undefined;
					const ours = await load(
						running.base + c.path,
						c.bodyFile,
						running.servers.map(p => p.child.pid ?? 0),
						natsPid,
						connections,
					);
					for (const s of running.servers)
						timeline.push({
							process: s.name,
							label: `${name} (measured phase)`,
							fromMs: ours.measuredFrom - s.spawnedAt,
							toMs: ours.measuredTo - s.spawnedAt,
						});
					log(
						`  ${fmtNum(ours.rps)} req/s, p50 ${fmtNum(ours.p50, 2)} ms, p99 ${fmtNum(ours.p99, 2)} ms${failures(ours) ? `, ${failures(ours)} FAILURES` : ""}`,
					);
					log(`${name}: bare node:http ...`);
					const b = await load(bare.base + c.path, c.bodyFile, pids(bare), undefined, connections);
					log(
						`  ${fmtNum(b.rps)} req/s, p50 ${fmtNum(b.p50, 2)} ms, p99 ${fmtNum(b.p99, 2)} ms${failures(b) ? `, ${failures(b)} FAILURES` : ""}`,
					);
					log(
						`${name}: the stack's floor (moleculer-web${floorKind === "floor-nats" ? " and an action over NATS" : ""}, no fleet-ctl code) ...`,
					);
					const f = await load(
						floor.base + c.path,
						c.bodyFile,
						pids(floor),
						floorKind === "floor-nats" ? natsPid : undefined,
						connections,
					);
					log(
						`  ${fmtNum(f.rps)} req/s, p50 ${fmtNum(f.p50, 2)} ms, p99 ${fmtNum(f.p99, 2)} ms${failures(f) ? `, ${failures(f)} FAILURES` : ""}`,
					);
					rows.push({
						deployment,
						cache,
						connections,
						request: c.request,
						bytes: c.body.length,
						ours,
						bare: b,
						floor: f,
						floorKind,
					});
				}
			} finally {
				await Promise.all([running.stop(), ...[bare, floor].flatMap(r => r?.procs ?? []).map(p => stopProc(p))]);
			}
		}
	}
	if (PROFILE_DIR) {
		fs.writeFileSync(path.join(PROFILE_DIR, "timeline.json"), JSON.stringify(timeline, null, 2));
		log(
			`CPU profiles and timeline.json in ${PROFILE_DIR} (summarize: node dist/bench/profile-top.js ${PROFILE_DIR}/inproc-all.cpuprofile)`,
		);
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
