/**
 * Fleet statistics over HTTP: three snapshots taken (stats.snapshot at chosen times) around changes made
 * through the hosts service and the API, then the five aggregated statistics in the spec's shapes, the
 * rebuilt snapshots of /hosts_statistic (`_soft_deleted` in lists, `_deleted` in items), and the 4xx
 * answers to bad ranges, intervals and filters. Other suites' hosts are in the snapshots too, so exact
 * answers are asked with a `where` naming this suite's hosts.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

export default function stats(h: () => Harness): void {
	// A: in nodegroup e2e-web (regex ^web-); C is soft-deleted before the third snapshot; D appears in the second.
	const A = "web-st-01";
	const B = "st-02";
	const C = "st-03";
	const D = "st-04";
	const MINE = { _id: { $in: [A, B, C, D] } };
	// Snapshots at T0, T0 + 60 s, T0 + 120 s (STATS_SNAPSHOT_INTERVAL is 60 in the suites).
	const T0 = Date.UTC(2031, 5, 1, 12, 0, 0);
	const at = (s: number) => new Date(T0 + s * 1000);
	const http = (s: number) => at(s).toUTCString();
	const taken: Array<{ _id: string; index: number }> = [];

	const stat = (what: string, from: number, to: number, query: Record<string, unknown> = {}) => {
		const params = new URLSearchParams();
		params.append("range[]", http(from));
		params.append("range[]", http(to));
		for (const [k, v] of Object.entries(query)) params.append(k, typeof v === "string" ? v : JSON.stringify(v));
		return request("GET", `${h().api}/hosts/statistics/${what}?${params}`);
	};
	const ok = async (what: string, from: number, to: number, query: Record<string, unknown> = {}) => {
		const res = await stat(what, from, to, query);
		if (res.status !== 200) throw new Error(`${what}: ${res.status} ${res.text}`);
		expect(res.headers.get("content-type")).toMatch(/^application\/json/);
		return res.body;
	};

	beforeAll(async () => {
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: A, version: "3006.8", ip: "10.7.0.1", status: "up", key: "accepted" },
				{ _id: B, version: "3006.8", ip: "10.7.0.2", status: "down", key: "accepted" },
				{ _id: C, version: "3006.8", ip: "10.7.0.3", status: "up", key: "accepted" },
			],
		});
		await h().call("hosts.membershipSettled");
		taken.push(await h().call("stats.snapshot", { at: at(0) }));
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: A, last_stateapply: at(30) },
				{ _id: B, status: "up" },
				{ _id: D, version: "3007.0", ip: "10.7.0.4", status: "up", key: "accepted" },
			],
		});
		taken.push(await h().call("stats.snapshot", { at: at(60) }));
		await h().call("hosts.upsertMany", { hosts: [{ _id: A, last_distupgrade: at(100), status: "down" }] });
		expect((await request("DELETE", `${h().api}/hosts/${C}`)).status).toBe(204);
		taken.push(await h().call("stats.snapshot", { at: at(120) }));
	});

	it("takes each interval's snapshot once, with increasing indexes", async () => {
		expect(taken.every(t => t && typeof t._id === "string")).toBe(true);
		expect(taken.map(t => t.index - taken[0].index)).toEqual([0, 1, 2]);
		// The same interval again: already taken.
		expect(await h().call("stats.snapshot", { at: at(150) })).toBeNull();
	});

	it("online: a point per interval with the up and down counts of its last snapshot", async () => {
		expect(await ok("online", 0, 120, { interval: 60, where: MINE })).toEqual([
			{ timestamp: http(0), _id: null, hostnames: { up: 2, down: 1 } },
			{ timestamp: http(60), _id: null, hostnames: { up: 4, down: 0 } },
			{ timestamp: http(120), _id: null, hostnames: { up: 2, down: 1 } },
		]);
		expect(await ok("online", 0, 120, { interval: 120, where: MINE })).toEqual([
			{ timestamp: http(0), _id: null, hostnames: { up: 4, down: 0 } },
			{ timestamp: http(120), _id: null, hostnames: { up: 2, down: 1 } },
		]);
		expect(await ok("online", 0, 120, { interval: 60, where: { nodegroups: "e2e-web", _id: A } })).toEqual([
			{ timestamp: http(0), _id: null, hostnames: { up: 1, down: 0 } },
			{ timestamp: http(60), _id: null, hostnames: { up: 1, down: 0 } },
			{ timestamp: http(120), _id: null, hostnames: { up: 0, down: 1 } },
		]);
		// Without a filter: the whole fleet of this leg, counted when the snapshot was taken.
		const all = await ok("online", 0, 180, { interval: 3600 });
		expect(all).toEqual([
			{ timestamp: http(0), _id: null, hostnames: { up: expect.any(Number), down: expect.any(Number) } },
		]);
		expect(all[0].hostnames.up).toBeGreaterThanOrEqual(2);
		expect(await ok("online", 200, 400, { interval: 60 })).toEqual([]);
	});

	it("unique_online: the hosts up at least once in the range, and all of them", async () => {
		expect(await ok("unique_online", 0, 120, { where: MINE })).toEqual([
			{ hostnames: { up: [A, B, C, D].sort(), all: [A, B, C, D].sort() } },
		]);
		// C was soft-deleted by then: not counted unless the filter names the flag.
		expect(await ok("unique_online", 120, 120, { where: MINE })).toEqual([
			{ hostnames: { up: [B, D].sort(), all: [A, B, D].sort() } },
		]);
		expect(await ok("unique_online", 120, 120, { where: { ...MINE, _soft_deleted: true } })).toEqual([
			{ hostnames: { up: [C], all: [C] } },
		]);
		const everyone = await ok("unique_online", 0, 120);
		expect(everyone[0].hostnames.all).toEqual(expect.arrayContaining([A, B, C, D]));
	});

	it("unique_updated and unique_dist_upgraded: state applies and dist-upgrades inside the range", async () => {
		expect(await ok("unique_updated", 0, 120, { where: MINE })).toEqual([
			{ hostnames: { updated: [A], all: [A, B, C, D].sort() } },
		]);
		expect(await ok("unique_updated", 60, 120, { where: MINE })).toEqual([
			{ hostnames: { updated: [], all: [A, B, C, D].sort() } },
		]);
		expect(await ok("unique_dist_upgraded", 0, 120, { where: MINE })).toEqual([
			{ hostnames: { distUpgraded: [A], all: [A, B, C, D].sort() } },
		]);
		expect(await ok("unique_dist_upgraded", 0, 99, { where: MINE })).toEqual([
			{ hostnames: { distUpgraded: [], all: [A, B, C, D].sort() } },
		]);
	});

	it("new_hosts: the hosts first seen inside the range", async () => {
		expect(await ok("new_hosts", 30, 120, { where: MINE })).toEqual([{ hostnames: { new: [D] } }]);
		expect(await ok("new_hosts", 0, 120, { where: MINE })).toEqual([{ hostnames: { new: [A, B, C, D].sort() } }]);
		expect(await ok("new_hosts", 90, 130, { where: MINE })).toEqual([{ hostnames: { new: [] } }]);
	});

	it("lists snapshots rebuilt whole, host entries with _soft_deleted", async () => {
		const res = await request(
			"GET",
			withQuery(`${h().api}/hosts_statistic`, { where: { _id: { $in: taken.map(t => t._id) } }, sort: "-index" }),
		);
		expect(res.status).toBe(200);
		expect(res.body._meta.total).toBe(3);
		const [third, second] = res.body._items;
		expect(third).toMatchObject({
			_id: taken[2]._id,
			index: taken[2].index,
			timestamp: http(120),
			_links: { self: { title: "Hosts_statistic", href: `hosts_statistic/${taken[2]._id}` } },
		});
		const mine = (item: any) => item.hosts.filter((e: any) => [A, B, C, D].includes(e._id));
		expect(mine(third)).toEqual([
			{
				_id: B,
				version: "3006.8",
				ip: "10.7.0.2",
				nodegroups: [],
				groups: expect.any(Array),
				_created: expect.stringMatching(HTTP_DATE),
				_updated: expect.stringMatching(HTTP_DATE),
				_soft_deleted: false,
				status: "up",
			},
			{
				_id: C,
				version: "3006.8",
				ip: "10.7.0.3",
				nodegroups: [],
				groups: expect.any(Array),
				_created: expect.stringMatching(HTTP_DATE),
				_updated: expect.stringMatching(HTTP_DATE),
				_soft_deleted: true,
				status: "up",
			},
			{
				_id: D,
				version: "3007.0",
				ip: "10.7.0.4",
				nodegroups: [],
				groups: expect.any(Array),
				_created: expect.stringMatching(HTTP_DATE),
				_updated: expect.stringMatching(HTTP_DATE),
				_soft_deleted: false,
				status: "up",
			},
			{
				_id: A,
				version: "3006.8",
				ip: "10.7.0.1",
				nodegroups: ["e2e-web"],
				groups: expect.any(Array),
				_created: expect.stringMatching(HTTP_DATE),
				_updated: expect.stringMatching(HTTP_DATE),
				_soft_deleted: false,
				status: "down",
				last_stateapply: http(30),
				last_distupgrade: http(100),
			},
		]);
		expect(mine(second).map((e: any) => [e._id, e.status, e._soft_deleted])).toEqual([
			[B, "up", false],
			[C, "up", false],
			[D, "up", false],
			[A, "up", false],
		]);
		const bare = await request(
			"GET",
			withQuery(`${h().api}/hosts_statistic`, { where: { index: taken[0].index }, projection: { hosts: 0 } }),
		);
		expect(bare.body._items[0]).toEqual({
			timestamp: http(0),
			index: taken[0].index,
			_updated: expect.stringMatching(HTTP_DATE),
			_created: expect.stringMatching(HTTP_DATE),
			_id: taken[0]._id,
			_links: expect.any(Object),
		});
	});

	it("shows one snapshot with _deleted instead", async () => {
		const res = await request("GET", `${h().api}/hosts_statistic/${taken[2]._id}`);
		expect(res.status).toBe(200);
		const entry = res.body.hosts.find((e: any) => e._id === C);
		expect(entry).toEqual({
			_id: C,
			version: "3006.8",
			ip: "10.7.0.3",
			nodegroups: [],
			groups: expect.any(Array),
			_created: expect.stringMatching(HTTP_DATE),
			_updated: expect.stringMatching(HTTP_DATE),
			_deleted: true,
			status: "up",
		});
		expect(res.body.hosts.some((e: any) => "_soft_deleted" in e)).toBe(false);
		expect(res.body._links).toEqual({
			self: { title: "Hosts_statistic", href: `hosts_statistic/${taken[2]._id}` },
			parent: { title: "home", href: "/" },
			collection: { title: "hosts_statistic", href: "hosts_statistic" },
		});
	});

	it("answers a missing, malformed or reversed range with a 400 that says why", async () => {
		const base = `${h().api}/hosts/statistics`;
		const msg = async (url: string) => expectEveError(await request("GET", url), 400)._error.message as string;
		for (const what of ["online", "unique_online", "unique_updated", "unique_dist_upgraded", "new_hosts"]) {
			expect(await msg(`${base}/${what}?interval=60`)).toMatch(/range\[\]` is required/);
		}
		expect(await msg(`${base}/unique_online?range[]=${encodeURIComponent(http(0))}`)).toMatch(/exactly two/);
		expect(
			await msg(
				`${base}/unique_online?range[]=${encodeURIComponent(http(0))}&range[]=${encodeURIComponent(http(1))}&range[]=${encodeURIComponent(http(2))}`,
			),
		).toMatch(/exactly two/);
		expect(await msg(`${base}/unique_online?range[]=yesterday&range[]=${encodeURIComponent(http(0))}`)).toMatch(
			/HTTP-dates/,
		);
		expect(
			await msg(
				`${base}/unique_online?range[]=${encodeURIComponent("Mon, 31 Feb 2031 00:00:00 GMT")}&range[]=${encodeURIComponent(http(0))}`,
			),
		).toMatch(/HTTP-dates/);
		expect((await stat("new_hosts", 120, 0)).body._error.message).toMatch(/reversed/);
	});

	it("answers a missing, malformed or absurd interval with a 400", async () => {
		expect(expectEveError(await stat("online", 0, 120), 400)._error.message).toMatch(/`interval` is required/);
		for (const bad of ["0", "-60", "2.5", "sixty", "9007199254740993"])
			expectEveError(await stat("online", 0, 120, { interval: bad }), 400);
		const decade = await request(
			"GET",
			`${h().api}/hosts/statistics/online?range[]=${encodeURIComponent(http(0))}&range[]=${encodeURIComponent(new Date(T0 + 3650 * 86_400_000).toUTCString())}&interval=1`,
		);
		expect(expectEveError(decade, 400)._error.message).toMatch(/at most 100000/);
	});

	it("answers a malformed or forbidden filter with a 400", async () => {
		expectEveError(await stat("unique_online", 0, 120, { where: "{not json" }), 400);
		expectEveError(await stat("unique_online", 0, 120, { where: { $where: "sleep(1000)" } }), 400);
		expectEveError(await stat("online", 0, 120, { interval: 60, where: { ip: { $regex: ".*" } } }), 400);
		expectEveError(await stat("new_hosts", 0, 120, { where: { "__proto__.x": 1 } }), 400);
		expectEveError(await request("GET", withQuery(`${h().api}/hosts_statistic`, { where: { "hosts._id": A } })), 400);
		expectEveError(await request("GET", withQuery(`${h().api}/hosts_statistic`, { sort: "-hosts" })), 400);
	});

	it("answers 404 for an unknown snapshot and 405 for writes", async () => {
		expectEveError(await request("GET", `${h().api}/hosts_statistic/0123456789abcdef0123ffff`), 404);
		expectEveError(await request("GET", `${h().api}/hosts_statistic/not-an-id`), 404);
		expectEveError(await request("POST", `${h().api}/hosts_statistic`, { body: { hosts: [] } }), 405);
		expectEveError(await request("DELETE", `${h().api}/hosts_statistic/${taken[0]._id}`), 405);
		expectEveError(await request("POST", `${h().api}/hosts/statistics/online`, { body: {} }), 405);
	});
}
