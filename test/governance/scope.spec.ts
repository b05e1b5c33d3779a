/**
 * services/governance/scope.ts: what maintenance windows and approval policies govern — their origins, their
 * function globs (a relay's inner function too), their targets (the hosts of groups and of an expression, each
 * resolved once per run) and what a window's or a policy's `targets` and `functions` accept. (The dry-run rule is
 * in test/security/scopes.spec.ts, on the effective call; test/governance.spec.ts proves all of it through the API.)
 */
import type { Context } from "moleculer";
import Validator from "fastest-validator";
import {
	FUNCTIONS_SCHEMA,
	ORIGINS,
	TARGETS_SCHEMA,
	governedNames,
	governs,
	hostsOf,
	originCovered,
	targetsIssues,
	type HostsMemo,
	type Origin,
} from "../../services/governance/scope";

const G1 = "0000000000000000000000a1";
const G2 = "0000000000000000000000a2";
const GONE = "0000000000000000000000ff";

describe("a policy's origins", () => {
	it("are the API's, a task's, a rollout's and the REPL's", () => {
		expect(ORIGINS).toEqual(["api", "task", "rollout", "repl"]);
	});

	it.each([
		[["api"], "api", true],
		[["api"], "task", false],
		[["task", "rollout"], "rollout", true],
		[["task", "rollout"], "api", false],
		// The REPL is an HTTP client like any other: a policy naming it covers interactive runs.
		[["repl"], "api", true],
		[["repl"], "task", false],
		[["repl"], "rollout", false],
		[["api"], "repl", false],
		[[], "api", false],
	] as Array<[Origin[], Origin, boolean]>)("%j cover %s: %s", (origins, origin, want) => {
		expect(originCovered(origins, origin)).toBe(want);
	});
});

describe("the functions a call runs, as governance sees them", () => {
	it.each([
		["a plain function: itself", "cmd.run", ["id"], undefined, ["cmd.run"]],
		[
			"a relay naming its function by keyword: both",
			"test.try",
			[],
			{ module: "cmd.run", cmd: "id" },
			["test.try", "cmd.run"],
		],
		[
			"a relay naming it by position: both",
			"saltutil.mmodule",
			["base", "pkg.install", "nginx"],
			undefined,
			["saltutil.mmodule", "pkg.install"],
		],
		[
			"a relay's override keyword: what it names",
			"mine.send",
			["network.ip_addrs"],
			{ mine_function: "cmd.run" },
			["mine.send", "cmd.run"],
		],
		["a relay naming nothing: anything", "test.try", [], {}, null],
		["a relay naming no function plainly: anything", "test.try", [], { module: "cmd.run; id" }, null],
		["a relay running another relay: anything", "test.try", [], { module: "test.cross_test" }, null],
		["a relay naming a plain function: both", "test.try", [], { module: "test.ping" }, ["test.try", "test.ping"]],
	] as Array<[string, string, unknown[], Record<string, unknown> | undefined, string[] | null]>)(
		"%s",
		(_what, fun, arg, kwarg, want) => {
			expect(governedNames(fun, arg, kwarg)).toEqual(want);
		},
	);

	it("governs by any glob matching any of those functions", () => {
		expect(governs(["pkg.*", "cmd.*"], ["cmd.run"])).toBe(true);
		expect(governs(["pkg.*"], ["cmd.run"])).toBe(false);
		expect(governs(["cmd.*"], ["test.try", "cmd.run"])).toBe(true);
		expect(governs(["test.try"], ["test.try", "cmd.run"])).toBe(true);
		expect(governs(["state.*"], ["test.try", "cmd.run"])).toBe(false);
		expect(governs([], ["cmd.run"])).toBe(false);
		expect(governs(["cmd.*"], [])).toBe(false);
	});

	it("governs a call that may run anything by every window or policy that names a function", () => {
		expect(governs(["pkg.*"], null)).toBe(true);
		expect(governs(["a.b", "c.d"], null)).toBe(true);
		expect(governs([], null)).toBe(false);
	});
});

describe("what a window's or a policy's targets and functions accept", () => {
	const v = new Validator();
	const check = v.compile({ targets: TARGETS_SCHEMA, functions: FUNCTIONS_SCHEMA });
	const fields = (value: unknown) => {
		const result = check(value as object);
		return result === true ? [] : [...new Set((result as Array<{ field: string }>).map(e => e.field))];
	};

	it("takes groups, a compound target or both, and nothing else", () => {
		expect(fields({ targets: { groups: [G1, G2] }, functions: ["cmd.run"] })).toEqual([]);
		expect(fields({ targets: { target: "G@os:Debian" }, functions: ["cmd.run"] })).toEqual([]);
		expect(fields({ targets: { groups: [G1], target: "web-*" }, functions: ["cmd.run"] })).toEqual([]);
		expect(fields({ targets: { groups: [G1], hosts: ["web-01"] }, functions: ["cmd.run"] })).toEqual(["targets"]);
		expect(fields({ targets: { groups: ["web"] }, functions: ["cmd.run"] })).toEqual(["targets.groups[0]"]);
		expect(fields({ targets: { target: "" }, functions: ["cmd.run"] })).toEqual(["targets.target"]);
		expect(fields({ targets: { target: "x".repeat(10_000) }, functions: ["cmd.run"] })).toEqual([]);
		expect(fields({ targets: { target: "x".repeat(10_001) }, functions: ["cmd.run"] })).toEqual(["targets.target"]);
		expect(fields({ targets: { groups: Array(1000).fill(G1) }, functions: ["cmd.run"] })).toEqual([]);
		expect(fields({ targets: { groups: Array(1001).fill(G1) }, functions: ["cmd.run"] })).toEqual(["targets.groups"]);
	});

	it("takes one to 200 Salt function globs", () => {
		expect(fields({ targets: { target: "*" }, functions: ["cmd.*", "pkg.install", "*"] })).toEqual([]);
		expect(fields({ targets: { target: "*" }, functions: [] })).toEqual(["functions"]);
		expect(fields({ targets: { target: "*" }, functions: Array(200).fill("cmd.run") })).toEqual([]);
		expect(fields({ targets: { target: "*" }, functions: Array(201).fill("cmd.run") })).toEqual(["functions"]);
		expect(fields({ targets: { target: "*" }, functions: ["cmd.run; id"] })).toEqual(["functions[0]"]);
	});
});

/** A context answering groups.exist, groups.hostnames and hosts.resolveTarget from tables, recording each call. */
function fleet(groups: Record<string, string[]>, targets: Record<string, string[] | Error>) {
	const calls: Array<[string, Record<string, unknown>]> = [];
	const ctx = {
		call: async (action: string, params: Record<string, unknown>) => {
			calls.push([action, params]);
			if (action === "groups.exist") return (params.ids as string[]).filter(id => id in groups);
			if (action === "groups.hostnames") {
				const hosts = groups[params.id as string];
				// As a remote error arrives: a plain Error with the type, code and data Moleculer carries, not the class.
				if (!hosts) throw Object.assign(new Error(`group '${params.id}' not found`), { code: 404, type: "NOT_FOUND" });
				return hosts;
			}
			if (action === "hosts.resolveTarget") {
				const hosts = targets[params.target as string];
				if (hosts instanceof Error) throw hosts;
				if (!hosts)
					throw Object.assign(new Error("invalid"), {
						code: 422,
						type: "TARGET_UNEVALUABLE",
						data: {
							reason: `cannot evaluate '${params.target}'`,
							issues: { [String(params.field ?? "target")]: `cannot evaluate '${params.target}'` },
						},
					});
				return { hosts };
			}
			throw new Error(`unexpected call of ${action}`);
		},
	} as unknown as Context;
	return { ctx, calls };
}

describe("the hosts a window or a policy governs now", () => {
	const GROUPS = { [G1]: ["web-01", "web-02"], [G2]: ["web-02", "db-01"] };
	const TARGETS = { "G@os:Debian": ["db-01", "db-02"], "G@role:none": [] };

	it("are the hosts of its groups and of its expression, together", async () => {
		const { ctx } = fleet(GROUPS, TARGETS);
		expect([...(await hostsOf(ctx, { groups: [G1, G2] }))].sort()).toEqual(["db-01", "web-01", "web-02"]);
		expect([...(await hostsOf(ctx, { target: "G@os:Debian" }))].sort()).toEqual(["db-01", "db-02"]);
		expect([...(await hostsOf(ctx, { groups: [G1], target: "G@os:Debian" }))].sort()).toEqual([
			"db-01",
			"db-02",
			"web-01",
			"web-02",
		]);
		expect([...(await hostsOf(ctx, { groups: [], target: "G@role:none" }))]).toEqual([]);
	});

	it("counts a deleted group as naming no host", async () => {
		const { ctx } = fleet(GROUPS, TARGETS);
		expect([...(await hostsOf(ctx, { groups: [GONE, G1] }))].sort()).toEqual(["web-01", "web-02"]);
	});

	it("fails, rather than guess, when a group cannot be read or the expression no longer evaluates", async () => {
		const down = Object.assign(new Error("groups is not available"), { code: 503 });
		const ctx = { call: async () => Promise.reject(down) } as unknown as Context;
		await expect(hostsOf(ctx, { groups: [G1] })).rejects.toBe(down);
		const { ctx: stale } = fleet(GROUPS, TARGETS);
		await expect(hostsOf(stale, { target: `F@${GONE}` })).rejects.toMatchObject({ code: 422 });
	});

	it("resolves each group and expression once per run, whatever number of rules share it", async () => {
		const { ctx, calls } = fleet(GROUPS, TARGETS);
		const memo: HostsMemo = new Map();
		const a = await hostsOf(ctx, { groups: [G1], target: "G@os:Debian" }, memo);
		const b = await hostsOf(ctx, { groups: [G1, G2], target: "G@os:Debian" }, memo);
		expect([[...a].sort(), [...b].sort()]).toEqual([
			["db-01", "db-02", "web-01", "web-02"],
			["db-01", "db-02", "web-01", "web-02"],
		]);
		expect(calls).toEqual([
			["groups.hostnames", { id: G1 }],
			["hosts.resolveTarget", { target: "G@os:Debian" }],
			["groups.hostnames", { id: G2 }],
		]);
		// Without a memo of its own, each call resolves again.
		await hostsOf(ctx, { groups: [G1] });
		await hostsOf(ctx, { groups: [G1] });
		expect(calls.slice(3)).toEqual([
			["groups.hostnames", { id: G1 }],
			["groups.hostnames", { id: G1 }],
		]);
	});

	it("keeps a group and an expression that read alike apart, and two expressions apart", async () => {
		const { ctx } = fleet({ [G1]: ["web-01"] }, { [G1]: ["db-01"], "G@os:Debian": ["db-02"] });
		const memo: HostsMemo = new Map();
		expect([...(await hostsOf(ctx, { groups: [G1] }, memo))]).toEqual(["web-01"]);
		expect([...(await hostsOf(ctx, { target: G1 }, memo))]).toEqual(["db-01"]);
		expect([...(await hostsOf(ctx, { target: "G@os:Debian" }, memo))]).toEqual(["db-02"]);
	});

	it("asks only about what the targets name", async () => {
		const { ctx, calls } = fleet(GROUPS, TARGETS);
		await hostsOf(ctx, { target: "G@os:Debian" });
		await hostsOf(ctx, { groups: [G2] });
		expect(calls).toEqual([
			["hosts.resolveTarget", { target: "G@os:Debian" }],
			["groups.hostnames", { id: G2 }],
		]);
	});
});

describe("what is wrong with a window's or a policy's targets", () => {
	const GROUPS = { [G1]: ["web-01"], [G2]: ["db-01"] };

	it("requires them where they are required, and says so under the field", async () => {
		const { ctx, calls } = fleet(GROUPS, {});
		expect(await targetsIssues(ctx, undefined, "targets", true)).toEqual({ targets: "required field" });
		expect(await targetsIssues(ctx, undefined, "targets", false)).toBeNull();
		expect(calls).toEqual([]);
	});

	it("wants groups, an expression, or both", async () => {
		const { ctx } = fleet(GROUPS, { "G@os:Debian": ["db-01"] });
		expect(await targetsIssues(ctx, {}, "targets", true)).toEqual({
			targets: "give groups, a compound target, or both",
		});
		expect(await targetsIssues(ctx, { groups: [] }, "scope", false)).toEqual({
			scope: "give groups, a compound target, or both",
		});
		expect(await targetsIssues(ctx, { groups: [G1, G2] }, "targets", true)).toBeNull();
		expect(await targetsIssues(ctx, { groups: [], target: "G@os:Debian" }, "targets", true)).toBeNull();
		expect(await targetsIssues(ctx, { groups: [G1], target: "G@os:Debian" }, "targets", true)).toBeNull();
	});

	it("names the groups that do not exist", async () => {
		const { ctx } = fleet(GROUPS, {});
		const other = "0000000000000000000000fe";
		expect(await targetsIssues(ctx, { groups: [GONE, G1, other] }, "targets", true)).toEqual({
			targets: { groups: `unknown groups: ${GONE}, ${other}` },
		});
	});

	it("says why an expression cannot be evaluated, asking with the field it is under", async () => {
		const { ctx, calls } = fleet(GROUPS, { "G@os:Debian": ["db-01"] });
		expect(await targetsIssues(ctx, { target: "G@os and (" }, "targets", true)).toEqual({
			targets: { target: "cannot evaluate 'G@os and ('" },
		});
		expect(calls).toEqual([["hosts.resolveTarget", { target: "G@os and (", field: "targets.target" }]]);
		// An expression is checked even beside groups that exist; an empty one is checked too.
		expect(await targetsIssues(ctx, { groups: [G1], target: "" }, "targets", true)).toEqual({
			targets: { target: "cannot evaluate ''" },
		});
	});

	it("passes on a failure that is no verdict on the expression", async () => {
		const down = Object.assign(new Error("hosts is not available"), { code: 503 });
		const { ctx } = fleet(GROUPS, { "web-*": down });
		await expect(targetsIssues(ctx, { target: "web-*" }, "targets", true)).rejects.toBe(down);
		const noIssues = Object.assign(new Error("invalid"), { code: 422 });
		const { ctx: bare } = fleet(GROUPS, { "web-*": noIssues });
		await expect(targetsIssues(bare, { target: "web-*" }, "targets", true)).rejects.toBe(noIssues);
		// Issues on an error of another type are no verdict either, whatever its code.
		const failing = Object.assign(new Error("hosts failed"), {
			code: 422,
			type: "VALIDATION_ERROR",
			data: { issues: { target: "cannot evaluate" } },
		});
		const { ctx: broken } = fleet(GROUPS, { "web-*": failing });
		await expect(targetsIssues(broken, { target: "web-*" }, "targets", true)).rejects.toBe(failing);
	});
});
