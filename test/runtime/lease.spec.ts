/**
 * Leases and pass loops (lib/runtime/lease.ts) on the embedded store: two claimants racing on one record, a lease
 * passing and taken over once, renewals refused to whoever does not hold it, release, the move of leases stored
 * in an older shape, and the pass loop's "once more if asked meanwhile". The clock is given, never read (except
 * by the pass loop, whose timers are real and short).
 */
import Datastore from "@seald-io/nedb";
import type { Doc, Store } from "../../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import {
	PassLoop,
	both,
	claim,
	claimable,
	findLapsed,
	heldBy,
	lapsed,
	leaseFor,
	leaseLapsed,
	migrateLeases,
	release,
	renew,
	takeOver,
} from "../../lib/runtime/lease";

/** The clock of these tests: T(s) is s seconds after 2030-01-01 00:00:00 UTC. */
const T = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
const MS = 30_000;

async function storeWith(docs: Doc[]): Promise<Store> {
	const store = new NedbStore(new Datastore() as unknown as NedbDatastore);
	await store.insertMany(docs);
	return store;
}

describe("leases: what each write asks of the store", () => {
	it("a lease runs from now for its length, and has passed only after its end", () => {
		expect(leaseFor({ owner: "a", ms: MS, now: T(0) })).toEqual({ owner: "a", until: T(30) });
		expect(leaseLapsed({ lease: { owner: "a", until: T(30) } }, T(30))).toBe(false);
		expect(leaseLapsed({ lease: { owner: "a", until: T(30) } }, T(31))).toBe(true);
		expect(leaseLapsed({ lease: { owner: "a", until: T(30).toISOString() } }, T(29))).toBe(false);
		expect(leaseLapsed({}, T(0))).toBe(true);
	});

	it("names the one lease field in every filter", () => {
		expect(claimable(T(5))).toEqual({ $or: [{ lease: null }, { "lease.until": { $lt: T(5) } }] });
		expect(lapsed(T(5))).toEqual({ "lease.until": { $lt: T(5) } });
		expect(heldBy("a")).toEqual({ "lease.owner": "a" });
		// Conditions on different fields merge; on the same field they are both kept.
		expect(both({ _id: "x" }, { status: "up" })).toEqual({ _id: "x", status: "up" });
		expect(both({ $or: [{ a: 1 }] }, { $or: [{ b: 1 }] })).toEqual({
			$and: [{ $or: [{ a: 1 }] }, { $or: [{ b: 1 }] }],
		});
		// One shared field is enough to keep both whole (a spread would drop the first `$or`).
		expect(both({ _id: "x", $or: [{ a: 1 }] }, { $or: [{ b: 1 }] })).toEqual({
			$and: [{ _id: "x", $or: [{ a: 1 }] }, { $or: [{ b: 1 }] }],
		});
	});
});

describe("leases on one store", () => {
	it("two claimants racing on one record: one wins, the other gets nothing and changes nothing", async () => {
		const store = await storeWith([{ _id: "r", n: 0 }]);
		const [a, b] = await Promise.all([
			claim(store, { _id: "r" }, { owner: "a", ms: MS, now: T(0) }, { $inc: { n: 1 } }),
			claim(store, { _id: "r" }, { owner: "b", ms: MS, now: T(0) }, { $inc: { n: 1 } }),
		]);
		expect([a, b].filter(Boolean)).toHaveLength(1);
		const winner = (a ?? b) as Doc;
		expect(await store.findOne({ _id: "r" })).toEqual({
			_id: "r",
			n: 1,
			lease: { owner: winner.lease.owner, until: T(30) },
		});
		// While the lease holds, nobody claims it, not even its holder again.
		expect(await claim(store, { _id: "r" }, { owner: "c", ms: MS, now: T(30) })).toBeNull();
		expect(await claim(store, { _id: "r" }, { owner: winner.lease.owner, ms: MS, now: T(10) })).toBeNull();
		// A claim whose own condition fails takes nothing.
		expect(await claim(store, { _id: "r", n: 5 }, { owner: "c", ms: MS, now: T(60) })).toBeNull();
		expect((await store.findOne({ _id: "r" }))?.lease.owner).toBe(winner.lease.owner);
	});

	it("a passed lease: claimable again, found for takeover, taken over by one of two, then live again", async () => {
		const store = await storeWith([
			{ _id: "dead", lease: { owner: "a", until: T(30) } },
			{ _id: "live", lease: { owner: "a", until: T(90) } },
			{ _id: "free", n: 1 },
		]);
		expect((await findLapsed(store, {}, T(31))).map(d => d._id)).toEqual(["dead"]);
		expect(await findLapsed(store, {}, T(30))).toEqual([]);
		expect(await findLapsed(store, { _id: "live" }, T(31))).toEqual([]);
		// Nothing to take over where no lease is held, nor where it still holds.
		expect(await takeOver(store, { _id: "free" }, { owner: "b", ms: MS, now: T(31) })).toBeNull();
		expect(await takeOver(store, { _id: "live" }, { owner: "b", ms: MS, now: T(31) })).toBeNull();
		const [b, c] = await Promise.all([
			takeOver(store, { _id: "dead" }, { owner: "b", ms: MS, now: T(31) }, { $set: { by: "b" } }),
			takeOver(store, { _id: "dead" }, { owner: "c", ms: MS, now: T(31) }, { $set: { by: "c" } }),
		]);
		expect([b, c].filter(Boolean)).toHaveLength(1);
		const taker = (b ?? c)?.by as string;
		expect(await store.findOne({ _id: "dead" })).toEqual({
			_id: "dead",
			by: taker,
			lease: { owner: taker, until: T(61) },
		});
		expect(await findLapsed(store, {}, T(32))).toEqual([]);
		// The same record is claimable once its lease passed (the rollouts' and jobs' way), and once let go.
		expect(await claim(store, { _id: "live" }, { owner: "d", ms: MS, now: T(91) })).toMatchObject({
			lease: { owner: "d", until: T(121) },
		});
		expect(await claim(store, { _id: "free" }, { owner: "d", ms: MS, now: T(0) })).toMatchObject({
			n: 1,
			lease: { owner: "d", until: T(30) },
		});
	});

	it("only the holder renews; a renewal by another is refused and changes nothing", async () => {
		const store = await storeWith([{ _id: "r", lease: { owner: "a", until: T(30) } }]);
		expect(await renew(store, { _id: "r" }, { owner: "b", ms: MS, now: T(20) }, { $set: { progress: 1 } })).toBe(false);
		expect(await store.findOne({ _id: "r" })).toEqual({ _id: "r", lease: { owner: "a", until: T(30) } });
		expect(await renew(store, { _id: "r" }, { owner: "a", ms: MS, now: T(20) }, { $set: { progress: 1 } })).toBe(true);
		expect(await store.findOne({ _id: "r" })).toEqual({ _id: "r", progress: 1, lease: { owner: "a", until: T(50) } });
		// Renewed, it has not passed at the old end.
		expect(await takeOver(store, { _id: "r" }, { owner: "b", ms: MS, now: T(40) })).toBeNull();
	});

	it("release lets the owner's lease go (another's release is refused), or whoever's when the work is named", async () => {
		const store = await storeWith([
			{ _id: "r", lease: { owner: "a", until: T(30) } },
			{ _id: "s", run: "x", lease: { owner: "a", until: T(30) } },
		]);
		expect(await release(store, { _id: "r" }, { $set: { done: true } }, "b")).toBe(false);
		expect(await store.findOne({ _id: "r" })).toEqual({ _id: "r", lease: { owner: "a", until: T(30) } });
		expect(await release(store, { _id: "r" }, { $set: { done: true } }, "a")).toBe(true);
		expect(await store.findOne({ _id: "r" })).toEqual({ _id: "r", done: true });
		expect(await release(store, { _id: "s", run: "x" }, { $unset: { run: true } })).toBe(true);
		expect(await store.findOne({ _id: "s" })).toEqual({ _id: "s" });
		expect(await release(store, { _id: "s", run: "x" })).toBe(false);
		// Let go, it is claimable at once.
		expect(await claim(store, { _id: "r" }, { owner: "b", ms: MS, now: T(1) })).toMatchObject({
			lease: { owner: "b" },
		});
	});

	it("moves leases of an older shape once, even with two replicas starting together, then claims them as usual", async () => {
		const store = await storeWith([
			{ _id: "held", claim_by: "old", claim_until: T(90) },
			{ _id: "passed", claim_by: "old", claim_until: T(10) },
			{ _id: "none", claim_by: null, claim_until: null },
			{ _id: "new", lease: { owner: "b", until: T(90) } },
		]);
		const old = {
			filter: { claim_until: { $exists: true } },
			lease: (d: Doc) => (d.claim_until ? { owner: d.claim_by, until: d.claim_until } : null),
			unset: ["claim_by", "claim_until"],
		};
		const moved = await Promise.all([migrateLeases(store, old), migrateLeases(store, old)]);
		expect(moved[0] + moved[1]).toBe(3);
		expect(await store.find({}, { sort: [["_id", 1]] })).toEqual([
			{ _id: "held", lease: { owner: "old", until: T(90) } },
			{ _id: "new", lease: { owner: "b", until: T(90) } },
			{ _id: "none" },
			{ _id: "passed", lease: { owner: "old", until: T(10) } },
		]);
		expect(await migrateLeases(store, old)).toBe(0);
		const claimed = await Promise.all(
			["held", "passed", "none"].map(_id => claim(store, { _id }, { owner: "c", ms: MS, now: T(20) })),
		);
		expect(claimed.map(d => d?._id ?? null)).toEqual([null, "passed", "none"]);
	});
});

// ---------------------------------------------------------------- the pass loop

/** A pass that waits until let go, counting its runs. */
function gatedPass() {
	const gates: Array<() => void> = [];
	const started: number[] = [];
	let runs = 0;
	return {
		started,
		get runs() {
			return runs;
		},
		pass: () =>
			new Promise<void>(resolve => {
				started.push(++runs);
				gates.push(resolve);
			}),
		/** Lets the pass under way end. */
		open: () => gates.shift()?.(),
		/** Resolves once `n` passes started. */
		startedCount: async (n: number) => {
			while (runs < n) await new Promise(r => setImmediate(r));
		},
	};
}

describe("the pass loop", () => {
	it("asked while a pass runs, runs exactly once more after it, however many times it was asked", async () => {
		const p = gatedPass();
		const loop = new PassLoop(p.pass, () => undefined);
		loop.ask();
		await p.startedCount(1);
		expect(loop.busy).toBe(true);
		for (let i = 0; i < 5; i++) loop.ask();
		p.open();
		await p.startedCount(2);
		// The second pass runs; nothing asked meanwhile: no third.
		p.open();
		await loop.settled();
		expect(p.runs).toBe(2);
		expect(loop.busy).toBe(false);
		// Idle, an ask runs a pass at once.
		loop.ask();
		await p.startedCount(3);
		p.open();
		await loop.settled();
		expect(p.runs).toBe(3);
	});

	it("a pass that asks for another gets one more; a failed pass is reported and the loop goes on", async () => {
		const errors: string[] = [];
		let runs = 0;
		const loop: PassLoop = new PassLoop(
			async () => {
				runs++;
				if (runs === 1) loop.ask();
				if (runs === 2) throw new Error("boom");
			},
			err => {
				errors.push(err.message);
			},
		);
		loop.ask();
		await loop.settled();
		expect(runs).toBe(2);
		expect(errors).toEqual(["boom"]);
		loop.ask();
		await loop.settled();
		expect(runs).toBe(3);
	});

	it("asked for later, runs once at the earliest time asked; a pass answering a wait is run again after it", async () => {
		jest.useFakeTimers({ now: T(0) });
		try {
			const at: number[] = [];
			const loop = new PassLoop(
				async () => {
					at.push(Date.now() - T(0).getTime());
					return at.length === 1 ? 30 : undefined;
				},
				() => undefined,
			);
			loop.ask(200);
			loop.ask(20);
			loop.ask(100);
			await jest.advanceTimersByTimeAsync(19);
			expect(at).toEqual([]);
			await jest.advanceTimersByTimeAsync(1000);
			// One pass at 20 ms, the one it asked for 30 ms later, none at 100 or 200 ms.
			expect(at).toEqual([20, 50]);
			expect(loop.busy).toBe(false);
		} finally {
			jest.useRealTimers();
		}
	});

	it("a failed pass answers its retry through onError", async () => {
		let runs = 0;
		const loop = new PassLoop(
			async () => {
				if (++runs === 1) throw new Error("down");
			},
			() => 10,
		);
		loop.ask();
		await loop.settled();
		expect(runs).toBe(2);
	});

	it("stopped: the pass under way ends, none follows, asks are ignored", async () => {
		const p = gatedPass();
		const loop = new PassLoop(p.pass, () => undefined);
		loop.ask();
		await p.startedCount(1);
		loop.ask();
		loop.ask(5);
		const stopped = loop.stop();
		expect(loop.stopping).toBe(true);
		p.open();
		await stopped;
		loop.ask();
		await loop.settled();
		expect(p.runs).toBe(1);
	});
});
