/**
 * Scopes grant exactly what they say (issue 43, docs/security.md "Scopes"): Salt functions that run other functions
 * (test.try, state.single, saltutil.mmodule, mine.send, schedule.add, …) are not granted by a glob, a relay also needs
 * what it runs, argument matchers and guarded keywords hold, and a dry run is only what Salt runs as one. Everything is
 * tried through the HTTP API against the salt-api simulator, whose execution log lists what ran on each minion —
 * functions run by another one included (`via`) — so "cmd.run ran on web-01" and "nothing ran" are facts, not guesses.
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, type Harness } from "./support/harness";
import { request, expectEveError, eventually, withQuery } from "./support/http";
import { FleetRepl } from "../lib/repl/commands";
import { formatHttpDate } from "../lib/eve/dates";

/** The issue's table: a glob scope, and the calls it let through that ran cmd.run (or read the minion's secrets). */
const ESCAPES: Array<{ scope: string; fun: string; arg?: unknown[]; kwarg?: Record<string, unknown>; runs: RegExp }> = [
	{ scope: "test.*", fun: "test.try", kwarg: { module: "cmd.run", cmd: "id" }, runs: /^cmd\.run$/ },
	{ scope: "test.*", fun: "test.cross_test", arg: ["cmd.run", ["id"]], runs: /^cmd\.run$/ },
	{ scope: "state.*", fun: "state.single", arg: ["cmd.run"], kwarg: { name: "id" }, runs: /^cmd\.run_all$/ },
	{
		scope: "state.*",
		fun: "state.single",
		arg: ["module.run"],
		kwarg: { name: "cmd.run", cmd: "id" },
		runs: /^cmd\.run$/,
	},
	{
		scope: "state.*",
		fun: "state.low",
		kwarg: { data: { state: "cmd", fun: "run", name: "id", __id__: "id" } },
		runs: /^cmd\.run_all$/,
	},
	{
		scope: "state.*",
		fun: "state.high",
		kwarg: { data: { evil: { cmd: ["run", { name: "id" }] } } },
		runs: /^cmd\.run_all$/,
	},
	{ scope: "state.*", fun: "state.template_str", arg: ["{{ salt['cmd.run']('id') }}"], runs: /^cmd\.run$/ },
	{ scope: "saltutil.*", fun: "saltutil.mmodule", arg: ["base", "cmd.run", "id"], runs: /^cmd\.run$/ },
	{
		scope: "mine.*",
		fun: "mine.send",
		arg: ["ids"],
		kwarg: { mine_function: "cmd.run", cmd: "id" },
		runs: /^cmd\.run$/,
	},
	{
		scope: "schedule.*",
		fun: "schedule.add",
		arg: ["evil"],
		kwarg: { function: "cmd.run", job_args: ["id"], seconds: 60 },
		runs: /^cmd\.run$/,
	},
];

describe("scopes grant exactly what they say, decided on the effective call", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const [WEB1, WEB2, DB1] = ["web-01", "web-02", "db-01"];
	let webGroup = "";
	const tokens: Record<string, { id: string; secret: string; body: Record<string, unknown> }> = {};

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	const as = (who: string, method: string, path: string, body?: unknown) =>
		request(method, url(path), { token: tokens[who].secret, body });
	const newToken = async (name: string, role: string, scope?: Record<string, unknown>) => {
		const res = await request("POST", url("tokens"), { body: { name, role, ...(scope ? { scope } : {}) } });
		if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`);
		tokens[name] = { id: res.body._id, secret: res.body.token, body: res.body };
	};
	const inSeconds = (s: number) => formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000));
	/** What ran on `host` since index `from` of the execution log, published or run by another function. */
	const ranOn = (host: string, from: number) =>
		sim
			.executions()
			.slice(from)
			.filter(e => e.id === host);
	const cmdRanOn = (host: string, from: number) => ranOn(host, from).filter(e => e.fun.startsWith("cmd."));
	/**
	 * Nothing the refused requests could have started ran: a marker published afterwards is the only thing in the
	 * log since `from` (a run starts, if at all, before the request's answer; the marker comes after all of them).
	 */
	const expectNothingRan = async (from: number) => {
		const marker = `marker-${Math.random().toString(36).slice(2)}`;
		expect(
			(await request("POST", url(`hosts/${DB1}`), { body: { cm_client: "local", fun: "test.echo", arg: [marker] } }))
				.status,
		).toBe(200);
		expect(
			sim
				.executions()
				.slice(from)
				.map(e => [e.id, e.fun, e.via ?? null]),
		).toEqual([[DB1, "test.echo", null]]);
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			ids: [WEB1, WEB2, DB1],
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
			async () => ((await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === 3 ? true : undefined),
			10_000,
			"the inventory",
		);
		webGroup = (await request("POST", url("groups"), { body: { name: "se-web", hosts: [WEB1, WEB2] } })).body._id;
		for (const glob of new Set(ESCAPES.map(e => e.scope)))
			await newToken(`glob ${glob}`, "operator", { groups: [webGroup], functions: [glob] });
		await newToken("arbitrary", "operator", { groups: [webGroup], functions: ["@arbitrary"] });
		await newToken("op-any", "operator");
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("the issue's table: a glob never grants a function that runs arbitrary code", () => {
		it.each(ESCAPES.map(e => [e.scope, e.fun, e]))(
			"a token scoped %s: %s is refused with a 403 saying why, and nothing ran",
			async (scope, fun, e) => {
				const from = sim.executions().length;
				const res = await as(`glob ${scope}`, "POST", `hosts/${WEB1}`, {
					cm_client: "local",
					fun,
					...(e.arg ? { arg: e.arg } : {}),
					...(e.kwarg ? { kwarg: e.kwarg } : {}),
				});
				expect(expectEveError(res, 403)._error.message).toBe(
					`the run is refused: function '${fun}' is outside the token's scope (it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob)`,
				);
				await expectNothingRan(from);
			},
		);

		it("refuses test.get_opts (the minion's configuration, its secrets) to test.*", async () => {
			const from = sim.executions().length;
			expect(
				expectEveError(
					await as("glob test.*", "POST", `hosts/${WEB1}`, { cm_client: "local", fun: "test.get_opts" }),
					403,
				)._error.message,
			).toMatch(
				/'test\.get_opts' is outside the token's scope \(it reveals secrets: only its exact name or @secrets grants it/,
			);
			await expectNothingRan(from);
			await newToken("secrets", "operator", { groups: [webGroup], functions: ["@secrets"] });
			// Granted, it runs (what salt-api answers for it is its own: a real 3006.0 salt-api cannot encode the
			// minion's opts in JSON and answers 500, test/simulators/forged-events.spec.ts).
			const ran = sim.executions().length;
			expect(
				(await as("secrets", "POST", `hosts/${WEB1}`, { cm_client: "local", fun: "test.get_opts" })).status,
			).not.toBe(403);
			await eventually(
				async () => (ranOn(WEB1, ran).some(x => x.fun === "test.get_opts") ? true : undefined),
				5000,
				"test.get_opts on web-01",
			);
			const opts = await as("secrets", "POST", `hosts/${WEB1}`, {
				cm_client: "local",
				fun: "config.get",
				arg: ["mysql.pass"],
			});
			expect(opts.status).toBe(200);
		});

		it.each(ESCAPES.map(e => [e.fun, e]))(
			"%s runs with a scope naming it exactly (and what it runs), or @arbitrary: cmd.run visibly ran on web-01",
			async (fun, e) => {
				const name = `exact ${fun} ${JSON.stringify(e.arg ?? e.kwarg).length}`;
				// A relay that names what it runs needs that granted too (state.single names a state function, cmd.run); state.low,
				// high and template_str run what their data describes.
				// state.single module.run names module.run (a state function no catalogue entry knows: granted by its exact name).
				const inner = [
					"test.try",
					"test.cross_test",
					"saltutil.mmodule",
					"mine.send",
					"schedule.add",
					"state.single",
				].includes(fun)
					? [(e.arg as string[] | undefined)?.[0] === "module.run" ? "module.run" : "cmd.run"]
					: [];
				await newToken(name, "operator", { groups: [webGroup], functions: [fun, ...inner] });
				for (const who of [name, "arbitrary"]) {
					// Each schedule.add adds a job of its own name (a name taken is refused on the minion).
					const arg = fun === "schedule.add" ? [`evil-${who}`] : e.arg;
					const from = sim.executions().length;
					const res = await as(who, "POST", `hosts/${WEB1}`, {
						cm_client: "local",
						fun,
						...(arg ? { arg } : {}),
						...(e.kwarg ? { kwarg: e.kwarg } : {}),
					});
					expect(res.status).toBe(200);
					const ran = ranOn(WEB1, from).filter(x => x.via === fun);
					expect(ran.map(x => x.fun)).toEqual([expect.stringMatching(e.runs)]);
					if (fun === "schedule.add") expect(ran[0].scheduled).toBe(true);
				}
			},
		);

		it("refuses a relay named exactly when what it runs is not granted, naming it; runs it when it is", async () => {
			await newToken("try-ping", "operator", { groups: [webGroup], functions: ["test.try", "test.*"] });
			const from = sim.executions().length;
			const res = await as("try-ping", "POST", `hosts/${WEB1}`, {
				cm_client: "local",
				fun: "test.try",
				kwarg: { module: "cmd.run", cmd: "id" },
			});
			expect(expectEveError(res, 403)._error.message).toMatch(
				/function 'test\.try' would run 'cmd\.run', which is outside the token's scope/,
			);
			// The kwarg dict wins over the key=value word, as on the minion: what is checked is what runs.
			const split = await as("try-ping", "POST", `hosts/${WEB1}`, {
				cm_client: "local",
				fun: "test.try",
				arg: ["module=test.ping"],
				kwarg: { module: "cmd.run", cmd: "id" },
			});
			expect(expectEveError(split, 403)._error.message).toMatch(/would run 'cmd\.run'/);
			expect(
				expectEveError(
					await as("try-ping", "POST", `hosts/${WEB1}`, { cm_client: "local", fun: "test.try", kwarg: { cmd: "id" } }),
					403,
				)._error.message,
			).toMatch(/do not name plainly: only @arbitrary/);
			await expectNothingRan(from);
			const ok = await as("try-ping", "POST", `hosts/${WEB1}`, {
				cm_client: "local",
				fun: "test.try",
				arg: ["module=cmd.run"],
				kwarg: { module: "test.ping" },
			});
			expect(ok.status).toBe(200);
			expect(cmdRanOn(WEB1, from)).toEqual([]);
			expect(
				ranOn(WEB1, from)
					.filter(x => x.via === "test.try")
					.map(x => x.fun),
			).toEqual(["test.ping"]);
		});
	});

	describe("argument matchers, sls names and guarded keywords", () => {
		beforeAll(async () => {
			await newToken("matched", "operator", {
				groups: [webGroup],
				functions: ["state.apply", "cmd.run"],
				calls: {
					"state.apply": { mods: ["common", "patches.*"], saltenv: ["base"] },
					"cmd.run": { args: ["echo [a-z ]+"] },
				},
			});
		});

		it("runs what the matchers allow", async () => {
			const from = sim.executions().length;
			for (const body of [
				{ fun: "state.apply", arg: ["common"] },
				{ fun: "state.apply", kwarg: { mods: "patches.fix-ntp,common", test: true } },
				{ fun: "state.apply", arg: ["mods=common", "saltenv=base"] },
				{ fun: "cmd.run", arg: ["echo hello world"] },
			]) {
				expect([body, (await as("matched", "POST", `hosts/${WEB1}`, { cm_client: "local", ...body })).status]).toEqual([
					body,
					200,
				]);
			}
			expect(ranOn(WEB1, from).map(e => e.fun)).toEqual(["state.apply", "state.apply", "state.apply", "cmd.run"]);
			// …and only that: the same functions with other arguments are refused (below, one by one).
			expectEveError(
				await as("matched", "POST", `hosts/${WEB1}`, { cm_client: "local", fun: "cmd.run", arg: ["id"] }),
				403,
			);
		});

		it.each([
			[
				{ fun: "state.apply", arg: ["webserver"] },
				"sls webserver not allowed by scope.calls['state.apply'].mods (common, patches.*)",
			],
			[
				{ fun: "state.apply", arg: ["common"], kwarg: { mods: "common,webserver" } },
				"sls webserver not allowed by scope.calls['state.apply'].mods (common, patches.*)",
			],
			[
				{ fun: "state.apply" },
				"scope.calls['state.apply'] restricts the sls names, and state.apply without mods applies the whole highstate",
			],
			[
				{ fun: "state.apply", arg: ["common"], kwarg: { saltenv: "dev" } },
				"saltenv 'dev' is not among scope.calls['state.apply'].saltenv",
			],
			[
				{ fun: "state.apply", arg: ["common"], kwarg: { pillar: { admin: true } } },
				"keyword 'pillar' is refused for a scoped token (it overrides the pillar data a state run sees); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
			],
			[
				{ fun: "state.apply", arg: ["common", "localconfig=/tmp/evil.conf"] },
				"keyword 'localconfig' is refused for a scoped token (it loads the minion's options from another file); a scope.calls entry for state.apply may allow it by naming it in its kwargs",
			],
			[
				{ fun: "state.apply", arg: ["common"], kwarg: { __pub_user: "root" } },
				"keyword '__pub_user' is refused for a scoped token (Salt's own publication data)",
			],
			[{ fun: "cmd.run", arg: ["echo hi; id"] }, "argument 1 of cmd.run does not match scope.calls['cmd.run'].args[0]"],
			[{ fun: "cmd.run", kwarg: { cmd: "id" } }, "keyword 'cmd' of cmd.run is not allowed by scope.calls['cmd.run']"],
			[
				{ fun: "cmd.run", arg: ["echo hi"], kwarg: { runas: "root", shell: "/bin/sh" } },
				"keyword 'runas' of cmd.run is not allowed by scope.calls['cmd.run']",
			],
		])("refuses %j: %s", async (body, why) => {
			const from = sim.executions().length;
			expect(
				expectEveError(await as("matched", "POST", `hosts/${WEB1}`, { cm_client: "local", ...body }), 403)._error
					.message,
			).toBe(`the run is refused: ${why}`);
			await expectNothingRan(from);
		});

		it("refuses a scope whose pattern is not RE2 or whose entries are not names, globs or classes (422)", async () => {
			const bad = await request("POST", url("tokens"), {
				body: {
					name: "bad",
					role: "operator",
					scope: { functions: ["@everything", "cmd.run"], calls: { "cmd.run": { args: ["(a"] } } },
				},
			});
			const issues = expectEveError(bad, 422)._issues;
			expect(JSON.stringify(issues)).toMatch(/functions/);
			expect(JSON.stringify(issues)).toMatch(/not a valid RE2 pattern: error parsing regexp: missing closing \)/);
		});
	});

	describe("what a token can do, said in its record", () => {
		it("shows arbitrary_code and its warning on create, item and list", async () => {
			const cases: Array<[string, string, Record<string, unknown> | undefined, boolean]> = [
				["rec-read", "operator", { functions: ["test.*", "state.*", "@secrets"] }, false],
				["rec-relay", "operator", { functions: ["test.*", "test.try"] }, true],
				["rec-unknown", "operator", { functions: ["foo.bar"] }, true],
				["rec-class", "operator", { functions: ["@arbitrary"] }, true],
				["rec-any", "operator", undefined, true],
				["rec-groups", "admin", { groups: [webGroup] }, true],
				["rec-viewer", "viewer", undefined, false],
			];
			for (const [name, role, scope, arbitrary] of cases) {
				await newToken(name, role, scope);
				const shown = arbitrary
					? { arbitrary_code: true, warning: "this token can run any command as root on its hosts" }
					: { arbitrary_code: false };
				expect(tokens[name].body).toMatchObject(shown);
				const item = (await request("GET", url(`tokens/${tokens[name].id}`))).body;
				expect(item).toMatchObject(shown);
				if (!arbitrary) expect(item.warning).toBeUndefined();
				const listed = (await request("GET", url("tokens", { where: { name } }))).body._items;
				expect(listed).toEqual([expect.objectContaining(shown)]);
			}
		});
	});

	describe("a token one makes for oneself (POST /api/tokens/mine)", () => {
		it("grants only what the maker's scope grants, compared by what the entries grant, and says what it can do", async () => {
			await newToken("star", "operator", { groups: [webGroup], functions: ["*"] });
			const mine = (name: string, scope: Record<string, unknown>) =>
				request("POST", url("tokens/mine"), {
					token: tokens.star.secret,
					body: { name, scope: { groups: [webGroup], ...scope } },
				});
			// `*` matches the text "test.try", but grants no function that runs arbitrary code.
			expect(expectEveError(await mine("child-relay", { functions: ["test.try"] }), 403)._error.message).toBe(
				"a token you make may not reach further than you: functions outside your scope: test.try",
			);
			expect(expectEveError(await mine("child-arbitrary", { functions: ["@arbitrary"] }), 403)._error.message).toBe(
				"a token you make may not reach further than you: functions outside your scope: @arbitrary",
			);
			const ok = await mine("child-classes", { functions: ["@read", "@change"] });
			expect(ok.status).toBe(201);
			expect(ok.body).toMatchObject({ arbitrary_code: false });
			const listed = (await request("GET", url("tokens/mine"), { token: tokens.star.secret })).body._items;
			expect(listed).toEqual([expect.objectContaining({ name: "child-classes", arbitrary_code: false })]);
		});
	});

	describe("a dry run is what Salt runs as one", () => {
		const CLOSED = { rrule: "FREQ=YEARLY", start: "2027-06-01T00:00", timezone: "UTC", duration: "P1D" };
		const SPLIT = { fun: "state.apply", arg: ["test=True"], kwarg: { test: false } };
		const TEMPLATE = { fun: "state.template_str", arg: ["{{ salt['cmd.run']('id') }}", "test=True"] };

		it("governs the split, state.run_request test=True and state.template_str test=True: a closed window refuses them", async () => {
			// The simulator follows the effective test, as a minion: the split applies for real, test=True in the kwarg dict does not.
			// patches.fix-ntp runs commands: a dry run's result is None for them, a real one's true.
			const real = await request("POST", url(`hosts/${DB1}`), {
				body: { cm_client: "local", ...SPLIT, arg: ["patches.fix-ntp", "test=True"] },
			});
			const dry = await request("POST", url(`hosts/${DB1}`), {
				body: { cm_client: "local", fun: "state.apply", arg: ["patches.fix-ntp", "test=False"], kwarg: { test: true } },
			});
			const results = (res: { body: unknown }) =>
				[...JSON.stringify(res.body).matchAll(/"result": ?(true|false|null)/g)].map(m => m[1]);
			expect(results(real)).toContain("true");
			expect(results(real)).not.toContain("null");
			expect(results(dry)).toContain("null");
			const w = (
				await request("POST", url("maintenance_windows"), {
					body: { name: "se-closed", targets: { target: `L@${WEB1}` }, functions: ["state.*", "cmd.*"], ...CLOSED },
				})
			).body._id;
			try {
				const from = sim.executions().length;
				for (const body of [
					SPLIT,
					{ fun: "state.apply", arg: ["test=True", { __kwarg__: true, test: false }] },
					{ fun: "state.run_request", kwarg: { test: true } },
					TEMPLATE,
					{ fun: "state.sls", arg: ["common"], kwarg: { test: "yes" } },
				]) {
					const res = await as("op-any", "POST", `hosts/${WEB1}`, { cm_client: "local", ...body });
					expect([body, res.status]).toEqual([body, 409]);
					expect(res.body._error.message).toMatch(
						new RegExp(`^${body.fun.replace(".", "\\.")} is outside the maintenance windows of ${WEB1}`),
					);
				}
				// A relay is governed by what it runs: a window on cmd.* governs test.try module=cmd.run.
				expect(
					expectEveError(
						await as("op-any", "POST", `hosts/${WEB1}`, {
							cm_client: "local",
							fun: "test.try",
							kwarg: { module: "cmd.run", cmd: "id" },
						}),
						409,
					)._error.message,
				).toMatch(/^test\.try is outside the maintenance windows/);
				await expectNothingRan(from);
				// A real dry run still passes the window.
				const dry = await as("op-any", "POST", `hosts/${WEB1}`, {
					cm_client: "local",
					fun: "state.apply",
					arg: ["test=False"],
					kwarg: { test: true },
				});
				expect(dry.status).toBe(200);
				expect(ranOn(WEB1, from).map(e => e.fun)).toEqual(["state.apply"]);
			} finally {
				await request("DELETE", url(`maintenance_windows/${w}`));
			}
		});

		it("holds the split for approval like any state run, and runs nothing until it is approved", async () => {
			const p = (
				await request("POST", url("approval_policies"), {
					body: {
						name: "se-states",
						targets: { target: `L@${WEB2}` },
						functions: ["state.*", "cmd.*"],
						approvers: { count: 1, roles: ["admin"] },
					},
				})
			).body._id;
			try {
				const from = sim.executions().length;
				for (const body of [
					SPLIT,
					{ fun: "state.run_request", kwarg: { test: true } },
					TEMPLATE,
					{ fun: "saltutil.mmodule", arg: ["base", "cmd.run", "id"] },
				]) {
					const res = await as("op-any", "POST", `hosts/${WEB2}`, { cm_client: "local", ...body });
					expect([body, res.status, res.body.status]).toEqual([body, 202, "pending_approval"]);
				}
				// Only the approvers' preview ran: the split's own dry run (test=True in the kwarg dict), nothing else.
				await new Promise(r => setTimeout(r, 300));
				const ran = ranOn(WEB2, from);
				expect(ran.map(e => e.fun)).toEqual(["state.apply"]);
				expect(ran[0].arg).toEqual(["test=True", { __kwarg__: true, test: true }]);
			} finally {
				await request("DELETE", url(`approval_policies/${p}`));
			}
		});
	});

	describe("every path to a run, with tokens of each class", () => {
		const CLASSES = ["@read", "@change", "@secrets", "@arbitrary"] as const;
		const RELAY = { fun: "test.try", kwarg: { module: "cmd.run", cmd: "id" } };
		beforeAll(async () => {
			for (const c of CLASSES) await newToken(`class ${c}`, "operator", { groups: [webGroup], functions: [c] });
		});

		it.each([
			["@read", { fun: "test.ping" }],
			["@change", { fun: "state.apply", arg: ["common"] }],
			["@secrets", { fun: "config.get", arg: ["mysql.pass"] }],
			["test.*", { fun: "test.echo", arg: ["hi"] }],
			["*", { fun: "pkg.list_upgrades" }],
		] as Array<[string, Record<string, unknown>]>)(
			"a %s token runs its own (%j) but the relay is refused on every path (API host, group, compound, task, rollout, approval, REPL), nothing ran",
			async (c, own) => {
				const who = `class ${c}`;
				if (!tokens[who]) await newToken(who, "operator", { groups: [webGroup], functions: [c] });
				expect((await as(who, "POST", `hosts/${WEB1}`, { cm_client: "local", ...own })).status).toBe(200);
				const from = sim.executions().length;
				const why = /function 'test\.try' is outside the token's scope/;
				expect(
					expectEveError(await as(who, "POST", `hosts/${WEB1}`, { cm_client: "local", ...RELAY }), 403)._error.message,
				).toMatch(why);
				expect(expectEveError(await as(who, "POST", `groups/${webGroup}`, RELAY), 403)._error.message).toMatch(why);
				expect(
					expectEveError(await as(who, "POST", "run", { target: `L@${WEB1}`, ...RELAY }), 403)._error.message,
				).toMatch(why);
				expect(
					expectEveError(
						await as(who, "POST", "tasks", { name: `se-task ${c}`, ...RELAY, tgt: [WEB1], start: inSeconds(0) }),
						403,
					)._error.message,
				).toMatch(why);
				expect(
					expectEveError(
						await as(who, "POST", "rollouts", { name: `se-rollout ${c}`, target: `L@${WEB1}`, ...RELAY }),
						403,
					)._error.message,
				).toMatch(why);
				const repl = new FleetRepl({ url: h.api, token: tokens[who].secret, pollMs: 50, execWaitMs: 5000 });
				expect(await repl.run(`exec ${WEB1} test.try module=cmd.run cmd=id`)).toMatch(
					/^error 403: the run is refused: function 'test\.try' is outside the token's scope/,
				);
				// An approval policy would hold it: refused before any request is made.
				const p = (
					await request("POST", url("approval_policies"), {
						body: { name: `se-hold ${c}`, functions: ["test.*"], approvers: { count: 1, roles: ["admin"] } },
					})
				).body._id;
				try {
					expectEveError(await as(who, "POST", `hosts/${WEB1}`, { cm_client: "local", ...RELAY }), 403);
					expect(
						(await request("GET", url("approvals", { where: { "requester.token": tokens[who].id } }))).body._items,
					).toEqual([]);
				} finally {
					await request("DELETE", url(`approval_policies/${p}`));
				}
				await expectNothingRan(from);
				expect((await request("GET", url("tasks", { where: { name: `se-task ${c}` } }))).body._meta.total).toBe(0);
				expect((await request("GET", url("rollouts", { where: { name: `se-rollout ${c}` } }))).body._meta.total).toBe(
					0,
				);
			},
		);

		it("an @arbitrary token: the relay runs on every path, and cmd.run visibly ran on web-01 each time", async () => {
			const who = "class @arbitrary";
			const from = sim.executions().length;
			expect((await as(who, "POST", `hosts/${WEB1}`, { cm_client: "local", ...RELAY })).status).toBe(200);
			expect((await as(who, "POST", `groups/${webGroup}`, { cm_client: "local", ...RELAY })).status).toBe(200);
			expect((await as(who, "POST", "run", { target: `L@${WEB1}`, cm_client: "local", ...RELAY })).status).toBe(200);
			expect(
				(await as(who, "POST", "tasks", { name: "se-task-arbitrary", ...RELAY, tgt: [WEB1], start: inSeconds(0) }))
					.status,
			).toBe(201);
			expect(
				(await as(who, "POST", "rollouts", { name: "se-rollout-arbitrary", target: `L@${WEB1}`, ...RELAY })).status,
			).toBe(201);
			const repl = new FleetRepl({ url: h.api, token: tokens[who].secret, pollMs: 50, execWaitMs: 5000 });
			expect(await repl.run(`exec ${WEB1} test.try module=cmd.run cmd=id`)).toMatch(/1 of 1 host\(s\) answered/);
			const p = (
				await request("POST", url("approval_policies"), {
					body: { name: "se-hold-arbitrary", functions: ["cmd.*"], approvers: { count: 1, roles: ["admin"] } },
				})
			).body._id;
			try {
				const held = await as(who, "POST", `hosts/${WEB1}`, { cm_client: "local", ...RELAY });
				expect(held.status).toBe(202);
				expect(
					(await request("POST", url(`approvals/${held.body.approval._id}/approve`), { body: {} })).body.status,
				).toBe("done");
			} finally {
				await request("DELETE", url(`approval_policies/${p}`));
			}
			// host, group (web-01 of it), compound, task, rollout, REPL, approval: seven runs of cmd.run through test.try on web-01.
			await eventually(
				async () => (cmdRanOn(WEB1, from).length >= 7 ? true : undefined),
				15_000,
				"seven runs of cmd.run",
			);
			expect(cmdRanOn(WEB1, from).every(e => e.via === "test.try" && e.fun === "cmd.run")).toBe(true);
		});

		it("a conformity fix (state.sls_id, class change): refused to @read, @secrets, @arbitrary and to sls names a matcher excludes; run for @change", async () => {
			await newToken("fix-mods", "operator", {
				groups: [webGroup],
				functions: ["state.*"],
				calls: { "state.*": { mods: ["webserver"] } },
			});
			sim.setDrift(WEB2, "common", "base_packages", { vim: { old: "9.0.1378-2", new: "9.0.1378-2+deb12u1" } });
			try {
				expect(
					(
						await request("POST", url("run"), {
							body: { target: `L@${WEB2}`, cm_client: "local", fun: "state.apply", kwarg: { test: true } },
						})
					).status,
				).toBe(200);
				await eventually(
					async () =>
						(await request("GET", url(`hosts/${WEB2}/conformity`))).body.state === "drifted" ? true : undefined,
					10_000,
					"the check judged",
				);
				const from = sim.executions().length;
				for (const who of ["class @read", "class @secrets", "class @arbitrary"]) {
					expect(expectEveError(await as(who, "POST", `hosts/${WEB2}/conformity/fix`), 403)._error.message).toMatch(
						/function 'state\.sls_id' is outside the token's scope/,
					);
				}
				expect(
					expectEveError(await as("fix-mods", "POST", `hosts/${WEB2}/conformity/fix`), 403)._error.message,
				).toMatch(/sls common not allowed by scope.calls\['state.\*'\].mods \(webserver\)/);
				await expectNothingRan(from);
				// @change last: its fix leaves a check running after it.
				const ok = await as("class @change", "POST", `hosts/${WEB2}/conformity/fix`);
				expect(ok.status).toBeLessThan(300);
				await eventually(
					async () => (ranOn(WEB2, from).some(e => e.fun === "state.sls_id") ? true : undefined),
					10_000,
					"the fix",
				);
			} finally {
				sim.clearDrift(WEB2);
			}
		});
	});
});
