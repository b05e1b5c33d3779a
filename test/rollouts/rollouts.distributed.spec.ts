/**
 * A rollout on two replicas over the real NATS server on shared storage (MONGO_URI: in CI the wire-protocol
 * emulator, not MongoDB): the rollouts service in two processes, the cm-gateway and the other services in a third,
 * the API gateway in a fourth. The replica that started the rollout is killed with SIGKILL mid-way; the other one
 * continues it to the end, and every host runs the change exactly once, counted at the salt-api simulator.
 */
import { ALL_SERVICES, apiOf, boundPorts, describeWithMongo, runServices, slowFleetOnNats, stoppedAfterAll } from "../support/harness";
import { request, eventually } from "../support/http";

describeWithMongo("a rollout on two replicas over NATS", mongoUri => {
	const started = stoppedAfterAll();
	const procs = started.procs;

	it("is continued by the other replica when the one driving it is killed, and runs every batch once", async () => {
		const { sim, env } = await slowFleetOnNats(started, "rollout", mongoUri, 40);
		procs.push(runServices(ALL_SERVICES().filter(s => s !== "api" && s !== "rollouts"), env));
		const first = runServices(["rollouts"], env);
		const gateway = runServices(["api"], env);
		procs.push(first, gateway);
		const api = await apiOf(gateway);
		await eventually(async () => ((await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total === sim.minionIds().length ? true : undefined), 60_000, "the API and the inventory");

		sim.resetExecutions();
		// The hosts with an accepted key (the others are in the inventory, but Salt would not reach them).
		const reachable = sim.upMinions();
		expect(reachable.length).toBeGreaterThanOrEqual(15);
		const created = await request("POST", `${api}/rollouts`, { body: { name: "two replicas", target: `L@${reachable.join(",")}`, fun: "test.arg", arg: ["rollout"], canary: 1, batch: 2 } });
		expect(created.status).toBe(201);
		const id = created.body._id;
		const rollout = async () => (await request("GET", `${api}/rollouts/${id}`).catch(() => null))?.body;
		await eventually(async () => ((await rollout())?.current >= 3 ? true : undefined), 30_000, "three batches by the first replica");
		const second = runServices(["rollouts"], env);
		procs.push(second);
		// The second replica is up (its health listener answers ready) before the first one dies.
		const { health } = await boundPorts(second, { healthOnly: true });
		await eventually(async () => ((await fetch(`http://127.0.0.1:${health}/ready`).catch(() => null))?.status === 200 ? true : undefined), 30_000, "the second replica ready");
		const before = (await rollout())?.current as number;
		// Batches were left for the second one (the canary, then batches of two).
		expect(before).toBeLessThan(Math.ceil((reachable.length - 1) / 2));
		first.child.kill("SIGKILL");

		// Generous: under a loaded CI run the batches after the kill once took longer than a minute to get through.
		const done = await eventually(async () => {
			const r = await rollout();
			return r?.status === "finished" ? r : undefined;
		}, 120_000, "the rollout to finish on the second replica").catch(async err => {
			// What the rollout says and what the replica left logged, for the failure's report.
			const r = await rollout();
			throw new Error(`${(err as Error).message}: ${JSON.stringify({ status: r?.status, reason: r?.reason, current: r?.current, last_error: r?.last_error, batches: r?.batches?.map((b: { state: string; jid?: string }) => [b.state, b.jid]) })}\n${second.log.join("").slice(-3000)}`);
		});
		const n = reachable.length;
		expect(done).toMatchObject({ total: n, done: n, succeeded: n, failed: 0, timed_out: 0, unreached: 0 });
		const ran = new Map<string, number>();
		for (const e of sim.executions().filter(x => x.fun === "test.arg")) ran.set(e.id, (ran.get(e.id) ?? 0) + 1);
		expect([...ran.values()].filter(n => n !== 1)).toEqual([]);
		expect(ran.size).toBe(n);
		// One job per batch, each in the history under the rollout.
		const jobs = (await request("GET", `${api}/salt_jobs?where=${encodeURIComponent(JSON.stringify({ rollout: id }))}&max_results=50`)).body._items;
		expect(jobs.length).toBe(done.batches.length);
	}, 240_000);
});
