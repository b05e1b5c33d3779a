/**
 * VPN managers, organizations and every host's VPN identity, against the Pritunl simulator over real
 * HTTP (test/simulators/pritunl.ts): a manager is kept only when it logs in; its password, API secret
 * and the organizations' auth_token/auth_secret never leave in clear; organizations are made and removed
 * in Pritunl, with nothing half-made after a failure; the sync maps each host's Pritunl user (its
 * hostname) with yubico_id as hwtoken_id, across several organizations and both ways of logging in,
 * through a session that ends mid-sync; otp_secret only for admins; the profile download; 502/504.
 */
import fs from "node:fs";
import path from "node:path";
import type { Harness } from "../../support/harness";
import type { Leg } from "./index";
import { opensslAvailable, selfSignedCert } from "../../support/tls";
import {
	request as send,
	withQuery,
	expectEveError,
	eventually,
	type RequestOptions,
	type Reply,
} from "../../support/http";
import { PritunlSimulator, untar } from "../../simulators/pritunl";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;
const MASK = "********";
const PASSWORD = "Pw-vpn-e2e-7f3a9c!";
const API_TOKEN = "TokVpnE2e4d2b8c1f00aa11bb22cc33dd";
const API_SECRET = "SecVpnE2e9e1c7a2b33cc44dd55ee66ff";
const WRONG_PASSWORD = "Wrong-password-0000";
const WRONG_SECRET = "Wrong-secret-00000000";
/** What this suite plants (refused credentials too: a mistyped password is still a password), for the scan of process logs in the access suite. */
export const VPN_SECRETS = {
	vpnSuitePassword: PASSWORD,
	vpnSuiteApiToken: API_TOKEN,
	vpnSuiteApiSecret: API_SECRET,
	vpnSuiteWrongPassword: WRONG_PASSWORD,
	vpnSuiteWrongSecret: WRONG_SECRET,
};

export default function vpn(h: () => Harness, leg: Leg): void {
	const url = (p: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${p}`, query);
	// Every response body of this suite, to check that no secret ever leaves in clear.
	const bodies: Array<{ what: string; text: string; admin: boolean }> = [];
	const request = async (method: string, target: string, opts?: RequestOptions): Promise<Reply> => {
		const res = await send(method, target, opts);
		bodies.push({
			what: `${method} ${target.slice(h().api.length)}`,
			text: res.text,
			admin: opts?.token === undefined,
		});
		return res;
	};
	const as = (token: string, opts: RequestOptions = {}): RequestOptions => ({ ...opts, token });

	let sim: PritunlSimulator;
	let manager: Record<string, string>;
	let tokenManager: Record<string, string>;
	let managerId: string;
	let tokenManagerId: string;
	let viewer = "";
	let operator = "";
	/** Secrets Pritunl generated (organizations' auth_token/auth_secret, users' otp_secret): never in a non-admin body. */
	const generated = new Set<string>();

	beforeAll(async () => {
		sim = new PritunlSimulator({ username: "fleet", password: PASSWORD, apiToken: API_TOKEN, apiSecret: API_SECRET });
		const { url: simUrl } = await sim.start();
		manager = { name: "vpn-main", server_address: simUrl, dashboard_address: `${simUrl}/dashboard`, username: "fleet" };
		tokenManager = { name: "vpn-token", server_address: simUrl, dashboard_address: `${simUrl}/`, username: "fleet" };
		const res = await request("POST", url("vpn_managers"), { body: { ...manager, password: PASSWORD } });
		expect(res.status).toBe(201);
		managerId = res.body._id;
		const tok = await request("POST", url("vpn_managers"), {
			body: { ...tokenManager, password: "unused-with-a-token", api_token: API_TOKEN, api_secret: API_SECRET },
		});
		expect(tok.status).toBe(201);
		tokenManagerId = tok.body._id;
		viewer = (await send("POST", url("tokens"), { body: { name: "vpn-viewer", role: "viewer" } })).body.token;
		operator = (await send("POST", url("tokens"), { body: { name: "vpn-operator", role: "operator" } })).body.token;
	});
	afterEach(() => sim.clearFaults());
	afterAll(() => sim?.stop());

	const createOrg = async (name: string, opts: { manager?: string; authApi?: boolean } = {}) => {
		const body = {
			name,
			vpn_representation: { name, cipher_type: "rsa", ...(opts.authApi ? { auth_api: true } : {}) },
			cipher_type: "rsa",
			vpn_manager: opts.manager ?? managerId,
			type: 6,
		};
		return request("POST", url("vpn_organizations"), { body });
	};
	const pritunlOrgs = (name: string) => sim.orgList().filter(o => o.name === name);
	const records = async (name: string) =>
		(await request("GET", url("vpn_organizations", { where: { name } }))).body._meta.total;

	describe("vpn_managers", () => {
		it("creates a manager that logs in, with 201 and Eve's write shape", async () => {
			const logins = sim.logins;
			const res = await request("POST", url("vpn_managers"), {
				body: { ...manager, name: "vpn-shape", password: PASSWORD },
			});
			expect(res.status).toBe(201);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: expect.stringMatching(OBJECT_ID),
				_links: { self: { title: "Vpn_manager", href: `vpn_managers/${res.body._id}` } },
				_status: "OK",
			});
			expect(sim.logins).toBe(logins + 1);
		});

		it("refuses with 422 and the reason a manager whose credentials Pritunl refuses, or that cannot be reached", async () => {
			const bad = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { ...manager, name: "vpn-bad-pw", password: WRONG_PASSWORD },
				}),
				422,
			);
			expect(bad._issues).toEqual({
				password: expect.stringContaining("auth_invalid: Authentication credentials are not valid"),
			});
			const badSecret = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: {
						...tokenManager,
						name: "vpn-bad-secret",
						password: "x",
						api_token: API_TOKEN,
						api_secret: WRONG_SECRET,
					},
				}),
				422,
			);
			expect(badSecret._issues).toEqual({ api_secret: expect.stringContaining("refused the API token") });
			const half = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { ...tokenManager, name: "vpn-half", password: "x", api_token: API_TOKEN },
				}),
				422,
			);
			expect(half._issues).toEqual({ api_secret: "api_token and api_secret go together" });
			const nowhere = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { ...manager, name: "vpn-nowhere", server_address: "http://127.0.0.1:1", password: PASSWORD },
				}),
				422,
			);
			expect(nowhere._issues).toEqual({
				server_address: expect.stringMatching(/cannot log in to Pritunl: Pritunl at 127.0.0.1:1 is unreachable/),
			});
			const notUrl = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { ...manager, name: "vpn-not-url", server_address: "ftp://x", password: PASSWORD },
				}),
				422,
			);
			expect(Object.keys(notUrl._issues)).toEqual(["server_address"]);
			for (const name of ["vpn-bad-pw", "vpn-bad-secret", "vpn-half", "vpn-nowhere", "vpn-not-url"]) {
				expect((await request("GET", url("vpn_managers", { where: { name } }))).body._meta.total).toBe(0);
			}
		});

		it("refuses with 422 a server_address at a link-local, loopback or unspecified address, before trying to log in", async () => {
			const logins = sim.logins;
			for (const server_address of [
				"https://169.254.169.254",
				"169.254.169.254:443",
				"[::ffff:169.254.169.254]",
				"https://[2002:a9fe:a9fe::]",
				"https://[::1]:9700",
				"0.0.0.0:443",
			]) {
				const err = expectEveError(
					await request("POST", url("vpn_managers"), {
						body: { ...manager, name: "vpn-metadata", server_address, password: PASSWORD },
					}),
					422,
				);
				expect(err._issues).toEqual({
					server_address: expect.stringMatching(
						/^the Pritunl server's address \S+ is not allowed: (link-local|loopback|unspecified)/,
					),
				});
			}
			expect((await request("GET", url("vpn_managers", { where: { name: "vpn-metadata" } }))).body._meta.total).toBe(0);
			expect(sim.logins).toBe(logins);
		});

		it("shows the password and the API credentials masked in the list and on the item", async () => {
			const list = await request("GET", url("vpn_managers", { where: { name: "vpn-main" } }));
			expect(list.status).toBe(200);
			expect(list.body._items).toEqual([
				{
					...manager,
					password: MASK,
					_updated: expect.stringMatching(HTTP_DATE),
					_created: expect.stringMatching(HTTP_DATE),
					_id: managerId,
					_links: { self: { title: "Vpn_manager", href: `vpn_managers/${managerId}` } },
				},
			]);
			const item = await request("GET", url(`vpn_managers/${tokenManagerId}`));
			expect(item.body).toMatchObject({
				...tokenManager,
				password: MASK,
				api_token: MASK,
				api_secret: MASK,
				_id: tokenManagerId,
			});
			const projected = await request("GET", url(`vpn_managers/${managerId}`, { projection: { password: 1 } }));
			expect(projected.body.password).toBe(MASK);
			// Filtering on the password finds nothing: what is stored is not the password.
			const probe = await request("GET", url("vpn_managers", { where: { password: PASSWORD } }));
			expect(probe.body._meta.total).toBe(0);
		});

		// MongoDB storage: there is no file here to read (reported skipped on that leg).
		(leg.storage === "nedb" ? it : it.skip)(
			`does not keep the password or the API secret in clear in the NeDB file${leg.storage === "nedb" ? "" : " (skipped: MongoDB storage, no NeDB file)"}`,
			() => {
				const stored = fs.readFileSync(path.join(h().dataDir as string, "vpn_managers.db"), "utf8");
				expect(stored).toContain(managerId);
				for (const secret of [PASSWORD, API_TOKEN, API_SECRET]) expect(stored).not.toContain(secret);
			},
		);

		it("requires every field of the spec, and a URL as dashboard_address", async () => {
			const err = expectEveError(await request("POST", url("vpn_managers"), { body: {} }), 422);
			expect(err._issues).toEqual({
				name: "required field",
				server_address: "required field",
				dashboard_address: "required field",
				username: "required field",
				password: "required field",
			});
			const url422 = expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { ...manager, name: "vpn-bad", dashboard_address: "vpn.example.org", password: PASSWORD },
				}),
				422,
			);
			expect(Object.keys(url422._issues)).toEqual(["dashboard_address"]);
			expect(
				expectEveError(
					await request("POST", url("vpn_managers"), {
						body: { ...manager, name: "vpn-bad", password: PASSWORD, extra: 1 },
					}),
					422,
				)._issues,
			).toEqual({ extra: "unknown field" });
			expect(
				expectEveError(
					await request("POST", url("vpn_managers"), {
						body: { ...manager, name: "vpn-bad", password: PASSWORD, ca_certificate: "not a PEM" },
					}),
					422,
				)._issues,
			).toEqual({ ca_certificate: expect.any(String) });
			const garbled = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
			expect(
				expectEveError(
					await request("POST", url("vpn_managers"), {
						body: { ...manager, name: "vpn-bad", password: PASSWORD, ca_certificate: garbled },
					}),
					422,
				)._issues,
			).toEqual({ ca_certificate: "must be one or more PEM certificates" });
		});

		(opensslAvailable ? it : it.skip)(
			`verifies Pritunl's certificate, and trusts the manager's ca_certificate${opensslAvailable ? "" : " (skipped: no openssl to make a certificate)"}`,
			async () => {
				const { key, cert } = selfSignedCert("vpn-tls");
				const tls = new PritunlSimulator({ username: "fleet", password: PASSWORD, tls: { key, cert } });
				const { url: tlsUrl } = await tls.start();
				try {
					const body = {
						...manager,
						name: "vpn-tls",
						server_address: tlsUrl.replace(/^https:\/\//, ""),
						password: PASSWORD,
					};
					const refused = expectEveError(await request("POST", url("vpn_managers"), { body }), 422);
					expect(refused._issues).toEqual({ server_address: expect.stringContaining("TLS certificate") });
					const ok = await request("POST", url("vpn_managers"), {
						body: { ...body, ca_certificate: cert.toString("utf8") },
					});
					expect(ok.status).toBe(201);
					const org = await createOrg("vpn-org-tls", { manager: ok.body._id });
					expect(org.status).toBe(201);
					expect(tls.orgList().map(o => o.name)).toEqual(["vpn-org-tls"]);
					expect((await request("GET", url(`vpn_managers/${ok.body._id}`))).body.ca_certificate).toBe(
						cert.toString("utf8"),
					);
					expect((await request("DELETE", url(`vpn_organizations/${org.body._id}`))).status).toBe(204);
					expect(tls.orgList()).toEqual([]);
					expect((await request("DELETE", url(`vpn_managers/${ok.body._id}`))).status).toBe(204);
				} finally {
					await tls.stop();
				}
			},
		);

		it("deletes a manager without organizations with 204", async () => {
			const id = (
				await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-lonely", password: PASSWORD } })
			).body._id;
			const del = await request("DELETE", url(`vpn_managers/${id}`));
			expect(del.status).toBe(204);
			expectEveError(await request("GET", url(`vpn_managers/${id}`)), 404);
		});

		it("has no PATCH or PUT", async () => {
			expectEveError(await request("PATCH", url(`vpn_managers/${managerId}`), { body: { name: "x" } }), 405);
			expectEveError(await request("PUT", url(`vpn_managers/${managerId}`), { body: { name: "x" } }), 405);
		});
	});

	describe("vpn_organizations", () => {
		let orgId: string;

		it("creates the organization in Pritunl and stores Pritunl's record as vpn_representation", async () => {
			const res = await createOrg("vpn-org-1", { authApi: true });
			expect(res.status).toBe(201);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: expect.stringMatching(OBJECT_ID),
				_links: {
					self: { title: "Vpn_organization", href: `vpn_organizations/${res.body._id}` },
					related: { vpn_manager: { title: "Vpn_manager", href: `vpn_managers/${managerId}` } },
				},
				_status: "OK",
			});
			orgId = res.body._id;
			const [made] = pritunlOrgs("vpn-org-1");
			expect(made).toMatchObject({ name: "vpn-org-1", auth_api: true, user_count: 0 });
			generated.add(made.auth_token as string).add(made.auth_secret as string);
			const item = await request("GET", url(`vpn_organizations/${orgId}`));
			expect(item.body).toMatchObject({ name: "vpn-org-1", vpn_manager: managerId, cipher_type: "rsa", type: 6 });
			expect(item.body.vpn_representation).toEqual({ ...made, auth_token: MASK, auth_secret: MASK });
			const embedded = await request("GET", url(`vpn_organizations/${orgId}`, { embedded: { vpn_manager: 1 } }));
			expect(embedded.body.vpn_manager).toMatchObject({ ...manager, password: MASK, _id: managerId });
		});

		it("compares an If-Match on DELETE before anything is removed in Pritunl: 412 for another version, 204 for the current one", async () => {
			const made = await createOrg("vpn-org-ifmatch");
			expect(made.status).toBe(201);
			const id = made.body._id;
			const etag = (await request("GET", url(`vpn_organizations/${id}`))).headers.get("etag") as string;
			expect(etag).toMatch(/^"[0-9a-f]{40}"$/);
			const stale = expectEveError(
				await request("DELETE", url(`vpn_organizations/${id}`), {
					headers: { "If-Match": '"0000000000000000000000000000000000000000"' },
				}),
				412,
			);
			expect(stale._error.message).toBe("Client and server etags don't match");
			expect(pritunlOrgs("vpn-org-ifmatch")).toHaveLength(1);
			expect((await request("GET", url(`vpn_organizations/${id}`))).status).toBe(200);
			expect((await request("DELETE", url(`vpn_organizations/${id}`), { headers: { "If-Match": etag } })).status).toBe(
				204,
			);
			expect(pritunlOrgs("vpn-org-ifmatch")).toEqual([]);
		});

		it("refuses an invalid organization with 422 before anything is made in Pritunl", async () => {
			const before = sim.orgList().length;
			expect(expectEveError(await request("POST", url("vpn_organizations"), { body: {} }), 422)._issues).toMatchObject({
				name: "required field",
				vpn_manager: "required field",
			});
			const unknown = expectEveError(await createOrg("vpn-org-x", { manager: "0123456789abcdef0123ffff" }), 422);
			expect(unknown._issues).toEqual({
				vpn_manager: "value '0123456789abcdef0123ffff' must exist in resource 'vpn_managers', field '_id'.",
			});
			expectEveError(await request("POST", url("vpn_organizations"), { body: [{ name: "a" }] }), 400);
			// A name Pritunl already has (the undo of an unanswered create finds organizations by name).
			expect(expectEveError(await createOrg("vpn-org-1"), 409)._error.message).toMatch(
				/already has an organization named 'vpn-org-1'/,
			);
			expect(sim.orgList().length).toBe(before);
		});

		const deletes = () =>
			sim.requests().filter(r => r.method === "DELETE" && r.path.startsWith("/organization/") && r.status === 200)
				.length;

		it("leaves nothing half-made when Pritunl made the organization but its answer was lost (502)", async () => {
			sim.malformNext(1, "reset", { method: "POST", path: /^\/organization$/ });
			const before = deletes();
			expectEveError(await createOrg("vpn-org-lost"), 502);
			// Pritunl did make it (the answer alone was lost), and fleet-ctl removed it again.
			expect(deletes()).toBe(before + 1);
			expect(pritunlOrgs("vpn-org-lost")).toEqual([]);
			expect(await records("vpn-org-lost")).toBe(0);
			sim.malformNext(1, "garbage", { method: "POST", path: /^\/organization$/ });
			expectEveError(await createOrg("vpn-org-garbage"), 502);
			expect(pritunlOrgs("vpn-org-garbage")).toEqual([]);
		});

		it("removes, at a later sync, an organization Pritunl made after fleet-ctl stopped waiting (504)", async () => {
			sim.delayNext(1, 2600, { method: "POST", path: /^\/organization$/ });
			expectEveError(await createOrg("vpn-org-late"), 504);
			// Pritunl finishes the create on its own, after fleet-ctl stopped waiting.
			await eventually(
				async () => (pritunlOrgs("vpn-org-late").length === 1 ? true : undefined),
				5000,
				"Pritunl to finish the create",
			);
			expect(await records("vpn-org-late")).toBe(0);
			// Syncs look for it again once twice PRITUNL_TIMEOUT_MS have passed, and remove it.
			await eventually(
				async () => {
					await h().call("vpn.sync", {});
					return pritunlOrgs("vpn-org-late").length === 0 ? true : undefined;
				},
				10_000,
				"a sync to remove the organization",
			);
		}, 20_000);

		it("keeps looking for an unanswered create that Pritunl finishes late, with no sync asked for, and removes it", async () => {
			sim.delayNext(1, 6000, { method: "POST", path: /^\/organization$/ });
			const asked = Date.now();
			expectEveError(await createOrg("vpn-org-later"), 504);
			// Past the first look (twice PRITUNL_TIMEOUT_MS) Pritunl still has not made it: that is no proof it never will.
			// (Not an oracle: time passing up to the first look's due time; the removal below is waited for.)
			await new Promise(r => setTimeout(r, Math.max(0, asked + 4800 - Date.now())));
			await h().call("vpn.sync", {});
			expect(pritunlOrgs("vpn-org-later").length).toBeLessThanOrEqual(1);
			// Pritunl finishes it; the service's own look (periodic syncs are off in these suites) removes it.
			await eventually(async () => (sim.waiting === 0 ? true : undefined), 10_000, "Pritunl to finish the create");
			await eventually(
				async () => (pritunlOrgs("vpn-org-later").length === 0 ? true : undefined),
				10_000,
				"the organization to be removed",
			);
			expect(await records("vpn-org-later")).toBe(0);
		}, 30_000);

		it("removes the organization from Pritunl again when its record cannot be stored (manager deleted meanwhile)", async () => {
			const doomed = (
				await request("POST", url("vpn_managers"), { body: { ...manager, name: "vpn-doomed", password: PASSWORD } })
			).body._id;
			sim.delayNext(1, 1000, { method: "POST", path: /^\/organization$/ });
			const pending = createOrg("vpn-org-orphan", { manager: doomed });
			// The create is in Pritunl's hands: the manager goes before its record can be stored.
			await eventually(async () => (sim.waiting === 1 ? true : undefined), 5000, "the create to reach Pritunl");
			const before = deletes();
			expect((await request("DELETE", url(`vpn_managers/${doomed}`))).status).toBe(204);
			const res = expectEveError(await pending, 422);
			expect(res._issues).toEqual({ vpn_manager: expect.stringContaining("must exist") });
			expect(deletes()).toBe(before + 1);
			expect(pritunlOrgs("vpn-org-orphan")).toEqual([]);
			expect(await records("vpn-org-orphan")).toBe(0);
		});

		it("refuses with 409 to delete a manager that still has organizations, and keeps it", async () => {
			const res = expectEveError(await request("DELETE", url(`vpn_managers/${managerId}`)), 409);
			expect(res._error.message).toBe("the VPN manager still has organizations; delete them first");
			expect((await request("GET", url(`vpn_managers/${managerId}`))).status).toBe(200);
		});

		it("deletes the organization in Pritunl and its record; again is 404, as GET is", async () => {
			const made = await createOrg("vpn-org-gone");
			expect(made.status).toBe(201);
			const pid = pritunlOrgs("vpn-org-gone")[0].id;
			sim.addUser(pid, { name: "vpn-gone-1" });
			expect((await request("DELETE", url(`vpn_organizations/${made.body._id}`))).status).toBe(204);
			expect(sim.org(pid)).toBeUndefined();
			expect(sim.usersOf(pid)).toEqual([]);
			expectEveError(await request("GET", url(`vpn_organizations/${made.body._id}`)), 404);
			expectEveError(await request("DELETE", url(`vpn_organizations/${made.body._id}`)), 404);
			expectEveError(await request("DELETE", url("vpn_organizations/not-an-id")), 404);
		});

		it("deletes a record whose organization Pritunl no longer has (its 500 for an unknown id)", async () => {
			const made = await createOrg("vpn-org-vanished");
			sim.removeOrg(pritunlOrgs("vpn-org-vanished")[0].id);
			expect((await request("DELETE", url(`vpn_organizations/${made.body._id}`))).status).toBe(204);
			expect(await records("vpn-org-vanished")).toBe(0);
		});

		it("keeps the record when Pritunl cannot delete (502 unreachable, 504 no answer)", async () => {
			const made = await createOrg("vpn-org-kept");
			await sim.goDown("refuse");
			try {
				const err = expectEveError(await request("DELETE", url(`vpn_organizations/${made.body._id}`)), 502);
				expect(err._error.message).toMatch(/unreachable/);
				// The rest of the API works.
				expect(
					(await request("GET", url("vpn_organizations", { where: { name: "vpn-org-kept" } }))).body._meta.total,
				).toBe(1);
				expect((await request("GET", url("hosts"))).status).toBe(200);
			} finally {
				await sim.comeBack();
			}
			await sim.goDown("hang");
			try {
				expectEveError(await request("DELETE", url(`vpn_organizations/${made.body._id}`)), 504);
			} finally {
				await sim.comeBack();
			}
			expect(pritunlOrgs("vpn-org-kept")).toHaveLength(1);
			expect((await request("DELETE", url(`vpn_organizations/${made.body._id}`))).status).toBe(204);
			expect(pritunlOrgs("vpn-org-kept")).toEqual([]);
		}, 20_000);

		it("answers 404 for an unknown organization and 405 for PATCH", async () => {
			expectEveError(await request("GET", url("vpn_organizations/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("POST", url("vpn_organizations/0123456789abcdef0123ffff/sync")), 404);
			expectEveError(await request("PATCH", url(`vpn_organizations/${orgId}`), { body: { name: "x" } }), 405);
		});
	});

	describe("host VPN identity", () => {
		const H = ["vpn-h1.site-a.example", "vpn-h2.site-a.example", "vpn-h3.site-b.example", "vpn-h4.site-b.example"];
		let orgA: { id: string; pid: string };
		let orgB: { id: string; pid: string };
		const users: Record<string, string> = {};
		const get = (id: string, opts?: RequestOptions) => request("GET", url(`hosts/${id}`), opts);

		beforeAll(async () => {
			await h().call("hosts.upsertMany", { hosts: H.map(_id => ({ _id, status: "up", key: "accepted" })) });
			const a = await createOrg("vpn-site-a");
			const b = await createOrg("vpn-site-b", { manager: tokenManagerId, authApi: true });
			expect([a.status, b.status]).toEqual([201, 201]);
			orgA = { id: a.body._id, pid: pritunlOrgs("vpn-site-a")[0].id };
			orgB = { id: b.body._id, pid: pritunlOrgs("vpn-site-b")[0].id };
			generated
				.add(pritunlOrgs("vpn-site-b")[0].auth_token as string)
				.add(pritunlOrgs("vpn-site-b")[0].auth_secret as string);
			users[H[0]] = sim.addUser(orgA.pid, {
				name: H[0],
				yubico_id: "cccccchwtok1",
				email: "ops@example.org",
				groups: ["web"],
				pin: "123456",
				port_forwarding: [{ protocol: "tcp", port: "8080", dport: "80" }],
			}).id;
			users[H[1]] = sim.addUser(orgA.pid, {
				name: H[1],
				client_to_client: true,
				dns_servers: ["10.0.0.53"],
				dns_suffix: "site-a.example",
			}).id;
			users[H[2]] = sim.addUser(orgB.pid, {
				name: H[2],
				yubico_id: "cccccchwtok3",
				auth_type: "yubico",
				disabled: true,
				mac_addresses: ["52:54:00:12:34:56"],
			}).id;
			sim.addUser(orgB.pid, { name: "laptop of someone" }); // a Pritunl user that is no host
			for (const u of sim.usersOf(orgA.pid).concat(sim.usersOf(orgB.pid))) generated.add(u.otp_secret);
		});

		it("maps each host's Pritunl user, in several organizations and with hardware tokens (yubico_id as hwtoken_id)", async () => {
			const checked = sim.signaturesChecked;
			const failures = sim.signatureFailures;
			const result = await h().call("vpn.sync", {});
			expect(result.failed).toEqual([]);
			// Organization B's manager signs each request with its API token; the simulator checked them all.
			expect(sim.signaturesChecked).toBeGreaterThan(checked);
			expect(sim.signatureFailures).toBe(failures);
			const u1 = sim.user(users[H[0]])!;
			const one = await get(H[0]);
			expect(one.body.vpn_organization).toBe(orgA.id);
			expect(one.body._links.related.vpn_organization).toEqual({
				title: "Vpn_organization",
				href: `vpn_organizations/${orgA.id}`,
			});
			expect(one.body.vpn_representation).toEqual({
				auth_type: "local",
				hwtoken_id: "cccccchwtok1",
				client_to_client: false,
				otp_secret: u1.otp_secret,
				name: H[0],
				pin: true,
				dns_suffix: null,
				disabled: false,
				mac_addresses: null,
				email: "ops@example.org",
				organization_name: "vpn-site-a",
				bypass_secondary: false,
				groups: ["web"],
				organization: orgA.pid,
				port_forwarding: [{ protocol: "tcp", port: "8080", dport: "80" }],
				dns_servers: null,
				type: "client",
				id: users[H[0]],
			});
			expect(Object.keys(one.body.vpn_representation)).toEqual([
				"auth_type",
				"hwtoken_id",
				"client_to_client",
				"otp_secret",
				"name",
				"pin",
				"dns_suffix",
				"disabled",
				"mac_addresses",
				"email",
				"organization_name",
				"bypass_secondary",
				"groups",
				"organization",
				"port_forwarding",
				"dns_servers",
				"type",
				"id",
			]);
			expect((await get(H[1])).body.vpn_representation).toMatchObject({
				hwtoken_id: null,
				client_to_client: true,
				pin: false,
				dns_servers: ["10.0.0.53"],
				dns_suffix: "site-a.example",
				organization: orgA.pid,
			});
			const three = await get(H[2]);
			expect(three.body.vpn_organization).toBe(orgB.id);
			expect(three.body.vpn_representation).toMatchObject({
				hwtoken_id: "cccccchwtok3",
				auth_type: "yubico",
				disabled: true,
				mac_addresses: ["52:54:00:12:34:56"],
				organization_name: "vpn-site-b",
			});
			const four = await get(H[3]);
			expect(four.body).not.toHaveProperty("vpn_organization");
			expect(four.body).not.toHaveProperty("vpn_representation");
		});

		it("keeps user_count current", async () => {
			const a = await request("GET", url(`vpn_organizations/${orgA.id}`));
			const b = await request("GET", url(`vpn_organizations/${orgB.id}`));
			expect([a.body.vpn_representation.user_count, b.body.vpn_representation.user_count]).toEqual([2, 2]);
			sim.addUser(orgA.pid, { name: "vpn-h9.site-a.example" });
			await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator));
			expect((await request("GET", url(`vpn_organizations/${orgA.id}`))).body.vpn_representation.user_count).toBe(3);
		});

		it("shows otp_secret to admins only, even for the same URL read just before by an admin", async () => {
			const otp = sim.user(users[H[0]])!.otp_secret;
			const list = url("hosts", { where: { _id: { $in: H } }, sort: "_id" });
			for (let i = 0; i < 2; i++) {
				const admin = await request("GET", list);
				expect(admin.body._items[0].vpn_representation.otp_secret).toBe(otp);
				for (const token of [viewer, operator]) {
					const other = await request("GET", list, as(token));
					expect(other.status).toBe(200);
					expect(other.body._items[0].vpn_representation.otp_secret).toBe(MASK);
					expect(other.text).not.toContain(otp);
					const item = await get(H[0], as(token));
					expect(item.body.vpn_representation).toMatchObject({ otp_secret: MASK, hwtoken_id: "cccccchwtok1" });
				}
				expect((await get(H[0])).body.vpn_representation.otp_secret).toBe(otp);
			}
			// Embedded in another record, the host is never shown in clear (no caller there).
		});

		it("follows changes in Pritunl: a PUT that reset booleans, a new hardware token, a user removed", async () => {
			// What a PUT that omits the booleans does in Pritunl: they are false afterwards.
			const put = await fetch(`${sim.url}/user/${orgB.pid}/${users[H[2]]}`, {
				method: "PUT",
				headers: {
					"content-type": "application/json",
					...(await tokenHeaders("PUT", `/user/${orgB.pid}/${users[H[2]]}`)),
				},
				body: JSON.stringify({ name: H[2], yubico_id: "cccccchwtok7" }),
			});
			expect(put.status).toBe(200);
			sim.removeUser(users[H[1]]);
			const res = await request("POST", url(`vpn_organizations/${orgB.id}/sync`), as(operator));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ _status: "OK", organization: orgB.id, users: 2, hosts_changed: 1 });
			expect((await get(H[2])).body.vpn_representation).toMatchObject({ hwtoken_id: "cccccchwtok7", disabled: false });
			expect((await get(H[1])).body.vpn_organization).toBe(orgA.id); // organization A was not synced yet
			await h().call("vpn.sync", {});
			const two = await get(H[1]);
			expect(two.status).toBe(200);
			expect(two.body).not.toHaveProperty("vpn_organization");
			expect(two.body).not.toHaveProperty("vpn_representation");
			expect(two.body._links.related?.vpn_organization).toBeUndefined();
		});

		it("logs in again when the session ends in the middle of a sync", async () => {
			sim.updateUser(users[H[0]], { yubico_id: "cccccchwtok2" });
			const logins = sim.logins;
			sim.expireSessionsAfter(1);
			const result = await h().call("vpn.sync", {});
			expect(result.failed).toEqual([]);
			expect(sim.logins).toBe(logins + 1);
			expect(sim.requests().some(r => r.status === 401 && r.auth === "none")).toBe(true);
			expect((await get(H[0])).body.vpn_representation.hwtoken_id).toBe("cccccchwtok2");
		});

		it("answers 502 or 504 when Pritunl is away or talks nonsense, keeps the hosts' last identity, and syncs again after", async () => {
			await sim.goDown("refuse");
			try {
				const err = expectEveError(await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator)), 502);
				expect(err._error.message).toMatch(/Pritunl at 127\.0\.0\.1:\d+ is unreachable/);
				const result = await h().call("vpn.sync", {});
				expect(result.failed.map((f: { code: number }) => f.code)).toEqual([502, 502]);
				expect((await get(H[0])).body.vpn_representation.hwtoken_id).toBe("cccccchwtok2");
				expect((await request("GET", url("vpn_organizations"))).status).toBe(200);
			} finally {
				await sim.comeBack();
			}
			sim.malformNext(1, "html", { method: "GET", path: /^\/user\// });
			expectEveError(await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator)), 502);
			sim.failNext(1, 500, { method: "GET", path: /^\/organization$/ });
			expectEveError(await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator)), 502);
			await sim.goDown("hang");
			try {
				expectEveError(await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator)), 504);
			} finally {
				await sim.comeBack();
			}
			sim.updateUser(users[H[0]], { yubico_id: "cccccchwtok5" });
			expect((await request("POST", url(`vpn_organizations/${orgA.id}/sync`), as(operator))).status).toBe(200);
			expect((await get(H[0])).body.vpn_representation.hwtoken_id).toBe("cccccchwtok5");
		}, 30_000);

		it("lets operators download a host's profile archive, not viewers", async () => {
			const res = await send("GET", url(`hosts/${H[0]}/vpn_profile`), as(operator));
			expect(res.status).toBe(200);
			expect(res.headers.get("content-type")).toBe("application/x-tar");
			expect(res.headers.get("content-disposition")).toBe(`attachment; filename="${H[0]}.tar"`);
			expect(res.headers.get("cache-control")).toBe("no-store");
			const bytes = Buffer.from(
				await (
					await fetch(url(`hosts/${H[0]}/vpn_profile`), { headers: { authorization: `Bearer ${operator}` } })
				).arrayBuffer(),
			);
			expect(untar(bytes)).toEqual(untar(sim.profile(orgA.pid, users[H[0]]))); // the tar headers carry the time of download
			expect(untar(bytes).map(f => f.name)).toEqual([`vpn-site-a_${H[0]}_vpn-1.ovpn`]);
			expect((await send("GET", url(`hosts/${H[2]}/vpn_profile`))).status).toBe(200); // admins too, through the token manager
			expectEveError(await send("GET", url(`hosts/${H[0]}/vpn_profile`), as(viewer)), 403);
			// Handing out a VPN key is audited like a write: who, and whether it was allowed.
			const audit = await send("GET", url("audit", { where: { path: `/api/hosts/${H[0]}/vpn_profile` }, sort: "_id" }));
			expect(
				audit.body._items.map((a: { method: string; name: string; status: number; outcome: string }) => [
					a.method,
					a.name,
					a.status,
					a.outcome,
				]),
			).toEqual([
				["GET", "vpn-operator", 200, "ok"],
				["GET", "vpn-operator", 200, "ok"],
				["GET", "vpn-viewer", 403, "denied"],
			]);
			expect(
				expectEveError(await send("GET", url(`hosts/${H[3]}/vpn_profile`), as(operator)), 404)._error.message,
			).toBe(`host '${H[3]}' has no VPN identity`);
			expectEveError(await send("GET", url("hosts/vpn-no-such-host/vpn_profile"), as(operator)), 404);
			sim.removeUser(users[H[0]]);
			expectEveError(await send("GET", url(`hosts/${H[0]}/vpn_profile`), as(operator)), 404);
			await sim.goDown("refuse");
			try {
				expectEveError(await send("GET", url(`hosts/${H[2]}/vpn_profile`), as(operator)), 502);
			} finally {
				await sim.comeBack();
			}
		});

		it("clears the hosts of a deleted organization", async () => {
			expect((await request("DELETE", url(`vpn_organizations/${orgB.id}`))).status).toBe(204);
			const three = await get(H[2]);
			expect(three.status).toBe(200);
			expect(three.body).not.toHaveProperty("vpn_organization");
			expect(three.body).not.toHaveProperty("vpn_representation");
		});
	});

	/** Headers of a request signed with the suite's API token, as a Pritunl API client sends them. */
	async function tokenHeaders(method: string, p: string): Promise<Record<string, string>> {
		const { pritunlSignature } = await import("../../../services/vpn/pritunl-client");
		const ts = String(Math.floor(Date.now() / 1000));
		const nonce = Math.random().toString(16).slice(2).padEnd(16, "0");
		return {
			"Auth-Token": API_TOKEN,
			"Auth-Timestamp": ts,
			"Auth-Nonce": nonce,
			"Auth-Signature": pritunlSignature(API_SECRET, API_TOKEN, ts, nonce, method, p),
		};
	}

	// Runs last: every response of the suite has been collected.
	it("never sent a password, an API secret or an organization secret in clear, nor an otp_secret to a non-admin", () => {
		expect(bodies.length).toBeGreaterThan(60);
		const leaks: string[] = [];
		for (const b of bodies) {
			for (const secret of Object.values(VPN_SECRETS))
				if (b.text.includes(secret)) leaks.push(`manager secret in ${b.what}`);
			for (const secret of generated) {
				const otp = /^[A-Z2-7]{16}$/.test(secret);
				if (b.text.includes(secret) && !(otp && b.admin))
					leaks.push(`${otp ? "otp_secret" : "organization secret"} in ${b.what}`);
			}
		}
		expect(leaks).toEqual([]);
	});
}
