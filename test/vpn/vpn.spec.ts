/**
 * The vpn service's periodic sync (VPN_SYNC_INTERVAL_MS) against the Pritunl simulator over real HTTP:
 * hosts get their VPN identity without anyone asking, keep it while Pritunl is away (the rest of the API
 * answering), get changes once Pritunl is back without anyone asking, and an organization Pritunl made
 * after a create gave up waiting is removed by a later sync. The on-demand paths are in the e2e VPN suite.
 */
import type { Middleware } from "moleculer";
import { startEmbedded, type Harness } from "../support/harness";
import { request, eventually, expectEveError } from "../support/http";
import { SUITE_ENV } from "../support/suite-env";
import { PritunlSimulator } from "../simulators/pritunl";

describe("vpn service: the periodic sync", () => {
	let h: Harness;
	let sim: PritunlSimulator;
	let orgRecord = "";
	let orgPid = "";
	let managerId = "";
	let userId = "";
	const HOST = "per-web-01.site-a.example";
	const url = (p: string) => `${h.api}/${p}`;
	const identity = async () =>
		(await request("GET", url(`hosts/${HOST}`))).body.vpn_representation as Record<string, unknown> | null;

	beforeAll(async () => {
		sim = new PritunlSimulator({ username: "admin", password: "Periodic-pw-1" });
		const { url: simUrl } = await sim.start();
		h = await startEmbedded({ env: { ...SUITE_ENV, VPN_SYNC_INTERVAL_MS: "300", PRITUNL_TIMEOUT_MS: "800" } });
		await h.call("hosts.upsertMany", { hosts: [{ _id: HOST, status: "up", key: "accepted" }] });
		const manager = await request("POST", url("vpn_managers"), {
			body: {
				name: "per",
				server_address: simUrl,
				dashboard_address: `${simUrl}/`,
				username: "admin",
				password: "Periodic-pw-1",
			},
		});
		expect(manager.status).toBe(201);
		managerId = manager.body._id;
		const org = await request("POST", url("vpn_organizations"), {
			body: {
				name: "per-org",
				vpn_representation: { name: "per-org", cipher_type: "rsa" },
				cipher_type: "rsa",
				vpn_manager: manager.body._id,
			},
		});
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

	it("undoes a create whose vpn process died between Pritunl's create and the record, and leaves one that got its record", async () => {
		const creates = (
			h.broker!.getLocalService("vpn-organizations") as unknown as {
				stores: Record<string, { insertMany(d: object[]): Promise<void> }>;
			}
		).stores.vpn_organization_creates;
		const before = sim.orgList().map(o => o.id);
		const long = new Date(Date.now() - 60_000);
		// As a process killed half-way leaves it: Pritunl made the organization, fleet-ctl has no record of it,
		// and the create's entry was never ended.
		sim.addOrg("crashed-org");
		// And a create killed just after its record was stored: the organization is fleet-ctl's, it stays.
		const survivor = await request("POST", url("vpn_organizations"), {
			body: {
				name: "survivor-org",
				vpn_representation: { name: "survivor-org" },
				cipher_type: "rsa",
				vpn_manager: managerId,
			},
		});
		expect(survivor.status).toBe(201);
		await creates.insertMany([
			{ _id: "0123456789abcdef0123a001", manager: managerId, name: "crashed-org", before, at: long },
			{ _id: "0123456789abcdef0123a002", manager: managerId, name: "survivor-org", before, at: long },
		]);
		await eventually(
			async () => (sim.orgList().some(o => o.name === "crashed-org") ? undefined : true),
			10_000,
			"the half-made organization to be removed",
		);
		expect(sim.orgList().filter(o => o.name === "survivor-org")).toHaveLength(1);
		expect((await request("GET", url(`vpn_organizations/${survivor.body._id}`))).status).toBe(200);
		await eventually(
			async () =>
				(await h.call("vpn-organizations.unfinishedCreates", { olderThanMs: 0 })).length === 0 ? true : undefined,
			10_000,
			"both entries to be ended",
		);
	});

	it("gives a host its VPN identity by itself", async () => {
		const rep = await eventually(
			async () => {
				const r = await identity();
				return r?.hwtoken_id === "ccccccperio1" ? r : undefined;
			},
			5000,
			"the periodic sync",
		);
		expect(rep).toMatchObject({ id: userId, organization: orgPid, organization_name: "per-org", name: HOST });
		expect((await request("GET", url(`hosts/${HOST}`))).body.vpn_organization).toBe(orgRecord);
	});

	it("keeps the last identity while Pritunl is away, the rest of the API answering, and resumes by itself", async () => {
		await sim.goDown("refuse");
		try {
			sim.updateUser(userId, { yubico_id: "ccccccperio2" });
			// A sync in line after the periodic ones (syncs run one at a time), failing against the outage: every
			// periodic sync before it has failed too by then, and the host keeps its identity (not a fixed wait).
			const failed = await h.call("vpn.sync", {});
			expect(failed.failed).toEqual([expect.objectContaining({ manager: managerId, code: 502 })]);
			expect((await identity())?.hwtoken_id).toBe("ccccccperio1");
			expect((await request("GET", url("hosts"))).status).toBe(200);
			expect((await request("GET", url(`vpn_organizations/${orgRecord}`))).status).toBe(200);
			expect((await request("POST", url("groups"), { body: { name: "per-group", hosts: [HOST] } })).status).toBe(201);
			expectEveError(await request("GET", url(`hosts/${HOST}/vpn_profile`)), 502);
		} finally {
			await sim.comeBack();
		}
		await eventually(
			async () => ((await identity())?.hwtoken_id === "ccccccperio2" ? true : undefined),
			5000,
			"the sync after Pritunl came back",
		);
		expect((await request("GET", url(`hosts/${HOST}/vpn_profile`))).status).toBe(200);
	}, 20_000);

	it("resumes after Pritunl hung (504) too", async () => {
		await sim.goDown("hang");
		try {
			sim.updateUser(userId, { yubico_id: "ccccccperio3" });
			// As above: a sync in line after the periodic ones, timing out against the hung Pritunl (504).
			const failed = await h.call("vpn.sync", {});
			expect(failed.failed).toEqual([expect.objectContaining({ manager: managerId, code: 504 })]);
			expect((await identity())?.hwtoken_id).toBe("ccccccperio2");
		} finally {
			await sim.comeBack();
		}
		await eventually(
			async () => ((await identity())?.hwtoken_id === "ccccccperio3" ? true : undefined),
			8000,
			"the sync after Pritunl answered again",
		);
	}, 20_000);

	it("takes the identity from hosts whose organization record is gone (a delete that raced a sync)", async () => {
		const ghostOrg = "0123456789abcdef01234567";
		const orphanHost = "per-orphan-01.site-a.example";
		await h.call("hosts.upsertMany", { hosts: [{ _id: orphanHost, status: "up", key: "accepted" }] });
		await h.call("hosts.setVpn", {
			orgs: [],
			assignments: [
				{
					_id: orphanHost,
					vpn_organization: ghostOrg,
					vpn_representation: { id: "0123456789abcdef0123aaaa", name: orphanHost },
				},
			],
		});
		expect((await request("GET", url(`hosts/${orphanHost}`))).body.vpn_organization).toBe(ghostOrg);
		await eventually(
			async () => {
				const host = (await request("GET", url(`hosts/${orphanHost}`))).body;
				return host.vpn_organization === undefined && host.vpn_representation === undefined ? true : undefined;
			},
			5000,
			"the periodic sync to clear the stale identity",
		);
		// The hosts of the organization that exists keep theirs.
		expect((await request("GET", url(`hosts/${HOST}`))).body.vpn_organization).toBe(orgRecord);
	});

	it("removes an organization Pritunl made after the create gave up waiting, without anyone asking", async () => {
		sim.delayNext(1, 1200, { method: "POST", path: /^\/organization$/ });
		const res = await request("POST", url("vpn_organizations"), {
			body: {
				name: "per-late",
				vpn_representation: { name: "per-late" },
				cipher_type: "rsa",
				vpn_manager: (await request("GET", url("vpn_managers"))).body._items[0]._id,
			},
		});
		expectEveError(res, 504);
		await eventually(
			async () => (sim.orgList().some(o => o.name === "per-late") ? true : undefined),
			3000,
			"Pritunl to finish the create",
		);
		await eventually(
			async () => (sim.orgList().some(o => o.name === "per-late") ? undefined : true),
			8000,
			"a sync to remove it",
		);
		expect(
			(await request("GET", url(`vpn_organizations?where=${encodeURIComponent('{"name":"per-late"}')}`))).body._meta
				.total,
		).toBe(0);
		// The organization that has a record stays.
		expect(sim.org(orgPid)).toBeDefined();
	}, 20_000);
});

/**
 * A manager deleted while an organization of it is being created: whichever way the two interleave, no
 * organization is left pointing at a deleted manager, and nothing is left in Pritunl without a record. The
 * interleavings are forced by holding one internal call's answer (a broker middleware) until the other
 * request has done its part.
 */
describe("vpn: a manager deleted while an organization of it is created", () => {
	let h: Harness;
	let sim: PritunlSimulator;
	const url = (p: string) => `${h.api}/${p}`;
	/** Holds the answer of a call to `action`, after `skip` calls, until `release`. */
	let hold: { action: string; skip: number; reached: () => void; gate: Promise<void> } | null = null;
	const armHold = (action: string, skip: number) => {
		let release = () => {};
		let reached = () => {};
		const arrived = new Promise<void>(r => (reached = r));
		hold = { action, skip, reached, gate: new Promise<void>(r => (release = r)) };
		return {
			arrived,
			release: () => {
				hold = null;
				release();
			},
		};
	};
	const newManager = async (name: string) => {
		const res = await request("POST", url("vpn_managers"), {
			body: {
				name,
				server_address: sim.url,
				dashboard_address: `${sim.url}/`,
				username: "admin",
				password: "Race-pw-1",
			},
		});
		expect(res.status).toBe(201);
		return res.body._id as string;
	};
	const createOrg = (name: string, manager: string) =>
		request("POST", url("vpn_organizations"), {
			body: { name, vpn_representation: { name }, cipher_type: "rsa", vpn_manager: manager },
		});

	beforeAll(async () => {
		sim = new PritunlSimulator({ username: "admin", password: "Race-pw-1" });
		await sim.start();
		const holdMiddleware = {
			name: "HoldForTest",
			localAction(next: (ctx: unknown) => Promise<unknown>, action: { name: string }) {
				return async (ctx: unknown) => {
					const result = await next(ctx);
					const armed = hold;
					if (armed && armed.action === action.name) {
						if (armed.skip > 0) armed.skip--;
						else {
							armed.reached();
							await armed.gate;
						}
					}
					return result;
				};
			},
		};
		h = await startEmbedded({
			env: { ...SUITE_ENV, VPN_SYNC_INTERVAL_MS: "0" },
			broker: { middlewares: [holdMiddleware as unknown as Middleware] },
		});
	}, 30_000);
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("refuses the delete (409) and keeps the manager when the organization was stored after the delete counted none", async () => {
		const manager = await newManager("race-delete");
		const held = armHold("vpn-organizations.countByManager", 0);
		const deleting = request("DELETE", url(`vpn_managers/${manager}`));
		await held.arrived; // the delete counted no organization; its answer is held
		const org = await createOrg("race-org-a", manager);
		expect(org.status).toBe(201);
		held.release();
		expectEveError(await deleting, 409);
		expect((await request("GET", url(`vpn_managers/${manager}`))).status).toBe(200);
		const stored = await request("GET", url(`vpn_organizations/${org.body._id}`));
		expect(stored.body.vpn_manager).toBe(manager);
		expect(sim.orgList().filter(o => o.name === "race-org-a")).toHaveLength(1);
	});

	it("refuses the organization (422) and removes it from Pritunl when the manager went between its check and its record", async () => {
		const manager = await newManager("race-create");
		// The create checks the manager twice before storing (the body, then the record): the second answer is held.
		const held = armHold("vpn-managers.exist", 1);
		const creating = createOrg("race-org-b", manager);
		await held.arrived;
		expect((await request("DELETE", url(`vpn_managers/${manager}`))).status).toBe(204);
		held.release();
		const res = expectEveError(await creating, 422);
		expect(res._issues).toEqual({ vpn_manager: expect.stringContaining("must exist") });
		expect(
			(
				await request(
					"GET",
					url(`vpn_organizations?where=${encodeURIComponent(JSON.stringify({ name: "race-org-b" }))}`),
				)
			).body._meta.total,
		).toBe(0);
		expect(sim.orgList().filter(o => o.name === "race-org-b")).toEqual([]);
	});
});
