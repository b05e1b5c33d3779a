/**
 * services/cm-gateway/governance.ts, the run door's governance step: what it asks the maintenance windows and the
 * approval gate about a run (the exact call, as whom, from where, with which grant), and what it makes of their
 * answers — run now, a 409 naming the refused hosts and the next window, a 403 for a non-admin's break-glass, a hold
 * (with a dry run for a state run) — against a context that answers as those services would.
 * (test/governance.spec.ts proves the same through the API, against the salt-api simulator.)
 */
import type { Context } from "moleculer";
import {
	Governance,
	policyOrigin,
	taskDefinitionDigest,
	withoutTest,
	type TaskSchedule,
} from "../../services/cm-gateway/governance";
import type { GatewayContext } from "../../services/cm-gateway/context";
import type { Requester, RunRequest, TokenHolder } from "../../services/cm-gateway/run-door";

type Call = [string, Record<string, unknown>];
type Answers = Record<string, (params: Record<string, unknown>) => unknown>;

const OPERATOR: TokenHolder = {
	id: "0000000000000000000000a1",
	name: "ops",
	role: "operator",
	principal: "token:0000000000000000000000a1",
};
const ADMIN: TokenHolder = { id: "0000000000000000000000a2", name: "root", role: "admin", principal: "oidc:root" };
const BY: Requester = { token: OPERATOR.id, source: "10.0.0.1", method: "POST", path: "/api/run" };
const RUN: RunRequest = {
	by: BY,
	targets: ["web-01", "web-02"],
	body: { cm_client: "local_async", fun: "cmd.run", arg: ["uptime"] },
	target: "L@web-01,web-02",
};
const OPEN = { refused: [], next: null };
const PASS = { pass: true };
const HELD = { held: { _id: "0000000000000000000000c3", status: "pending" }, created: true };
const NEXT = {
	window: "0000000000000000000000e5",
	name: "nights",
	start: "2030-01-01T00:00:00.000Z",
	end: "2030-01-01T06:00:00.000Z",
};

/** The step with a context that answers `answers` by action (and records every call), and a dry-run starter that answers `dryRun`. */
function governance(
	answers: Answers,
	dryRun: (req: RunRequest, approval: string) => Promise<string | null> = async () => "20261129120000000001",
) {
	const calls: Call[] = [];
	const logged: string[] = [];
	const dryRuns: Array<[RunRequest, string]> = [];
	const ctx = {
		call: async (action: string, params: Record<string, unknown>) => {
			calls.push([action, params]);
			const answer = answers[action];
			if (!answer) throw new Error(`unexpected call of ${action}`);
			return answer(params);
		},
	} as unknown as Context;
	const log =
		(level: string) =>
		(...parts: unknown[]) =>
			logged.push(`${level}: ${parts.join(" ")}`);
	const gw = { logger: { warn: log("warn"), error: log("error"), info: log("info") } } as unknown as GatewayContext;
	const step = new Governance(gw, async (_ctx, req, approval) => {
		dryRuns.push([req, approval]);
		return dryRun(req, approval);
	});
	return {
		step,
		ctx,
		calls,
		logged,
		dryRuns,
		govern: (req: RunRequest = RUN, holder: TokenHolder = OPERATOR) => step.govern(ctx, req, holder),
	};
}

const rejection = (p: Promise<unknown>) =>
	p.then(
		() => null,
		(err: { code?: number; message: string; data?: unknown }) => err,
	);
const hosts = (n: number) => Array.from({ length: n }, (_, i) => `h${String(i + 1).padStart(4, "0")}`);

describe("the run door's governance step: maintenance windows", () => {
	it("asks the windows about the exact call on the resolved hosts, then the gate; a run both let through runs now", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => PASS });
		const kwarg = { env: { A: "1" } };
		expect(await g.govern({ ...RUN, body: { ...RUN.body, kwarg } })).toBeNull();
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check", "approvals.gate"]);
		expect(g.calls[0][1]).toEqual({ fun: "cmd.run", arg: ["uptime"], kwarg, targets: ["web-01", "web-02"] });
		expect(g.dryRuns).toEqual([]);
	});

	it("refuses a run outside its hosts' windows (409), naming them and when the first window opens, and asks no approval", async () => {
		const g = governance({ "maintenance-windows.check": () => ({ refused: ["web-01", "web-02"], next: NEXT }) });
		const err = await rejection(g.govern());
		expect(err?.code).toBe(409);
		expect(err?.message).toBe(
			"cmd.run is outside the maintenance windows of web-01, web-02: the next window, 'nights', opens 2030-01-01T00:00:00.000Z (until 2030-01-01T06:00:00.000Z); an admin may run it now with a stated reason (break_glass)",
		);
		expect(err?.data).toEqual({ window: NEXT, refused: ["web-01", "web-02"] });
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check"]);
	});

	it("names at most 20 refused hosts and counts the rest; the refusal's data lists at most 1000", async () => {
		const twenty = await rejection(
			governance({ "maintenance-windows.check": () => ({ refused: hosts(20), next: null }) }).govern(),
		);
		expect(twenty?.message).toBe(
			`cmd.run is outside the maintenance windows of ${hosts(20).join(", ")}: none of their windows opens again within 400 days; an admin may run it now with a stated reason (break_glass)`,
		);
		const many = await rejection(
			governance({ "maintenance-windows.check": () => ({ refused: hosts(1001), next: NEXT }) }).govern(),
		);
		expect(many?.message).toContain(`of ${hosts(20).join(", ")}, … (1001 in all): the next window, 'nights'`);
		expect(many?.data).toEqual({ window: NEXT, refused: hosts(1000) });
	});

	it("refuses a break-glass to anyone but an admin (403, naming them), before asking anything", async () => {
		const g = governance({});
		const err = await rejection(g.govern({ ...RUN, by: { ...BY, breakGlass: "INC-1" } }));
		expect([err?.code, err?.message]).toEqual([
			403,
			"the run is refused: only an admin may run outside the maintenance windows (break_glass); ops is operator",
		]);
		expect(g.calls).toEqual([]);
	});

	it("lets an admin's break-glass run outside the windows: warned, alerted with the reason, and still put to the gate", async () => {
		const g = governance({
			"maintenance-windows.check": () => ({ refused: hosts(150), next: NEXT }),
			"alerts.raise": () => undefined,
			"approvals.gate": () => PASS,
		});
		const by = {
			...BY,
			token: ADMIN.id,
			breakGlass: "INC-4711: the disk is full",
			approval: "0000000000000000000000c3",
		};
		expect(await g.govern({ ...RUN, by }, ADMIN)).toBeNull();
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check", "alerts.raise", "approvals.gate"]);
		expect(g.calls[1][1]).toEqual({
			type: "maintenance.break_glass",
			level: "warning",
			payload: {
				by: "root",
				token: ADMIN.id,
				fun: "cmd.run",
				hosts: hosts(100),
				outside: 150,
				reason: "INC-4711: the disk is full",
				approval: "0000000000000000000000c3",
			},
		});
		expect(g.calls[2][1]).toMatchObject({
			break_glass: "INC-4711: the disk is full",
			grant: "0000000000000000000000c3",
		});
		expect(g.logged).toEqual([
			"warn: Break-glass: root runs cmd.run on 150 host(s) outside their maintenance windows: INC-4711: the disk is full",
		]);
	});

	it("names no approval in the alert of a break-glass that carries none, and runs even when the alert cannot be raised", async () => {
		const g = governance({
			"maintenance-windows.check": () => ({ refused: ["web-01"], next: null }),
			"alerts.raise": () => Promise.reject(new Error("alerts is not available")),
			"approvals.gate": () => PASS,
		});
		expect(await g.govern({ ...RUN, by: { ...BY, breakGlass: "INC-2" } }, ADMIN)).toBeNull();
		expect((g.calls[1][1].payload as Record<string, unknown>).approval).toBeNull();
		expect(g.logged).toContain("error: Could not raise the break-glass alert: alerts is not available");
	});

	it("needs no break-glass for a run every window lets through, even from an admin who gives one", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => PASS });
		expect(await g.govern({ ...RUN, by: { ...BY, breakGlass: "just in case" } }, ADMIN)).toBeNull();
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check", "approvals.gate"]);
		expect(g.logged).toEqual([]);
	});

	it("fails the run when the windows cannot answer: nothing governed runs ungoverned", async () => {
		const g = governance({
			"maintenance-windows.check": () =>
				Promise.reject(Object.assign(new Error("maintenance-windows is not available"), { code: 503 })),
		});
		expect((await rejection(g.govern()))?.code).toBe(503);
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check"]);
	});
});

describe("the run door's governance step: the approval gate", () => {
	it("asks the gate about the exact call, as the token's principal, from where the run came", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => PASS });
		await g.govern();
		expect(g.calls[1][1]).toEqual({
			requester: { token: OPERATOR.id, name: "ops", role: "operator", identity: OPERATOR.principal },
			origin: "api",
			call: { cm_client: "local_async", fun: "cmd.run", arg: ["uptime"] },
			hosts: ["web-01", "web-02"],
			target: "L@web-01,web-02",
		});
	});

	it("gives the gate the kwarg, the definition, the grant and the break-glass a run carries, and nothing it does not", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => PASS });
		const definition = { kind: "task" as const, id: "0000000000000000000000f6", digest: "abc" };
		const req: RunRequest = {
			by: { ...BY, method: "TASK", definition, approval: "0000000000000000000000c3", breakGlass: "INC-3" },
			targets: ["web-01"],
			body: { cm_client: "local", fun: "test.ping", kwarg: { x: 1 } },
		};
		await g.govern(req, ADMIN);
		expect(g.calls[1][1]).toEqual({
			requester: { token: ADMIN.id, name: "root", role: "admin", identity: "oidc:root" },
			origin: "task",
			call: { cm_client: "local", fun: "test.ping", kwarg: { x: 1 } },
			hosts: ["web-01"],
			definition,
			grant: "0000000000000000000000c3",
			break_glass: "INC-3",
		});
	});

	it("gives the gate an empty break-glass reason as it is (an admin's run outside no window)", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => PASS });
		await g.govern({ ...RUN, by: { ...BY, breakGlass: "" } }, ADMIN);
		expect(g.calls[1][1].break_glass).toBe("");
	});

	it("holds a run the gate holds, answering the request, and starts no dry run for a function that is no state run", async () => {
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => HELD });
		expect(await g.govern()).toEqual({ approval: HELD.held });
		expect(g.dryRuns).toEqual([]);
		expect(g.calls.map(c => c[0])).toEqual(["maintenance-windows.check", "approvals.gate"]);
	});

	it("starts a dry run of a state run it holds (as the request), and attaches its jid to the request", async () => {
		const g = governance({
			"maintenance-windows.check": () => OPEN,
			"approvals.gate": () => HELD,
			"approvals.attachDryRun": () => undefined,
		});
		const req = { ...RUN, body: { cm_client: "local_async" as const, fun: "state.apply", arg: ["web"] } };
		expect(await g.govern(req)).toEqual({ approval: HELD.held });
		expect(g.dryRuns).toEqual([[req, "0000000000000000000000c3"]]);
		expect(g.calls[2]).toEqual([
			"approvals.attachDryRun",
			{ id: "0000000000000000000000c3", jid: "20261129120000000001" },
		]);
	});

	it("starts no second dry run for a request the gate already held (a retry)", async () => {
		const g = governance({
			"maintenance-windows.check": () => OPEN,
			"approvals.gate": () => ({ ...HELD, created: false }),
		});
		expect(await g.govern({ ...RUN, body: { cm_client: "local_async", fun: "state.highstate" } })).toEqual({
			approval: HELD.held,
		});
		expect(g.dryRuns).toEqual([]);
	});

	it("says on the request when no minion answered its dry run, or why it could not start; the hold stands", async () => {
		const state = { ...RUN, body: { cm_client: "local_async" as const, fun: "state.sls", arg: ["web"] } };
		const none = governance(
			{
				"maintenance-windows.check": () => OPEN,
				"approvals.gate": () => HELD,
				"approvals.attachDryRun": () => undefined,
			},
			async () => null,
		);
		expect(await none.govern(state)).toEqual({ approval: HELD.held });
		expect(none.calls[2]).toEqual([
			"approvals.attachDryRun",
			{ id: "0000000000000000000000c3", error: "no minion answered the dry run" },
		]);

		const long = "x".repeat(3000);
		const failing = governance(
			{
				"maintenance-windows.check": () => OPEN,
				"approvals.gate": () => HELD,
				"approvals.attachDryRun": () => undefined,
			},
			async () => {
				throw new Error(long);
			},
		);
		expect(await failing.govern(state)).toEqual({ approval: HELD.held });
		expect(failing.calls[2]).toEqual([
			"approvals.attachDryRun",
			{ id: "0000000000000000000000c3", error: "x".repeat(2000) },
		]);
		expect(failing.logged).toEqual([
			`warn: The dry run of approval 0000000000000000000000c3 could not start: ${"x".repeat(2000)}`,
		]);

		const unrecorded = governance({
			"maintenance-windows.check": () => OPEN,
			"approvals.gate": () => HELD,
			"approvals.attachDryRun": () => Promise.reject(new Error("approvals is not available")),
		});
		expect(await unrecorded.govern(state)).toEqual({ approval: HELD.held });
	});

	it("fails the run when the gate cannot answer or refuses it, as the gate said", async () => {
		const refused = Object.assign(
			new Error("the run is refused: approval 0000000000000000000000c3 does not cover it"),
			{ code: 403 },
		);
		const g = governance({ "maintenance-windows.check": () => OPEN, "approvals.gate": () => Promise.reject(refused) });
		expect(
			await rejection(g.govern({ ...RUN, by: { ...BY, method: "APPROVAL", approval: "0000000000000000000000c3" } })),
		).toBe(refused);
	});
});

describe("where a run comes from, as approval policies name it", () => {
	it.each([
		["POST", "api"],
		["TASK", "task"],
		["ROLLOUT", "rollout"],
		// An approved request passes by its grant whatever its origin: it is interactive here.
		["APPROVAL", "api"],
	])("%s is %s", (method, origin) => {
		expect(policyOrigin({ ...BY, method })).toBe(origin);
	});

	it("is decided on the server's side, never by the client's User-Agent", () => {
		expect(policyOrigin({ ...BY, agent: "fleet-ctl-repl (laptop)" })).toBe("api");
		expect(policyOrigin({ ...BY, agent: "TASK" })).toBe("api");
	});
});

describe("what a task's or a rollout's approval covers", () => {
	it("takes a rollout's dry-run test out of its kwarg, and nothing else", () => {
		expect(withoutTest({ test: true, mods: "web", saltenv: "base" })).toEqual({ mods: "web", saltenv: "base" });
		expect(withoutTest({ mods: "web" })).toEqual({ mods: "web" });
		expect(withoutTest(undefined)).toEqual({});
	});

	const SCHEDULE: TaskSchedule = {
		start: "2026-11-29T12:00:00.000Z",
		end: null,
		interval: 3600,
		cron: null,
		timezone: null,
		misfire: null,
		overlap: null,
	};
	const TASK = {
		cm_client: "local_async",
		fun: "cmd.run",
		kwarg: { cmd: "uptime" },
		tgt: ["web-01"],
		target: "L@web-01",
		owner: "0000000000000000000000a1",
		schedule: SCHEDULE,
	};

	it("asks again when what a task runs, when, or as whom changes", () => {
		const digest = taskDefinitionDigest(TASK);
		for (const changed of [
			{ cm_client: "local" },
			{ fun: "cmd.script" },
			{ kwarg: { cmd: "reboot" } },
			{ kwarg: undefined },
			{ tgt: ["web-01", "web-02"] },
			{ target: "G@role:web" },
			{ target: undefined },
			{ owner: "0000000000000000000000a2" },
			{ owner: undefined },
			{ schedule: { ...SCHEDULE, interval: 60 } },
			{ schedule: { ...SCHEDULE, cron: "0 * * * *" } },
			{ schedule: undefined },
		]) {
			expect([changed, taskDefinitionDigest({ ...TASK, ...changed })]).not.toEqual([changed, digest]);
		}
		expect(taskDefinitionDigest({ ...TASK, kwarg: { cmd: "uptime" }, schedule: { ...SCHEDULE } })).toBe(digest);
	});

	it("reads what a definition leaves out as empty: no kwarg is {}, no target, owner or schedule is none", () => {
		const bare = { cm_client: "local_async", fun: "test.ping", tgt: ["web-01"] };
		expect(taskDefinitionDigest(bare)).toBe(
			taskDefinitionDigest({ ...bare, kwarg: {}, target: undefined, owner: null }),
		);
		expect(taskDefinitionDigest(bare)).not.toBe(taskDefinitionDigest({ ...bare, kwarg: { "": null } }));
		expect(taskDefinitionDigest(bare)).not.toBe(taskDefinitionDigest({ ...bare, target: "" }));
		expect(taskDefinitionDigest(bare)).not.toBe(taskDefinitionDigest({ ...bare, owner: "" }));
	});
});
