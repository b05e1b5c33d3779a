/**
 * lib/storage/nedb-tree.ts: a tree index filled in one sorted pass is the tree NeDB's own inserts make: the
 * same records in the same order, the same answers to equality and range lookups, a valid AVL tree, and
 * NeDB's own error for a repeated key of a unique index.
 */
import fc from "fast-check";
import { isTreeIndex, resetTree, type TreeIndex } from "../../lib/storage/nedb-tree";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Index = require("@seald-io/nedb/lib/indexes.js") as new (o: { fieldName: string; unique?: boolean; sparse?: boolean }) => TreeIndex & {
	getAll(): Array<Record<string, unknown>>;
	getMatching(v: unknown): Array<Record<string, unknown>>;
	getBetweenBounds(q: Record<string, unknown>): Array<Record<string, unknown>>;
	insert(d: unknown): void;
	remove(d: unknown): void;
	tree: { tree: unknown; checkIsAVLT(): void };
};

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

const docsArb = fc.array(keyArb, { maxLength: 80 }).map(keys => keys.map((k, i): Doc => (k === undefined ? { _id: `r${i}` } : { _id: `r${i}`, k })));

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
				for (const k of [0, 3, "a", "ab", null, true, new Date(Date.UTC(2026, 0, 2))]) expect(ours.getMatching(k)).toEqual(theirs.getMatching(k));
				for (const q of [{ $gte: 0 }, { $lt: "b" }, { $gt: -2, $lte: 4 }, { $gte: new Date(Date.UTC(2026, 0, 2)) }]) expect(ours.getBetweenBounds(q)).toEqual(theirs.getBetweenBounds(q));
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
});
