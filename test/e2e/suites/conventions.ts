/**
 * Eve's conventions as a client sees them, on the groups collection: list and item shapes, paging links,
 * every query parameter, writes, and every error code with malformed input.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;

export default function conventions(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);

	describe("root", () => {
		it("lists every collection in _links.child, in the spec's order, then tokens, audit, graph_jobs, jobs, salt_jobs, rollouts, conformity_checks, conformity_rules and webhooks", async () => {
			for (const path of ["", "/"]) {
				const res = await request("GET", `${h().api}${path}`);
				expect(res.status).toBe(200);
				expect(res.body._links.child.map((c: any) => c.href)).toEqual([
					"groups",
					"nodegroups",
					"hosts",
					"hosts_statistic",
					"tasks",
					"actions",
					"failed_patches",
					"updates",
					"alerts",
					"settings",
					"files",
					"vpn_managers",
					"vpn_organizations",
					"tokens",
					"audit",
					"graph_jobs",
					"jobs",
					"salt_jobs",
					"rollouts",
					"conformity_checks",
					"conformity_rules",
					"webhooks",
					"webhook_deliveries",
					"maintenance_windows",
					"approval_policies",
					"approvals",
				]);
				expect(res.body._links.child[0]).toEqual({ href: "groups", title: "groups" });
			}
		});
	});

	describe("paging", () => {
		// A documented type (0–4) that no group made before this describe has.
		const TYPE = 4;
		const where = JSON.stringify({ type: TYPE });
		beforeAll(async () => {
			const docs = Array.from({ length: 60 }, (_, i) => ({ name: `page-${String(i).padStart(2, "0")}`, type: TYPE }));
			const res = await request("POST", url("groups"), { body: docs });
			expect(res.status).toBe(201);
		});

		it("gives the list shape with _meta, X-Total-Count and next/last links", async () => {
			const res = await request("GET", url("groups", { where }));
			expect(res.status).toBe(200);
			expect(Object.keys(res.body)).toEqual(["_items", "_links", "_meta"]);
			expect(res.body._meta).toEqual({ page: 1, max_results: 25, total: 60 });
			expect(res.headers.get("x-total-count")).toBe("60");
			expect(res.body._items).toHaveLength(25);
			expect(res.body._links).toEqual({
				parent: { title: "home", href: "/" },
				self: { title: "groups", href: `groups?where=${where}` },
				next: { title: "next page", href: `groups?where=${where}&page=2` },
				last: { title: "last page", href: `groups?where=${where}&page=3` },
			});
		});

		it("links the middle and the last page both ways", async () => {
			const mid = await request("GET", url("groups", { where, page: 2 }));
			expect(mid.body._links.prev).toEqual({ title: "previous page", href: `groups?where=${where}` });
			expect(mid.body._links.next.href).toBe(`groups?where=${where}&page=3`);
			const last = await request("GET", url("groups", { where, page: 3 }));
			expect(last.body._items).toHaveLength(10);
			expect(last.body._links.next).toBeUndefined();
			expect(last.body._links.last).toBeUndefined();
			expect(last.body._links.prev.href).toBe(`groups?where=${where}&page=2`);
		});

		it("ends on an exactly full last page with no next or last link (60 records, 20 a page)", async () => {
			const before = await request("GET", url("groups", { where, max_results: 20, page: 2 }));
			expect(before.body._links).toEqual({
				parent: { title: "home", href: "/" },
				self: { title: "groups", href: `groups?max_results=20&where=${where}&page=2` },
				next: { title: "next page", href: `groups?max_results=20&where=${where}&page=3` },
				last: { title: "last page", href: `groups?max_results=20&where=${where}&page=3` },
				prev: { title: "previous page", href: `groups?max_results=20&where=${where}` },
			});
			const last = await request("GET", url("groups", { where, max_results: 20, page: 3 }));
			expect(last.status).toBe(200);
			expect(last.body._meta).toEqual({ page: 3, max_results: 20, total: 60 });
			expect(last.body._items).toHaveLength(20);
			expect(last.body._links).toEqual({
				parent: { title: "home", href: "/" },
				self: { title: "groups", href: `groups?max_results=20&where=${where}&page=3` },
				prev: { title: "previous page", href: `groups?max_results=20&where=${where}&page=2` },
			});
			const past = await request("GET", url("groups", { where, max_results: 20, page: 4 }));
			expect(past.body._items).toEqual([]);
			expect(past.body._links).toEqual({
				parent: { title: "home", href: "/" },
				self: { title: "groups", href: `groups?max_results=20&where=${where}&page=4` },
				prev: { title: "previous page", href: `groups?max_results=20&where=${where}&page=3` },
			});
		});

		it("repeats max_results, where and sort raw, drops projection and embedded, keeps other params in order", async () => {
			const res = await request(
				"GET",
				`${h().api}/groups?foo=bar&max_results=10&projection=${encodeURIComponent('{"name":1}')}&where=${encodeURIComponent(where)}&sort=-name&embedded=${encodeURIComponent('{"subgroups":1}')}&page=2&flag`,
			);
			expect(res.status).toBe(200);
			expect(res.body._links.self.href).toBe(`groups?max_results=10&where=${where}&sort=-name&page=2&foo=bar&flag=`);
			expect(res.body._links.next.href).toBe(`groups?max_results=10&where=${where}&sort=-name&page=3&foo=bar&flag=`);
			expect(res.body._links.last.href).toBe(`groups?max_results=10&where=${where}&sort=-name&page=6&foo=bar&flag=`);
			expect(res.body._links.prev.href).toBe(`groups?max_results=10&where=${where}&sort=-name&foo=bar&flag=`);
			expect(res.body._items.map((g: any) => g.name)).toEqual(Array.from({ length: 10 }, (_, i) => `page-${49 - i}`));
		});

		it("clamps huge max_results to the limit and never rejects paging values", async () => {
			const big = await request("GET", url("groups", { where, max_results: 100000 }));
			expect(big.body._meta.max_results).toBe(50);
			expect(big.body._items).toHaveLength(50);
			expect(big.body._links.next.href).toBe(`groups?max_results=50&where=${where}&page=2`);
			for (const [page, expected] of [
				["abc", 1],
				["0", 1],
				["-2", 2],
				["1.5", 1],
				["", 1],
				["99999999999999999999", undefined],
			] as const) {
				const res = await request("GET", url("groups", { where, page }));
				expect(res.status).toBe(200);
				if (expected) expect(res.body._meta.page).toBe(expected);
			}
			for (const max of ["x", "0", "-5", "7.9"]) {
				const res = await request("GET", url("groups", { where, max_results: max }));
				expect(res.status).toBe(200);
				expect(res.body._meta.max_results).toBe(max === "7.9" ? 7 : 25);
			}
		});

		it("answers a page past the end with no items, the total and a prev link", async () => {
			const res = await request("GET", url("groups", { where, page: 9 }));
			expect(res.status).toBe(200);
			expect(res.body._items).toEqual([]);
			expect(res.body._meta.total).toBe(60);
			expect(res.body._links.prev.href).toBe(`groups?where=${where}&page=8`);
		});

		it("leaves the query off self when nothing matches", async () => {
			const res = await request("GET", url("groups", { where: { type: 99 } }));
			expect(res.body._links.self).toEqual({ title: "groups", href: "groups" });
			expect(res.body._meta.total).toBe(0);
			expect(res.headers.get("x-total-count")).toBe("0");
		});
	});

	describe("where, sort, projection, embedded", () => {
		let child: any;
		let parent: any;
		beforeAll(async () => {
			child = (
				await request("POST", url("groups"), {
					body: { name: "q-child", type: 1, info: { regex: "^web-", grain: { os: "ALT" } } },
				})
			).body;
			parent = (
				await request("POST", url("groups"), {
					body: { name: "q-parent", type: 0, subgroups: [child._id], hosts: ["web-1", "db-1"] },
				})
			).body;
		});

		it("filters with JSON and with Eve's Python-like syntax", async () => {
			const json = await request(
				"GET",
				url("groups", { where: { name: { $in: ["q-child", "q-parent"] } }, sort: "name" }),
			);
			expect(json.body._items.map((g: any) => g.name)).toEqual(["q-child", "q-parent"]);
			const py = await request("GET", url("groups", { where: 'name == "q-parent"' }));
			expect(py.body._items.map((g: any) => g.name)).toEqual(["q-parent"]);
			const both = await request(
				"GET",
				url("groups", { where: 'name == "q-parent" or (name == "q-child" and type >= 1)', sort: "-name" }),
			);
			expect(both.body._items.map((g: any) => g.name)).toEqual(["q-parent", "q-child"]);
			const nested = await request("GET", url("groups", { where: { "info.grain.os": "ALT" } }));
			expect(nested.body._items.map((g: any) => g.name)).toEqual(["q-child"]);
			const ops = await request(
				"GET",
				url("groups", {
					where: {
						$and: [{ name: { $ne: "q-child" } }, { hosts: { $all: ["web-1", "db-1"] } }, { subgroups: { $size: 1 } }],
					},
				}),
			);
			expect(ops.body._items.map((g: any) => g.name)).toEqual(["q-parent"]);
			const notIn = await request(
				"GET",
				url("groups", { where: { hosts: { $nin: ["web-1"] }, name: { $in: ["q-child", "q-parent"] } } }),
			);
			expect(notIn.body._items.map((g: any) => g.name)).toEqual(["q-child"]);
			const missing = await request(
				"GET",
				url("groups", { where: { info: { $exists: false }, name: { $in: ["q-child", "q-parent"] } } }),
			);
			expect(missing.body._items.map((g: any) => g.name)).toEqual(["q-parent"]);
			const date = await request(
				"GET",
				url("groups", { where: { _created: { $gte: "Mon, 01 Jan 2024 00:00:00 GMT" }, name: "q-child" } }),
			);
			expect(date.body._meta.total).toBe(1);
		});

		it("rejects operators outside the allowlist and malformed filters with 400", async () => {
			const bad = [
				{ $where: "sleep(1000)" },
				{ name: { $regex: ".*" } },
				{ $expr: { $eq: ["$name", "x"] } },
				{ name: { $function: { body: "x" } } },
				{ name: { $accumulator: {} } },
				{ name: { $foo: 1 } },
				{ $or: [] },
				{ $or: "x" },
				{ name: { $in: "x" } },
				{ name: { $size: -1 } },
				{ name: { $gt: 1, plain: 2 } },
				{ "a..b": 1 },
				{ "__proto__.polluted": 1 },
				{ name: { $eq: { $ne: 1 } } },
			];
			for (const where of bad) expectEveError(await request("GET", url("groups", { where })), 400);
			for (const raw of [
				"[1,2]",
				"1",
				"null",
				'"x"',
				"{",
				"name = 'x'",
				"name ==",
				"{'a': 1}",
				'{"__proto__": {"x": 1}}',
			]) {
				expectEveError(await request("GET", `${h().api}/groups?where=${encodeURIComponent(raw)}`), 400);
			}
			const deep = JSON.stringify(Array.from({ length: 40 }).reduce<any>(acc => ({ $and: [acc] }), { name: "x" }));
			expectEveError(await request("GET", `${h().api}/groups?where=${encodeURIComponent(deep)}`), 400);
		});

		it("sorts ascending and descending, and rejects a malformed sort", async () => {
			const asc = await request(
				"GET",
				url("groups", { where: { name: { $in: ["q-child", "q-parent"] } }, sort: "name" }),
			);
			expect(asc.body._items.map((g: any) => g.name)).toEqual(["q-child", "q-parent"]);
			const py = await request(
				"GET",
				url("groups", { where: { name: { $in: ["q-child", "q-parent"] } }, sort: '[("name", -1)]' }),
			);
			expect(py.body._items.map((g: any) => g.name)).toEqual(["q-parent", "q-child"]);
			for (const sort of ["-", ",", "name,,type", "$where", "__proto__", '[("name", 2)]']) {
				expectEveError(await request("GET", url("groups", { sort })), 400);
			}
		});

		it("projects inclusively and exclusively, and never hides the meta fields", async () => {
			const inc = await request("GET", url(`groups/${parent._id}`, { projection: { name: 1 } }));
			expect(Object.keys(inc.body).sort()).toEqual(["_created", "_id", "_links", "_updated", "name"]);
			const exc = await request("GET", url(`groups/${parent._id}`, { projection: { hosts: 0, _id: 0, _created: 0 } }));
			expect(exc.body.hosts).toBeUndefined();
			expect(exc.body.name).toBe("q-parent");
			expect(exc.body._id).toBe(parent._id);
			expect(exc.body._created).toMatch(HTTP_DATE);
			const dotted = await request("GET", url(`groups/${child._id}`, { projection: { "info.regex": 1 } }));
			expect(dotted.body.info).toEqual({ regex: "^web-" });
			const unknown = await request("GET", url(`groups/${parent._id}`, { projection: { nosuchfield: 1 } }));
			expect(Object.keys(unknown.body).sort()).toEqual(["_created", "_id", "_links", "_updated"]);
			const list = await request("GET", url("groups", { where: { name: "q-parent" }, projection: { subgroups: 0 } }));
			expect(list.body._items[0].subgroups).toBeUndefined();
			for (const projection of ["[1]", "{", '{"name": 2}', '{"name": "x"}', "1"]) {
				expectEveError(await request("GET", `${h().api}/groups?projection=${encodeURIComponent(projection)}`), 400);
			}
		});

		it("embeds referenced records without _links, and ignores what cannot be embedded", async () => {
			const item = await request("GET", url(`groups/${parent._id}`, { embedded: { subgroups: 1 } }));
			expect(item.body.subgroups).toHaveLength(1);
			expect(item.body.subgroups[0]).toMatchObject({ _id: child._id, name: "q-child", type: 1 });
			expect(item.body.subgroups[0]._links).toBeUndefined();
			expect(item.body._links.related.subgroups).toEqual([{ title: "Group", href: `groups/${child._id}` }]);
			const list = await request(
				"GET",
				url("groups", { where: { name: "q-parent" }, embedded: { subgroups: 1, hosts: 1, nosuch: 1 } }),
			);
			expect(list.body._items[0].subgroups[0].name).toBe("q-child");
			expect(list.body._items[0].hosts).toEqual(["web-1", "db-1"]);
			expectEveError(await request("GET", `${h().api}/groups?embedded=${encodeURIComponent("[1]")}`), 400);
			expectEveError(await request("GET", `${h().api}/groups/${parent._id}?embedded=nope`), 400);
		});
	});

	describe("items and writes", () => {
		it("creates with 201, Location and Eve's write shape", async () => {
			const res = await request("POST", url("groups"), { body: { name: "w-one", type: 0, hosts: ["h1"] } });
			expect(res.status).toBe(201);
			expect(Object.keys(res.body)).toEqual(["_updated", "_created", "_id", "_links", "_status"]);
			expect(res.body._status).toBe("OK");
			expect(res.body._id).toMatch(OBJECT_ID);
			expect(res.body._created).toMatch(HTTP_DATE);
			expect(res.body._links).toEqual({ self: { title: "Group", href: `groups/${res.body._id}` } });
			expect(res.headers.get("location")).toBe(`${h().api}/groups/${res.body._id}`);

			const item = await request("GET", res.headers.get("location") as string);
			expect(item.status).toBe(200);
			expect(item.body).toMatchObject({
				name: "w-one",
				type: 0,
				hosts: ["h1"],
				_id: res.body._id,
				_created: res.body._created,
				_updated: res.body._updated,
			});
			expect(item.body._links).toEqual({
				self: { title: "Group", href: `groups/${res.body._id}` },
				parent: { title: "home", href: "/" },
				collection: { title: "groups", href: "groups" },
			});
			expect(item.headers.get("last-modified")).toBe(res.body._updated);
			const withParam = await request("GET", url(`groups/${res.body._id}`, { mark_as_read: 1 }));
			expect(withParam.body._links.collection.href).toBe("groups?mark_as_read=1");
		});

		it("creates a bulk array all-or-nothing", async () => {
			const ok = await request("POST", url("groups"), { body: [{ name: "b-1" }, { name: "b-2", type: 3 }] });
			expect(ok.status).toBe(201);
			expect(ok.body._status).toBe("OK");
			expect(ok.body._items).toHaveLength(2);
			expect(ok.body._items[1]._status).toBe("OK");

			const bad = await request("POST", url("groups"), { body: [{ name: "b-3" }, { name: 5, bogus: true }] });
			const err = expectEveError(bad, 422);
			expect(err._items).toEqual([
				{ _status: "OK" },
				{ _status: "ERR", _issues: { name: "must be of string type", bogus: "unknown field" } },
			]);
			const after = await request("GET", url("groups", { where: { name: "b-3" } }));
			expect(after.body._meta.total).toBe(0);
			expectEveError(await request("POST", url("groups"), { body: [] }), 400);
		});

		it("reports every bad field of a document in _issues", async () => {
			const res = await request("POST", url("groups"), {
				body: { bogus: 1, type: "x", subgroups: "nope", info: { regex: 5, other: 1 } },
			});
			const err = expectEveError(res, 422);
			expect(err._issues).toEqual({
				name: "required field",
				type: "must be of integer type",
				subgroups: "must be of list type",
				info: { regex: "must be of string type", other: "unknown field" },
				bogus: "unknown field",
			});
			const auto = expectEveError(
				await request("POST", url("groups"), { body: { name: "x", _created: "now", _updated: "now" } }),
				422,
			);
			expect(auto._issues).toEqual({ _created: "unknown field", _updated: "unknown field" });
			const regex = expectEveError(
				await request("POST", url("groups"), { body: { name: "x", type: 1, info: { regex: "([a-z" } } }),
				422,
			);
			expect(regex._issues.info.regex).toMatch(/invalid regular expression/);
		});

		it("accepts only the group types the spec documents (0 to 4): any other is a 422 naming type", async () => {
			for (const type of [99, 5, -1, 1.5]) {
				const err = expectEveError(await request("POST", url("groups"), { body: { name: "bad-type", type } }), 422);
				expect(err._issues).toEqual({
					type: type === 1.5 ? "must be of integer type" : type < 0 ? "min value is 0" : "max value is 4",
				});
			}
			const ok = await request("POST", url("groups"), {
				body: [0, 1, 2, 3, 4].map(type => ({ name: `ok-type-${type}`, type })),
			});
			expect(ok.status).toBe(201);
			const id = ok.body._items[0]._id;
			const patch = expectEveError(await request("PATCH", url(`groups/${id}`), { body: { type: 99 } }), 422);
			expect(patch._issues).toEqual({ type: "max value is 4" });
			expect((await request("GET", url(`groups/${id}`))).body.type).toBe(0);
			expect((await request("GET", url("groups", { where: { name: "bad-type" } }))).body._meta.total).toBe(0);
			for (const item of ok.body._items) expect((await request("DELETE", url(`groups/${item._id}`))).status).toBe(204);
		});

		it("refuses a string that is not well-formed Unicode (a lone surrogate) with a 422 naming the field, at any depth", async () => {
			const NOT_WELL_FORMED = "must be well-formed Unicode (a lone UTF-16 surrogate is not)";
			const json = { "content-type": "application/json" };
			const lone = expectEveError(
				await request("POST", url("groups"), { raw: '{"name": "web\\ud800"}', headers: json }),
				422,
			);
			expect(lone._issues).toEqual({ name: NOT_WELL_FORMED });
			const low = expectEveError(
				await request("POST", url("groups"), {
					raw: '{"name": "\\udc00x", "type": 1, "info": {"grain": {"os": "ALT\\ud83d"}}}',
					headers: json,
				}),
				422,
			);
			expect(low._issues).toEqual({ name: NOT_WELL_FORMED, info: { grain: { os: NOT_WELL_FORMED } } });
			const key = expectEveError(
				await request("POST", url("groups"), {
					raw: '{"name": "k", "type": 1, "info": {"grain": {"\\ud800": "x"}}}',
					headers: json,
				}),
				422,
			);
			expect(key._issues).toEqual({
				info: { grain: "keys must be well-formed Unicode (a lone UTF-16 surrogate is not)" },
			});
			// Reported with the schema's own issues.
			const both = expectEveError(
				await request("POST", url("groups"), { raw: '{"name": "\\ud800", "type": 99}', headers: json }),
				422,
			);
			expect(both._issues).toEqual({ name: NOT_WELL_FORMED, type: "max value is 4" });
			// A surrogate pair is one well-formed character.
			const pair = await request("POST", url("groups"), { raw: '{"name": "uni-\\ud83d\\ude80"}', headers: json });
			expect(pair.status).toBe(201);
			expect((await request("GET", url(`groups/${pair.body._id}`))).body.name).toBe("uni-\u{1F680}");
			const patch = expectEveError(
				await request("PATCH", url(`groups/${pair.body._id}`), { raw: '{"name": "\\ud800"}', headers: json }),
				422,
			);
			expect(patch._issues).toEqual({ name: NOT_WELL_FORMED });
			expect((await request("GET", url(`groups/${pair.body._id}`))).body.name).toBe("uni-\u{1F680}");
			// The same rule in every collection's schema: tasks, tokens.
			const task = expectEveError(
				await request("POST", url("tasks"), {
					body: { name: "\ud800", fun: "test.ping", tgt: ["x"], start: "2030-01-01 00:00", kwarg: { cmd: "a\udfff" } },
				}),
				422,
			);
			expect(task._issues).toEqual({ name: NOT_WELL_FORMED, kwarg: { cmd: NOT_WELL_FORMED } });
			const token = expectEveError(
				await request("POST", url("tokens"), { body: { name: "t\ud800", role: "viewer" } }),
				422,
			);
			expect(token._issues).toEqual({ name: NOT_WELL_FORMED });
		});

		it("rejects dangling references and cycles with 422", async () => {
			const dangling = expectEveError(
				await request("POST", url("groups"), { body: { name: "d", subgroups: ["0123456789abcdef01234567"] } }),
				422,
			);
			expect(dangling._issues).toEqual({
				subgroups: { "0": "value '0123456789abcdef01234567' must exist in resource 'groups', field '_id'." },
			});

			const a = (await request("POST", url("groups"), { body: { name: "cyc-a" } })).body._id;
			const b = (await request("POST", url("groups"), { body: { name: "cyc-b", subgroups: [a] } })).body._id;
			const c = (await request("POST", url("groups"), { body: { name: "cyc-c", subgroups: [b] } })).body._id;
			const cycle = expectEveError(await request("PATCH", url(`groups/${a}`), { body: { subgroups: [c] } }), 422);
			expect(cycle._issues.subgroups).toBe(`subgroups would form a cycle: ${a} -> ${c} -> ${b} -> ${a}`);
			const self = expectEveError(await request("PATCH", url(`groups/${a}`), { body: { subgroups: [a] } }), 422);
			expect(self._issues.subgroups).toMatch(/cycle/);
			const unchanged = await request("GET", url(`groups/${a}`));
			expect(unchanged.body.subgroups).toBeUndefined();
		});

		it("answers 409 for a duplicate _id and keeps the first record", async () => {
			const id = "aaaaaaaaaaaaaaaaaaaaaaa1";
			expect((await request("POST", url("groups"), { body: { _id: id, name: "first" } })).status).toBe(201);
			expectEveError(await request("POST", url("groups"), { body: { _id: id, name: "second" } }), 409);
			expectEveError(
				await request("POST", url("groups"), {
					body: [
						{ _id: "aaaaaaaaaaaaaaaaaaaaaaa2", name: "x" },
						{ _id: "aaaaaaaaaaaaaaaaaaaaaaa2", name: "y" },
					],
				}),
				409,
			);
			expect((await request("GET", url(`groups/${id}`))).body.name).toBe("first");
			const badId = expectEveError(
				await request("POST", url("groups"), { body: { _id: "not-an-id", name: "x" } }),
				422,
			);
			expect(badId._issues._id).toBe("must be of objectid type");
		});

		it("rejects malformed bodies with clear 4xx errors", async () => {
			expect(
				expectEveError(
					await request("POST", url("groups"), { raw: '{"name": ', headers: { "content-type": "application/json" } }),
					400,
				)._error.message,
			).toMatch(/malformed JSON/);
			expectEveError(
				await request("POST", url("groups"), { raw: "name=x", headers: { "content-type": "text/plain" } }),
				400,
			);
			expectEveError(
				await request("POST", url("groups"), {
					raw: '"just a string"',
					headers: { "content-type": "application/json" },
				}),
				400,
			);
			expectEveError(
				await request("POST", url("groups"), { raw: "null", headers: { "content-type": "application/json" } }),
				400,
			);
			expectEveError(await request("POST", url("groups")), 400);
			const huge = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) });
			expectEveError(
				await request("POST", url("groups"), { raw: huge, headers: { "content-type": "application/json" } }),
				413,
			);
			const proto = await request("POST", url("groups"), {
				raw: '{"name":"p","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}',
				headers: { "content-type": "application/json" },
			});
			expect(proto.status).toBe(422);
			expect(({} as any).polluted).toBeUndefined();
			expectEveError(await request("PATCH", url("groups/0123456789abcdef01234567"), { body: { name: "x" } }), 404);
		});

		it("patches with Eve's write shape, merging nested objects", async () => {
			const id = (
				await request("POST", url("groups"), {
					body: { name: "p-1", type: 1, info: { regex: "^a", grain: { os: "ALT" } } },
				})
			).body._id;
			const res = await request("PATCH", url(`groups/${id}`), { body: { info: { regex: "^b" }, hosts: ["x"] } });
			expect(res.status).toBe(200);
			expect(Object.keys(res.body)).toEqual(["_updated", "_created", "_id", "_links", "_status"]);
			const item = await request("GET", url(`groups/${id}`));
			expect(item.body.info).toEqual({ regex: "^b", grain: { os: "ALT" } });
			expect(item.body.hosts).toEqual(["x"]);
			const bad = expectEveError(await request("PATCH", url(`groups/${id}`), { body: { type: "one", nope: 1 } }), 422);
			expect(bad._issues).toEqual({ type: "must be of integer type", nope: "unknown field" });
			// An array is a document of the wrong type, as in Eve: 422 (a body that is not JSON data at all is a 400).
			expectEveError(await request("PATCH", url(`groups/${id}`), { body: [1] }), 422);
			// null is no value for a field that does not say it may be null (Eve: "null value not allowed"), nested too.
			const nulls = expectEveError(
				await request("PATCH", url(`groups/${id}`), {
					body: { name: null, subgroups: null, type: null, info: { regex: null } },
				}),
				422,
			);
			expect(nulls._issues).toEqual({
				name: "null value not allowed",
				subgroups: "null value not allowed",
				type: "null value not allowed",
				info: { regex: "null value not allowed" },
			});
			expect(
				expectEveError(await request("POST", url("groups"), { body: { name: "n", hosts: null } }), 422)._issues,
			).toEqual({ hosts: "null value not allowed" });
			const after = (await request("GET", url(`groups/${id}`))).body;
			expect([after.name, after.type, after.info]).toEqual(["p-1", 1, { regex: "^b", grain: { os: "ALT" } }]);
		});

		it("deletes items with 204 and unlinks them from their parents; a DELETE of an absent or malformed id is a 404, as GET", async () => {
			const child = (await request("POST", url("groups"), { body: { name: "del-child" } })).body._id;
			const parent = (await request("POST", url("groups"), { body: { name: "del-parent", subgroups: [child] } })).body
				._id;
			const del = await request("DELETE", url(`groups/${child}`));
			expect(del.status).toBe(204);
			expect(del.text).toBe("");
			expect((await request("GET", url(`groups/${child}`))).status).toBe(404);
			expect((await request("GET", url(`groups/${parent}`))).body.subgroups).toEqual([]);
			expectEveError(await request("DELETE", url(`groups/${child}`)), 404);
			expectEveError(await request("DELETE", url("groups/0123456789abcdef01234567")), 404);
			for (const junk of ["not-an-object-id", "0123456789ABCDEF01234567", "%00", "x".repeat(300)]) {
				expectEveError(await request("GET", url(`groups/${junk}`)), 404);
				expectEveError(await request("DELETE", url(`groups/${junk}`)), 404);
			}
			expect((await request("GET", url(`groups/${parent}`))).status).toBe(200);
		});

		it("deletes by type with DELETE /groups?where=, and refuses a delete without a type", async () => {
			await request("POST", url("groups"), {
				body: [
					{ name: "t3", type: 3 },
					{ name: "t4", type: 4 },
				],
			});
			const keeper = (await request("POST", url("groups"), { body: { name: "keeper", type: 1 } })).body._id;
			expect((await request("DELETE", url("groups", { where: { type: 3 } }))).status).toBe(204);
			expect((await request("GET", url("groups", { where: { type: 3 } }))).body._meta.total).toBe(0);
			expect((await request("GET", url("groups", { where: { type: 4 } }))).body._meta.total).toBeGreaterThanOrEqual(1);
			expect((await request("DELETE", url("groups", { where: { type: [3, 4] } }))).status).toBe(204);
			expect((await request("GET", url("groups", { where: { type: { $in: [3, 4] } } }))).body._meta.total).toBe(0);
			expect((await request("GET", url(`groups/${keeper}`))).status).toBe(200);
			expectEveError(await request("DELETE", url("groups")), 400);
			expectEveError(await request("DELETE", url("groups", { where: { name: "keeper" } })), 400);
			expectEveError(await request("DELETE", url("groups", { where: { type: "x" } })), 400);
			expect((await request("GET", url(`groups/${keeper}`))).status).toBe(200);
		});
	});

	describe("reads after writes", () => {
		it("never serve a list or an item from before the last write", async () => {
			const where = { name: { $in: ["rw-1", "rw-2"] } };
			expect((await request("GET", url("groups", { where }))).body._meta.total).toBe(0);
			const id = (await request("POST", url("groups"), { body: { name: "rw-1" } })).body._id;
			expect((await request("GET", url("groups", { where }))).body._meta.total).toBe(1);
			expect((await request("GET", url(`groups/${id}`))).body.hosts).toBeUndefined();
			await request("PATCH", url(`groups/${id}`), { body: { hosts: ["a"] } });
			expect((await request("GET", url(`groups/${id}`))).body.hosts).toEqual(["a"]);
			expect((await request("GET", url("groups", { where }))).body._items[0].hosts).toEqual(["a"]);
			await request("POST", url("groups"), { body: { name: "rw-2" } });
			const list = await request("GET", url("groups", { where }));
			expect(list.body._meta.total).toBe(2);
			expect(list.headers.get("x-total-count")).toBe("2");
			await request("DELETE", url(`groups/${id}`));
			expect((await request("GET", url("groups", { where }))).body._meta.total).toBe(1);
			expect((await request("GET", url(`groups/${id}`))).status).toBe(404);
		});
	});

	describe("routing errors", () => {
		it("answers 404 for unknown paths and malformed ids, 405 for methods a path lacks, and OPTIONS with Allow", async () => {
			expectEveError(await request("GET", `${h().api}/nosuch`), 404);
			expectEveError(await request("GET", `${h().api}/groups/a/b/c`), 404);
			expectEveError(await request("GET", url("groups/not-an-object-id")), 404);
			expectEveError(await request("GET", url("groups/0123456789abcdef01234567")), 404);
			expectEveError(await request("GET", url("groups/%E0%A4%A")), 400);
			expectEveError(await request("PUT", url("groups/0123456789abcdef01234567"), { body: {} }), 405);
			expectEveError(await request("PUT", url("groups"), { body: {} }), 405);
			expectEveError(await request("POST", url("actions"), { body: {} }), 405);
			expectEveError(await request("DELETE", url("hosts")), 405);
			const options = await request("OPTIONS", url("groups"));
			expect(options.status).toBe(200);
			expect(options.headers.get("allow")).toBe("GET, POST, DELETE, HEAD, OPTIONS");
			const head = await request("HEAD", url("groups"));
			expect(head.status).toBe(200);
			expect(head.text).toBe("");
			expect(Number(head.headers.get("x-total-count"))).toBeGreaterThan(0);
		});
	});
}
