/**
 * The job history (`GET /api/salt_jobs`, docs/jobs.md) against the salt-api simulator over real HTTP: one record
 * per job started through every door (a host, a group, a compound target, the REPL, a task, `local` and
 * `local_async`) and per job started outside fleet-ctl and seen on the bus; the counts as the returns, failures
 * and timeouts come; the filters operators use; the links both ways; retention.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery } from "../support/http";

const JID = /^\d{20}$/;
const PATCH = "patches.openssl-cve-2024-5535";

describe("job history: /api/salt_jobs", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A: string, B: string, C: string, D: string;
	let group = "";
	const url = (path: string) => `${h.api}/${path}`;
	const get = (path: string) => request("GET", url(path));
	const list = (query: Record<string, unknown>) => request("GET", withQuery(url("salt_jobs"), query));
	/** The job's record once it is finished. */
	const finished = (jid: string) =>
		eventually(
			async () => {
				const res = await get(`salt_jobs/${jid}`);
				if (process.env.DBG) console.log(res.status, JSON.stringify(res.body));
				return res.status === 200 && res.body.state === "finished" ? res.body : undefined;
			},
			8000,
			`job ${jid} finished in the history`,
		);

	/**
	 * The bus's jobs up to now have been looked at: a job started outside fleet-ctl now (on `host`) is recorded. Each
	 * job's grace runs from its `new` event, in order, so any job seen before has been recorded or passed over by then.
	 */
	const busSeen = async (host: string) => {
		const later = sim.cliJob([host], "test.ping", [], { tgtType: "list", user: "root" });
		expect(later).not.toBeNull();
		expect((await finished(later!.jid)).origin).toBe("external");
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 8,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 20],
			presenceEvents: false,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "5000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "1500",
				CM_SYNC_INTERVAL_MS: "0",
				CM_EXTERNAL_JOB_GRACE_MS: "150",
			},
		});
		[A, B, C, D] = sim.upMinions();
		await h.call("hosts.upsertMany", {
			hosts: sim.upMinions().map(_id => ({ _id, status: "up", key: "accepted", grain: { os: "Debian" } })),
		});
		const g = await request("POST", url("groups"), { body: { name: "jh-web", type: 0, hosts: [A, B] } });
		expect(g.status).toBe(201);
		group = g.body._id;
		await eventually(
			async () => ((await h.call<{ connected: boolean }>("cm-gateway.eventStreamStatus")).connected ? true : undefined),
			5000,
			"the event stream",
		);
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});
	afterEach(() => {
		sim.clearPatchFailures();
		for (const id of [A, B, C, D]) sim.setNeverReturns(id, false);
	});

	it("records a group run: what, on what as given, the frozen hosts, who, from where, and the counts once the hosts returned", async () => {
		const res = await request("POST", url(`groups/${group}`), {
			body: { fun: "test.echo", arg: ["hi"], kwarg: { note: "x" } },
		});
		expect(res.status).toBe(200);
		const jid = res.body.task_id;
		expect(jid).toMatch(JID);
		const job = await finished(jid);
		expect(job).toMatchObject({
			_id: jid,
			fun: "test.echo",
			args: ["hi", { __kwarg__: true, note: "x" }],
			target: `F@${group}`,
			minions: [A, B].sort(),
			expected: 2,
			returned: 2,
			succeeded: 2,
			failed: 0,
			timed_out: 0,
			user: "bootstrap-admin",
			origin: "api",
			state: "finished",
		});
		expect(new Date(job.finished).getTime()).toBeGreaterThanOrEqual(new Date(job.started).getTime() - 1000);
		// Linked both ways: the job to its hosts' returns, each return to its job.
		const href: string = job._links.related.actions.href;
		const returns = await get(href);
		expect(returns.body._items.map((a: { host: string }) => a.host).sort()).toEqual([A, B].sort());
		expect(returns.body._items[0]).toMatchObject({
			jid,
			retcode: 0,
			success: true,
			_links: { related: { jid: { href: `salt_jobs/${jid}` } } },
		});
		const embedded = await get(`actions/${jid}${A}?embedded=${encodeURIComponent('{"jid":1}')}`);
		expect(embedded.body.jid).toMatchObject({ _id: jid, fun: "test.echo", state: "finished" });
	});

	it("counts failed hosts (Salt's retcode) and silent ones (timed out), and finishes the job when none is left", async () => {
		sim.failPatch(PATCH, [A]);
		sim.setNeverReturns(C, true);
		const res = await request("POST", url("run"), {
			body: { target: `L@${A},${B},${C}`, fun: "state.apply", kwarg: { mods: PATCH } },
		});
		expect(res.status).toBe(200);
		const job = await finished(res.body.task_id);
		expect(job).toMatchObject({
			target: `L@${A},${B},${C}`,
			expected: 3,
			returned: 2,
			succeeded: 1,
			failed: 1,
			timed_out: 1,
			state: "finished",
		});
		expect((await get(`actions/${res.body.task_id}${A}`)).body).toMatchObject({ retcode: 2, success: false });
	});

	it("records a `local` run with its returns at once, and never takes it for an external job while salt-api waits", async () => {
		// Slower than the external grace (150 ms): the bus shows the job long before salt-api answers.
		sim.setMinionDelay(D, 2000);
		try {
			let answered = false;
			const pending = request("POST", url(`hosts/${D}`), { body: { cm_client: "local", fun: "test.ping" } }).finally(
				() => (answered = true),
			);
			await eventually(
				async () => sim.jobs().find(j => j.fun === "test.ping" && j.minions.includes(D)),
				5000,
				"the job on the bus",
			);
			// Past its grace (a later job's has passed), salt-api still waiting: the job is not recorded as someone else's.
			await busSeen(A);
			expect(answered).toBe(false);
			expect((await list({ where: { minions: D, origin: "external" } })).body._meta.total).toBe(0);
			const res = await pending;
			expect(res.status).toBe(200);
			const job = await finished(res.body.task_id);
			expect(job).toMatchObject({
				target: D,
				minions: [D],
				expected: 1,
				returned: 1,
				succeeded: 1,
				origin: "api",
				user: "bootstrap-admin",
			});
		} finally {
			sim.setMinionDelay(D, null);
		}
	});

	it("keeps the jid of a `local` run none of whose hosts returned (salt-api's answer names none): ours, not external", async () => {
		sim.setNeverReturns(C, true);
		const res = await request("POST", url(`hosts/${C}`), { body: { cm_client: "local", fun: "test.ping" } });
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ status: "finished", return: { return: [{ [C]: false }] } });
		expect(res.body.task_id).toMatch(JID);
		const job = await finished(res.body.task_id);
		expect(job).toMatchObject({
			fun: "test.ping",
			target: C,
			minions: [C],
			expected: 1,
			returned: 0,
			timed_out: 1,
			origin: "api",
			user: "bootstrap-admin",
		});
		expect((await get(`actions/${res.body.task_id}${C}`)).body).toMatchObject({
			jid: res.body.task_id,
			host: C,
			state: "timeout",
		});
		// A job started on the master afterwards is recorded as external: by then the run's job would have been too.
		sim.setNeverReturns(C, false);
		const later = sim.cliJob([C], "test.echo", ["after"], { tgtType: "list", user: "ops" });
		await finished(later!.jid);
		expect((await list({ where: { minions: C, origin: "external", fun: "test.ping" } })).body._meta.total).toBe(0);
		const audit = await get(`audit?where=${encodeURIComponent(JSON.stringify({ jid: res.body.task_id }))}`);
		expect(audit.body._meta?.total ?? audit.body._items?.length).toBe(1);
	});

	it("records a job whose compound target its minions cannot read (unbalanced) as finished with no host, not 10 minutes running", async () => {
		const cli = sim.cliJob(`( ${A} or ${B}`, "test.ping", [], { tgtType: "compound", user: "ops" });
		expect(cli?.minions.sort()).toEqual([A, B].sort());
		const job = await finished(cli!.jid);
		expect(job).toMatchObject({
			origin: "external",
			user: "salt:ops",
			target: `( ${A} or ${B}`,
			minions: [],
			expected: 0,
			state: "finished",
		});
	});

	it("records jobs started outside fleet-ctl from the bus (user salt:<user>, target as an expression), not the master's own plumbing", async () => {
		const cli = sim.cliJob(`${A.slice(0, -1)}*`, "test.ping", [], { user: "root" });
		expect(cli).not.toBeNull();
		const job = await finished(cli!.jid);
		expect(job).toMatchObject({
			_id: cli!.jid,
			fun: "test.ping",
			target: `${A.slice(0, -1)}*`,
			origin: "external",
			user: "salt:root",
			expected: cli!.minions.length,
			returned: cli!.minions.length,
		});
		expect(job.minions).toEqual([...cli!.minions].sort());
		const listed = sim.cliJob([B, C], "cmd.run", ["uptime"], { tgtType: "list", user: "ops" });
		expect((await finished(listed!.jid)).target).toBe(`L@${B},${C}`);
		// The master's find_job polls are hidden (CM_JOBS_HIDDEN).
		const plumbing = sim.cliJob([A], "saltutil.find_job", [listed!.jid], { tgtType: "list", user: "saltapi" });
		await busSeen(B);
		expectEveError(await get(`salt_jobs/${plumbing!.jid}`), 404);
	});

	it("takes the origin from the server, not the client's User-Agent, and links a task's runs to the task", async () => {
		// Any client can say it is the REPL: an interactive request is `api` whatever its User-Agent.
		const repl = await request("POST", url(`hosts/${B}`), {
			body: { fun: "test.ping" },
			headers: { "User-Agent": "fleet-ctl-repl (ops-laptop)" },
		});
		expect((await finished(repl.body.task_id)).origin).toBe("api");
		const token = await request("POST", url("tokens"), { body: { name: "jh-operator", role: "operator" } });
		expect(token.status).toBe(201);
		const ran = await h.call<{ task_id: string }>("cm-gateway.runTask", {
			task: "65f000000000000000000001",
			owner: token.body._id,
			cm_client: "local_async",
			fun: "test.ping",
			tgt: [C],
			target: `${D}`,
		});
		const job = await finished(ran.task_id);
		expect(job).toMatchObject({
			origin: "task",
			task: "65f000000000000000000001",
			user: "jh-operator",
			target: `L@${C} or (${D})`,
			minions: [C, D].sort(),
		});
	});

	it("filters on every field (a host finds every job that targeted it), newest first, with keyset paging on _id", async () => {
		const jids: string[] = [];
		for (const host of [A, B, A])
			jids.push((await request("POST", url(`hosts/${host}`), { body: { fun: "test.ping" } })).body.task_id);
		for (const jid of jids) await finished(jid);
		const ofA = await list({ where: { minions: A, _id: { $gte: jids[0] } } });
		expect(ofA.status).toBe(200);
		expect(ofA.body._items.map((j: { _id: string }) => j._id)).toEqual([jids[2], jids[0]]);
		// Lists carry the counts; the host list is on the record's own page.
		expect(ofA.body._items[0].minions).toBeUndefined();
		expect(ofA.body._items[0]).toMatchObject({
			expected: 1,
			returned: 1,
			_links: { self: { href: `salt_jobs/${jids[2]}` } },
		});
		// Keyset paging: the page after a jid, in the same order.
		const page1 = await list({ where: { _id: { $gte: jids[0] } }, max_results: 2 });
		expect(page1.body._items.map((j: { _id: string }) => j._id)).toEqual([jids[2], jids[1]]);
		const page2 = await list({ where: { _id: { $gte: jids[0], $lt: jids[1] } }, max_results: 2 });
		expect(page2.body._items.map((j: { _id: string }) => j._id)).toEqual([jids[0]]);
		const oldestFirst = await list({ where: { _id: { $in: jids } }, sort: "started,_id" });
		expect(oldestFirst.body._items.map((j: { _id: string }) => j._id)).toEqual(jids);
		for (const where of [
			{ origin: "external" },
			{ fun: "state.apply", failed: { $gt: 0 } },
			{ user: "bootstrap-admin", state: "finished" },
			{ timed_out: { $gte: 1 } },
		]) {
			const res = await list({ where });
			expect(res.status).toBe(200);
			expect(res.body._items.length).toBeGreaterThan(0);
			for (const item of res.body._items)
				for (const [k, v] of Object.entries(where)) if (typeof v === "string") expect(item[k]).toBe(v);
		}
	});

	it("answers bad reads with Eve's errors and publishes no write", async () => {
		expectEveError(await list({ where: "{not json" }), 400);
		expectEveError(await list({ where: { $where: "1" } }), 400);
		expectEveError(await get("salt_jobs/20990101000000000000"), 404);
		expectEveError(await get("salt_jobs/not-a-jid"), 404);
		expectEveError(await request("POST", url("salt_jobs"), { body: { fun: "x" } }), 405);
		expectEveError(await request("DELETE", url("salt_jobs/20990101000000000000")), 405);
	});

	it("drops the jobs past retention with their hosts' returns", async () => {
		const res = await request("POST", url(`hosts/${C}`), { body: { fun: "test.ping" } });
		const jid = res.body.task_id;
		await finished(jid);
		const kept = (await list({})).body._meta.total as number;
		expect(await h.call("salt-jobs.prune", { before: new Date(Date.now() - 86_400_000) })).toEqual({ removed: 0 });
		const pruned = await h.call<{ removed: number }>("salt-jobs.prune", { before: new Date(Date.now() + 1000) });
		expect(pruned.removed).toBe(kept);
		expectEveError(await get(`salt_jobs/${jid}`), 404);
		expectEveError(await get(`actions/${jid}${C}`), 404);
	});
});
