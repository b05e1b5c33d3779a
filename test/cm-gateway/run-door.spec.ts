/**
 * The audit-first run path (services/cm-gateway/run-door.ts) with its effects faked and journaled: what is called, in which
 * order, with what. Every expectation is a literal written from docs/security.md ("Every run is authorized
 * where it starts" and "Audit log"): a refused run is audited as denied and nothing runs; a run whose record
 * cannot be written does not happen (503, saying so); a run's record is begun (`started`, 202) before the
 * job is handed over and completed after it with the jid; a failed run's record says `failed` with the code. The
 * door tells the audit service facts (who, from where, on which hosts, the complete call): the service builds the
 * record (test/audit/record.spec.ts).
 */
import { EveError } from "../../lib/eve/errors";
import type { AuditResult } from "../../lib/contracts/audit";
import { Conflict, Forbidden, OutsideWindow, runRefused, type DomainError } from "../../lib/errors";
import {
	auditFacts,
	failedResult,
	startRun,
	type AuditFacts,
	type DoorEffects,
	type RunRequest,
	type TokenHolder,
} from "../../services/cm-gateway/run-door";

const AUDIT_ID = "0000000000000000000000a1";
const NEW_ID = "0000000000000000000000b2";
const JID = "20300101000000000001";

/** An operator's POST /api/hosts/web-01, as the gateway hands it over (its audit record id in meta). */
const REQUEST: RunRequest = {
	by: {
		token: "tok-1",
		name: "alice",
		role: "operator",
		auditId: AUDIT_ID,
		source: "10.0.0.7",
		method: "POST",
		path: "/api/hosts/web-01",
	},
	targets: ["web-01"],
	body: { cm_client: "local", fun: "test.arg", arg: ["a"], kwarg: { password: "s3cret", n: 1 } },
};
const HOLDER: TokenHolder = { id: "tok-1", name: "alice's token", role: "operator", principal: "token:tok-1" };

/** What the audit service is told of REQUEST before it runs, as docs/security.md lists the record's fields. */
const FACTS: AuditFacts = {
	who: { token: "tok-1", name: "alice's token", role: "operator" },
	request: { source: "10.0.0.7", method: "POST", path: "/api/hosts/web-01" },
	run: {
		targets: ["web-01"],
		fun: "test.arg",
		call: { cm_client: "local", arg: ["a"], kwarg: { password: "s3cret", n: 1 } },
	},
};

type Step =
	| ["authorize"]
	| ["begin", string, AuditFacts]
	| ["begin", string, AuditFacts, AuditResult]
	| ["complete", string, AuditResult]
	| ["execute"]
	| ["log", string, string];

interface Fakes {
	authorize?: () => Promise<TokenHolder>;
	begin?: () => Promise<unknown>;
	complete?: () => Promise<unknown>;
	execute?: () => Promise<{ task_id: string | null }>;
	withJid?: boolean;
}

/** The door's effects, each one journaled in `steps`. */
function effects(fakes: Fakes = {}): { fx: DoorEffects<{ task_id: string | null }>; steps: Step[] } {
	const steps: Step[] = [];
	const fx: DoorEffects<{ task_id: string | null }> = {
		authorize: async () => {
			steps.push(["authorize"]);
			return fakes.authorize ? fakes.authorize() : HOLDER;
		},
		beginAudit: async (id, facts, result) => {
			steps.push(result ? ["begin", id, facts, result] : ["begin", id, facts]);
			return fakes.begin ? fakes.begin() : { _id: id };
		},
		completeAudit: async (id, result) => {
			steps.push(["complete", id, result]);
			return fakes.complete ? fakes.complete() : { _id: id };
		},
		execute: async () => {
			steps.push(["execute"]);
			return fakes.execute ? fakes.execute() : { task_id: JID };
		},
		newId: () => NEW_ID,
		log: (what, why) => void steps.push(["log", what, why]),
	};
	if (fakes.withJid !== false) fx.jidOf = result => result.task_id;
	return { fx, steps };
}

/** A domain error as it arrives from another node: a plain Error with its name, type, code and data (not its class). */
const remote = (err: DomainError) =>
	Object.assign(new Error(err.message), { name: err.name, type: err.type, code: err.code, data: err.data });
const refusal = () => remote(runRefused("function 'test.arg' is outside the token's scope"));

describe("the run door: refused", () => {
	it("audits a refusal as denied (403, with why) under the request's record id, never executes, and throws the refusal as it is", async () => {
		const refused = refusal();
		const { fx, steps } = effects({ authorize: () => Promise.reject(refused) });
		await expect(startRun(REQUEST, fx)).rejects.toBe(refused);
		expect(steps).toStrictEqual([
			["authorize"],
			[
				"begin",
				"0000000000000000000000a1",
				// refused before the token was read: the name the request carried
				{ ...FACTS, who: { ...FACTS.who, name: "alice" } },
				{
					status: 403,
					outcome: "denied",
					message: "the run is refused: function 'test.arg' is outside the token's scope",
				},
			],
		]);
	});

	it("gives a refusal without a request record (a task's run) a record of its own, with no one's name when the token is unknown", async () => {
		const { fx, steps } = effects({ authorize: () => Promise.reject(refusal()) });
		const task: RunRequest = {
			by: { token: "", source: "scheduler@node-1", method: "TASK", path: "/api/tasks/t1" },
			targets: ["web-01", "web-02"],
			body: { cm_client: "local_async", fun: "test.ping" },
		};
		await expect(startRun(task, fx)).rejects.toMatchObject({ code: 403 });
		expect(steps).toStrictEqual([
			["authorize"],
			[
				"begin",
				"0000000000000000000000b2",
				{
					who: { token: null, name: null, role: null },
					request: { source: "scheduler@node-1", method: "TASK", path: "/api/tasks/t1" },
					run: { targets: ["web-01", "web-02"], fun: "test.ping", call: { cm_client: "local_async" } },
				},
				{
					status: 403,
					outcome: "denied",
					message: "the run is refused: function 'test.arg' is outside the token's scope",
				},
			],
		]);
	});

	it("still refuses (403, not 503) when the refusal cannot be audited, and says so in the log", async () => {
		const { fx, steps } = effects({
			authorize: () => Promise.reject(refusal()),
			begin: () => Promise.reject(new Error("audit down")),
		});
		await expect(startRun(REQUEST, fx)).rejects.toMatchObject({ code: 403 });
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin", "log"]);
		expect(steps[2]).toStrictEqual(["log", "Could not write the audit record of a refused run:", "audit down"]);
	});

	it("tells the audit service the refusal's whole message (the record bounds it), and logs whatever an audit write threw", async () => {
		const long = remote(runRefused(`targets outside the token's scope: ${"h".repeat(2000)}`));
		const { fx, steps } = effects({
			authorize: () => Promise.reject(long),
			begin: () => Promise.reject("socket hang up"),
		});
		await expect(startRun(REQUEST, fx)).rejects.toBe(long);
		expect(steps[1][3]).toStrictEqual({ status: 403, outcome: "denied", message: long.message });
		expect(steps[2]).toStrictEqual(["log", "Could not write the audit record of a refused run:", "socket hang up"]);
		const nothing = effects({ authorize: () => Promise.reject(refusal()), begin: () => Promise.reject(null) });
		await expect(startRun(REQUEST, nothing.fx)).rejects.toMatchObject({ code: 403 });
		expect(nothing.steps[2]).toStrictEqual(["log", "Could not write the audit record of a refused run:", "null"]);
	});

	it("writes nothing and runs nothing when the authorization fails for another reason than a refusal", async () => {
		const down = new EveError(503, "Service 'tokens' is not available");
		const { fx, steps } = effects({ authorize: () => Promise.reject(down) });
		await expect(startRun(REQUEST, fx)).rejects.toBe(down);
		expect(steps).toStrictEqual([["authorize"]]);
	});
});

describe("the run door: the audit record cannot be written", () => {
	const MESSAGE =
		"the audit log could not be written, so nothing was run (every run is recorded before it starts); try again once the audit service answers";

	it("answers 503 saying so and never executes when the audit write fails", async () => {
		const { fx, steps } = effects({ begin: () => Promise.reject(new Error("audit store unavailable")) });
		const err = await startRun(REQUEST, fx).catch((e: unknown) => e);
		expect(err).toMatchObject({ type: "NOTHING_RAN", code: 503, message: MESSAGE });
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin", "log"]);
		expect(steps[2]).toStrictEqual([
			"log",
			"Could not write the audit record of a run of test.arg (nothing was run):",
			"audit store unavailable",
		]);
	});

	it("answers 503 and never executes when the audit service stored nothing", async () => {
		for (const answer of [null, undefined, 0, ""]) {
			const { fx, steps } = effects({ begin: async () => answer });
			await expect(startRun(REQUEST, fx)).rejects.toMatchObject({ code: 503, message: MESSAGE });
			expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin"]);
		}
	});
});

describe("the run door: a run", () => {
	it("begins the record (the authorizing token; the service makes it started, 202) before executing, then completes it with the jid, and answers the job", async () => {
		const job = { task_id: JID };
		const { fx, steps } = effects({ execute: async () => job });
		await expect(startRun(REQUEST, fx)).resolves.toBe(job);
		expect(steps).toStrictEqual([
			["authorize"],
			["begin", "0000000000000000000000a1", FACTS],
			["execute"],
			["complete", "0000000000000000000000a1", { status: 200, outcome: "ok", jid: "20300101000000000001" }],
		]);
	});

	it("gives a run without a request record a new id, the same for its start and its outcome", async () => {
		const { fx, steps } = effects();
		await startRun({ ...REQUEST, by: { ...REQUEST.by, auditId: undefined } }, fx);
		expect(steps.filter(s => s[0] === "begin" || s[0] === "complete").map(s => s[1])).toStrictEqual([
			"0000000000000000000000b2",
			"0000000000000000000000b2",
		]);
	});

	it("records a run that found no minions with a null jid, and a run without a job (a live poll) with none", async () => {
		const none = effects({ execute: async () => ({ task_id: null }) });
		await startRun(REQUEST, none.fx);
		expect(none.steps[3]).toStrictEqual([
			"complete",
			"0000000000000000000000a1",
			{ status: 200, outcome: "ok", jid: null },
		]);
		const poll = effects({ withJid: false });
		await startRun(REQUEST, poll.fx);
		expect(poll.steps[3]).toStrictEqual(["complete", "0000000000000000000000a1", { status: 200, outcome: "ok" }]);
	});

	it("still answers the job when its outcome cannot be recorded (it was handed over), and logs it", async () => {
		const { fx, steps } = effects({ complete: () => Promise.reject(new Error("audit down")) });
		await expect(startRun(REQUEST, fx)).resolves.toStrictEqual({ task_id: "20300101000000000001" });
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin", "execute", "complete", "log"]);
		expect(steps[4]).toStrictEqual(["log", "Could not complete audit record 0000000000000000000000a1:", "audit down"]);
	});
});

describe("the run door: the execution fails", () => {
	it("completes the record as failed with the error's code and message, and throws the error", async () => {
		const unreachable = new EveError(502, "salt-api is unreachable: connect ECONNREFUSED 127.0.0.1:8000");
		const { fx, steps } = effects({ execute: () => Promise.reject(unreachable) });
		await expect(startRun(REQUEST, fx)).rejects.toBe(unreachable);
		expect(steps).toStrictEqual([
			["authorize"],
			["begin", "0000000000000000000000a1", FACTS],
			["execute"],
			[
				"complete",
				"0000000000000000000000a1",
				{ status: 502, outcome: "failed", message: "salt-api is unreachable: connect ECONNREFUSED 127.0.0.1:8000" },
			],
		]);
	});

	it("records an HTTP code as it is (400 to 599), anything else as 500, with the message (the record bounds it)", () => {
		const codes = [400, 422, 504, 599, 399, 600, 200, undefined, "502"].map(
			code => failedResult({ code, message: "m" }).status,
		);
		expect(codes).toStrictEqual([400, 422, 504, 599, 500, 500, 500, 500, 500]);
		expect(failedResult(new Error("boom"))).toStrictEqual({ status: 500, outcome: "failed", message: "boom" });
		expect(failedResult({ code: 504 })).toStrictEqual({ status: 504, outcome: "failed", message: "" });
		expect(failedResult(null)).toStrictEqual({ status: 500, outcome: "failed", message: "" });
	});
});

describe("the run door: the facts of the record", () => {
	it("names the authorizing token over what the request said, and the complete call as {cm_client, arg, kwarg}", () => {
		expect(auditFacts(REQUEST, HOLDER)).toStrictEqual(FACTS);
		expect(
			auditFacts(
				{ ...REQUEST, by: { ...REQUEST.by, agent: "curl/8" }, body: { cm_client: "local_async", fun: "test.ping" } },
				null,
			),
		).toStrictEqual({
			who: { token: "tok-1", name: "alice", role: "operator" },
			request: { source: "10.0.0.7", agent: "curl/8", method: "POST", path: "/api/hosts/web-01" },
			run: { targets: ["web-01"], fun: "test.ping", call: { cm_client: "local_async" } },
		});
	});
});

describe("the run door: governed (maintenance windows, approvals)", () => {
	it.each([
		[
			409,
			new OutsideWindow(
				"test.arg is outside the maintenance windows of web-01: the next window, 'nights', opens 2030-01-01T00:00:00.000Z",
				{ window: { name: "nights" }, refused: ["web-01"] },
			),
		],
		[403, runRefused("only an admin may run outside the maintenance windows (break_glass); ops is operator")],
		[
			403,
			runRefused(
				"approval 0000000000000000000000c3 does not cover it (it is not being carried out, or its call, hosts or requester differ)",
			),
		],
	])(
		"audits the governance's refusal as denied (%i, with why) as the authorizing token, never executes, and throws it as it is",
		async (code, error) => {
			const refused = remote(error);
			const message = error.message;
			const { fx, steps } = effects();
			fx.govern = async () => {
				steps.push(["log", "govern", ""]);
				throw refused;
			};
			await expect(startRun(REQUEST, fx)).rejects.toBe(refused);
			expect(steps).toStrictEqual([
				["authorize"],
				["log", "govern", ""],
				["begin", AUDIT_ID, FACTS, { status: code, outcome: "denied", message }],
			]);
		},
	);

	it("tells a refusal by its type, not its status: a conflict (409) or a forbidden vote (403) is no denial", async () => {
		for (const other of [remote(new Conflict("the request changed meanwhile")), remote(new Forbidden("not yours"))]) {
			const { fx, steps } = effects();
			fx.govern = () => Promise.reject(other);
			await expect(startRun(REQUEST, fx)).rejects.toBe(other);
			expect(steps).toStrictEqual([["authorize"]]);
		}
	});

	it("writes nothing and runs nothing when the governance fails for another reason than a refusal", async () => {
		const down = new EveError(503, "Service 'approvals' is not available");
		const { fx, steps } = effects();
		fx.govern = () => Promise.reject(down);
		await expect(startRun(REQUEST, fx)).rejects.toBe(down);
		expect(steps).toStrictEqual([["authorize"]]);
	});

	it("writes a held run's record (held, 202, naming the approval), never executes, and answers what `held` makes of the hold", async () => {
		const { fx, steps } = effects();
		fx.govern = async () => ({ approval: { _id: "0000000000000000000000c3", status: "pending" } });
		fx.held = hold => ({ task_id: `held by ${hold.approval._id}` });
		expect(await startRun(REQUEST, fx)).toStrictEqual({ task_id: "held by 0000000000000000000000c3" });
		expect(steps).toStrictEqual([
			["authorize"],
			[
				"begin",
				AUDIT_ID,
				{ ...FACTS, run: { ...FACTS.run, approval: "0000000000000000000000c3" } },
				{ status: 202, outcome: "held", message: "held for approval 0000000000000000000000c3" },
			],
		]);
	});

	it("still holds (nothing runs, the approval request stands) when the held run's record cannot be written, and logs it", async () => {
		const { fx, steps } = effects({ begin: () => Promise.reject(new Error("audit down")) });
		fx.govern = async () => ({ approval: { _id: "0000000000000000000000c3", status: "pending" } });
		fx.held = hold => ({ task_id: `held by ${hold.approval._id}` });
		expect(await startRun(REQUEST, fx)).toStrictEqual({ task_id: "held by 0000000000000000000000c3" });
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin", "log"]);
		expect(steps[2]).toStrictEqual([
			"log",
			"Could not write the audit record of a run held for approval:",
			"audit down",
		]);
	});

	it("refuses (500) a hold its caller cannot answer, and runs nothing", async () => {
		const { fx, steps } = effects();
		fx.govern = async () => ({ approval: { _id: "0000000000000000000000c3", status: "pending" } });
		await expect(startRun(REQUEST, fx)).rejects.toMatchObject({
			code: 500,
			message: "a run was held for approval where none can be answered",
		});
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin"]);
	});

	it("runs as before when the governance lets it, with a break-glass reason and the approval carried out on its record", async () => {
		const { fx, steps } = effects();
		fx.govern = async () => null;
		const req: RunRequest = {
			...REQUEST,
			by: { ...REQUEST.by, breakGlass: "INC-1", approval: "0000000000000000000000c3" },
		};
		await startRun(req, fx);
		expect(steps.map(s => s[0])).toStrictEqual(["authorize", "begin", "execute", "complete"]);
		expect(steps[1]).toStrictEqual([
			"begin",
			AUDIT_ID,
			{ ...FACTS, run: { ...FACTS.run, break_glass: "INC-1", approval: "0000000000000000000000c3" } },
		]);
	});
});
