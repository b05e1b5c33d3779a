/**
 * The group graph as the spec shows it (ECharts' graph series): nodes field by field, one node per
 * group however many parents reach it, one edge per link, the type filter of /nodes, and the hosts no
 * group reaches (/graph/not-linked).
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";
import { IpResolverSimulator } from "../../simulators/ip-resolver";

export default function graph(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const create = async (body: Record<string, unknown>): Promise<string> => {
		const res = await request("POST", url("groups"), { body });
		expect(res.status).toBe(201);
		return res.body._id;
	};

	// root -> [web, db]; web -> [shared, auto]; db -> [shared]
	const ids: Record<string, string> = {};
	beforeAll(async () => {
		ids.shared = await create({ name: "gp-shared", hosts: ["gp-linked-1"] });
		ids.auto = await create({ name: "gp-auto", type: 1, info: { regex: "^gp-auto-", grain: { os: "ALT" } } });
		ids.web = await create({ name: "gp-web", subgroups: [ids.shared, ids.auto] });
		ids.db = await create({ name: "gp-db", type: 0, subgroups: [ids.shared] });
		ids.root = await create({ name: "gp-root", subgroups: [ids.web, ids.db] });
	});

	const node = (id: string, name: string, automatic: boolean, info: Record<string, unknown> = {}) => ({
		category: "group",
		type: automatic ? 1 : 0,
		id,
		name,
		info,
		value: automatic ? 1 : 0,
		itemStyle: { color: automatic ? "#e57373" : "#AED581" },
		symbolSize: automatic ? 10 : 0,
	});
	const link = (source: string, target: string) => ({ type: "groupLink", source, target });

	describe("GET /graph/{id}", () => {
		it("gives every group below the root once, in breadth-first order, with the spec's node fields in order", async () => {
			const res = await request("GET", url(`graph/${ids.root}`));
			expect(res.status).toBe(200);
			expect(Object.keys(res.body)).toEqual(["nodes", "edges"]);
			expect(res.body.nodes).toEqual([
				node(ids.root, "gp-root", false),
				node(ids.web, "gp-web", false),
				node(ids.db, "gp-db", false),
				node(ids.shared, "gp-shared", false),
				node(ids.auto, "gp-auto", true, { regex: "^gp-auto-", grain: { os: "ALT" } }),
			]);
			for (const n of res.body.nodes)
				expect(Object.keys(n)).toEqual(["category", "type", "id", "name", "info", "value", "itemStyle", "symbolSize"]);
		});

		it("gives one groupLink edge per parent -> child link, a shared child once per parent", async () => {
			const res = await request("GET", url(`graph/${ids.root}`));
			expect(res.body.edges).toEqual([
				link(ids.root, ids.web),
				link(ids.root, ids.db),
				link(ids.web, ids.shared),
				link(ids.web, ids.auto),
				link(ids.db, ids.shared),
			]);
			const sub = await request("GET", url(`graph/${ids.db}`));
			expect(sub.body).toEqual({
				nodes: [node(ids.db, "gp-db", false), node(ids.shared, "gp-shared", false)],
				edges: [link(ids.db, ids.shared)],
			});
			const leaf = await request("GET", url(`graph/${ids.auto}`));
			expect(leaf.body).toEqual({
				nodes: [node(ids.auto, "gp-auto", true, { regex: "^gp-auto-", grain: { os: "ALT" } })],
				edges: [],
			});
		});

		it("follows changes of the groups at once", async () => {
			const extra = await create({ name: "gp-extra" });
			expect(
				(await request("PATCH", url(`groups/${ids.db}`), { body: { subgroups: [ids.shared, extra] } })).status,
			).toBe(200);
			const res = await request("GET", url(`graph/${ids.db}`));
			expect(res.body.edges).toEqual([link(ids.db, ids.shared), link(ids.db, extra)]);
			expect((await request("DELETE", url(`groups/${extra}`))).status).toBe(204);
			expect((await request("GET", url(`graph/${ids.db}/edges`))).body).toEqual({ edges: [link(ids.db, ids.shared)] });
		});

		it("answers 404 for an unknown or malformed group id", async () => {
			expectEveError(await request("GET", url("graph/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("GET", url("graph/not-an-id")), 404);
			expectEveError(await request("GET", url("graph/0123456789abcdef0123ffff/nodes")), 404);
			expectEveError(await request("GET", url("graph/0123456789abcdef0123ffff/edges")), 404);
		});
	});

	describe("GET /graph/{id}/nodes and /edges", () => {
		it("filters the nodes by type", async () => {
			const auto = await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: 1 } }));
			expect(auto.status).toBe(200);
			expect(auto.body).toEqual({
				nodes: [node(ids.auto, "gp-auto", true, { regex: "^gp-auto-", grain: { os: "ALT" } })],
			});
			const statics = await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: { $in: [0] } } }));
			expect(statics.body.nodes.map((n: any) => n.id)).toEqual([ids.root, ids.web, ids.db, ids.shared]);
			expect((await request("GET", url(`graph/${ids.root}/nodes`))).body.nodes).toHaveLength(5);
			expect((await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: 7 } }))).body).toEqual({
				nodes: [],
			});
		});

		it("answers 400 for a filter on anything but an integer type", async () => {
			expectEveError(await request("GET", url(`graph/${ids.root}/nodes`, { where: { name: "gp-web" } })), 400);
			expectEveError(await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: "1" } })), 400);
			expectEveError(await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: { $gt: 0 } } })), 400);
			expectEveError(await request("GET", url(`graph/${ids.root}/nodes`) + "?where={not json"), 400);
		});

		it("gives the edges alone", async () => {
			const res = await request("GET", url(`graph/${ids.web}/edges`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ edges: [link(ids.web, ids.shared), link(ids.web, ids.auto)] });
		});
	});

	describe("GET /graph/not-linked", () => {
		it("lists the live hosts no group reaches, and not those a group reaches by name or by rule", async () => {
			await h().call("hosts.upsertMany", {
				hosts: [
					{ _id: "gp-linked-1", status: "up", key: "accepted" },
					{ _id: "gp-auto-1", status: "up", key: "accepted", grain: { os: "ALT" } },
					{ _id: "gp-lonely-1", status: "up", key: "accepted", grain: { os: "Debian" } },
					{ _id: "gp-lonely-2", status: "down", key: "accepted" },
				],
			});
			expect((await request("DELETE", url("hosts/gp-lonely-2"))).status).toBe(204);
			await h().call("hosts.membershipSettled");
			const res = await request("GET", url("graph/not-linked"));
			expect(res.status).toBe(200);
			const mine = (res.body as string[]).filter(n => n.startsWith("gp-"));
			expect(mine).toEqual(["gp-lonely-1"]);
			expect([...res.body].sort()).toEqual(res.body);
		});
	});
}

/** POST /graph: build_graph and request_ips as background jobs followed at graph_jobs/<action>. */
export function graphJobs(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const resolver = new IpResolverSimulator();
	beforeAll(async () => {
		await resolver.start();
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: "rip-known-1", status: "up", key: "accepted", ip: "10.9.0.1" },
				{ _id: "rip-unknown-2", status: "up", key: "accepted", ip: "10.9.0.2" },
			],
		});
	});
	afterAll(() => resolver.stop());
	afterEach(() => {
		resolver.mode = "ok";
	});

	/** Starts a job, checks the 202, and waits for the run to end. */
	const run = async (body: Record<string, unknown>) => {
		const res = await request("POST", url("graph"), { body });
		expect(res.status).toBe(202);
		expect(res.body).toMatchObject({
			_status: "OK",
			_id: body.action,
			status: "running",
			_links: { self: { title: "Graph job", href: `graph_jobs/${body.action}` } },
		});
		expect(res.headers.get("location")).toMatch(new RegExp(`graph_jobs/${body.action}$`));
		for (let i = 0; i < 200; i++) {
			const job = (await request("GET", url(`graph_jobs/${body.action}`))).body;
			if (job.status !== "running") return job;
			await new Promise(r => setTimeout(r, 25));
		}
		throw new Error(`${body.action} did not end`);
	};

	it("refuses a POST without a valid action or with the other action's parameter, in Eve's shape", async () => {
		for (const body of [
			{},
			{ action: "bogus" },
			{ action: "build_graph", ip_resolver: "http://x" },
			{ action: "request_ips", master: "m" },
			{ action: "build_graph", master: "" },
			{ action: "build_graph", extra: 1 },
		]) {
			expectEveError(await request("POST", url("graph"), { body }), 422);
		}
		for (const ip_resolver of ["ftp://resolver.example", "not a url", "http://user:secret@resolver.example"]) {
			const res = expectEveError(
				await request("POST", url("graph"), { body: { action: "request_ips", ip_resolver } }),
				422,
			);
			expect(res._issues.ip_resolver).toBeDefined();
		}
		// Neither given nor in the settings.
		expectEveError(await request("POST", url("graph"), { body: { action: "build_graph" } }), 422);
		expectEveError(await request("POST", url("graph"), { body: { action: "request_ips" } }), 422);
	});

	it("refuses an ip_resolver at a loopback, link-local or unspecified address, in every IPv6 form (the suites allow 127.0.0.1 only)", async () => {
		const forms = [
			"http://[::ffff:169.254.169.254]/",
			"http://169.254.169.254/latest/meta-data/",
			"http://[::1]:8080/",
			"http://localhost:8080/",
			"http://0.0.0.0:80/",
			"http://[::127.0.0.1]/",
			"http://[::ffff:0:127.0.0.1]/",
			"http://[2002:a9fe:a9fe::]/",
			"http://[fe80::1]/",
		];
		for (const ip_resolver of forms) {
			const res = expectEveError(
				await request("POST", url("graph"), { body: { action: "request_ips", ip_resolver } }),
				422,
			);
			expect(res._issues).toEqual({
				ip_resolver: expect.stringMatching(
					/^the IP resolver's address \S+ is not allowed: (loopback|link-local|unspecified)/,
				),
			});
		}
	});

	describe("build_graph", () => {
		it("builds one root group for the master and an automatic group per nodegroup, resolving like the nodegroup", async () => {
			const job = await run({ action: "build_graph", master: "salt-e2e" });
			expect(job).toMatchObject({
				_id: "build_graph",
				action: "build_graph",
				status: "finished",
				params: { master: "salt-e2e" },
				error: null,
			});
			expect(job.result).toMatchObject({ master: "salt-e2e", groups: 4, created: 4, updated: 0, removed: 0 });
			expect(job.progress).toEqual({ done: 4, total: 4 });
			const graph = (await request("GET", url(`graph/${job.result.root}`))).body;
			expect(graph.nodes[0]).toMatchObject({
				id: job.result.root,
				name: "salt-e2e",
				type: 2,
				value: 0,
				itemStyle: { color: "#AED581" },
				symbolSize: 0,
			});
			// Nodegroups in name order.
			expect(graph.nodes.slice(1).map((n: any) => [n.name, n.type, n.info])).toEqual([
				["e2e-alt", 1, { grain: { osfullname: "ALT" } }],
				["e2e-web", 1, { regex: "^web-" }],
				["e2e.db_1", 1, { regex: "^db-", grain: { virtual: "kvm" } }],
			]);
			expect(graph.edges).toHaveLength(3);
			const web = graph.nodes.find((n: any) => n.name === "e2e-web").id;
			await h().call("hosts.membershipSettled");
			const members = (
				await request("GET", url("hosts", { where: { nodegroups: "e2e-web" }, max_results: 50 }))
			).body._items
				.map((x: any) => x._id)
				.sort();
			expect((await request("GET", url(`groups/${web}/hostnames`))).body).toEqual(members);
			expect((await request("GET", url(`groups/${web}`))).body.generated_by).toBe("build_graph:salt-e2e");
		});

		it("rebuilds in place: the same groups, and a group linked under the root by hand stays", async () => {
			const first = (await request("GET", url("graph_jobs/build_graph"))).body.result;
			const mine = await request("POST", url("groups"), { body: { name: "gj-handmade", hosts: ["gj-h-1"] } });
			expect(
				(
					await request("PATCH", url(`groups/${first.root}`), {
						body: { subgroups: [...(await request("GET", url(`groups/${first.root}`))).body.subgroups, mine.body._id] },
					})
				).status,
			).toBe(200);
			// A PATCH leaves the fields it does not name as they are (no default `type` 0).
			expect((await request("GET", url(`groups/${first.root}`))).body.type).toBe(2);
			const again = await run({ action: "build_graph", master: "salt-e2e" });
			expect(again.result).toMatchObject({ root: first.root, created: 0, updated: 0, removed: 0 });
			const root = (await request("GET", url(`groups/${first.root}`))).body;
			expect(root.subgroups).toContain(mine.body._id);
			expect((await request("GET", url(`groups/${mine.body._id}`))).body).toMatchObject({
				name: "gj-handmade",
				hosts: ["gj-h-1"],
			});
			expect((await request("GET", url(`groups/${mine.body._id}`))).body.generated_by).toBeUndefined();
		});

		it("takes the master from the settings when the body names none", async () => {
			expect(
				(await request("PATCH", url("settings/0"), { body: { master_address: "salt-from-settings" } })).status,
			).toBe(200);
			const job = await run({ action: "build_graph" });
			expect(job.result.master).toBe("salt-from-settings");
			expect((await request("PATCH", url("settings/0"), { body: { master_address: "" } })).status).toBe(200);
		});
	});

	describe("request_ips", () => {
		it("stores each host's resolved address, with nat when it differs from the host's own, and nothing for hosts the resolver does not know", async () => {
			const job = await run({ action: "request_ips", ip_resolver: resolver.url });
			expect(job.status).toBe("finished");
			expect(job.result).toMatchObject({ resolver: `${resolver.url}/`, failed_batches: 0, rejected: 0 });
			expect(job.result.asked).toBe(job.result.resolved + job.result.unknown);
			expect(job.progress.done).toBe(job.progress.total);
			const known = (await request("GET", url("hosts/rip-known-1"))).body;
			const expected = resolver.address("rip-known-1");
			expect(known.resolved).toMatchObject({ ...expected, resolver: `${resolver.url}/` });
			expect(known.nat).toBe(true);
			expect((await request("GET", url("hosts/rip-unknown-2"))).body.resolved).toBeUndefined();
			expect(resolver.requests.at(-1)).toContain("rip-known-1");
		});

		it("uses the settings' resolver_address by default", async () => {
			expect((await request("PATCH", url("settings/0"), { body: { resolver_address: resolver.url } })).status).toBe(
				200,
			);
			const before = resolver.requests.length;
			expect((await run({ action: "request_ips" })).status).toBe("finished");
			expect(resolver.requests.length).toBeGreaterThan(before);
			expect((await request("PATCH", url("settings/0"), { body: { resolver_address: "" } })).status).toBe(200);
		});

		it("answers 409 while a run is going on, and runs again once it ended", async () => {
			resolver.mode = "slow";
			resolver.slowMs = 600;
			const first = await request("POST", url("graph"), { body: { action: "request_ips", ip_resolver: resolver.url } });
			expect(first.status).toBe(202);
			const second = expectEveError(
				await request("POST", url("graph"), { body: { action: "request_ips", ip_resolver: resolver.url } }),
				409,
			);
			expect(second._error.message).toMatch(/already running.*jobs\/request_ips/);
			for (let i = 0; i < 200 && (await request("GET", url("graph_jobs/request_ips"))).body.status === "running"; i++)
				await new Promise(r => setTimeout(r, 25));
			resolver.mode = "ok";
			expect((await run({ action: "request_ips", ip_resolver: resolver.url })).status).toBe("finished");
		});

		it("treats the resolver's answers as untrusted: bad entries are counted and not stored", async () => {
			resolver.mode = "hostile";
			const job = await run({ action: "request_ips", ip_resolver: resolver.url });
			expect(job.status).toBe("finished");
			expect(job.result.rejected).toBeGreaterThanOrEqual(3);
			expect((await request("GET", url("hosts", { where: { "resolved.ip": "999.1.1.1" } }))).body._meta.total).toBe(0);
			expect((await request("GET", url("hosts", { where: { "resolved.gateway": "<script>" } }))).body._meta.total).toBe(
				0,
			);
			expectEveError(await request("GET", url("hosts/not-asked.example")), 404);
		});

		it.each([
			["down", /unreachable|cut off|socket hang up/],
			["error", /answered 500/],
			["garbage", /not JSON/],
			["poison", /not JSON.*__proto__|invalid key/],
			["huge", /larger than/],
			["slow", /did not answer within/],
		] as const)(
			"fails the run with a clear error when the resolver is %s, and harms nothing",
			async (mode, message) => {
				resolver.mode = mode;
				resolver.slowMs = 3000;
				const before = (await request("GET", url("hosts/rip-known-1"))).body.resolved;
				const job = await run({ action: "request_ips", ip_resolver: resolver.url });
				expect(job.status).toBe("failed");
				expect(job.error).toMatch(message);
				expect(({} as Record<string, unknown>).polluted).toBeUndefined();
				expect((await request("GET", url("hosts/rip-known-1"))).body.resolved).toEqual(before);
			},
		);
	});

	it("lists the jobs, and answers 404 for an action that does not exist", async () => {
		const list = (await request("GET", url("graph_jobs", { sort: "_id" }))).body;
		expect(list._items.map((j: any) => j._id)).toEqual(["build_graph", "request_ips"]);
		expectEveError(await request("GET", url("graph_jobs/other")), 404);
	});
}
