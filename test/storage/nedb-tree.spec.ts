/**
 * lib/storage/nedb-tree.ts: a tree index filled in one sorted pass is the tree NeDB's own inserts make: the
 * same records in the same order, the same answers to equality and range lookups, a valid AVL tree, and
 * NeDB's own error for a repeated key of a unique index. A record removed from a key others share leaves the
 * tree as NeDB's removal leaves it, without a copy of the others.
 */
import fc from "fast-check";
import { isTreeIndex, quickRemovals, resetTree, type TreeIndex, type TreeNode } from "../../lib/storage/nedb-tree";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { NedbIndex } from "../../lib/storage/nedb-internals";

const Index = NedbIndex as unknown as new (o: {
	fieldName: string;
	unique?: boolean;
	sparse?: boolean;
}) => TreeIndex & {
	getAll(): Array<Record<string, unknown>>;
	getMatching(v: unknown): Array<Record<string, unknown>>;
	getBetweenBounds(q: Record<string, unknown>): Array<Record<string, unknown>>;
	insert(d: unknown): void;
	remove(d: unknown): void;
	update(a: unknown, b?: unknown): void;
	tree: { tree: TreeNode; checkIsAVLT(): void };
};
const Datastore = require("@seald-io/nedb");

/** A tree's shape: each node's key, its records' ids in order, its children (an emptied key keeps its node). */
function shape(node: TreeNode | null): unknown {
	if (node === null) return null;
	return { key: node.key, ids: node.data.map(d => d._id), left: shape(node.left), right: shape(node.right) };
}

type Doc = Record<string, unknown>;

/** Keys of every kind NeDB orders: numbers, strings, dates, booleans, null, and none at all. */
const keyArb = fc.oneof(
	fc.integer({ min: -5, max: 5 }),
	fc.constantFrom("a", "b", "c", "ab", "é", "Z"),
	fc.integer({ min: 0, max: 4 }).map(n => new Date(Date.UTC(2026, 0, 1 + n))),
	fc.boolean(),
	fc.constant(null),
	fc.constant(undefined),
);

const docsArb = fc
	.array(keyArb, { maxLength: 80 })
	.map(keys => keys.map((k, i): Doc => (k === undefined ? { _id: `r${i}` } : { _id: `r${i}`, k })));

function both(opts: { unique?: boolean; sparse?: boolean }, docs: Doc[]) {
	const theirs = new Index({ fieldName: "k", ...opts });
	const ours = new Index({ fieldName: "k", ...opts });
	let theirError: unknown = null;
	let ourError: unknown = null;
	try {
		theirs.reset(docs);
	} catch (e) {
		theirError = e;
	}
	try {
		resetTree(ours, docs);
	} catch (e) {
		ourError = e;
	}
	return { theirs, ours, theirError, ourError };
}

describe("NeDB's tree index filled in one pass", () => {
	it("is the tree NeDB's inserts make: same records in the same order, same lookups, a valid AVL tree", () => {
		fc.assert(
			fc.property(docsArb, fc.boolean(), (docs, sparse) => {
				const { theirs, ours, ourError } = both({ sparse }, docs);
				expect(ourError).toBeNull();
				expect(ours.getAll()).toEqual(theirs.getAll());
				ours.tree.checkIsAVLT();
				for (const k of [0, 3, "a", "ab", null, true, new Date(Date.UTC(2026, 0, 2))])
					expect(ours.getMatching(k)).toEqual(theirs.getMatching(k));
				for (const q of [{ $gte: 0 }, { $lt: "b" }, { $gt: -2, $lte: 4 }, { $gte: new Date(Date.UTC(2026, 0, 2)) }])
					expect(ours.getBetweenBounds(q)).toEqual(theirs.getBetweenBounds(q));
				// NeDB keeps it current from then on: a removal and an insert leave it as NeDB's.
				if (docs.length) {
					ours.remove(docs[0]);
					theirs.remove(docs[0]);
				}
				const extra = { _id: "extra", k: 2 };
				ours.insert(extra);
				theirs.insert(extra);
				expect(ours.getAll()).toEqual(theirs.getAll());
				ours.tree.checkIsAVLT();
			}),
			{ numRuns: 300 },
		);
	});

	it("keeps a record whose key is a list under each of its values, as NeDB does", () => {
		const docs: Doc[] = [
			{ _id: "a", k: [3, 1, 3] },
			{ _id: "b", k: 2 },
			{ _id: "c", k: [] },
			{ _id: "d", k: 1 },
		];
		const { theirs, ours } = both({}, docs);
		expect(ours.getAll()).toEqual(theirs.getAll());
		expect(ours.getMatching(1).map(d => d._id)).toEqual(["a", "d"]);
		expect(ours.getMatching(3).map(d => d._id)).toEqual(["a"]);
	});

	it("refuses a repeated key of a unique index with NeDB's own error, and leaves it empty as NeDB's load then does", () => {
		const docs: Doc[] = [
			{ _id: "a", k: 1 },
			{ _id: "b", k: 2 },
			{ _id: "c", k: 1 },
		];
		const { theirError, ourError } = both({ unique: true }, docs);
		expect(theirError).toMatchObject({ errorType: "uniqueViolated", key: 1 });
		expect(ourError).toMatchObject({ errorType: "uniqueViolated", key: 1 });
		// Distinct keys load as NeDB's.
		const fine = both({ unique: true }, docs.slice(0, 2));
		expect(fine.ourError).toBeNull();
		expect(fine.ours.getAll()).toEqual(fine.theirs.getAll());
	});

	it("leaves an index with no tree (a bucket index) to its own reset", () => {
		expect(isTreeIndex(new Index({ fieldName: "k" }))).toBe(true);
		expect(isTreeIndex({ reset: () => undefined })).toBe(false);
		expect(isTreeIndex(null)).toBe(false);
	});

	it("removes a record from a key others share as NeDB does: the same tree, records in the same order, after any inserts, updates and removals", () => {
		type Op = { kind: "insert" | "remove" | "update"; at: number; key: unknown };
		// Few keys, so that many records share each: a removal from the middle of a key's list is common.
		const sharedKeyArb = fc.oneof(
			fc.constantFrom<unknown>(1, 2, "a", null, new Date(Date.UTC(2026, 0, 1)), [1, 2, 1]),
			fc.constant(undefined),
		);
		const opArb = fc.record({
			kind: fc.constantFrom<Op["kind"]>("insert", "insert", "remove", "update"),
			at: fc.nat(),
			key: sharedKeyArb,
		});
		fc.assert(
			fc.property(fc.array(opArb, { maxLength: 120 }), fc.boolean(), (ops, sparse) => {
				const theirs = new Index({ fieldName: "k", sparse });
				const ours = new Index({ fieldName: "k", sparse });
				quickRemovals(ours);
				const live: Doc[] = [];
				let n = 0;
				const make = (key: unknown): Doc => (key === undefined ? { _id: `r${n++}` } : { _id: `r${n++}`, k: key });
				for (const op of ops) {
					if (op.kind === "insert" || live.length === 0) {
						const d = make(op.key);
						theirs.insert(d);
						ours.insert(d);
						live.push(d);
					} else if (op.kind === "remove") {
						const [d] = live.splice(op.at % live.length, 1);
						theirs.remove(d);
						ours.remove(d);
					} else {
						// NeDB's update: the old record out of every index, the new one (a new object) in.
						const at = op.at % live.length;
						const next = { ...make(op.key), _id: live[at]._id };
						theirs.update(live[at], next);
						ours.update(live[at], next);
						live[at] = next;
					}
					expect(shape(ours.tree.tree)).toEqual(shape(theirs.tree.tree));
				}
				expect(ours.getAll()).toEqual(theirs.getAll());
				ours.tree.checkIsAVLT();
			}),
			{ numRuns: 300 },
		);
	});

	it("updates one of a thousand records sharing a key without comparing it with the others (the embedded store's ordered indexes)", async () => {
		const db = new Datastore();
		const store = new NedbStore(db as unknown as NedbDatastore);
		await store.ensureIndex("next", { ordered: true });
		await store.insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: `t${i}`, next: null, runs: 0 })));
		const node = (db.indexes.next as TreeIndex).tree.tree as TreeNode & {
			checkValueEquality(a: unknown, b: unknown): boolean;
		};
		expect(node.data).toHaveLength(1000);
		let compared = 0;
		const same = node.checkValueEquality;
		node.checkValueEquality = (a, b) => (compared++, same(a, b));
		expect(await store.updateMany({ _id: "t500" }, { $set: { runs: 1 } })).toBe(1);
		expect(compared).toBe(0);
		// Still under its key, last as NeDB's update leaves it; found by the index.
		expect(node.data.map(d => d._id).slice(-2)).toEqual(["t999", "t500"]);
		expect((await store.find({ next: null, runs: 1 })).map(d => d._id)).toEqual(["t500"]);
	});
});
