/**
 * The scheduler part of `npm run bench`: BENCH_TASKS (default 10,000) one-shot tasks fall due within one
 * minute. With MONGO_URI set, three tasks replicas run on that database (each its own process, over NATS);
 * without it, one replica on NeDB (NeDB files belong to one process). The cm-gateway, the other services
 * and the salt-api simulator (200 minions) run beside them.
 *
 * Reported: lateness of each run (when the simulator saw the job published, minus the task's due time),
 * p50/p99/max; runs executed twice and runs never executed (both must be 0); database operations of the
 * tasks replicas per run; and, as the baseline, the lateness a scheduler that looks once a minute (the
 * service the spec describes) would have for the same due times.
 */
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { SaltApiSimulator } from "../test/simulators/salt-api";
import { formatHttpDate } from "../lib/eve/dates";
import type { StoreOps } from "../lib/storage/store";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	procLogs,
	quantile,
	runProductionCommand,
	serviceNames,
	sleep,
	stopProc,
	waitForHttp200,
	type Proc,
} from "./support";

const TASKS = envInt("BENCH_TASKS", 10_000);
const WINDOW_MS = 60_000;

export async function benchTasks(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const replicas = process.env.MONGO_URI ? 3 : 1;
	const sim = new SaltApiSimulator({
		minions: 200,
		timeout: 5,
		gatherJobTimeout: 0,
		latencyMs: [2, 20],
		presenceIntervalMs: 3_600_000,
		maxJobs: TASKS * 2,
	});
	await sim.start();
	const { nats, namespace, base, env } = await benchCluster("tasks", dataDir, {
		...sim.cmApiEnv,
		CM_SYNC_INTERVAL_MS: "3600000",
		CM_API_CONCURRENCY: "16",
		...(process.env.MONGO_URI ? { MONGO_URI: process.env.MONGO_URI, CTL_SECRET_KEY: "bench" } : {}),
	});
	const procs: Proc[] = [];
	const lines: string[] = [];
	let valid = true;
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-tasks-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	try {
		// NeDB: the tasks service shares the data process (one process owns the files).
		const tasksApart = replicas > 1;
		const profile = process.env.BENCH_PROFILE
			? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`, "--cpu-prof-name=tasks-data.cpuprofile"]
			: [];
		procs.push(
			runProductionCommand(
				"tasks-data",
				serviceNames().filter(s => s !== "api" && (!tasksApart || s !== "tasks")),
				env,
				profile,
			),
		);
		if (tasksApart) for (let i = 0; i < replicas; i++) procs.push(runProductionCommand(`tasks-${i}`, ["tasks"], env));
		procs.push(runProductionCommand("tasks-api", ["api"], env));
		await broker.start();
		await broker.waitForServices(["tasks", "cm-gateway", "hosts", "api"], 120_000);
		await waitForHttp200(`${base}/api/settings/0`, 120_000, procs);
		for (let i = 0; !(await broker.call<{ hosts: number }>("cm-gateway.sync").catch(() => null)); i++)
			if (i > 50) throw new Error("no inventory");
		const minions = sim.upMinions();

		log(
			`tasks: creating ${TASKS} one-shot tasks due within one minute (${replicas} tasks replica${replicas > 1 ? "s" : ""}${process.env.MONGO_URI ? " on MONGO_URI" : " on NeDB"}) ...`,
		);
		const created = Date.now();
		const first = Math.ceil((created + 20_000 + TASKS * 2) / 1000) * 1000;
		const due = Array.from({ length: TASKS }, (_, i) => first + Math.floor((i * WINDOW_MS) / TASKS / 1000) * 1000);
		for (let from = 0; from < TASKS; from += 500) {
			const body = due.slice(from, from + 500).map((d, k) => ({
				name: `bench-${from + k}`,
				fun: "test.kwarg",
				kwarg: { n: from + k },
				tgt: [minions[(from + k) % minions.length]],
				start: formatHttpDate(new Date(d)),
			}));
			const res = await apiJson(base, "POST", "/api/tasks", body);
			if (res.status !== 201)
				throw new Error(`POST /api/tasks answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
		}
		if (Date.now() > first) throw new Error("creating the tasks took longer than the lead time; lower BENCH_TASKS");
		const opsOf = async () => {
			const nodes = broker.registry
				.getServiceList({ onlyAvailable: true })
				.filter(s => s.name === "tasks")
				.map(s => s.nodeID);
			const stats = (await Promise.all(nodes.map(nodeID => broker.call("tasks.storeStats", {}, { nodeID })))) as Array<{
				ops: StoreOps | null;
			}>;
			return stats.reduce((sum, s) => sum + Object.values(s.ops ?? {}).reduce((a, b) => a + b, 0), 0);
		};
		const opsBefore = await opsOf();
		sim.resetExecutions();
		log(`tasks: waiting for the runs (due from ${new Date(first).toISOString()} for a minute) ...`);
		const deadline = first + WINDOW_MS + 60_000;
		while (sim.executions().filter(e => e.fun === "test.kwarg").length < TASKS && Date.now() < deadline)
			await sleep(500);
		await sleep(3000); // runs sent twice would show now
		const opsAfter = await opsOf();

		const seen = new Map<number, number[]>();
		for (const e of sim.executions()) {
			if (e.fun !== "test.kwarg") continue;
			const kw = e.arg.find(a => a && typeof a === "object") as { n?: number } | undefined;
			if (typeof kw?.n === "number") seen.set(kw.n, [...(seen.get(kw.n) ?? []), e.atMs]);
		}
		const lateness: number[] = [];
		let twice = 0;
		for (const [n, times] of seen) {
			if (times.length > 1) twice++;
			lateness.push(Math.min(...times) - due[n]);
		}
		const missed = TASKS - seen.size;
		if (twice || missed) valid = false;
		// The baseline: a scheduler that looks once a minute at a random phase runs a task up to a minute late.
		const phase = Math.random() * 60_000;
		const minutely = due.map(d => Math.ceil((d - phase) / 60_000) * 60_000 + phase - d);
		lines.push(
			`Scheduler: ${fmt(TASKS)} one-shot tasks due within one minute, ${replicas} tasks replica${replicas > 1 ? "s" : ""} (${process.env.MONGO_URI ? "MONGO_URI" : "NeDB, one process"}), salt-api simulator with 200 minions:`,
			"",
			"| scheduler | lateness p50 ms | p99 ms | max ms | run twice | never run | store ops per run |",
			"|---|---|---|---|---|---|---|",
			`| fleet-ctl | ${fmt(quantile(lateness, 0.5))} | ${fmt(quantile(lateness, 0.99))} | ${fmt(Math.max(...lateness))} | ${twice} | ${missed} | ${fmt((opsAfter - opsBefore) / TASKS, 1)} |`,
			`| looking once a minute (the spec's service; computed for the same due times) | ${fmt(quantile(minutely, 0.5))} | ${fmt(quantile(minutely, 0.99))} | ${fmt(Math.max(...minutely))} | – | – | – |`,
			"",
			`target: p99 lateness under 1 s: ${quantile(lateness, 0.99) < 1000 ? "met" : "NOT MET"}; duplicates and misses 0: ${twice || missed ? "NOT MET" : "met"}`,
			"",
		);
	} catch (err) {
		throw new Error(`${(err as Error).message}\n${procLogs(...procs)}`);
	} finally {
		await broker.stop().catch(() => undefined);
		await Promise.all(procs.map(p => stopProc(p)));
		await sim.stop();
	}
	return { report: lines.join("\n"), valid };
}
