/**
 * VPN managers and organizations: the manager password is masked everywhere and never stored in clear,
 * organization secrets are masked, embedding a manager, and deletes that are refused or not served yet.
 */
import fs from "node:fs";
import path from "node:path";
import type { Harness } from "../../support/harness";
import { request as send, withQuery, expectEveError, type RequestOptions, type Reply } from "../../support/http";

const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;
const PASSWORD = "Pw-vpn-e2e-7f3a9c!";
const AUTH_TOKEN = "tok-vpn-e2e-4d2b";
const AUTH_SECRET = "sec-vpn-e2e-9e1c";
/** What this suite plants, for the scan of process logs in the access suite. */
export const VPN_SECRETS = { vpnSuitePassword: PASSWORD, vpnSuiteAuthToken: AUTH_TOKEN, vpnSuiteAuthSecret: AUTH_SECRET };

export default function vpn(h: () => Harness): void {
	const url = (p: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${p}`, query);
	// Every response body of this suite, to check that no secret ever leaves in clear.
	const bodies: string[] = [];
	const request = async (method: string, target: string, opts?: RequestOptions): Promise<Reply> => {
		const res = await send(method, target, opts);
		bodies.push(res.text);
		return res;
	};

	const manager = { name: "vpn-main", server_address: "vpn.example.org:443", dashboard_address: "https://vpn.example.org/dashboard", username: "admin" };
	let managerId: string;
	let orgId: string;
	let bareOrgId: string;

	beforeAll(async () => {
		const res = await request("POST", url("vpn_managers"), { body: { ...manager, password: PASSWORD } });
		expect(res.status).toBe(201);
		managerId = res.body._id;
		orgId = (
			await h().call("vpn-organizations.insertRecord", {
				record: {
					name: "vpn-org-1",
					vpn_manager: managerId,
					vpn_representation: { auth_api: true, name: "vpn-org-1", auth_token: AUTH_TOKEN, user_count: 3, auth_secret: AUTH_SECRET, id: "5f00000000000000000000b1" },
					cipher_type: "rsa",
					type: 6,
				},
			})
		)._id;
		bareOrgId = (
			await h().call("vpn-organizations.insertRecord", {
				record: { name: "vpn-org-2", vpn_manager: managerId, vpn_representation: { auth_api: false, name: "vpn-org-2", auth_token: null, user_count: 0, auth_secret: null, id: "5f00000000000000000000b2" }, cipher_type: "rsa", type: 6 },
			})
		)._id;
	});

	describe("vpn_managers", () => {
		it("creates a manager with 201 and Eve's write shape", async () => {
			const res = await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-shape", password: PASSWORD } });
			expect(res.status).toBe(201);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: expect.stringMatching(OBJECT_ID),
				_links: { self: { title: "Vpn_manager", href: `vpn_managers/${res.body._id}` } },
				_status: "OK",
			});
		});

		it("shows the password masked in the list and on the item", async () => {
			const list = await request("GET", url("vpn_managers", { where: { name: "vpn-main" } }));
			expect(list.status).toBe(200);
			expect(list.body._items).toEqual([
				{ ...manager, password: "********", _updated: expect.stringMatching(HTTP_DATE), _created: expect.stringMatching(HTTP_DATE), _id: managerId, _links: { self: { title: "Vpn_manager", href: `vpn_managers/${managerId}` } } },
			]);
			const item = await request("GET", url(`vpn_managers/${managerId}`));
			expect(item.status).toBe(200);
			expect(item.body).toMatchObject({ ...manager, password: "********", _id: managerId });
			const projected = await request("GET", url(`vpn_managers/${managerId}`, { projection: { password: 1 } }));
			expect(projected.body.password).toBe("********");
			// Filtering on the password finds nothing: what is stored is not the password.
			const probe = await request("GET", url("vpn_managers", { where: { password: PASSWORD } }));
			expect(probe.body._meta.total).toBe(0);
		});

		it("does not keep the password in clear in the NeDB file", () => {
			const dir = h().dataDir;
			if (!dir) return; // MongoDB storage: nothing on disk here
			const file = path.join(dir, "vpn_managers.db");
			const stored = fs.readFileSync(file, "utf8");
			expect(stored).toContain(managerId);
			expect(stored).toContain("vpn.example.org");
			expect(stored).not.toContain(PASSWORD);
		});

		it("requires every field, and a URL as dashboard_address", async () => {
			const err = expectEveError(await request("POST", url("vpn_managers"), { body: {} }), 422);
			expect(err._issues).toEqual({
				name: "required field",
				server_address: "required field",
				dashboard_address: "required field",
				username: "required field",
				password: "required field",
			});
			const { username: _u, ...noUser } = manager;
			expect(expectEveError(await request("POST", url("vpn_managers"), { body: { ...noUser, password: PASSWORD } }), 422)._issues).toEqual({ username: "required field" });
			const url422 = expectEveError(await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-bad", dashboard_address: "vpn.example.org", password: PASSWORD } }), 422);
			expect(Object.keys(url422._issues)).toEqual(["dashboard_address"]);
			expect(expectEveError(await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-bad", password: "" } }), 422)._issues).toEqual({ password: "min length is 1" });
			expect(expectEveError(await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-bad", password: PASSWORD, extra: 1 } }), 422)._issues).toEqual({ extra: "unknown field" });
			expect((await request("GET", url("vpn_managers", { where: { name: "vpn-bad" } }))).body._meta.total).toBe(0);
		});

		it("deletes a manager without organizations with 204", async () => {
			const id = (await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-lonely", password: PASSWORD } })).body._id;
			const del = await request("DELETE", url(`vpn_managers/${id}`));
			expect(del.status).toBe(204);
			expect(del.text).toBe("");
			expectEveError(await request("GET", url(`vpn_managers/${id}`)), 404);
		});

		it("refuses with 409 to delete a manager that still has organizations, and keeps it", async () => {
			const res = expectEveError(await request("DELETE", url(`vpn_managers/${managerId}`)), 409);
			expect(res._error.message).toBe("the VPN manager still has organizations; delete them first");
			const item = await request("GET", url(`vpn_managers/${managerId}`));
			expect(item.status).toBe(200);
			expect(item.body.name).toBe("vpn-main");
		});

		it("has no PATCH or PUT", async () => {
			expectEveError(await request("PATCH", url(`vpn_managers/${managerId}`), { body: { name: "x" } }), 405);
			expectEveError(await request("PUT", url(`vpn_managers/${managerId}`), { body: { name: "x" } }), 405);
		});
	});

	describe("vpn_organizations", () => {
		const maskedRep = { auth_api: true, name: "vpn-org-1", auth_token: "********", user_count: 3, auth_secret: "********", id: "5f00000000000000000000b1" };

		it("lists organizations with the auth token and secret masked and a link to the manager", async () => {
			const res = await request("GET", url("vpn_organizations", { where: { vpn_manager: managerId }, sort: "name" }));
			expect(res.status).toBe(200);
			expect(res.body._meta.total).toBe(2);
			expect(res.body._items[0]).toEqual({
				name: "vpn-org-1",
				vpn_manager: managerId,
				vpn_representation: maskedRep,
				cipher_type: "rsa",
				type: 6,
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: orgId,
				_links: {
					self: { title: "Vpn_organization", href: `vpn_organizations/${orgId}` },
					related: { vpn_manager: { title: "Vpn_manager", href: `vpn_managers/${managerId}` } },
				},
			});
			// Secrets that are null stay null.
			expect(res.body._items[1].vpn_representation).toMatchObject({ auth_token: null, auth_secret: null });
		});

		it("shows one organization masked too", async () => {
			const res = await request("GET", url(`vpn_organizations/${orgId}`));
			expect(res.status).toBe(200);
			expect(res.body.vpn_representation).toEqual(maskedRep);
			expect(res.body._links).toEqual({
				self: { title: "Vpn_organization", href: `vpn_organizations/${orgId}` },
				related: { vpn_manager: { title: "Vpn_manager", href: `vpn_managers/${managerId}` } },
				parent: { title: "home", href: "/" },
				collection: { title: "vpn_organizations", href: "vpn_organizations" },
			});
			const linked = await request("GET", url(res.body._links.related.vpn_manager.href));
			expect(linked.status).toBe(200);
			expect(linked.body._id).toBe(managerId);
		});

		it("embeds the manager without _links and with the password masked", async () => {
			const expected = { ...manager, password: "********", _updated: expect.stringMatching(HTTP_DATE), _created: expect.stringMatching(HTTP_DATE), _id: managerId };
			const list = await request("GET", url("vpn_organizations", { where: { vpn_manager: managerId }, sort: "name", embedded: { vpn_manager: 1 } }));
			expect(list.status).toBe(200);
			for (const item of list.body._items) {
				expect(item.vpn_manager).toEqual(expected);
				expect(item._links.related.vpn_manager).toEqual({ title: "Vpn_manager", href: `vpn_managers/${managerId}` });
			}
			const item = await request("GET", url(`vpn_organizations/${bareOrgId}`, { embedded: { vpn_manager: 1 } }));
			expect(item.body.vpn_manager).toEqual(expected);
		});

		it("answers 503 for create and delete while the vpn service is not there", async () => {
			const body = { name: "vpn-org-3", vpn_representation: { name: "vpn-org-3", cipher_type: "rsa" }, cipher_type: "rsa", vpn_manager: managerId };
			expectEveError(await request("POST", url("vpn_organizations"), { body }), 503);
			expectEveError(await request("DELETE", url(`vpn_organizations/${orgId}`)), 503);
			expect((await request("GET", url(`vpn_organizations/${orgId}`))).status).toBe(200);
			expect((await request("GET", url("vpn_organizations", { where: { name: "vpn-org-3" } }))).body._meta.total).toBe(0);
		});

		it("answers 404 for an unknown organization", async () => {
			expectEveError(await request("GET", url("vpn_organizations/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("PATCH", url(`vpn_organizations/${orgId}`), { body: { name: "x" } }), 405);
		});
	});

	// Runs last: every response of the suite has been collected.
	it("never sent the password or an organization secret in clear", () => {
		expect(bodies.length).toBeGreaterThan(20);
		for (const text of bodies) {
			expect(text).not.toContain(PASSWORD);
			expect(text).not.toContain(AUTH_TOKEN);
			expect(text).not.toContain(AUTH_SECRET);
		}
	});
}
