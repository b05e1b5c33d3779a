/**
 * Work and its approvals stay bounded (issue 43): a token scoped to one group acts only on tasks, rollouts,
 * conformity checks and rules, and approval requests wholly inside its scope (403 otherwise, reads unchanged); a
 * change to what a task runs, when, or as whom supersedes its approval; a threshold policy counts one principal's
 * asks of one definition over its window, so a call split host by host is held like the whole. Through the HTTP
 * API, against the salt-api simulator, whose job log says what really ran.
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { describeWithMongo, startEmbedded, uniqueMongoUri, type Harness } from "./support/harness";
import { request, expectEveError, eventually } from "./support/http";
import { callers } from "./support/callers";
import { formatHttpDate } from "../lib/eve/dates";

/** The suite on one store: NeDB files (mongoUri undefined), or the MongoDB wire protocol (the CI's emulator leg). */
function workScopeSuite(mongoUri: string | undefined): void {
	let sim: SaltApiSimulator;
	let h: Harness;
	let IN: string, IN2: string, OUT: string, OUT2: string;
	let group = "";
	const { tokens, url, as, newToken } = callers(() => h.api);
	const created = async (who: string, path: string, body: unknown): Promise<string> => {
		const res = await as(who, "POST", path, body);
		if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
		return res.body._id;
	};
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	const ENV = () => ({
		...sim.cmApiEnv,
		CM_SYNC_INTERVAL_MS: "3600000",
		CM_JOB_POLL_MS: "100",
		CM_JOB_TIMEOUT_MS: "3000",
		TASK_MISFIRE_GRACE_MS: "60000",
		ROLLOUT_TICK_MS: "100",
	});
	const refused = (res: Awaited<ReturnType<typeof request>>) => expectEveError(res, 403)._error.message as string;

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 6,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
		});
		await sim.start();
		h = await startEmbedded({ mongoUri, env: ENV() });
		await eventually(
			async () =>
				(await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		// Sorted: a rollout's first batch is its first host, IN.
		[IN, IN2, OUT, OUT2] = sim.upMinions().sort();
		group = await created("admin", "groups", { name: "scoped-hosts", hosts: [IN, IN2] });
		await newToken("scoped", "operator", { groups: [group] });
		await newToken("op", "operator");
		await newToken("op2", "operator");
		await newToken("approver", "admin");
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("a scoped token acts only on work wholly inside its scope", () => {
		it("may not pause, resume, rename, retarget or delete an admin's task on other hosts; may on its own hosts", async () => {
			const outside = await created("admin", "tasks", {
				name: "admin-outside",
				fun: "test.ping",
				tgt: [OUT],
				start: inSeconds(3600),
				interval: 600,
			});
			// Half inside is not inside.
			const straddling = await created("admin", "tasks", {
				name: "admin-straddling",
				fun: "test.ping",
				tgt: [IN, OUT],
				start: inSeconds(3600),
				interval: 600,
			});
			for (const id of [outside, straddling]) {
				expect(refused(await as("scoped", "PATCH", `tasks/${id}/paused`))).toMatch(
					/may not change this task: it is not wholly inside the token's scope \(.*targets outside the token's scope: .*\)/,
				);
				expect(refused(await as("scoped", "PUT", "tasks", { _id: id, name: "renamed" }))).toMatch(
					/may not change this task/,
				);
				// Retargeting it into the scope would take the admin's work over: refused too.
				refused(await as("scoped", "PUT", "tasks", { _id: id, tgt: [IN] }));
				expect(refused(await as("scoped", "DELETE", `tasks/${id}`))).toMatch(/may not delete this task/);
				const t = (await as("scoped", "GET", `tasks/${id}`)).body;
				expect([t.name, t.status, t.tgt.includes(OUT)]).toEqual([
					id === outside ? "admin-outside" : "admin-straddling",
					"scheduled",
					true,
				]);
			}
			// A compound target over other hosts is judged on the hosts it selects now.
			const compound = await created("admin", "tasks", {
				name: "admin-compound",
				fun: "test.ping",
				target: `L@${OUT},${OUT2}`,
				start: inSeconds(3600),
				interval: 600,
			});
			refused(await as("scoped", "PATCH", `tasks/${compound}/paused`));
			// The same token on an admin's task inside its group: every move works.
			const inside = await created("admin", "tasks", {
				name: "admin-inside",
				fun: "test.ping",
				tgt: [group],
				start: inSeconds(3600),
				interval: 600,
			});
			expect((await as("scoped", "PATCH", `tasks/${inside}/paused`)).status).toBe(200);
			expect((await as("scoped", "PATCH", `tasks/${inside}/scheduled`)).status).toBe(200);
			expect((await as("scoped", "PUT", "tasks", { _id: inside, name: "renamed" })).status).toBe(200);
			expect((await as("scoped", "DELETE", `tasks/${inside}`)).status).toBe(204);
			// An unscoped operator keeps today's rights.
			expect((await as("op", "PATCH", `tasks/${outside}/paused`)).status).toBe(200);
			expect((await as("op", "DELETE", `tasks/${outside}`)).status).toBe(204);
			for (const id of [straddling, compound]) expect((await as("admin", "DELETE", `tasks/${id}`)).status).toBe(204);
		});

		it("may not pause, resume or abort an admin's rollout on other hosts; may on one inside its group", async () => {
			const body = { fun: "test.ping", canary: 0, batch: 1, wait_s: 3600 };
			const outside = await created("admin", "rollouts", { name: "admin-rollout", target: `L@${IN},${OUT}`, ...body });
			expect(refused(await as("scoped", "PATCH", `rollouts/${outside}/pause`))).toMatch(
				/may not pause this rollout: it is not wholly inside the token's scope \(.*targets outside the token's scope: .*\)/,
			);
			expect(refused(await as("scoped", "PATCH", `rollouts/${outside}/abort`))).toMatch(/may not abort this rollout/);
			expect((await as("scoped", "GET", `rollouts/${outside}`)).body.status).toBe("running");
			const inside = await created("admin", "rollouts", {
				name: "admin-rollout-inside",
				target: `F@${group}`,
				...body,
			});
			expect((await as("scoped", "PATCH", `rollouts/${inside}/pause`)).status).toBe(200);
			expect((await as("scoped", "PATCH", `rollouts/${inside}/abort`)).status).toBe(200);
			expect((await as("op", "PATCH", `rollouts/${outside}/abort`)).status).toBe(200);
			expect((await as("op", "GET", `rollouts/${outside}`)).body.status).toBe("aborted");
		});

		it("may not change or delete a conformity check over other hosts, and writes no fleet-wide suppression rule", async () => {
			const check = await created("admin", "conformity_checks", {
				name: "admin-check",
				target: `L@${OUT}`,
				interval: 86_400,
			});
			expect(refused(await as("scoped", "PATCH", `conformity_checks/${check}`, { status: "paused" }))).toMatch(
				/may not change this check/,
			);
			expect(refused(await as("scoped", "DELETE", `conformity_checks/${check}`))).toMatch(/may not delete this check/);
			const mine = await created("scoped", "conformity_checks", {
				name: "scoped-check",
				target: `F@${group}`,
				interval: 86_400,
			});
			expect((await as("scoped", "PATCH", `conformity_checks/${mine}`, { status: "paused" })).status).toBe(200);
			expect((await as("scoped", "DELETE", `conformity_checks/${mine}`)).status).toBe(204);

			expect(refused(await as("scoped", "POST", "conformity_rules", { sls: "common", reason: "noisy" }))).toMatch(
				/may not create a suppression rule: it applies to the whole fleet/,
			);
			expect((await as("scoped", "GET", "conformity_rules")).body._items).toEqual([]);
			const rule = await created("op", "conformity_rules", {
				sls: "common",
				state_id: "base_packages",
				reason: "noisy",
			});
			refused(await as("scoped", "PATCH", `conformity_rules/${rule}`, { reason: "mine now" }));
			refused(await as("scoped", "DELETE", `conformity_rules/${rule}`));
			expect((await as("scoped", "GET", `conformity_rules/${rule}`)).body.reason).toBe("noisy");
			expect((await as("op", "DELETE", `conformity_rules/${rule}`)).status).toBe(204);
			expect((await as("admin", "DELETE", `conformity_checks/${check}`)).status).toBe(204);
		});

		it("may not change a check whose target no longer evaluates: nothing shows it inside the scope (403, not 400)", async () => {
			const gone = await created("admin", "groups", { name: "soon-gone", hosts: [IN] });
			const check = await created("admin", "conformity_checks", {
				name: "admin-stale-check",
				target: `F@${gone}`,
				interval: 86_400,
			});
			expect((await as("admin", "DELETE", `groups/${gone}`)).status).toBe(204);
			expect(refused(await as("scoped", "PATCH", `conformity_checks/${check}`, { status: "paused" }))).toMatch(
				/may not change this check: its target cannot be evaluated now/,
			);
			expect(refused(await as("scoped", "DELETE", `conformity_checks/${check}`))).toMatch(
				/may not delete this check: its target cannot be evaluated now/,
			);
			expect((await as("admin", "DELETE", `conformity_checks/${check}`)).status).toBe(204);
		});

		it("may not reject a request for other hosts", async () => {
			const policy = await created("admin", "approval_policies", {
				name: "pkg by an operator",
				functions: ["pkg.refresh_db"],
				approvers: { count: 1, roles: ["operator"] },
			});
			const held = await as("op", "POST", "run", { target: `L@${OUT}`, fun: "pkg.refresh_db" });
			expect(held.status).toBe(202);
			const id = held.body.approval._id;
			expect(refused(await as("scoped", "POST", `approvals/${id}/reject`, { comment: "no" }))).toMatch(
				/may not reject this request: it is not wholly inside the token's scope/,
			);
			expect((await as("op2", "GET", `approvals/${id}`)).body).toMatchObject({ status: "pending", votes: [] });
			expect((await as("op2", "POST", `approvals/${id}/reject`, { comment: "no" })).body.status).toBe("rejected");
			expect((await as("admin", "DELETE", `approval_policies/${policy}`)).status).toBe(204);
		});

		it("may not approve a rollout's request for hosts beyond its scope, though the batch held is inside it", async () => {
			const policy = await created("admin", "approval_policies", {
				name: "rollouts by an operator",
				functions: ["test.version"],
				origins: ["rollout"],
				approvers: { count: 1, roles: ["operator"] },
			});
			const rollout = await created("op", "rollouts", {
				name: "straddling",
				target: `L@${IN},${OUT}`,
				fun: "test.version",
				canary: 0,
				batch: 1,
			});
			const waiting = await eventually(
				async () => {
					const r = (await request("GET", url(`rollouts/${rollout}`))).body;
					return r.waiting?.for === "approval" ? r : undefined;
				},
				15_000,
				"the rollout held for approval",
			);
			const a = (await request("GET", url(`approvals/${waiting.waiting.approval}`))).body;
			// The batch held is one host inside the scope; approving approves the rollout, which reaches beyond it.
			expect(a).toMatchObject({ definition: { kind: "rollout", id: rollout }, hosts: [IN] });
			expect(refused(await as("scoped", "POST", `approvals/${a._id}/approve`, {}))).toMatch(
				/may not approve this request: it is not wholly inside the token's scope \(.*targets outside the token's scope: /,
			);
			expect((await request("GET", url(`approvals/${a._id}`))).body).toMatchObject({ status: "pending", votes: [] });
			expect((await as("op2", "POST", `approvals/${a._id}/approve`, {})).body.status).toBe("approved");
			expect((await as("op", "PATCH", `rollouts/${rollout}/abort`)).status).toBe(200);
			expect((await as("admin", "DELETE", `approval_policies/${policy}`)).status).toBe(204);
		});
	});

	describe("approvals cover exactly what they approved", () => {
		it("supersedes a task's approval when another operator becomes its owner, and again when its interval changes", async () => {
			const policy = await created("admin", "approval_policies", {
				name: "tasks' cmd.run",
				functions: ["cmd.run"],
				origins: ["task"],
				approvers: { count: 1, roles: ["admin"] },
			});
			const task = await created("op", "tasks", {
				name: "approved-task",
				fun: "cmd.run",
				kwarg: { cmd: "uptime" },
				tgt: [IN],
				start: inSeconds(0),
				interval: 2,
			});
			const heldBy = async (not: string[]) =>
				eventually(
					async () => {
						const t = (await request("GET", url(`tasks/${task}`))).body;
						return t.last_run?.status === "awaiting_approval" && !not.includes(t.last_run.approval)
							? (t.last_run.approval as string)
							: undefined;
					},
					15_000,
					"the task's run held",
				);
			const ranSince = (from: number) =>
				sim
					.jobs()
					.slice(from)
					.filter(j => j.fun === "cmd.run" && j.minions.includes(IN)).length;

			const first = await heldBy([]);
			expect((await as("approver", "POST", `approvals/${first}/approve`, {})).body.status).toBe("approved");
			let from = sim.jobs().length;
			await eventually(async () => (ranSince(from) >= 1 ? true : undefined), 15_000, "a run of the approved task");

			// op2 writes what it runs unchanged: op2 owns it now, and runs as op2 were never approved.
			expect((await as("op2", "PUT", "tasks", { _id: task, kwarg: { cmd: "uptime" } })).status).toBe(200);
			expect((await request("GET", url(`tasks/${task}`))).body.owner).toBe(tokens.op2.id);
			const second = await heldBy([first]);
			expect((await request("GET", url(`approvals/${first}`))).body.status).toBe("superseded");
			expect((await request("GET", url(`approvals/${second}`))).body).toMatchObject({
				status: "pending",
				definition: { kind: "task", id: task, schedule: { interval: 2 } },
			});
			from = sim.jobs().length;
			expect((await as("approver", "POST", `approvals/${second}/approve`, {})).body.status).toBe("approved");
			await eventually(async () => (ranSince(from) >= 1 ? true : undefined), 15_000, "a run of the approved task");

			// Its interval changes (the owner stays op2): a new request, nothing runs meanwhile.
			expect((await as("op2", "PUT", "tasks", { _id: task, interval: 3 })).status).toBe(200);
			const third = await heldBy([first, second]);
			expect((await request("GET", url(`approvals/${second}`))).body.status).toBe("superseded");
			expect((await request("GET", url(`approvals/${third}`))).body.definition.schedule.interval).toBe(3);
			from = sim.jobs().length;
			await new Promise(r => setTimeout(r, 3500));
			expect(ranSince(from)).toBe(0);
			expect((await as("op2", "PATCH", `tasks/${task}/paused`)).status).toBe(200);
			expect((await as("admin", "DELETE", `approval_policies/${policy}`)).status).toBe(204);
		});

		it("holds a call sent host by host like the whole, per principal and definition, within the policy's window", async () => {
			const policy = await created("admin", "approval_policies", {
				name: "cmd.run on more than one host",
				functions: ["cmd.run"],
				more_than_hosts: 1,
				approvers: { count: 1, roles: ["admin"] },
			});
			const from = sim.jobs().length;
			const run = (who: string, host: string, body: Record<string, unknown>) =>
				as(who, "POST", `hosts/${host}`, { cm_client: "local", fun: "cmd.run", ...body });
			expect((await run("op", IN, { arg: ["hostname"] })).status).toBe(200);
			// The same call on a second host is the second host of one definition: held.
			const split = await run("op", IN2, { arg: ["hostname"] });
			expect(split.status).toBe(202);
			expect(split.body.approval).toMatchObject({
				hosts: [IN2],
				policies: [expect.objectContaining({ name: "cmd.run on more than one host" })],
			});
			// Its keyword spelled as a `key=value` word or a keyword is the same definition.
			expect((await run("op", IN, { kwarg: { cmd: "whoami" } })).status).toBe(200);
			expect((await run("op", OUT, { arg: ["cmd=whoami"] })).status).toBe(202);
			// Another definition, and another principal, count apart.
			expect((await run("op", OUT, { arg: ["uptime"] })).status).toBe(200);
			expect((await run("op2", IN2, { arg: ["hostname"] })).status).toBe(200);
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => [j.fun, j.minions]),
			).toEqual([
				["cmd.run", [IN]],
				["cmd.run", [IN]],
				["cmd.run", [OUT]],
				["cmd.run", [IN2]],
			]);
			// The asks are in the store, not in a process: after a restart the next host is still the second.
			expect((await run("op", IN, { arg: ["hostid"] })).status).toBe(200);
			await h.restart();
			expect((await run("op", IN2, { arg: ["hostid"] })).status).toBe(202);
			expect((await as("admin", "DELETE", `approval_policies/${policy}`)).status).toBe(204);

			// A window of 1 s: an ask older than that no longer counts.
			const short = await created("admin", "approval_policies", {
				name: "short window",
				functions: ["cmd.run"],
				more_than_hosts: 1,
				window: 1,
				approvers: { count: 1, roles: ["admin"] },
			});
			expect((await run("op", IN, { arg: ["date"] })).status).toBe(200);
			await new Promise(r => setTimeout(r, 1200));
			expect((await run("op", IN2, { arg: ["date"] })).status).toBe(200);
			expect((await run("op", OUT, { arg: ["date"] })).status).toBe(202);
			expectEveError(
				await as("admin", "POST", "approval_policies", {
					name: "bad",
					functions: ["cmd.run"],
					more_than_hosts: 1,
					window: -1,
					approvers: { count: 1, roles: ["admin"] },
				}),
				422,
			);
			expect((await as("admin", "DELETE", `approval_policies/${short}`)).status).toBe(204);
		});

		// Two replicas need a shared store: the MongoDB leg's second process stands in as another broker on the same database.
		(mongoUri ? it : it.skip)("counts the asks one principal sends to two replicas as one", async () => {
			const policy = await created("admin", "approval_policies", {
				name: "cmd.run on more than one host",
				functions: ["cmd.run"],
				more_than_hosts: 1,
				approvers: { count: 1, roles: ["admin"] },
			});
			const other = await startEmbedded({ mongoUri, env: ENV() });
			try {
				const body = { cm_client: "local", fun: "cmd.run", arg: ["replicas"] };
				expect((await as("op", "POST", `hosts/${IN}`, body)).status).toBe(200);
				const there = await request("POST", `${other.api}/hosts/${IN2}`, { token: tokens.op.secret, body });
				expect([there.status, there.body.approval?.hosts]).toEqual([202, [IN2]]);
			} finally {
				await other.stop();
			}
			expect((await as("admin", "DELETE", `approval_policies/${policy}`)).status).toBe(204);
		});
	});
}

describe("work scope: scoped tokens act on work inside their scope; approvals cover what they approved (NeDB)", () =>
	workScopeSuite(undefined));
describeWithMongo(
	"work scope: scoped tokens act on work inside their scope; approvals cover what they approved (MongoDB wire protocol)",
	uri => workScopeSuite(uri ? uniqueMongoUri(uri) : undefined),
);
