/**
 * What a group resolves to: every descendant group (`/groups/{id}/subgroups`), every host below it
 * (`/groups/{id}/hostnames`), how deleting a group reaches hosts, and remote execution on a group.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 3000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	let value = await read();
	while (!done(value) && Date.now() < deadline) {
		await new Promise(r => setTimeout(r, 50));
		value = await read();
	}
	return value;
}

export default function groupsResolution(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const create = async (body: Record<string, unknown>): Promise<string> => {
		const res = await request("POST", url("groups"), { body });
		expect(res.status).toBe(201);
		return res.body._id;
	};

	// root -> [left, right]; left -> [shared]; right -> [shared, lone]; shared -> [leaf]
	const ids: Record<string, string> = {};
	beforeAll(async () => {
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: "gr-root-1", status: "up", key: "accepted" },
				{ _id: "gr-left-1", status: "up", key: "accepted" },
				{ _id: "gr-shared-1", status: "up", key: "accepted" },
				{ _id: "gr-retired-1", status: "down", key: "accepted" },
			],
		});
		expect((await request("DELETE", url("hosts/gr-retired-1"))).status).toBe(204);

		ids.leaf = await create({ name: "gr-leaf", hosts: ["gr-leaf-1", "gr-both-1"] });
		ids.shared = await create({ name: "gr-shared", subgroups: [ids.leaf], hosts: ["gr-shared-1", "gr-retired-1"] });
		ids.lone = await create({ name: "gr-lone", type: 1, info: { regex: "^gr-" } });
		ids.left = await create({ name: "gr-left", subgroups: [ids.shared], hosts: ["gr-left-1", "gr-both-1"] });
		ids.right = await create({ name: "gr-right", subgroups: [ids.shared, ids.lone], hosts: ["gr-right-1"] });
		ids.root = await create({ name: "gr-root", subgroups: [ids.left, ids.right], hosts: ["gr-root-1", "gr-zeta-1"] });
		ids.other = await create({ name: "gr-other", hosts: ["gr-other-1"] });
		ids.none = await create({ name: "gr-none", type: 1, info: { regex: "^no-host-is-named-so-" } });
	});

	describe("GET /groups/{id}/subgroups", () => {
		it("lists every descendant id once, nearest first", async () => {
			const res = await request("GET", url(`groups/${ids.root}/subgroups`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual([ids.left, ids.right, ids.shared, ids.lone, ids.leaf]);
			expect((await request("GET", url(`groups/${ids.right}/subgroups`))).body).toEqual([
				ids.shared,
				ids.lone,
				ids.leaf,
			]);
			expect((await request("GET", url(`groups/${ids.shared}/subgroups`))).body).toEqual([ids.leaf]);
		});

		it("gives an empty array for a group without subgroups", async () => {
			const res = await request("GET", url(`groups/${ids.leaf}/subgroups`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual([]);
		});

		it("answers 404 for an unknown or malformed group id", async () => {
			expectEveError(await request("GET", url("groups/0123456789abcdef0123ffff/subgroups")), 404);
			expectEveError(await request("GET", url("groups/not-a-group/subgroups")), 404);
		});
	});

	describe("GET /groups/{id}/hostnames", () => {
		it("gives the hosts of the group and of every group below it, sorted and unique", async () => {
			const res = await request("GET", url(`groups/${ids.root}/hostnames`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual([
				"gr-both-1",
				"gr-leaf-1",
				"gr-left-1",
				"gr-right-1",
				"gr-root-1",
				"gr-shared-1",
				"gr-zeta-1",
			]);
		});

		it("leaves out soft-deleted hosts but keeps names no host record has yet", async () => {
			const shared = await request("GET", url(`groups/${ids.shared}/hostnames`));
			expect(shared.body).toEqual(["gr-both-1", "gr-leaf-1", "gr-shared-1"]);
			const item = await request("GET", url(`groups/${ids.shared}`));
			expect(item.body.hosts).toEqual(["gr-shared-1", "gr-retired-1"]);
		});

		it("resolves an automatic group to the live hosts its regex matches from the start of their name", async () => {
			const res = await request("GET", url(`groups/${ids.lone}/hostnames`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual(["gr-left-1", "gr-root-1", "gr-shared-1"]);
		});

		it("drops a group's compound-target rule with info.target null in a PATCH: it resolves to its listed hosts again", async () => {
			const id = await create({
				name: "gr-target-drop",
				type: 1,
				hosts: ["gr-root-1"],
				info: { target: "gr-left-* or gr-shared-*" },
			});
			expect((await request("GET", url(`groups/${id}/hostnames`))).body).toEqual([
				"gr-left-1",
				"gr-root-1",
				"gr-shared-1",
			]);
			const res = await request("PATCH", url(`groups/${id}`), { body: { type: 0, info: { target: null } } });
			expect(res.status).toBe(200);
			expect((await request("GET", url(`groups/${id}/hostnames`))).body).toEqual(["gr-root-1"]);
			expect((await request("GET", url(`groups/${id}`))).body.info).toEqual({ target: null });
			expect((await request("DELETE", url(`groups/${id}`))).status).toBe(204);
		});

		it("gives an empty array for a group without hosts below it", async () => {
			const res = await request("GET", url(`groups/${ids.none}/hostnames`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual([]);
		});

		it("answers 404 for an unknown or malformed group id", async () => {
			expectEveError(await request("GET", url("groups/0123456789abcdef0123ffff/hostnames")), 404);
			expectEveError(await request("GET", url("groups/xyz/hostnames")), 404);
		});
	});

	describe("deleting a group", () => {
		it("drops it from the parents and from what the parents resolve to", async () => {
			const before = await request("GET", url(`groups/${ids.other}/subgroups`));
			expect(before.body).toEqual([]);
			const mid = await create({ name: "gr-mid", hosts: ["gr-mid-1"] });
			const top = (ids.top = await create({ name: "gr-top", subgroups: [mid, ids.other] }));
			expect((await request("GET", url(`groups/${top}/hostnames`))).body).toEqual(["gr-mid-1", "gr-other-1"]);
			expect((await request("DELETE", url(`groups/${mid}`))).status).toBe(204);
			expect((await request("GET", url(`groups/${top}/subgroups`))).body).toEqual([ids.other]);
			expect((await request("GET", url(`groups/${top}/hostnames`))).body).toEqual(["gr-other-1"]);
			expectEveError(await request("GET", url(`groups/${mid}/subgroups`)), 404);
		});

		it("keeps every host's groups (explicit, automatic, inherited from parents) and drops a deleted group from them", async () => {
			const doomed = await create({ name: "gr-doomed", hosts: ["gr-member-1", "gr-member-2"] });
			expect(
				(await request("PATCH", url(`groups/${ids.other}`), { body: { hosts: ["gr-other-1", "gr-member-1"] } })).status,
			).toBe(200);
			await h().call("hosts.upsertMany", {
				hosts: [
					{ _id: "gr-member-1", status: "up", key: "accepted" },
					{ _id: "gr-member-2", status: "up", key: "accepted" },
				],
			});
			// gr-lone (regex ^gr-) selects both, and it sits under gr-right, under gr-root.
			const inherited = [ids.lone, ids.right, ids.root];
			const sorted = (list: string[]) => [...list].sort();
			// gr-other is also under gr-top (the test above).
			const one = await eventually(
				() => request("GET", url("hosts/gr-member-1")),
				r => r.body?.groups?.length === 6,
			);
			expect(one.body.groups).toEqual(sorted([ids.other, ids.top, doomed, ...inherited]));
			expect(one.body._links.related.groups).toHaveLength(6);

			expect((await request("DELETE", url(`groups/${doomed}`))).status).toBe(204);
			// The hosts service learns of it from the groups.removed event.
			const after = await eventually(
				() => request("GET", url("hosts/gr-member-1")),
				r => r.body?.groups?.length === 5,
			);
			expect(after.body.groups).toEqual(sorted([ids.other, ids.top, ...inherited]));
			const two = await eventually(
				() => request("GET", url("hosts/gr-member-2")),
				r => r.body?.groups?.length === 3,
			);
			expect(two.body.groups).toEqual(sorted(inherited));
			const listed = await request("GET", url("hosts", { where: { groups: doomed } }));
			expect(listed.body._meta.total).toBe(0);
		});
	});

	describe("automatic groups, nodegroups and memberships", () => {
		it("resolves a grain rule (nested path, glob, every condition) and follows grain changes", async () => {
			await h().call("hosts.upsertMany", {
				hosts: [
					{ _id: "ag-one", status: "up", key: "accepted", grain: { os: "ALT", ip_interfaces: { eth0: ["10.5.0.1"] } } },
					{
						_id: "ag-two",
						status: "up",
						key: "accepted",
						grain: { os: "Debian", ip_interfaces: { eth0: ["10.5.0.2"] } },
					},
					{
						_id: "ag-three",
						status: "up",
						key: "accepted",
						grain: { os: "ALT", ip_interfaces: { eth0: ["10.6.0.3"] } },
					},
				],
			});
			const auto = await create({
				name: "ag-alt-site5",
				type: 1,
				info: { grain: { os: "ALT", "ip_interfaces:eth0": "10.5.*" } },
			});
			expect((await request("GET", url(`groups/${auto}/hostnames`))).body).toEqual(["ag-one"]);
			const one = await eventually(
				() => request("GET", url("hosts/ag-one")),
				r => r.body?.groups?.includes(auto),
			);
			expect(one.body.groups).toEqual([auto]);

			await h().call("hosts.upsertMany", {
				hosts: [{ _id: "ag-two", grain: { os: "ALT", ip_interfaces: { eth0: ["10.5.0.2"] } } }],
			});
			expect((await request("GET", url(`groups/${auto}/hostnames`))).body).toEqual(["ag-one", "ag-two"]);
			expect((await request("GET", url("hosts/ag-two"))).body.groups).toEqual([auto]);
			expect((await request("GET", url("hosts/ag-three"))).body.groups).toEqual([]);

			// PATCH merges nested objects (Eve's MERGE_NESTED_DOCUMENTS): this widens one condition.
			expect(
				(await request("PATCH", url(`groups/${auto}`), { body: { info: { grain: { "ip_interfaces:eth0": "10.*" } } } }))
					.status,
			).toBe(200);
			const three = await eventually(
				() => request("GET", url("hosts/ag-three")),
				r => r.body?.groups?.length === 1,
			);
			expect(three.body.groups).toEqual([auto]);
			expect((await request("GET", url(`groups/${auto}/hostnames`))).body).toEqual(["ag-one", "ag-three", "ag-two"]);
		});

		it("refuses rules that cannot be matched safely with a 422 naming the field", async () => {
			for (const info of [
				{ regex: "(web)\\1" },
				{ regex: "(?=web)" },
				{ regex: "[" },
				{ grain: { os: "[z-a]" } },
				{ grain: { "a::b": "x" } },
			]) {
				const res = expectEveError(
					await request("POST", url("groups"), { body: { name: "ag-bad", type: 1, info } }),
					422,
				);
				expect(Object.keys(res._issues.info)).toHaveLength(1);
			}
			const ok = await create({ name: "ag-patched", type: 1, info: { regex: "^ag-" } });
			expectEveError(await request("PATCH", url(`groups/${ok}`), { body: { info: { regex: "(a)\\1" } } }), 422);
			expect((await request("GET", url(`groups/${ok}`))).body.info).toEqual({ regex: "^ag-" });
		});

		it("resolves a compound rule (docs/targeting.md) on hostnames and in memberships, nodegroups included, and refuses F@ in it", async () => {
			await h().call("hosts.upsertMany", {
				hosts: [
					{
						_id: "cp-web-1",
						status: "up",
						key: "accepted",
						grain: { osfullname: "ALT", os: "ALT", ipv4: ["10.7.0.1"] },
					},
					{
						_id: "cp-web-2",
						status: "up",
						key: "accepted",
						grain: { osfullname: "Debian", os: "Debian", ipv4: ["10.8.0.2"] },
					},
					{
						_id: "cp-db-1",
						status: "up",
						key: "accepted",
						grain: { osfullname: "ALT", os: "ALT", ipv4: ["10.7.0.3"] },
					},
				],
			});
			const auto = await create({
				name: "cp-alt-subnet",
				type: 1,
				info: { target: "cp-* and G@os:alt and ( S@10.7.0.0/16 or N@e2e-web )" },
			});
			expect((await request("GET", url(`groups/${auto}/hostnames`))).body).toEqual(["cp-db-1", "cp-web-1"]);
			const one = await eventually(
				() => request("GET", url("hosts/cp-web-1")),
				r => r.body?.groups?.includes(auto),
			);
			expect(one.body.groups).toEqual([auto]);
			expect((await request("GET", url("hosts/cp-web-2"))).body.groups).toEqual([]);
			const refused = expectEveError(
				await request("POST", url("groups"), {
					body: { name: "cp-bad", type: 1, info: { target: `F@${auto} or cp-*` } },
				}),
				422,
			);
			expect(refused._issues.info.target).toMatch(/cannot name groups/);
			expectEveError(
				await request("POST", url("groups"), { body: { name: "cp-bad", type: 1, info: { target: "cp-* I@x:y" } } }),
				422,
			);
		});

		it("gives each host the nodegroups its name and grains match, and follows grain changes", async () => {
			await h().call("hosts.upsertMany", {
				hosts: [
					{ _id: "web-ng-1", status: "up", key: "accepted", grain: { osfullname: "ALT", virtual: "kvm" } },
					{ _id: "db-ng-1", status: "up", key: "accepted", grain: { osfullname: "Debian", virtual: "kvm" } },
				],
			});
			expect((await request("GET", url("hosts/web-ng-1"))).body.nodegroups).toEqual(["e2e-alt", "e2e-web"]);
			expect((await request("GET", url("hosts/db-ng-1"))).body.nodegroups).toEqual(["e2e.db_1"]);
			await h().call("hosts.upsertMany", { hosts: [{ _id: "db-ng-1", grain: { osfullname: "ALT", virtual: "xen" } }] });
			expect((await request("GET", url("hosts/db-ng-1"))).body.nodegroups).toEqual(["e2e-alt"]);
			const listed = await request(
				"GET",
				url("hosts", { where: { nodegroups: "e2e-web", _id: { $in: ["web-ng-1", "db-ng-1"] } } }),
			);
			expect(listed.body._items.map((x: any) => x._id)).toEqual(["web-ng-1"]);
		});
	});

	describe("remote execution on a group", () => {
		it("answers 503 while no cm-gateway runs", async () => {
			const res = expectEveError(
				await request("POST", url(`groups/${ids.root}`), {
					body: { cm_client: "local_async", fun: "test.ping", kwarg: {} },
				}),
				503,
			);
			expect(res._error.message).toBe(
				"no configuration-management master is configured (CM_API_URL), or the cm-gateway is not running",
			);
		});
	});
}
