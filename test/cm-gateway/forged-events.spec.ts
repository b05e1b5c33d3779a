/**
 * Events a minion forges on the master's bus (issue 43): one minion, through `event.fire_master` / `event.send`
 * run on it, puts another host's job return and presence events on the bus, in the shapes a real Salt 3006.0
 * master gave them (test/simulators/captures/salt-3006.0-2026-11-29-forged-events). Seen through fleet-ctl's API:
 * the job's actions, its salt_jobs record and the hosts' presence do not move; the real returns still land; the
 * forgery is logged once, without its payload. Two returns salt-api cannot encode (a spoofed `_return` with
 * fire_master's bytes `tok`, `test.get_opts`' datetimes) cut the stream: fleet-ctl reconnects and catches up.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { eventually, request, withQuery } from "../support/http";

const SOON = 10_000;
/** How late the hosts of the forged job answer: the forgeries all come before. */
const REAL_RETURN_MS = 3000;

describe("cm-gateway: events a minion forged on the master's bus", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (path: string) => `${h.api}/${path}`;
	const get = async (path: string) => (await request("GET", url(path))).body;
	let markers = 0;
	/** Every event the stream brought before now was applied: a marker alert from a host that is up shows. */
	const eventsApplied = async (from: string) => {
		const status = `marker-${++markers}`;
		sim.vncConnect(from, status);
		await eventually(
			async () =>
				(await get(withQuery("alerts", { where: { type: "vnc.connect", "payload.status": status } })))._items.length
					? true
					: undefined,
			SOON,
			`the marker ${status}`,
		);
		// Returns are written 50 ms after they arrive (returns.ts RETURN_FLUSH_MS): let a flush pass too.
		await new Promise(r => setTimeout(r, 300));
	};
	/** Runs a function on minion `from` as a job the master publishes (what a token allowed to run it does). */
	const onMinion = (from: string, fun: string, arg: unknown[]) =>
		expect(sim.cliJob([from], fun, arg, { tgtType: "list" })).not.toBeNull();

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			ids: ["web-01", "web-02", "web-03", "db-01", "db-02", "db-03"],
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			presenceIntervalMs: 3_600_000,
		});
		await sim.start();
		h = await startEmbedded({
			captureLogs: true,
			env: {
				CTL_SECRET_KEY: "forged-events-secret-key",
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "2000",
				// Returns come from the event stream only: the job cache is not read while the test runs.
				CM_JOB_POLL_MS: "60000",
				CM_JOB_TIMEOUT_MS: "120000",
				CM_SYNC_INTERVAL_MS: "3600000",
				// Any reading is believed at once: a forged presence that got through would show without waiting.
				CM_PRESENCE_MAX_LOSS_PERCENT: "100",
			},
		});
		await eventually(
			async () => ((await h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
			SOON,
			"the event stream",
		);
		await eventually(
			async () => ((await get(withQuery("hosts", { where: { status: "up" } })))._meta.total === 6 ? true : undefined),
			SOON,
			"every host up",
		);
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("a minion forging another host's return for a real jid changes no action and no job; the real returns land", async () => {
		const [attacker, victim] = sim.upMinions();
		for (const id of [attacker, victim]) sim.setMinionDelay(id, REAL_RETURN_MS);
		try {
			const g = await request("POST", url("groups"), {
				body: { name: "forged-returns", type: 0, hosts: [attacker, victim] },
			});
			const run = await request("POST", url(`groups/${g.body._id}`), {
				body: { cm_client: "local_async", fun: "test.echo", arg: ["real"] },
			});
			expect(run.status).toBe(200);
			const jid: string = run.body.task_id;
			const actions = async () =>
				Object.fromEntries(
					((await get(withQuery("actions", { where: { jid } })))._items as any[]).map(a => [
						a.host,
						{ state: a.state, return: a.return },
					]),
				);
			await eventually(
				async () => (Object.keys(await actions()).length === 2 ? true : undefined),
				SOON,
				"the running records",
			);
			const running = { [attacker]: { state: "running", return: "" }, [victim]: { state: "running", return: "" } };
			expect(await actions()).toEqual(running);

			const payload = {
				id: victim,
				jid,
				fun: "test.echo",
				fun_args: ["real"],
				return: "forged",
				retcode: 0,
				success: true,
				cmd: "_return",
			};
			const tag = `salt/job/${jid}/ret/${victim}`;
			// The _minion_event wrapper: event.fire_master and event.send through the minion daemon.
			onMinion(attacker, "event.fire_master", [payload, tag]);
			onMinion(attacker, "event.send", [tag, { __kwarg__: true, data: payload }]);
			// A preload that makes the load a `_return` in the victim's name (the master does not check whose).
			onMinion(attacker, "event.fire_master", [{}, "x", { __kwarg__: true, preload: { ...payload, tok: "x" } }]);
			await eventsApplied(sim.upMinions()[5]);

			expect(await actions()).toEqual(running);
			const job = await get(`salt_jobs/${jid}`);
			expect(job).toMatchObject({ state: "running", expected: 2, returned: 0, succeeded: 0, failed: 0 });

			// The real returns still land.
			await eventually(
				async () => {
					const a = await actions();
					return a[attacker]?.state === "finished" && a[victim]?.state === "finished" ? a : undefined;
				},
				SOON,
				"the real returns",
			);
			expect(await actions()).toEqual({
				[attacker]: { state: "finished", return: "real" },
				[victim]: { state: "finished", return: "real" },
			});
			await eventually(
				async () => ((await get(`salt_jobs/${jid}`)).state === "finished" ? true : undefined),
				SOON,
				"the job finished",
			);
			expect(await get(`salt_jobs/${jid}`)).toMatchObject({ state: "finished", returned: 2, succeeded: 2, failed: 0 });

			// Logged at warn once per sender and kind, without the payload.
			const logs = h.logs!();
			const lines = logs.split("\n").filter(l => l.includes("forged on the Salt master's bus"));
			expect(lines.filter(l => l.includes(`minion_event on tag "${tag}" from "${attacker}"`))).toHaveLength(1);
			expect(lines.filter(l => l.includes(`return_spoof on tag "${tag}"`))).toHaveLength(1);
			expect(lines.join("\n")).not.toContain('forged"');
			expect(lines.join("\n")).not.toContain('"return"');
		} finally {
			for (const id of [attacker, victim]) sim.setMinionDelay(id, null);
		}
	});

	it("a forged return salt-api cannot encode cuts the event stream: fleet-ctl reconnects and catches up from the job cache", async () => {
		const [attacker, , , victim] = sim.upMinions();
		const cuts = () => h.logs!().split("Salt event stream lost").length - 1;
		const before = cuts();
		// Its return comes 50 ms after the job, which starts right after the cut: before fleet-ctl is back (250 ms).
		sim.setMinionDelay(victim, 50);
		try {
			// fire_master's own `tok` is bytes: rest_cherrypy writes the tag line and dies (captures, events1.txt's end).
			onMinion(attacker, "event.fire_master", [
				{},
				"x",
				{ __kwarg__: true, preload: { cmd: "_return", id: attacker, jid: "20261129000000000001", return: "cut" } },
			]);
			const run = await request("POST", url(`hosts/${victim}`), {
				body: { cm_client: "local_async", fun: "test.echo", arg: ["during-the-cut"] },
			});
			expect(run.status).toBe(200);
			const jid: string = run.body.task_id;
			await eventually(async () => (cuts() > before ? true : undefined), SOON, "the stream cut");
			// The victim's return came while the stream was down: the job cache read on reconnection brings it.
			await eventually(
				async () => ((await get(`actions/${jid}${victim}`))?.state === "finished" ? true : undefined),
				SOON,
				"the return made during the cut",
			);
			expect(await get(`actions/${jid}${victim}`)).toMatchObject({ state: "finished", return: "during-the-cut" });
			expect(sim.requests().some(r => r.path === `/jobs/${jid}`)).toBe(true);
			expect((await h.call("cm-gateway.eventStreamStatus")).connected).toBe(true);
		} finally {
			sim.setMinionDelay(victim, null);
		}
	});

	it("a return forged in another host's name that cuts the stream and lands in the master's job cache is not taken from the cache", async () => {
		const [attacker, , victim] = sim.upMinions();
		const cuts = () => h.logs!().split("Salt event stream lost").length - 1;
		const before = cuts();
		sim.setMinionDelay(victim, REAL_RETURN_MS);
		try {
			const run = await request("POST", url(`hosts/${victim}`), {
				body: { cm_client: "local_async", fun: "test.echo", arg: ["real"] },
			});
			expect(run.status).toBe(200);
			const jid: string = run.body.task_id;
			// fire_master's own (bytes) `tok`: the stream is cut at this event's tag; Salt 3006.0 keeps it in the job cache.
			onMinion(attacker, "event.fire_master", [
				{},
				"x",
				{
					__kwarg__: true,
					preload: {
						cmd: "_return",
						id: victim,
						jid,
						fun: "test.echo",
						fun_args: ["real"],
						return: "forged",
						retcode: 0,
						success: true,
					},
				},
			]);
			await eventually(async () => (cuts() > before ? true : undefined), SOON, "the stream cut");
			expect(sim.job(jid)?.returns[victim]).toBe("forged");
			// The reconnection reads the job cache for the jobs still awaited: that host is not taken from it.
			await eventually(
				async () => ((await h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
				SOON,
				"the stream back",
			);
			await eventsApplied(attacker);
			expect(await get(`actions/${jid}${victim}`)).toMatchObject({ state: "running", return: "" });
			// The victim's real return still comes on the event stream.
			await eventually(
				async () => ((await get(`actions/${jid}${victim}`))?.state === "finished" ? true : undefined),
				SOON,
				"the real return",
			);
			expect(await get(`actions/${jid}${victim}`)).toMatchObject({ state: "finished", return: "real" });
		} finally {
			sim.setMinionDelay(victim, null);
		}
	});

	it("a test.get_opts return (datetimes salt-api cannot encode) cuts the stream too: fleet-ctl reconnects and catches up", async () => {
		const [, , , , other, victim] = sim.upMinions();
		const cuts = () => h.logs!().split("Salt event stream lost").length - 1;
		const before = cuts();
		// test.get_opts' return cuts the stream 500 ms after it starts; the job started right after it returns at
		// about 550 ms, before fleet-ctl is back (250 ms after the cut).
		sim.setMinionDelay(other, 500);
		sim.setMinionDelay(victim, 550);
		try {
			// Anyone allowed test.* on a host does this, from fleet-ctl or not.
			expect(sim.cliJob([other], "test.get_opts", [], { tgtType: "list" })).not.toBeNull();
			const run = await request("POST", url(`hosts/${victim}`), {
				body: { cm_client: "local_async", fun: "test.echo", arg: ["during-the-get-opts-cut"] },
			});
			expect(run.status).toBe(200);
			const jid: string = run.body.task_id;
			await eventually(async () => (cuts() > before ? true : undefined), SOON, "the stream cut");
			await eventually(
				async () => ((await get(`actions/${jid}${victim}`))?.state === "finished" ? true : undefined),
				SOON,
				"the return made during the cut",
			);
			expect(await get(`actions/${jid}${victim}`)).toMatchObject({
				state: "finished",
				return: "during-the-get-opts-cut",
			});
			expect(sim.requests().some(r => r.path === `/jobs/${jid}`)).toBe(true);
			await eventually(
				async () => ((await h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
				SOON,
				"the stream back",
			);
		} finally {
			sim.setMinionDelay(other, null);
			sim.setMinionDelay(victim, null);
		}
	});

	it("a forged presence change or presence list leaves every host up", async () => {
		const [attacker, victim] = sim.upMinions();
		const upHosts = async () =>
			((await get(withQuery("hosts", { where: { status: "up" }, max_results: 50 })))._items as any[])
				.map(x => x._id)
				.sort();
		const before = await upHosts();
		expect(before).toHaveLength(6);
		onMinion(attacker, "event.fire_master", [{ new: [], lost: [victim] }, "salt/presence/change"]);
		onMinion(attacker, "event.fire_master", [{ present: [attacker] }, "salt/presence/present"]);
		onMinion(attacker, "event.send", ["salt/presence/present", { __kwarg__: true, data: { present: [attacker] } }]);
		await eventsApplied(attacker);
		expect(await upHosts()).toEqual(before);
		expect((await get(`hosts/${victim}`)).status).toBe("up");
		// The master's own presence still moves hosts.
		sim.setUp(victim, false);
		sim.firePresence();
		await eventually(
			async () => ((await get(`hosts/${victim}`)).status === "down" ? true : undefined),
			SOON,
			"the real loss",
		);
		sim.setUp(victim, true);
	});
});
