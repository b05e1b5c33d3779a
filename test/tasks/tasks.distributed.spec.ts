/**
 * The scheduler on three replicas: three processes run the tasks service over the real NATS server on
 * shared storage (MONGO_URI: in CI the wire-protocol emulator, not MongoDB), next to the cm-gateway and
 * the other services in a fourth and the API gateway in a fifth. 300 tasks fall due within three
 * seconds; one tasks replica is killed with SIGKILL in the middle. Every task must run exactly once,
 * counted at the salt-api simulator, and each task's record must say its run started (none refused by a
 * busy cm-gateway and recorded as failed).
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { ALL_SERVICES, apiOf, ensureNats, runServices, stopProcs, uniqueMongoUri, type Nats, type Proc } from "../support/harness";
import { request, eventually } from "../support/http";
import { formatHttpDate } from "../../lib/eve/dates";

const mongoUri = process.env.MONGO_URI;
const TASKS = 300;

(mongoUri ? describe : describe.skip)(`the scheduler on three replicas over NATS${mongoUri ? "" : " (skipped: MONGO_URI is not set)"}`, () => {
	let sim: SaltApiSimulator;
	let nats: Nats;
	const procs: Proc[] = [];
	afterAll(async () => {
		await stopProcs(procs);
		await sim?.stop();
		await nats?.stop();
	});

	it(`runs ${TASKS} tasks due within seconds exactly once each, though a replica is killed mid-way`, async () => {
		sim = new SaltApiSimulator({ minions: 20, timeout: 1, gatherJobTimeout: 0, latencyMs: [2, 10], presenceIntervalMs: 3_600_000 });
		await sim.start();
		nats = await ensureNats();
		const env = {
			TRANSPORTER: nats.url,
			NAMESPACE: `sched-${process.pid}-${Date.now().toString(36)}`,
			MONGO_URI: uniqueMongoUri(mongoUri as string),
			CTL_SECRET_KEY: "sched-secret",
			PORT: "0", // the gateway binds a port of its own choosing, read back (apiOf)
			HOST: "127.0.0.1",
			...sim.cmApiEnv,
			CM_SYNC_INTERVAL_MS: "3600000",
			TASK_LEASE_MS: "2000",
		};
		procs.push(runServices(ALL_SERVICES().filter(s => s !== "api" && s !== "tasks"), env));
		const replicas = [runServices(["tasks"], env), runServices(["tasks"], env), runServices(["tasks"], env)];
		const gateway = runServices(["api"], env);
		procs.push(...replicas, gateway);
		const api = await apiOf(gateway);
		await eventually(async () => ((await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total === sim.minionIds().length ? true : undefined), 60_000, "the API and the inventory");

		const minions = sim.upMinions();
		const base = Math.ceil(Date.now() / 1000) * 1000 + 5000;
		const tasks = Array.from({ length: TASKS }, (_, i) => ({ name: `d-${i}`, fun: "test.kwarg", kwarg: { n: i }, tgt: [minions[i % minions.length]], start: formatHttpDate(new Date(base + (i % 3) * 1000)) }));
		sim.resetExecutions();
		const created = await request("POST", `${api}/tasks`, { body: tasks });
		expect(created.status).toBe(201);

		// Kill one replica while the runs fall due (not an oracle: time passing up to the due times).
		await new Promise(r => setTimeout(r, base + 1200 - Date.now()));
		replicas[0].child.kill("SIGKILL");

		// Until the cluster notices the killed node (heartbeats), a read balanced to it times out: such polls just count as "not yet".
		const finished = async () => (await request("GET", `${api}/tasks?where=${encodeURIComponent('{"status":"finished"}')}&max_results=1`)).body?._meta?.total as number | undefined;
		await eventually(async () => ((await finished()) === TASKS ? true : undefined), 60_000, `all ${TASKS} tasks to finish`);
		// A one-shot task is finished once its run is claimed; the run is done once its result is recorded (none pending).
		const total = async (where: object) => (await request("GET", `${api}/tasks?where=${encodeURIComponent(JSON.stringify(where))}&max_results=1`)).body?._meta?.total as number | undefined;
		await eventually(async () => ((await total({ pending: { $exists: true } })) === 0 ? true : undefined), 60_000, "every run recorded (none pending)");
		// Each run started: none failed because the cm-gateway was busy (its bulkhead refuses beyond 32 + 256 calls).
		const outcomes: Record<string, number> = {};
		for (const status of ["started", "no_minions", "failed", "skipped", "waiting", "awaiting_approval"]) {
			const n = (await total({ "last_run.status": status })) ?? 0;
			if (n) outcomes[status] = n;
		}
		if (process.env.TEST_LOG) console.log("failed:", JSON.stringify((await request("GET", `${api}/tasks?where=${encodeURIComponent('{"last_run.status":"failed"}')}&max_results=3`)).body?._items?.map((t: { last_run: unknown }) => t.last_run)));
		expect(outcomes).toEqual({ started: TASKS });
		await eventually(async () => (sim.executions().length >= TASKS ? true : undefined), 10_000, "every execution at the simulator");

		const runs = new Map<number, number>();
		for (const e of sim.executions().filter(e => e.fun === "test.kwarg")) {
			const kw = e.arg.find(a => a && typeof a === "object") as { n?: number } | undefined;
			if (typeof kw?.n === "number") runs.set(kw.n, (runs.get(kw.n) ?? 0) + 1);
		}
		const missed = tasks.map((_, i) => i).filter(i => !runs.has(i));
		const twice = [...runs].filter(([, count]) => count > 1).map(([i]) => i);
		expect({ missed, twice }).toEqual({ missed: [], twice: [] });
		if (process.env.TEST_LOG) console.log("takeovers:", replicas.slice(1).map(r => r.log.join("").split("taking over run").length - 1));
		expect(runs.size).toBe(TASKS);
	}, 150_000);
});
