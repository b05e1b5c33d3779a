/**
 * The embedded store's planner (lib/storage/nedb-plan.ts, nedb-index.ts): a filtered page checks only the
 * records its index selects, not the collection; the total and the page agree with a brute-force answer
 * (every record, filtered and sorted) whatever the filter, sort, page and the writes before it.
 */
import Datastore from "@seald-io/nedb";
import fc from "fast-check";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import type { Doc, Filter, SortSpec } from "../../lib/storage/store";
import { BucketIndex } from "../../lib/storage/nedb-index";
import { quickCheck, treeBetween } from "../../lib/storage/nedb-plan";
import { toNedbFilter } from "../../lib/storage/nedb-filter";

import * as nedbModel from "../../lib/storage/nedb-internals";

const STATUSES = ["up", "down", "unknown"];
const GROUPS = ["g0", "g1", "g2", "g3"];
const TAGS = ["all", "edge", "lab"];
const T0 = Date.UTC(2026, 0, 1);

function host(i: number): Doc {
	return {
		_id: `h${String(i).padStart(5, "0")}`,
		name: `host-${(i * 7919) % 10007}`,
		status: i % 500 === 0 ? "down" : STATUSES[i % 2 === 0 ? 0 : 2],
		groups: [GROUPS[i % 4], ...(i % 3 === 0 ? [GROUPS[(i + 1) % 4]] : [])],
		version: `3006.${i % 9}`,
		_soft_deleted: i % 97 === 0,
		_updated: new Date(T0 + i * 1000),
	};
}

/** Each store's own NeDB datastore, for answers from plain NeDB (its own find, no planner). */
const datastores = new WeakMap<NedbStore, Datastore>();

/** What plain NeDB answers for a filter: its own find of the rewritten filter (nedb-filter.ts), no planner. */
function plainFind(store: NedbStore, filter: Filter): Promise<Doc[]> {
	return datastores.get(store)!.findAsync(toNedbFilter(filter)) as Promise<Doc[]>;
}

async function nedb(indexed: boolean, docs: Doc[]): Promise<NedbStore> {
	const db = new Datastore({ inMemoryOnly: true });
	await db.loadDatabaseAsync();
	const store = new NedbStore(db as unknown as NedbDatastore);
	datastores.set(store, db);
	if (indexed) {
		for (const field of ["status", "groups", "version", "_soft_deleted", "tags"]) await store.ensureIndex(field);
		await store.ensureIndex("_updated", { ordered: true });
	}
	await store.insertMany(
		docs.map(d => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, Array.isArray(v) ? [...v] : v]))),
	);
	return store;
}

/** The sort, then `_id`: values of one type per field here (strings or dates). */
function byThen(sort: SortSpec): (x: Doc, y: Doc) => number {
	return (x, y) => {
		for (const [f, dir] of [...sort, ["_id", 1] as [string, 1]]) {
			const u = x[f] instanceof Date ? x[f].getTime() : x[f];
			const v = y[f] instanceof Date ? y[f].getTime() : y[f];
			if (u !== v) return (u < v ? -1 : 1) * dir;
		}
		return 0;
	};
}

describe("the embedded store's planner", () => {
	const HOSTS = 10_000;
	const docs = Array.from({ length: HOSTS }, (_, i) => host(i));
	let indexed: NedbStore;
	let plain: NedbStore;
	beforeAll(async () => {
		indexed = await nedb(true, docs);
		plain = await nedb(false, docs);
	});

	async function checkedBy(store: NedbStore, op: () => Promise<unknown>): Promise<number> {
		const before = store.checked;
		await op();
		return store.checked - before;
	}

	it("checks only the records an indexed equality selects, and the same page as without the index", async () => {
		const filter = { $and: [{ status: "down" }, { _soft_deleted: false }] };
		const down = docs.filter(d => d.status === "down");
		const opts = { sort: [["name", 1]] as SortSpec, skip: 5, limit: 10, exclude: ["groups"] };
		expect(await checkedBy(indexed, () => indexed.findPage(filter, opts))).toBe(down.length);
		expect(await checkedBy(plain, () => plain.findPage(filter, opts))).toBe(HOSTS);
		expect(await indexed.findPage(filter, opts)).toEqual(await plain.findPage(filter, opts));
		expect((await indexed.findPage(filter, opts)).total).toBe(down.filter(d => !d._soft_deleted).length);
	});

	it("pages an indexed filter with other conditions in _id order by walking the _id index: the candidates counted once, a page's worth walked, none put in order", async () => {
		const filter = { $and: [{ status: "unknown" }, { _soft_deleted: { $ne: true } }] };
		const candidates = docs.filter(d => d.status === "unknown");
		const want = candidates.filter(d => !d._soft_deleted);
		const opts = { skip: 50, limit: 25 };
		// The candidates are checked once for the total; the walk passes about (skip + limit) ÷ the share of matches.
		const walkBound = Math.ceil(((opts.skip + opts.limit) * HOSTS) / want.length) * 2;
		const orderedBefore = indexed.ordered;
		const checked = await checkedBy(indexed, () => indexed.findPage(filter, opts));
		expect(checked).toBeGreaterThanOrEqual(candidates.length);
		expect(checked).toBeLessThanOrEqual(candidates.length + walkBound);
		// No match was put in order: the _id index is the order (without the index, every match is).
		expect(indexed.ordered - orderedBefore).toBe(0);
		const plainBefore = plain.ordered;
		const page = await plain.findPage(filter, opts);
		expect(plain.ordered - plainBefore).toBe(want.length);
		expect(page.total).toBe(want.length);
		expect(page.docs.map(d => d._id)).toEqual(
			want
				.map(d => d._id)
				.sort()
				.slice(50, 75),
		);
		expect(await indexed.findPage(filter, opts)).toEqual(page);
		const backwards = await indexed.findPage(filter, { sort: [["_id", -1]], limit: 25 });
		expect(backwards.docs.map(d => d._id)).toEqual(
			want
				.map(d => d._id)
				.sort()
				.reverse()
				.slice(0, 25),
		);
		// A rare value (20 hosts down of 10,000): walking the index would pass most of it; its records are read in
		// the _id order its bucket keeps, none put in order for the read.
		const rare = { $and: [{ status: "down" }, { _soft_deleted: { $ne: true } }] };
		const rareBefore = indexed.ordered;
		const rarePage = await indexed.findPage(rare, { limit: 5 });
		expect(indexed.ordered - rareBefore).toBe(0);
		expect(rarePage).toEqual(await plain.findPage(rare, { limit: 5 }));
	});

	it("pages a rare value from its records kept in _id order: a page's worth read, and still in order after writes", async () => {
		const store = await nedb(true, docs);
		const mirror = await nedb(false, docs);
		const filter = { status: "down" };
		const pages = [
			{ skip: 3, limit: 5 },
			{ sort: [["_id", -1]] as SortSpec, skip: 2, limit: 4 },
			{ skip: 0, limit: 25 },
		];
		const same = async () => {
			for (const opts of pages) {
				const checked = await checkedBy(store, async () =>
					expect(await store.findPage(filter, opts)).toEqual(await mirror.findPage(filter, opts)),
				);
				// Only the records the page reaches are read: not the 10,000 of the _id index, nor the value's 20 ordered.
				expect(checked).toBeLessThanOrEqual(opts.skip + opts.limit);
				expect(checked).toBeGreaterThan(0);
			}
		};
		const orderedBefore = store.ordered;
		await same();
		// Writes through every path NeDB keeps its indexes by: hosts going down (ids before, between and after the
		// others), one coming back up, one changed in another field, one removed, one inserted down.
		for (const s of [store, mirror]) {
			await s.updateMany(
				{ _id: { $in: [docs[1]._id, docs[5_001]._id, docs[9_999]._id] } },
				{ $set: { status: "down" } },
			);
			await s.updateMany({ _id: docs[500]._id }, { $set: { status: "up" } });
			await s.updateMany({ _id: docs[1_000]._id }, { $set: { version: "3007.0" } });
			await s.removeMany({ _id: docs[1_500]._id });
			await s.insertMany([{ ...host(HOSTS + 1), _id: "000-first.example", status: "down" }]);
		}
		await same();
		expect((await store.findPage(filter, { limit: 100 })).total).toBe(
			docs.filter(d => d.status === "down").length + 3 - 2 + 1,
		);
		expect(store.ordered - orderedBefore).toBe(0);
	});

	it("counts a filter whose other conjuncts most records pass from the records they exclude, not from its candidates", async () => {
		// Eve's list of the hosts in a state: the state's bucket gives 5,000 candidates, the soft-delete
		// condition excludes the 104 deleted hosts; the total is 5,000 minus those among the candidates.
		const filter = { $and: [{ status: "unknown" }, { _soft_deleted: false }] };
		const want = docs.filter(d => d.status === "unknown" && !d._soft_deleted);
		const deleted = docs.filter(d => d._soft_deleted).length;
		const opts = { skip: 50, limit: 25 };
		const walkBound = Math.ceil(((opts.skip + opts.limit) * HOSTS) / want.length) * 2;
		const checked = await checkedBy(indexed, () => indexed.findPage(filter, opts));
		expect(checked).toBeLessThanOrEqual(deleted + walkBound);
		const page = await indexed.findPage(filter, opts);
		expect(page.total).toBe(want.length);
		expect(page.docs.map(d => d._id)).toEqual(want.map(d => d._id).slice(50, 75));
		expect(await checkedBy(indexed, () => indexed.count(filter))).toBe(deleted);
		expect(await indexed.count(filter)).toBe(want.length);
		expect(await indexed.count({ $and: [{ status: { $in: ["up", "down"] } }, { _soft_deleted: false }] })).toBe(
			docs.filter(d => d.status !== "unknown" && !d._soft_deleted).length,
		);
	});

	it("counts a condition no index serves beside the soft-delete flag on the candidates once, then takes off the deleted ones that pass it", async () => {
		// A deleted host up: its name fails `$ne`, so it must not be taken off twice; the other deleted ones pass it.
		const deletedUp = docs.find(d => d._soft_deleted && d.status === "up")!;
		for (const cond of [
			{ name: { $ne: deletedUp.name } },
			{ name: { $nin: [deletedUp.name, "nobody"] } },
			{ name: { $ne: "nobody" } },
		] as Filter[]) {
			const filter = { $and: [{ status: "up" }, cond, { _soft_deleted: false }] };
			const want = (await plainFind(plain, filter)).sort(byThen([]));
			const up = docs.filter(d => d.status === "up").length;
			const deleted = docs.filter(d => d._soft_deleted).length;
			const checked = await checkedBy(indexed, () => indexed.findPage(filter, { limit: 25 }));
			// Each candidate read once for the condition, the deleted records once more, then a page's worth walked.
			expect(checked).toBeGreaterThanOrEqual(up + deleted);
			expect(checked).toBeLessThan(up + deleted + 100);
			expect(await indexed.findPage(filter, { limit: 25 })).toEqual({ total: want.length, docs: want.slice(0, 25) });
		}
	});

	it("checks no record against a condition every record holds (the soft-delete flag while nothing is deleted), and checks it again once one is deleted", async () => {
		const few: Doc[] = Array.from({ length: 400 }, (_, i) => ({ ...host(i), _soft_deleted: false }));
		const store = await nedb(true, few);
		const filter = { $and: [{ status: "unknown" }, { _soft_deleted: false }] };
		const unknown = few.filter(d => d.status === "unknown");
		const holder = jest.spyOn(BucketIndex.prototype, "holder");
		try {
			// Which fields a read tested records against, one by one.
			const tested = async (op: () => Promise<unknown>) => {
				holder.mockClear();
				await op();
				return holder.mock.contexts.map(index => (index as BucketIndex).fieldName);
			};
			expect(await tested(() => store.findPage(filter, { limit: 25 }))).not.toContain("_soft_deleted");
			const page = await store.findPage(filter, { limit: 25 });
			expect(page.total).toBe(unknown.length);
			expect(page.docs.map(d => d._id)).toEqual(
				unknown
					.map(d => d._id)
					.sort()
					.slice(0, 25),
			);
			await store.updateMany({ _id: unknown[1]._id }, { $set: { _soft_deleted: true } });
			expect(await tested(() => store.findPage(filter, { limit: 25 }))).toContain("_soft_deleted");
			const after = await store.findPage(filter, { limit: 25 });
			expect(after.total).toBe(unknown.length - 1);
			expect(after.docs.map(d => d._id)).toEqual(
				unknown
					.filter((_, i) => i !== 1)
					.map(d => d._id)
					.sort()
					.slice(0, 25),
			);
		} finally {
			holder.mockRestore();
		}
	});

	it("checks the candidates again once a record leaves the one-key-per-record shape an exclusion count needs", async () => {
		const few = Array.from({ length: 400 }, (_, i) => host(i));
		const store = await nedb(true, few);
		const filter = { $and: [{ status: "unknown" }, { _soft_deleted: false }] };
		const unknown = few.filter(d => d.status === "unknown");
		const deleted = few.filter(d => d._soft_deleted).length;
		expect(await checkedBy(store, () => store.count(filter))).toBe(deleted);
		// One record without the flag: it matches neither `false` nor `true`, so excluding `true` would count it.
		await store.updateMany({ _id: unknown[0]._id }, { $unset: { _soft_deleted: true } });
		expect(await checkedBy(store, () => store.count(filter))).toBe(unknown.length);
		expect(await store.count(filter)).toBe(unknown.filter(d => !d._soft_deleted).length - 1);
		await store.updateMany({ _id: unknown[0]._id }, { $set: { _soft_deleted: false } });
		expect(await checkedBy(store, () => store.count(filter))).toBe(deleted);
		expect(await store.count(filter)).toBe(unknown.filter(d => !d._soft_deleted).length);
	});

	it("answers an unfiltered list from the indexes: its total counted by the index, its page read in _id order, O(page)", async () => {
		const filter = { _soft_deleted: false };
		const live = docs.filter(d => !d._soft_deleted).map(d => d._id);
		// 25 records and the deleted ones among them (one in 97) are read; not 10,000
		expect(await checkedBy(indexed, () => indexed.findPage(filter, { limit: 25 }))).toBeLessThanOrEqual(26);
		const first = await indexed.findPage(filter, { limit: 25 });
		expect(first.total).toBe(live.length);
		expect(first.docs.map(d => d._id)).toEqual(live.slice(0, 25));
		const last = await indexed.findPage(filter, { sort: [["_id", -1]], skip: 25, limit: 25 });
		expect(last.docs.map(d => d._id)).toEqual([...live].reverse().slice(25, 50));
		expect(await checkedBy(plain, () => plain.findPage(filter, { limit: 25 }))).toBe(HOSTS);
	});

	it("counts and lists a value most records' lists hold beside a cheaper condition: each value of a list is a key of its own", async () => {
		// Issue 44: `count({status: "up", groups: "all"})` answered 500 of 600 when a list was taken for one key of
		// the bucket index (the hosts in "all" and "web" counted as holding only "web", so excluded).
		const fleet: Doc[] = Array.from({ length: 1_000 }, (_, i) => ({
			_id: `h${String(i).padStart(4, "0")}`,
			status: i % 5 < 3 ? "up" : "down",
			groups: i % 10 === 1 ? ["all", "web"] : i % 100 === 9 ? ["web"] : ["all"],
		}));
		const ids = (docs: Doc[]) => docs.map(d => d._id as string).sort();
		const expectSame = async (store: NedbStore, filter: Filter, want: Doc[]) => {
			expect(await store.count(filter)).toBe(want.length);
			expect(ids(await store.find(filter))).toEqual(ids(want));
			const page = await store.findPage(filter, { skip: 10, limit: 20 });
			expect(page.total).toBe(want.length);
			expect(page.docs.map(d => d._id)).toEqual(ids(want).slice(10, 30));
		};
		const store = await nedb(true, fleet);
		const upInAll = fleet.filter(d => d.status === "up" && d.groups.includes("all"));
		expect(upInAll).toHaveLength(600);
		await expectSame(store, { $and: [{ status: "up" }, { groups: "all" }] }, upInAll);
		await expectSame(store, { status: "up", groups: { $in: ["all"] } }, upInAll);
		await expectSame(
			store,
			{ $and: [{ status: "down" }, { groups: { $eq: "all" } }] },
			fleet.filter(d => d.status === "down" && d.groups.includes("all")),
		);
		// The list's other value is a key too (a list is not keyed by its first value).
		await expectSame(
			store,
			{ $and: [{ status: "up" }, { groups: "web" }] },
			fleet.filter(d => d.status === "up" && d.groups.includes("web")),
		);
		// Every list holds "all" but some hold nothing: "all" is not every record's (an empty list holds no key).
		const holdAll = await nedb(
			true,
			fleet.map((d, i) => ({ ...d, groups: i % 50 === 2 ? [] : ["all"] })),
		);
		const upHoldingAll = fleet.filter((d, i) => d.status === "up" && i % 50 !== 2);
		expect(upHoldingAll).toHaveLength(580);
		await expectSame(holdAll, { $and: [{ status: "up" }, { groups: "all" }] }, upHoldingAll);
	});

	it("takes the most selective index of several, and a range from NeDB's ordered index", async () => {
		const since = new Date(T0 + (HOSTS - 40) * 1000);
		const filter = { groups: { $in: ["g1", "g2"] }, _updated: { $gte: since } };
		// the _updated range selects 40 of 10,000; the groups $in most of them
		expect(await checkedBy(indexed, () => indexed.count(filter))).toBeLessThanOrEqual(40);
		expect(await indexed.count(filter)).toBe(
			docs.filter(d => d._updated >= since && d.groups.some((g: string) => g === "g1" || g === "g2")).length,
		);
	});

	it("pages in _id order from an _id (a sweep's `_id > last seen`) by reading the _id index from there: a page's worth, not the rest of the collection", async () => {
		const ids = docs.map(d => d._id as string).sort();
		const after = ids[5_000];
		const page = await checkedBy(indexed, async () =>
			expect(
				(await indexed.find({ _id: { $gt: after } }, { sort: [["_id", 1]], limit: 100, only: ["_id"] })).map(
					d => d._id,
				),
			).toEqual(ids.slice(5_001, 5_101)),
		);
		// Every record read is on the page: not the 4,999 past the id, and no record put in order.
		expect(page).toBe(100);
		// The sweep's first page, with no id yet: the first records of the index, not the whole collection.
		expect(
			await checkedBy(indexed, async () =>
				expect((await indexed.find({}, { sort: [["_id", 1]], limit: 100, only: ["_id"] })).map(d => d._id)).toEqual(
					ids.slice(0, 100),
				),
			),
		).toBe(100);
		// Walking down from an id, with other conditions (each record read is checked), and an end to the range.
		const up = docs
			.filter(d => d.status === "up" && (d._id as string) < after)
			.map(d => d._id as string)
			.sort()
			.reverse();
		expect(
			(
				await indexed.find(
					{ $and: [{ _id: { $lt: after } }, { status: "up" }] },
					{ sort: [["_id", -1]], skip: 3, limit: 10, only: ["_id"] },
				)
			).map(d => d._id),
		).toEqual(up.slice(3, 13));
		const between = await checkedBy(indexed, async () =>
			expect(
				(await indexed.find({ _id: { $gte: ids[100], $lt: ids[110] } }, { limit: 50, only: ["_id"] })).map(d => d._id),
			).toEqual(ids.slice(100, 110)),
		);
		expect(between).toBeLessThanOrEqual(11);
		// A flag most records hold beside the range (a sweep of the hosts not deleted): told by its bucket while
		// walking, still about a page's worth read.
		const kept = docs
			.filter(d => !d._soft_deleted && (d._id as string) > after)
			.map(d => d._id as string)
			.sort();
		const flagged = await checkedBy(indexed, async () =>
			expect(
				(
					await indexed.find(
						{ $and: [{ _soft_deleted: false }, { _id: { $gt: after } }] },
						{ sort: [["_id", 1]], limit: 100, only: ["_id"] },
					)
				).map(d => d._id),
			).toEqual(kept.slice(0, 100)),
		);
		expect(flagged).toBeLessThanOrEqual(102);
		// Ids listed, the last 2,000: the listed records are read, not the 8,000 before them each tested against the list.
		const listed = ids.slice(-2_000);
		const inList = await checkedBy(indexed, async () =>
			expect((await indexed.find({ _id: { $in: listed } }, { limit: 10, only: ["_id"] })).map(d => d._id)).toEqual(
				listed.slice(0, 10),
			),
		);
		expect(inList).toBe(listed.length);
		// A rare value beside the range: its few records are checked instead of walking past the others.
		const down = docs
			.filter(d => d.status === "down" && (d._id as string) > ids[10])
			.map(d => d._id as string)
			.sort();
		const rare = await checkedBy(indexed, async () =>
			expect(
				(
					await indexed.find({ $and: [{ status: "down" }, { _id: { $gt: ids[10] } }] }, { limit: 10, only: ["_id"] })
				).map(d => d._id),
			).toEqual(down.slice(0, 10)),
		);
		expect(rare).toBe(docs.filter(d => d.status === "down").length);
	});

	it("pages in _id order from an _id as a full scan does, for any bound, direction, condition and page, across writes", async () => {
		const small = Array.from({ length: 300 }, (_, i) => host(i * 31));
		const a = await nedb(true, small);
		const ids = small.map(d => d._id as string);
		const idArb = fc.oneof(fc.constantFrom(...ids), fc.constantFrom("", "h", "h0", "h1", "h5", "zz"));
		const rangeArb = fc.record({
			lower: fc.option(fc.record({ op: fc.constantFrom("$gt", "$gte"), id: idArb }), { nil: undefined }),
			upper: fc.option(fc.record({ op: fc.constantFrom("$lt", "$lte"), id: idArb }), { nil: undefined }),
		});
		const otherArb = fc.option(
			fc.oneof(
				fc.record({ status: fc.constantFrom(...STATUSES) }),
				fc.record({ groups: fc.constantFrom(...GROUPS) }),
				fc.record({ name: fc.record({ $gt: fc.constantFrom("host-3", "host-6") }) }),
			),
			{ nil: undefined },
		);
		const writeArb = fc.record({
			at: fc.integer({ min: 0, max: 299 }),
			status: fc.constantFrom(...STATUSES),
			remove: fc.boolean(),
		});
		await fc.assert(
			fc.asyncProperty(
				rangeArb,
				otherArb,
				fc.constantFrom<1 | -1>(1, -1),
				fc.nat(20),
				fc.integer({ min: 1, max: 40 }),
				fc.array(writeArb, { maxLength: 3 }),
				async (range, other, dir, skip, limit, writes) => {
					for (const w of writes) {
						if (w.remove) await a.removeMany({ _id: ids[w.at] });
						else await a.updateMany({ _id: ids[w.at] }, { $set: { status: w.status } });
					}
					const idCond: Record<string, string> = {};
					if (range.lower) idCond[range.lower.op] = range.lower.id;
					if (range.upper) idCond[range.upper.op] = range.upper.id;
					const conds: Filter[] = [...(Object.keys(idCond).length ? [{ _id: idCond }] : []), ...(other ? [other] : [])];
					const filter: Filter = conds.length === 0 ? {} : conds.length === 1 ? conds[0] : { $and: conds };
					// The oracle: every match by plain NeDB over the whole collection, ordered here.
					const all = (await plainFind(a, filter)).map(d => d._id as string).sort();
					if (dir === -1) all.reverse();
					expect((await a.find(filter, { sort: [["_id", dir]], skip, limit })).map(d => d._id)).toEqual(
						all.slice(skip, skip + limit),
					);
				},
			),
			{ numRuns: 200 },
		);
	});

	it("counts and pages the same as a full scan for any filter, sort and page, across writes", async () => {
		// `tags`: a value nearly every record's list holds ("all"), some lists holding another beside it, so that a
		// condition on "all" is dominant and another one the cheaper source (issue 44).
		const small = Array.from(
			{ length: 300 },
			(_, i): Doc => ({ ...host(i * 31), tags: i % 9 === 0 ? ["all", TAGS[1 + (i % 2)]] : ["all"] }),
		);
		const a = await nedb(true, small);
		const b = await nedb(false, small);
		const scalarCond = fc.oneof(
			fc.record({ status: fc.constantFrom(...STATUSES) }),
			fc.record({ status: fc.record({ $in: fc.subarray(STATUSES) }) }),
			fc.record({ groups: fc.constantFrom(...GROUPS) }),
			fc.record({ groups: fc.record({ $in: fc.subarray(GROUPS) }) }),
			fc.record({
				version: fc.record({ $gte: fc.constantFrom("3006.2", "3006.5"), $lt: fc.constantFrom("3006.4", "3006.8") }),
			}),
			fc.record({ _soft_deleted: fc.boolean() }),
			fc.record({
				_updated: fc.record({ $lt: fc.integer({ min: 0, max: 10_000 }).map(s => new Date(T0 + s * 1000)) }),
			}),
			fc.record({ name: fc.record({ $gt: fc.constantFrom("host-3", "host-6") }) }),
			fc.record({ tags: fc.constantFrom(...TAGS) }),
			fc.record({ tags: fc.oneof(fc.constant("all"), fc.record({ $in: fc.subarray(TAGS, { minLength: 1 }) })) }),
			// Conditions no index answers, checked on the candidates (quickCheck, else NeDB's matcher): the unindexed path.
			fc.record({ name: fc.record({ $ne: fc.constantFrom("host-0", "host-217", "nobody") }) }),
			fc.record({ status: fc.record({ $ne: fc.constantFrom(...STATUSES, null) }) }),
			fc.record({ tags: fc.record({ $ne: fc.constantFrom(...TAGS) }) }),
			fc.record({ name: fc.record({ $nin: fc.subarray(["host-0", "host-217", "host-434", "x"]) }) }),
			fc.record({ groups: fc.record({ $nin: fc.subarray(GROUPS) }) }),
			fc.record({
				version: fc.record({
					$in: fc.subarray(["3006.1", "3006.4", "3006.8", "x"]),
					$ne: fc.constantFrom("3006.4", "x"),
				}),
			}),
			fc.record({ _soft_deleted: fc.record({ $exists: fc.boolean() }) }),
			fc.record({ _soft_deleted: fc.record({ $eq: fc.constantFrom(true, false, null) }) }),
			fc.record({
				name: fc.record({ $gte: fc.constantFrom("host-3", "host-6"), $ne: fc.constantFrom("host-3017", "host-6") }),
			}),
			fc.constantFrom<Filter>(
				{ $or: [{ status: "down" }, { name: { $lt: "host-2" } }] },
				{ $nor: [{ status: "up" }, { groups: "g1" }] },
				{ $or: [{ tags: "edge" }, { "grain.os": "x" }] },
				{ name: { $all: ["host-1"] } },
			),
		);
		// A condition most records pass beside a cheaper one: the total counted from the records it excludes.
		const dominated = fc
			.tuple(
				fc.oneof(
					fc.record({ status: fc.constantFrom(...STATUSES) }),
					fc.record({ groups: fc.constantFrom(...GROUPS) }),
					fc.record({ _soft_deleted: fc.constant(false) }),
				),
				fc.oneof(
					fc.constant<Filter>({ tags: "all" }),
					fc.constant<Filter>({ tags: { $in: ["all"] } }),
					fc.constant<Filter>({ _soft_deleted: false }),
				),
				fc.array(scalarCond, { maxLength: 1 }),
			)
			.map(([cheap, most, more]) => [cheap, most, ...more]);
		const filterArb = fc
			.oneof({ arbitrary: fc.array(scalarCond, { maxLength: 3 }), weight: 2 }, { arbitrary: dominated, weight: 1 })
			.map((conds): Filter => (conds.length === 0 ? {} : conds.length === 1 ? conds[0] : { $and: conds }));
		const sortArb = fc
			.subarray(["name", "status", "_updated", "version"])
			.chain(fields =>
				fc.tuple(...fields.map(f => fc.constantFrom<[string, 1 | -1]>([f, 1], [f, -1]))),
			) as fc.Arbitrary<SortSpec>;
		let clock = 20_000;
		// `flag`: a write may leave a record without its soft-delete flag, or with a list there: that index then no
		// longer holds one key per record, and its conjunct must be checked on the records, not counted by exclusion.
		const writeArb = fc.record({
			at: fc.integer({ min: 0, max: 299 }),
			status: fc.constantFrom(...STATUSES),
			group: fc.constantFrom(...GROUPS),
			remove: fc.boolean(),
			flag: fc.constantFrom("keep", "keep", "keep", "keep", "unset", "list", "restore"),
			// `tags`: a value added to a record's list, its list emptied (it holds no key), every list back to "all" alone
			// (one key each), or back to the lists the records started with.
			tags: fc.constantFrom("keep", "keep", "keep", "add", "empty", "reset", "restart"),
			tag: fc.constantFrom(...TAGS),
		});
		await fc.assert(
			fc.asyncProperty(
				filterArb,
				sortArb,
				fc.nat(40),
				fc.integer({ min: 1, max: 30 }),
				fc.array(writeArb, { maxLength: 3 }),
				async (filter, sort, skip, limit, writes) => {
					for (const w of writes) {
						const id = small[w.at]._id;
						const now = new Date(T0 + ++clock * 1000);
						for (const s of [a, b]) {
							if (w.remove) await s.removeMany({ _id: id });
							else
								await s.updateMany(
									{ _id: id },
									{ $set: { status: w.status, _updated: now }, $addToSet: { groups: w.group } },
								);
							if (w.flag === "unset") await s.updateMany({ _id: id }, { $unset: { _soft_deleted: true } });
							if (w.flag === "list") await s.updateMany({ _id: id }, { $set: { _soft_deleted: [false, true] } });
							if (w.flag === "restore") await s.updateMany({}, { $set: { _soft_deleted: false } });
							if (w.tags === "add") await s.updateMany({ _id: id }, { $addToSet: { tags: w.tag } });
							if (w.tags === "empty") await s.updateMany({ _id: id }, { $set: { tags: [] } });
							if (w.tags === "reset" || w.tags === "restart") await s.updateMany({}, { $set: { tags: ["all"] } });
							if (w.tags === "restart")
								for (const tag of TAGS.slice(1))
									await s.updateMany(
										{ _id: { $in: small.filter(d => d.tags.includes(tag)).map(d => d._id) } },
										{ $set: { tags: ["all", tag] } },
									);
						}
					}
					// The oracle: every match by plain NeDB (its own find of the rewritten filter), sorted here, then the page.
					const all = await plainFind(b, filter);
					const want = { total: all.length, docs: [...all].sort(byThen(sort)).slice(skip, skip + limit) };
					expect(await a.findPage(filter, { sort, skip, limit })).toEqual(want);
					expect(await b.findPage(filter, { sort, skip, limit })).toEqual(want);
					expect(await a.count(filter)).toBe(want.total);
				},
			),
			{ numRuns: 150 },
		);
	});

	it("checks an equality or a range on a field as NeDB's matcher does, whatever the record holds there", () => {
		const D = (s: number) => new Date(T0 + s * 1000);
		// Values of every kind a record can hold, the condition's own type among them.
		const scalar = fc.oneof(
			fc.constantFrom("a", "b", "c", "", "B"),
			fc.integer({ min: -3, max: 3 }),
			fc.constantFrom(0.5, -0, NaN),
			fc.boolean(),
			fc.integer({ min: -2, max: 2 }).map(D),
			fc.constant(null),
			fc.constant(new Date(NaN)),
		);
		const value = fc.oneof(
			scalar,
			fc.array(scalar, { maxLength: 3 }),
			fc.record({ x: scalar }).map(r => ({ ...r })),
			fc.constant(undefined),
		);
		const bound = fc.oneof(
			fc.constantFrom("a", "b", "B"),
			fc.integer({ min: -3, max: 3 }),
			fc.integer({ min: -2, max: 2 }).map(D),
		);
		const ops = fc.subarray(["$gt", "$gte", "$lt", "$lte"], { minLength: 1 });
		const cond = fc.oneof(
			fc
				.oneof(fc.constantFrom("a", "b", ""), fc.integer({ min: -3, max: 3 }), fc.boolean())
				.map(v => ({ f: v }) as Filter),
			fc
				.tuple(ops, bound)
				.chain(([os, b]) =>
					fc.tuple(
						...os.map(() =>
							typeof b === "string"
								? fc.constantFrom("a", "b", "B", "")
								: typeof b === "number"
									? fc.integer({ min: -3, max: 3 })
									: fc.integer({ min: -2, max: 2 }).map(D),
						),
					),
				)
				.map(bs => bs),
		);
		let checked = 0;
		fc.assert(
			fc.property(cond, fc.subarray(["$gt", "$gte", "$lt", "$lte"], { minLength: 1 }), value, (c, os, v) => {
				const filter: Filter = Array.isArray(c)
					? { f: Object.fromEntries(os.slice(0, c.length).map((op, i) => [op, c[i]])) }
					: c;
				if (Array.isArray(c) && Object.keys(filter.f as object).length === 0) return;
				const check = quickCheck(filter);
				expect(check).not.toBeNull();
				const doc: Doc = v === undefined ? { _id: "x" } : { _id: "x", f: v };
				expect(check!(doc)).toBe(nedbModel.match(doc, toNedbFilter(filter)));
				checked++;
			}),
			{ numRuns: 3000 },
		);
		expect(checked).toBeGreaterThan(2000);
		// Conditions it leaves to the matcher: a path, an operator other than a bound, bounds of two types, null.
		for (const f of [
			{ "a.b": 1 },
			{ f: { $ne: [1] } },
			{ f: { $gt: 1, $lt: "z" } },
			{ f: null },
			{ f: { $gt: new Date(NaN) } },
			{ $or: [{ "a.b": 1 }] },
			{ f: { $in: [null] } },
			{ f: { $all: ["a"] } },
			{ f: { $ne: 1, $size: 1 } },
		] as Filter[])
			expect(quickCheck(f)).toBeNull();
	});

	it("checks $eq, $ne, $in, $nin, $exists (beside bounds or not), $or and $nor as NeDB's matcher does, whatever the record holds there", () => {
		const D = (s: number) => new Date(T0 + s * 1000);
		const scalar = fc.oneof(
			fc.constantFrom("a", "b", "", "B"),
			fc.integer({ min: -2, max: 2 }),
			fc.constantFrom(0.5, -0, NaN),
			fc.boolean(),
			fc.integer({ min: -1, max: 1 }).map(D),
			fc.constant(null),
		);
		const value = fc.oneof(
			scalar,
			fc.array(scalar, { maxLength: 3 }),
			fc.record({ x: scalar }).map(r => ({ ...r })),
			fc.constant(undefined),
		);
		const prim = fc.oneof(
			fc.constantFrom("a", "b", ""),
			fc.integer({ min: -2, max: 2 }),
			fc.constantFrom(0, -0),
			fc.boolean(),
		);
		// 40 strings: the rewrite matches such a list through a Set (`$where`).
		const long = Array.from({ length: 40 }, (_, i) => (i === 7 ? "a" : `s${i}`));
		const list = fc.oneof(fc.array(prim, { maxLength: 4 }), fc.constant(long));
		// One operator, or two (most records fail a conjunction of many, which would tell nothing).
		const op = fc.oneof(
			fc.record({ $eq: fc.oneof(prim, fc.constant(null)) }),
			fc.record({ $ne: fc.oneof(prim, fc.constant(null)) }),
			fc.record({ $in: list }),
			fc.record({ $nin: list }),
			fc.record({ $exists: fc.constantFrom(true, false, 0, 1, "", "x") }),
			fc.record({ $gt: fc.constantFrom("a", "B") }),
			fc.record({ $lte: fc.constantFrom("b", "") }),
		);
		const fieldOps = fc
			.array(op, { minLength: 1, maxLength: 2 })
			.map(ops => Object.assign({}, ...ops) as Record<string, unknown>);
		const single = fieldOps.map(ops => ({ f: ops }) as Filter);
		const cond = fc.oneof(
			single,
			fc
				.tuple(
					fc.constantFrom("$or", "$nor"),
					fc.array(
						fc.oneof(
							single,
							prim.map(v => ({ f: v }) as Filter),
							fc.constant<Filter>({ g: "a" }),
						),
						{ minLength: 1, maxLength: 3 },
					),
				)
				.map(([op, members]) => ({ [op]: members }) as Filter),
		);
		let checked = 0;
		fc.assert(
			fc.property(cond, value, value, (filter, v, w) => {
				const check = quickCheck(filter);
				expect(check).not.toBeNull();
				const doc: Doc = { _id: "x", ...(v === undefined ? {} : { f: v }), ...(w === undefined ? {} : { g: w }) };
				expect(check!(doc)).toBe(nedbModel.match(doc, toNedbFilter(filter)));
				checked++;
			}),
			{ numRuns: 5000 },
		);
		expect(checked).toBe(5000);
	});

	it("lists a range of a tree index as NeDB's getBetweenBounds does: the same records in the same order, whatever the keys and bounds", () => {
		const Index = nedbModel.NedbIndex;
		const D = (n: number) => new Date(Date.UTC(2026, 0, 1 + n));
		// Keys of every kind NeDB's tree orders, lists among them (a record under each of its values), and none.
		const key = fc.oneof(
			fc.integer({ min: -5, max: 5 }),
			fc.constantFrom("a", "b", "c", "ab", "Z"),
			fc.integer({ min: 0, max: 4 }).map(D),
			fc.boolean(),
			fc.constant(null),
			fc.constant(undefined),
		);
		const keys = fc.array(fc.oneof(key, fc.array(key, { maxLength: 3 })), { maxLength: 120 });
		const bound = fc.oneof(
			fc.integer({ min: -6, max: 6 }),
			fc.constantFrom("a", "ab", "b", "c", "d"),
			fc.integer({ min: -1, max: 5 }).map(D),
			fc.boolean(),
			fc.constant(null),
		);
		const bounds = fc
			.record({ $gt: bound, $gte: bound, $lt: bound, $lte: bound }, { requiredKeys: [] })
			.map(b => ({ ...b }));
		fc.assert(
			fc.property(
				keys,
				fc.array(bounds, { minLength: 1, maxLength: 6 }),
				fc.boolean(),
				fc.nat(40),
				(ks, qs, sparse, drop) => {
					const index = new Index({ fieldName: "k", sparse });
					const recs = ks.map((k, i): Doc => (k === undefined ? { _id: `r${i}` } : { _id: `r${i}`, k }));
					for (const r of recs) index.insert(r);
					// Removals leave the tree rebalanced, not as it was built.
					for (const r of recs.slice(0, drop % (recs.length + 1))) index.remove(r);
					for (const q of qs) expect(treeBetween(index, q)).toEqual(index.getBetweenBounds(q));
				},
			),
			{ numRuns: 400 },
		);
	});
});
