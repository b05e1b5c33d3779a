/**
 * The scheduler on three replicas on shared storage, on both legs of test/support/replicas.ts (brokers in one
 * process on one NeDB directory; processes over NATS on MongoDB): three replicas run the tasks service, next to the
 * cm-gateway and the other services in a fourth and the API gateway in a fifth. 300 tasks fall due within three
 * seconds; one tasks replica ends in the middle (SIGKILL on the process leg). Every task must run exactly once,
 * counted at the salt-api simulator, and each task's record must say its run started (none refused by a busy
 * cm-gateway and recorded as failed).
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { ALL_SERVICES } from "../support/harness";
import { describeReplicated } from "../support/replicas";
import { request, eventually } from "../support/http";
import { formatHttpDate } from "../../lib/eve/dates";

const TASKS = 300;

describeReplicated("the scheduler on three replicas", legOf => {
	it(`runs ${TASKS} tasks due within seconds exactly once each, though a replica ends mid-way`, async () => {
		const leg = legOf();
		const sim = new SaltApiSimulator({
			minions: 20,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceIntervalMs: 3_600_000,
		});
		leg.track(sim);
		await sim.start();
		const env = {
			...(await leg.env("sched")),
			...sim.cmApiEnv,
			CM_SYNC_INTERVAL_MS: "3600000",
			TASK_LEASE_MS: "2000",
		};
		leg.run(
			ALL_SERVICES().filter(s => s !== "api" && s !== "tasks"),
			env,
		);
		const replicas = [leg.run(["tasks"], env), leg.run(["tasks"], env), leg.run(["tasks"], env)];
		const api = await leg.run(["api"], env).api();
		await eventually(
			async () =>
				(await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total ===
				sim.minionIds().length
					? true
					: undefined,
			60_000,
			"the API and the inventory",
		);

		const minions = sim.upMinions();
		const base = Math.ceil(Date.now() / 1000) * 1000 + 5000;
		const tasks = Array.from({ length: TASKS }, (_, i) => ({
			name: `d-${i}`,
			fun: "test.kwarg",
			kwarg: { n: i },
			tgt: [minions[i % minions.length]],
			start: formatHttpDate(new Date(base + (i % 3) * 1000)),
		}));
		sim.resetExecutions();
		const created = await request("POST", `${api}/tasks`, { body: tasks });
		expect(created.status).toBe(201);

		// Kill one replica while the runs fall due (not an oracle: time passing up to the due times).
		await new Promise(r => setTimeout(r, base + 1200 - Date.now()));
		await replicas[0].kill();

		// Until the cluster notices the killed node (heartbeats), a read balanced to it times out: such polls just count as "not yet".
		const finished = async () =>
			(await request("GET", `${api}/tasks?where=${encodeURIComponent('{"status":"finished"}')}&max_results=1`)).body
				?._meta?.total as number | undefined;
		await eventually(
			async () => ((await finished()) === TASKS ? true : undefined),
			60_000,
			`all ${TASKS} tasks to finish`,
		);
		// A one-shot task is finished once its run is claimed; the run is done once its result is recorded (none pending).
		const total = async (where: object) =>
			(await request("GET", `${api}/tasks?where=${encodeURIComponent(JSON.stringify(where))}&max_results=1`)).body
				?._meta?.total as number | undefined;
		await eventually(
			async () => ((await total({ pending: { $exists: true } })) === 0 ? true : undefined),
			60_000,
			"every run recorded (none pending)",
		);
		// Each run started: none failed because the cm-gateway was busy (its bulkhead refuses beyond 32 + 256 calls).
		const outcomes: Record<string, number> = {};
		for (const status of ["started", "no_minions", "failed", "skipped", "waiting", "awaiting_approval"]) {
			const n = (await total({ "last_run.status": status })) ?? 0;
			if (n) outcomes[status] = n;
		}
		if (process.env.TEST_LOG)
			console.log(
				"failed:",
				JSON.stringify(
					(
						await request(
							"GET",
							`${api}/tasks?where=${encodeURIComponent('{"last_run.status":"failed"}')}&max_results=3`,
						)
					).body?._items?.map((t: { last_run: unknown }) => t.last_run),
				),
			);
		expect(outcomes).toEqual({ started: TASKS });
		await eventually(
			async () => (sim.executions().length >= TASKS ? true : undefined),
			10_000,
			"every execution at the simulator",
		);

		const runs = new Map<number, number>();
		for (const e of sim.executions().filter(e => e.fun === "test.kwarg")) {
			const kw = e.arg.find(a => a && typeof a === "object") as { n?: number } | undefined;
			if (typeof kw?.n === "number") runs.set(kw.n, (runs.get(kw.n) ?? 0) + 1);
		}
		const missed = tasks.map((_, i) => i).filter(i => !runs.has(i));
		const twice = [...runs].filter(([, count]) => count > 1).map(([i]) => i);
		expect({ missed, twice }).toEqual({ missed: [], twice: [] });
		if (process.env.TEST_LOG)
			console.log(
				"takeovers:",
				replicas.slice(1).map(r => r.log().split("taking over run").length - 1),
			);
		expect(runs.size).toBe(TASKS);
	}, 150_000);
});
