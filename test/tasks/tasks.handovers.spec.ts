/**
 * The scheduler against a cm-gateway that can take only a few runs at once (its bulkhead: one call running, one
 * waiting; more are refused with "Queue is full"). A burst of tasks falling due in the same second must all run,
 * once each, counted at the salt-api simulator — none recorded as failed because the cm-gateway was busy:
 *  - a replica hands over at most TASK_HANDOVERS runs at once (the rest wait, unclaimed, for room);
 *  - a refusal by the bulkhead proves nothing ran, so the run is tried again like an unreachable salt-api.
 */
import type { Middleware } from "moleculer";
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, eventually, withQuery } from "../support/http";
import { formatHttpDate } from "../../lib/eve/dates";
import { SlowBackendBulkheads } from "../../lib/runtime/resilience";
import { configOf } from "../../lib/config";

describe("the task scheduler with a busy cm-gateway", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let hosts: string[] = [];
	/** Hand-overs the cm-gateway's bulkhead refused ("Queue is full"), seen where the scheduler calls it. */
	let refused = 0;
	const countRefusals: Middleware = {
		name: "CountRefusals",
		call(next: (...a: unknown[]) => Promise<unknown>) {
			return (action: unknown, ...rest: unknown[]) =>
				next(action, ...rest).catch((err: { type?: string }) => {
					if (action === "cm-gateway.runTask" && err?.type === "QUEUE_FULL") refused++;
					throw err;
				});
		},
	} as unknown as Middleware;
	const url = (path: string) => `${h.api}/${path}`;

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 6,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [20, 40],
			presenceIntervalMs: 3_600_000,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "500",
				TASK_LEASE_MS: "30000",
				TASK_MISFIRE_GRACE_MS: "60000",
				TASK_HANDOVERS: "2",
			},
			broker: { middlewares: [SlowBackendBulkheads({ concurrency: 1, maxQueueSize: 1 }), countRefusals] },
		});
		await eventually(
			async () =>
				(await request("GET", url("hosts?max_results=1"))).body._meta.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		hosts = sim.upMinions();
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
		delete process.env.TASK_HANDOVERS;
	});

	/** `count` one-shot tasks due in the same second; answers each task's record once every run is recorded. */
	const burst = async (label: string, count: number) => {
		sim.resetExecutions();
		const start = formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000));
		const body = Array.from({ length: count }, (_, i) => ({
			name: `${label}-${i}`,
			cm_client: "local_async",
			fun: "test.echo",
			kwarg: { text: `${label}-${i}` },
			tgt: [hosts[i % hosts.length]],
			start,
		}));
		const created = await request("POST", url("tasks"), { body });
		expect(created.status).toBe(201);
		const ids = (created.body._items as Array<{ _id: string }>).map(t => t._id);
		return eventually(
			async () => {
				const res = (
					await request("GET", url(withQuery("tasks", { where: { _id: { $in: ids } }, max_results: count })))
				).body;
				return res._items.length === count &&
					res._items.every((t: { last_run?: unknown; pending?: unknown }) => t.last_run && !t.pending)
					? (res._items as Array<{ name: string; last_run: { status: string; message?: string } }>)
					: undefined;
			},
			45_000,
			`every run of the ${label} burst recorded`,
		);
	};
	const ranOnce = (label: string, count: number) => {
		const texts = sim
			.jobs()
			.filter(j => j.fun === "test.echo")
			.map(j => JSON.stringify(j.arg));
		return Array.from({ length: count }, (_, i) => texts.filter(t => t.includes(`"${label}-${i}"`)).length);
	};

	it("hands over no more runs at once than TASK_HANDOVERS: a burst larger than the cm-gateway can take runs whole, none refused", async () => {
		refused = 0;
		const tasks = await burst("room", 16);
		expect(
			tasks
				.filter(t => t.last_run.status !== "started")
				.map(t => `${t.name}: ${t.last_run.status} ${t.last_run.message ?? ""}`),
		).toEqual([]);
		expect(ranOnce("room", 16)).toEqual(Array(16).fill(1));
		expect(refused).toBe(0);
	}, 60_000);

	it("tries a run the cm-gateway's bulkhead refused again (nothing ran), instead of recording it as failed", async () => {
		// More hand-overs at once than the bulkhead takes: some are refused, and must be tried again.
		// The running replica's setting, as a start with TASK_HANDOVERS=4 would have it (the configuration is read once).
		configOf(h.broker!).taskHandovers = 4;
		refused = 0;
		const tasks = await burst("refused", 8);
		expect(refused).toBeGreaterThan(0);
		expect(
			tasks
				.filter(t => t.last_run.status !== "started")
				.map(t => `${t.name}: ${t.last_run.status} ${t.last_run.message ?? ""}`),
		).toEqual([]);
		expect(ranOnce("refused", 8)).toEqual(Array(8).fill(1));
		const alerts = (await request("GET", url(withQuery("alerts", { where: { type: "task.failed" } })))).body._items;
		expect(alerts).toEqual([]);
	}, 60_000);
});
