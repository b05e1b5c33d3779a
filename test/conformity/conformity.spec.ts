/**
 * Conformity against the salt-api simulator over real HTTP (docs/conformity.md): checks of the declared state
 * (`state.apply test=True`, no mods) judged as they end — drift appearing with its predicted changes and since when,
 * an alert on the transition only, the host record filterable, the fleet view; drift disappearing after only the
 * drifted state is applied; a host whose states cannot be rendered; silence; other runs leaving conformity alone; a
 * check that changes nothing writing nothing.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, eventually, expectEveError, withQuery } from "../support/http";
import { callers } from "../support/callers";

const TOP = "base:\n  '*':\n    - common\n";
const TAG = "pkg_|-base_packages_|-base_packages_|-installed";

describe("conformity", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let hosts: string[] = [];
	let A: string, B: string, C: string;
	const url = (path: string) => `${h.api}/${path}`;
	const view = async (host: string) => (await request("GET", url(`hosts/${host}/conformity`))).body;
	/** A check of the declared state on these hosts, as an operator runs one; answers its jid once it is judged. */
	const check = async (targets: string[]) => {
		const res = await request("POST", url("run"), {
			body: { target: `L@${targets.join(",")}`, cm_client: "local", fun: "state.apply", kwarg: { test: true } },
		});
		expect(res.status).toBe(200);
		const jid = res.body.task_id as string;
		// Judged when the fleet's series has its point.
		await eventually(
			async () =>
				(await request("GET", url("conformity"))).body.series.some((p: { jid: string }) => p.jid === jid)
					? true
					: undefined,
			5000,
			"the check judged",
		);
		return jid;
	};
	const { as, newToken } = callers(() => h.api);
	const alerts = async (type: string, host: string) =>
		(await request("GET", withQuery(url("alerts"), { where: { type, "payload.hostname": host } }))).body
			._items as Array<{ payload: Record<string, unknown> }>;

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 8,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 20],
			presenceEvents: false,
			downFraction: 0,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "5000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "1500",
				CM_SYNC_INTERVAL_MS: "0",
				CONFORMITY_CHECKED_RESOLUTION_MS: "3600000",
				ROLLOUT_TICK_MS: "100",
				ROLLOUT_LEASE_MS: "500",
			},
		});
		hosts = sim.upMinions().slice(0, 4).sort();
		[A, B, C] = hosts;
		await h.call("hosts.upsertMany", { hosts: hosts.map(_id => ({ _id, status: "up", key: "accepted" })) });
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("knows nothing of a host never checked, then finds the fleet conformant", async () => {
		expect(await view(A)).toMatchObject({
			host: A,
			state: "unknown",
			since: null,
			checked: null,
			states: [],
			timeline: [],
		});
		const jid = await check(hosts);
		const a = await eventually(async () => ((await view(A)).state === "conformant" ? view(A) : undefined));
		expect(a).toMatchObject({
			state: "conformant",
			jid,
			drifted: 0,
			failing: 0,
			states: [],
			timeline: [{ from: null, to: "conformant", jid }],
		});
		expect(new Date(a.since).getTime()).toBe(new Date(a.checked).getTime());
		expect((await request("GET", url(`hosts/${A}`))).body.conformity).toMatchObject({
			state: "conformant",
			drifted: 0,
			failing: 0,
		});
		const fleet = (await request("GET", url("conformity"))).body;
		expect(fleet).toMatchObject({ hosts: 4, counts: { conformant: 4, drifted: 0, failing: 0, unknown: 0 }, top: [] });
		expect(fleet.series.at(-1)).toMatchObject({ jid, judged: 4, changed: 4, conformant: 4, drifted: 0, failing: 0 });
		// Nothing to say on the way in: conformant is where a host is expected to be.
		expect(await alerts("host.conformant", A)).toEqual([]);
	});

	it("finds drift with its predicted changes and since when, alerts once, and lists the host by its state", async () => {
		sim.setDrift(A, "common", "base_packages", { curl: { old: "7.88.1-10", new: "7.88.1-10+deb12u5" } });
		const jid = await check(hosts);
		const a = await eventually(async () => ((await view(A)).state === "drifted" ? view(A) : undefined));
		expect(a).toMatchObject({ state: "drifted", jid, drifted: 1, failing: 0 });
		expect(a.states).toEqual([
			{
				state_id: "base_packages",
				sls: "common",
				fun: "pkg.installed",
				name: "base_packages",
				result: null,
				predicted_changes: { curl: { old: "7.88.1-10", new: "7.88.1-10+deb12u5" } },
				comment: "The following packages would be installed/updated: base_packages",
			},
		]);
		expect(a.timeline.map((t: { from: string; to: string }) => [t.from, t.to])).toEqual([
			["conformant", "drifted"],
			[null, "conformant"],
		]);
		const [alert] = await eventually(async () =>
			(await alerts("host.drifted", A)).length ? alerts("host.drifted", A) : undefined,
		);
		expect(alert.payload).toMatchObject({ hostname: A, state: "drifted", drifted: 1, jid });
		const listed = await request("GET", withQuery(url("hosts"), { where: { "conformity.state": "drifted" } }));
		expect(listed.body._items.map((x: { _id: string }) => x._id)).toEqual([A]);
		const fleet = (await request("GET", url("conformity"))).body;
		expect(fleet).toMatchObject({
			counts: { conformant: 3, drifted: 1 },
			top: [{ sls: "common", state_id: "base_packages", fun: "pkg.installed", hosts: 1, failing: 0 }],
		});
		// Only the host that moved was written.
		expect(fleet.series.at(-1)).toMatchObject({ jid, judged: 4, changed: 1, conformant: 3, drifted: 1 });
		// Checked again, still drifted the same way: no second alert, the same `since`.
		await check([A]);
		expect((await view(A)).since).toBe(a.since);
		expect((await alerts("host.drifted", A)).length).toBe(1);
	});

	it("is conformant again once only the drifted state was applied (state.sls_id), with a host.conformant alert", async () => {
		const fix = await request("POST", url(`hosts/${A}`), {
			body: { cm_client: "local", fun: "state.sls_id", arg: ["base_packages", "common"] },
		});
		expect(fix.body.return.return[0][A][TAG]).toMatchObject({
			result: true,
			changes: { curl: { new: "7.88.1-10+deb12u5" } },
		});
		expect(sim.driftsOf(A)).toEqual([]);
		await check([A]);
		const a = await eventually(async () => ((await view(A)).state === "conformant" ? view(A) : undefined));
		expect(a.timeline[0]).toMatchObject({ from: "drifted", to: "conformant" });
		expect((await alerts("host.conformant", A)).length).toBe(1);
	});

	it("finds a host whose states cannot be rendered failing, with Salt's reason", async () => {
		sim.setFile("top.sls", `${TOP}  '${B}':\n    - web.missing\n`);
		try {
			await check([B]);
			const b = await eventually(async () => ((await view(B)).state === "failing" ? view(B) : undefined));
			expect(b).toMatchObject({
				failing: 1,
				states: [{ state_id: "render", result: false, comment: expect.stringContaining("web.missing") }],
			});
			expect((await alerts("host.drifted", B))[0].payload).toMatchObject({ state: "failing" });
		} finally {
			sim.setFile("top.sls", TOP);
		}
	});

	it("keeps what it knew of a host that did not answer, and judges no run but a check of the declared state", async () => {
		sim.setNeverReturns(C, true);
		try {
			const res = await request("POST", url("run"), {
				body: { target: `L@${C}`, fun: "state.apply", kwarg: { test: true } },
			});
			const jid = res.body.task_id;
			await eventually(
				async () =>
					(await request("GET", url("conformity"))).body.series.some((p: { jid: string }) => p.jid === jid)
						? true
						: undefined,
				8000,
				"the silent check judged",
			);
			expect((await view(C)).state).toBe("conformant");
			expect((await request("GET", url(`salt_jobs/${jid}`))).body).toMatchObject({ state: "finished", timed_out: 1 });
		} finally {
			sim.setNeverReturns(C, false);
		}
		sim.setDrift(C, "common", "base_packages", { vim: { new: "2" } });
		// A run of a patch with test=True, and a real highstate: not checks of the declared state.
		const patch = await request("POST", url("run"), {
			body: {
				target: `L@${C}`,
				cm_client: "local",
				fun: "state.apply",
				kwarg: { mods: "patches.openssl-cve-2024-5535", test: true },
			},
		});
		const real = await request("POST", url("run"), {
			body: { target: `L@${C}`, cm_client: "local", fun: "state.apply", kwarg: { test: false } },
		});
		// Judged by now, were they checks: a check run after both (on another host) has been judged.
		await check([A]);
		expect((await view(C)).state).toBe("conformant");
		const judged = (await request("GET", url("conformity"))).body.series.map((p: { jid: string }) => p.jid);
		expect(judged).not.toContain(patch.body.task_id);
		expect(judged).not.toContain(real.body.task_id);
		sim.clearDrift(C);
	});

	it("writes nothing for a host a check finds unchanged (its `checked` moves by the resolution only)", async () => {
		const before = await view(hosts[3]);
		const jid = await check([hosts[3]]);
		const after = await view(hosts[3]);
		expect(after.checked).toBe(before.checked);
		expect(after.jid).toBe(before.jid);
		expect((await request("GET", url("conformity"))).body.series.at(-1)).toMatchObject({ jid, judged: 1, changed: 0 });
	});

	it("fixes only the drifted states of a host (state.sls_id each, audited as the caller), then checks it again", async () => {
		const D = hosts[3];
		sim.setDrift(D, "common", "base_packages", { vim: { old: "9.0.1378-2", new: "9.0.1378-2+deb12u1" } });
		await check([D]);
		expect((await view(D)).state).toBe("drifted");
		sim.resetExecutions();
		const res = await request("POST", url(`hosts/${D}/conformity/fix`));
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({
			host: D,
			fixed: [{ state_id: "base_packages", sls: "common", result: "applied", jid: expect.stringMatching(/^\d{20}$/) }],
			skipped: [],
		});
		// The request has an audit record of its own besides its runs' (issue 46, item 4: the runs' meta once took its id).
		const records = async () =>
			(
				await request(
					"GET",
					withQuery(url("audit"), { where: { method: "POST", path: `/api/hosts/${D}/conformity/fix` } }),
				)
			).body._items as Array<{ fun: string | null }>;
		const own = await eventually(
			async () => (await records()).find(r => r.fun === null),
			5000,
			"the request's audit record",
		);
		expect(own).toMatchObject({ status: 200, outcome: "ok", name: "bootstrap-admin" });
		expect((await records()).map(r => String(r.fun)).sort()).toEqual(["null", "state.apply", "state.sls_id"]);
		// What ran: the one state, then the check; nothing else.
		expect(sim.executions().map(e => [e.fun, e.arg])).toEqual([
			["state.sls_id", ["base_packages", "common"]],
			["state.apply", [{ __kwarg__: true, test: true }]],
		]);
		await eventually(async () => ((await view(D)).state === "conformant" ? true : undefined), 5000, "the re-check");
		const audited = (await request("GET", withQuery(url("audit"), { where: { fun: "state.sls_id", targets: D } }))).body
			._items;
		expect(audited[0]).toMatchObject({ outcome: "ok", jid: res.body.fixed[0].jid, name: "bootstrap-admin" });
		// Nothing left to fix: said so.
		expect(expectEveError(await request("POST", url(`hosts/${D}/conformity/fix`)), 422)._error.message).toMatch(
			/no drifted state to fix/,
		);
	});

	it("leaves out the states a suppression rule names, from the next check on; the rule's writes are audited", async () => {
		sim.setDrift(B, "common", "base_packages", { curl: { new: "2" } });
		await check([B]);
		expect((await view(B)).state).toBe("drifted");
		const rule = await request("POST", url("conformity_rules"), {
			body: { sls: "common", state_id: "base_packages", reason: "curl is pinned by hand on this rack" },
		});
		expect(rule.status).toBe(201);
		await check([B]);
		expect(await view(B)).toMatchObject({ state: "conformant", states: [] });
		expect(
			(await request("GET", withQuery(url("audit"), { where: { method: "POST", path: "/api/conformity_rules" } }))).body
				._items[0],
		).toMatchObject({ status: 201, args: { sls: "common", reason: "curl is pinned by hand on this rack" } });
		expectEveError(await request("POST", url("conformity_rules"), { body: { reason: "everything" } }), 422);
		expect((await request("DELETE", url(`conformity_rules/${rule.body._id}`))).status).toBe(204);
		await check([B]);
		expect((await view(B)).state).toBe("drifted");
		sim.clearDrift(B);
	});

	it("fixes a target: one rollout per drifted state on exactly the hosts drifted on it, then checks them again", async () => {
		const [p, q, r, untouched] = hosts;
		sim.setDrift(p, "common", "base_packages", { vim: { new: "9.2" } });
		sim.setDrift(q, "common", "base_packages", { vim: { new: "9.2" } });
		sim.setFile(
			"common.sls",
			"base_packages:\n  pkg.installed:\n    - pkgs:\n      - vim\n      - curl\n\nntp_conf:\n  file.managed:\n    - name: /etc/ntp.conf\n",
		);
		try {
			sim.setDrift(r, "common", "ntp_conf", { diff: "+server ntp.example" });
			await check([p, q, r, untouched]);
			expect([
				(await view(p)).state,
				(await view(q)).state,
				(await view(r)).state,
				(await view(untouched)).state,
			]).toEqual(["drifted", "drifted", "drifted", "conformant"]);
			sim.resetExecutions();
			const res = await request("POST", url("conformity/fix"), {
				body: { target: `L@${[p, q, r, untouched].join(",")}` },
			});
			expect(res.status).toBe(200);
			expect(res.body).toMatchObject({
				hosts: 3,
				fixes: [
					{ state_id: "base_packages", sls: "common", hosts: 2 },
					{ state_id: "ntp_conf", sls: "common", hosts: 1 },
				],
			});
			const fixRollout = (await request("GET", url(`rollouts/${res.body.fixes[0].rollout}`))).body;
			expect(fixRollout).toMatchObject({
				fix: res.body.fix,
				fun: "state.sls_id",
				arg: ["base_packages", "common"],
				kwarg: { queue: true },
				total: 2,
				failure_budget: 0,
			});
			expect(fixRollout.hosts).toEqual([p, q].sort());
			// All conformant again, by the check that followed the fixes.
			await eventually(
				async () => ((await Promise.all([p, q, r].map(view))).every(v => v.state === "conformant") ? true : undefined),
				15_000,
				"the re-check after the fixes",
			);
			const ran = sim
				.executions()
				.filter(e => e.fun === "state.sls_id")
				.map(e => `${e.id}:${String(e.arg[0])}`)
				.sort();
			expect(ran).toEqual([`${p}:base_packages`, `${q}:base_packages`, `${r}:ntp_conf`].sort());
			expect(sim.executions().some(e => e.id === untouched && e.fun === "state.sls_id")).toBe(false);
			expectEveError(await request("POST", url("conformity/fix"), { body: { target: `L@${untouched}` } }), 422);
			expectEveError(await request("POST", url("conformity/fix"), { body: {} }), 422);
		} finally {
			sim.setFile("common.sls", "base_packages:\n  pkg.installed:\n    - pkgs:\n      - vim\n      - curl\n");
			sim.clearDrift();
		}
	});

	describe("a scoped operator's fix", () => {
		// The fixer's token: hosts A, B, C (a group), and `state.sls_id` of the sls common and motd only.
		let A: string, B: string, C: string, D: string;
		const ntp = "ntp_conf:\n  file.managed:\n    - name: /etc/ntp.conf\n";
		const motd = "motd:\n  file.managed:\n    - name: /etc/motd\n";
		const total = async (where: Record<string, unknown>) =>
			(await request("GET", withQuery(url("rollouts"), { where, max_results: 1 }))).body._meta.total as number;
		const refused = async (who: string, path: string, body?: unknown) =>
			expectEveError(await as(who, "POST", path, body), 403)._error.message as string;

		beforeAll(async () => {
			[A, B, C, D] = hosts;
			const group = (await request("POST", url("groups"), { body: { name: "fixers", hosts: [A, B, C] } })).body._id;
			await newToken("fixer", "operator", { groups: [group], calls: { "state.sls_id": { mods: ["common", "motd"] } } });
			// May apply states, not check them: a fix it cannot check again is not one it may make.
			await newToken("applier", "operator", { functions: ["state.sls_id"] });
			sim.setFile("ntp.sls", ntp);
			sim.setFile("motd.sls", motd);
			sim.setFile("top.sls", "base:\n  '*':\n    - common\n    - motd\n    - ntp\n");
		});
		afterAll(() => {
			sim.setFile("top.sls", TOP);
			sim.clearDrift();
		});

		it("is refused whole, saying why, when part of it is outside the token's scope: nothing runs, no rollout, no re-check; inside, it all runs", async () => {
			sim.setDrift(A, "common", "base_packages", { vim: { new: "9.3" } });
			sim.setDrift(A, "motd", "motd", { diff: "+welcome" });
			sim.setDrift(B, "common", "base_packages", { vim: { new: "9.3" } });
			sim.setDrift(C, "common", "base_packages", { vim: { new: "9.3" } });
			sim.setDrift(C, "ntp", "ntp_conf", { diff: "+server ntp.example" });
			sim.setDrift(D, "motd", "motd", { diff: "+welcome" });
			await check([A, B, C, D]);
			expect(
				(await Promise.all([A, B, C, D].map(view))).map(v =>
					v.states.map((s: { sls: string; state_id: string }) => `${s.sls}/${s.state_id}`),
				),
			).toEqual([
				["common/base_packages", "motd/motd"],
				["common/base_packages"],
				["common/base_packages", "ntp/ntp_conf"],
				["motd/motd"],
			]);
			const rollouts = await total({});
			sim.resetExecutions();

			// Every host inside, one of the states (ntp, on C) not: the states inside it are not applied either.
			expect(await refused("fixer", "conformity/fix", { target: `L@${A},${B},${C}` })).toMatch(
				/^the run is refused: sls ntp not allowed by .*mods/,
			);
			expect(await refused("fixer", `hosts/${C}/conformity/fix`)).toMatch(
				/^the run is refused: sls ntp not allowed by .*mods/,
			);
			// Every state inside, one of the hosts (D) not.
			expect(await refused("fixer", "conformity/fix", { target: `L@${A},${B},${D}` })).toBe(
				`the run is refused: targets outside the token's scope: ${D}`,
			);
			expect(await refused("fixer", `hosts/${D}/conformity/fix`)).toMatch(/targets outside the token's scope/);
			// The check that follows a fix is part of it.
			expect(await refused("applier", `hosts/${A}/conformity/fix`)).toMatch(
				/^the run is refused: function 'state\.apply' is outside the token's scope/,
			);
			expect(await refused("applier", "conformity/fix", { target: `L@${A},${B}` })).toMatch(
				/^the run is refused: function 'state\.apply' is outside the token's scope/,
			);
			// No rollout was made (neither a fix nor a re-check).
			expect(await total({})).toBe(rollouts);

			// Inside the scope: two states on two hosts, a rollout each, then the re-check.
			const res = await as("fixer", "POST", "conformity/fix", { target: `L@${A},${B}` });
			expect(res.status).toBe(200);
			expect(res.body).toMatchObject({
				hosts: 2,
				fixes: [
					{ state_id: "base_packages", sls: "common", hosts: 2 },
					{ state_id: "motd", sls: "motd", hosts: 1 },
				],
			});
			const recheck = await eventually(
				async () =>
					(await request("GET", withQuery(url("rollouts"), { where: { check: res.body.fix, status: "finished" } })))
						.body._items[0],
				15_000,
				"the re-check after the fix",
			);
			expect(recheck).toMatchObject({ fun: "state.apply", kwarg: { test: true }, total: 2 });
			await eventually(
				async () =>
					(await view(A)).state === "conformant" && (await view(B)).state === "conformant" ? true : undefined,
				5000,
				"A and B judged by the re-check",
			);
			// Everything the scoped fix asked for ran, once; the refused fixes ran nothing (their runs would be in the
			// log before the ones of the fix that followed them), and made no rollout.
			expect(
				sim
					.executions()
					.map(e => `${e.id} ${e.fun} ${JSON.stringify(e.arg)}`)
					.sort(),
			).toEqual(
				[
					`${A} state.sls_id ["base_packages","common",{"__kwarg__":true,"queue":true}]`,
					`${B} state.sls_id ["base_packages","common",{"__kwarg__":true,"queue":true}]`,
					`${A} state.sls_id ["motd","motd",{"__kwarg__":true,"queue":true}]`,
					`${A} state.apply [{"__kwarg__":true,"test":true}]`,
					`${B} state.apply [{"__kwarg__":true,"test":true}]`,
				].sort(),
			);
			expect(await total({})).toBe(rollouts + 3);
			expect([(await view(C)).state, (await view(D)).state]).toEqual(["drifted", "drifted"]);
		});

		it("fixes a host inside its scope: every drifted state, then the check", async () => {
			sim.setDrift(B, "common", "base_packages", { curl: { new: "8.1" } });
			sim.setDrift(B, "motd", "motd", { diff: "+maintenance at 22:00" });
			await check([B]);
			sim.resetExecutions();
			const res = await as("fixer", "POST", `hosts/${B}/conformity/fix`);
			expect(res.status).toBe(200);
			expect(res.body).toMatchObject({
				host: B,
				fixed: [
					{ state_id: "base_packages", sls: "common", result: "applied" },
					{ state_id: "motd", sls: "motd", result: "applied" },
				],
				skipped: [],
			});
			expect(sim.executions().map(e => [e.id, e.fun, e.arg])).toEqual([
				[B, "state.sls_id", ["base_packages", "common"]],
				[B, "state.sls_id", ["motd", "motd"]],
				[B, "state.apply", [{ __kwarg__: true, test: true }]],
			]);
			await eventually(
				async () => ((await view(B)).state === "conformant" ? true : undefined),
				5000,
				"the check after the fix",
			);
		});
	});

	describe("scheduled checks", () => {
		const checkRecord = async (id: string) => (await request("GET", url(`conformity_checks/${id}`))).body;
		const passesOf = async (id: string) =>
			(await request("GET", withQuery(url("rollouts"), { where: { check: id }, max_results: 50 }))).body
				._items as Array<{ _id: string; status: string; total: number; done: number }>;
		let markers = 0;
		/**
		 * The checks' scheduler has looked past now: a check made now (an interval: its first pass at once) has its pass,
		 * finished. Each look claims every due pass and takes over every stale one, so a pass that must not start would
		 * have started by then.
		 */
		const schedulerLooked = async () => {
			const marker = await request("POST", url("conformity_checks"), {
				body: { name: `marker ${++markers}`, target: `L@${hosts[3]}`, interval: 3600, batch: 1 },
			});
			expect(marker.status).toBe(201);
			await eventually(
				async () => (await passesOf(marker.body._id)).find(p => p.status === "finished"),
				10_000,
				"the marker check's pass",
			);
			expect((await request("DELETE", url(`conformity_checks/${marker.body._id}`))).status).toBe(204);
		};

		it("runs a pass right away and then on its interval, in batches, and judges every host of it", async () => {
			sim.setDrift(C, "common", "base_packages", { vim: { new: "9.1" } });
			const res = await request("POST", url("conformity_checks"), {
				body: { name: "every 10 minutes", target: `L@${hosts.join(",")}`, interval: 600, batch: 2 },
			});
			expect(res.status).toBe(201);
			const id = res.body._id;
			const pass = await eventually(
				async () => (await passesOf(id)).find(p => p.status === "finished"),
				10_000,
				"the first pass",
			);
			expect(pass).toMatchObject({ total: 4, done: 4 });
			const rollout = (await request("GET", url(`rollouts/${pass._id}`))).body;
			expect(rollout).toMatchObject({
				check: id,
				fun: "state.apply",
				kwarg: { test: true },
				failure_budget: "100%",
				owner: expect.any(String),
			});
			expect(rollout.batches.map((b: { hosts: string[] }) => b.hosts.length)).toEqual([2, 2]);
			await eventually(
				async () => ((await view(C)).state === "drifted" ? true : undefined),
				5000,
				"C judged drifted by the check",
			);
			const record = await checkRecord(id);
			expect(record).toMatchObject({
				passes: 1,
				status: "scheduled",
				last_pass: { rollout: pass._id, started: true, hosts: 4, error: null },
			});
			expect(new Date(record.next).getTime()).toBeGreaterThan(Date.now() + 500_000);
			// Paused: no next pass.
			expect((await request("PATCH", url(`conformity_checks/${id}`), { body: { status: "paused" } })).status).toBe(200);
			expect((await checkRecord(id)).next).toBeNull();
			sim.clearDrift(C);
		});

		it("judges a check of named sls too (its own states only)", async () => {
			sim.setDrift(B, "common", "base_packages", { curl: { new: "8" } });
			const res = await request("POST", url("conformity_checks"), {
				body: { name: "common only", target: `L@${B}`, mods: "common", cron: "0 3 * * *", batch: 1 },
			});
			expect(res.status).toBe(201);
			// A cron check waits for its time: nothing runs now.
			await schedulerLooked();
			expect(await passesOf(res.body._id)).toEqual([]);
			// Its pass made by hand at the due time another replica would have claimed (the same id: once).
			const id = res.body._id;
			const rules = (await request("GET", url("conformity_rules"))).body._items as Array<{ _id: string }>;
			for (const r of rules) await request("DELETE", url(`conformity_rules/${r._id}`));
			const pass = {
				id: "a0000000000000000000000b",
				check: id,
				name: "common only",
				target: `L@${B}`,
				kwarg: { test: true, mods: "common" },
				batch: 1,
				jitter_s: 0,
				owner: (await checkRecord(id)).owner,
			};
			// Asked twice at once (two replicas, issue 46: the second failed on the host list with a DuplicateKeyError): one made, one told so.
			const made = await Promise.all([
				h.call<{ _id: string; repeated: boolean }>("rollouts.startCheck", pass),
				h.call<{ _id: string; repeated: boolean }>("rollouts.startCheck", pass),
			]);
			expect(made.map(m => m.repeated).sort()).toEqual([false, true]);
			expect((await h.call<{ repeated: boolean }>("rollouts.startCheck", pass)).repeated).toBe(true);
			await eventually(
				async () => ((await view(B)).state === "drifted" ? true : undefined),
				5000,
				"B judged by the check of common",
			);
			expect((await passesOf(id)).length).toBe(1);
			sim.clearDrift(B);
			await request("DELETE", url(`conformity_checks/${id}`));
		});

		it("starts a pass a replica claimed and died with, once", async () => {
			const res = await request("POST", url("conformity_checks"), {
				body: { name: "taken over", target: `L@${A}`, interval: 3600, batch: 1, status: "paused" },
			});
			const id = res.body._id;
			const store = (
				h.broker!.getLocalService("conformity-checks") as unknown as {
					store: { updateMany(f: object, u: object): Promise<number> };
				}
			).store;
			// The dead replica's claim: a pass recorded, its rollout never made, its lease long gone.
			await store.updateMany(
				{ _id: id },
				{
					$set: {
						last_pass: {
							due: new Date(),
							rollout: "b0000000000000000000000c",
							at: new Date(Date.now() - 60_000),
							started: false,
							error: null,
						},
						lease: { owner: "dead", until: new Date(Date.now() - 30_000) },
					},
				},
			);
			const pass = await eventually(async () => (await passesOf(id))[0], 5000, "the pass taken over");
			expect(pass._id).toBe("b0000000000000000000000c");
			await eventually(
				async () => ((await checkRecord(id)).last_pass.started ? true : undefined),
				5000,
				"the pass recorded as started",
			);
			await schedulerLooked();
			expect((await passesOf(id)).length).toBe(1);
		});

		it("refuses a check it cannot schedule or run, with the reason", async () => {
			const bad = async (body: Record<string, unknown>, code = 422) =>
				expectEveError(await request("POST", url("conformity_checks"), { body }), code);
			expect((await bad({ name: "x", target: `L@${A}`, interval: 600, cron: "* * * * *" }))._issues.interval).toMatch(
				/either/,
			);
			expect((await bad({ name: "x", target: `L@${A}` }))._issues.interval).toMatch(/either/);
			expect((await bad({ name: "x", target: `L@${A}`, cron: "61 * * * *" }))._issues.cron).toBeDefined();
			expect((await bad({ name: "x", target: "( nope", interval: 600 }))._issues.target).toMatch(/not closed/);
			await bad({ name: "x", target: `L@${A}`, interval: 5 });
			await bad({ name: "x", target: `L@${A}`, interval: 600, batch: "0%" });
			const viewer = (await request("POST", url("tokens"), { body: { name: "cc-viewer", role: "viewer" } })).body.token;
			expectEveError(
				await request("POST", url("conformity_checks"), {
					body: { name: "x", target: `L@${A}`, interval: 600 },
					token: viewer,
				}),
				403,
			);
		});
	});

	it("answers 404 for a host it does not have, and reads only", async () => {
		expectEveError(await request("GET", url("hosts/no-such-host/conformity")), 404);
		expectEveError(await request("POST", url("conformity"), { body: {} }), 405);
	});
});
