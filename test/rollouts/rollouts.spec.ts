/**
 * Rollouts end to end against the salt-api simulator over real HTTP (docs/rollouts.md): canary then batches, one
 * Salt job each in the history and one at a time; a batch past the failure budget pauses the rollout with an alert;
 * pause, resume and abort; timeouts; dry runs that record predicted changes and skip batches that would change
 * nothing; what is refused, and why.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery } from "../support/http";

const PATCH = "patches.openssl-cve-2024-5535";

describe("rollouts", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let hosts: string[] = [];
	const url = (path: string) => `${h.api}/${path}`;
	const get = (path: string) => request("GET", url(path));
	const create = (body: Record<string, unknown>, token?: string) =>
		request("POST", url("rollouts"), { body, ...(token ? { token } : {}) });
	const rollout = async (id: string) => (await get(`rollouts/${id}`)).body;
	const until = (id: string, status: string, ms = 15_000) =>
		eventually(
			async () => {
				const r = await rollout(id);
				return r.status === status ? r : undefined;
			},
			ms,
			`rollout ${id} ${status}`,
		);
	const jobsOf = async (id: string) =>
		(await request("GET", withQuery(url("salt_jobs"), { where: { rollout: id }, sort: "batch", max_results: 50 }))).body
			._items;
	let markers = 0;
	/**
	 * The driver has made its passes past now: a one-host rollout made now has run and finished. Each pass steps every
	 * rollout with something to do, so a rollout that must not move would have moved by then.
	 */
	const driverPassed = async () => {
		const marker = await create({ name: `marker ${++markers}`, target: `L@${hosts[8]}`, fun: "test.ping", batch: 1 });
		expect(marker.status).toBe(201);
		expect(await until(marker.body._id, "finished")).toMatchObject({ done: 1, succeeded: 1 });
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 12,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 30],
			presenceEvents: false,
			downFraction: 0,
		});
		await sim.start();
		h = await startEmbedded({
			...(process.env.DBG_MONGO ? { mongoUri: process.env.DBG_MONGO } : {}),
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "5000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "1500",
				CM_SYNC_INTERVAL_MS: "0",
				ROLLOUT_TICK_MS: "100",
			},
		});
		hosts = sim.upMinions().slice(0, 9).sort();
		await h.call("hosts.upsertMany", {
			hosts: hosts.map(_id => ({ _id, status: "up", key: "accepted", grain: { os: "Debian", roles: ["ro"] } })),
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});
	afterEach(() => {
		sim.clearPatchFailures();
		for (const id of hosts) sim.setNeverReturns(id, false);
	});

	it("runs the canary, then batches one after another, each a Salt job of the history, and finishes", async () => {
		const res = await create({ name: "ping all", target: "G@roles:ro", fun: "test.ping", canary: 1, batch: 4 });
		expect(res.status).toBe(201);
		const done = await until(res.body._id, "finished");
		expect(done).toMatchObject({
			name: "ping all",
			total: 9,
			done: 9,
			succeeded: 9,
			failed: 0,
			timed_out: 0,
			unreached: 0,
			budget: 0,
			reason: null,
		});
		expect(done.hosts).toEqual(hosts);
		expect(
			done.batches.map((b: { hosts: string[]; canary: boolean; state: string }) => [b.hosts.length, b.canary, b.state]),
		).toEqual([
			[1, true, "finished"],
			[4, false, "finished"],
			[4, false, "finished"],
		]);
		const jobs = await jobsOf(res.body._id);
		expect(
			jobs.map((j: { batch: number; origin: string; user: string; target: string }) => [
				j.batch,
				j.origin,
				j.user,
				j.target,
			]),
		).toEqual([0, 1, 2].map(i => [i, "rollout", "bootstrap-admin", "G@roles:ro"]));
		expect(jobs.map((j: { _id: string }) => j._id)).toEqual(done.batches.map((b: { jid: string }) => b.jid));
		// One at a time: a batch started once the one before it had ended.
		for (let i = 1; i < jobs.length; i++)
			expect(new Date(jobs[i].started).getTime()).toBeGreaterThanOrEqual(
				new Date(jobs[i - 1].finished).getTime() - 1000,
			);
		// Lists carry the progress; the hosts and batches are on the record's own page.
		const listed = (await request("GET", withQuery(url("rollouts"), { where: { name: "ping all" } }))).body._items[0];
		expect(listed).toMatchObject({ status: "finished", total: 9, done: 9 });
		expect(listed.batches).toBeUndefined();
	});

	it("pauses by itself past the failure budget, with an alert; resumed, it accepts the failures so far and goes on", async () => {
		const bad = hosts[2];
		sim.failPatch(PATCH, [bad]);
		const res = await create({
			name: "patch with budget",
			target: `L@${hosts.join(",")}`,
			fun: "state.apply",
			kwarg: { mods: PATCH },
			canary: 1,
			batch: "34%",
			failure_budget: 0,
		});
		expect(res.status).toBe(201);
		const paused = await until(res.body._id, "paused");
		expect(paused.reason).toMatch(/1 host\(s\) failed.*over the failure budget of 0/);
		expect(paused).toMatchObject({ failed: 1, current: 2 });
		expect(paused.batches[1]).toMatchObject({ state: "finished", failed: 1, succeeded: 3 });
		expect(paused.batches[2].state).toBe("pending");
		const alert = await eventually(
			async () =>
				(
					await request(
						"GET",
						withQuery(url("alerts"), { where: { type: "rollout.paused", "payload.rollout": res.body._id } }),
					)
				).body._items[0],
		);
		expect(alert).toMatchObject({ level: "error", payload: { name: "patch with budget" } });
		// Nothing more runs while paused.
		await driverPassed();
		expect((await jobsOf(res.body._id)).length).toBe(2);
		expect((await request("PATCH", url(`rollouts/${res.body._id}/resume`))).status).toBe(200);
		const done = await until(res.body._id, "finished");
		expect(done).toMatchObject({ accepted_failures: 1, failed: 1, succeeded: 8, done: 9 });
	});

	it("counts hosts that never answer as failures", async () => {
		sim.setNeverReturns(hosts[0], true);
		const res = await create({
			name: "silent canary",
			target: `L@${hosts.join(",")}`,
			fun: "test.ping",
			canary: 1,
			batch: 8,
			failure_budget: 0,
		});
		const paused = await until(res.body._id, "paused");
		expect(paused).toMatchObject({ timed_out: 1, current: 1 });
		expect(paused.batches[0]).toMatchObject({ state: "finished", timed_out: 1 });
		expect((await request("PATCH", url(`rollouts/${res.body._id}/abort`))).status).toBe(200);
		const aborted = await rollout(res.body._id);
		expect(aborted).toMatchObject({ status: "aborted", reason: "aborted by bootstrap-admin" });
		await driverPassed();
		expect((await jobsOf(res.body._id)).length).toBe(1);
	});

	it("fails safe by default: a rollout given no failure_budget has a budget of 0, and its first failure pauses it", async () => {
		sim.setNeverReturns(hosts[0], true);
		const res = await create({
			name: "default budget",
			target: `L@${hosts.join(",")}`,
			fun: "test.ping",
			canary: 1,
			batch: 8,
		});
		expect(res.status).toBe(201);
		expect((await rollout(res.body._id)).failure_budget).toBe(0);
		expect(await until(res.body._id, "paused")).toMatchObject({ timed_out: 1, current: 1 });
		expect((await request("PATCH", url(`rollouts/${res.body._id}/abort`))).status).toBe(200);
	});

	it("pauses and resumes on request: the batch in flight ends, no other starts until resumed", async () => {
		sim.setMinionDelay(hosts[0], 600);
		try {
			const res = await create({
				name: "pausable",
				target: `L@${hosts.join(",")}`,
				fun: "test.ping",
				canary: 1,
				batch: 4,
			});
			const paused = await request("PATCH", url(`rollouts/${res.body._id}/pause`));
			expect(paused.status).toBe(200);
			const r = await eventually(async () => {
				const x = await rollout(res.body._id);
				return x.batches[0].state === "finished" ? x : undefined;
			});
			expect(r).toMatchObject({ status: "paused", reason: "paused by bootstrap-admin", current: 1 });
			await driverPassed();
			expect((await jobsOf(res.body._id)).length).toBe(1);
			expect(expectEveError(await request("PATCH", url(`rollouts/${res.body._id}/pause`)), 422)._issues.status).toMatch(
				/paused rollout cannot be paused/,
			);
			expect((await request("PATCH", url(`rollouts/${res.body._id}/resume`))).status).toBe(200);
			expect((await until(res.body._id, "finished")).done).toBe(9);
			expect(expectEveError(await request("PATCH", url(`rollouts/${res.body._id}/abort`)), 422)._issues.status).toBe(
				"a finished rollout cannot be aborted",
			);
		} finally {
			sim.setMinionDelay(hosts[0], null);
		}
	});

	it("dry-runs each batch of a state run first (test=True): records the predicted changes, skips a batch that would change nothing", async () => {
		const res = await create({
			name: "dry patch",
			target: `L@${hosts.slice(0, 3).join(",")}`,
			fun: "state.apply",
			kwarg: { mods: PATCH },
			canary: 1,
			batch: 2,
			dry_run_first: true,
		});
		expect(res.status).toBe(201);
		const done = await until(res.body._id, "finished");
		const [canary] = done.batches;
		expect(canary).toMatchObject({ state: "finished", predicted_total: 2, predicted_failures: 0 });
		expect(canary.predicted[0]).toEqual({
			host: hosts[0],
			state_id: "upgrade_openssl",
			sls: PATCH,
			function: "cmd.run",
			name: "apt-get install -y --only-upgrade openssl libssl3",
			result: null,
			changes: {},
		});
		// Each batch: its dry run, then the run.
		const jobs = (await request("GET", withQuery(url("salt_jobs"), { where: { rollout: res.body._id }, sort: "_id" })))
			.body._items;
		expect(jobs.map((j: { args: Array<{ test?: boolean }> }) => j.args.some(a => a && a.test === true))).toEqual([
			true,
			false,
			true,
			false,
		]);

		// `common` only installs packages already there: its dry run predicts nothing, every batch is skipped.
		const none = await create({
			name: "dry no change",
			target: `L@${hosts.slice(0, 3).join(",")}`,
			fun: "state.apply",
			kwarg: { mods: "common" },
			canary: 1,
			batch: 2,
			dry_run_first: true,
		});
		const skipped = await until(none.body._id, "finished");
		expect(
			skipped.batches.map((b: { state: string; predicted_total: number }) => [b.state, b.predicted_total]),
		).toEqual([
			["skipped", 0],
			["skipped", 0],
		]);
		expect((await jobsOf(none.body._id)).length).toBe(2);
	});

	it("a dry run predicting failures past the budget pauses before the real run; resumed, the failures so far are accepted and it goes on to the end", async () => {
		// `ntp_config` (a file.managed state) fails on two hosts, with test=True too: the canary's and one of batch 1.
		sim.failPatch("patches.fix-ntp", [hosts[0], hosts[2]], { stepId: "ntp_config", stderr: "disk full" });
		const res = await create({
			name: "dry, paused, resumed",
			target: `L@${hosts.join(",")}`,
			fun: "state.apply",
			kwarg: { mods: "patches.fix-ntp" },
			canary: 1,
			batch: 4,
			failure_budget: 1,
			dry_run_first: true,
		});
		expect(res.status).toBe(201);
		// The canary's failure (1) is within the budget of 1; batch 1's dry run predicts one more: paused before it runs.
		const paused = await until(res.body._id, "paused");
		expect(paused.reason).toBe(
			"the dry run of batch 1 predicts 1 failure(s); with 1 so far that is over the budget of 1",
		);
		expect(paused).toMatchObject({ budget: 1, failed: 1, succeeded: 0, accepted_failures: 0, current: 1, done: 1 });
		expect(
			paused.batches.map((b: { state: string; predicted_failures?: number }) => [b.state, b.predicted_failures]),
		).toEqual([
			["finished", 1],
			["ready", 1],
			["pending", undefined],
		]);
		// Its real run was not asked for: the canary's dry run and run, batch 1's dry run.
		expect((await jobsOf(res.body._id)).length).toBe(3);

		expect((await request("PATCH", url(`rollouts/${res.body._id}/resume`))).status).toBe(200);
		// The first status after `running` is the end: batch 1 runs (its failure accepted with the canary's), batch 2's dry run and run follow.
		const after = await eventually(
			async () => {
				const r = await rollout(res.body._id);
				return r.status !== "running" ? r : undefined;
			},
			15_000,
			"the resumed rollout stops running",
		);
		expect(after).toMatchObject({
			status: "finished",
			reason: null,
			accepted_failures: 1,
			failed: 2,
			succeeded: 7,
			done: 9,
			current: 3,
		});
		expect(
			after.batches.map((b: { state: string; failed: number; predicted_failures: number }) => [
				b.state,
				b.failed,
				b.predicted_failures,
			]),
		).toEqual([
			["finished", 1, 1],
			["finished", 1, 1],
			["finished", 0, 0],
		]);
		expect((await jobsOf(res.body._id)).length).toBe(6);
	});

	it("a dry run some host did not answer is no 'nothing would change': within the budget the batch runs for real, and the silent host counts", async () => {
		sim.setNeverReturns(hosts[1], true);
		// `common` predicts no change on the hosts that answer.
		const res = await create({
			name: "dry, one silent",
			target: `L@${hosts.slice(0, 3).join(",")}`,
			fun: "state.apply",
			kwarg: { mods: "common" },
			canary: 0,
			batch: 3,
			failure_budget: 1,
			dry_run_first: true,
		});
		expect(res.status).toBe(201);
		const done = await until(res.body._id, "finished");
		expect(
			done.batches.map(
				(b: { state: string; predicted_total: number; predicted_failures: number; timed_out: number }) => [
					b.state,
					b.predicted_total,
					b.predicted_failures,
					b.timed_out,
				],
			),
		).toEqual([["finished", 0, 1, 1]]);
		expect(done).toMatchObject({ done: 3, succeeded: 2, timed_out: 1 });
		expect((await jobsOf(res.body._id)).length).toBe(2);
	});

	it("takes over a batch whose replica died between asking for it and recording the answer: the job already started, never a second", async () => {
		// The dead replica's state: the batch marked `starting` under its run id, its claim lapsed, the job started.
		const service = h.broker!.getLocalService("rollouts") as unknown as {
			store: { insertMany(d: object[]): Promise<void> };
			stores: Record<string, { insertMany(d: object[]): Promise<void> }>;
		};
		const owner = (await request("GET", withQuery(url("tokens"), { where: { name: "bootstrap-admin" } }))).body
			._items[0]._id;
		const id = "6b0000000000000000000abc";
		const marker = `once-${Date.now()}`;
		const asked = await h.call<{ task_id: string }>("cm-gateway.runRolloutBatch", {
			rollout: id,
			batch: 0,
			run: `${id}:0`,
			owner,
			fun: "test.arg",
			arg: [marker],
			hosts: [hosts[1]],
			target: `L@${hosts[1]}`,
		});
		const now = new Date();
		await service.stores.rollout_hosts.insertMany([{ _id: id, hosts: [hosts[1]] }]);
		await service.store.insertMany([
			{
				_id: id,
				name: "taken over",
				target: `L@${hosts[1]}`,
				fun: "test.arg",
				arg: [marker],
				canary: 1,
				batch: 1,
				failure_budget: 0,
				wait_s: 0,
				dry_run_first: false,
				status: "running",
				reason: null,
				owner,
				total: 1,
				batches: [{ index: 0, canary: true, from: 0, to: 1, state: "starting" }],
				current: 0,
				budget: 0,
				accepted_failures: 0,
				done: 0,
				succeeded: 0,
				failed: 0,
				timed_out: 0,
				unreached: 0,
				next_at: now,
				last_error: null,
				lease: { owner: "a-replica-that-died", until: new Date(now.getTime() - 1000) },
				in_flight: true,
				_created: now,
				_updated: now,
			},
		]);
		await h.call("rollouts.list", { query: [] }); // any call: the driver's next tick takes it
		const done = await until(id, "finished");
		expect(done.batches[0]).toMatchObject({ state: "finished", jid: asked.task_id, succeeded: 1 });
		expect(sim.executions().filter(e => e.fun === "test.arg" && JSON.stringify(e.arg).includes(marker)).length).toBe(1);
	});

	it("refuses what it cannot run, with the reason", async () => {
		expectEveError(await create({ name: "x", target: "G@roles:nothing-has-this", fun: "test.ping" }), 422);
		expect(expectEveError(await create({ name: "x", target: "( bad", fun: "test.ping" }), 422)._issues.target).toMatch(
			/not closed/,
		);
		expect(
			expectEveError(await create({ name: "x", target: "*", fun: "test.ping", dry_run_first: true }), 422)._issues
				.dry_run_first,
		).toMatch(/state.apply/);
		expectEveError(await create({ name: "x", target: "*", fun: "test.ping", batch: "150%" }), 422);
		expectEveError(await create({ name: "x", target: "*", fun: "test.ping", batch: 0 }), 422);
		expectEveError(await create({ name: "x", target: "*", fun: "test.ping", status: "finished" }), 422);
		expectEveError(await request("PATCH", url("rollouts/000000000000000000000000/pause")), 404);
		const r = await create({ name: "to refuse", target: `L@${hosts[0]}`, fun: "test.ping" });
		await until(r.body._id, "finished");
		expectEveError(await request("PATCH", url(`rollouts/${r.body._id}/explode`)), 422);
		expectEveError(await request("DELETE", url(`rollouts/${r.body._id}`)), 405);
		// A viewer reads, never starts.
		const viewer = (await request("POST", url("tokens"), { body: { name: "ro-viewer", role: "viewer" } })).body.token;
		expect((await request("GET", url("rollouts"), { token: viewer })).status).toBe(200);
		expectEveError(await create({ name: "x", target: "*", fun: "test.ping" }, viewer), 403);
	});
});
