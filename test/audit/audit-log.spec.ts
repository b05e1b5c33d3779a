/**
 * The audit log has one owner (services/audit/): the gateway, the run door and sign-in tell it facts with
 * `audit.begin` and `audit.complete`, and it builds every record (services/audit/record.ts). What is checked is what
 * an admin reads at GET /api/audit: one record per request, a run's with its jid and its secrets masked, a refused
 * run's, sign-out's; and what the audit service does with the calls it gets: a record is begun once, never merged.
 * The builder alone: test/audit/record.spec.ts.
 */
import type { Middleware } from "moleculer";
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, withQuery, type Reply } from "../support/http";
import { csrfOf } from "../../services/api/sessions";
import { newObjectId } from "../../lib/eve/ids";
import { MASK } from "../../lib/eve/render";
import type { AuditBegin } from "../../lib/contracts/audit";

describe("the audit log through the API", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let IN = "";
	let op = { id: "", secret: "" };
	/** The audit service's calls as they completed: which action, the record's id. */
	const calls: Array<{ action: string; id: string }> = [];
	/** When set, audit.begin of a run's record before it runs (no result yet) fails. */
	let failRunBegin = false;

	const AuditWatch: Middleware = {
		name: "AuditWatch",
		localAction(next: (ctx: any) => Promise<unknown>, action: { name: string }) {
			if (action.name !== "audit.begin" && action.name !== "audit.complete") return next;
			return async (ctx: any) => {
				if (failRunBegin && action.name === "audit.begin" && ctx.params.run?.call && !ctx.params.result)
					throw Object.assign(new Error("audit store unavailable (test)"), { code: 500 });
				const res = (await next(ctx)) as { _id: string };
				calls.push({ action: action.name, id: String(res._id) });
				return res;
			};
		},
	} as unknown as Middleware;

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	const audit = async (where: Record<string, unknown>) =>
		(await request("GET", url("audit", { where, sort: "_id" }))).body._items as Array<Record<string, any>>;
	const callsOf = (id: string) => calls.filter(c => c.id === id).map(c => c.action);

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 3,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
			downFraction: 0,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "100",
				// Sign-in configured, its provider unreachable: sign-out still ends the session here, and is audited.
				OIDC_ISSUER: "http://127.0.0.1:9/unreachable",
				OIDC_CLIENT_ID: "fleet-ctl",
				OIDC_ALLOW_HTTP: "true",
				CTL_PUBLIC_URL: "http://127.0.0.1:9",
				OIDC_ROLES: JSON.stringify([{ group: "*", role: "viewer" }]),
			},
			broker: { middlewares: [AuditWatch] },
		});
		const hosts = async () => (await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total;
		for (let i = 0; i < 200 && (await hosts()) !== sim.minionIds().length; i++)
			await new Promise(r => setTimeout(r, 50));
		IN = sim.upMinions()[0];
		const made = await request("POST", url("tokens"), {
			body: { name: "audit-op", role: "operator", scope: { functions: ["test.*"] } },
		});
		op = { id: made.body._id, secret: made.body.token };
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("shows a run as one record: begun once by the run door before the job, completed with its jid, its secrets masked", async () => {
		const body = {
			cm_client: "local",
			fun: "test.arg",
			arg: ["whoami", "password=hunter2"],
			kwarg: { token: "t0k", user: "root" },
		};
		const res = await request("POST", url(`hosts/${IN}`), { body, headers: { "user-agent": "audit-spec/1" } });
		expect(res.status).toBe(200);
		const records = await audit({ jid: res.body.task_id });
		expect(records).toHaveLength(1);
		expect(records[0]).toMatchObject({
			method: "POST",
			path: `/api/hosts/${IN}`,
			agent: "audit-spec/1",
			role: "admin",
			targets: [IN],
			fun: "test.arg",
			args: { cm_client: "local", arg: ["whoami", `password=${MASK}`], kwarg: { token: MASK, user: "root" } },
			status: 200,
			outcome: "ok",
			jid: res.body.task_id,
		});
		expect(JSON.stringify(records[0])).not.toMatch(/hunter2|t0k/);
		// Begun once (the door, before the job), completed by the door and then by the gateway: never written twice.
		expect(callsOf(records[0]._id)).toStrictEqual(["audit.begin", "audit.complete", "audit.complete"]);
		expect(await audit({ path: `/api/hosts/${IN}`, agent: "audit-spec/1" })).toHaveLength(1);
	});

	it("shows a refused run (403) as one record, denied, saying why, with what was asked", async () => {
		const before = sim.jobs().length;
		const res = await request("POST", url(`hosts/${IN}`), {
			token: op.secret,
			body: { fun: "cmd.run", kwarg: { cmd: "id", password: "pw" } },
		});
		expect(expectEveError(res, 403)._error.message).toContain("'cmd.run'");
		const records = await audit({ token: op.id, fun: "cmd.run" });
		expect(records).toHaveLength(1);
		expect(records[0]).toMatchObject({
			name: "audit-op",
			role: "operator",
			method: "POST",
			path: `/api/hosts/${IN}`,
			targets: [IN],
			status: 403,
			outcome: "denied",
			message: res.body._error.message,
			jid: null,
		});
		expect(records[0].args).toStrictEqual({ cm_client: "local_async", kwarg: { cmd: "id", password: MASK } });
		expect(callsOf(records[0]._id)).toStrictEqual(["audit.begin", "audit.complete"]);
		expect(sim.jobs().length).toBe(before);
	});

	it("runs nothing when the run's record cannot be begun: 503 saying so, the request on record as failed", async () => {
		const before = sim.jobs().length;
		failRunBegin = true;
		let res: Reply;
		try {
			res = await request("POST", url(`hosts/${IN}`), {
				token: op.secret,
				body: { cm_client: "local", fun: "test.echo", arg: ["not-run"] },
			});
		} finally {
			failRunBegin = false;
		}
		expect(expectEveError(res, 503)._error.message).toMatch(/^the audit log could not be written, so nothing was run/);
		// A marker run made afterwards is in salt's log: anything the refused request started would be there before it.
		const marker = await request("POST", url(`hosts/${IN}`), {
			token: op.secret,
			body: { cm_client: "local", fun: "test.echo", arg: ["marker"] },
		});
		expect(marker.status).toBe(200);
		expect(
			sim
				.jobs()
				.slice(before)
				.map(j => j.arg),
		).toStrictEqual([["marker"]]);
		const records = await audit({ token: op.id, status: 503 });
		expect(records).toEqual([
			expect.objectContaining({
				path: `/api/hosts/${IN}`,
				outcome: "failed",
				fun: null,
				args: { cm_client: "local", fun: "test.echo", arg: ["not-run"] },
			}),
		]);
	});

	it("writes a request no run took part in once, whole (a write, a refusal before any action)", async () => {
		const made = await request("POST", url("groups"), { body: { name: "audit-group", hosts: [IN] } });
		expect(made.status).toBe(201);
		const refused = await request("POST", url("groups"), { token: op.secret, body: { name: "audit-group-2" } });
		expect(refused.status).toBe(403);
		const records = await audit({ path: "/api/groups", method: "POST" });
		// A role's refusal comes before the body is read: the record has no arguments.
		expect(records.map(r => [r.status, r.outcome, r.name, "args" in r ? r.args : "none"])).toStrictEqual([
			[201, "ok", expect.any(String), { name: "audit-group", hosts: [IN] }],
			[403, "denied", "audit-op", "none"],
		]);
		for (const r of records) expect(callsOf(r._id)).toStrictEqual(["audit.begin"]);
	});

	it("records a sign-out (the session ended here although the provider is unreachable)", async () => {
		const secret = `fct_${"s".repeat(43)}`;
		const res = await fetch(`${h.api.replace(/\/api$/, "")}/auth/logout`, {
			method: "POST",
			headers: { cookie: `fleet_session=${secret}`, "x-csrf-token": csrfOf(secret), "user-agent": "audit-spec/1" },
		});
		expect(res.status).toBe(200);
		expect(await res.json()).toEqual({ redirect: "/" });
		const records = await audit({ path: "/auth/logout" });
		expect(records).toEqual([
			expect.objectContaining({
				method: "POST",
				agent: "audit-spec/1",
				status: 200,
				outcome: "ok",
				message: "signed out",
				fun: null,
				jid: null,
			}),
		]);
	});

	it("begins a record once: a second begin under its id is refused (409) and the first stays as it was; only a begun record completes", async () => {
		const id = newObjectId();
		const facts: AuditBegin = {
			id,
			who: { token: null, name: null, role: null },
			request: { source: "test", method: "CALL", path: "/test/once" },
			run: { targets: [IN], fun: "test.ping", call: { cm_client: "local" } },
		};
		await h.broker!.call("audit.begin", facts);
		await expect(
			h.broker!.call("audit.begin", {
				...facts,
				request: { ...facts.request, path: "/test/twice" },
				result: { status: 200 },
			}),
		).rejects.toMatchObject({ code: 409 });
		expect(await audit({ _id: id })).toEqual([
			expect.objectContaining({ path: "/test/once", status: 202, outcome: "started" }),
		]);
		await expect(
			h.broker!.call("audit.complete", { id: newObjectId(), result: { status: 200 } }),
		).rejects.toMatchObject({ code: 404 });
		// A jid once known stays; a refusal or a hold stays one.
		await h.broker!.call("audit.complete", { id, result: { status: 200, outcome: "ok", jid: "20300101000000000001" } });
		await h.broker!.call("audit.complete", { id, result: { status: 504, message: "timed out" } });
		expect(await audit({ _id: id })).toEqual([
			expect.objectContaining({ status: 504, outcome: "failed", message: "timed out", jid: "20300101000000000001" }),
		]);
		const held = newObjectId();
		await h.broker!.call("audit.begin", {
			...facts,
			id: held,
			result: { status: 202, outcome: "held", message: "held for approval x" },
		});
		await h.broker!.call("audit.complete", { id: held, result: { status: 202 } });
		expect(await audit({ _id: held })).toEqual([expect.objectContaining({ status: 202, outcome: "held" })]);
	});
});
