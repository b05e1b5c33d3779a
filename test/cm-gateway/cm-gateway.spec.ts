/**
 * Remote execution through the cm-gateway against the salt-api simulator, over real HTTP on both
 * sides: POST /api/hosts/{id} and /api/groups/{id}, the actions records and `last_action`, and
 * salt-api's failures (down, hanging, 401 mid-session, malformed answers).
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually } from "../support/http";

/**
 * The simulated master back after an outage, with its minions reconnected: after a master start a real
 * master's minions reconnect within seconds, and a job published before then reaches none of them.
 */
async function comeBack(sim: SaltApiSimulator): Promise<void> {
	await sim.comeBack();
	await eventually(
		async () => (sim.connectedMinions().length ? true : undefined),
		10_000,
		"the minions to reconnect to the master",
	);
}

/** A master whose outages are short in tests: salt-api answers 500 after 200 ms, the minions reconnect 20 ms after a start. */
const FAST_OUTAGES = { masterDownAnswerMs: 200, restartPresentDelayMs: 20 };

const JID = /^\d{20}$/;

describe("cm-gateway: remote execution against salt-api", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A: string, B: string, C: string, GONE: string;
	let group = "";
	let emptyGroup = "";
	const url = (path: string) => `${h.api}/${path}`;
	const run = (path: string, body: unknown) => request("POST", url(path), { body });
	/** The actions record once the host answered or timed out (before that it is "running"). */
	const action = async (id: string) => {
		const res = await request("GET", url(`actions/${id}`));
		return res.status === 200 && res.body.state !== "running" ? res.body : undefined;
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 20,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 20],
			presenceEvents: false,
			...FAST_OUTAGES,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "2000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "2000",
				CM_SYNC_INTERVAL_MS: "0",
			},
		});
		[A, B, C, GONE] = sim.upMinions();
		await h.call("hosts.upsertMany", { hosts: [A, B, C, GONE].map(_id => ({ _id, status: "up", key: "accepted" })) });
		expect((await request("DELETE", url(`hosts/${GONE}`))).status).toBe(204);
		const g = await request("POST", url("groups"), { body: { name: "cm-web", type: 0, hosts: [A, B] } });
		expect(g.status).toBe(201);
		group = g.body._id;
		const e = await request("POST", url("groups"), { body: { name: "cm-empty", type: 0 } });
		expect(e.status).toBe(201);
		emptyGroup = e.body._id;
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});
	afterEach(() => sim.clearFaults());

	it("runs `local` test.ping on a host: {task_id, status, return}, an actions record and the host's last_action", async () => {
		const res = await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(Object.keys(res.body)).toEqual(["task_id", "status", "return"]);
		expect(res.body.task_id).toMatch(JID);
		expect(res.body.status).toBe("finished");
		expect(res.body.return).toEqual({ return: [{ [A]: true }] });
		const jid = res.body.task_id;
		expect(sim.job(jid)).toMatchObject({ fun: "test.ping", tgt: [A], tgtType: "list" });
		const rec = await action(`${jid}${A}`);
		expect(rec).toMatchObject({
			_id: `${jid}${A}`,
			jid,
			action: "test.ping",
			host: A,
			state: "finished",
			args: [],
			return: "true",
		});
		const host = await request("GET", url(`hosts/${A}`));
		expect(host.body.last_action).toBe(`${jid}${A}`);
	});

	it("records arg and kwarg as salt's fun_args (with __kwarg__) and a structured return as text", async () => {
		const res = await run(`hosts/${B}`, { cm_client: "local", fun: "test.arg", arg: ["x"], kwarg: { a: 1 } });
		expect(res.status).toBe(200);
		const rec = await action(`${res.body.task_id}${B}`);
		expect(rec.args).toEqual(["x", { __kwarg__: true, a: 1 }]);
		expect(typeof rec.return).toBe("string");
		expect(JSON.parse(rec.return)).toEqual(res.body.return.return[0][B]);
	});

	it("runs `local_async` (the default client): a 20-digit jid, status scheduled, and the returns recorded within seconds", async () => {
		const res = await run(`hosts/${C}`, { fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(res.body.task_id).toMatch(JID);
		expect(res.body.status).toBe("scheduled");
		expect(res.body.return).toEqual({ return: [{ jid: res.body.task_id, minions: [C] }] });
		const rec = await eventually(() => action(`${res.body.task_id}${C}`));
		expect(rec).toMatchObject({
			jid: res.body.task_id,
			action: "test.ping",
			host: C,
			state: "finished",
			return: "true",
		});
		const host = await eventually(async () => {
			const r = await request("GET", url(`hosts/${C}`));
			return r.body.last_action === `${res.body.task_id}${C}` ? r.body : undefined;
		});
		expect(host._id).toBe(C);
	});

	it("tells every gateway which jobs' returns it just recorded (actions.returned), after they are readable", async () => {
		// Each event: the jobs named, and whether this host's record of each could be read when it came.
		const told: Array<{ jids: string[]; readable: Promise<boolean[]> }> = [];
		const listener = h.broker!.createService({
			name: `returns-listener-${Date.now()}`,
			events: {
				"actions.returned"(ctx: { params: { jids: string[] } }) {
					const jids = ctx.params.jids;
					told.push({
						jids,
						readable: Promise.all(jids.map(async j => (await request("GET", url(`actions/${j}${C}`))).status === 200)),
					});
				},
			},
		});
		try {
			const res = await run(`hosts/${C}`, { fun: "test.ping", kwarg: {} });
			const jid = res.body.task_id as string;
			const event = await eventually(async () => told.find(t => t.jids.includes(jid)));
			expect(event.jids).toEqual([jid]);
			expect(await event.readable).toEqual([true]);
		} finally {
			await h.broker!.destroyService(listener);
		}
	});

	it("marks the hosts of a local_async job that never answer as timed out", async () => {
		sim.setNeverReturns(B, true);
		try {
			const res = await run(`hosts/${B}`, { cm_client: "local_async", fun: "test.ping" });
			expect(res.status).toBe(200);
			const rec = await eventually(() => action(`${res.body.task_id}${B}`), 6000);
			expect(rec).toMatchObject({ host: B, state: "timeout" });
		} finally {
			sim.setNeverReturns(B, false);
		}
	});

	it("reads a job with a silent host from the master's job cache a few times, not at every poll, while the event stream is up", async () => {
		// Each read is a runner call (jobs.list_job) that cost a real master 0.3-1.6 s at 1,000 minions; one job
		// waiting 10 minutes on a down host made 79 of them (docs/salt.md, "A real master with 1,004 minions").
		await eventually(
			async () => ((await h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
			10_000,
			"the event stream",
		);
		sim.setNeverReturns(B, true);
		try {
			const res = await run(`hosts/${B}`, { cm_client: "local_async", fun: "test.ping" });
			expect(res.status).toBe(200);
			const jid = res.body.task_id;
			expect(await eventually(() => action(`${jid}${B}`), 6000)).toMatchObject({ host: B, state: "timeout" });
			// CM_JOB_POLL_MS 100 and CM_JOB_TIMEOUT_MS 2000: a read at every poll is about 20; growing gaps, 5 or 6.
			const reads = sim.requests().filter(r => r.path === `/jobs/${jid}`).length;
			expect(reads).toBeGreaterThanOrEqual(1);
			expect(reads).toBeLessThanOrEqual(7);
		} finally {
			sim.setNeverReturns(B, false);
		}
	});

	it("reads the job cache at every poll while the event stream is down, and a return it missed is recorded", async () => {
		sim.setMinionDelay(C, 600);
		try {
			const res = await run(`hosts/${C}`, { cm_client: "local_async", fun: "test.ping" });
			expect(res.status).toBe(200);
			const jid = res.body.task_id;
			// The stream cut before C returns; C's return reaches the master (and its job cache) meanwhile.
			sim.dropEventStreams();
			expect(await eventually(() => action(`${jid}${C}`), 6000)).toMatchObject({ host: C, state: "finished" });
		} finally {
			sim.setMinionDelay(C, null);
		}
	});

	it("targets exactly the group's hostnames on POST /groups/{id}", async () => {
		sim.resetExecutions();
		const res = await run(`groups/${group}`, { cm_client: "local", fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(res.body.return).toEqual({ return: [{ [A]: true, [B]: true }] });
		expect(sim.job(res.body.task_id)).toMatchObject({ tgt: [A, B], tgtType: "list" });
		expect(sim.executionCount(A, "test.ping")).toBe(1);
		expect(sim.executionCount(B, "test.ping")).toBe(1);
		expect(sim.executionCount(C)).toBe(0);
		for (const host of [A, B])
			expect(await action(`${res.body.task_id}${host}`)).toMatchObject({ state: "finished", host });

		const async = await run(`groups/${group}`, { cm_client: "local_async", fun: "test.ping" });
		expect(async.status).toBe(200);
		expect([...async.body.return.return[0].minions].sort()).toEqual([A, B].sort());
		for (const host of [A, B]) await eventually(() => action(`${async.body.task_id}${host}`));
	});

	it("runs on a compound target (POST /run) exactly the hosts a preview of it lists, sent to Salt as that list", async () => {
		const target = `L@${A},${C},${GONE},no-such-host or F@cm-web`;
		const preview = await request("POST", url("targets/preview"), { body: { target } });
		expect(preview.body).toMatchObject({ hosts: [A, B, C].sort(), missing: [GONE, "no-such-host"].sort() });
		sim.resetExecutions();
		const audited = async () => (await request("GET", url("audit?max_results=1"))).body._meta.total as number;
		const before = await audited();
		const res = await run("run", { target, cm_client: "local", fun: "test.ping" });
		expect(res.status).toBe(200);
		expect(sim.job(res.body.task_id)).toMatchObject({ tgt: preview.body.hosts, tgtType: "list" });
		expect(res.body.return).toEqual({ return: [{ [A]: true, [B]: true, [C]: true }] });
		// The soft-deleted host named in the expression is never a target; the run is audited once.
		expect(sim.executionCount(GONE)).toBe(0);
		expect(await audited()).toBe(before + 1);
		const records = (
			await request("GET", url(`audit?where=${encodeURIComponent(JSON.stringify({ path: "/api/run" }))}`))
		).body._items;
		expect(records).toHaveLength(1);
		expect(records[0]).toMatchObject({ method: "POST", path: "/api/run" });
	});

	it("refuses a compound run that selects nothing (422), cannot be evaluated (400) or has a bad body (422), running nothing", async () => {
		sim.resetExecutions();
		expect(
			expectEveError(await run("run", { target: "nothing-is-named-so-*", fun: "test.ping" }), 422)._error.message,
		).toMatch(/selects no live host/);
		expect(expectEveError(await run("run", { target: "I@role:web", fun: "test.ping" }), 400)._error.message).toMatch(
			/pillar/,
		);
		expectEveError(await run("run", { fun: "test.ping" }), 422);
		expectEveError(await run("run", { target: A, fun: "test.ping", tgt: "*" }), 422);
		expectEveError(await run("run", { target: A, fun: "not a function" }), 422);
		expect(sim.executions()).toEqual([]);
	});

	it("answers 404 for an unknown or soft-deleted host and an unknown group, 422 for a group without hosts", async () => {
		sim.resetExecutions();
		expectEveError(await run("hosts/no-such-host.example", { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run(`hosts/${GONE}`, { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run("groups/000000000000000000000000", { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run(`groups/${emptyGroup}`, { cm_client: "local", fun: "test.ping" }), 422);
		expect(sim.executions()).toHaveLength(0);
	});

	it("answers 422 in Eve's shape for a bad body (unknown field, missing fun, bad cm_client, bad fun, bad kwarg)", async () => {
		sim.resetExecutions();
		const unknown = expectEveError(await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping", bogus: 1 }), 422);
		expect(unknown._issues).toEqual({ bogus: "unknown field" });
		expectEveError(await run(`hosts/${A}`, { cm_client: "local", kwarg: {} }), 422);
		const client = expectEveError(await run(`hosts/${A}`, { cm_client: "ssh", fun: "test.ping" }), 422);
		expect(Object.keys(client._issues)).toEqual(["cm_client"]);
		const fun = expectEveError(await run(`groups/${group}`, { fun: "rm -rf /" }), 422);
		expect(Object.keys(fun._issues)).toEqual(["fun"]);
		expectEveError(await run(`hosts/${A}`, { fun: "test.ping", kwarg: [1] }), 422);
		expect(sim.executions()).toHaveLength(0);
	});

	it("answers 502 when salt-api is down (never 500), and the rest of the API still answers", async () => {
		await sim.goDown("refuse");
		try {
			const res = expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 502);
			expect(res._error.message).toMatch(/unreachable/);
			expect(res._error.message).not.toContain(sim.credentials.password);
			const hosts = await request("GET", url("hosts"));
			expect(hosts.status).toBe(200);
		} finally {
			await comeBack(sim);
		}
		expect((await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
	});

	it("answers 504 when salt-api hangs, and 503 'the Salt master is not answering' when the master is down", async () => {
		await sim.goDown("hang");
		try {
			expectEveError(await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" }), 504);
		} finally {
			await comeBack(sim);
		}
		await sim.goDown("master-down");
		try {
			const err = expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 503);
			expect(err._error.message).toMatch(/^the Salt master is not answering \(salt-api answered 50[03]/);
		} finally {
			await comeBack(sim);
		}
	});

	it("logs in again after a 401 in the middle of a session and runs the job exactly once", async () => {
		expect((await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
		sim.resetExecutions();
		const before = sim.requests().length;
		sim.expireSessions();
		const res = await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" });
		expect(res.status).toBe(200);
		expect(res.body.return.return[0][A]).toBe(true);
		expect(sim.executionCount(A, "test.ping")).toBe(1);
		// (The event stream, which the expired session ended too, may reconnect in between: only the calls count. Its
		// reconnection starts a reconciliation, whose calls may fall in this window too, the first of them refused as
		// well: one login serves them all, and nothing sent with the session it opened is refused. A call sent with
		// the old session before the login answered may be refused after it: it is sent again with the new one.)
		const posts = sim
			.requests()
			.slice(before)
			.filter(r => r.method === "POST");
		const seen = posts.map(r => `${r.method} ${r.path} ${r.status}`);
		expect(seen.filter(s => s.startsWith("POST /login"))).toEqual(["POST /login 200"]);
		expect(seen[0]).toBe("POST / 401");
		const fresh = posts.find(r => r.path === "/login")!.session;
		expect(fresh).toBeTruthy();
		const refused = posts.filter(r => r.path === "/" && r.status === 401);
		const withFresh = posts.filter(r => r.path === "/" && r.session === fresh);
		expect(refused.every(r => r.session !== undefined && r.session !== fresh)).toBe(true);
		expect(withFresh.length).toBeGreaterThan(0);
		expect(withFresh.map(r => r.status).every(status => status === 200)).toBe(true);
		expect(posts.filter(r => r.path === "/").every(r => r.status === 200 || r.status === 401)).toBe(true);
	});

	it("does not re-send a local_async whose answer was malformed or cut off: 502, executed once", async () => {
		for (const kind of ["garbage", "reset", "wrong-shape"] as const) {
			sim.resetExecutions();
			const jobsBefore = sim.jobs().length;
			sim.malformNext(1, kind, { method: "POST", path: "/" });
			expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 502);
			// "Not sent again", proven by a later job: a marker run through the same client, waited for to return
			// (cm_client local); the job log then holds the one test.ping and the marker, nothing sent after them.
			await eventually(
				async () => (sim.executionCount(A, "test.ping") >= 1 ? true : undefined),
				5000,
				`the ${kind} job's execution`,
			);
			const marker = await run(`hosts/${A}`, { cm_client: "local", fun: "test.echo", arg: [`marker-${kind}`] });
			expect(marker.status).toBe(200);
			expect([
				kind,
				sim
					.jobs()
					.slice(jobsBefore)
					.filter(j => ["test.ping", "test.echo"].includes(j.fun))
					.map(j => j.fun),
			]).toEqual([kind, ["test.ping", "test.echo"]]);
			expect([kind, sim.executionCount(A, "test.ping")]).toEqual([kind, 1]);
		}
	});

	describe("POST /updates: loading the patches from the master", () => {
		const FIX1 = "apply_fix:\n  cmd.run:\n    - name: /opt/fix.sh\n";
		const WEB = "restart_web:\n  cmd.run:\n    - name: systemctl restart nginx\n";
		const load = (opts: { token?: string } = {}) => request("POST", url("updates"), opts);
		const patches = async (): Promise<Record<string, any>> => {
			const res = await request("GET", `${url("updates")}?max_results=50&sort=name`);
			expect(res.status).toBe(200);
			return Object.fromEntries(res.body._items.map((u: any) => [u.name, u]));
		};

		beforeAll(() => {
			sim.setPatch("fix1", FIX1);
			sim.setFile("patches/web/init.sls", WEB);
			// Not patches: outside the prefix, not a state file, or not nameable for state.apply.
			sim.setFile("other/fix9.sls", "x:\n  cmd.run:\n    - name: /bin/true\n");
			sim.setFile("patches/notes.txt", "not a state file\n");
			sim.setFile("patches/fix.v2.sls", "x:\n  cmd.run:\n    - name: /bin/true\n");
		});

		it("loads every .sls under patches/ with its sls name and text, and answers {_status, loaded, created}", async () => {
			const res = await load();
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ _status: "OK", loaded: 4, created: 4 });
			const all = await patches();
			expect(Object.keys(all).sort()).toEqual([
				"patches.fix-ntp",
				"patches.fix1",
				"patches.openssl-cve-2024-5535",
				"patches.web",
			]);
			expect(all["patches.fix1"]).toMatchObject({ text: FIX1, description: "" });
			expect(all["patches.web"].text).toBe(WEB);
			expect(all["patches.fix-ntp"].text).toMatch(/cmd\.run/);
			// The load's progress is the load_updates job: every patch file read, and the result.
			const job = (await request("GET", url("jobs/load_updates"))).body;
			expect(job).toMatchObject({
				status: "finished",
				percent: 100,
				progress: { done: 4, total: 4 },
				result: { loaded: 4, created: 4 },
				params: { prefix: "patches/" },
			});
			// Loading again creates nothing.
			expect((await load()).body).toEqual({ _status: "OK", loaded: 4, created: 0 });
			expect(Object.keys(await patches())).toHaveLength(4);
		});

		it("ignores the files that are not patches (other directories, non-.sls files, unnameable sls)", async () => {
			expect(sim.files()).toEqual(
				expect.arrayContaining([
					"top.sls",
					"common.sls",
					"other/fix9.sls",
					"patches/notes.txt",
					"patches/files/timesyncd.conf",
					"patches/fix.v2.sls",
				]),
			);
			await load();
			const names = Object.keys(await patches());
			for (const name of ["top", "common", "other.fix9", "patches.notes", "patches.files.timesyncd", "patches.fix.v2"])
				expect(names).not.toContain(name);
			expect(names.every(n => n.startsWith("patches."))).toBe(true);
		});

		it("keeps a local description when the text changed on the master, and keeps patches removed from the master", async () => {
			await load();
			const id = (await patches())["patches.fix1"]._id;
			expect(
				(await request("PATCH", url(`updates/${id}`), { body: { description: "Fixes the foo service" } })).status,
			).toBe(200);
			const changed = "apply_fix:\n  cmd.run:\n    - name: /opt/fix.sh --v2\n";
			sim.setPatch("fix1", changed);
			expect(sim.removeFile("patches/web/init.sls")).toBe(true);
			try {
				const res = await load();
				expect(res.body).toEqual({ _status: "OK", loaded: 3, created: 0 });
				const item = await request("GET", url(`updates/${id}`));
				expect(item.body).toMatchObject({
					_id: id,
					name: "patches.fix1",
					text: changed,
					description: "Fixes the foo service",
				});
				expect((await patches())["patches.web"]).toMatchObject({ text: WEB });
			} finally {
				sim.setFile("patches/web/init.sls", WEB);
			}
		});

		// While the master is down a real salt-api holds runner and wheel calls until it is back: fleet-ctl answered
		// POST /api/updates with 504 after its own timeout (master_down_timings.md of the 2026-11-29 captures).
		it("answers 502 when salt-api is down, 504 when the master is (runner calls held) or salt-api hangs, in Eve's shape (never 500)", async () => {
			const before = await patches();
			sim.setPatch("fix-late", FIX1);
			try {
				for (const mode of ["refuse", "master-down", "hang"] as const) {
					await sim.goDown(mode);
					try {
						const err = expectEveError(await load(), mode === "refuse" ? 502 : 504);
						expect(err._error.message).not.toContain(sim.credentials.password);
					} finally {
						await comeBack(sim);
					}
				}
				sim.failNext(10, 500, { filter: { method: "POST", path: "/" } });
				expectEveError(await load(), 503);
				sim.clearFaults();
				// The failed load is what its job says.
				const job = (await request("GET", url("jobs/load_updates"))).body;
				expect(job.status).toBe("failed");
				expect(job.error).toMatch(/^the Salt master is not answering \(salt-api answered 500/);
				expect(Object.keys(await patches()).sort()).toEqual(Object.keys(before).sort());
			} finally {
				sim.removeFile("patches/fix-late.sls");
			}
		});

		it("refuses a viewer token with 403", async () => {
			const tok = await request("POST", url("tokens"), { body: { name: "cm-viewer", role: "viewer" } });
			expect(tok.status).toBe(201);
			sim.resetExecutions();
			const before = sim.requests().length;
			expectEveError(await load({ token: tok.body.token }), 403);
			expect(sim.requests().length).toBe(before);
		});
	});
});

describe("cm-gateway: inventory reconciliation (cm-gateway.sync)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (path: string) => `${h.api}/${path}`;
	const sync = () => h.call("cm-gateway.sync");
	const listed = async (): Promise<Record<string, any>> => {
		const res = await request("GET", `${url("hosts")}?max_results=50&sort=_id`);
		expect(res.status).toBe(200);
		return Object.fromEntries(res.body._items.map((x: any) => [x._id, x]));
	};
	const item = async (id: string, query = "") => request("GET", `${url(`hosts/${id}`)}${query}`);
	const httpDate = (grain: string) => new Date(grain.replace(" ", "T")).toUTCString();

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 12,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceEvents: false,
			...FAST_OUTAGES,
		});
		await sim.start();
		h = await startEmbedded({
			env: { ...sim.cmApiEnv, CM_API_TIMEOUT_MS: "2000", CM_SYNC_INTERVAL_MS: "0", CM_EVENTS: "false" },
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});
	afterEach(() => sim.clearFaults());

	it("lists exactly the master's minions with key states, fingerprints, up/down, version, ip, dates and grains", async () => {
		const res = await sync();
		const ids = sim.minionIds();
		expect(res).toMatchObject({
			_status: "OK",
			hosts: ids.length,
			created: ids.length,
			updated: 0,
			removed: 0,
			restored: 0,
			fingerprints_changed: 0,
		});
		const all = await listed();
		expect(Object.keys(all).sort()).toEqual([...ids].sort());
		const states = new Set<string>();
		for (const id of ids) {
			const m = sim.minion(id)!;
			const host = all[id];
			states.add(m.key);
			expect(host.key).toBe(m.key);
			expect(host.fingerprint).toBe(m.fingerprint);
			expect(host.fingerprint_history).toEqual([]);
			expect(host.status).toBe(m.key !== "accepted" ? "unknown" : m.up ? "up" : "down");
			if (host.status === "up") expect(typeof host.heartbeat).toBe("string");
			if (m.key !== "accepted") continue;
			expect(host.version).toBe(m.grains.cmversion);
			expect(host.ip).toBe(m.grains.ip);
			const ctl = m.grains.ctl as { last_distupgrade: string; last_stateapply: string };
			expect(host.last_distupgrade).toBe(httpDate(ctl.last_distupgrade));
			expect(host.last_stateapply).toBe(httpDate(ctl.last_stateapply));
			const one = await item(id);
			expect(one.status).toBe(200);
			expect(one.body.grain).toMatchObject({
				cpu_model: m.grains.cpu_model,
				num_cpus: m.grains.num_cpus,
				cmversion: m.grains.cmversion,
				ctl,
				ip_interfaces: m.grains.ip_interfaces,
			});
		}
		expect([...states].sort()).toEqual(["accepted", "denied", "pending", "rejected"]);
		expect(Object.values(all).some((x: any) => x.status === "down")).toBe(true);

		// A second run changes no host set, duplicates nothing and, the master unchanged, writes no host.
		expect(await sync()).toMatchObject({ hosts: ids.length, created: 0, updated: 0 });
		expect(Object.keys(await listed()).sort()).toEqual([...ids].sort());
	});

	it("follows presence and stores grain keys with '.' or a leading '$' sanitized", async () => {
		const [id] = sim.upMinions();
		sim.setDown(id);
		sim.setGrains(id, { "ctl.role": "edge", $weird: { "a.b": 1 } });
		try {
			await sync();
			const one = await item(id);
			expect(one.body.status).toBe("down");
			expect(one.body.grain).toMatchObject({ ctl_role: "edge", _weird: { a_b: 1 } });
			expect(one.body.grain).not.toHaveProperty(["ctl.role"]);
		} finally {
			sim.setUp(id, true);
		}
		await sync();
		expect((await item(id)).body.status).toBe("up");
	});

	it("keeps a changed fingerprint's predecessor in fingerprint_history and raises an alert", async () => {
		const [id] = sim.upMinions();
		await sync();
		const old = sim.minion(id)!.fingerprint;
		const fresh = sim.changeFingerprint(id);
		const res = await sync();
		expect(res.fingerprints_changed).toBe(1);
		const host = (await item(id)).body;
		expect(host.fingerprint).toBe(fresh);
		expect(host.fingerprint_history).toHaveLength(1);
		expect(host.fingerprint_history[0]).toMatchObject({ fingerprint: old });
		expect(typeof host.fingerprint_history[0].added).toBe("string");
		const alerts = await request("GET", `${url("alerts")}?max_results=50`);
		expect(alerts.status).toBe(200);
		expect(alerts.body._items).toEqual(
			expect.arrayContaining([
				expect.objectContaining({
					type: "fingerprint.changed",
					level: "warning",
					payload: expect.objectContaining({ hostname: id, fingerprint: fresh }),
				}),
			]),
		);
		// Unchanged on the next run: no new history entry.
		await sync();
		expect((await item(id)).body.fingerprint_history).toHaveLength(1);
	});

	it("soft-deletes a host whose key was deleted, and restores it when the key comes back", async () => {
		const [, id] = sim.upMinions();
		await sync();
		expect(sim.removeMinion(id)).toBe(true);
		expect((await sync()).removed).toBe(1);
		expectEveError(await item(id), 404);
		expect((await item(id, "?show_soft_deleted=true")).status).toBe(200);
		expect(Object.keys(await listed())).not.toContain(id);

		sim.addMinion({ id, key: "accepted" });
		expect((await sync()).restored).toBe(1);
		const back = await item(id);
		expect(back.status).toBe(200);
		expect(back.body).toMatchObject({ key: "accepted", fingerprint: sim.minion(id)!.fingerprint });
		expect(Object.keys(await listed()).sort()).toEqual(sim.minionIds().sort());
	});

	it("leaves a host an operator soft-deleted deleted while its key is still on the master", async () => {
		const [, , id] = sim.upMinions();
		await sync();
		expect((await request("DELETE", url(`hosts/${id}`))).status).toBe(204);
		expect((await sync()).restored).toBe(0);
		expectEveError(await item(id), 404);
	});

	it("runs one sync at a time: a second call joins the one under way", async () => {
		const before = sim.requests().filter(r => r.path === "/").length;
		const [a, b] = await Promise.all([sync(), sync()]);
		expect(a).toEqual(b);
		// key.list_all, key.finger, config.get nodegroups, manage.present, cache.grains: once.
		expect(sim.requests().filter(r => r.path === "/").length - before).toBe(5);
	});

	it("fails cleanly when salt-api is down, hangs or fails, and leaves every host as it was", async () => {
		await sync();
		const before = await listed();
		const victim = sim.upMinions()[3];
		sim.removeMinion(victim);
		sim.changeFingerprint(sim.upMinions()[0]);
		try {
			for (const mode of ["refuse", "master-down", "hang"] as const) {
				await sim.goDown(mode);
				try {
					// The master down: salt-api holds the wheel and runner calls (master_down_timings.md): 504.
					await expect(sync()).rejects.toMatchObject({ code: { refuse: 502, "master-down": 504, hang: 504 }[mode] });
				} finally {
					await comeBack(sim);
				}
			}
			// salt-api failing with 500 (after the retries): nothing is written either.
			sim.failNext(10, 500, { filter: { method: "POST", path: "/" } });
			await expect(sync()).rejects.toBeTruthy();
			sim.clearFaults();
			expect(await listed()).toEqual(before);
		} finally {
			sim.clearFaults();
		}
		// Back to normal: the removal is seen now.
		expect((await sync()).removed).toBe(1);
	});
});

describe("cm-gateway: periodic inventory reconciliation (CM_SYNC_INTERVAL_MS)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 5,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceEvents: false,
			...FAST_OUTAGES,
		});
		await sim.start();
		h = await startEmbedded({
			env: { ...sim.cmApiEnv, CM_API_TIMEOUT_MS: "2000", CM_SYNC_INTERVAL_MS: "200", CM_EVENTS: "false" },
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
		process.env.CM_SYNC_INTERVAL_MS = "";
	});

	it("reconciles by itself on the interval, and again after an outage", async () => {
		const ids = async () => {
			const res = await request("GET", `${h.api}/hosts?max_results=50`);
			return res.body._items.map((x: any) => x._id).sort();
		};
		await eventually(async () => ((await ids()).length === sim.minionIds().length ? true : undefined));
		await sim.goDown("refuse");
		// Not an oracle: the interval's syncs (every 200 ms) meet the outage for a while; the catch-up is waited for below.
		await new Promise(r => setTimeout(r, 500));
		const added = sim.addMinion({ key: "pending" });
		await comeBack(sim);
		await eventually(async () => ((await ids()).includes(added) ? true : undefined));
		expect(await ids()).toEqual(sim.minionIds().sort());
	});
});

describe("cm-gateway: a failed reconciliation is tried again soon (CM_SYNC_RETRY_MS)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const posts = () => sim.requests().filter(r => r.method === "POST" && r.path === "/");
	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 5,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceEvents: false,
			...FAST_OUTAGES,
		});
		await sim.start();
		// The start reconciliation and the next two fail (salt-api's 500 is a master down: not tried again by the client).
		sim.failNext(3, 500, { filter: { method: "POST", path: "/" } });
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "2000",
				CM_SYNC_INTERVAL_MS: "3000",
				CM_SYNC_RETRY_MS: "300",
				CM_EVENTS: "false",
			},
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("fills the inventory once the master answers, not an interval later, then waits the interval again", async () => {
		const ids = async () =>
			((await request("GET", `${h.api}/hosts?max_results=50`)).body._items as any[]).map(x => x._id).sort();
		await eventually(
			async () => ((await ids()).length === sim.minionIds().length ? true : undefined),
			15_000,
			"the hosts after the failed reconciliations",
		);
		expect(await ids()).toEqual(sim.minionIds().sort());
		const failed = posts().filter(r => r.status === 500);
		expect(failed).toHaveLength(3);
		// 300 ms after the first failure, then twice as long (timers never fire early; under load they are late).
		expect(failed[1].atMs - failed[0].atMs).toBeGreaterThanOrEqual(300);
		expect(failed[2].atMs - failed[1].atMs).toBeGreaterThanOrEqual(600);
		const job = (await request("GET", `${h.api}/jobs/inventory_sync`)).body;
		expect(job.status).toBe("finished");
		// A success resets the delay to the interval: the next reconciliation comes 3 s after it (without the reset, 1.2 s).
		const success = posts()[failed.length];
		expect(success.status).toBe(200);
		const after = posts().length;
		const next = await eventually(async () => posts()[after], 10_000, "the interval's reconciliation");
		expect(next.atMs - success.atMs).toBeGreaterThanOrEqual(3000);
	});
});

describe("cm-gateway without a configured master", () => {
	let h: Harness;
	beforeAll(async () => {
		h = await startEmbedded({ env: { CM_API_URL: "" } });
		await h.call("hosts.upsertMany", { hosts: [{ _id: "nomaster-1.example", status: "up" }] });
	});
	afterAll(() => h?.stop());

	it("answers 503 in Eve's shape for remote execution and serves the rest of the API", async () => {
		const res = expectEveError(
			await request("POST", `${h.api}/hosts/nomaster-1.example`, { body: { cm_client: "local", fun: "test.ping" } }),
			503,
		);
		expect(res._error.message).toMatch(/no configuration-management master is configured/);
		const g = await request("POST", `${h.api}/groups`, { body: { name: "nm", hosts: ["nomaster-1.example"] } });
		expectEveError(await request("POST", `${h.api}/groups/${g.body._id}`, { body: { fun: "test.ping" } }), 503);
		expectEveError(await request("POST", `${h.api}/run`, { body: { target: "nomaster-*", fun: "test.ping" } }), 503);
		expect((await request("GET", `${h.api}/hosts/nomaster-1.example`)).status).toBe(200);
	});

	it("answers 503 in Eve's shape for POST /updates (no master to load the patches from)", async () => {
		const res = expectEveError(await request("POST", `${h.api}/updates`), 503);
		expect(res._error.message).toMatch(/no configuration-management master is configured/);
	});
});
