/**
 * The master's nodegroups (issue 46): read from the master at each reconciliation (runner `config.get
 * nodegroups`), expanded as Salt expands them (nested `N@`, lists of ids), evaluated by fleet-ctl's compound
 * evaluator so that `N@x` selects what the master's own `salt -N x` publishes to, kept current, and overridden by
 * local definitions (NODEGROUPS). The expectation is the simulated master's own resolution of the nodegroup.
 */
import fs from "node:fs";
import path from "node:path";
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, eventually } from "../support/http";
import { expandNodegroups } from "../../services/nodegroups/salt-nodegroups";
import { referenceDir } from "../support/reference";
import { itIf } from "../support/skip";

const CAPTURES = referenceDir("salt-3006");

describe("the master's nodegroups, expanded as Salt does", () => {
	itIf(!!CAPTURES, "the real Salt captures are not here")(
		"expands the captured master's nodegroups (nested N@ in parentheses, a list of ids as L@)",
		() => {
			const capture = JSON.parse(
				fs.readFileSync(path.join(CAPTURES ?? "", "more-2026-11-29/nodegroup_matching.json"), "utf8"),
			);
			expect(expandNodegroups(capture.master_nodegroups)).toEqual([
				{ name: "web", target: "web-*" },
				{ name: "databases", target: "L@db-01" },
				{ name: "prod", target: "G@env:prod" },
				{ name: "webprod", target: "( web-* ) and G@env:prod" },
				{ name: "listgroup", target: "L@web-01,db-01" },
			]);
		},
	);

	it("keeps words as given, makes ids with regex characters E@, and says why a definition cannot be expanded", () => {
		const out = expandNodegroups({
			a: "web-01 db-01",
			b: ["db-0[12]"],
			c: "N@d",
			d: "N@c",
			e: "N@nowhere or web-*",
			f: "",
			g: 42,
			h: ["G@os:Debian", "or", "N@b"],
		});
		expect(out.slice(0, 2)).toEqual([
			{ name: "a", target: "L@web-01,db-01" },
			{ name: "b", target: "E@db-0[12]" },
		]);
		expect(out[2]).toEqual({ name: "c", problem: expect.stringContaining("refers to itself (c -> d -> c)") });
		expect(out[4]).toEqual({
			name: "e",
			problem: expect.stringContaining("N@nowhere, which the master does not define"),
		});
		expect(out[5]).toEqual({ name: "f", problem: expect.stringContaining("empty") });
		expect(out[6]).toEqual({ name: "g", problem: expect.stringContaining("not a string or a list") });
		expect(out[7]).toEqual({ name: "h", target: "G@os:Debian or ( db-0[12] )" });
	});
});

describe("N@ on a master's nodegroups (salt-api simulator)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (p: string) => `${h.api}/${p}`;
	const preview = (target: string) => request("POST", url("targets/preview"), { body: { target } });
	/** Who the master publishes `salt -N <name>` to. */
	const masterSelects = (name: string) =>
		[...sim.cliJob(name, "test.ping", [], { tgtType: "nodegroup", user: "ops" })!.minions].sort();
	/** fleet-ctl's preview of N@name, among the hosts whose key the master accepted (the ones it publishes to), once it equals `expected`. */
	const selects = (name: string, expected: string[]) =>
		eventually(
			async () => {
				const res = await preview(`N@${name}`);
				const accepted = (res.body.hosts ?? []).filter((id: string) => sim.minion(id)?.key === "accepted");
				return res.status === 200 && JSON.stringify(accepted) === JSON.stringify(expected) ? accepted : undefined;
			},
			8000,
			`N@${name} selecting ${expected.length} hosts`,
		);

	const MASTER = {
		web: "G@roles:web",
		"site-a": "*.site-a.example",
		"web-site-a": "N@web and N@site-a",
		"gpu-or-build": ["G@roles:gpu", "or", "G@roles:build"],
		loop1: "N@loop2",
		loop2: "N@loop1",
		pillar: "I@role:web",
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({ minions: 24, presenceEvents: false, nodegroups: MASTER });
		await sim.start();
		const local = JSON.stringify({ web: { target: "app-01*" }, mine: "L@nobody" });
		h = await startEmbedded({ env: { ...sim.cmApiEnv, CM_SYNC_INTERVAL_MS: "0", NODEGROUPS: local } });
		// The first reconciliation reads them (CM_SYNC_INTERVAL_MS=0: none is scheduled).
		expect((await request("POST", url("inventory/sync"))).status).toBe(200);
		expect((await request("GET", url("nodegroups?max_results=50"))).body._meta.total).toBe(8);
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("selects what the master publishes to, nested nodegroups and lists included", async () => {
		for (const name of ["site-a", "web-site-a", "gpu-or-build"]) {
			const expected = masterSelects(name);
			expect(expected.length).toBeGreaterThan(0);
			await selects(name, expected);
		}
		expect((await request("GET", url("nodegroups/web-site-a"))).body).toMatchObject({
			name: "web-site-a",
			source: "master",
			info: { target: "( G@roles:web ) and ( *.site-a.example )" },
		});
	});

	it("lets a local definition (NODEGROUPS, with `target`) override the master's, and adds local ones", async () => {
		const web = (await request("GET", url("nodegroups/web"))).body;
		expect(web).toMatchObject({ name: "web", source: "config", info: { target: "app-01*" } });
		expect((await request("GET", url("nodegroups/mine"))).body).toMatchObject({
			source: "config",
			info: { target: "L@nobody" },
		});
		const first = (await preview("app-01*")).body.hosts.filter((id: string) => sim.minion(id)?.key === "accepted");
		expect(first.length).toBe(1);
		await selects("web", first);
	});

	it("refuses N@ of an unknown nodegroup and of one it cannot evaluate (400, saying why), as F@ does", async () => {
		expect(expectEveError(await preview("N@nonexistent"), 400)._error.message).toMatch(
			/no nodegroup is named 'nonexistent'/,
		);
		expect(expectEveError(await preview("N@loop1 or web-*"), 400)._error.message).toMatch(/refers to itself/);
		expect(expectEveError(await preview("N@pillar"), 400)._error.message).toMatch(/cannot be evaluated by fleet-ctl/);
		expect((await request("GET", url("nodegroups/pillar"))).body).toMatchObject({
			source: "master",
			problem: expect.stringContaining("I@"),
		});
	});

	it("follows the master's changes at the next reconciliation", async () => {
		// The master's web-site-a reads the master's web, not the local override (Salt expands it on the master).
		sim.setNodegroups({ ...MASTER, web: "G@roles:db", "gpu-or-build": "G@roles:app" });
		expect((await request("POST", url("inventory/sync"))).status).toBe(200);
		await selects("web-site-a", masterSelects("web-site-a"));
		await selects("gpu-or-build", masterSelects("gpu-or-build"));
		sim.setNodegroups({ web: "G@roles:web" });
		expect((await request("POST", url("inventory/sync"))).status).toBe(200);
		expectEveError(await request("GET", url("nodegroups/site-a")), 404);
		expect(expectEveError(await preview("N@gpu-or-build"), 400)._error.message).toMatch(/no nodegroup is named/);
		// The local ones stay.
		expect((await request("GET", url("nodegroups/mine"))).status).toBe(200);
	});
});
