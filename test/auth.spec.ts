/**
 * lib/auth.ts: the run rule (`runDenial`), function globs, and the audit log's masking. Expectations are
 * literal, written from docs/security.md, never computed with the code under test.
 */
import { functionAllowed, redact, runDenial, type RunCall, type Scope } from "../lib/auth";
import { nestingDepth, tooDeep, MAX_JSON_DEPTH } from "../lib/json-depth";

const call = (over: Partial<RunCall> = {}): RunCall => ({ client: "local_async", fun: "test.ping", targets: ["web-1"], ...over });
const hosts = (...names: string[]) => new Set(names);

describe("runDenial: may this token run this complete call on these hosts?", () => {
	const scoped: Scope = { groups: ["g"], functions: ["test.*", "state.apply"] };

	it.each([
		// [role, scope, call, allowed hosts, expected reason (null: allowed)]
		["operator", undefined, call(), null, null],
		["admin", undefined, call({ fun: "cmd.run", targets: ["any-host"] }), null, null],
		["viewer", undefined, call(), null, "a viewer token cannot run functions"],
		["operator", undefined, call({ client: "runner" }), null, "client 'runner' is not allowed (only local, local_async)"],
		["operator", undefined, call({ client: "wheel" }), null, "client 'wheel' is not allowed (only local, local_async)"],
		["operator", undefined, call({ client: "local" }), null, null],
		["operator", scoped, call(), hosts("web-1"), null],
		["operator", scoped, call({ fun: "state.apply" }), hosts("web-1"), null],
		["operator", scoped, call({ fun: "state.highstate" }), hosts("web-1"), "function 'state.highstate' is outside the token's scope"],
		["operator", scoped, call({ fun: "cmd.run" }), hosts("web-1"), "function 'cmd.run' is outside the token's scope"],
		["operator", scoped, call({ targets: ["web-1", "db-1"] }), hosts("web-1"), "targets outside the token's scope: db-1"],
		["operator", scoped, call({ targets: ["db-1"] }), hosts(), "targets outside the token's scope: db-1"],
		["operator", { functions: ["test.*"] }, call({ targets: ["anything"] }), null, null],
		["admin", scoped, call({ fun: "cmd.run" }), hosts("web-1"), "function 'cmd.run' is outside the token's scope"],
	] as Array<[string, Scope | undefined, RunCall, Set<string> | null, string | null]>)("%s %j %j on %j -> %s", (role, scope, c, allowed, want) => {
		expect(runDenial(role as "viewer" | "operator" | "admin", scope, c, allowed)).toBe(want);
	});

	it("names at most 20 hosts outside the scope, then an ellipsis", () => {
		const targets = Array.from({ length: 25 }, (_, i) => `h${String(i).padStart(2, "0")}`);
		expect(runDenial("operator", { groups: ["g"] }, call({ targets }), hosts())).toBe(`targets outside the token's scope: ${targets.slice(0, 20).join(", ")}, …`);
	});
});

describe("functionAllowed", () => {
	it.each([
		[["test.*"], "test.ping", true],
		[["test.*"], "test.", true],
		[["test.*"], "testXping", false],
		[["test.*"], "xtest.ping", false],
		[["state.apply"], "state.apply", true],
		[["state.apply"], "state.applyx", false],
		[["*"], "cmd.run", true],
		// Relay functions: never through a glob, only by their literal name.
		[["*"], "saltutil.cmd", false],
		[["saltutil.*"], "saltutil.cmd", false],
		[["saltutil.*"], "saltutil.runner", false],
		[["saltutil.*"], "saltutil.sync_grains", true],
		[["publish.*"], "publish.publish", false],
		[["saltutil.cmd"], "saltutil.cmd", true],
	])("%j allows %s: %s", (functions, fun, want) => {
		expect(functionAllowed({ functions }, fun)).toBe(want);
	});

	it("allows everything, relays included, without a functions list", () => {
		expect(functionAllowed(undefined, "saltutil.cmd")).toBe(true);
		expect(functionAllowed({ groups: ["g"] }, "cmd.run")).toBe(true);
	});
});

describe("redact", () => {
	it("masks values under secret-looking keys at any depth and keeps every other key as it is, __proto__ included", () => {
		const input = JSON.parse('{"user":"root","password":"p","nested":{"api_key":"k","keep":[{"token":"t","x":1}]},"__proto__":{"polluted":"yes"},"a.b":1,"$x":2}');
		const out = redact(input) as Record<string, unknown>;
		expect(JSON.stringify(out)).toBe('{"user":"root","password":"********","nested":{"api_key":"********","keep":[{"token":"********","x":1}]},"__proto__":{"polluted":"yes"},"a.b":1,"$x":2}');
		expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
	});

	it("keeps null secrets null (nothing to hide) and cuts what is deeper than its bound instead of overflowing the stack", () => {
		expect(redact({ password: null })).toEqual({ password: null });
		let deep: unknown = 1;
		for (let i = 0; i < 10_000; i++) deep = [deep];
		expect(() => redact(deep)).not.toThrow();
	});
});

describe("json-depth", () => {
	it("counts nesting outside strings, escaped quotes included", () => {
		expect(nestingDepth("[]")).toBe(1);
		expect(nestingDepth('{"a":[{"b":"[[[[{{"}]}')).toBe(3);
		expect(nestingDepth('["\\"[[["]')).toBe(1);
		expect(nestingDepth(Buffer.from('{"a":{"b":{}}}'))).toBe(3);
		expect(nestingDepth("((a == 1))", Infinity, true)).toBe(2);
		expect(nestingDepth("((a == 1))")).toBe(0);
	});

	it(`accepts exactly ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
		expect(tooDeep("[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH))).toBe(false);
		expect(tooDeep("[".repeat(MAX_JSON_DEPTH + 1) + "]".repeat(MAX_JSON_DEPTH + 1))).toBe(true);
		// Siblings do not add up.
		expect(tooDeep("[" + "[]".repeat(1000) + "]")).toBe(false);
	});
});
