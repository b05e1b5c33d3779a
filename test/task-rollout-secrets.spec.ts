/**
 * Issue 43, a run's secrets in tasks and rollouts, through the HTTP API against the salt-api simulator
 * (docs/security.md, "What is masked"): a task's `kwarg` and a rollout's `arg`/`kwarg` are shown by the one masking
 * rule to operators and admins and withheld from viewers, while the scheduler and the rollout driver run the exact
 * call; the task form's round trip — a PUT that sends the masks back — keeps the stored secrets, only where they
 * were and for the call they were given for, and a task's approval keeps covering it until what it runs changes.
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, type Harness } from "./support/harness";
import { request, expectEveError, eventually, withQuery, type Reply } from "./support/http";
import { formatHttpDate } from "../lib/eve/dates";

const M = "********";
/** Each secret a run below carries, distinct so that a leak names its source. */
const TASK_PW = "task-hunter2";
const TASK_DB_PW = "task-db-s3cret";
const NEW_PW = "task-new-hunter3";
const ROLLOUT_ARG_PW = "rollout-argstring-pw";
const ROLLOUT_KW_PW = "rollout-kwarg-pw";
const SECRETS = [TASK_PW, TASK_DB_PW, NEW_PW, ROLLOUT_ARG_PW, ROLLOUT_KW_PW];

describe("a task's and a rollout's secrets (issue 43)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A = "";
	const tokens: Record<string, string> = {};

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	/** A request as `who` (admin: the harness's admin token). */
	const as = (who: string, method: string, path: string, body?: unknown) =>
		request(method, url(path), { token: who === "admin" ? undefined : tokens[who], body });
	const read = (who: string, path: string, query: Record<string, unknown> = {}) =>
		request("GET", url(path, query), { token: who === "admin" ? undefined : tokens[who] });
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	const noSecretIn = (reply: Reply) => {
		for (const s of SECRETS) expect(reply.text).not.toContain(s);
	};
	/** The jobs Salt was asked for whose arguments hold `marker`: what the minion was given. */
	const jobsWith = (marker: string) => sim.jobs().filter(j => JSON.stringify(j.arg).includes(marker));
	/** The keyword arguments Salt got in the first job holding `marker` (salt-api's `__kwarg__` dict). */
	const ranWith = (marker: string) =>
		eventually(
			async () => {
				const job = jobsWith(marker)[0];
				return job
					? ((job.arg as unknown[]).find(a => a !== null && typeof a === "object") as Record<string, unknown>)
					: undefined;
			},
			15_000,
			`the run of ${marker}`,
		);
	const newTask = async (who: string, body: Record<string, unknown>): Promise<string> => {
		const res = await as(who, "POST", "tasks", {
			cm_client: "local_async",
			fun: "test.arg",
			tgt: [A],
			start: inSeconds(3600),
			...body,
		});
		if (res.status !== 201) throw new Error(`POST /tasks: ${res.status} ${res.text}`);
		return res.body._id;
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 2,
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
		[A] = sim.upMinions();
		for (const [name, role] of [
			["op", "operator"],
			["viewer", "viewer"],
		]) {
			const res = await request("POST", url("tokens"), { body: { name, role } });
			tokens[name] = res.body.token;
		}
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("a task", () => {
		/** A password kwarg and one in a nested pillar, as `state.apply mods=db pillar={…}` carries it. */
		const kwarg = { mods: "db", password: TASK_PW, pillar: { db: { password: TASK_DB_PW, host: "db-01" } } };
		const masked = { mods: "db", password: M, pillar: { db: { password: M, host: "db-01" } } };
		let task = "";
		beforeAll(async () => {
			task = await newTask("admin", { name: "secret task", kwarg });
		});

		it("is shown to admins and operators with its secrets masked, in the list and the item", async () => {
			for (const who of ["admin", "op"]) {
				const item = await read(who, `tasks/${task}`);
				noSecretIn(item);
				expect(item.body.kwarg).toEqual(masked);
				const list = await read(who, "tasks", { where: { name: "secret task" } });
				noSecretIn(list);
				expect(list.body._items.map((t: { kwarg: unknown }) => t.kwarg)).toEqual([masked]);
			}
			// Stored whole: a filter on it would reveal a secret a comparison at a time, so none is taken.
			expect(
				expectEveError(await read("op", "tasks", { where: { "kwarg.password": TASK_PW } }), 400)._error.message,
			).toMatch(/'kwarg.password' holds a secret/);
			expectEveError(await read("admin", "tasks", { sort: "kwarg" }), 400);
		});

		it("withholds its arguments from viewers, keys kept, and refuses a viewer's filter on them", async () => {
			const item = await read("viewer", `tasks/${task}`);
			noSecretIn(item);
			expect(item.body).toMatchObject({
				name: "secret task",
				fun: "test.arg",
				tgt: [A],
				kwarg: { mods: M, password: M, pillar: M },
			});
			const list = await read("viewer", "tasks", { where: { name: "secret task" } });
			expect(list.body._items[0].kwarg).toEqual(item.body.kwarg);
			expect(list.text).not.toContain("db-01");
			expect(
				expectEveError(await read("viewer", "tasks", { where: { "kwarg.mods": "db" } }), 403)._error.message,
			).toMatch(/'kwarg.mods' is a run's arguments/);
		});

		it("refuses a mask that would carry a secret to another key, another task, another call or a new task", async () => {
			// Another key: nothing is stored under `db_password`.
			const moved = expectEveError(
				await as("admin", "PUT", "tasks", { _id: task, kwarg: { ...masked, password: undefined, db_password: M } }),
				422,
			);
			expect(moved._issues.kwarg).toMatch(/kwarg.db_password: the mask/);
			// Another task: it stores no password to keep.
			const other = await newTask("admin", { name: "no secret", kwarg: { mods: "db" } });
			expectEveError(await as("admin", "PUT", "tasks", { _id: other, kwarg: masked }), 422);
			// Another call: the secret was given for test.arg on this host, not for what the change would run.
			const refunned = expectEveError(
				await as("admin", "PUT", "tasks", { _id: task, fun: "test.kwarg", kwarg: masked }),
				422,
			);
			expect(refunned._issues.kwarg).toMatch(/changes fun: give the value again/);
			expectEveError(await as("admin", "PUT", "tasks", { _id: task, tgt: [sim.upMinions()[1]], kwarg: masked }), 422);
			// Leaving kwarg out keeps it as stored: the same as sending it back masked.
			expect(
				expectEveError(await as("admin", "PUT", "tasks", { _id: task, fun: "test.kwarg" }), 422)._issues.kwarg,
			).toMatch(/^kwarg.password, kwarg.pillar.db.password: .* changes fun/);
			expectEveError(await as("admin", "PUT", "tasks", { _id: task, target: `L@${sim.upMinions()[1]}` }), 422);
			// A task that stores no secret changes its call as before.
			expect(
				(await as("admin", "PUT", "tasks", { _id: other, fun: "test.kwarg", tgt: [sim.upMinions()[1]] })).status,
			).toBe(200);
			// A new task has nothing stored.
			expectEveError(
				await as("admin", "POST", "tasks", {
					name: "copied",
					fun: "test.arg",
					tgt: [A],
					start: inSeconds(3600),
					kwarg: masked,
				}),
				422,
			);
			// A literal key=******** string in a kwarg value is a sent-back mask too.
			expectEveError(
				await as("admin", "POST", "tasks", {
					name: "copied",
					fun: "test.arg",
					tgt: [A],
					start: inSeconds(3600),
					kwarg: { opts: `password=${M}` },
				}),
				422,
			);
		});

		it("keeps the stored secrets when a PUT sends the masks back as shown: the next run carries them", async () => {
			const shown = (await read("admin", `tasks/${task}`)).body;
			// What the dashboard's form sends: the task as shown, masks and all, with a new start and a marker.
			const put = await as("admin", "PUT", "tasks", {
				_id: task,
				name: shown.name,
				fun: shown.fun,
				tgt: shown.tgt,
				target: null,
				kwarg: { ...shown.kwarg, run: "mask-back" },
				start: inSeconds(1),
			});
			expect([put.status, put.text]).toEqual([200, expect.any(String)]);
			noSecretIn(await read("admin", `tasks/${task}`));
			const ran = await ranWith("mask-back");
			expect(ran).toMatchObject({
				run: "mask-back",
				mods: "db",
				password: TASK_PW,
				pillar: { db: { password: TASK_DB_PW, host: "db-01" } },
			});
		});

		it("replaces a secret a PUT gives a new value for, keeping the masked ones", async () => {
			const id = await newTask("op", { name: "changed secret", kwarg });
			const put = await as("op", "PUT", "tasks", {
				_id: id,
				kwarg: { ...masked, password: NEW_PW, run: "new-value" },
				start: inSeconds(1),
			});
			expect([put.status, put.text]).toEqual([200, expect.any(String)]);
			expect((await read("op", `tasks/${id}`)).body.kwarg).toEqual({ ...masked, run: "new-value" });
			const ran = await ranWith("new-value");
			expect(ran).toMatchObject({ password: NEW_PW, pillar: { db: { password: TASK_DB_PW } } });
		});

		it("keeps its approval across a mask sent back, and asks again when a non-secret value changes", async () => {
			const policy = await as("admin", "POST", "approval_policies", {
				name: "test.arg needs an admin",
				functions: ["test.arg"],
				origins: ["task"],
				approvers: { count: 1, roles: ["admin"] },
			});
			expect(policy.status).toBe(201);
			const id = await newTask("op", {
				name: "approved secret",
				kwarg: { ...kwarg, run: "approved" },
				start: inSeconds(1),
				interval: 2,
			});
			try {
				const held = await eventually(
					async () => {
						const t = (await read("admin", `tasks/${id}`)).body;
						return t.last_run?.status === "awaiting_approval" ? t : undefined;
					},
					15_000,
					"the task's run held",
				);
				const approval = held.last_run.approval;
				expect((await as("admin", "POST", `approvals/${approval}/approve`, { comment: "ok" })).status).toBe(200);
				await ranWith("approved");
				// The form sends the task back as shown, masks and all (renamed): the definition approved is unchanged, the runs go on.
				const shown = { ...masked, run: "approved" };
				expect(
					(await as("op", "PUT", "tasks", { _id: id, name: "approved secret, renamed", kwarg: shown })).status,
				).toBe(200);
				const from = jobsWith("approved").length;
				await eventually(
					async () => (jobsWith("approved").length >= from + 2 ? true : undefined),
					15_000,
					"two more runs after the mask came back",
				);
				expect((await read("admin", `approvals/${approval}`)).body.status).toBe("approved");
				expect(JSON.stringify(jobsWith("approved").at(-1)!.arg)).toContain(TASK_PW);
				// A non-secret value changes, the masks still sent back: a new request, the old approval superseded.
				expect((await as("op", "PUT", "tasks", { _id: id, kwarg: { ...shown, mods: "db2" } })).status).toBe(200);
				const again = await eventually(
					async () => {
						const t = (await read("admin", `tasks/${id}`)).body;
						return t.last_run?.status === "awaiting_approval" && t.last_run.approval !== approval ? t : undefined;
					},
					15_000,
					"the changed task held again",
				);
				expect(again.last_run.approval).toMatch(/^[0-9a-f]{24}$/);
				expect((await read("admin", `approvals/${approval}`)).body.status).toBe("superseded");
			} finally {
				await as("op", "PATCH", `tasks/${id}/paused`);
				await as("admin", "DELETE", `approval_policies/${policy.body._id}`);
			}
		});
	});

	describe("a rollout", () => {
		/** A `password=…` arg string and a password kwarg: the same keyword to the minion. */
		const body = {
			name: "secret rollout",
			target: "",
			fun: "test.arg",
			arg: ["whoami", `password=${ROLLOUT_ARG_PW}`, "rollout-marker"],
			kwarg: { password: ROLLOUT_KW_PW, user: "svc" },
			canary: 0,
			batch: 1,
		};
		let rollout = "";
		beforeAll(async () => {
			const res = await as("admin", "POST", "rollouts", { ...body, target: `L@${A}` });
			expect(res.status).toBe(201);
			rollout = res.body._id;
		});

		it("is shown to admins and operators with its secrets masked, arg strings and kwargs alike, and runs whole", async () => {
			// Masked for showing only: the driver gives Salt the exact call.
			const ran = await eventually(async () => jobsWith("rollout-marker")[0], 15_000, "the rollout's batch");
			expect(JSON.stringify(ran.arg)).toContain(ROLLOUT_ARG_PW);
			expect(JSON.stringify(ran.arg)).toContain(ROLLOUT_KW_PW);
			for (const who of ["admin", "op"]) {
				const item = await read(who, `rollouts/${rollout}`);
				noSecretIn(item);
				expect(item.body).toMatchObject({
					arg: ["whoami", `password=${M}`, "rollout-marker"],
					kwarg: { password: M, user: "svc" },
				});
				const list = await read(who, "rollouts", { where: { name: "secret rollout" } });
				noSecretIn(list);
				expect(list.body._items[0]).toMatchObject({ arg: item.body.arg, kwarg: item.body.kwarg });
			}
			expect(
				expectEveError(await read("op", "rollouts", { where: { arg: `password=${ROLLOUT_ARG_PW}` } }), 400)._error
					.message,
			).toMatch(/'arg' holds a secret/);
		});

		it("withholds its arguments from viewers, as the job history does", async () => {
			const item = await read("viewer", `rollouts/${rollout}`);
			noSecretIn(item);
			expect(item.body).toMatchObject({
				fun: "test.arg",
				arg: [M, `password=${M}`, M],
				kwarg: { password: M, user: M },
			});
			const list = await read("viewer", "rollouts", { where: { name: "secret rollout" } });
			expect(list.body._items[0]).toMatchObject({ arg: item.body.arg, kwarg: item.body.kwarg });
			expect(list.text).not.toContain("whoami");
			expectEveError(await read("viewer", "rollouts", { where: { "kwarg.user": "svc" } }), 403);
		});

		it("refuses a new rollout that carries a mask (nothing is stored for it to keep)", async () => {
			const shown = (await read("admin", `rollouts/${rollout}`)).body;
			const res = expectEveError(
				await as("admin", "POST", "rollouts", { ...body, target: `L@${A}`, arg: shown.arg }),
				422,
			);
			expect(res._issues.arg).toMatch(/arg.1: the mask/);
			expectEveError(await as("admin", "POST", "rollouts", { ...body, target: `L@${A}`, kwarg: shown.kwarg }), 422);
		});
	});
});
