/**
 * POST /api/targets/preview: the live hosts a compound target selects on the inventory (docs/targeting.md),
 * the named ones missing, the reasons for what cannot be evaluated, for every role, without an audit record.
 */
import type { Harness } from "../../support/harness";
import { request, expectEveError, eventually, withQuery } from "../../support/http";

export default function targets(h: () => Harness): void {
	const url = (path: string) => `${h().api}/${path}`;
	const preview = (target: unknown, token?: string) =>
		request("POST", url("targets/preview"), { body: { target }, ...(token ? { token } : {}) });
	const grain = (os: string, ipv4: string, roles: string[]) => ({ os, ipv4: [ipv4], roles });
	let viewer = "";

	beforeAll(async () => {
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: "tp-web-01", status: "up", key: "accepted", grain: grain("Debian", "10.9.1.5", ["web"]) },
				{ _id: "tp-web-02", status: "up", key: "accepted", grain: grain("Ubuntu", "10.9.1.6", ["web"]) },
				{ _id: "tp-db-01", status: "down", key: "accepted", grain: grain("Debian", "10.9.2.7", ["db"]) },
				{ _id: "tp-gone-01", status: "up", key: "accepted", grain: grain("Debian", "10.9.1.9", ["web"]) },
			],
		});
		expect((await request("DELETE", url("hosts/tp-gone-01"))).status).toBe(204);
		expect(
			(await request("POST", url("groups"), { body: { name: "tp-dbs", type: 1, info: { regex: "tp-db-" } } })).status,
		).toBe(201);
		const token = await request("POST", url("tokens"), { body: { name: "tp-viewer", role: "viewer" } });
		expect(token.status).toBe(201);
		viewer = token.body.token;
		await h().call("hosts.membershipSettled");
	});

	it("answers the live hosts a target selects, their count and the named hosts that do not exist", async () => {
		const res = await preview("G@os:debian and tp-*");
		expect(res.status).toBe(200);
		// tp-gone-01 is soft-deleted: never a target.
		expect(res.body).toEqual({
			target: "G@os:debian and tp-*",
			count: 2,
			hosts: ["tp-db-01", "tp-web-01"],
			missing: [],
		});
		const listed = await preview("L@tp-web-02,tp-nope-1,tp-gone-01 or tp-nope-2");
		expect(listed.body).toEqual({
			target: "L@tp-web-02,tp-nope-1,tp-gone-01 or tp-nope-2",
			count: 1,
			hosts: ["tp-web-02"],
			missing: ["tp-gone-01", "tp-nope-1", "tp-nope-2"],
		});
	});

	it("evaluates the grain, subnet, regex, group and operator terms on the inventory", async () => {
		const cases: Array<[string, string[]]> = [
			["tp-* and S@10.9.1.0/24", ["tp-web-01", "tp-web-02"]],
			["E@tp-(web|db)-0[12]$ and not G@roles:web", ["tp-db-01"]],
			["F@tp-dbs or ( tp-web-* and P@os:ubu )", ["tp-db-01", "tp-web-02"]],
		];
		for (const [target, hosts] of cases)
			expect((await preview(target)).body).toMatchObject({ count: hosts.length, hosts });
	});

	it("answers a viewer too, and writes no audit record (a preview changes and runs nothing)", async () => {
		const audited = async (where: Record<string, unknown>) =>
			(await request("GET", withQuery(url("audit"), { where }))).body._items as unknown[];
		const res = await preview("tp-web-*", viewer);
		expect(res.status).toBe(200);
		expect(res.body.hosts).toEqual(["tp-web-01", "tp-web-02"]);
		expect((await preview("tp-db-*")).status).toBe(200);
		// The audit write is not awaited by the response: the previews' would be in by the time the records of writes
		// made after them are (a group made and deleted).
		const marker = await request("POST", url("groups"), { body: { name: "tp-audit-marker", hosts: [] } });
		expect(marker.status).toBe(201);
		expect((await request("DELETE", url(`groups/${marker.body._id}`))).status).toBe(204);
		await eventually(
			async () => (await audited({ method: "DELETE", path: `/api/groups/${marker.body._id}` }))[0],
			5000,
			"the later write's audit record",
		);
		expect(await audited({ path: "/api/targets/preview" })).toEqual([]);
		expectEveError(await request("POST", url("targets/preview"), { body: { target: "tp-*" }, token: null }), 401);
	});

	it("refuses what it cannot evaluate with the reason, bad bodies with 422, other methods with 405", async () => {
		const cases: Array<[string, RegExp]> = [
			["tp-web-* tp-db-*", /follows a term without 'and' or 'or'/],
			["I@role:web", /pillar/],
			["E@(a)\\1", /invalid regular expression/],
			// Compiled per value by the matcher: refused up front, not a failure halfway through the hosts.
			["tp-* and G@os:[z-a]", /invalid glob/],
			["F@tp-no-such-group", /no group has the id or name/],
			["( tp-web-*", /not closed/],
		];
		for (const [target, why] of cases) expect(expectEveError(await preview(target), 400)._error.message).toMatch(why);
		expectEveError(await request("POST", url("targets/preview"), { body: {} }), 422);
		expectEveError(await preview(42), 422);
		expectEveError(await preview("x".repeat(10_001)), 422);
		expectEveError(
			await request("POST", url("targets/preview"), {
				raw: "{not json",
				headers: { "content-type": "application/json" },
			}),
			400,
		);
		expectEveError(await request("GET", url("targets/preview")), 405);
		// Still answering afterwards.
		await eventually(async () => ((await preview("tp-web-01")).status === 200 ? true : undefined));
	});
}
