/**
 * Governance where a run starts (issue 23, docs/security.md): maintenance windows refuse governed functions on
 * governed hosts outside their openings (409 naming the next), tasks and rollouts wait for them, admins may break
 * the glass with a reason; approval policies hold matching runs (202) until approvers other than the requester
 * approve, then the exact call runs once as the requester's token is then. Every path to a run is tried — the API
 * (host, group, compound target, live poll), a task, a rollout, an approved request, the REPL — against the
 * salt-api simulator, whose job log says what really ran.
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { describeWithMongo, startEmbedded, uniqueMongoUri, type Harness } from "./support/harness";
import { request, expectEveError, eventually } from "./support/http";
import { callers } from "./support/callers";
import { FleetRepl } from "../lib/repl/commands";
import { REPL_AGENT } from "../lib/repl/api-client";
import { formatHttpDate } from "../lib/eve/dates";
import type { Store } from "../lib/storage/store";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** The suite on one store: NeDB files (mongoUri undefined), or the MongoDB wire protocol (the CI's emulator leg). */
function governanceSuite(mongoUri: string | undefined): void {
	let sim: SaltApiSimulator;
	let h: Harness;
	let GOV: string, GOV2: string, FREE: string;
	let govGroup = "";
	const { tokens, url, as, newToken } = callers(() => h.api);
	const created = async (path: string, body: unknown): Promise<string> => {
		const res = await request("POST", url(path), { body });
		if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
		return res.body._id;
	};
	/** Jobs of `fun` Salt got on `host` since `from` (an index in the simulator's log). */
	const ranOn = (fun: string, host: string, from = 0) =>
		sim
			.jobs()
			.slice(from)
			.filter(j => j.fun === fun && j.minions.includes(host));
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	const store = (service: string): Store => (h.broker!.getLocalService(service) as unknown as { store: Store }).store;

	/** A window that is closed now and opens on 1 June 2027 (00:00 UTC) for a day, every year. */
	const CLOSED = { rrule: "FREQ=YEARLY", start: "2027-06-01T00:00", timezone: "UTC", duration: "P1D" };
	/** A window open now: every day, all day, since 2026. */
	const OPEN = { rrule: "FREQ=DAILY", start: "2026-01-01T00:00", timezone: "UTC", duration: "P1D" };

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 6,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
		});
		await sim.start();
		h = await startEmbedded({
			mongoUri,
			// Webhooks' signing secrets are kept encrypted: with MongoDB the key comes from the environment.
			env: {
				CTL_SECRET_KEY: "governance-suite-secret-key",
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "3000",
				CM_ALL_STATUS_INTERVAL_MS: "300",
				TASK_MISFIRE_GRACE_MS: "60000",
				ROLLOUT_TICK_MS: "100",
			},
		});
		await eventually(
			async () =>
				(await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		[GOV, GOV2, FREE] = sim.upMinions();
		govGroup = await created("groups", { name: "gov-hosts", hosts: [GOV, GOV2] });
		await newToken("op", "operator");
		await newToken("op2", "operator");
		await newToken("admin2", "admin");
		await newToken("viewer", "viewer");
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("maintenance windows", () => {
		let closed = "";

		it("refuses a window that is not one, field by field (422), and keeps those that are", async () => {
			const bad = await request("POST", url("maintenance_windows"), {
				body: {
					name: "bad",
					targets: { groups: ["0123456789abcdef01234567"] },
					functions: ["cmd.run"],
					rrule: "FREQ=SECONDLY",
					start: "tomorrow",
					timezone: "Mars/Olympus",
					duration: "4h",
				},
			});
			const issues = expectEveError(bad, 422)._issues;
			expect(Object.keys(issues).sort()).toEqual(["duration", "rrule", "start", "timezone"]);
			const noTargets = expectEveError(
				await request("POST", url("maintenance_windows"), {
					body: { name: "none", targets: {}, functions: ["cmd.run"], ...CLOSED },
				}),
				422,
			);
			expect(noTargets._issues.targets).toMatch(/groups, a compound target, or both/);
			expectEveError(
				await request("POST", url("maintenance_windows"), {
					body: { name: "bad-expr", targets: { target: "G@os and (" }, functions: ["cmd.run"], ...CLOSED },
				}),
				422,
			);
			expectEveError(
				await as("op", "POST", "maintenance_windows", {
					name: "op's",
					targets: { groups: [govGroup] },
					functions: ["cmd.run"],
					...CLOSED,
				}),
				403,
			);
			closed = await created("maintenance_windows", {
				name: "new year",
				targets: { groups: [govGroup] },
				functions: ["cmd.run", "pkg.*", "status.all_status"],
				...CLOSED,
			});
		});

		it("refuses a governed function on a governed host outside its window (409 naming the next), on every API path, and audits the refusal", async () => {
			const from = sim.jobs().length;
			const paths: Array<[string, unknown]> = [
				[`hosts/${GOV}`, { cm_client: "local", fun: "cmd.run", arg: ["uptime"] }],
				[`groups/${govGroup}`, { fun: "cmd.run", arg: ["uptime"] }],
				["run", { target: `L@${GOV},${FREE}`, fun: "pkg.upgrade" }],
				[`hosts/${GOV2}/all_status`, {}],
			];
			for (const [path, body] of paths) {
				const err = expectEveError(await as("op", "POST", path, body), 409);
				expect(err._error.message).toMatch(
					/outside the maintenance windows of .*: the next window, 'new year', opens 2027-06-01T00:00:00.000Z/,
				);
				expect(err._next_window).toEqual({
					window: closed,
					name: "new year",
					start: "2027-06-01T00:00:00.000Z",
					end: "2027-06-02T00:00:00.000Z",
				});
				expect(err._refused.length).toBeGreaterThan(0);
				expect(err._refused).not.toContain(FREE);
			}
			// Everything else still runs: an ungoverned function on a governed host, a governed one on an ungoverned host.
			expect((await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
			expect(
				(await as("op", "POST", `hosts/${FREE}`, { cm_client: "local", fun: "cmd.run", arg: ["uptime"] })).status,
			).toBe(200);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.minions]),
			).toEqual([
				["test.ping", [GOV]],
				["cmd.run", [FREE]],
			]);
			const denied = (await request("GET", url("audit", { where: { token: tokens.op.id, status: 409 } }))).body._items;
			expect(denied.map((d: { outcome: string; fun: string }) => [d.outcome, d.fun])).toEqual(
				expect.arrayContaining([
					["denied", "cmd.run"],
					["denied", "pkg.upgrade"],
					["denied", "status.all_status"],
				]),
			);
		});

		it("governs a call with test=True that is no state dry run: cmd.run and pkg.upgrade with test=True are refused outside the window", async () => {
			const from = sim.jobs().length;
			for (const body of [
				{ cm_client: "local", fun: "cmd.run", arg: ["touch /tmp/x"], kwarg: { test: true } },
				{ cm_client: "local", fun: "cmd.run", arg: ["touch /tmp/x", "test=True"] },
				{ cm_client: "local", fun: "pkg.upgrade", kwarg: { test: true } },
			]) {
				expect(expectEveError(await as("op", "POST", `hosts/${GOV}`, body), 409)._error.message).toContain(
					`${body.fun} is outside the maintenance windows of ${GOV}: the next window, 'new year'`,
				);
			}
			// A run made after them reaches salt, and it is the only one: none of the refused ones ran.
			expect((await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.minions]),
			).toEqual([["test.ping", [GOV]]]);
		});

		it("shows a host's windows, open or not, and their next openings", async () => {
			const res = await as("viewer", "GET", `hosts/${GOV}/maintenance_windows?count=2`);
			expect(res.status).toBe(200);
			expect(res.body._items).toEqual([
				{
					_id: closed,
					name: "new year",
					functions: ["cmd.run", "pkg.*", "status.all_status"],
					timezone: "UTC",
					open: null,
					next: [
						{ start: "2027-06-01T00:00:00.000Z", end: "2027-06-02T00:00:00.000Z" },
						{ start: "2028-06-01T00:00:00.000Z", end: "2028-06-02T00:00:00.000Z" },
					],
				},
			]);
			expect((await as("viewer", "GET", `hosts/${FREE}/maintenance_windows`)).body._items).toEqual([]);
			expectEveError(await as("viewer", "GET", "hosts/no-such-host/maintenance_windows"), 404);
			expectEveError(await as("viewer", "GET", `hosts/${GOV}/maintenance_windows?count=0`), 400);
			expect((await as("viewer", "GET", `maintenance_windows/${closed}/preview?count=1`)).body.next).toEqual([
				{ start: "2027-06-01T00:00:00.000Z", end: "2027-06-02T00:00:00.000Z" },
			]);
		});

		it("lets only an admin break the glass, with a reason that is audited and alerted", async () => {
			const from = sim.jobs().length;
			const refused = expectEveError(
				await as("op", "POST", `hosts/${GOV}`, {
					cm_client: "local",
					fun: "cmd.run",
					arg: ["uptime"],
					break_glass: "the disk is full",
				}),
				403,
			);
			expect(refused._error.message).toMatch(/only an admin may run outside the maintenance windows/);
			const res = await as("admin2", "POST", `hosts/${GOV}`, {
				cm_client: "local",
				fun: "cmd.run",
				arg: ["df -h"],
				break_glass: "INC-4711: the disk is full",
			});
			expect(res.status).toBe(200);
			expect(ranOn("cmd.run", GOV, from)).toHaveLength(1);
			const record = (await request("GET", url("audit", { where: { token: tokens.admin2.id, fun: "cmd.run" } }))).body
				._items[0];
			expect(record).toMatchObject({ outcome: "ok", break_glass: "INC-4711: the disk is full", targets: [GOV] });
			const alerts = (await request("GET", url("alerts", { where: { type: "maintenance.break_glass" } }))).body._items;
			expect(alerts[0].payload).toMatchObject({
				by: "admin2",
				fun: "cmd.run",
				hosts: [GOV],
				reason: "INC-4711: the disk is full",
			});
		});

		it("lets the run go when one of the host's windows is open", async () => {
			const open = await created("maintenance_windows", {
				name: "always",
				targets: { target: `L@${GOV}` },
				functions: ["cmd.*"],
				...OPEN,
			});
			const from = sim.jobs().length;
			expect(
				(await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "cmd.run", arg: ["uptime"] })).status,
			).toBe(200);
			// GOV2 has only the closed one: the group run is still refused, naming GOV2 alone.
			expect(
				expectEveError(await as("op", "POST", `groups/${govGroup}`, { fun: "cmd.run", arg: ["uptime"] }), 409)._refused,
			).toEqual([GOV2]);
			expect(ranOn("cmd.run", GOV, from)).toHaveLength(1);
			expect((await request("DELETE", url(`maintenance_windows/${open}`))).status).toBe(204);
			expectEveError(
				await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "cmd.run", arg: ["uptime"] }),
				409,
			);
		});

		it("makes a task wait for the window instead of failing, and run when it opens", async () => {
			const from = sim.jobs().length;
			const task = await created("tasks", {
				name: "gov-window-task",
				fun: "cmd.run",
				kwarg: { cmd: "apt-get clean" },
				tgt: [GOV],
				start: inSeconds(0),
			});
			const waiting = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${task}`))).body;
					return t.last_run?.status === "waiting" ? t : undefined;
				},
				15_000,
				"the task waiting for its window",
			);
			expect(waiting.last_run.message).toMatch(/waits for 'new year' opening 2027-06-01T00:00:00.000Z/);
			expect(waiting.status).toBe("scheduled");
			expect(new Date(waiting.next).toISOString()).toBe("2027-06-01T00:00:00.000Z");
			expect(ranOn("cmd.run", GOV, from)).toEqual([]);
			// The window opens (made daily and open now): the waiting run goes at once.
			expect((await request("PATCH", url(`maintenance_windows/${closed}`), { body: OPEN })).status).toBe(200);
			const ran = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${task}`))).body;
					return t.last_run?.status === "started" ? t : undefined;
				},
				15_000,
				"the task's run once its window opened",
			);
			expect(ranOn("cmd.run", GOV, from).map(j => j.jid)).toEqual([ran.last_run.jid]);
			expect((await request("PATCH", url(`maintenance_windows/${closed}`), { body: CLOSED })).status).toBe(200);
		});

		it("makes a rollout's batch wait for the window, then go on when it opens", async () => {
			const from = sim.jobs().length;
			const res = await as("op", "POST", "rollouts", {
				name: "gov-window-rollout",
				target: "F@gov-hosts",
				fun: "cmd.run",
				arg: ["uptime"],
				batch: 2,
			});
			expect(res.status).toBe(201);
			let last: unknown;
			const waiting = await eventually(
				async () => {
					const r = (await request("GET", url(`rollouts/${res.body._id}`))).body;
					last = r;
					return r.waiting?.for === "window" ? r : undefined;
				},
				15_000,
				"the rollout waiting for its window",
			).catch(err => {
				throw new Error(`${err.message}: ${JSON.stringify(last)}`);
			});
			expect(waiting).toMatchObject({ status: "running", waiting: { window: "new year" } });
			expect(waiting.batches[0].state).toBe("pending");
			expect(ranOn("cmd.run", GOV, from)).toEqual([]);
			expect((await request("PATCH", url(`maintenance_windows/${closed}`), { body: OPEN })).status).toBe(200);
			const done = await eventually(
				async () => {
					const r = (await request("GET", url(`rollouts/${res.body._id}`))).body;
					return r.status === "finished" ? r : undefined;
				},
				20_000,
				"the rollout finished once its window opened",
			);
			expect(ranOn("cmd.run", GOV, from).map(j => j.jid)).toEqual([done.batches[0].jid]);
			expect((await request("PATCH", url(`maintenance_windows/${closed}`), { body: CLOSED })).status).toBe(200);
		});

		it("governs a conformity fix like any run, and never its checks (dry runs change nothing)", async () => {
			const w = await created("maintenance_windows", {
				name: "states at night",
				targets: { target: `L@${FREE}` },
				functions: ["state.*"],
				...CLOSED,
			});
			sim.setDrift(FREE, "common", "base_packages", { vim: { old: "9.0.1378-2", new: "9.0.1378-2+deb12u1" } });
			// The check, state.apply test=True, runs although state.* is governed here.
			const check = await as("op", "POST", "run", {
				target: `L@${FREE}`,
				cm_client: "local",
				fun: "state.apply",
				kwarg: { test: true },
			});
			expect(check.status).toBe(200);
			await eventually(
				async () =>
					(await request("GET", url(`hosts/${FREE}/conformity`))).body.state === "drifted" ? true : undefined,
				10_000,
				"the check judged",
			);
			const from = sim.jobs().length;
			expect(expectEveError(await as("op", "POST", `hosts/${FREE}/conformity/fix`), 409)._error.message).toMatch(
				/^state\.sls_id is outside the maintenance windows of /,
			);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => j.fun),
			).toEqual([]);
			sim.clearDrift(FREE);
			expect((await request("DELETE", url(`maintenance_windows/${w}`))).status).toBe(204);
		});

		it("refuses in the REPL with the API's reason, and shows a host's windows", async () => {
			const from = sim.jobs().length;
			const repl = new FleetRepl({ url: h.api, token: tokens.op.secret, pollMs: 50, execWaitMs: 5000 });
			expect(await repl.run(`exec ${GOV} cmd.run uptime`)).toMatch(
				/^error 409: cmd\.run is outside the maintenance windows of .*'new year', opens 2027-06-01T00:00:00\.000Z/,
			);
			expect(await repl.run(`windows ${GOV}`)).toMatch(/new year .* closed .* 2027-06-01T00:00:00\.000Z/);
			expect(await repl.run("windows")).toMatch(/new year/);
			expect(ranOn("cmd.run", GOV, from)).toEqual([]);
			const admin = new FleetRepl({ url: h.api, token: tokens.admin2.secret, pollMs: 50, execWaitMs: 5000 });
			expect(await admin.run(`exec ${GOV} cmd.run uptime --break-glass='INC-1: a hung mount'`)).toMatch(
				/1 of 1 host\(s\) answered/,
			);
			const record = (await request("GET", url("audit", { where: { break_glass: "INC-1: a hung mount" } }))).body
				._items[0];
			expect(record).toMatchObject({ agent: REPL_AGENT, fun: "cmd.run" });
		});

		afterAll(async () => {
			// The remaining tests are about approvals: no window governs them.
			for (const w of (await request("GET", url("maintenance_windows"))).body._items)
				await request("DELETE", url(`maintenance_windows/${w._id}`));
		});
	});

	describe("approvals", () => {
		let policy = "";

		it("keeps policies admins write, refusing bad ones (422)", async () => {
			expectEveError(
				await request("POST", url("approval_policies"), {
					body: { name: "x", functions: ["cmd.run"], approvers: { count: 0, roles: ["viewer"] } },
				}),
				422,
			);
			expectEveError(
				await as("op", "POST", "approval_policies", {
					name: "x",
					functions: ["cmd.run"],
					approvers: { count: 1, roles: ["admin"] },
				}),
				403,
			);
			policy = await created("approval_policies", {
				name: "cmd.run on more than one host",
				functions: ["cmd.run"],
				more_than_hosts: 1,
				approvers: { count: 1, roles: ["admin"] },
			});
		});

		it("holds a matching run (202) with the exact call and hosts, runs nothing, audits it as held, and makes no second request on a retry", async () => {
			const from = sim.jobs().length;
			const body = { fun: "cmd.run", arg: ["systemctl restart nginx"], kwarg: { env: { PASSWORD: "hunter2" } } };
			const res = await as("op", "POST", `groups/${govGroup}`, body);
			expect(res.status).toBe(202);
			expect(res.headers.get("location")).toBe(`/api/approvals/${res.body.approval._id}`);
			expect(res.body).toMatchObject({ task_id: null, status: "pending_approval" });
			const a = res.body.approval;
			expect(a).toMatchObject({
				status: "pending",
				origin: "api",
				call: { cm_client: "local_async", fun: "cmd.run", arg: ["systemctl restart nginx"] },
				hosts: [GOV, GOV2].sort(),
				hosts_count: 2,
				target: `F@${govGroup}`,
				requester: { name: "op", role: "operator", token: tokens.op.id },
				votes: [],
			});
			expect(a.policies).toEqual([expect.objectContaining({ policy, count: 1, roles: ["admin"] })]);
			// Secrets in the call are masked where it is shown (kept whole, to run as asked).
			expect(JSON.stringify(a.call.kwarg)).not.toContain("hunter2");
			// A single host is under the threshold: it runs.
			expect(
				(await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "cmd.run", arg: ["uptime"] })).status,
			).toBe(200);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => j.minions),
			).toEqual([[GOV]]);
			const again = await as("op", "POST", `groups/${govGroup}`, body);
			expect(again.status).toBe(202);
			expect(again.body.approval._id).toBe(a._id);
			const held = (await request("GET", url("audit", { where: { approval: a._id } }))).body._items;
			expect(held.map((r: { outcome: string; status: number }) => [r.outcome, r.status])).toEqual([
				["held", 202],
				["held", 202],
			]);
			const alerts = (
				await request("GET", url("alerts", { where: { type: "approval.requested", "payload.approval": a._id } }))
			).body._items;
			expect(alerts).toHaveLength(1);
		});

		it("holds cmd.run with test=True like any cmd.run: only a state function's test mode is a dry run", async () => {
			const from = sim.jobs().length;
			const res = await as("op", "POST", `groups/${govGroup}`, {
				fun: "cmd.run",
				arg: ["rm -rf /srv/cache"],
				kwarg: { test: true },
			});
			expect([res.status, res.body.status]).toEqual([202, "pending_approval"]);
			expect(res.body.approval).toMatchObject({
				status: "pending",
				call: { fun: "cmd.run", arg: ["rm -rf /srv/cache"], kwarg: { test: true } },
				policies: [expect.objectContaining({ policy })],
			});
			// Refused by the approver: nothing of it runs; a run made after it is the only job since.
			expect((await as("admin2", "POST", `approvals/${res.body.approval._id}/reject`, {})).body.status).toBe(
				"rejected",
			);
			expect((await as("op", "POST", `hosts/${GOV}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.minions]),
			).toEqual([["test.ping", [GOV]]]);
		});

		it("lets no requester approve their own run, nor a role the policy does not name; an admin's approval runs it once, as the requester", async () => {
			const from = sim.jobs().length;
			const res = await as("op", "POST", "run", { target: `L@${GOV},${GOV2}`, fun: "cmd.run", arg: ["id"] });
			const id = res.body.approval._id;
			expect(expectEveError(await as("op", "POST", `approvals/${id}/approve`, {}), 403)._error.message).toMatch(
				/requester .* cannot approve/,
			);
			expect(expectEveError(await as("op2", "POST", `approvals/${id}/approve`, {}), 403)._error.message).toMatch(
				/role operator cannot decide .* admin/,
			);
			expectEveError(await as("viewer", "GET", `approvals/${id}`), 403);
			expectEveError(await request("POST", url(`approvals/${id}/maybe`), { body: {} }), 422);
			expectEveError(await request("POST", url(`approvals/${id}/approve`), { body: { comment: 5 } }), 422);
			expectEveError(await request("POST", url(`approvals/${id}/approve`), { body: { comment: "ok", extra: 1 } }), 422);
			expect(sim.jobs().length).toBe(from);
			const ok = await as("admin2", "POST", `approvals/${id}/approve`, { comment: "change CHG-12" });
			expect(ok.status).toBe(200);
			expect(ok.body).toMatchObject({
				status: "done",
				votes: [expect.objectContaining({ decision: "approved", name: "admin2", comment: "change CHG-12" })],
			});
			const jobs = sim.jobs().slice(from);
			expect(jobs.map(j => [j.fun, j.arg, [...j.minions].sort(), j.jid])).toEqual([
				["cmd.run", ["id"], [GOV, GOV2].sort(), ok.body.run.jid],
			]);
			// Audited as a run of the requester's token, carrying the approval.
			const record = (await request("GET", url("audit", { where: { method: "APPROVAL", approval: id } }))).body._items;
			expect(record).toEqual([
				expect.objectContaining({
					token: tokens.op.id,
					outcome: "ok",
					jid: ok.body.run.jid,
					path: `/api/approvals/${id}`,
				}),
			]);
			// Decided: no second run, whoever tries.
			expectEveError(await request("POST", url(`approvals/${id}/approve`), { body: {} }), 409);
			expect(sim.jobs().length).toBe(from + 1);
		});

		it("carries out an approval only for the call it approved: another function, arguments, kwargs, hosts or target is refused (403) and runs nothing", async () => {
			const p = await created("approval_policies", {
				name: "cmd.* by an admin",
				functions: ["cmd.*"],
				approvers: { count: 1, roles: ["admin"] },
			});
			const asked = { target: `L@${GOV},${GOV2}`, fun: "cmd.run", arg: ["hostname -f"] };
			const id = (await as("op", "POST", "run", asked)).body.approval._id;
			const approvals = store("approvals");
			const stored = await approvals.findOne({ _id: id });
			expect(stored).toMatchObject({
				status: "pending",
				call: { fun: "cmd.run", arg: ["hostname -f"] },
				hosts: [GOV, GOV2].sort(),
			});
			// Approved and claimed (as the vote that completes it does), then carried out with something else than what
			// was approved: the stored request altered after its approval (the grant is checked where the run starts).
			await approvals.updateMany({ _id: id }, { $set: { status: "running" } });
			const from = sim.jobs().length;
			const carryOut = (changes: Record<string, unknown>) =>
				approvals
					.updateMany(
						{ _id: id },
						{ $set: { call: stored!.call, hosts: stored!.hosts, target: stored!.target, ...changes } },
					)
					.then(() => h.broker!.call<{ task_id: string | null }, { id: string }>("cm-gateway.runApproved", { id }));
			const others: Array<[string, Record<string, unknown>]> = [
				["another function", { call: { ...stored!.call, fun: "cmd.script" } }],
				["other arguments", { call: { ...stored!.call, arg: ["reboot"] } }],
				["added kwargs", { call: { ...stored!.call, kwarg: { runas: "root" } } }],
				["other hosts", { hosts: [GOV, FREE].sort() }],
				["fewer hosts", { hosts: [GOV] }],
				["another target", { target: `L@${GOV},${FREE}` }],
			];
			for (const [what, changes] of others) {
				const refused = await carryOut(changes).then(
					() => null,
					(err: { code?: number; message: string }) => err,
				);
				expect([what, refused?.code, refused?.message]).toEqual([
					what,
					403,
					expect.stringMatching(new RegExp(`^the run is refused: approval ${id} does not cover it`)),
				]);
			}
			// The call it approved runs, once; and the one job since the refusals is it: none of them ran.
			const ran = await carryOut({});
			expect(ran.task_id).toMatch(/^\d{20}$/);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.arg, [...j.minions].sort(), j.jid]),
			).toEqual([["cmd.run", ["hostname -f"], [GOV, GOV2].sort(), ran.task_id]]);
			const refusals = (await request("GET", url("audit", { where: { method: "APPROVAL", approval: id } }))).body
				._items;
			expect(refusals.map((r: { outcome: string; status: number }) => [r.outcome, r.status]).sort()).toEqual(
				[...others.map(() => ["denied", 403]), ["ok", 200]].sort(),
			);
			expect((await request("DELETE", url(`approval_policies/${p}`))).status).toBe(204);
		});

		it("waits for every approver a policy asks for, and a rejection runs nothing", async () => {
			const two = await created("approval_policies", {
				name: "two admins for pkg",
				functions: ["pkg.*"],
				approvers: { count: 2, roles: ["admin"] },
			});
			const from = sim.jobs().length;
			const id = (await as("op", "POST", `hosts/${FREE}`, { fun: "pkg.upgrade" })).body.approval._id;
			// An approver whose own scope could not make the run may not vouch for it.
			await newToken("admin-scoped", "admin", { functions: ["test.*"] });
			expect(
				expectEveError(await as("admin-scoped", "POST", `approvals/${id}/approve`, {}), 403)._error.message,
			).toMatch(/could not make yourself: function 'pkg.upgrade'/);
			expect((await as("admin2", "POST", `approvals/${id}/approve`, {})).body.status).toBe("pending");
			expectEveError(await as("admin2", "POST", `approvals/${id}/approve`, {}), 409);
			expect((await request("POST", url(`approvals/${id}/approve`), { body: {} })).body.status).toBe("done");
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => j.fun),
			).toEqual(["pkg.upgrade"]);

			const rejected = (await as("op", "POST", `hosts/${FREE}`, { fun: "pkg.remove", arg: ["nginx"] })).body.approval
				._id;
			const r = await as("admin2", "POST", `approvals/${rejected}/reject`, { comment: "not during the sale" });
			expect(r.body).toMatchObject({
				status: "rejected",
				votes: [expect.objectContaining({ decision: "rejected", comment: "not during the sale" })],
			});
			expectEveError(await request("POST", url(`approvals/${rejected}/approve`), { body: {} }), 409);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => j.fun),
			).toEqual(["pkg.upgrade"]);
			expect((await request("DELETE", url(`approval_policies/${two}`))).status).toBe(204);
		});

		it("runs nothing for an expired request, nor for one whose requester lost the right meanwhile", async () => {
			const from = sim.jobs().length;
			const id = (await as("op", "POST", `groups/${govGroup}`, { fun: "cmd.run", arg: ["reboot"] })).body.approval._id;
			// Its expiry passes (the policy's expires_after, one day by default).
			await store("approvals").updateMany({ _id: id }, { $set: { expires: new Date(Date.now() - 1000) } });
			expect(
				expectEveError(await request("POST", url(`approvals/${id}/approve`), { body: {} }), 409)._error.message,
			).toMatch(/expired/);
			expect((await request("GET", url(`approvals/${id}`))).body.status).toBe("expired");

			await newToken("op-leaving", "operator");
			const gone = (await as("op-leaving", "POST", `groups/${govGroup}`, { fun: "cmd.run", arg: ["reboot"] })).body
				.approval._id;
			expect((await request("DELETE", url(`tokens/${tokens["op-leaving"].id}`))).status).toBe(204);
			const after = await request("POST", url(`approvals/${gone}/approve`), { body: {} });
			expect(after.body).toMatchObject({ status: "failed", run: { status: "failed", code: 403 } });
			expect(after.body.run.message).toMatch(/revoked/);
			expect(sim.jobs().slice(from)).toEqual([]);
		});

		it("shows a state run's predicted changes from a dry run made as the requester", async () => {
			const p = await created("approval_policies", {
				name: "highstate",
				functions: ["state.apply"],
				approvers: { count: 1, roles: ["admin", "operator"] },
			});
			sim.setDrift(FREE, "common", "base_packages", { curl: { old: "7.88.1-10", new: "7.88.1-10+deb12u5" } });
			const res = await as("op", "POST", `hosts/${FREE}`, { fun: "state.apply" });
			expect(res.status).toBe(202);
			const id = res.body.approval._id;
			const dry = await eventually(
				async () => {
					const a = (await as("op2", "GET", `approvals/${id}`)).body;
					return a.dry_run?.state === "finished" ? a.dry_run : undefined;
				},
				15_000,
				"the request's dry run",
			);
			expect(dry.predicted).toEqual([
				expect.objectContaining({
					host: FREE,
					state_id: "base_packages",
					result: null,
					changes: { curl: { old: "7.88.1-10", new: "7.88.1-10+deb12u5" } },
				}),
			]);
			const dryJob = sim.jobs().find(j => j.jid === dry.jid)!;
			expect(dryJob.fun).toBe("state.apply");
			// An operator may approve here (the policy names the role), not being the requester.
			const ok = await as("op2", "POST", `approvals/${id}/approve`, {});
			expect(ok.body.status).toBe("done");
			sim.clearDrift(FREE);
			expect((await request("DELETE", url(`approval_policies/${p}`))).status).toBe(204);
		});

		it("tells approvers through a webhook subscribed to approval alerts", async () => {
			const received: Array<{ type: string; payload: Record<string, unknown> }> = [];
			const receiver = createServer((req, res) => {
				let body = "";
				req.on("data", c => (body += c));
				req.on("end", () => {
					received.push(JSON.parse(body).alert);
					res.end("ok");
				});
			});
			await new Promise<void>(r => receiver.listen(0, "127.0.0.1", r));
			try {
				const hook = await created("webhooks", {
					url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/approvers`,
					types: ["approval.*"],
				});
				const id = (await as("op", "POST", `groups/${govGroup}`, { fun: "cmd.run", arg: ["date"] })).body.approval._id;
				const got = await eventually(
					async () => received.find(a => a.type === "approval.requested" && a.payload.approval === id),
					10_000,
					"the webhook's delivery",
				);
				expect(got.payload).toMatchObject({
					fun: "cmd.run",
					hosts: 2,
					requester: "op",
					policies: ["cmd.run on more than one host"],
				});
				expect((await request("DELETE", url(`webhooks/${hook}`))).status).toBe(204);
			} finally {
				receiver.close();
			}
		});

		it("pushes requests and their changes on /api/approvals/stream", async () => {
			const controller = new AbortController();
			const stream = await fetch(url("approvals/stream", { timeout: 20 }), {
				headers: { authorization: `Bearer ${tokens.op2.secret}` },
				signal: controller.signal,
			});
			expect(stream.status).toBe(200);
			const reader = stream.body!.getReader();
			let text = "";
			const id = (await as("op", "POST", `groups/${govGroup}`, { fun: "cmd.run", arg: ["hostname"] })).body.approval
				._id;
			await as("admin2", "POST", `approvals/${id}/reject`, { comment: "no" });
			const deadline = Date.now() + 10_000;
			while (!text.includes('"status":"rejected"') && Date.now() < deadline)
				text += new TextDecoder().decode((await reader.read()).value);
			controller.abort();
			const events = text
				.split("\n\n")
				.filter(e => e.startsWith("event: approval"))
				.map(e => JSON.parse(e.slice(e.indexOf("data: ") + 6)));
			expect(events.filter(e => e._id === id).map(e => e.status)).toEqual(["pending", "rejected"]);
		});

		it("approves a task's definition once: its runs wait, then run, until what it runs changes", async () => {
			const from = sim.jobs().length;
			// An operator's task: its runs are the operator's, and an admin approves them.
			const made = await as("op", "POST", "tasks", {
				name: "gov-approved-task",
				fun: "cmd.run",
				kwarg: { cmd: "uptime" },
				tgt: [govGroup],
				start: inSeconds(0),
				interval: 2,
			});
			expect(made.status).toBe(201);
			const task = made.body._id;
			const held = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${task}`))).body;
					return t.last_run?.status === "awaiting_approval" ? t : undefined;
				},
				15_000,
				"the task's run held",
			);
			const id = held.last_run.approval;
			const a = (await request("GET", url(`approvals/${id}`))).body;
			expect(a).toMatchObject({ origin: "task", definition: { kind: "task", id: task }, status: "pending" });
			expect(ranOn("cmd.run", GOV, from)).toEqual([]);
			const approved = await request("POST", url(`approvals/${id}/approve`), { body: {} });
			expect([approved.status, approved.body.status]).toEqual([200, "approved"]);
			await eventually(
				async () => (ranOn("cmd.run", GOV, from).length >= 2 ? true : undefined),
				15_000,
				"two runs of the approved task",
			);
			// What it runs changes: a new request, the old approval superseded, and no run until it is approved.
			const changed = await as("op", "PUT", "tasks", { _id: task, kwarg: { cmd: "rm -rf /tmp/cache" } });
			expect([changed.status, changed.text]).toEqual([200, expect.any(String)]);
			const again = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${task}`))).body;
					return t.last_run?.status === "awaiting_approval" && t.last_run.approval !== id ? t : undefined;
				},
				15_000,
				"the changed task held again",
			);
			expect((await request("GET", url(`approvals/${id}`))).body.status).toBe("superseded");
			expect(ranOn("cmd.run", GOV, from).filter(j => JSON.stringify(j.arg).includes("rm -rf"))).toEqual([]);
			expect((await as("op", "PATCH", `tasks/${task}/paused`)).status).toBe(200);
			expect(again.last_run.approval).toMatch(/^[0-9a-f]{24}$/);
		});

		it("holds a rollout until its definition is approved, then runs its batches", async () => {
			const from = sim.jobs().length;
			const res = await as("op", "POST", "rollouts", {
				name: "gov-approved-rollout",
				target: "F@gov-hosts",
				fun: "cmd.run",
				arg: ["uptime"],
				batch: 1,
			});
			expect(res.status).toBe(201);
			const waiting = await eventually(
				async () => {
					const r = (await request("GET", url(`rollouts/${res.body._id}`))).body;
					return r.waiting?.for === "approval" ? r : undefined;
				},
				15_000,
				"the rollout held for approval",
			);
			const a = (await request("GET", url(`approvals/${waiting.waiting.approval}`))).body;
			// The threshold counts the whole rollout (2 hosts), not the batch of 1.
			expect(a).toMatchObject({
				origin: "rollout",
				definition: { kind: "rollout", id: res.body._id, hosts: 2 },
				hosts_count: 1,
			});
			expect(ranOn("cmd.run", GOV, from)).toEqual([]);
			expect((await request("POST", url(`approvals/${a._id}/approve`), { body: {} })).body.status).toBe("approved");
			const done = await eventually(
				async () => {
					const r = (await request("GET", url(`rollouts/${res.body._id}`))).body;
					return r.status === "finished" ? r : undefined;
				},
				20_000,
				"the approved rollout finished",
			);
			expect(
				sim
					.jobs()
					.slice(from)
					.filter(j => j.fun === "cmd.run")
					.map(j => j.jid),
			).toEqual(done.batches.map((b: { jid: string }) => b.jid));
		});

		it("works from the REPL: a held exec, the list, an approval that runs it", async () => {
			const from = sim.jobs().length;
			const op = new FleetRepl({ url: h.api, token: tokens.op.secret, pollMs: 50, execWaitMs: 5000 });
			const said = await op.run(`exec gov-hosts cmd.run whoami`);
			const id = /held for approval ([0-9a-f]{24}) \(cmd\.run on more than one host\)/.exec(said)?.[1];
			expect(id).toBeDefined();
			// The REPL is an API client: its runs are interactive (`api`), whatever User-Agent it sends.
			expect((await request("GET", url(`approvals/${id}`))).body.origin).toBe("api");
			expect(await op.run("approvals")).toContain(id);
			expect(await op.run(`approve ${id}`)).toMatch(/^error 403: the requester/);
			const admin = new FleetRepl({ url: h.api, token: tokens.admin2.secret });
			expect(await admin.run(`approve ${id} looks fine`)).toMatch(/^approved: it ran as job \d{20}/);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.arg]),
			).toEqual([["cmd.run", ["whoami"]]]);
		});
	});
}

describe("governance: maintenance windows and approvals, decided where a run starts (NeDB)", () =>
	governanceSuite(undefined));
describeWithMongo(
	"governance: maintenance windows and approvals, decided where a run starts (MongoDB wire protocol)",
	uri => governanceSuite(uri ? uniqueMongoUri(uri) : undefined),
);
