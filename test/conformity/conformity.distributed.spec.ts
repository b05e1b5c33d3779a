/**
 * A scheduled conformity check interrupted by a replica kill: the rollouts and conformity-checks services in two
 * processes over the real NATS server on shared storage (MONGO_URI: in CI the wire-protocol emulator, not MongoDB),
 * the cm-gateway, the conformity service and the data services in a third, the API gateway in a fourth. A check's
 * pass is under way when the replica that claimed it is killed with SIGKILL; the other one carries the pass to its
 * end, every host is checked exactly once, and every host is judged (the drifted one drifted).
 */
import { ALL_SERVICES, apiOf, boundPorts, describeWithMongo, runServices, slowFleetOnNats, stoppedAfterAll } from "../support/harness";
import { request, eventually, withQuery } from "../support/http";

describeWithMongo("a conformity check on two replicas over NATS", mongoUri => {
	const started = stoppedAfterAll();

	it("is carried to its end by the other replica when the one running its pass is killed, each host checked once", async () => {
		const { sim, env } = await slowFleetOnNats(started, "conformity", mongoUri, 30);
		const twice = ["rollouts", "conformity-checks"];
		started.procs.push(runServices(ALL_SERVICES().filter(s => s !== "api" && !twice.includes(s)), env));
		const first = runServices(twice, env);
		const gateway = runServices(["api"], env);
		started.procs.push(first, gateway);
		const api = await apiOf(gateway);
		await eventually(async () => ((await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total === sim.minionIds().length ? true : undefined), 60_000, "the API and the inventory");

		const reachable = sim.upMinions().sort();
		const drifted = reachable[3];
		sim.setDrift(drifted, "common", "base_packages", { curl: { new: "8.5" } });
		sim.resetExecutions();
		const created = await request("POST", `${api}/conformity_checks`, { body: { name: "two replicas", target: `L@${reachable.join(",")}`, interval: 3600, batch: 2 } });
		expect(created.status).toBe(201);
		const id = created.body._id;
		const pass = async () => (await request("GET", withQuery(`${api}/rollouts`, { where: { check: id } })).catch(() => null))?.body?._items?.[0];
		await eventually(async () => ((await pass())?.current >= 2 ? true : undefined), 30_000, "two batches of the pass by the first replica");
		const second = runServices(twice, env);
		started.procs.push(second);
		const { health } = await boundPorts(second, { healthOnly: true });
		await eventually(async () => ((await fetch(`http://127.0.0.1:${health}/ready`).catch(() => null))?.status === 200 ? true : undefined), 30_000, "the second replica ready");
		expect((await pass()).status).toBe("running");
		first.child.kill("SIGKILL");

		const done = await eventually(async () => {
			const p = await pass();
			return p?.status === "finished" ? p : undefined;
		}, 90_000, "the pass to finish on the second replica");
		expect(done).toMatchObject({ total: reachable.length, done: reachable.length, unreached: 0 });
		const checked = new Map<string, number>();
		for (const e of sim.executions().filter(x => x.fun === "state.apply")) checked.set(e.id, (checked.get(e.id) ?? 0) + 1);
		expect([...checked.values()].filter(n => n !== 1)).toEqual([]);
		expect(checked.size).toBe(reachable.length);
		const fleet = await eventually(async () => {
			const f = (await request("GET", `${api}/conformity`)).body;
			return f?.counts && f.counts.conformant + f.counts.drifted === reachable.length ? f : undefined;
		}, 20_000, "every host judged");
		expect(fleet.counts.drifted).toBe(1);
		expect((await request("GET", `${api}/hosts/${drifted}/conformity`)).body).toMatchObject({ state: "drifted", drifted: 1 });
		// One pass, claimed once.
		expect((await request("GET", `${api}/conformity_checks/${id}`)).body).toMatchObject({ passes: 1, last_pass: { started: true } });
	}, 150_000);
});
