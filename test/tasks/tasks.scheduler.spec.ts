/**
 * The scheduler end to end: tasks created through the API run at their due times through the
 * cm-gateway against the salt-api simulator over real HTTP, once each (counted at the simulator),
 * with their actions records linked to the task; one-shot tasks finish; a task may target a group;
 * the misfire and overlap policies; pause and resume; a run that cannot be made is recorded as failed
 * with an alert; GET /tasks/{id}/preview.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { SaltClient } from "../../services/cm-gateway/salt-client";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery } from "../support/http";
import { formatHttpDate } from "../../lib/eve/dates";

describe("the task scheduler", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let hosts: string[] = [];
	const url = (path: string) => `${h.api}/${path}`;
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	const create = async (body: Record<string, unknown>) => {
		const res = await request("POST", url("tasks"), { body: { cm_client: "local_async", fun: "test.ping", ...body } });
		if (res.status !== 201) throw new Error(`POST /tasks: ${res.status} ${res.text}`);
		return res.body._id as string;
	};
	const task = async (id: string) => (await request("GET", url(`tasks/${id}`))).body;
	/**
	 * "Nothing ran" without a fixed sleep: a marker task, due at `due` (after every due time the check is about),
	 * whose job reaches salt-api proves the scheduler made a pass at or after `due`. Every pass claims every task
	 * due by then (earliest first) before the next pass, so anything it should not run would have been claimed
	 * (and counted) in that pass or an earlier one. A claim also takes over a run whose lease passed: passes look
	 * for those at least once a second, so a marker due a second after a lease was set proves a look after it.
	 */
	const schedulerPassed = async (due: Date) => {
		const marker = `marker-${Math.random().toString(36).slice(2)}`;
		await create({
			name: marker,
			fun: "test.echo",
			kwarg: { text: marker },
			tgt: [hosts[0]],
			start: formatHttpDate(new Date(Math.ceil(due.getTime() / 1000) * 1000)),
		});
		await eventually(
			async () => (sim.jobs().some(j => JSON.stringify(j.arg).includes(marker)) ? true : undefined),
			15_000,
			"the marker task's run",
		);
	};
	const dueOf = async (id: string) => new Date((await task(id)).next);

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 12,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceIntervalMs: 3_600_000,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "500",
				TASK_MISFIRE_GRACE_MS: "2000",
				TASK_LEASE_MS: "4000",
			},
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
	});

	it("runs an interval task at each due time, once each, with its runs as actions records linked to the task", async () => {
		const target = hosts[0];
		sim.resetExecutions();
		const id = await create({ name: "every-2s", tgt: [target], start: inSeconds(1), interval: 2, end: inSeconds(6) });
		const done = await eventually(
			async () => {
				const t = await task(id);
				return t.status === "finished" ? t : undefined;
			},
			12_000,
			"the task to finish",
		);
		// Due at +1, +3 and +5 s: three runs (two if the machine is so loaded that one comes later than the
		// misfire grace, which then moves next on instead of bursting); never more, and each exactly once.
		expect(done.count_of_execution).toBeGreaterThanOrEqual(2);
		expect(done.count_of_execution).toBeLessThanOrEqual(3);
		expect(sim.executionCount(target, "test.ping")).toBe(done.count_of_execution);
		expect(done.last_run).toMatchObject({ status: "started", jid: expect.stringMatching(/^\d{20}$/) });
		const runs = await eventually(
			async () => {
				const r = (await request("GET", url(withQuery("actions", { where: { task: id, state: "finished" } })))).body;
				return r._meta.total === done.count_of_execution ? r : undefined;
			},
			5000,
			"every run's actions record",
		);
		expect(runs._items.every((a: any) => a.host === target && a.action === "test.ping")).toBe(true);
	});

	it("runs a one-shot task once and finishes it; a group in tgt is resolved at run time", async () => {
		const g = await request("POST", url("groups"), {
			body: { name: "sched-group", type: 0, hosts: hosts.slice(1, 3) },
		});
		sim.resetExecutions();
		const id = await create({ name: "once", tgt: [g.body._id], start: inSeconds(1) });
		const done = await eventually(
			async () => {
				const t = await task(id);
				return t.status === "finished" && t.last_run ? t : undefined;
			},
			8000,
			"the one-shot run",
		);
		expect(done).toMatchObject({ count_of_execution: 1, next: null });
		for (const host of hosts.slice(1, 3)) expect(sim.executionCount(host, "test.ping")).toBe(1);
	});

	it("after an outage runs a missed task once (misfire run_once), or not at all (skip), never a burst", async () => {
		sim.resetExecutions();
		const longAgo = formatHttpDate(new Date(Date.now() - 10 * 60_000));
		const once = await create({ name: "missed-once", tgt: [hosts[3]], start: longAgo, interval: 60 });
		const skip = await create({ name: "missed-skip", tgt: [hosts[4]], start: longAgo, interval: 60, misfire: "skip" });
		const a = await eventually(
			async () => ((await task(once)).last_run ? task(once) : undefined),
			5000,
			"the missed run",
		);
		const b = await eventually(async () => ((await task(skip)).last_run ? task(skip) : undefined), 5000, "the skip");
		expect(a).toMatchObject({ count_of_execution: 1, last_run: { status: "started" } });
		expect(b).toMatchObject({
			count_of_execution: 0,
			last_run: { status: "skipped", message: expect.stringMatching(/misfire/) },
		});
		for (const t of [a, b]) expect(new Date(t.next).getTime()).toBeGreaterThan(Date.now());
		expect(sim.executionCount(hosts[3], "test.ping")).toBe(1);
		expect(sim.executionCount(hosts[4], "test.ping")).toBe(0);
	});

	it("skips a run while the previous one still has hosts outstanding (overlap skip)", async () => {
		const slow = hosts[5];
		sim.setNeverReturns(slow, true);
		try {
			sim.resetExecutions();
			const id = await create({ name: "overlapping", tgt: [slow], start: inSeconds(1), interval: 1 });
			const t = await eventually(
				async () => {
					const x = await task(id);
					return x.last_run?.status === "skipped" ? x : undefined;
				},
				8000,
				"a skipped run",
			);
			expect(t.last_run.message).toMatch(/overlap/);
			expect(sim.executionCount(slow, "test.ping")).toBe(1);
			expect((await request("DELETE", url(`tasks/${id}`))).status).toBe(204);
		} finally {
			sim.setNeverReturns(slow, false);
		}
	});

	it("does not run a paused task, and resumes without making up for the runs missed meanwhile", async () => {
		sim.resetExecutions();
		const id = await create({ name: "paused", tgt: [hosts[6]], start: inSeconds(1), interval: 1, status: "paused" });
		// A pass a second past its first due time claimed nothing of it.
		await schedulerPassed(new Date((await dueOf(id)).getTime() + 1000));
		expect(await task(id)).toMatchObject({ count_of_execution: 0, status: "paused" });
		expect(sim.executionCount(hosts[6])).toBe(0);
		expect((await request("PATCH", url(`tasks/${id}/scheduled`))).status).toBe(200);
		await eventually(
			async () => ((await task(id)).count_of_execution >= 1 ? true : undefined),
			4000,
			"a run after resuming",
		);
		expect((await request("PATCH", url(`tasks/${id}/paused`))).status).toBe(200);
		const paused = await task(id);
		const runs = paused.count_of_execution;
		expect(runs).toBeLessThanOrEqual(3);
		// Paused again: a pass a second past its next due time claimed nothing more.
		await schedulerPassed(new Date(new Date(paused.next).getTime() + 1000));
		expect((await task(id)).count_of_execution).toBe(runs);
	});

	it("records a run that cannot be made as failed, with a task.failed alert", async () => {
		const id = await create({ name: "nowhere", tgt: ["no-such-host.example"], start: inSeconds(1) });
		const t = await eventually(
			async () => {
				const x = await task(id);
				return x.last_run ? x : undefined;
			},
			5000,
			"the failed run",
		);
		expect(t.last_run).toMatchObject({
			status: "failed",
			message: expect.stringMatching(/none of the task's targets/),
		});
		const alerts = (
			await request("GET", url(withQuery("alerts", { where: { type: "task.failed", "payload.task": id } })))
		).body._items;
		expect(alerts).toHaveLength(1);
	});

	it("retries a run while salt-api is unreachable (nothing ran) and starts it once when it is back", async () => {
		sim.resetExecutions();
		await sim.goDown("refuse");
		let id = "";
		try {
			id = await create({ name: "while-down", fun: "test.version", tgt: [hosts.at(-1)!], start: inSeconds(1) });
			// The run is claimed, its first attempt fails (salt-api refuses connections) and it is tried again: the
			// retry renews the run's lease, which is what is waited for (not a fixed time).
			const claimed = await eventually(
				async () => ((await task(id)).pending ? task(id) : undefined),
				5000,
				"the claimed run",
			);
			const retried = await eventually(
				async () => {
					const t = await task(id);
					return t.pending && new Date(t.lease.until).getTime() > new Date(claimed.lease.until).getTime()
						? t
						: undefined;
				},
				15_000,
				"a retry of the run (its lease renewed; the task's read may be cached up to READ_CACHE_MS)",
			);
			expect(retried).toMatchObject({ count_of_execution: 1, pending: { run: claimed.pending.run } });
			expect(retried.last_run).toBeUndefined();
			expect(sim.executionCount(hosts.at(-1)!, "test.version")).toBe(0);
		} finally {
			await sim.comeBack();
		}
		const t = await eventually(
			async () => {
				const x = await task(id);
				return x.last_run ? x : undefined;
			},
			25_000,
			"the run after salt-api came back",
		);
		expect(t).toMatchObject({
			status: "finished",
			count_of_execution: 1,
			last_run: { status: "started", jid: expect.stringMatching(/^\d{20}$/) },
		});
		expect(t.pending).toBeUndefined();
		expect(sim.executionCount(hosts.at(-1)!, "test.version")).toBe(1);
	}, 40_000);

	it("takes over a run whose replica died once its lease passes; the task's next run waits for it instead of overwriting it", async () => {
		const target = hosts.at(-2)!;
		sim.resetExecutions();
		const id = await create({
			name: "orphaned",
			fun: "test.version",
			tgt: [target],
			start: inSeconds(1),
			interval: 1,
			status: "paused",
		});
		// As a replica that claimed a run and died leaves it: counted, pending with a lease, the next run due already.
		const dead = { run: "0123456789abcdef0123dead", due: new Date(Date.now() - 1500) };
		const lease = { owner: "dead-replica", until: new Date(Date.now() + 5000) };
		const store = (
			h.broker!.getLocalService("tasks") as unknown as { store: { updateMany(f: object, u: object): Promise<number> } }
		).store;
		expect(
			await store.updateMany(
				{ _id: id },
				{
					$set: { status: "scheduled", next: new Date(Date.now() - 500), pending: dead, lease, count_of_execution: 1 },
				},
			),
		).toBe(1);
		const planted = Date.now();
		await h.broker!.emit("tasks.updated", { ids: [id] });
		// The lease still holds: nothing may run, nothing may replace it. Proven by a pass (and a look for dead runs)
		// a second after the lease was set, while it still holds.
		await schedulerPassed(new Date(planted + 1000));
		expect(Date.now()).toBeLessThan(lease.until.getTime());
		expect(sim.executionCount(target, "test.version")).toBe(0);
		expect(await task(id)).toMatchObject({
			count_of_execution: 1,
			pending: { run: dead.run },
			lease: { owner: "dead-replica" },
		});
		// The lease passes: the dead run is taken over and runs once, then the task goes on.
		const taken = await eventually(
			async () => {
				const r = (await request("GET", url(withQuery("actions", { where: { run: dead.run } })))).body;
				return r._meta.total ? r._items : undefined;
			},
			10_000,
			"the taken-over run",
		);
		expect(taken).toHaveLength(1);
		expect(taken[0]).toMatchObject({ host: target, task: id });
		await eventually(
			async () => ((await task(id)).count_of_execution >= 3 ? true : undefined),
			10_000,
			"the runs after it",
		);
		expect((await request("PATCH", url(`tasks/${id}/paused`))).status).toBe(200);
		const settled = await eventually(
			async () => {
				const x = await task(id);
				return x.pending ? undefined : x;
			},
			10_000,
			"the last run recorded",
		);
		// Every counted run ran once: none lost, none twice.
		expect(sim.executionCount(target, "test.version")).toBe(settled.count_of_execution);
		const runs = (
			await request("GET", url(withQuery("actions", { where: { task: id }, max_results: 50 })))
		).body._items.map((a: { run: string }) => a.run);
		expect(new Set(runs).size).toBe(runs.length);
		expect(runs).toContain(dead.run);
	}, 40_000);

	it("loses no run when every replica restarts: runs due while it was down run once after it", async () => {
		sim.resetExecutions();
		const ids = await Promise.all(
			[0, 1, 2].map(i => create({ name: `restart-${i}`, fun: "test.version", tgt: [hosts[i]], start: inSeconds(2) })),
		);
		await h.restart(); // stop everything, start again on the same storage
		// Not an oracle: time passes until the runs fall due, while (or just after) it was away; they are waited for below.
		await new Promise(r => setTimeout(r, 2500));
		for (const id of ids) {
			const t = await eventually(
				async () => {
					const x = await task(id);
					return x.status === "finished" && x.last_run ? x : undefined;
				},
				8000,
				"the run after the restart",
			);
			expect(t).toMatchObject({ count_of_execution: 1, last_run: { status: "started" } });
		}
		for (let i = 0; i < 3; i++) expect(sim.executionCount(hosts[i], "test.version")).toBe(1);
	});

	it("on a takeover follows the job Salt already started for the run (its cm-gateway died before recording it) instead of starting it again", async () => {
		sim.resetExecutions();
		const run = "0123456789abcdef01234567";
		const salt = new SaltClient({ url: sim.url, ...sim.credentials });
		const started = await salt.lowstate<{ jid: string }>({
			client: "local_async",
			tgt: [hosts[0]],
			tgt_type: "list",
			fun: "test.ping",
			metadata: { fleet_ctl_run: run },
		});
		salt.close();
		const res = await h.call("cm-gateway.runTask", {
			task: "fffffffffffffffffffffff0",
			run,
			takeover: true,
			cm_client: "local_async",
			fun: "test.ping",
			tgt: [hosts[0]],
		});
		expect(res.task_id).toBe(started.jid);
		const rec = await eventually(
			async () => {
				const r = (await request("GET", url(`actions/${started.jid}${hosts[0]}`))).body;
				return r?.state === "finished" ? r : undefined;
			},
			5000,
			"the adopted job's return",
		);
		expect(rec).toMatchObject({ run, task: "fffffffffffffffffffffff0", return: "true" });
		expect(sim.executionCount(hosts[0], "test.ping")).toBe(1);
		// The run is now recorded: handing it over again starts nothing either.
		expect(
			(
				await h.call("cm-gateway.runTask", {
					task: "fffffffffffffffffffffff0",
					run,
					cm_client: "local_async",
					fun: "test.ping",
					tgt: [hosts[0]],
				})
			).task_id,
		).toBe(started.jid);
		expect(sim.executionCount(hosts[0], "test.ping")).toBe(1);
	});

	it("previews the next due times, and refuses a bad cron, time zone or both cron and interval", async () => {
		const id = await create({
			name: "cron",
			tgt: [hosts[7]],
			start: "2030-01-01 00:00",
			cron: "0 9 * * mon-fri",
			timezone: "Europe/Berlin",
		});
		const res = await request("GET", url(withQuery(`tasks/${id}/preview`, { count: 3 })));
		expect(res.status).toBe(200);
		expect(res.body).toEqual({
			_id: id,
			next: ["Tue, 01 Jan 2030 08:00:00 GMT", "Wed, 02 Jan 2030 08:00:00 GMT", "Thu, 03 Jan 2030 08:00:00 GMT"],
		});
		expect((await task(id)).next).toBe("Tue, 01 Jan 2030 08:00:00 GMT");
		// A cron task made without a zone keeps the one it was made under (TASK_TIMEZONE, here the default).
		expect(
			(await task(await create({ name: "cron-utc", tgt: [hosts[7]], start: "2030-01-01 00:00", cron: "0 9 * * *" })))
				.timezone,
		).toBe("UTC");
		expectEveError(await request("GET", url(withQuery(`tasks/${id}/preview`, { count: 0 }))), 400);
		expectEveError(await request("GET", url(withQuery(`tasks/${id}/preview`, { count: 1001 }))), 400);
		for (const bad of [{ cron: "61 * * * *" }, { timezone: "Mars/Olympus" }, { cron: "* * * * *", interval: 60 }]) {
			expectEveError(
				await request("POST", url("tasks"), {
					body: { name: "bad", fun: "test.ping", tgt: [hosts[7]], start: "2030-01-01 00:00", ...bad },
				}),
				422,
			);
		}
	});
});
