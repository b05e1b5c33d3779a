/**
 * Records leased by a version before the one lease module (issue 45) still work after the upgrade: each service's
 * description of its old shape (OLD_LEASES, moved at its start by lib/runtime/lease.ts migrateLeases) turns a
 * record as that version stored it into `lease` {owner, until}, and the service's claim or takeover then treats
 * it as before: a live old claim keeps its work, a passed one is taken over, an ended one is free. The tasks'
 * old shape is checked with their claims (test/tasks/task-claims.spec.ts).
 */
import Datastore from "@seald-io/nedb";
import type { Doc, Store } from "../../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { claim, findLapsed, leaseLapsed, migrateLeases, takeOver } from "../../lib/runtime/lease";
import { OLD_LEASES as ROLLOUTS } from "../../services/rollouts/driver";
import { OLD_LEASES as JOBS } from "../../services/jobs.service";
import { OLD_LEASES as SNAPSHOTS } from "../../services/stats/snapshots";
import { oldLeases as checks } from "../../services/conformity/conformity-checks.service";

const T = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
const holder = (owner: string, now: Date) => ({ owner, ms: 30_000, now });

async function storeWith(docs: Doc[]): Promise<Store> {
	const store = new NedbStore(new Datastore() as unknown as NedbDatastore);
	await store.insertMany(docs);
	return store;
}
const all = (store: Store) => store.find({}, { sort: [["_id", 1]] });

describe("leases stored before the lease module, after the upgrade", () => {
	it("rollouts: `claim_by`/`claim_until` become the lease; a live claim is kept, a lapsed or empty one claimed", async () => {
		const store = await storeWith([
			{ _id: "held", status: "running", claim_by: "old", claim_until: T(60) },
			{ _id: "lapsed", status: "running", claim_by: "old", claim_until: T(10) },
			{ _id: "free", status: "running", claim_by: null, claim_until: null },
		]);
		expect(await migrateLeases(store, ROLLOUTS)).toBe(3);
		expect(await all(store)).toEqual([
			{ _id: "free", status: "running" },
			{ _id: "held", status: "running", lease: { owner: "old", until: T(60) } },
			{ _id: "lapsed", status: "running", lease: { owner: "old", until: T(10) } },
		]);
		const claimed = await Promise.all(
			["held", "lapsed", "free"].map(_id => claim(store, { _id }, holder("new", T(20)))),
		);
		expect(claimed.map(d => d?._id ?? null)).toEqual([null, "lapsed", "free"]);
	});

	it("jobs: a running job's `lease_until` becomes its run's lease; an ended job's (null) is dropped and the kind is free", async () => {
		const store = await storeWith([
			{ _id: "build_graph", status: "running", run: "r1", lease_until: T(60), lease_ms: 60_000 },
			{ _id: "request_ips", status: "running", run: "r2", lease_until: T(10), lease_ms: 60_000 },
			{ _id: "load_updates", status: "finished", run: "r3", lease_until: null, lease_ms: 60_000 },
		]);
		expect(await migrateLeases(store, JOBS)).toBe(3);
		expect((await all(store)).map(d => [d._id, d.lease ?? null, "lease_until" in d])).toEqual([
			["build_graph", { owner: "r1", until: T(60) }, false],
			["load_updates", null, false],
			["request_ips", { owner: "r2", until: T(10) }, false],
		]);
		const claimed = await Promise.all(
			["build_graph", "request_ips", "load_updates"].map(_id => claim(store, { _id }, holder("r9", T(20)))),
		);
		expect(claimed.map(d => d?._id ?? null)).toEqual([null, "request_ips", "load_updates"]);
	});

	it("snapshots: an incomplete header's `lease_until` becomes its taker's lease, undone only once it passed", async () => {
		const store = await storeWith([
			{ _id: "h1", index: 1, complete: true, by: "old" },
			{ _id: "h2", index: 2, complete: false, by: "old", lease_until: T(60) },
		]);
		expect(await migrateLeases(store, SNAPSHOTS)).toBe(1);
		const h2 = await store.findOne({ _id: "h2" });
		expect(h2).toEqual({ _id: "h2", index: 2, complete: false, by: "old", lease: { owner: "old", until: T(60) } });
		expect(leaseLapsed(h2 as Doc, T(59))).toBe(false);
		expect(leaseLapsed(h2 as Doc, T(61))).toBe(true);
		expect(await store.findOne({ _id: "h1" })).toEqual({ _id: "h1", index: 1, complete: true, by: "old" });
	});

	it("conformity checks: an unstarted pass gets a lease ending ROLLOUT_LEASE_MS after its claim, and is taken over once it passed", async () => {
		const pass = (rollout: string, at: Date, started: boolean) => ({ due: at, rollout, at, started, error: null });
		const store = await storeWith([
			{ _id: "c1", last_pass: pass("p1", T(0), false) },
			{ _id: "c2", last_pass: pass("p2", T(50), false) },
			{ _id: "c3", last_pass: pass("p3", T(0), true) },
		]);
		expect(await migrateLeases(store, checks(30_000))).toBe(2);
		expect((await all(store)).map(d => [d._id, d.lease ?? null])).toEqual([
			["c1", { owner: "", until: T(30) }],
			["c2", { owner: "", until: T(80) }],
			["c3", null],
		]);
		expect(await migrateLeases(store, checks(30_000))).toBe(0);
		expect((await findLapsed(store, {}, T(40))).map(d => d._id)).toEqual(["c1"]);
		expect(await takeOver(store, { _id: "c1", "last_pass.rollout": "p1" }, holder("new", T(40)))).toMatchObject({
			lease: { owner: "new", until: T(70) },
		});
	});
});
