/**
 * The scheduler's claims and leases (services/tasks/task-claims.ts), exactly once without MongoDB: several scheduler
 * replicas race on ONE real store — the embedded NeDB store (a file, so that a restart opens it afresh) and,
 * when MONGO_URI is set, that database (in CI the wire-protocol emulator, not MongoDB; each replica with a
 * connection of its own). Each replica does what a scheduler pass does (services/tasks/tasks.service.ts
 * schedulerTick): look for dead runs and take them over, look for due tasks and claim each, later renew or
 * record its runs. The clock is given, never read.
 *
 * Every expectation is a literal written from docs/scheduling.md ("Runs"): each due time is claimed once
 * however many replicas run; a task holds at most one pending run, and a run falling due meanwhile is claimed
 * only once that one is recorded; a dead replica's run is taken over after its lease, once, with the same run
 * id; a restart loses no run.
 */
import Datastore from "@seald-io/nedb";
import { MongoClient } from "mongodb";
import path from "node:path";
import type { Doc, Store } from "../../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { MongoStore, type MongoCollection } from "../../lib/storage/mongo-store";
import {
	claimFilter,
	claimRun,
	claimUpdate,
	deferUpdate,
	dueFilter,
	findDue,
	findExpired,
	findSoonest,
	recordRun,
	recordUpdate,
	renewLease,
	runFilter,
	soonFilter,
	takeOverRun,
	OLD_LEASES,
	type LastRun,
} from "../../services/tasks/task-claims";
import { migrateLeases } from "../../lib/runtime/lease";
import { tempDir, uniqueMongoUri } from "../support/harness";

/** The clock of these tests: T(s) is s seconds after 2030-01-01 00:00:00 UTC. */
const T = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
const LEASE_MS = 30_000;
/** Every task here runs every minute. */
const INTERVAL_S = 60;

describe("claims and leases: what each write asks of the store", () => {
	it("looks for scheduled tasks due now with no run pending", () => {
		expect(dueFilter(new Date("2030-01-01T00:00:00.000Z"))).toEqual({
			status: "scheduled",
			next: { $lte: new Date("2030-01-01T00:00:00.000Z") },
			pending: { $exists: false },
		});
		expect(soonFilter(new Date("2030-01-01T00:00:00.000Z"), 1000)).toEqual({
			status: "scheduled",
			next: { $gt: new Date("2030-01-01T00:00:00.000Z"), $lte: new Date("2030-01-01T00:00:01.000Z") },
		});
	});

	it("claims only the due time it read, only while scheduled, and only with no run pending", () => {
		expect(claimFilter({ _id: "t1" }, new Date("2030-01-01T00:00:00.000Z"))).toEqual({
			_id: "t1",
			status: "scheduled",
			next: new Date("2030-01-01T00:00:00.000Z"),
			pending: { $exists: false },
		});
	});

	it("moves next on, counts the run and holds it pending (the lease is taken with it)", () => {
		const update = claimUpdate({
			due: T(0),
			next: T(60),
			skipped: null,
			run: "r1",
			by: "node-a",
			now: T(2),
			leaseMs: 30_000,
		});
		expect(update).toEqual({
			$set: {
				next: new Date("2030-01-01T00:01:00.000Z"),
				status: "scheduled",
				_updated: new Date("2030-01-01T00:00:02.000Z"),
				pending: { run: "r1", due: new Date("2030-01-01T00:00:00.000Z") },
			},
			// A run that waited for a maintenance window is claimed: it waits no more.
			$unset: { window_wait: true },
			$inc: { count_of_execution: 1 },
		});
	});

	it("defers a run refused outside a maintenance window to the window's opening, remembering when it was first due", () => {
		const result = { due: T(0), at: T(1), status: "waiting", message: "outside the maintenance window" };
		// The window opens before the next due time: due then; a finished one-shot task is scheduled again for it.
		expect(deferUpdate({ _id: "t1", next: null, status: "finished" }, result, T(600), T(1))).toEqual({
			$set: {
				last_run: result,
				next: T(600),
				status: "scheduled",
				window_wait: { due: T(0), until: T(600) },
				_updated: T(1),
			},
			$unset: { pending: true },
		});
		// The next due time comes first: due then (and refused again if the window is still shut), first due kept.
		expect(
			deferUpdate({ _id: "t1", next: T(60), status: "scheduled", window_wait: { due: T(-60) } }, result, T(600), T(1))
				.$set,
		).toMatchObject({ next: T(60), window_wait: { due: T(-60), until: T(600) } });
		// The window opens before the next due time: due when it opens; a task paused meanwhile stays paused.
		expect(deferUpdate({ _id: "t1", next: T(900), status: "paused" }, result, T(600), T(1)).$set).toMatchObject({
			next: T(600),
			status: "paused",
		});
	});

	it("finishes a task with no due time left, and records a skipped run without counting it or holding it", () => {
		expect(
			claimUpdate({ due: T(0), next: null, skipped: null, run: "r1", by: "node-a", now: T(0), leaseMs: 1000 }),
		).toEqual({
			$set: {
				next: null,
				status: "finished",
				_updated: new Date("2030-01-01T00:00:00.000Z"),
				pending: { run: "r1", due: new Date("2030-01-01T00:00:00.000Z") },
			},
			$unset: { window_wait: true },
			$inc: { count_of_execution: 1 },
		});
		expect(
			claimUpdate({
				due: T(0),
				next: T(60),
				skipped: "missed (misfire policy skip)",
				run: "r1",
				by: "node-a",
				now: T(90),
				leaseMs: 1000,
			}),
		).toEqual({
			$set: {
				next: new Date("2030-01-01T00:01:00.000Z"),
				status: "scheduled",
				_updated: new Date("2030-01-01T00:01:30.000Z"),
				last_run: {
					due: new Date("2030-01-01T00:00:00.000Z"),
					at: new Date("2030-01-01T00:01:30.000Z"),
					status: "skipped",
					message: "missed (misfire policy skip)",
				},
			},
			$unset: { window_wait: true },
		});
	});

	it("renews and records only the run still pending, and frees the task when recorded", () => {
		expect(runFilter("t1", "r1")).toEqual({ _id: "t1", "pending.run": "r1" });
		const result: LastRun = { due: T(0), at: T(3), status: "started", jid: "20300101000003000000" };
		expect(recordUpdate(result, new Date("2030-01-01T00:00:03.000Z"))).toEqual({
			$set: {
				last_run: {
					due: new Date("2030-01-01T00:00:00.000Z"),
					at: new Date("2030-01-01T00:00:03.000Z"),
					status: "started",
					jid: "20300101000003000000",
				},
				_updated: new Date("2030-01-01T00:00:03.000Z"),
			},
			$unset: { pending: true },
		});
	});
});

// ---------------------------------------------------------------- replicas on one store

/** A run one replica won: by a claim or by a takeover. */
interface Won {
	task: string;
	run: string;
	due: string;
	by: string;
}

/** One scheduler replica: its name (the node id), and the store it shares with the others. */
class Replica {
	private runs = 0;
	readonly claimed: Won[] = [];
	readonly takenOver: Won[] = [];
	constructor(
		readonly name: string,
		readonly store: Store,
	) {}

	/** A scheduler pass at `now`: take over the dead runs, then claim every due run, all at once. */
	async pass(now: Date): Promise<void> {
		for (const t of await findExpired(this.store, now)) {
			const taken = await takeOverRun(this.store, { _id: t._id, pending: t.pending }, this.name, now, LEASE_MS);
			if (taken) this.takenOver.push(won(taken));
		}
		await Promise.all((await findDue(this.store, now)).map(t => this.claim(t, now)));
	}

	/** Claims the run of the task as this replica read it (`next` is its due time). */
	async claim(t: Doc, now: Date): Promise<Doc | null> {
		const due = new Date(t.next);
		const next = new Date(due.getTime() + INTERVAL_S * 1000);
		const claimed = await claimRun(
			this.store,
			{ _id: t._id },
			{ due, next, skipped: null, run: `${this.name}-${++this.runs}`, by: this.name, now, leaseMs: LEASE_MS },
		);
		if (claimed) this.claimed.push(won(claimed));
		return claimed;
	}

	/** Records every run this replica won as started. */
	async recordAll(now: Date): Promise<number> {
		let recorded = 0;
		for (const w of [...this.claimed, ...this.takenOver]) {
			if (
				await recordRun(
					this.store,
					w.task,
					w.run,
					{ due: new Date(w.due), at: now, status: "started", jid: `jid-${w.run}` },
					now,
				)
			)
				recorded++;
		}
		return recorded;
	}
}

function won(t: Doc): Won {
	return { task: String(t._id), run: t.pending.run, due: new Date(t.pending.due).toISOString(), by: t.lease.owner };
}

/** `count` tasks t00, t01, … due at `next`, every minute. */
function tasks(count: number, next: Date): Doc[] {
	return Array.from({ length: count }, (_, i) => ({
		_id: `t${String(i).padStart(2, "0")}`,
		name: `task ${i}`,
		status: "scheduled",
		next,
		interval: INTERVAL_S,
		count_of_execution: 0,
	}));
}

const ids = (count: number) => Array.from({ length: count }, (_, i) => `t${String(i).padStart(2, "0")}`);
const sortedTasks = (runs: Won[]) => runs.map(r => r.task).sort();
const all = (store: Store) => store.find({}, { sort: [["_id", 1]] });

/** A store several replicas share, and the same data opened afresh, as a restarted process opens it. */
interface Leg {
	/** The store a replica uses (NeDB: the one datastore of the process; MongoDB: a connection of its own). */
	replicaStore(): Promise<Store>;
	/** The same data opened again by a new process. */
	reopen(): Promise<Store>;
}

interface LegKind {
	/** A leg on fresh data. */
	fresh(): Promise<Leg>;
	close(): Promise<void>;
}

function nedbKind(): LegKind {
	const dir = tempDir("claims");
	let files = 0;
	const open = async (file: string): Promise<Store> => {
		const db = new Datastore({ filename: file });
		await db.loadDatabaseAsync();
		return new NedbStore(db as unknown as NedbDatastore);
	};
	return {
		async fresh() {
			const file = path.join(dir, `tasks-${++files}.db`);
			const shared = await open(file);
			return { replicaStore: async () => shared, reopen: () => open(file) };
		},
		async close() {},
	};
}

function mongoKind(uri: string): LegKind {
	const base = uniqueMongoUri(uri);
	const clients: Array<{ close(): Promise<void> }> = [];
	let collections = 0;
	const connect = async (collection: string): Promise<Store> => {
		const client = new MongoClient(base);
		clients.push(client);
		await client.connect();
		const db = client.db() as unknown as { collection(name: string): MongoCollection };
		return new MongoStore(db.collection(collection));
	};
	return {
		async fresh() {
			const collection = `tasks_${++collections}`;
			return { replicaStore: () => connect(collection), reopen: () => connect(collection) };
		},
		async close() {
			await Promise.all(clients.map(c => c.close()));
		},
	};
}

const mongoUri = process.env.MONGO_URI;
const MONGO_LEG = "the MongoDB path (MONGO_URI; in CI the emulator, not MongoDB): a connection per replica";
const KINDS: Array<[string, () => LegKind]> = [
	["NeDB (embedded: one store in one process)", nedbKind],
	...(mongoUri ? [[MONGO_LEG, () => mongoKind(mongoUri)] as [string, () => LegKind]] : []),
];

// Without MONGO_URI the MongoDB leg is reported as skipped, with the reason, not left out silently.
if (!mongoUri)
	describe.skip(`claims and leases on one shared store, ${MONGO_LEG} (skipped: MONGO_URI is not set)`, () =>
		it("replicas race on one store", () => undefined));

describe.each(KINDS)("claims and leases on one shared store, %s", (_name, makeKind) => {
	const kind = makeKind();
	afterAll(() => kind.close());

	/** `n` replicas a, b, c, … on the leg's store, and the store itself. */
	const replicas = async (leg: Leg, names: string[]): Promise<Replica[]> =>
		Promise.all(names.map(async n => new Replica(n, await leg.replicaStore())));

	it("five replicas racing on 40 due runs claim each exactly once, and none while it is pending", async () => {
		const leg = await kind.fresh();
		const store = await leg.replicaStore();
		await store.insertMany(tasks(40, T(0)));
		const reps = await replicas(leg, ["a", "b", "c", "d", "e"]);

		await Promise.all(reps.map(r => r.pass(T(1))));
		const first = reps.flatMap(r => r.claimed);
		expect(sortedTasks(first)).toEqual(ids(40));
		expect(new Set(first.map(w => w.run)).size).toBe(40);
		for (const t of await all(store)) {
			const winner = first.find(w => w.task === t._id);
			expect(t).toMatchObject({
				status: "scheduled",
				next: new Date("2030-01-01T00:01:00.000Z"),
				count_of_execution: 1,
				pending: { run: winner?.run, due: new Date("2030-01-01T00:00:00.000Z") },
				lease: { owner: winner?.by, until: new Date("2030-01-01T00:00:31.000Z") },
			});
		}

		// The next due time passes while every run is still pending (renewed, so not dead): nothing is claimed.
		for (const r of reps)
			for (const w of r.claimed) expect(await renewLease(r.store, w.task, w.run, r.name, T(50), LEASE_MS)).toBe(true);
		await Promise.all(reps.map(r => r.pass(T(61))));
		expect(reps.flatMap(r => r.claimed)).toHaveLength(40);
		expect(reps.flatMap(r => r.takenOver)).toEqual([]);

		// Recorded: the runs due at 00:01:00 are claimed, each once again.
		expect((await Promise.all(reps.map(r => r.recordAll(T(62))))).reduce((a, b) => a + b, 0)).toBe(40);
		for (const r of reps) r.claimed.length = 0;
		await Promise.all(reps.map(r => r.pass(T(62))));
		const second = reps.flatMap(r => r.claimed);
		expect(sortedTasks(second)).toEqual(ids(40));
		expect(second.every(w => w.due === "2030-01-01T00:01:00.000Z")).toBe(true);
		expect((await all(store)).map(t => [t._id, t.count_of_execution, t.last_run.status, t.last_run.due])).toEqual(
			ids(40).map(id => [id, 2, "started", new Date("2030-01-01T00:00:00.000Z")]),
		);
	});

	it("refuses a claim against a task whose run is still pending, keeps that run, and claims the next due time once it is recorded", async () => {
		const leg = await kind.fresh();
		const [a, b, c, d] = await replicas(leg, ["a", "b", "c", "d"]);
		await a.store.insertMany(tasks(1, T(0)));
		await a.pass(T(0));
		expect(a.claimed).toEqual([{ task: "t00", run: "a-1", due: "2030-01-01T00:00:00.000Z", by: "a" }]);

		// 00:01:05: the next run (00:01:00) is due, but a's run is still being handed over (its lease renewed).
		// Only the holder renews: another replica's renewal is refused and changes nothing.
		expect(await renewLease(b.store, "t00", "a-1", "b", T(50), LEASE_MS)).toBe(false);
		expect(await renewLease(a.store, "t00", "a-1", "a", T(50), LEASE_MS)).toBe(true);
		expect(await findDue(b.store, T(65))).toEqual([]);
		// Replicas holding the task as it is now (next 00:01:00, due) try to claim it at once: each is refused.
		const now = await b.store.findOne({ _id: "t00" });
		expect(now).toMatchObject({ next: new Date("2030-01-01T00:01:00.000Z"), pending: { run: "a-1" } });
		expect(await Promise.all([b, c, d].map(r => r.claim(now as Doc, T(65))))).toEqual([null, null, null]);
		expect(await b.store.findOne({ _id: "t00" })).toMatchObject({
			next: new Date("2030-01-01T00:01:00.000Z"),
			count_of_execution: 1,
			pending: { run: "a-1", due: new Date("2030-01-01T00:00:00.000Z") },
			lease: { owner: "a", until: new Date("2030-01-01T00:01:20.000Z") },
		});

		// Recorded: the 00:01:00 run is claimed by exactly one of them.
		expect(await a.recordAll(T(66))).toBe(1);
		expect(await a.recordAll(T(67))).toBe(0);
		await Promise.all([b, c, d].map(r => r.pass(T(67))));
		expect([b, c, d].flatMap(r => r.claimed).map(w => [w.task, w.due])).toEqual([["t00", "2030-01-01T00:01:00.000Z"]]);
		expect(await b.store.findOne({ _id: "t00" })).toMatchObject({
			next: new Date("2030-01-01T00:02:00.000Z"),
			count_of_execution: 2,
			last_run: {
				due: new Date("2030-01-01T00:00:00.000Z"),
				at: new Date("2030-01-01T00:01:06.000Z"),
				status: "started",
				jid: "jid-a-1",
			},
		});
	});

	it("a skipped run moves next on and holds no lease: the next due time is claimable at once", async () => {
		const leg = await kind.fresh();
		const [a, b] = await replicas(leg, ["a", "b"]);
		await a.store.insertMany(tasks(1, T(0)));
		const t = (await findDue(a.store, T(90)))[0];
		expect(
			await claimRun(
				a.store,
				{ _id: t._id },
				{
					due: T(0),
					next: T(120),
					skipped: "missed (misfire policy skip)",
					run: "a-x",
					by: "a",
					now: T(90),
					leaseMs: LEASE_MS,
				},
			),
		).toMatchObject({ next: T(120), last_run: { status: "skipped" } });
		const after = await a.store.findOne({ _id: "t00" });
		expect(["pending" in (after as Doc), "lease" in (after as Doc)]).toEqual([false, false]);
		await b.pass(T(120));
		expect(b.claimed.map(w => [w.task, w.due])).toEqual([["t00", "2030-01-01T00:02:00.000Z"]]);
	});

	it("claims nothing of a task paused, changed or finished after it was read", async () => {
		const leg = await kind.fresh();
		const [a] = await replicas(leg, ["a"]);
		await a.store.insertMany(tasks(3, T(0)));
		const read = await findDue(a.store, T(0));
		expect(read.map(t => t._id)).toEqual(["t00", "t01", "t02"]);
		await a.store.updateMany({ _id: "t00" }, { $set: { status: "paused" } });
		await a.store.updateMany({ _id: "t01" }, { $set: { next: T(30) } });
		await a.store.updateMany({ _id: "t02" }, { $set: { status: "finished", next: null } });
		expect(await Promise.all(read.map(t => a.claim(t, T(0))))).toEqual([null, null, null]);
		expect((await all(a.store)).map(t => [t._id, t.count_of_execution, "pending" in t])).toEqual([
			["t00", 0, false],
			["t01", 0, false],
			["t02", 0, false],
		]);
	});

	it("a dead replica's runs are taken over once each, after the lease, with the same run ids", async () => {
		const leg = await kind.fresh();
		const [dead, ...alive] = await replicas(leg, ["dead", "b", "c", "d", "e"]);
		await dead.store.insertMany(tasks(20, T(0)));
		await dead.pass(T(0));
		expect(dead.claimed).toHaveLength(20);
		// `dead` stops here: it never renews nor records.

		// Within the lease nobody takes anything over, and nothing is due.
		await Promise.all(alive.map(r => r.pass(T(29))));
		expect(alive.flatMap(r => [...r.takenOver, ...r.claimed])).toEqual([]);
		expect(await findExpired(dead.store, T(30))).toEqual([]);

		// After it, four replicas race: each run is taken over by exactly one, keeping its id and due time.
		await Promise.all(alive.map(r => r.pass(T(31))));
		const taken = alive.flatMap(r => r.takenOver);
		expect(sortedTasks(taken)).toEqual(ids(20));
		expect(taken.map(w => w.run).sort()).toEqual(dead.claimed.map(w => w.run).sort());
		expect(taken.every(w => w.due === "2030-01-01T00:00:00.000Z" && w.by !== "dead")).toBe(true);
		expect(alive.flatMap(r => r.claimed)).toEqual([]);
		for (const t of await all(dead.store)) {
			expect(t.lease.until).toEqual(new Date("2030-01-01T00:01:01.000Z"));
			expect(t.lease.owner).toBe(taken.find(w => w.task === t._id)?.by);
		}
		// Taken over, the runs are not dead any more: a second look finds nothing.
		await Promise.all(alive.map(r => r.pass(T(40))));
		expect(alive.flatMap(r => r.takenOver)).toHaveLength(20);

		// Each is recorded once; the dead replica's late record of the same run changes nothing.
		expect((await Promise.all(alive.map(r => r.recordAll(T(45))))).reduce((x, y) => x + y, 0)).toBe(20);
		expect(await dead.recordAll(T(46))).toBe(0);
		expect(
			await renewLease(dead.store, "t00", dead.claimed.find(w => w.task === "t00")?.run ?? "", "dead", T(46), LEASE_MS),
		).toBe(false);
		expect(
			(await all(dead.store)).map(t => [t._id, t.count_of_execution, t.last_run.at, "pending" in t, "lease" in t]),
		).toEqual(ids(20).map(id => [id, 1, new Date("2030-01-01T00:00:45.000Z"), false, false]));
	});

	it("a restart (a new replica opening the same store) loses no run", async () => {
		const leg = await kind.fresh();
		const [before] = await replicas(leg, ["before"]);
		await before.store.insertMany(tasks(20, T(0)));
		await before.pass(T(0));
		// It records five of its twenty runs (t00 to t04), then its process ends.
		const runOf = new Map(before.claimed.map(w => [w.task, w.run]));
		for (const w of before.claimed.filter(x => x.task < "t05"))
			expect(
				await recordRun(
					before.store,
					w.task,
					w.run,
					{ due: T(0), at: T(2), status: "started", jid: `jid-${w.run}` },
					T(2),
				),
			).toBe(true);

		const after = new Replica("after", await leg.reopen());
		expect((await findExpired(after.store, T(31))).map(t => t._id).sort()).toEqual(ids(20).slice(5));
		await after.pass(T(31));
		expect(sortedTasks(after.takenOver)).toEqual(ids(20).slice(5));
		expect(after.claimed).toEqual([]);
		expect(await after.recordAll(T(32))).toBe(15);
		// Every run of 00:00:00 recorded once, under the id it was claimed with.
		expect(after.takenOver.every(w => w.run === runOf.get(w.task))).toBe(true);
		expect(
			(await all(after.store)).map(t => [t._id, t.count_of_execution, t.last_run.due, t.last_run.jid, t.last_run.at]),
		).toEqual(
			ids(20).map(id => [
				id,
				1,
				new Date("2030-01-01T00:00:00.000Z"),
				`jid-${runOf.get(id)}`,
				id < "t05" ? new Date("2030-01-01T00:00:02.000Z") : new Date("2030-01-01T00:00:32.000Z"),
			]),
		);
		// And the next due time is claimed by the new replica as usual.
		await after.pass(T(60));
		expect(sortedTasks(after.claimed)).toEqual(ids(20));
	});

	it("a run claimed before the upgrade (its lease stored in the run) is moved to `lease` once, then taken over as usual", async () => {
		const leg = await kind.fresh();
		const [b, c] = await replicas(leg, ["b", "c"]);
		await b.store.insertMany([
			{
				...tasks(1, T(60))[0],
				count_of_execution: 1,
				pending: { run: "old-1", due: T(0), by: "old", lease_until: T(30) },
			},
			{
				...tasks(2, T(60))[1],
				count_of_execution: 1,
				pending: { run: "old-2", due: T(0), by: "old", lease_until: T(90) },
			},
		]);
		// Both replicas start at once: each record moves once.
		expect((await Promise.all([b, c].map(r => migrateLeases(r.store, OLD_LEASES)))).reduce((x, y) => x + y, 0)).toBe(2);
		expect((await all(b.store)).map(t => [t._id, t.pending, t.lease])).toEqual([
			["t00", { run: "old-1", due: T(0) }, { owner: "old", until: T(30) }],
			["t01", { run: "old-2", due: T(0) }, { owner: "old", until: T(90) }],
		]);
		expect(await migrateLeases(b.store, OLD_LEASES)).toBe(0);
		// The passed one is taken over with its run id, the live one kept; neither is claimed anew.
		await Promise.all([b, c].map(r => r.pass(T(61))));
		expect([b, c].flatMap(r => r.takenOver).map(w => [w.task, w.run])).toEqual([["t00", "old-1"]]);
		expect([b, c].flatMap(r => r.claimed)).toEqual([]);
	});

	it("looks at the earliest 500 due tasks and 100 dead runs per pass, and at the one falling due first", async () => {
		const leg = await kind.fresh();
		const store = await leg.replicaStore();
		const many = Array.from({ length: 501 }, (_, i) => ({
			_id: `m${String(i).padStart(3, "0")}`,
			status: "scheduled",
			next: T(500 - i),
			count_of_execution: 0,
		}));
		await store.insertMany(many);
		const due = await findDue(store, T(600));
		expect(due).toHaveLength(500);
		expect(due[0]._id).toBe("m500");
		expect(due[499]._id).toBe("m001");
		expect(await findSoonest(store, T(9), 1000)).toMatchObject([
			{ _id: "m490", next: new Date("2030-01-01T00:00:10.000Z") },
		]);
		// Five fall due within 5 s (m486 to m490, stored in that order): the earliest is the one.
		expect(await findSoonest(store, T(9), 5000)).toMatchObject([
			{ _id: "m490", next: new Date("2030-01-01T00:00:10.000Z") },
		]);
		expect(await findSoonest(store, T(500), 1000)).toEqual([]);
		await store.updateMany({}, { $set: { pending: { run: "x", due: T(0) }, lease: { owner: "dead", until: T(1) } } });
		expect(await findExpired(store, T(2))).toHaveLength(100);
		expect(await findExpired(store, T(1))).toEqual([]);
	});
});
