/**
 * lib/security/scopes.ts: what a scope grants (exact names, globs below "runs arbitrary code", classes), relays and
 * their inner function, argument matchers, guarded keywords — all decided on the effective call.
 */
import { effectiveCall } from "../../lib/security/effective-call";
import { governedNames, governs, isDryRun } from "../../services/governance/scope";
import { callDenial, entryGrants, functionsExceed, grantsArbitrary, patternError, type FunctionScope } from "../../lib/security/scopes";

const call = (fun: string, arg?: unknown[], kwarg?: Record<string, unknown>) => effectiveCall(fun, arg, kwarg);
const deny = (scope: FunctionScope | undefined, fun: string, arg?: unknown[], kwarg?: Record<string, unknown>) => callDenial(scope, call(fun, arg, kwarg));

describe("scope.functions: exact names, globs, classes", () => {
	it.each([
		// [entry, function, granted]
		["test.*", "test.ping", true],
		["test.*", "test.echo", true],
		["test.*", "test.try", false],
		["test.*", "test.cross_test", false],
		["test.*", "test.get_opts", false],
		["test.*", "test.unknown_fn", false],
		["*", "cmd.run", false],
		["*", "state.apply", true],
		["state.*", "state.single", false],
		["saltutil.*", "saltutil.sync_grains", true],
		["saltutil.*", "saltutil.mmodule", false],
		["saltutil.*", "saltutil.cmd", false],
		["mine.*", "mine.send", false],
		["schedule.*", "schedule.add", false],
		["test.try", "test.try", true],
		["test.unknown_fn", "test.unknown_fn", true],
		["@read", "test.ping", true],
		["@read", "state.apply", false],
		["@change", "state.apply", true],
		["@secrets", "test.get_opts", true],
		["@secrets", "test.ping", false],
		["@arbitrary", "cmd.run", true],
		["@arbitrary", "some.uncatalogued", true],
		["@arbitrary", "test.ping", false],
	])("%s grants %s: %s", (entry, fun, want) => {
		expect(entryGrants(entry, fun)).toBe(want);
	});

	it("names the rule that refused", () => {
		expect(deny({ functions: ["test.*"] }, "test.try", [], { module: "cmd.run", cmd: "id" })).toBe("function 'test.try' is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)");
		expect(deny({ functions: ["test.*"] }, "test.nope")).toMatch(/catalogue does not know it/);
		expect(deny({ functions: ["test.*"] }, "test.get_opts")).toMatch(/reveals secrets/);
	});
});

describe("relays: the inner function is granted too", () => {
	it.each([
		[["test.try"], { module: "cmd.run", cmd: "id" }, /would run 'cmd.run', which is outside/],
		[["test.try", "cmd.run"], { module: "cmd.run", cmd: "id" }, null],
		[["test.try", "test.*"], { module: "test.ping" }, null],
		[["test.try", "cmd.run"], { cmd: "id" }, /do not name plainly: only @arbitrary/],
		[["test.try", "test.cross_test", "cmd.run"], { module: "test.cross_test", func: "cmd.run" }, /runs other functions in turn/],
		[["@arbitrary"], { module: "cmd.run", cmd: "id" }, null],
		[["@arbitrary"], {}, null],
	] as Array<[string[], Record<string, unknown>, RegExp | null]>)("%j test.try %j", (functions, kwarg, want) => {
		const got = deny({ functions }, "test.try", [], kwarg);
		if (want === null) expect(got).toBeNull();
		else expect(got).toMatch(want);
	});

	it("reads the inner function from the effective call: positional, key=value, the kwarg dict last", () => {
		const scope = { functions: ["test.try", "test.ping"] };
		expect(deny(scope, "test.try", ["cmd.run"])).toMatch(/would run 'cmd.run'/);
		expect(deny(scope, "test.try", ["module=cmd.run"])).toMatch(/would run 'cmd.run'/);
		expect(deny(scope, "test.try", ["module=test.ping"], { module: "cmd.run" })).toMatch(/would run 'cmd.run'/);
		expect(deny(scope, "test.try", ["module=cmd.run"], { module: "test.ping" })).toBeNull();
		expect(deny({ functions: ["saltutil.mmodule", "test.*"] }, "saltutil.mmodule", ["base", "cmd.run", "id"])).toMatch(/would run 'cmd.run'/);
		expect(deny({ functions: ["mine.send", "network.ip_addrs"] }, "mine.send", ["ips"], { mine_function: "cmd.run" })).toMatch(/would run 'cmd.run'/);
		expect(deny({ functions: ["schedule.add", "test.*"] }, "schedule.add", ["job"], { function: "cmd.run" })).toMatch(/would run 'cmd.run'/);
	});

	it("refuses a relay to a function whose arguments a matcher restricts", () => {
		const scope = { functions: ["test.try", "cmd.run"], calls: { "cmd.run": { args: ["echo [a-z]+"] } } };
		expect(deny(scope, "test.try", [], { module: "cmd.run", cmd: "id" })).toMatch(/scope.calls\['cmd.run'\] restricts/);
		expect(deny(scope, "cmd.run", ["echo hi"])).toBeNull();
		expect(deny(scope, "cmd.run", ["id"])).toMatch(/does not match scope.calls\['cmd.run'\].args\[0\]/);
	});
});

describe("argument matchers", () => {
	const scope: FunctionScope = {
		functions: ["state.apply", "state.sls", "cmd.run"],
		calls: { "state.*": { mods: ["web*", "common"], saltenv: ["base", "dev"] }, "cmd.run": { args: ["systemctl (status|restart) [a-z-]+"], kwargs: { runas: "root|www" } } },
	};
	it.each([
		["state.apply", ["web.nginx"], undefined, null],
		["state.apply", ["web.nginx,common"], undefined, null],
		["state.apply", [], { mods: ["web", "common"] }, null],
		["state.apply", ["mods=web"], { test: true }, null],
		["state.apply", ["db"], undefined, /sls db not allowed by scope.calls\['state.\*'\].mods/],
		["state.apply", ["web,db"], undefined, /sls db not allowed/],
		["state.apply", [], undefined, /applies the whole highstate/],
		["state.apply", ["[web, db]"], undefined, /cannot be read/],
		["state.sls", ["web"], { saltenv: "dev" }, null],
		["state.sls", ["web"], { saltenv: "prod" }, /saltenv 'prod' is not among scope.calls\['state.\*'\].saltenv/],
		["cmd.run", ["systemctl restart nginx"], undefined, null],
		["cmd.run", ["systemctl restart nginx; id"], undefined, /does not match scope.calls\['cmd.run'\].args\[0\]/],
		["cmd.run", [], { cmd: "id" }, /keyword 'cmd' of cmd.run is not allowed by scope.calls\['cmd.run'\]/],
		["cmd.run", ["systemctl status x", "/tmp"], undefined, /argument 2 of cmd.run is not allowed/],
		["cmd.run", ["systemctl status x"], { runas: "www" }, null],
		["cmd.run", ["systemctl status x"], { runas: "nobody" }, /keyword 'runas' of cmd.run does not match/],
	] as Array<[string, unknown[], Record<string, unknown> | undefined, RegExp | null]>)("%s %j %j", (fun, arg, kwarg, want) => {
		const got = deny(scope, fun, arg, kwarg);
		if (want === null) expect(got).toBeNull();
		else expect(got).toMatch(want);
	});

	it("compiles patterns with RE2 (linear time) and refuses what is not one or too long", () => {
		expect(patternError("(a+)+$")).toBeNull();
		expect(patternError("(a")).toMatch(/missing closing/);
		expect(patternError("a".repeat(501))).toMatch(/longer than 500/);
		// A value beyond the cap is refused, not matched.
		expect(deny({ functions: ["cmd.run"], calls: { "cmd.run": { args: [".*"] } } }, "cmd.run", ["x".repeat(10_001)])).toMatch(/does not match/);
	});
});

describe("guarded keywords for scoped tokens", () => {
	it.each([
		[{ pillar: { a: 1 } }, /keyword 'pillar' is refused for a scoped token \(it overrides the pillar data/],
		[["pillar={a: 1}"], /keyword 'pillar' is refused/],
		[{ pillar_enc: "gpg" }, /keyword 'pillar_enc' is refused/],
		[{ localconfig: "/tmp/x" }, /keyword 'localconfig' is refused/],
		[{ concurrent: true }, /keyword 'concurrent' is refused/],
		[{ __pub_user: "root" }, /keyword '__pub_user' is refused for a scoped token/],
		[{ saltenv: "dev" }, /saltenv 'dev' is refused for a scoped token: only base/],
		[{ pillarenv: "dev" }, /pillarenv 'dev' is refused/],
		[{ saltenv: "base", queue: true, exclude: "x", test: true }, null],
	] as Array<[Record<string, unknown> | string[], RegExp | null]>)("%j", (given, want) => {
		const got = Array.isArray(given) ? deny({ functions: ["state.apply"] }, "state.apply", given) : deny({ functions: ["state.apply"] }, "state.apply", [], given);
		if (want === null) expect(got).toBeNull();
		else expect(got).toMatch(want);
	});

	it("lets a matcher allow a guarded keyword by naming it, and leaves tokens without a function limit alone", () => {
		expect(deny({ functions: ["state.apply"], calls: { "state.apply": { mods: ["web"], kwargs: { pillar: '\\{"version":"[0-9.]+"\\}' } } } }, "state.apply", ["web"], { pillar: { version: "1.2" } })).toBeNull();
		expect(deny({ groups: ["g"] } as FunctionScope, "state.apply", [], { pillar: { a: 1 } })).toBeNull();
	});
});

describe("what a scope grants, compared", () => {
	it("flags scopes that run arbitrary code", () => {
		expect(grantsArbitrary(undefined)).toBe(true);
		expect(grantsArbitrary(["test.*", "state.*", "@read", "@secrets"])).toBe(false);
		expect(grantsArbitrary(["test.try"])).toBe(true);
		expect(grantsArbitrary(["some.uncatalogued"])).toBe(true);
		expect(grantsArbitrary(["@arbitrary"])).toBe(true);
	});

	it("compares what entries grant, not their text", () => {
		expect(functionsExceed({ functions: ["@read"] }, { functions: ["test.ping", "test.*"] })).toBeNull();
		expect(functionsExceed({ functions: ["@read"] }, { functions: ["test.ping", "state.*"] })).toBe("functions outside your scope: state.*");
		expect(functionsExceed({ functions: ["test.*"] }, { functions: ["test.ping", "test.echo"] })).toBeNull();
		expect(functionsExceed({ functions: ["test.*", "state.*"] }, { functions: ["@read"] })).toMatch(/@read/);
		expect(functionsExceed({ functions: ["@read", "@change"] }, { functions: ["*"] })).toBeNull();
		expect(functionsExceed({ functions: ["*"] }, { functions: ["test.try"] })).toBe("functions outside your scope: test.try");
		expect(functionsExceed({ functions: ["@arbitrary"] }, { functions: ["cmd.run", "x.y"] })).toBeNull();
		expect(functionsExceed({ functions: ["cmd.run"] }, { functions: ["@arbitrary"] })).toMatch(/@arbitrary/);
		const calls = { "state.*": { mods: ["web"] } };
		expect(functionsExceed({ functions: ["state.*"], calls }, { functions: ["state.apply"] })).toMatch(/keep those scope.calls entries/);
		expect(functionsExceed({ functions: ["state.*"], calls }, { functions: ["state.apply"], calls: { ...calls, "state.apply": { saltenv: ["base"] } } })).toBeNull();
	});
});

describe("dry runs and governance, on the effective call (services/governance/scope.ts)", () => {
	it.each([
		["state.apply", ["test=True"], { test: false }, false],
		["state.apply", ["test=True", { __kwarg__: true, test: false }], undefined, false],
		["state.apply", ["test=False"], { test: true }, true],
		["state.apply", ["test=True"], undefined, true],
		["state.apply", ["test=yes"], undefined, true],
		["state.apply", [], { test: "true" }, false],
		["state.apply", [], { test: 1 }, false],
		["state.sls", ["web"], { test: true }, true],
		["state.highstate", [], { test: true }, true],
		["state.run_request", [], { test: true }, false],
		["state.template_str", ["{{ salt['cmd.run']('id') }}", "test=True"], undefined, false],
		["state.single", ["cmd.run"], { name: "id", test: true }, false],
		["cmd.run", ["touch /tmp/x"], { test: true }, false],
		["pkg.upgrade", ["test=True"], undefined, false],
	] as Array<[string, unknown[], Record<string, unknown> | undefined, boolean]>)("%s %j %j is a dry run: %s", (fun, arg, kwarg, want) => {
		expect(isDryRun(fun, arg, kwarg)).toBe(want);
	});

	it("governs a relay by what it runs too, and one that names nothing plainly by every window", () => {
		expect(governs(["cmd.*"], governedNames("test.try", [], { module: "cmd.run", cmd: "id" }))).toBe(true);
		expect(governs(["cmd.*"], governedNames("test.try", [], { module: "test.ping" }))).toBe(false);
		expect(governs(["pkg.*"], governedNames("test.try", [], {}))).toBe(true);
		expect(governs(["cmd.*"], governedNames("test.ping", [], {}))).toBe(false);
		expect(governs([], governedNames("test.try", [], {}))).toBe(false);
	});
});

describe("event.fire_master's preload", () => {
	it("is refused to a token that names the function exactly, unless its calls entry names the keyword", () => {
		const call = effectiveCall("event.fire_master", [{ x: 1 }, "salt/job/1/ret/web-02"], { preload: { events: [] } });
		expect(callDenial({ functions: ["event.fire_master"] }, call)).toMatch(/keyword 'preload' .*raw load/);
		expect(callDenial({ functions: ["event.fire_master"] }, effectiveCall("event.fire_master", [{ x: 1 }, "fleet/ping"], undefined))).toBeNull();
	});
});
