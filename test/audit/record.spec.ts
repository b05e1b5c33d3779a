/**
 * The one audit record builder (services/audit/record.ts): what the audit service stores for the facts its callers
 * report — bounded, masked, the outcome the status says. Pure; the service and its callers are test/audit/audit-log.spec.ts.
 */
import { buildRecord, boundedArgs, outcomeOf, resultFields } from "../../services/audit/record";
import { MASK } from "../../lib/eve/render";
import type { AuditBegin } from "../../lib/contracts/audit";

describe("the audit record builder (services/audit/record.ts)", () => {
	const FACTS: AuditBegin = {
		who: { token: "tok-1", name: "alice", role: "operator" },
		request: { source: "10.0.0.7", agent: "curl/8", method: "POST", path: "/api/hosts/web-01" },
		run: {
			targets: ["web-01"],
			fun: "test.arg",
			call: { cm_client: "local", arg: ["whoami", "password=hunter2"], kwarg: { token: "t0k", user: "root" } },
		},
	};

	it("makes a run's record before it runs: started, 202, no jid yet, the complete call with its secrets masked", () => {
		expect(buildRecord(FACTS)).toStrictEqual({
			token: "tok-1",
			name: "alice",
			role: "operator",
			source: "10.0.0.7",
			agent: "curl/8",
			method: "POST",
			path: "/api/hosts/web-01",
			targets: ["web-01"],
			fun: "test.arg",
			args: { cm_client: "local", arg: ["whoami", `password=${MASK}`], kwarg: { token: MASK, user: "root" } },
			status: 202,
			outcome: "started",
			jid: null,
		});
	});

	it("makes a write's record whole at once: its body as the arguments (masked), no function, the outcome the status says", () => {
		const record = buildRecord({
			who: { token: null, name: null, role: null },
			request: { source: "", method: "POST", path: "/api/vpn_managers" },
			body: { name: "m", api_secret: "s" },
			result: { status: 401, message: "an API token is required" },
		});
		expect(record).toStrictEqual({
			token: null,
			name: null,
			role: null,
			source: "",
			method: "POST",
			path: "/api/vpn_managers",
			fun: null,
			args: { name: "m", api_secret: MASK },
			status: 401,
			outcome: "denied",
			message: "an API token is required",
			jid: null,
		});
		expect([200, 201, 202, 204, 400, 401, 403, 404, 409, 422, 429, 500, 503].map(outcomeOf)).toStrictEqual([
			"ok",
			"ok",
			"ok",
			"ok",
			"failed",
			"denied",
			"denied",
			"failed",
			"failed",
			"failed",
			"denied",
			"failed",
			"failed",
		]);
	});

	it("bounds every field: message and break-glass 2000, path 4096, source and agent 200, method 10; a large body kept as its size and keys", () => {
		const long = (n: number) => "x".repeat(n);
		const record = buildRecord({
			who: { token: null, name: null, role: null },
			request: { source: long(300), agent: long(300), method: long(20), path: long(5000) },
			run: { targets: ["h"], fun: "test.ping", break_glass: long(3000) },
			body: { big: long(9000), other: 1 },
			result: { status: 500, message: long(2500) },
		});
		expect(
			[record.source, record.agent, record.method, record.path, record.message, record.break_glass].map(
				v => String(v).length,
			),
		).toStrictEqual([200, 200, 10, 4096, 2000, 2000]);
		expect(record.args).toStrictEqual({
			truncated: true,
			bytes: JSON.stringify({ big: long(9000), other: 1 }).length,
			keys: ["big", "other"],
		});
		expect(boundedArgs({ small: 1 })).toStrictEqual({ small: 1 });
		// A run's complete call is what ran: kept whole, however large.
		const call = { cm_client: "local", kwarg: { pillar: long(9000) } };
		expect(buildRecord({ ...FACTS, run: { fun: "state.apply", call } }).args).toStrictEqual(call);
	});

	it("leaves out what was not given (agent, targets, arguments, message, break-glass, approval), and keeps a given outcome", () => {
		const bare = buildRecord({
			who: { token: "t", name: "n", role: "admin" },
			request: { source: "s", agent: "", method: "POST", path: "/auth/logout" },
			result: { status: 200, outcome: "ok", message: "" },
		});
		expect(bare).toStrictEqual({
			token: "t",
			name: "n",
			role: "admin",
			source: "s",
			method: "POST",
			path: "/auth/logout",
			fun: null,
			status: 200,
			outcome: "ok",
			jid: null,
		});
		const held = buildRecord({
			...FACTS,
			run: { ...FACTS.run, break_glass: "INC-1", approval: "0000000000000000000000c3" },
			result: { status: 202, outcome: "held", message: "held for approval", jid: null },
		});
		expect(held).toMatchObject({
			break_glass: "INC-1",
			approval: "0000000000000000000000c3",
			status: 202,
			outcome: "held",
			message: "held for approval",
			jid: null,
		});
		// A 409 from a maintenance window is a refusal: the door says so, the status alone would say failed.
		expect(resultFields({ status: 409, outcome: "denied" })).toStrictEqual({
			status: 409,
			outcome: "denied",
			jid: null,
		});
		expect(resultFields({ status: 200, jid: "20300101000000000001" })).toStrictEqual({
			status: 200,
			outcome: "ok",
			jid: "20300101000000000001",
		});
	});

	it("keeps a body up to 8192 characters of JSON, and records one it cannot serialize, or a large non-object, by size alone", () => {
		const at = (n: number) => ({ s: "x".repeat(n - 8) });
		expect(JSON.stringify(at(8192)).length).toBe(8192);
		expect(boundedArgs(at(8192))).toStrictEqual(at(8192));
		expect(boundedArgs(at(8193))).toStrictEqual({ truncated: true, bytes: 8193, keys: ["s"] });
		const cyclic: Record<string, unknown> = { a: 1 };
		cyclic.self = cyclic;
		expect(boundedArgs(cyclic)).toStrictEqual({ truncated: true, bytes: 0, keys: ["a", "self"] });
		expect(boundedArgs("y".repeat(9000))).toStrictEqual({ truncated: true, bytes: 9002, keys: [] });
		expect(
			(
				boundedArgs(Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, "v".repeat(200)]))) as {
					keys: string[];
				}
			).keys,
		).toHaveLength(50);
	});
});
