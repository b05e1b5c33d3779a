/**
 * The group graph as the spec shows it (ECharts' graph series): nodes field by field, one node per
 * group however many parents reach it, one edge per link, the type filter of /nodes, and the hosts no
 * group reaches (/graph/not-linked).
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

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
			for (const n of res.body.nodes) expect(Object.keys(n)).toEqual(["category", "type", "id", "name", "info", "value", "itemStyle", "symbolSize"]);
		});

		it("gives one groupLink edge per parent -> child link, a shared child once per parent", async () => {
			const res = await request("GET", url(`graph/${ids.root}`));
			expect(res.body.edges).toEqual([link(ids.root, ids.web), link(ids.root, ids.db), link(ids.web, ids.shared), link(ids.web, ids.auto), link(ids.db, ids.shared)]);
			const sub = await request("GET", url(`graph/${ids.db}`));
			expect(sub.body).toEqual({ nodes: [node(ids.db, "gp-db", false), node(ids.shared, "gp-shared", false)], edges: [link(ids.db, ids.shared)] });
			const leaf = await request("GET", url(`graph/${ids.auto}`));
			expect(leaf.body).toEqual({ nodes: [node(ids.auto, "gp-auto", true, { regex: "^gp-auto-", grain: { os: "ALT" } })], edges: [] });
		});

		it("follows changes of the groups at once", async () => {
			const extra = await create({ name: "gp-extra" });
			expect((await request("PATCH", url(`groups/${ids.db}`), { body: { subgroups: [ids.shared, extra] } })).status).toBe(200);
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
			expect(auto.body).toEqual({ nodes: [node(ids.auto, "gp-auto", true, { regex: "^gp-auto-", grain: { os: "ALT" } })] });
			const statics = await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: { $in: [0] } } }));
			expect(statics.body.nodes.map((n: any) => n.id)).toEqual([ids.root, ids.web, ids.db, ids.shared]);
			expect((await request("GET", url(`graph/${ids.root}/nodes`))).body.nodes).toHaveLength(5);
			expect((await request("GET", url(`graph/${ids.root}/nodes`, { where: { type: 7 } }))).body).toEqual({ nodes: [] });
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
