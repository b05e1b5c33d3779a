/**
 * lib/security/scopes.ts: what a scope grants (exact names, globs below "runs arbitrary code", classes), relays and
 * their inner function, argument matchers, guarded keywords — all decided on the effective call.
 */
import { effectiveCall } from "../../lib/security/effective-call";
import { governedNames, governs, isDryRun } from "../../services/governance/scope";
import {
	callDenial,
	entryGrants,
	functionsExceed,
	grantsArbitrary,
	grantsName,
	innerFunction,
	patternError,
	scopeIssues,
	type FunctionScope,
} from "../../lib/security/scopes";

const call = (fun: string, arg?: unknown[], kwarg?: Record<string, unknown>) => effectiveCall(fun, arg, kwarg);
const deny = (scope: FunctionScope | undefined, fun: string, arg?: unknown[], kwarg?: Record<string, unknown>) =>
	callDenial(scope, call(fun, arg, kwarg));

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
		expect(deny({ functions: ["test.*"] }, "test.try", [], { module: "cmd.run", cmd: "id" })).toBe(
			"function 'test.try' is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)",
		);
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
		[
			["test.try", "test.cross_test", "cmd.run"],
			{ module: "test.cross_test", func: "cmd.run" },
			/runs other functions in turn/,
		],
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
		expect(deny({ functions: ["saltutil.mmodule", "test.*"] }, "saltutil.mmodule", ["base", "cmd.run", "id"])).toMatch(
			/would run 'cmd.run'/,
		);
		expect(
			deny({ functions: ["mine.send", "network.ip_addrs"] }, "mine.send", ["ips"], { mine_function: "cmd.run" }),
		).toMatch(/would run 'cmd.run'/);
		expect(deny({ functions: ["schedule.add", "test.*"] }, "schedule.add", ["job"], { function: "cmd.run" })).toMatch(
			/would run 'cmd.run'/,
		);
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
		calls: {
			"state.*": { mods: ["web*", "common"], saltenv: ["base", "dev"] },
			"cmd.run": { args: ["systemctl (status|restart) [a-z-]+"], kwargs: { runas: "root|www" } },
		},
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
	] as Array<[string, unknown[], Record<string, unknown> | undefined, RegExp | null]>)(
		"%s %j %j",
		(fun, arg, kwarg, want) => {
			const got = deny(scope, fun, arg, kwarg);
			if (want === null) expect(got).toBeNull();
			else expect(got).toMatch(want);
		},
	);

	it("compiles patterns with RE2 (linear time) and refuses what is not one or too long", () => {
		expect(patternError("(a+)+$")).toBeNull();
		expect(patternError("(a")).toMatch(/missing closing/);
		expect(patternError("a".repeat(501))).toMatch(/longer than 500/);
		// A value beyond the cap is refused, not matched.
		expect(
			deny({ functions: ["cmd.run"], calls: { "cmd.run": { args: [".*"] } } }, "cmd.run", ["x".repeat(10_001)]),
		).toMatch(/does not match/);
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
		const got = Array.isArray(given)
			? deny({ functions: ["state.apply"] }, "state.apply", given)
			: deny({ functions: ["state.apply"] }, "state.apply", [], given);
		if (want === null) expect(got).toBeNull();
		else expect(got).toMatch(want);
	});

	it("lets a matcher allow a guarded keyword by naming it, and leaves tokens without a function limit alone", () => {
		expect(
			deny(
				{
					functions: ["state.apply"],
					calls: { "state.apply": { mods: ["web"], kwargs: { pillar: '\\{"version":"[0-9.]+"\\}' } } },
				},
				"state.apply",
				["web"],
				{ pillar: { version: "1.2" } },
			),
		).toBeNull();
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
		expect(functionsExceed({ functions: ["@read"] }, { functions: ["test.ping", "state.*"] })).toBe(
			"functions outside your scope: state.*",
		);
		expect(functionsExceed({ functions: ["test.*"] }, { functions: ["test.ping", "test.echo"] })).toBeNull();
		expect(functionsExceed({ functions: ["test.*", "state.*"] }, { functions: ["@read"] })).toMatch(/@read/);
		expect(functionsExceed({ functions: ["@read", "@change"] }, { functions: ["*"] })).toBeNull();
		expect(functionsExceed({ functions: ["*"] }, { functions: ["test.try"] })).toBe(
			"functions outside your scope: test.try",
		);
		expect(functionsExceed({ functions: ["@arbitrary"] }, { functions: ["cmd.run", "x.y"] })).toBeNull();
		expect(functionsExceed({ functions: ["cmd.run"] }, { functions: ["@arbitrary"] })).toMatch(/@arbitrary/);
		const calls = { "state.*": { mods: ["web"] } };
		expect(functionsExceed({ functions: ["state.*"], calls }, { functions: ["state.apply"] })).toMatch(
			/keep those scope.calls entries/,
		);
		expect(
			functionsExceed(
				{ functions: ["state.*"], calls },
				{ functions: ["state.apply"], calls: { ...calls, "state.apply": { saltenv: ["base"] } } },
			),
		).toBeNull();
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
	] as Array<[string, unknown[], Record<string, unknown> | undefined, boolean]>)(
		"%s %j %j is a dry run: %s",
		(fun, arg, kwarg, want) => {
			expect(isDryRun(fun, arg, kwarg)).toBe(want);
		},
	);

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
		expect(
			callDenial(
				{ functions: ["event.fire_master"] },
				effectiveCall("event.fire_master", [{ x: 1 }, "fleet/ping"], undefined),
			),
		).toBeNull();
	});
});

describe("a scope as it is given (OIDC_ROLES; the tokens API checks the same rules)", () => {
	it("takes groups, functions (names, globs, classes) and calls (matchers), and nothing else", () => {
		expect(scopeIssues({})).toBeNull();
		expect(
			scopeIssues({
				groups: ["web"],
				functions: ["test.*", "@read", "state.apply"],
				calls: {
					"state.*": { mods: ["web*", "common/init"], saltenv: ["base"], pillarenv: ["base"] },
					"cmd.run": { args: ["echo .*", null], kwargs: { runas: "www" } },
				},
			}),
		).toBeNull();
		expect(scopeIssues({ hosts: ["web-01"] })).toBe("scope: The object '' contains forbidden keys: 'hosts'.");
		expect(scopeIssues("test.*")).toBe("scope: The '' must be an Object.");
		// Every issue, each under its field.
		expect(scopeIssues({ functions: [], groups: [""] })).toBe(
			"groups[0]: The 'groups[0]' field length must be greater than or equal to 1 characters long.; functions: The 'functions' field must contain at least 1 items.",
		);
	});

	it.each([
		[{ functions: [] }, "functions"],
		[{ functions: ["@root"] }, "functions[0]"],
		[{ functions: ["cmd.run; id"] }, "functions[0]"],
		[{ functions: ["x".repeat(201)] }, "functions[0]"],
		[{ groups: [""] }, "groups[0]"],
		[{ calls: { "cmd run": { args: [] } } }, "calls.cmd run"],
		[{ calls: { ["x".repeat(201)]: { args: [] } } }, `calls.${"x".repeat(201)}`],
		[{ calls: { "state.*": { mods: ["x".repeat(201)] } } }, "calls.state.*.mods[0]"],
		[{ calls: { "cmd.run": { argz: [] } } }, "calls.cmd.run"],
		[{ calls: { "cmd.run": { args: ["(a"] } } }, "calls.cmd.run.args"],
		[{ calls: { "cmd.run": { args: [""] } } }, "calls.cmd.run.args[0]"],
		[{ calls: { "cmd.run": { kwargs: { runas: "(" } } } }, "calls.cmd.run.kwargs"],
		[{ calls: { "state.*": { mods: ["web; id"] } } }, "calls.state.*.mods[0]"],
		[{ calls: { "state.*": { mods: [] } } }, "calls.state.*.mods"],
		[{ calls: { "state.*": { saltenv: [] } } }, "calls.state.*.saltenv"],
		[{ calls: { "state.*": { pillarenv: [""] } } }, "calls.state.*.pillarenv[0]"],
	] as Array<[Record<string, unknown>, string]>)("refuses %j, naming %s", (scope, field) => {
		const issues = scopeIssues(scope);
		expect(issues?.split("; ").map(i => i.slice(0, i.indexOf(": ")))).toContain(field);
	});

	it("says why a pattern is no RE2 pattern", () => {
		expect(scopeIssues({ calls: { "cmd.run": { args: ["(a"] } } })).toMatch(
			/^calls\.cmd\.run\.args: not a valid RE2 pattern: .*missing closing/,
		);
		expect(scopeIssues({ calls: { "cmd.run": { args: [null, "a{2}"] } } })).toBeNull();
		expect(patternError("a".repeat(500))).toBeNull();
		// The reason is cut at 200 characters (it may quote the pattern).
		expect(patternError(`(${"a".repeat(300)}`)).toBe(
			`error parsing regexp: missing closing ): \`(${"a".repeat(200 - 43)}`,
		);
		expect(
			scopeIssues({ calls: { ["x".repeat(200)]: { args: [] }, "state.*": { mods: ["x".repeat(200)] } } }),
		).toBeNull();
	});
});

describe("each refusal, exactly as the caller reads it", () => {
	it("names the class of a function no entry names", () => {
		expect(deny({ functions: ["test.ping"] }, "state.apply")).toBe(
			"function 'state.apply' is outside the token's scope (class change: not named by the scope)",
		);
		expect(deny({ functions: ["test.*"] }, "test.nope")).toBe(
			"function 'test.nope' is outside the token's scope (the function catalogue does not know it: only its exact name or @arbitrary grants it)",
		);
		expect(deny({ functions: ["test.*"] }, "test.get_opts")).toBe(
			"function 'test.get_opts' is outside the token's scope (it reveals secrets: only its exact name or @secrets grants it, never a glob)",
		);
	});

	it("says what a relay would run and why that is refused", () => {
		expect(deny({ functions: ["test.try"] }, "test.try", [], { module: "cmd.run" })).toBe(
			"function 'test.try' would run 'cmd.run', which is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)",
		);
		expect(deny({ functions: ["test.try"] }, "test.try", [], {})).toBe(
			"function 'test.try' runs a function its arguments do not name plainly: only @arbitrary grants it so",
		);
		expect(deny({ functions: ["test.try", "test.cross_test"] }, "test.try", [], { module: "test.cross_test" })).toBe(
			"function 'test.try' would run 'test.cross_test', which runs other functions in turn: only @arbitrary grants that",
		);
		expect(
			deny({ functions: ["test.try", "cmd.*", "cmd.run"], calls: { "cmd.*": { args: [] } } }, "test.try", [], {
				module: "cmd.run",
			}),
		).toBe(
			"function 'test.try' would run 'cmd.run', whose arguments scope.calls['cmd.*'] restricts: they cannot be checked through test.try; call cmd.run directly",
		);
		// A matcher for another function does not stand in the way.
		expect(
			deny({ functions: ["test.try", "cmd.run"], calls: { "pkg.*": { args: [] } } }, "test.try", [], {
				module: "cmd.run",
			}),
		).toBeNull();
	});

	it("reads a relay's function only when it is plainly module.function", () => {
		const scope = { functions: ["test.try", "cmd.run"] };
		for (const module of ["cmd.run.x", "cmd", "cmd_run", "xcmd.run;", " cmd.run", "cmd.run\n", ".run", "cmd.", 5])
			expect([module, deny(scope, "test.try", [], { module })]).toEqual([
				module,
				"function 'test.try' runs a function its arguments do not name plainly: only @arbitrary grants it so",
			]);
		expect(innerFunction(call("test.try", [], { module: "cmd_2.run_x" }))).toBe("cmd_2.run_x");
		expect(innerFunction(call("test.ping"))).toBeNull();
		// mine.send: `name` (or its position) unless mine_function is given.
		expect(innerFunction(call("mine.send", [], { name: "network.ip_addrs" }))).toBe("network.ip_addrs");
		expect(innerFunction(call("mine.send", ["network.ip_addrs"]))).toBe("network.ip_addrs");
		expect(innerFunction(call("mine.send", ["network.ip_addrs"], { mine_function: "cmd.run" }))).toBe("cmd.run");
		// A keyword that merely reads "undefined" names nothing.
		expect(innerFunction(call("test.try", [], { undefined: "cmd.run", module: "test.ping" }))).toBe("test.ping");
		// schedule.add names its function by keyword only.
		expect(innerFunction(call("schedule.add", ["job", "cmd.run"]))).toBeUndefined();
	});

	it("counts the positional arguments a matcher allows", () => {
		const one = { functions: ["cmd.run"], calls: { "cmd.run": { args: ["ls"] } } };
		expect(deny(one, "cmd.run", ["ls", "/"])).toBe(
			"argument 2 of cmd.run is not allowed by scope.calls['cmd.run'] (it allows 1 positional argument)",
		);
		const two = { functions: ["cmd.run"], calls: { "cmd.run": { args: ["ls", null] } } };
		expect(deny(two, "cmd.run", ["ls", "/anything"])).toBeNull();
		expect(deny(two, "cmd.run", ["ls", "/", "x"])).toBe(
			"argument 3 of cmd.run is not allowed by scope.calls['cmd.run'] (it allows 2 positional arguments)",
		);
		const none = { functions: ["cmd.run"], calls: { "cmd.run": { kwargs: { cmd: "ls" } } } };
		expect(deny(none, "cmd.run", ["ls"])).toBe(
			"argument 1 of cmd.run is not allowed by scope.calls['cmd.run'] (it allows 0 positional arguments)",
		);
		expect(deny(none, "cmd.run", [], { cmd: "ls" })).toBeNull();
		expect(deny(none, "cmd.run", [], { cmd: "ls -l" })).toBe(
			"keyword 'cmd' of cmd.run does not match scope.calls['cmd.run'].kwargs['cmd']",
		);
	});

	it("matches a whole value, read as the minion reads it", () => {
		const scope = {
			functions: ["cmd.run"],
			calls: {
				"cmd.run": {
					args: ["[0-9]+"],
					kwargs: { timeout: "[0-9]+", env: '\\{A: 1\\}|\\{"A":1\\}', shell: "null|/bin/sh" },
				},
			},
		};
		expect(deny(scope, "cmd.run", ["12"])).toBeNull();
		expect(deny(scope, "cmd.run", ["12a"])).toBe("argument 1 of cmd.run does not match scope.calls['cmd.run'].args[0]");
		expect(deny(scope, "cmd.run", ["a12"])).toBe("argument 1 of cmd.run does not match scope.calls['cmd.run'].args[0]");
		expect(deny(scope, "cmd.run", ["1"], { timeout: 30 })).toBeNull();
		expect(deny(scope, "cmd.run", ["1", "env={A: 1}"])).toBeNull();
		expect(deny(scope, "cmd.run", ["1"], { env: { A: 1 } })).toBeNull();
		expect(deny(scope, "cmd.run", ["1"], { shell: null })).toBeNull();
		expect(deny(scope, "cmd.run", ["1"], { shell: "/bin/bash" })).toBe(
			"keyword 'shell' of cmd.run does not match scope.calls['cmd.run'].kwargs['shell']",
		);
		expect(
			deny({ functions: ["cmd.run"], calls: { "cmd.run": { args: ["x+"] } } }, "cmd.run", ["x".repeat(10_000)]),
		).toBeNull();
	});

	it("lets through the keywords that say how a run goes, not what it runs; and mods when a mods rule reads them", () => {
		const scope = { functions: ["state.apply"], calls: { "state.apply": { args: ["web"], mods: ["web"] } } };
		expect(
			deny(scope, "state.apply", ["web"], { test: true, queue: true, saltenv: "base", pillarenv: "base" }),
		).toBeNull();
		expect(deny(scope, "state.apply", ["web"], { exclude: "x" })).toBe(
			"keyword 'exclude' of state.apply is not allowed by scope.calls['state.apply']",
		);
		const modsOnly = {
			functions: ["state.apply"],
			calls: { "state.apply": { kwargs: { exclude: ".*" }, mods: ["web*"] } },
		};
		expect(deny(modsOnly, "state.apply", [], { mods: "web" })).toBeNull();
		expect(deny(modsOnly, "state.apply", ["webserver"])).toBeNull();
		expect(deny(modsOnly, "state.apply", ["db"])).toBe("sls db not allowed by scope.calls['state.apply'].mods (web*)");
		expect(
			deny({ functions: ["state.apply"], calls: { "state.apply": { kwargs: { exclude: ".*" } } } }, "state.apply", [], {
				mods: "web",
			}),
		).toBe("keyword 'mods' of state.apply is not allowed by scope.calls['state.apply']");
		// state.sls_id reads its sls names second.
		const byId = { functions: ["state.sls_id"], calls: { "state.sls_id": { args: ["nginx"], mods: ["web"] } } };
		expect(deny(byId, "state.sls_id", ["nginx", "web"])).toBe(
			"argument 2 of state.sls_id is not allowed by scope.calls['state.sls_id'] (it allows 1 positional argument)",
		);
		const byIdMods = { functions: ["state.sls_id"], calls: { "state.sls_id": { mods: ["web"] } } };
		expect(deny(byIdMods, "state.sls_id", ["nginx", "db"])).toBe(
			"sls db not allowed by scope.calls['state.sls_id'].mods (web)",
		);
		expect(deny(byIdMods, "state.sls_id", ["nginx", "web"])).toBeNull();
		// Only the sls position is the mods rule's: a matcher that restricts keywords still counts the others.
		const byIdKw = {
			functions: ["state.sls_id"],
			calls: { "state.sls_id": { kwargs: { exclude: ".*" }, mods: ["web"] } },
		};
		expect(deny(byIdKw, "state.sls_id", ["nginx", "web"])).toBe(
			"argument 1 of state.sls_id is not allowed by scope.calls['state.sls_id'] (it allows 0 positional arguments)",
		);
		// Without a mods rule, the sls position is an argument like any other.
		const kwOnly = { functions: ["state.apply"], calls: { "state.apply": { kwargs: { exclude: ".*" } } } };
		expect(deny(kwOnly, "state.apply", ["db"])).toBe(
			"argument 1 of state.apply is not allowed by scope.calls['state.apply'] (it allows 0 positional arguments)",
		);
	});

	it("reads sls names given as a comma list, a list, or mods=; refuses what cannot be read and the whole highstate", () => {
		const scope = { functions: ["state.apply", "state.highstate"], calls: { "state.*": { mods: ["web", "common"] } } };
		expect(deny(scope, "state.apply", [" web , common ,"])).toBeNull();
		expect(deny(scope, "state.apply", [], { mods: ["web", "common"] })).toBeNull();
		expect(deny(scope, "state.apply", [], { mods: ["web", 5] })).toBe(
			"scope.calls['state.*'] restricts the sls names, and state.apply names them in a form that cannot be read (give mods as a name, a comma list or a list of names)",
		);
		expect(deny(scope, "state.apply", [], { mods: { web: 1 } })).toMatch(/in a form that cannot be read/);
		for (const mods of ["", null])
			expect(deny(scope, "state.apply", [], { mods })).toBe(
				"scope.calls['state.*'] restricts the sls names, and state.apply without mods applies the whole highstate",
			);
		// The kwarg wins over the position.
		expect(deny(scope, "state.apply", ["web"], { mods: "db" })).toBe(
			"sls db not allowed by scope.calls['state.*'].mods (web, common)",
		);
		// A function that takes no sls names cannot be read for them.
		expect(deny(scope, "state.highstate")).toMatch(/state\.highstate names them in a form that cannot be read/);
		expect(deny(scope, "state.apply", ["a,b,c,d,e,f,g,h,i,j,k,l"])).toBe(
			"sls a, b, c, d, e, f, g, h, i, j not allowed by scope.calls['state.*'].mods (web, common)",
		);
	});

	it("checks saltenv and pillarenv against every matcher's list", () => {
		const env = {
			functions: ["state.apply"],
			calls: { "state.*": { saltenv: ["base", "dev"] }, "state.apply": { pillarenv: ["dev"] } },
		};
		expect(deny(env, "state.apply", [], { saltenv: "dev", pillarenv: "dev" })).toBeNull();
		expect(deny(env, "state.apply", [], { pillarenv: "base" })).toBe(
			"pillarenv 'base' is not among scope.calls['state.apply'].pillarenv",
		);
		expect(deny(env, "state.apply", ["saltenv=[dev]"])).toBe(
			"saltenv '[dev]' is not among scope.calls['state.*'].saltenv",
		);
		expect(deny(env, "state.apply", [], { saltenv: "y".repeat(300) })).toBe(
			`saltenv '${"y".repeat(100)}' is not among scope.calls['state.*'].saltenv`,
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { saltenv: "base", pillarenv: "base" })).toBeNull();
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { pillarenv: "x".repeat(300) })).toBe(
			`pillarenv '${"x".repeat(100)}' is refused for a scoped token: only base, unless a scope.calls entry for state.apply lists it in its pillarenv`,
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { saltenv: 5 })).toBe(
			"saltenv '5' is refused for a scoped token: only base, unless a scope.calls entry for state.apply lists it in its saltenv",
		);
		// Two matchers apply: each one's list must have it.
		const both = {
			functions: ["state.apply"],
			calls: { "state.*": { saltenv: ["base", "dev"] }, "state.apply": { saltenv: ["base"] } },
		};
		expect(deny(both, "state.apply", [], { saltenv: "dev" })).toBe(
			"saltenv 'dev' is not among scope.calls['state.apply'].saltenv",
		);
		// A token without a function limit is not held to base.
		expect(deny({ groups: ["g"] } as FunctionScope, "state.apply", [], { saltenv: "prod" })).toBeNull();
	});

	it("names the guarded keyword, and lets a matcher of the function allow it by naming it", () => {
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { localconfig: "/tmp/x" })).toBe(
			"keyword 'localconfig' is refused for a scoped token (it loads the minion's options from another file); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { __pub_fun: "x" })).toBe(
			"keyword '__pub_fun' is refused for a scoped token (Salt's own publication data)",
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { pillar_enc: "gpg" })).toBe(
			"keyword 'pillar_enc' is refused for a scoped token (it sends encrypted pillar overrides); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { concurrent: true })).toBe(
			"keyword 'concurrent' is refused for a scoped token (it runs the state run beside another one, without the state lock); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
		);
		expect(deny({ functions: ["state.apply"] }, "state.apply", [], { pillar: {} })).toBe(
			"keyword 'pillar' is refused for a scoped token (it overrides the pillar data a state run sees); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
		);
		// A matcher that names other keywords does not allow it; one for another function neither.
		expect(
			deny({ functions: ["state.apply"], calls: { "state.apply": { kwargs: { exclude: ".*" } } } }, "state.apply", [], {
				concurrent: true,
			}),
		).toMatch(/^keyword 'concurrent' is refused for a scoped token/);
		expect(
			deny(
				{ functions: ["state.apply"], calls: { "state.sls": { kwargs: { concurrent: ".*" } } } },
				"state.apply",
				[],
				{ concurrent: true },
			),
		).toMatch(/^keyword 'concurrent' is refused for a scoped token/);
		expect(
			deny(
				{ functions: ["state.apply"], calls: { "state.apply": { kwargs: { concurrent: "true" } } } },
				"state.apply",
				[],
				{ concurrent: true },
			),
		).toBeNull();
		// Even a matcher cannot allow Salt's own publication data.
		expect(
			deny(
				{ functions: ["state.apply"], calls: { "state.apply": { kwargs: { __pub_fun: ".*" } } } },
				"state.apply",
				[],
				{ __pub_fun: "x" },
			),
		).toMatch(/Salt's own publication data/);
	});

	it("grants everything to a scope without functions, and applies its matchers still", () => {
		expect(callDenial(undefined, call("cmd.run", ["id"]))).toBeNull();
		expect(deny({ calls: { "cmd.run": { args: ["ls"] } } }, "cmd.run", ["id"])).toBe(
			"argument 1 of cmd.run does not match scope.calls['cmd.run'].args[0]",
		);
		expect(deny({ calls: { "cmd.run": { args: ["ls"] } } }, "test.ping")).toBeNull();
		// Every matcher of the function is applied: one that allows does not stand for another that refuses.
		expect(
			deny({ functions: ["cmd.run"], calls: { "cmd.*": { args: [".*"] }, "cmd.run": { args: ["ls"] } } }, "cmd.run", [
				"id",
			]),
		).toBe("argument 1 of cmd.run does not match scope.calls['cmd.run'].args[0]");
	});
});

describe("what a scope grants, compared: the edges", () => {
	it("flags an exact name of a dangerous or unknown function, not a glob or class that reads", () => {
		expect(grantsArbitrary([])).toBe(false);
		expect(grantsArbitrary(["cmd.*"])).toBe(false);
		expect(grantsArbitrary(["*"])).toBe(false);
		expect(grantsArbitrary(["@secrets", "@change"])).toBe(false);
		expect(grantsArbitrary(["test.ping", "cmd.run"])).toBe(true);
		expect(grantsArbitrary(["test.ping"])).toBe(false);
	});

	it("refuses what a scope without a functions list would grant, and keeps matchers as they are", () => {
		expect(functionsExceed({ functions: ["test.*"] }, undefined)).toBe(
			"your scope limits the functions: give scope.functions, among yours",
		);
		expect(functionsExceed({ functions: ["test.*"] }, { calls: {} })).toBe(
			"your scope limits the functions: give scope.functions, among yours",
		);
		expect(functionsExceed({}, undefined)).toBeNull();
		expect(functionsExceed({ functions: ["@arbitrary"] }, { functions: ["@arbitrary"] })).toBeNull();
		expect(functionsExceed({ functions: ["test.*", "cmd.run"] }, { functions: ["cmd.run", "test.ping"] })).toBeNull();
		expect(functionsExceed({ functions: ["test.ping"] }, { functions: ["test.echo", "test.ping", "cmd.run"] })).toBe(
			"functions outside your scope: test.echo, cmd.run",
		);
		expect(functionsExceed({ functions: ["cmd.run"] }, { functions: ["x.y"] })).toBe(
			"functions outside your scope: x.y",
		);
		const calls = { "cmd.run": { args: ["ls"] }, "state.*": { mods: ["web"] } };
		expect(functionsExceed({ calls }, { calls: { "cmd.run": { args: ["ls"] } } })).toBe(
			"your scope restricts the arguments of state.*: keep those scope.calls entries as they are",
		);
		expect(functionsExceed({ calls }, undefined)).toBe(
			"your scope restricts the arguments of cmd.run, state.*: keep those scope.calls entries as they are",
		);
		expect(functionsExceed({ calls }, { calls: { ...calls, "pkg.*": { args: [] } } })).toBeNull();
	});

	it("grants a glob only catalogued functions that read or change", () => {
		expect(grantsName(["*"], "test.ping")).toBe(true);
		expect(grantsName(["*"], "test.get_opts")).toBe(false);
		expect(grantsName(["pkg.*"], "test.ping")).toBe(false);
		expect(grantsName([], "test.ping")).toBe(false);
		expect(grantsName(["test.ping", "@arbitrary"], "cmd.run")).toBe(true);
		expect(entryGrants("@change", "test.ping")).toBe(false);
		expect(entryGrants("@secrets", "test.get_opts")).toBe(true);
		expect(entryGrants("test.ping", "test.pin")).toBe(false);
	});
});
