/**
 * The hosts collection as a client sees it: hostname ids, `grain` only on items, related links by
 * nodegroup name, HTTP-dates, the masked OTP secret, the one writable field, soft delete with
 * `show_soft_deleted`, and the routes whose service (the cm-gateway) is not there.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OTP_SECRET = "JBSWY3DPEHPK3PXP";

export default function hosts(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);

	// Its name and grains put it in the nodegroups e2e-web (regex ^web-) and e2e-alt (grain osfullname ALT).
	const A = "web-hs-01.example";
	const B = "hs-db-02";
	const GONE = "hs-gone-03";
	const ALL = [A, B, GONE];
	const mine = { _id: { $in: ALL } };
	const JID = "20240501120000123456";
	let groupId: string;

	const grain = {
		cpu_model: "Intel(R) Xeon(R) CPU E5-2680 v4",
		cpuarch: "x86_64",
		mem_total: 64314,
		num_cpus: 8,
		gpus: [{ model: "GP102", vendor: "nvidia" }],
		ctl: { last_distupgrade: "2024-04-30 10:00:00+00:00", last_stateapply: "2024-05-01 12:00:00+00:00" },
		osfullname: "ALT",
		ip_interfaces: { eth0: ["10.0.0.11"] },
	};
	const vpn = {
		auth_type: "otp",
		hwtoken_id: null,
		client_to_client: false,
		otp_secret: OTP_SECRET,
		name: A,
		pin: false,
		dns_suffix: null,
		disabled: false,
		mac_addresses: null,
		email: "ops@example.org",
		organization_name: "hs-org",
		bypass_secondary: false,
		groups: [],
		organization: "5f0000000000000000000001",
		port_forwarding: [],
		dns_servers: null,
		type: "client",
		id: "5f00000000000000000000aa",
	};

	beforeAll(async () => {
		const group = await request("POST", url("groups"), { body: { name: "hs-group", type: 0, hosts: [A] } });
		expect(group.status).toBe(201);
		groupId = group.body._id;
		await h().call("actions.record", {
			returns: [
				{ jid: JID, action: "test.ping", host: A, state: "finished", args: [{ __kwarg__: true }], return: "True" },
			],
		});
		await h().call("hosts.upsertMany", {
			hosts: [
				{
					_id: A,
					version: "3006.8",
					ip: "10.0.0.11",
					status: "up",
					key: "accepted",
					last_distupgrade: new Date("2024-04-30T10:00:00Z"),
					last_stateapply: new Date("2024-05-01T12:00:00Z"),
					last_action: `${JID}${A}`,
					heartbeat: new Date("2024-05-02T08:09:10Z"),
					nat: true,
					fingerprint: "aa:bb:cc:dd",
					fingerprint_history: [{ added: new Date("2024-01-15T06:07:08Z"), fingerprint: "aa:bb:cc:dd" }],
					vpn_representation: vpn,
					grain,
				},
				{
					_id: B,
					version: "3006.8",
					ip: "10.0.0.12",
					status: "up",
					key: "accepted",
					nodegroups: [],
					grain: { osfullname: "Debian" },
				},
				{
					_id: GONE,
					version: "3005.1",
					ip: "10.0.0.13",
					status: "down",
					key: "accepted",
					grain: { osfullname: "ALT" },
				},
			],
		});
	});

	/** The related links host A has: its nodegroups by name, its group, its last action. */
	const relatedOfA = () => ({
		nodegroups: [
			{ title: "Nodegroup", href: "nodegroups/e2e-alt" },
			{ title: "Nodegroup", href: "nodegroups/e2e-web" },
		],
		groups: [{ title: "Group", href: `groups/${groupId}` }],
		last_action: { title: "Action", href: `actions/${JID}${A}` },
	});

	describe("reading", () => {
		it("lists hosts keyed by hostname, without grain, with related links and HTTP-dates", async () => {
			const res = await request("GET", url("hosts", { where: mine, sort: "_id" }));
			expect(res.status).toBe(200);
			expect(res.body._meta).toEqual({ page: 1, max_results: 25, total: 3 });
			expect(res.body._items.map((x: any) => x._id)).toEqual([B, GONE, A]);
			for (const item of res.body._items) expect(item).not.toHaveProperty("grain");
			const a = res.body._items[2];
			expect(a).toMatchObject({
				_id: A,
				version: "3006.8",
				ip: "10.0.0.11",
				status: "up",
				key: "accepted",
				nat: true,
				nodegroups: ["e2e-alt", "e2e-web"],
				groups: [groupId],
				last_distupgrade: "Tue, 30 Apr 2024 10:00:00 GMT",
				last_stateapply: "Wed, 01 May 2024 12:00:00 GMT",
				heartbeat: "Thu, 02 May 2024 08:09:10 GMT",
				fingerprint_history: [{ added: "Mon, 15 Jan 2024 06:07:08 GMT", fingerprint: "aa:bb:cc:dd" }],
				_soft_deleted: false,
			});
			expect(a._created).toMatch(HTTP_DATE);
			expect(a._updated).toMatch(HTTP_DATE);
			expect(a._links).toEqual({
				self: { title: "Host", href: `hosts/${A}` },
				related: relatedOfA(),
			});
			// A host with no references has no `related` at all.
			expect(res.body._items[0]._links).toEqual({ self: { title: "Host", href: `hosts/${B}` } });
		});

		it("shows grain on the item, and hides it with projection={grain:0}", async () => {
			const res = await request("GET", url(`hosts/${A}`));
			expect(res.status).toBe(200);
			expect(res.body._id).toBe(A);
			expect(res.body.grain).toEqual(grain);
			expect(res.body.last_stateapply).toBe("Wed, 01 May 2024 12:00:00 GMT");
			expect(res.body._links).toEqual({
				self: { title: "Host", href: `hosts/${A}` },
				related: relatedOfA(),
				parent: { title: "home", href: "/" },
				collection: { title: "hosts", href: "hosts" },
			});
			expect(res.headers.get("last-modified")).toBe(res.body._updated);

			const hidden = await request("GET", url(`hosts/${A}`, { projection: { grain: 0 } }));
			expect(hidden.status).toBe(200);
			expect(hidden.body).not.toHaveProperty("grain");
			expect(hidden.body.ip).toBe("10.0.0.11");

			const only = await request("GET", url(`hosts/${A}`, { projection: { grain: 1 } }));
			expect(Object.keys(only.body).sort()).toEqual([
				"_created",
				"_id",
				"_links",
				"_soft_deleted",
				"_updated",
				"grain",
			]);
		});

		it("follows the related links: nodegroup by name, group and last action by id", async () => {
			const item = await request("GET", url(`hosts/${A}`));
			const { nodegroups, groups, last_action } = item.body._links.related;
			const ng = await request("GET", url(nodegroups[0].href));
			expect(ng.status).toBe(200);
			expect(ng.body.name).toBe("e2e-alt");
			const group = await request("GET", url(groups[0].href));
			expect(group.status).toBe(200);
			expect(group.body.name).toBe("hs-group");
			const action = await request("GET", url(last_action.href));
			expect(action.status).toBe(200);
			expect(action.body).toMatchObject({ jid: JID, host: A, action: "test.ping" });
		});

		it("masks otp_secret in the list and on the item for everyone but admins", async () => {
			const viewer = (await request("POST", url("tokens"), { body: { name: "hs-viewer", role: "viewer" } })).body.token;
			const operator = (await request("POST", url("tokens"), { body: { name: "hs-operator", role: "operator" } })).body
				.token;
			for (const token of [viewer, operator]) {
				const list = await request("GET", url("hosts", { where: { _id: A } }), { token });
				expect(list.body._items[0].vpn_representation).toEqual({ ...vpn, otp_secret: "********" });
				const item = await request("GET", url(`hosts/${A}`), { token });
				expect(item.body.vpn_representation).toEqual({ ...vpn, otp_secret: "********" });
				const projected = await request(
					"GET",
					url(`hosts/${A}`, { projection: { "vpn_representation.otp_secret": 1 } }),
					{ token },
				);
				for (const res of [list, item, projected]) expect(res.text).not.toContain(OTP_SECRET);
			}
			// Admins see it in clear (the default token of these suites is an admin's).
			expect((await request("GET", url(`hosts/${A}`))).body.vpn_representation).toEqual(vpn);
			expect((await request("GET", url("hosts", { where: { _id: A } }))).body._items[0].vpn_representation).toEqual(
				vpn,
			);
		});

		it("answers 404 for an unknown host and for hostnames with characters a hostname cannot have", async () => {
			expectEveError(await request("GET", url("hosts/hs-no-such-host")), 404);
			for (const bad of ["bad%20host", "-leading-dash", "a*b", "%C3%A4rger", "a%2Fb"]) {
				expectEveError(await request("GET", `${h().api}/hosts/${bad}`), 404);
			}
			expectEveError(
				await request("PATCH", url("hosts/hs-no-such-host"), { body: { identification_number: "x" } }),
				404,
			);
		});
	});

	describe("writing", () => {
		it("PATCHes identification_number with Eve's write shape, and persists it", async () => {
			const res = await request("PATCH", url(`hosts/${B}`), { body: { identification_number: "INV-0042" } });
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: B,
				_soft_deleted: false,
				_links: { self: { title: "Host", href: `hosts/${B}` } },
				_status: "OK",
			});
			const item = await request("GET", url(`hosts/${B}`));
			expect(item.body.identification_number).toBe("INV-0042");
			expect(item.body.ip).toBe("10.0.0.12");
			expect(item.body.grain).toEqual({ osfullname: "Debian" });

			const withLinks = await request("PATCH", url(`hosts/${A}`), { body: { identification_number: "INV-0001" } });
			expect(withLinks.status).toBe(200);
			expect(withLinks.body._links.related.last_action).toEqual({ title: "Action", href: `actions/${JID}${A}` });
		});

		it("refuses every other field with 422 unknown field, and keeps the record as it was", async () => {
			for (const [field, value] of [
				["ip", "1.2.3.4"],
				["status", "down"],
				["grain", {}],
				["_soft_deleted", true],
				["nodegroups", []],
			] as const) {
				const err = expectEveError(await request("PATCH", url(`hosts/${B}`), { body: { [field]: value } }), 422);
				expect(err._issues).toEqual({ [field]: "unknown field" });
			}
			const mixed = expectEveError(
				await request("PATCH", url(`hosts/${B}`), { body: { identification_number: "INV-9", version: "x" } }),
				422,
			);
			expect(mixed._issues).toEqual({ version: "unknown field" });
			const wrongType = expectEveError(
				await request("PATCH", url(`hosts/${B}`), { body: { identification_number: 42 } }),
				422,
			);
			expect(wrongType._issues).toEqual({ identification_number: "must be of string type" });
			const item = await request("GET", url(`hosts/${B}`));
			expect(item.body).toMatchObject({ ip: "10.0.0.12", status: "up", identification_number: "INV-0042" });
		});

		it("has no collection POST, and no PUT", async () => {
			expectEveError(await request("POST", url("hosts"), { body: { _id: "hs-new" } }), 405);
			expectEveError(await request("PUT", url(`hosts/${B}`), { body: { identification_number: "x" } }), 405);
		});
	});

	describe("soft delete", () => {
		beforeAll(async () => {
			const res = await request("DELETE", url(`hosts/${GONE}`));
			expect(res.status).toBe(204);
			expect(res.text).toBe("");
		});

		it("hides a deleted host from the list and the item", async () => {
			const list = await request("GET", url("hosts", { where: mine, sort: "_id" }));
			expect(list.body._items.map((x: any) => x._id)).toEqual([B, A]);
			expect(list.body._meta.total).toBe(2);
			expectEveError(await request("GET", url(`hosts/${GONE}`)), 404);
			expectEveError(await request("PATCH", url(`hosts/${GONE}`), { body: { identification_number: "x" } }), 404);
			// Deleting it again is a 404, as GET is (docs/api.md).
			expectEveError(await request("DELETE", url(`hosts/${GONE}`)), 404);
			expectEveError(await request("DELETE", url("hosts/no-such-host")), 404);
			expectEveError(await request("DELETE", url("hosts/-not_a_hostname")), 404);
		});

		it("shows it with show_soft_deleted=1, flagged, in the list and on the item", async () => {
			const list = await request("GET", url("hosts", { where: mine, sort: "_id", show_soft_deleted: 1 }));
			expect(list.status).toBe(200);
			expect(list.body._items.map((x: any) => [x._id, x._soft_deleted])).toEqual([
				[B, false],
				[GONE, true],
				[A, false],
			]);
			expect(list.body._meta.total).toBe(3);
			expect(list.body._links.self.href).toBe(`hosts?where=${JSON.stringify(mine)}&sort=_id&show_soft_deleted=1`);
			const item = await request("GET", url(`hosts/${GONE}`, { show_soft_deleted: 1 }));
			expect(item.status).toBe(200);
			expect(item.body).toMatchObject({
				_id: GONE,
				_soft_deleted: true,
				ip: "10.0.0.13",
				grain: { osfullname: "ALT" },
			});
			expect(item.body._links.collection).toEqual({ title: "hosts", href: "hosts?show_soft_deleted=1" });
		});

		it("does not show it for show_soft_deleted=false or 0 (unlike Eve's presence-only check)", async () => {
			for (const value of ["false", "0"]) {
				const list = await request("GET", url("hosts", { where: mine, show_soft_deleted: value }));
				expect(list.body._items.map((x: any) => x._id).sort()).toEqual([A, B].sort());
				expectEveError(await request("GET", url(`hosts/${GONE}`, { show_soft_deleted: value })), 404);
			}
		});

		it("lists only the deleted hosts with where={_soft_deleted:true}", async () => {
			const res = await request("GET", url("hosts", { where: { _soft_deleted: true, _id: { $in: ALL } } }));
			expect(res.body._items.map((x: any) => x._id)).toEqual([GONE]);
			expect(res.body._meta.total).toBe(1);
			const alive = await request("GET", url("hosts", { where: { _soft_deleted: false, _id: { $in: ALL } } }));
			expect(alive.body._meta.total).toBe(2);
		});
	});

	describe("routes served by services that are not there yet", () => {
		it("answers 503 for remote execution on a host and for all_status", async () => {
			const exec = expectEveError(
				await request("POST", url(`hosts/${A}`), { body: { cm_client: "local", fun: "test.ping", kwarg: {} } }),
				503,
			);
			expect(exec._error.message).toBe(
				"no configuration-management master is configured (CM_API_URL), or the cm-gateway is not running",
			);
			expectEveError(await request("POST", url(`hosts/${A}/all_status`), { body: { action: "start" } }), 503);
		});
	});
}
