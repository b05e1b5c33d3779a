/**
 * Scheduled conformity checks on two replicas on shared storage, on both legs of test/support/replicas.ts (brokers
 * in one process on one NeDB directory; processes over NATS on MongoDB).
 *  - Interrupted: the rollouts and conformity-checks services in two replicas, the cm-gateway, the conformity service
 *    and the data services in a third, the API gateway in a fourth. A check's pass is under way when the replica
 *    that claimed it ends (SIGKILL on the process leg); the other one carries the pass to its end, every host is
 *    checked exactly once, and every host is judged (the drifted one drifted).
 *  - Live: many checks due at once on two whole replicas; each pass is claimed by one of them, once.
 */
import { ALL_SERVICES } from "../support/harness";
import { describeReplicated, slowFleet, twoLiveReplicas } from "../support/replicas";
import { request, eventually, withQuery } from "../support/http";

describeReplicated("a conformity check on two replicas", legOf => {
	it("is carried to its end by the other replica when the one running its pass ends, each host checked once", async () => {
		const leg = legOf();
		const { sim, env } = await slowFleet(leg, "conformity", 30);
		const twice = ["rollouts", "conformity-checks"];
		leg.run(
			ALL_SERVICES().filter(s => s !== "api" && !twice.includes(s)),
			env,
		);
		const first = leg.run(twice, env);
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

		const reachable = sim.upMinions().sort();
		const drifted = reachable[3];
		sim.setDrift(drifted, "common", "base_packages", { curl: { new: "8.5" } });
		sim.resetExecutions();
		const created = await request("POST", `${api}/conformity_checks`, {
			body: { name: "two replicas", target: `L@${reachable.join(",")}`, interval: 3600, batch: 2 },
		});
		expect(created.status).toBe(201);
		const id = created.body._id;
		const pass = async () =>
			(await request("GET", withQuery(`${api}/rollouts`, { where: { check: id } })).catch(() => null))?.body
				?._items?.[0];
		await eventually(
			async () => ((await pass())?.current >= 2 ? true : undefined),
			30_000,
			"two batches of the pass by the first replica",
		);
		const second = leg.run(twice, env);
		await second.ready();
		expect((await pass()).status).toBe("running");
		await first.kill();

		const done = await eventually(
			async () => {
				const p = await pass();
				return p?.status === "finished" ? p : undefined;
			},
			90_000,
			"the pass to finish on the second replica",
		);
		expect(done).toMatchObject({ total: reachable.length, done: reachable.length, unreached: 0 });
		const checked = new Map<string, number>();
		for (const e of sim.executions().filter(x => x.fun === "state.apply"))
			checked.set(e.id, (checked.get(e.id) ?? 0) + 1);
		expect([...checked.values()].filter(n => n !== 1)).toEqual([]);
		expect(checked.size).toBe(reachable.length);
		const fleet = await eventually(
			async () => {
				const f = (await request("GET", `${api}/conformity`)).body;
				return f?.counts && f.counts.conformant + f.counts.drifted === reachable.length ? f : undefined;
			},
			20_000,
			"every host judged",
		);
		expect(fleet.counts.drifted).toBe(1);
		expect((await request("GET", `${api}/hosts/${drifted}/conformity`)).body).toMatchObject({
			state: "drifted",
			drifted: 1,
		});
		// One pass, claimed once.
		expect((await request("GET", `${api}/conformity_checks/${id}`)).body).toMatchObject({
			passes: 1,
			last_pass: { started: true },
		});
	}, 150_000);
});

describeReplicated("conformity checks on two live replicas", legOf => {
	it("claims each check's pass once: many due at once, one pass and one check of each host each", async () => {
		const leg = legOf();
		const { sim, api, pairs } = await twoLiveReplicas(leg, "checks-live");
		// Ten checks of two hosts each, made at once (each write makes the replica it reached look for due passes).
		const bodies = pairs.map((pair, i) => ({
			name: `live ${i}`,
			target: `L@${pair.join(",")}`,
			interval: 3600,
			batch: 2,
		}));
		const created = await Promise.all(bodies.map(body => request("POST", `${api}/conformity_checks`, { body })));
		expect(created.map(c => c.status)).toEqual(bodies.map(() => 201));
		const ids = created.map(c => c.body._id as string);
		for (const id of ids) {
			const passes = await eventually(
				async () => {
					const found = (await request("GET", withQuery(`${api}/rollouts`, { where: { check: id } }))).body?._items as
						| Array<{ status: string }>
						| undefined;
					return found?.length && found.every(p => p.status === "finished") ? found : undefined;
				},
				60_000,
				`check ${id}'s pass finished`,
			);
			expect(passes).toHaveLength(1);
			expect((await request("GET", `${api}/conformity_checks/${id}`)).body).toMatchObject({
				passes: 1,
				last_pass: { started: true, hosts: 2, error: null },
			});
		}
		const checked = sim
			.executions()
			.filter(e => e.fun === "state.apply")
			.map(e => e.id)
			.sort();
		expect(checked).toEqual(pairs.flat().sort());
	}, 120_000);
});
