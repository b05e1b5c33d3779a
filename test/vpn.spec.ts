/**
 * The vpn service's periodic sync (VPN_SYNC_INTERVAL_MS) against the Pritunl simulator over real HTTP:
 * hosts get their VPN identity without anyone asking, keep it while Pritunl is away (the rest of the API
 * answering), get changes once Pritunl is back without anyone asking, and an organization Pritunl made
 * after a create gave up waiting is removed by a later sync. The on-demand paths are in the e2e VPN suite.
 */
import { startEmbedded, type Harness } from "./support/harness";
import { request, eventually, expectEveError } from "./support/http";
import { SUITE_ENV } from "./support/suite-env";
import { PritunlSimulator } from "./simulators/pritunl";

describe("vpn service: the periodic sync", () => {
	let h: Harness;
	let sim: PritunlSimulator;
	let orgRecord = "";
	let orgPid = "";
	let userId = "";
	const HOST = "per-web-01.site-a.example";
	const url = (p: string) => `${h.api}/${p}`;
	const identity = async () => (await request("GET", url(`hosts/${HOST}`))).body.vpn_representation as Record<string, unknown> | null;

	beforeAll(async () => {
		sim = new PritunlSimulator({ username: "admin", password: "Periodic-pw-1" });
		const { url: simUrl } = await sim.start();
		h = await startEmbedded({ env: { ...SUITE_ENV, VPN_SYNC_INTERVAL_MS: "300", PRITUNL_TIMEOUT_MS: "800" } });
		await h.call("hosts.upsertMany", { hosts: [{ _id: HOST, status: "up", key: "accepted" }] });
		const manager = await request("POST", url("vpn_managers"), { body: { name: "per", server_address: simUrl, dashboard_address: `${simUrl}/`, username: "admin", password: "Periodic-pw-1" } });
		expect(manager.status).toBe(201);
		const org = await request("POST", url("vpn_organizations"), { body: { name: "per-org", vpn_representation: { name: "per-org", cipher_type: "rsa" }, cipher_type: "rsa", vpn_manager: manager.body._id } });
		expect(org.status).toBe(201);
		orgRecord = org.body._id;
		orgPid = sim.orgList().find(o => o.name === "per-org")!.id;
		userId = sim.addUser(orgPid, { name: HOST, yubico_id: "ccccccperio1" }).id;
	}, 30_000);
	afterEach(() => sim.clearFaults());
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("gives a host its VPN identity by itself", async () => {
		const rep = await eventually(async () => {
			const r = await identity();
			return r?.hwtoken_id === "ccccccperio1" ? r : undefined;
		}, 5000, "the periodic sync");
		expect(rep).toMatchObject({ id: userId, organization: orgPid, organization_name: "per-org", name: HOST });
		expect((await request("GET", url(`hosts/${HOST}`))).body.vpn_organization).toBe(orgRecord);
	});

	it("keeps the last identity while Pritunl is away, the rest of the API answering, and resumes by itself", async () => {
		await sim.goDown("refuse");
		try {
			sim.updateUser(userId, { yubico_id: "ccccccperio2" });
			await new Promise(r => setTimeout(r, 1200)); // several periods, each failing
			expect((await identity())?.hwtoken_id).toBe("ccccccperio1");
			expect((await request("GET", url("hosts"))).status).toBe(200);
			expect((await request("GET", url(`vpn_organizations/${orgRecord}`))).status).toBe(200);
			expect((await request("POST", url("groups"), { body: { name: "per-group", hosts: [HOST] } })).status).toBe(201);
			expectEveError(await request("GET", url(`hosts/${HOST}/vpn_profile`)), 502);
		} finally {
			await sim.comeBack();
		}
		await eventually(async () => ((await identity())?.hwtoken_id === "ccccccperio2" ? true : undefined), 5000, "the sync after Pritunl came back");
		expect((await request("GET", url(`hosts/${HOST}/vpn_profile`))).status).toBe(200);
	}, 20_000);

	it("resumes after Pritunl hung (504) too", async () => {
		await sim.goDown("hang");
		try {
			sim.updateUser(userId, { yubico_id: "ccccccperio3" });
			await new Promise(r => setTimeout(r, 2000));
			expect((await identity())?.hwtoken_id).toBe("ccccccperio2");
		} finally {
			await sim.comeBack();
		}
		await eventually(async () => ((await identity())?.hwtoken_id === "ccccccperio3" ? true : undefined), 8000, "the sync after Pritunl answered again");
	}, 20_000);

	it("takes the identity from hosts whose organization record is gone (a delete that raced a sync)", async () => {
		const ghostOrg = "0123456789abcdef01234567";
		const orphanHost = "per-orphan-01.site-a.example";
		await h.call("hosts.upsertMany", { hosts: [{ _id: orphanHost, status: "up", key: "accepted" }] });
		await h.call("hosts.setVpn", { orgs: [], assignments: [{ _id: orphanHost, vpn_organization: ghostOrg, vpn_representation: { id: "0123456789abcdef0123aaaa", name: orphanHost } }] });
		expect((await request("GET", url(`hosts/${orphanHost}`))).body.vpn_organization).toBe(ghostOrg);
		await eventually(async () => {
			const host = (await request("GET", url(`hosts/${orphanHost}`))).body;
			return host.vpn_organization === undefined && host.vpn_representation === undefined ? true : undefined;
		}, 5000, "the periodic sync to clear the stale identity");
		// The hosts of the organization that exists keep theirs.
		expect((await request("GET", url(`hosts/${HOST}`))).body.vpn_organization).toBe(orgRecord);
	});

	it("removes an organization Pritunl made after the create gave up waiting, without anyone asking", async () => {
		sim.delayNext(1, 1200, { method: "POST", path: /^\/organization$/ });
		const res = await request("POST", url("vpn_organizations"), { body: { name: "per-late", vpn_representation: { name: "per-late" }, cipher_type: "rsa", vpn_manager: (await request("GET", url("vpn_managers"))).body._items[0]._id } });
		expectEveError(res, 504);
		await eventually(async () => (sim.orgList().some(o => o.name === "per-late") ? true : undefined), 3000, "Pritunl to finish the create");
		await eventually(async () => (sim.orgList().some(o => o.name === "per-late") ? undefined : true), 8000, "a sync to remove it");
		expect((await request("GET", url(`vpn_organizations?where=${encodeURIComponent('{"name":"per-late"}')}`))).body._meta.total).toBe(0);
		// The organization that has a record stays.
		expect(sim.org(orgPid)).toBeDefined();
	}, 20_000);
});
