/**
 * lib/http/auth.ts: the run rule (`runDenial`), function globs, and the audit log's masking. Expectations are
 * literal, written from docs/security.md, never computed with the code under test.
 */
import {
	FUNCTION_GLOB,
	ROLES,
	bearerToken,
	functionAllowed,
	globMatches,
	hashToken,
	newToken,
	roleAllows,
	runDenial,
	scopeExceeds,
	type Role,
	type RunCall,
	type Scope,
} from "../../lib/http/auth";
import { entryOf } from "../../lib/security/catalogue";
import { maskSecrets as redact } from "../../lib/security/masking";

const call = (over: Partial<RunCall> = {}): RunCall => ({
	client: "local_async",
	fun: "test.ping",
	targets: ["web-1"],
	...over,
});
const hosts = (...names: string[]) => new Set(names);

describe("roles: viewer < operator < admin (docs/security.md, Roles)", () => {
	it("orders the roles", () => {
		expect(ROLES).toEqual(["viewer", "operator", "admin"]);
	});

	// [role held, role a route needs, allowed]: a literal table, not computed from ROLES.
	it.each([
		["viewer", "viewer", true],
		["viewer", "operator", false],
		["viewer", "admin", false],
		["operator", "viewer", true],
		["operator", "operator", true],
		["operator", "admin", false],
		["admin", "viewer", true],
		["admin", "operator", true],
		["admin", "admin", true],
	] as Array<[Role, Role, boolean]>)("%s where %s is needed: %s", (have, need, want) => {
		expect(roleAllows(have, need)).toBe(want);
	});
});

describe("tokens", () => {
	it("are fct_ and 256 random bits in base64url, never the same twice", () => {
		const a = newToken();
		const b = newToken();
		expect(a).toMatch(/^fct_[A-Za-z0-9_-]{43}$/);
		expect(b).toMatch(/^fct_[A-Za-z0-9_-]{43}$/);
		expect(Buffer.from(a.slice(4), "base64url").length).toBe(32);
		expect(a).not.toBe(b);
	});

	it("are kept as their SHA-256, in hex", () => {
		expect(hashToken("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		expect(hashToken("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	});

	const T16 = "0123456789abcdef";
	it.each([
		[`Bearer ${T16}`, T16],
		[`Token ${T16}`, T16],
		[`bearer ${T16}`, T16],
		[`TOKEN ${T16}`, T16],
		[`Bearer \t ${T16}  `, T16],
		["Bearer fct_Ab-_.~+/=0123456789", "fct_Ab-_.~+/=0123456789"],
		[`Bearer ${"a".repeat(512)}`, "a".repeat(512)],
		[`Bearer ${"a".repeat(15)}`, null],
		[`Bearer ${"a".repeat(513)}`, null],
		[`Bearer${T16}`, null],
		[`Bearer: ${T16}`, null],
		[`xBearer ${T16}`, null],
		[` Bearer ${T16}`, null],
		[`Basic ${T16}`, null],
		[`Bearer ${T16} extra`, null],
		[`Bearer ${T16}!`, null],
		[`Bearer ${T16.slice(0, 8)} ${T16.slice(8)}`, null],
		[`Bearer ${T16}\u00e9`, null],
		[T16, null],
		["", null],
		[undefined, null],
	])("the Authorization header %j gives %j", (header, want) => {
		expect(bearerToken(header)).toBe(want);
	});

	it("scope function globs: letters, digits, _ . and *, 1 to 200 of them", () => {
		for (const ok of ["test.*", "state.apply", "*", "a", "pkg_x.*_y", "a".repeat(200)])
			expect(FUNCTION_GLOB.test(ok)).toBe(true);
		for (const bad of [
			"",
			"a".repeat(201),
			"cmd run",
			"test.ping;rm",
			" test.*",
			"test.* ",
			"x\ny",
			"test.?",
			"a-b",
			"é",
		])
			expect(FUNCTION_GLOB.test(bad)).toBe(false);
	});
});

describe("globMatches: * is the only wildcard; everything else is itself", () => {
	// One test per glob, each glob used here before anywhere else: a glob is compiled once and cached, so the
	// test that uses it first is the one that sees how it was compiled.
	it.each([
		[
			"grains.*",
			["grains.items", "grains.", "grains.a.b"],
			["grainsXitems", "xgrains.items", "grains", "Grains.items"],
		],
		["*.ping", ["test.ping", ".ping"], ["test.pingx", "test.pin", "testXping"]],
		["pillar.item", ["pillar.item"], ["pillar.items", "apillar.item", "pillarXitem", "pillar"]],
		["a*b*c", ["abc", "aXXbYYc"], ["acb", "abcd", "xabc"]],
		[
			"sys.+(x)|[y]^$\\{1}?",
			["sys.+(x)|[y]^$\\{1}?"],
			[
				"sys..(x)|[y]^$\\{1}?",
				"syss+(x)|[y]^$\\{1}?",
				"sys.+x|[y]^$\\{1}?",
				"sys.+(x)",
				"[y]^$\\{1}?",
				"y",
				"sys.+(x)|[y]^$\\{1}",
				"sys.+(x)|y^$\\{1}?",
				"sys.+(x)|[y]^$\\1?",
			],
		],
		["*", ["", "cmd.run"], []],
		["", [""], ["x"]],
	] as Array<[string, string[], string[]]>)("%j", (glob, matching, other) => {
		expect([...matching, ...other].map(v => globMatches(glob, v))).toEqual([
			...matching.map(() => true),
			...other.map(() => false),
		]);
	});
});

describe("runDenial: may this token run this complete call on these hosts?", () => {
	const scoped: Scope = { groups: ["g"], functions: ["test.*", "state.apply"] };

	it.each([
		// [role, scope, call, allowed hosts, expected reason (null: allowed)]
		["operator", undefined, call(), null, null],
		["admin", undefined, call({ fun: "cmd.run", targets: ["any-host"] }), null, null],
		["viewer", undefined, call(), null, "a viewer token cannot run functions"],
		[
			"operator",
			undefined,
			call({ client: "runner" }),
			null,
			"client 'runner' is not allowed (only local, local_async)",
		],
		["operator", undefined, call({ client: "wheel" }), null, "client 'wheel' is not allowed (only local, local_async)"],
		["operator", undefined, call({ client: "local" }), null, null],
		["operator", scoped, call(), hosts("web-1"), null],
		["operator", scoped, call({ fun: "state.apply" }), hosts("web-1"), null],
		[
			"operator",
			scoped,
			call({ fun: "state.highstate" }),
			hosts("web-1"),
			"function 'state.highstate' is outside the token's scope (class change: not named by the scope)",
		],
		[
			"operator",
			scoped,
			call({ fun: "cmd.run" }),
			hosts("web-1"),
			"function 'cmd.run' is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)",
		],
		[
			"operator",
			scoped,
			call({ targets: ["web-1", "db-1"] }),
			hosts("web-1"),
			"targets outside the token's scope: db-1",
		],
		["operator", scoped, call({ targets: ["db-1"] }), hosts(), "targets outside the token's scope: db-1"],
		["operator", { functions: ["test.*"] }, call({ targets: ["anything"] }), null, null],
		[
			"admin",
			scoped,
			call({ fun: "cmd.run" }),
			hosts("web-1"),
			"function 'cmd.run' is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)",
		],
	] as Array<[string, Scope | undefined, RunCall, Set<string> | null, string | null]>)(
		"%s %j %j on %j -> %s",
		(role, scope, c, allowed, want) => {
			expect(runDenial(role as "viewer" | "operator" | "admin", scope, c, allowed)).toBe(want);
		},
	);

	it("names all of 20 hosts outside the scope", () => {
		const targets = Array.from({ length: 20 }, (_, i) => `h${String(i).padStart(2, "0")}`);
		expect(runDenial("operator", { groups: ["g"] }, call({ targets: ["in", ...targets] }), hosts("in"))).toBe(
			"targets outside the token's scope: h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15, h16, h17, h18, h19",
		);
	});

	it("names at most 20 hosts outside the scope, then an ellipsis", () => {
		const targets = Array.from({ length: 25 }, (_, i) => `h${String(i).padStart(2, "0")}`);
		expect(runDenial("operator", { groups: ["g"] }, call({ targets }), hosts())).toBe(
			`targets outside the token's scope: ${targets.slice(0, 20).join(", ")}, …`,
		);
	});
});

describe("functionAllowed", () => {
	it.each([
		[["test.*"], "test.ping", true],
		[["test.*"], "test.", false],
		[["test.*"], "testXping", false],
		[["test.*"], "xtest.ping", false],
		[["state.apply"], "state.apply", true],
		[["state.apply"], "state.applyx", false],
		// A glob grants only catalogued functions that read or change (docs/security.md, "Scopes").
		[["*"], "cmd.run", false],
		[["*"], "test.ping", true],
		[["*"], "saltutil.cmd", false],
		[["saltutil.*"], "saltutil.cmd", false],
		[["saltutil.*"], "saltutil.runner", false],
		[["saltutil.*"], "saltutil.sync_grains", true],
		[["publish.*"], "publish.publish", false],
		[["saltutil.cmd"], "saltutil.cmd", true],
		[["@arbitrary"], "publish.publish", true],
	])("%j allows %s: %s", (functions, fun, want) => {
		expect(functionAllowed({ functions }, fun)).toBe(want);
	});

	// docs/security.md: a glob never grants a function that runs other functions; its exact name or @arbitrary does.
	it.each([
		"saltutil.cmd",
		"saltutil.cmd_iter",
		"saltutil.cmd_iter_no_block",
		"saltutil.runner",
		"saltutil.wheel",
		"publish.publish",
		"publish.full_data",
		"publish.runner",
	])("the relay function %s: refused by every glob, allowed by its literal name or @arbitrary only", fun => {
		const [mod] = fun.split(".");
		expect(functionAllowed({ functions: ["*"] }, fun)).toBe(false);
		expect(functionAllowed({ functions: [`${mod}.*`] }, fun)).toBe(false);
		expect(functionAllowed({ functions: [`${fun}*`, `*${fun}`] }, fun)).toBe(false);
		expect(functionAllowed({ functions: ["test.*", fun] }, fun)).toBe(true);
		expect(runDenial("operator", { functions: ["*"] }, call({ fun }), null)).toMatch(
			new RegExp(`^function '${fun}' is outside the token's scope \\(`),
		);
		// Named exactly, a relay also needs what it runs named: a call that names nothing runs only under @arbitrary.
		const named = runDenial("operator", { functions: [fun] }, call({ fun }), null);
		if (entryOf(fun))
			expect(named).toBe(
				`function '${fun}' runs a function its arguments do not name plainly: only @arbitrary grants it so`,
			);
		else expect(named).toBeNull(); // not in Salt 3006 (saltutil.cmd_iter_no_block): unknown, granted by its exact name
		expect(runDenial("operator", { functions: ["@arbitrary"] }, call({ fun }), null)).toBeNull();
		// It reaches past the hosts it runs on (other minions, the master): never for a token limited to groups.
		if (entryOf(fun))
			expect(
				runDenial("operator", { groups: ["g"], functions: ["@arbitrary"] }, call({ fun }), new Set(["web-1"])),
			).toBe(
				`function '${fun}' acts beyond the hosts it runs on (other minions through the master, or the master itself): a token limited to groups never runs it`,
			);
	});

	it("allows everything, relays included, without a functions list", () => {
		expect(functionAllowed(undefined, "saltutil.cmd")).toBe(true);
		expect(functionAllowed({ groups: ["g"] }, "cmd.run")).toBe(true);
	});
});

describe("maskSecrets, as the audit log masks its arguments", () => {
	it("masks values under secret-looking keys at any depth and keeps every other key as it is, __proto__ included", () => {
		const input = JSON.parse(
			'{"user":"root","password":"p","nested":{"api_key":"k","keep":[{"token":"t","x":1}]},"__proto__":{"polluted":"yes"},"a.b":1,"$x":2}',
		);
		const out = redact(input) as Record<string, unknown>;
		expect(JSON.stringify(out)).toBe(
			'{"user":"root","password":"********","nested":{"api_key":"********","keep":[{"token":"********","x":1}]},"__proto__":{"polluted":"yes"},"a.b":1,"$x":2}',
		);
		expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
	});

	it("masks the secret-looking keys (password, secret, token, otp, key, private, credential), in any case, and only those", () => {
		const secretKeys = [
			"pass",
			"passphrase",
			"Password",
			"db_password",
			"secret",
			"otp_secret",
			"auth_token",
			"TOKEN",
			"otp",
			"private",
			"private_key",
			"credentials",
			"key",
			"KEY",
			"api_key",
			"ssh_KEY",
		];
		const plainKeys = [
			"name",
			"keyboard",
			"monkey",
			"keys",
			"api_key_id",
			"ssh_keys",
			"key_name",
			"akey",
			"pas",
			"cred",
			"tok",
		];
		const input = Object.fromEntries([...secretKeys, ...plainKeys].map(k => [k, "v"]));
		expect(redact(input)).toEqual({
			pass: "********",
			passphrase: "********",
			Password: "********",
			db_password: "********",
			secret: "********",
			otp_secret: "********",
			auth_token: "********",
			TOKEN: "********",
			otp: "********",
			private: "********",
			private_key: "********",
			credentials: "********",
			key: "********",
			KEY: "********",
			api_key: "********",
			ssh_KEY: "********",
			name: "v",
			keyboard: "v",
			monkey: "v",
			keys: "v",
			api_key_id: "v",
			ssh_keys: "v",
			key_name: "v",
			akey: "v",
			pas: "v",
			cred: "v",
			tok: "v",
		});
	});

	it("masks whole values (objects and lists included) and copies dates, buffers and scalars as they are", () => {
		const when = new Date(0);
		const buf = Buffer.from("x");
		const out = redact({
			token: { a: 1 },
			secret: [1, 2],
			password: 0,
			otp: false,
			when,
			buf,
			n: 1,
			s: "x",
			b: true,
			u: undefined,
		}) as Record<string, unknown>;
		expect(out).toEqual({
			token: "********",
			secret: "********",
			password: "********",
			otp: "********",
			when: new Date(0),
			buf: Buffer.from("x"),
			n: 1,
			s: "x",
			b: true,
			u: undefined,
		});
		expect(out.when).toBe(when);
		expect(out.buf).toBe(buf);
		expect(redact([{ password: "p" }, "password"])).toEqual([{ password: "********" }, "password"]);
		expect(redact("password")).toBe("password");
		expect(redact(null)).toBeNull();
	});

	it("keeps 100 levels below the top and cuts the 101st to …", () => {
		const nest = (levels: number, make: (inner: unknown) => unknown) => {
			let v: unknown = "leaf";
			for (let i = 0; i < levels; i++) v = make(v);
			return v;
		};
		// the leaf is at depth 100 under 100 arrays, at 101 under 101
		expect(redact(nest(100, v => [v]))).toEqual(nest(100, v => [v]));
		expect(redact(nest(101, v => [v]))).toEqual(nest(101, v => [v === "leaf" ? "…" : v]));
		expect(redact(nest(100, v => ({ a: v })))).toEqual(nest(100, v => ({ a: v })));
		expect(redact(nest(101, v => ({ a: v })))).toEqual(nest(101, v => ({ a: v === "leaf" ? "…" : v })));
		let deep: unknown = 1;
		for (let i = 0; i < 10_000; i++) deep = { a: deep };
		expect(() => redact(deep)).not.toThrow();
	});

	it("keeps null secrets null (nothing to hide) and cuts what is deeper than its bound instead of overflowing the stack", () => {
		expect(redact({ password: null })).toEqual({ password: null });
		let deep: unknown = 1;
		for (let i = 0; i < 10_000; i++) deep = [deep];
		expect(() => redact(deep)).not.toThrow();
	});
});

describe("scopeExceeds: a token one makes for oneself reaches no further than one's own scope", () => {
	it("lets a caller without a scope give any, and one with a scope only a narrower one, saying what reaches further", () => {
		expect(scopeExceeds(undefined, { functions: ["cmd.run"] })).toBeNull();
		expect(scopeExceeds(undefined, undefined)).toBeNull();
		const mine: Scope = { groups: ["g1", "g2"], functions: ["test.*", "state.apply"] };
		expect(scopeExceeds(mine, { groups: ["g1"], functions: ["test.ping", "test.*", "state.apply"] })).toBeNull();
		expect(scopeExceeds(mine, { groups: ["g1", "g3"], functions: ["test.ping"] })).toBe(
			"groups outside your scope: g3",
		);
		expect(scopeExceeds(mine, { groups: ["g1"], functions: ["cmd.run", "state.*"] })).toBe(
			"functions outside your scope: cmd.run, state.*",
		);
		// Compared by what they grant: every glob grants only read and change functions, all within @read and @change.
		expect(scopeExceeds({ functions: ["@read", "@change"] }, { functions: ["test.*", "state.*", "*"] })).toBeNull();
		expect(scopeExceeds({ functions: ["*"] }, { functions: ["test.try"] })).toBe(
			"functions outside your scope: test.try",
		);
		expect(scopeExceeds(mine, { functions: ["test.ping"] })).toMatch(/give scope.groups/);
		expect(scopeExceeds(mine, { groups: ["g1"] })).toMatch(/give scope.functions/);
		expect(scopeExceeds({ functions: ["test.*"] }, { functions: ["test.ping"] })).toBeNull();
	});
});
