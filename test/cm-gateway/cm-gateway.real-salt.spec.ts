/**
 * What a real Salt 3006 master does that fleet-ctl must get right (issue 17, ../shared/reference/salt-3006/),
 * against the salt-api simulator answering like one, over real HTTP:
 *  1. patches below a subfolder are read (wheel file_roots.read answers [] for them), under the narrow eauth
 *     grant docs/salt.md lists, and a patch that could not be read is never a success;
 *  2. a master restart (first event: an empty presence list) or a sudden loss of most of the fleet raises no
 *     alert storm: it is held until a later reading confirms it;
 *  3. a minion presenting a new key while the master trusts its old one (its id under minions and
 *     minions_denied) keeps its trusted key and state, shows the other key as `key_conflict`, one alert;
 *  4. a job return proves its minion alive before the master's next presence loop;
 *  5. the reconciliation publishes nothing to minions (manage.present, not manage.status);
 *  6. the master down (salt-api's 500 after a while) is 503 "the Salt master is not answering".
 */
import { SaltApiSimulator, type SaltEvent } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery } from "../support/http";

const SOON = 10_000;
const CM_API_TIMEOUT_MS = 5000;
const FLEET = ["web-01", "web-02", "db-01"];

/** The eauth grant docs/salt.md gives the API user, in the simulator's ACL form (Salt's external_auth list). */
const DOCUMENTED_GRANT = [
	".*",
	{
		"@runner": [
			"jobs.list_job",
			"jobs.list_jobs",
			"manage.present",
			"cache.grains",
			"fileserver.file_list",
			{ "salt.cmd": { args: ["cp\\.get_file_str$", "salt://patches/"] } },
			{ "config.get": { args: ["nodegroups$"] } },
		],
	},
	{ "@wheel": ["key.list_all", "key.finger"] },
];

interface Ctx {
	sim: SaltApiSimulator;
	h: Harness;
}

/** A simulator of FLEET and fleet-ctl in one process pointed at it. */
function withMaster(simOpts: Record<string, unknown>, env: Record<string, string> = {}): () => Ctx {
	const ctx = {} as Ctx;
	beforeAll(async () => {
		ctx.sim = new SaltApiSimulator({
			ids: FLEET,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 10],
			...simOpts,
		} as ConstructorParameters<typeof SaltApiSimulator>[0]);
		await ctx.sim.start();
		ctx.h = await startEmbedded({
			env: {
				CTL_SECRET_KEY: "cm-real-salt-secret-key",
				...ctx.sim.cmApiEnv,
				CM_API_TIMEOUT_MS: String(CM_API_TIMEOUT_MS),
				CM_JOB_POLL_MS: "60000",
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_ALERT_BURST: "50",
				...env,
			},
		});
		await eventually(
			async () => ((await ctx.h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
			SOON,
			"the event stream",
		);
		await eventually(
			async () => ((await hostsOf(ctx)).length === FLEET.length ? true : undefined),
			SOON,
			"the fleet in the inventory",
		);
	});
	afterAll(async () => {
		await ctx.h?.stop();
		await ctx.sim?.stop();
	});
	return () => ctx;
}

const api = (c: Ctx, path: string) => `${c.h.api}/${path}`;
const hostsOf = async (c: Ctx) =>
	(await request("GET", withQuery(api(c, "hosts"), { max_results: 50, sort: "_id" }))).body._items as any[];
const host = async (c: Ctx, id: string) => (await request("GET", api(c, `hosts/${id}`))).body;
const alerts = async (c: Ctx, type: string) =>
	(await request("GET", withQuery(api(c, "alerts"), { where: { type }, max_results: 100, sort: "_created" }))).body
		._items as any[];

/** The next event the master puts on its bus that `match` accepts. */
function nextEvent(
	sim: SaltApiSimulator,
	match: (e: SaltEvent) => boolean,
	what: string,
	ms = SOON,
): Promise<SaltEvent> {
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => {
			off();
			reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
		}, ms);
		const off = sim.onEvent(e => {
			if (!match(e)) return;
			clearTimeout(timer);
			off();
			resolve(e);
		});
	});
}

/**
 * Proof that fleet-ctl applied every event the master sent before now: a `ctl/vnc/connect` marker sent after
 * them is applied in the same ordered lane, so its alert shows only once they are. It is sent with salt-call
 * from `from`, which must be a host that is up (a salt-call proves its host alive).
 */
async function settled(c: Ctx, marker: string, from = "db-01"): Promise<void> {
	c.sim.vncConnect(from, marker);
	await eventually(
		async () => ((await alerts(c, "vnc.connect")).some(a => a.payload.status === marker) ? true : undefined),
		SOON,
		`the marker ${marker}`,
	);
}

const statuses = async (c: Ctx) => Object.fromEntries((await hostsOf(c)).map(x => [x._id, x.status]));

describe("issue 17: presence as a real master gives it", () => {
	// loop_interval 400 ms; a held reading is confirmed by one at least 250 ms later (the next loop).
	const c = withMaster(
		{ presenceIntervalMs: 400, restartPresentDelayMs: 50, masterDownAnswerMs: 200 },
		{ CM_PRESENCE_CONFIRM_MS: "250" },
	);

	it("a master restart (its first event an empty presence list) marks no host down and raises no alert", async () => {
		await eventually(
			async () => (Object.values(await statuses(c())).every(s => s === "up") ? true : undefined),
			SOON,
			"every host up",
		);
		const empty = nextEvent(
			c().sim,
			e => e.tag === "salt/presence/present" && Array.isArray(e.data.present) && e.data.present.length === 0,
			"the empty presence list after the restart",
		);
		await c().sim.restartMaster({ downMs: 100 });
		await empty;
		await settled(c(), "after-empty-list");
		expect(await statuses(c())).toEqual({ "db-01": "up", "web-01": "up", "web-02": "up" });
		// The true list one loop later: still no alert either way.
		await nextEvent(
			c().sim,
			e => e.tag === "salt/presence/present" && Array.isArray(e.data.present) && e.data.present.length === FLEET.length,
			"the full presence list",
		);
		await settled(c(), "after-full-list");
		expect(await statuses(c())).toEqual({ "db-01": "up", "web-01": "up", "web-02": "up" });
		expect([...(await alerts(c(), "host.down")), ...(await alerts(c(), "host.up"))]).toEqual([]);
	});

	it("a loss of most of the fleet at once is held for one reading, then reported when a later reading confirms it", async () => {
		c().sim.setDown("web-01");
		c().sim.setDown("web-02");
		// The loop that first sees them gone: change {lost} and the present list, milliseconds apart. Held.
		await nextEvent(
			c().sim,
			e => e.tag === "salt/presence/present" && JSON.stringify(e.data.present) === JSON.stringify(["db-01"]),
			"the first reading without them",
		);
		await settled(c(), "after-first-loss");
		expect(await statuses(c())).toEqual({ "db-01": "up", "web-01": "up", "web-02": "up" });
		expect(await alerts(c(), "host.down")).toEqual([]);
		// The next loop confirms it: both down, one alert each.
		await nextEvent(c().sim, e => e.tag === "salt/presence/present", "the next reading");
		await settled(c(), "after-second-loss");
		expect(await statuses(c())).toEqual({ "db-01": "up", "web-01": "down", "web-02": "down" });
		expect((await alerts(c(), "host.down")).map(a => a.payload.hostname).sort()).toEqual(["web-01", "web-02"]);
		c().sim.setUp("web-01");
		c().sim.setUp("web-02");
		await eventually(
			async () => (Object.values(await statuses(c())).every(s => s === "up") ? true : undefined),
			SOON,
			"every host up again",
		);
	});

	it("one host going down is not a mass loss: reported at the first reading", async () => {
		const before = (await alerts(c(), "host.down")).length;
		c().sim.setDown("db-01");
		await nextEvent(
			c().sim,
			e => e.tag === "salt/presence/present" && !(e.data.present as string[]).includes("db-01"),
			"a reading without db-01",
		);
		await settled(c(), "after-db-01-down", "web-01");
		expect((await host(c(), "db-01")).status).toBe("down");
		expect((await alerts(c(), "host.down")).slice(before).map(a => a.payload.hostname)).toEqual(["db-01"]);
		c().sim.setUp("db-01");
		await eventually(
			async () => ((await host(c(), "db-01")).status === "up" ? true : undefined),
			SOON,
			"db-01 up again",
		);
	});

	it("while the master is down a run is answered 503 'the Salt master is not answering', a held runner call 504 at CM_API_TIMEOUT_MS", async () => {
		await c().sim.goDown("master-down");
		try {
			for (const cm_client of ["local", "local_async"]) {
				const err = expectEveError(
					await request("POST", api(c(), "hosts/web-01"), { body: { cm_client, fun: "test.ping" } }),
					503,
				);
				expect(err._error.message).toBe(
					"the Salt master is not answering (salt-api answered 500: An unexpected error occurred)",
				);
			}
			// salt-api holds runner calls until the master is back (master_down_timings.md): fleet-ctl's own timeout answers.
			const started = Date.now();
			const load = expectEveError(await request("POST", api(c(), "updates")), 504);
			expect(Date.now() - started).toBeGreaterThanOrEqual(CM_API_TIMEOUT_MS - 100);
			expect(load._error.message).toMatch(/salt-api/);
		} finally {
			await c().sim.comeBack();
		}
	});
});

describe("a first reconciliation slower than the master's presence loop", () => {
	// Every salt-api call takes 150-250 ms: the reconciliation's reads outlast several presence readings (100 ms).
	const c = withMaster({ presenceIntervalMs: 100, latencyMs: [150, 250] });

	it("still creates every host (a presence reading knows the status better, not whether the host exists)", async () => {
		// withMaster waited for the fleet in the inventory; the status is the next presence reading's (every 100 ms).
		const fleet = FLEET.slice()
			.sort()
			.map(id => [id, "accepted", "up"]);
		const seen = await eventually(
			async () => {
				const hosts = (await hostsOf(c())).map(x => [x._id, x.key, x.status]);
				return JSON.stringify(hosts) === JSON.stringify(fleet) ? hosts : undefined;
			},
			SOON,
			"every host created and up",
		);
		expect(seen).toEqual(fleet);
	});
});

describe("issue 17: keys, returns, reconciliation and patches", () => {
	const c = withMaster({ presenceIntervalMs: 3_600_000, perms: DOCUMENTED_GRANT });

	it("a minion presenting a new key keeps its trusted key and state; the other key is key_conflict, with one key.conflict alert", async () => {
		const trusted = (await host(c(), "web-02")).fingerprint;
		expect(trusted).toMatch(/^([0-9a-f]{2}:){31}[0-9a-f]{2}$/);
		const fresh = c().sim.presentNewKey("web-02");
		expect(fresh).not.toBe(trusted);
		const shown = await eventually(
			async () => {
				const x = await host(c(), "web-02");
				return x.key_conflict ? x : undefined;
			},
			SOON,
			"the conflict on web-02",
		);
		expect({
			key: shown.key,
			fingerprint: shown.fingerprint,
			key_conflict: shown.key_conflict,
			history: shown.fingerprint_history,
		}).toEqual({
			key: "accepted",
			fingerprint: trusted,
			key_conflict: { key: "denied", fingerprint: fresh },
			history: [],
		});
		// A reconciliation sees the same: no second alert.
		await c().h.call("cm-gateway.sync");
		expect((await alerts(c(), "key.conflict")).map(a => a.payload)).toEqual([
			{
				hostname: "web-02",
				key: "accepted",
				fingerprint: trusted,
				conflict_key: "denied",
				conflict_fingerprint: fresh,
			},
		]);
		expect(await alerts(c(), "fingerprint.changed")).toEqual([]);

		// The old key is back on the minion and the denied one removed: the conflict clears, and nothing "changed".
		c().sim.restoreOldKey("web-02");
		await eventually(
			async () => (!("key_conflict" in (await host(c(), "web-02"))) ? true : undefined),
			SOON,
			"the conflict to clear",
		);
		await c().h.call("cm-gateway.sync");
		const after = await host(c(), "web-02");
		expect({ key: after.key, fingerprint: after.fingerprint, history: after.fingerprint_history }).toEqual({
			key: "accepted",
			fingerprint: trusted,
			history: [],
		});
		expect(await alerts(c(), "fingerprint.changed")).toEqual([]);
		expect(await alerts(c(), "key.conflict")).toHaveLength(1);
	});

	it("a job return proves its minion alive before the master's next presence loop", async () => {
		await c().h.call("hosts.setPresence", { down: ["web-01"] });
		expect((await host(c(), "web-01")).status).toBe("down");
		const before = (await alerts(c(), "host.up")).length;
		const ran = await request("POST", api(c(), "hosts/web-01"), { body: { cm_client: "local", fun: "test.ping" } });
		expect(ran.status).toBe(200);
		await eventually(
			async () => ((await host(c(), "web-01")).status === "up" ? true : undefined),
			SOON,
			"web-01 up from its return",
		);
		expect((await alerts(c(), "host.up")).slice(before).map(a => a.payload)).toEqual([
			{ hostname: "web-01", status: "up" },
		]);
	});

	it("the reconciliation publishes nothing to minions, even with one of them down, and reads presence from the master", async () => {
		c().sim.setDown("db-01");
		c().sim.resetExecutions();
		const published: string[] = [];
		const off = c().sim.onEvent(e => {
			if (/^salt\/job\/\d+\/new$/.test(e.tag)) published.push(String(e.data.fun));
		});
		try {
			const result = await c().h.call("cm-gateway.sync");
			expect(result).toMatchObject({ _status: "OK", hosts: 3 });
		} finally {
			off();
		}
		expect(c().sim.executions()).toEqual([]);
		expect(published).toEqual([]);
		expect((await host(c(), "db-01")).status).toBe("down");
		c().sim.setUp("db-01");
	});

	it("reads the master's nodegroups under the documented grant, and nothing else of its configuration", async () => {
		c().sim.setNodegroups({ web: "web-*", webprod: "N@web and G@env:prod" });
		expect(await c().h.call("cm-gateway.sync")).toMatchObject({ _status: "OK" });
		const listed = (await request("GET", api(c(), "nodegroups"))).body._items;
		expect(listed.map((n: any) => [n.name, n.source, n.info.target])).toEqual([
			["web", "master", "web-*"],
			["webprod", "master", "( web-* ) and G@env:prod"],
		]);
		// The grant names the option: the master refuses the API user any other (salt-api's 401).
		const { CM_API_URL, CM_API_USER, CM_API_PASSWORD, CM_API_EAUTH } = c().sim.cmApiEnv;
		const ask = (key: string) =>
			fetch(`${CM_API_URL}/run`, {
				method: "POST",
				headers: { "content-type": "application/json", accept: "application/json" },
				body: JSON.stringify([
					{
						client: "runner",
						fun: "config.get",
						arg: [key],
						username: CM_API_USER,
						password: CM_API_PASSWORD,
						eauth: CM_API_EAUTH,
					},
				]),
			});
		expect((await ask("nodegroups")).status).toBe(200);
		expect((await ask("external_auth")).status).toBe(401);
	});

	it("loads patches below a subfolder through the file server, under the documented eauth grant", async () => {
		const text = "fix-motd:\n  file.managed:\n    - name: /etc/motd\n    - contents: patched\n";
		c().sim.setPatch("fix-motd", text);
		const res = await request("POST", api(c(), "updates"));
		expect(res.status).toBe(200);
		expect(res.body.loaded).toBeGreaterThanOrEqual(1);
		const listed = (await request("GET", withQuery(api(c(), "updates"), { where: { name: "patches.fix-motd" } }))).body
			._items;
		expect(listed.map((u: any) => [u.name, u.text])).toEqual([["patches.fix-motd", text]]);
	});
});

describe("issue 17: a grant without the file server read", () => {
	// The documented grant without its salt.cmd entry.
	const narrow = DOCUMENTED_GRANT.map(p =>
		typeof p === "object" && "@runner" in p
			? { "@runner": (p["@runner"] as unknown[]).filter(f => typeof f === "string") }
			: p,
	);
	const c = withMaster({ presenceIntervalMs: 3_600_000, perms: narrow });

	it("answers 502 naming the missing permission, and never reports a listed patch as loaded when it was not read", async () => {
		c().sim.setPatch("fix-motd", "fix-motd:\n  test.nop: []\n");
		const err = expectEveError(await request("POST", api(c(), "updates")), 502);
		expect(err._error.message).toMatch(/runner salt\.cmd cp\.get_file_str.*docs\/salt\.md/);
		expect((await request("GET", api(c(), "updates"))).body._meta.total).toBe(0);
	});

	it("reconciles without the master's nodegroups when the grant lacks config.get: none is invented, the sync succeeds", async () => {
		expect(await c().h.call("cm-gateway.sync")).toMatchObject({ _status: "OK", hosts: 3 });
		expect((await request("GET", api(c(), "nodegroups"))).body._meta.total).toBe(0);
		expect(
			expectEveError(await request("POST", api(c(), "targets/preview"), { body: { target: "N@web" } }), 400)._error
				.message,
		).toMatch(/no nodegroup is named 'web'/);
	});
});
