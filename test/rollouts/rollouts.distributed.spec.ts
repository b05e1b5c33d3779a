/**
 * A rollout on two replicas on shared storage, on both legs of test/support/replicas.ts (brokers in one process on
 * one NeDB directory; processes over NATS on MongoDB): the rollouts service in two replicas, the cm-gateway and the
 * other services in a third, the API gateway in a fourth. The replica that started the rollout ends mid-way (SIGKILL
 * on the process leg); the other one continues it to the end, and every host runs the change exactly once, counted
 * at the salt-api simulator.
 */
import { ALL_SERVICES } from "../support/harness";
import { describeReplicated, slowFleet, twoLiveReplicas } from "../support/replicas";
import { request, eventually } from "../support/http";

describeReplicated("a rollout on two replicas", legOf => {
	it("is continued by the other replica when the one driving it ends, and runs every batch once", async () => {
		const leg = legOf();
		const { sim, env } = await slowFleet(leg, "rollout", 40);
		leg.run(
			ALL_SERVICES().filter(s => s !== "api" && s !== "rollouts"),
			env,
		);
		const first = leg.run(["rollouts"], env);
		const gateway = leg.run(["api"], env);
		const api = await gateway.api();
		await eventually(
			async () =>
				(await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total ===
				sim.minionIds().length
					? true
					: undefined,
			60_000,
			"the API and the inventory",
		);

		sim.resetExecutions();
		// The hosts with an accepted key (the others are in the inventory, but Salt would not reach them).
		const reachable = sim.upMinions();
		expect(reachable.length).toBeGreaterThanOrEqual(15);
		const created = await request("POST", `${api}/rollouts`, {
			body: {
				name: "two replicas",
				target: `L@${reachable.join(",")}`,
				fun: "test.arg",
				arg: ["rollout"],
				canary: 1,
				batch: 2,
			},
		});
		expect(created.status).toBe(201);
		const id = created.body._id;
		const rollout = async () => (await request("GET", `${api}/rollouts/${id}`).catch(() => null))?.body;
		await eventually(
			async () => ((await rollout())?.current >= 3 ? true : undefined),
			30_000,
			"three batches by the first replica",
		);
		const second = leg.run(["rollouts"], env);
		// The second replica is up before the first one dies.
		await second.ready();
		const before = (await rollout())?.current as number;
		// Batches were left for the second one (the canary, then batches of two).
		expect(before).toBeLessThan(Math.ceil((reachable.length - 1) / 2));
		await first.kill();

		// Generous: under a loaded CI run the batches after the kill once took longer than a minute to get through.
		const done = await eventually(
			async () => {
				const r = await rollout();
				return r?.status === "finished" ? r : undefined;
			},
			120_000,
			"the rollout to finish on the second replica",
		).catch(async err => {
			// What the rollout says and what the replica left logged, for the failure's report.
			const r = await rollout();
			throw new Error(
				`${(err as Error).message}: ${JSON.stringify({ status: r?.status, reason: r?.reason, current: r?.current, last_error: r?.last_error, batches: r?.batches?.map((b: { state: string; jid?: string }) => [b.state, b.jid]) })}\n${second.log().slice(-3000)}`,
			);
		});
		const n = reachable.length;
		expect(done).toMatchObject({ total: n, done: n, succeeded: n, failed: 0, timed_out: 0, unreached: 0 });
		const ran = new Map<string, number>();
		for (const e of sim.executions().filter(x => x.fun === "test.arg")) ran.set(e.id, (ran.get(e.id) ?? 0) + 1);
		expect([...ran.values()].filter(n => n !== 1)).toEqual([]);
		expect(ran.size).toBe(n);
		// One job per batch, each in the history under the rollout.
		const jobs = (
			await request(
				"GET",
				`${api}/salt_jobs?where=${encodeURIComponent(JSON.stringify({ rollout: id }))}&max_results=50`,
			)
		).body._items;
		expect(jobs.length).toBe(done.batches.length);
	}, 240_000);
});

describeReplicated("rollouts on two live replicas", legOf => {
	it("has each rollout stepped by one replica at a time: many due at once, every batch runs once", async () => {
		const leg = legOf();
		const { sim, api, pairs } = await twoLiveReplicas(leg, "rollouts-live");
		// Ten rollouts of two hosts each (a canary, then a batch), made at once: both replicas' drivers find them due together.
		const bodies = pairs.map((pair, i) => ({
			name: `live ${i}`,
			target: `L@${pair.join(",")}`,
			fun: "test.arg",
			arg: [`live-${i}`],
			canary: 1,
			batch: 1,
		}));
		const created = await Promise.all(bodies.map(body => request("POST", `${api}/rollouts`, { body })));
		expect(created.map(c => c.status)).toEqual(bodies.map(() => 201));
		const ids = created.map(c => c.body._id as string);
		for (const id of ids) {
			const done = await eventually(
				async () => {
					const r = (await request("GET", `${api}/rollouts/${id}`)).body;
					return r?.status === "finished" ? r : undefined;
				},
				60_000,
				`rollout ${id} finished`,
			);
			expect(done).toMatchObject({ total: 2, done: 2, succeeded: 2, failed: 0, timed_out: 0, unreached: 0 });
		}
		// Each host ran its rollout's call once: one batch, one job (none started twice by two replicas).
		const ran = sim
			.executions()
			.filter(e => e.fun === "test.arg")
			.map(e => `${e.id} ${String(e.arg[0])}`)
			.sort();
		expect(ran).toEqual(pairs.flatMap((pair, i) => pair.map(host => `${host} live-${i}`)).sort());
		const jobs = (
			await request(
				"GET",
				`${api}/salt_jobs?where=${encodeURIComponent(JSON.stringify({ rollout: { $in: ids } }))}&max_results=100`,
			)
		).body._items as Array<{ rollout: string; batch: number }>;
		expect(jobs.map(j => `${j.rollout}:${j.batch}`).sort()).toEqual(ids.flatMap(id => [`${id}:0`, `${id}:1`]).sort());
	}, 120_000);
});
