/**
 * The remaining collections: actions, failed patches, patches (updates), alerts, settings and
 * nodegroups (host snapshots: stats.ts). Records that have no public write endpoint are seeded through the
 * internal actions the cm-gateway and the other services use.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";
import { NODEGROUPS } from "../../support/suite-env";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;
const itemLinks = (resource: string, title: string, id: string, extra: Record<string, unknown> = {}) => ({
	self: { title, href: `${resource}/${id}` },
	...extra,
	parent: { title: "home", href: "/" },
	collection: { title: resource, href: resource },
});
const stamps = { _updated: expect.stringMatching(HTTP_DATE), _created: expect.stringMatching(HTTP_DATE) };

export default function records(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);

	const HOST = "rc-host-1";
	const GHOST = "rc-ghost-1";
	beforeAll(async () => {
		await h().call("hosts.upsertMany", {
			hosts: [
				{ _id: HOST, version: "3006.8", ip: "10.1.0.1", status: "up", key: "accepted", grain: { osfullname: "ALT" } },
			],
		});
	});

	describe("actions", () => {
		const J1 = "20240501120000000001";
		const J2 = "20240501120500000002";
		const J3 = "20240501120000000003";
		const hosts = { host: { $in: [HOST, GHOST] } };
		beforeAll(async () => {
			await h().call("actions.record", {
				returns: [
					{ jid: J1, action: "test.ping", host: HOST, state: "finished", args: [{ __kwarg__: true }], return: "True" },
					{ jid: J3, action: "test.ping", host: GHOST, state: "finished", args: [], return: "True" },
				],
			});
			// _created has second precision: the next record is one second newer (time passing, not an oracle).
			await new Promise(r => setTimeout(r, 1100));
			await h().call("actions.record", {
				returns: [
					{
						jid: J2,
						action: "state.apply",
						host: HOST,
						state: "finished",
						args: ["patch-1", { __kwarg__: true, test: true }],
						return: "Summary: 3 succeeded",
					},
				],
			});
		});

		it("lists newest first with sort=-_created and filters on action", async () => {
			const newest = await request("GET", url("actions", { where: { host: HOST }, sort: "-_created" }));
			expect(newest.status).toBe(200);
			expect(newest.body._items.map((a: any) => a._id)).toEqual([`${J2}${HOST}`, `${J1}${HOST}`]);
			const oldest = await request("GET", url("actions", { where: { host: HOST }, sort: "_created" }));
			expect(oldest.body._items.map((a: any) => a._id)).toEqual([`${J1}${HOST}`, `${J2}${HOST}`]);

			const pings = await request("GET", url("actions", { where: { action: "test.ping", ...hosts }, sort: "_id" }));
			expect(pings.body._meta.total).toBe(2);
			expect(pings.body._items.map((a: any) => a._id)).toEqual([`${J1}${HOST}`, `${J3}${GHOST}`]);
			expect(pings.body._items[0]._links).toEqual({
				self: { title: "Action", href: `actions/${J1}${HOST}` },
				related: {
					host: { title: "Host", href: `hosts/${HOST}` },
					jid: { title: "Salt_job", href: `salt_jobs/${J1}` },
				},
			});
		});

		it("shows one action with its host and job links", async () => {
			const id = `${J2}${HOST}`;
			const res = await request("GET", url(`actions/${id}`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				jid: J2,
				action: "state.apply",
				host: HOST,
				state: "finished",
				args: ["patch-1", { __kwarg__: true, test: true }],
				return: "Summary: 3 succeeded",
				...stamps,
				_id: id,
				_links: itemLinks("actions", "Action", id, {
					related: {
						host: { title: "Host", href: `hosts/${HOST}` },
						jid: { title: "Salt_job", href: `salt_jobs/${J2}` },
					},
				}),
			});
			const host = await request("GET", url(res.body._links.related.host.href));
			expect(host.status).toBe(200);
			expect(host.body._id).toBe(HOST);
		});

		it("embeds the host record without _links, and null for a host that does not exist", async () => {
			const item = await request("GET", url(`actions/${J1}${HOST}`, { embedded: { host: 1 } }));
			expect(item.status).toBe(200);
			expect(item.body.host).toMatchObject({
				_id: HOST,
				version: "3006.8",
				ip: "10.1.0.1",
				status: "up",
				nodegroups: ["e2e-alt"],
			});
			expect(item.body.host._links).toBeUndefined();
			expect(item.body.host._created).toMatch(HTTP_DATE);
			expect(item.body._links.related.host).toEqual({ title: "Host", href: `hosts/${HOST}` });

			const list = await request(
				"GET",
				url("actions", { where: { action: "test.ping", ...hosts }, sort: "_id", embedded: { host: 1 } }),
			);
			expect(list.body._items[0].host._id).toBe(HOST);
			expect(list.body._items[1].host).toBeNull();
			expect(list.body._items[1]._links.related.host).toEqual({ title: "Host", href: `hosts/${GHOST}` });
		});

		it("keeps a host's record when one write repeats its return: the later return wins, none is lost", async () => {
			const jid = "20240101000000999999";
			await h().call("actions.record", {
				returns: [{ jid, action: "test.ping", host: HOST, state: "running", args: [], return: "" }],
			});
			// The same host's return twice in one batch (the event stream and the job poll both brought it).
			await h().call("actions.record", {
				returns: [
					{ jid, action: "test.ping", host: HOST, state: "finished", args: [], return: "first" },
					{ jid, action: "test.ping", host: HOST, state: "finished", args: [], return: "true" },
				],
			});
			const res = await request("GET", url("actions", { where: { jid } }));
			expect(
				res.body._items.map((a: { host: string; state: string; return: string }) => [a.host, a.state, a.return]),
			).toEqual([[HOST, "finished", "true"]]);
		});

		it("answers 404 for unknown ids and 405 for writes", async () => {
			expectEveError(await request("GET", url(`actions/${J1}rc-nobody`)), 404);
			expectEveError(await request("GET", url("actions/not-an-action")), 404);
			expectEveError(await request("PATCH", url(`actions/${J1}${HOST}`), { body: { state: "x" } }), 405);
			expectEveError(await request("DELETE", url(`actions/${J1}${HOST}`)), 405);
		});
	});

	describe("failed_patches", () => {
		const JID = "20240502080000000042";
		const steps = [
			{
				comment: 'Command "apt-get -y dist-upgrade" run',
				name: "apt-get -y dist-upgrade",
				start_time: "08:00:01.123456",
				result: false,
				duration: 1234.567,
				__run_num__: 0,
				__sls__: "rc-patch-7",
				__id__: "upgrade",
				cmd: "apt-get -y dist-upgrade",
				changes: { pid: 4242, retcode: 100, stderr: "E: Unable to fetch some archives", stdout: "" },
			},
			{
				comment: "One or more requisite failed",
				name: "reboot",
				start_time: "08:20:35.000001",
				result: false,
				duration: 0.01,
				__run_num__: 1,
				__sls__: "rc-patch-7",
				__id__: "reboot",
				cmd: "",
				changes: { pid: 0, retcode: 0, stderr: "", stdout: "" },
			},
		];
		beforeAll(async () => {
			await h().call("failed-patches.record", {
				returns: [
					{ jid: JID, action: "state.apply", host: HOST, state: "finished", patch: "rc-patch-7", return: steps },
				],
			});
		});

		it("lists failed runs with their host and job links", async () => {
			const res = await request("GET", url("failed_patches", { where: { patch: "rc-patch-7" } }));
			expect(res.status).toBe(200);
			expect(res.body._meta.total).toBe(1);
			expect(res.body._items[0]).toMatchObject({
				_id: `${JID}${HOST}`,
				jid: JID,
				host: HOST,
				patch: "rc-patch-7",
				return: steps,
			});
			expect(res.body._items[0]._links).toEqual({
				self: { title: "Failed_patche", href: `failed_patches/${JID}${HOST}` },
				related: {
					host: { title: "Host", href: `hosts/${HOST}` },
					jid: { title: "Salt_job", href: `salt_jobs/${JID}` },
				},
			});
		});

		it("shows every step of a run on the item", async () => {
			const id = `${JID}${HOST}`;
			const res = await request("GET", url(`failed_patches/${id}`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				jid: JID,
				action: "state.apply",
				host: HOST,
				state: "finished",
				patch: "rc-patch-7",
				return: steps,
				...stamps,
				_id: id,
				_links: itemLinks("failed_patches", "Failed_patche", id, {
					related: {
						host: { title: "Host", href: `hosts/${HOST}` },
						jid: { title: "Salt_job", href: `salt_jobs/${JID}` },
					},
				}),
			});
			const embedded = await request("GET", url(`failed_patches/${id}`, { embedded: { host: 1 } }));
			expect(embedded.body.host).toMatchObject({ _id: HOST, ip: "10.1.0.1" });
		});

		it("answers 404 for an unknown run and 405 for writes", async () => {
			expectEveError(await request("GET", url(`failed_patches/${JID}rc-nobody`)), 404);
			expectEveError(await request("POST", url("failed_patches"), { body: {} }), 405);
			expectEveError(await request("DELETE", url(`failed_patches/${JID}${HOST}`)), 405);
		});
	});

	describe("updates", () => {
		const names = ["rc-patch-a", "rc-patch-b"];
		let a: string;
		beforeAll(async () => {
			await h().call("updates.upsertMany", {
				patches: [
					{ name: "rc-patch-a", text: "openssl:\n  pkg.latest: []\n" },
					{ name: "rc-patch-b", text: "kernel:\n  pkg.latest: []\n" },
				],
			});
			const list = await request("GET", url("updates", { where: { name: "rc-patch-a" } }));
			a = list.body._items[0]._id;
		});

		it("lists and shows patches with an empty description", async () => {
			const list = await request("GET", url("updates", { where: { name: { $in: names } }, sort: "name" }));
			expect(list.status).toBe(200);
			expect(list.body._items.map((u: any) => [u.name, u.description])).toEqual([
				["rc-patch-a", ""],
				["rc-patch-b", ""],
			]);
			expect(a).toMatch(OBJECT_ID);
			const item = await request("GET", url(`updates/${a}`));
			expect(item.body).toEqual({
				name: "rc-patch-a",
				text: "openssl:\n  pkg.latest: []\n",
				description: "",
				...stamps,
				_id: a,
				_links: itemLinks("updates", "Update", a),
			});
		});

		it("PATCHes the description only", async () => {
			const res = await request("PATCH", url(`updates/${a}`), { body: { description: "Fixes CVE-2024-0001" } });
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				...stamps,
				_id: a,
				_links: { self: { title: "Update", href: `updates/${a}` } },
				_status: "OK",
			});
			expect((await request("GET", url(`updates/${a}`))).body.description).toBe("Fixes CVE-2024-0001");

			expect(
				expectEveError(await request("PATCH", url(`updates/${a}`), { body: { name: "renamed" } }), 422)._issues,
			).toEqual({ name: "unknown field" });
			expect(expectEveError(await request("PATCH", url(`updates/${a}`), { body: { text: "x" } }), 422)._issues).toEqual(
				{ text: "unknown field" },
			);
			expect(
				expectEveError(await request("PATCH", url(`updates/${a}`), { body: { description: 5 } }), 422)._issues,
			).toEqual({ description: "must be of string type" });
			expectEveError(
				await request("PATCH", url("updates/0123456789abcdef0123ffff"), { body: { description: "x" } }),
				404,
			);
			const item = await request("GET", url(`updates/${a}`));
			expect(item.body).toMatchObject({
				name: "rc-patch-a",
				text: "openssl:\n  pkg.latest: []\n",
				description: "Fixes CVE-2024-0001",
			});
		});

		it("keeps the description when the patches are loaded again", async () => {
			await h().call("updates.upsertMany", {
				patches: [{ name: "rc-patch-a", text: "openssl:\n  pkg.latest:\n    - refresh: true\n" }],
			});
			const item = await request("GET", url(`updates/${a}`));
			expect(item.body).toMatchObject({
				name: "rc-patch-a",
				text: "openssl:\n  pkg.latest:\n    - refresh: true\n",
				description: "Fixes CVE-2024-0001",
			});
			expect((await request("GET", url("updates", { where: { name: "rc-patch-a" } }))).body._meta.total).toBe(1);
		});

		it("answers 503 for POST /updates while no cm-gateway runs, and 405 for deletes", async () => {
			expectEveError(await request("POST", url("updates")), 503);
			expectEveError(await request("DELETE", url(`updates/${a}`)), 405);
			expectEveError(await request("DELETE", url("updates")), 405);
		});
	});

	describe("alerts", () => {
		const where = { "payload.hostname": "rc-vnc-host" };
		const ids: Record<string, string> = {};
		beforeAll(async () => {
			for (const status of ["a-connected", "b-connected", "c-disconnected", "d-connected"]) {
				ids[status[0]] = (
					await h().call("alerts.raise", {
						type: "vnc.connect",
						level: "info",
						payload: { hostname: "rc-vnc-host", status },
					})
				)._id;
			}
		});
		const readFlags = async () => {
			const res = await request("GET", url("alerts", { where, sort: "payload.status" }));
			return res.body._items.map((x: any) => x.read);
		};

		it("lists unread alerts, and a plain read leaves them unread", async () => {
			const res = await request("GET", url("alerts", { where, sort: "payload.status" }));
			expect(res.status).toBe(200);
			expect(res.body._meta.total).toBe(4);
			expect(res.body._items[0]).toEqual({
				type: "vnc.connect",
				level: "info",
				payload: { hostname: "rc-vnc-host", status: "a-connected" },
				read: false,
				...stamps,
				_id: ids.a,
				_links: { self: { title: "Alert", href: `alerts/${ids.a}` } },
			});
			expect(await readFlags()).toEqual([false, false, false, false]);
			expect((await request("GET", url("alerts", { where, mark_as_read: 0 }))).status).toBe(200);
			expect(await readFlags()).toEqual([false, false, false, false]);
		});

		it("marks the returned alerts read with mark_as_read=1 on the list, in that response and afterwards", async () => {
			const res = await request(
				"GET",
				url("alerts", { where, sort: "payload.status", max_results: 2, mark_as_read: 1 }),
			);
			expect(res.status).toBe(200);
			expect(res.body._items.map((x: any) => [x._id, x.read])).toEqual([
				[ids.a, true],
				[ids.b, true],
			]);
			expect(res.body._links.self.href).toBe(
				`alerts?max_results=2&where=${JSON.stringify(where)}&sort=payload.status&mark_as_read=1`,
			);
			expect(await readFlags()).toEqual([true, true, false, false]);
		});

		it("marks one alert read with mark_as_read=1 on the item", async () => {
			const plain = await request("GET", url(`alerts/${ids.c}`));
			expect(plain.body.read).toBe(false);
			const marked = await request("GET", url(`alerts/${ids.c}`, { mark_as_read: 1 }));
			expect(marked.status).toBe(200);
			expect(marked.body.read).toBe(true);
			expect(marked.body._links.collection).toEqual({ title: "alerts", href: "alerts?mark_as_read=1" });
			expect((await request("GET", url(`alerts/${ids.c}`))).body.read).toBe(true);
			expect(await readFlags()).toEqual([true, true, true, false]);
			expect(
				(await request("GET", url("alerts", { where: { ...where, read: false } }))).body._items.map((x: any) => x._id),
			).toEqual([ids.d]);
		});

		it("is read-only over the API", async () => {
			expectEveError(await request("POST", url("alerts"), { body: { type: "x", level: "info", read: false } }), 405);
			expectEveError(await request("PATCH", url(`alerts/${ids.d}`), { body: { read: true } }), 405);
			expectEveError(await request("DELETE", url(`alerts/${ids.d}`)), 405);
			expectEveError(await request("DELETE", url("alerts")), 405);
			expectEveError(await request("GET", url("alerts/0123456789abcdef0123ffff")), 404);
			expect((await request("GET", url(`alerts/${ids.d}`))).body.read).toBe(false);
		});
	});

	describe("settings", () => {
		it("lists exactly the record 0 with empty addresses", async () => {
			const res = await request("GET", url("settings"));
			expect(res.status).toBe(200);
			expect(res.body._meta).toEqual({ page: 1, max_results: 25, total: 1 });
			expect(res.body._items).toEqual([
				{
					addresses: { resolver_address: "", master_address: "", file: "" },
					...stamps,
					_id: "0",
					_links: { self: { title: "Setting", href: "settings/0" } },
				},
			]);
			const item = await request("GET", url("settings/0"));
			expect(item.body).toEqual({
				addresses: { resolver_address: "", master_address: "", file: "" },
				...stamps,
				_id: "0",
				_links: itemLinks("settings", "Setting", "0"),
			});
		});

		it("PATCHes resolver_address and keeps the other addresses", async () => {
			const res = await request("PATCH", url("settings/0"), { body: { resolver_address: "http://resolver:8080" } });
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				...stamps,
				_id: "0",
				_links: { self: { title: "Setting", href: "settings/0" } },
				_status: "OK",
			});
			expect((await request("GET", url("settings/0"))).body.addresses).toEqual({
				resolver_address: "http://resolver:8080",
				master_address: "",
				file: "",
			});

			expect(
				(await request("PATCH", url("settings/0"), { body: { addresses: { master_address: "salt-master" } } })).status,
			).toBe(200);
			expect((await request("GET", url("settings/0"))).body.addresses).toEqual({
				resolver_address: "http://resolver:8080",
				master_address: "salt-master",
				file: "",
			});
		});

		it("refuses a resolver_address that is not a URL, and unknown fields", async () => {
			for (const bad of ["resolver:8080", "ftp://resolver", "http://has space", 5]) {
				const err = expectEveError(await request("PATCH", url("settings/0"), { body: { resolver_address: bad } }), 422);
				expect(Object.keys(err._issues)).toEqual(["addresses"]);
				expect(Object.keys(err._issues.addresses)).toEqual(["resolver_address"]);
			}
			expect(expectEveError(await request("PATCH", url("settings/0"), { body: { bogus: 1 } }), 422)._issues).toEqual({
				bogus: "unknown field",
			});
			expect(
				expectEveError(await request("PATCH", url("settings/0"), { body: { addresses: { other: "x" } } }), 422)._issues,
			).toEqual({ addresses: { other: "unknown field" } });
			expect((await request("GET", url("settings/0"))).body.addresses.resolver_address).toBe("http://resolver:8080");
		});

		it("refuses a resolver_address at a loopback, link-local or unspecified address, in every IPv6 form", async () => {
			for (const bad of [
				"http://[::ffff:169.254.169.254]/",
				"http://169.254.169.254/",
				"http://[::1]/",
				"http://localhost./",
				"http://0.0.0.0/",
				"http://[2002:7f00:1::]/",
				"http://[::ffff:0:127.0.0.1]/",
			]) {
				const err = expectEveError(await request("PATCH", url("settings/0"), { body: { resolver_address: bad } }), 422);
				expect(err._issues).toEqual({
					addresses: {
						resolver_address: expect.stringMatching(
							/^the IP resolver's address \S+ is not allowed: (loopback|link-local|unspecified)/,
						),
					},
				});
			}
			expect((await request("GET", url("settings/0"))).body.addresses.resolver_address).toBe("http://resolver:8080");
		});

		it("takes addresses.file only when it names a stored file", async () => {
			const missing = "0123456789abcdef0123ffff";
			const err = expectEveError(await request("PATCH", url("settings/0"), { body: { file: missing } }), 422);
			expect(err._issues).toEqual({
				addresses: { file: `value '${missing}' must exist in resource 'files', field '_id'.` },
			});

			const form = new FormData();
			form.append("name", "rc-addresses.csv");
			form.append("data", new Blob(["host,ip\nweb-1,10.0.0.1\n"], { type: "text/csv" }), "addresses.csv");
			const upload = await request("POST", url("files"), { raw: form });
			expect(upload.status).toBe(201);
			const ok = await request("PATCH", url("settings/0"), { body: { addresses: { file: upload.body._id } } });
			expect(ok.status).toBe(200);
			expect((await request("GET", url("settings/0"))).body.addresses).toEqual({
				resolver_address: "http://resolver:8080",
				master_address: "salt-master",
				file: upload.body._id,
			});
		});

		it("has no other record and no create or delete", async () => {
			expectEveError(await request("PATCH", url("settings/1"), { body: { resolver_address: "http://x" } }), 404);
			expectEveError(await request("GET", url("settings/1")), 404);
			expectEveError(await request("POST", url("settings"), { body: { addresses: {} } }), 405);
			expectEveError(await request("DELETE", url("settings/0")), 405);
			expect((await request("GET", url("settings"))).body._meta.total).toBe(1);
		});
	});

	describe("nodegroups", () => {
		const names = Object.keys(NODEGROUPS).sort();

		it("lists the configured nodegroups", async () => {
			const res = await request("GET", url("nodegroups", { sort: "name" }));
			expect(res.status).toBe(200);
			expect(res.body._meta.total).toBe(names.length);
			expect(res.body._items.map((n: any) => [n.name, n.type, n.info])).toEqual(
				names.map(name => [name, 1, NODEGROUPS[name]]),
			);
			for (const item of res.body._items) {
				expect(item._id).toMatch(OBJECT_ID);
				expect(item._links).toEqual({ self: { title: "Nodegroup", href: `nodegroups/${item._id}` } });
			}
		});

		it("serves a nodegroup by name and by id, alike", async () => {
			const list = await request("GET", url("nodegroups", { where: { name: "e2e.db_1" } }));
			const id = list.body._items[0]._id;
			const byName = await request("GET", url("nodegroups/e2e.db_1"));
			expect(byName.status).toBe(200);
			expect(byName.body).toEqual({
				name: "e2e.db_1",
				type: 1,
				source: "config",
				info: { regex: "^db-", grain: { virtual: "kvm" } },
				...stamps,
				_id: id,
				_links: itemLinks("nodegroups", "Nodegroup", id),
			});
			const byId = await request("GET", url(`nodegroups/${id}`));
			expect(byId.status).toBe(200);
			expect(byId.body).toEqual(byName.body);
			const projected = await request("GET", url("nodegroups/e2e-alt", { projection: { info: 0 } }));
			expect(projected.body.info).toBeUndefined();
			expect(projected.body.name).toBe("e2e-alt");
		});

		it("answers 404 for an unknown name or id, and 405 for writes", async () => {
			expectEveError(await request("GET", url("nodegroups/e2e-nosuch")), 404);
			expectEveError(await request("GET", url("nodegroups/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("POST", url("nodegroups"), { body: { name: "x", type: 1, info: {} } }), 405);
			expectEveError(await request("PATCH", url("nodegroups/e2e-web"), { body: { info: {} } }), 405);
			expectEveError(await request("DELETE", url("nodegroups/e2e-web")), 405);
		});
	});
}
