/**
 * lib/storage/nedb-index.ts: the bucket index answers every question the planner and NeDB ask of it as NeDB's
 * own matcher answers it over the records it holds, whatever the writes before (inserts, removals, updates and
 * their rollbacks, resets): which records hold a value (each value of a list separately), how many, which lie
 * within bounds, which are kept in _id order, and which a value's complement excludes when every record holds
 * exactly one key.
 */
import fc from "fast-check";
import { BucketIndex } from "../../lib/storage/nedb-index";

import * as model from "../../lib/storage/nedb-internals";

type Doc = Record<string, unknown>;

const D = (n: number) => new Date(Date.UTC(2026, 0, 1 + n));
/** The values a query asks for: distinct under NeDB's equality (strings that read like other kinds' keys among them). */
const VALUES: unknown[] = ["a", "b", "1", "true", "n:1", "b:true", "d:0", "", 1, 2, 0, -1.5, true, false, D(0), D(1)];
/** What a record holds: those, lists of them (repeats and empty lists too), and what no bucket keeps. */
const scalarArb = fc.constantFrom(...VALUES);
const heldArb = fc.oneof(
	{ arbitrary: scalarArb, weight: 4 },
	{ arbitrary: fc.array(scalarArb, { maxLength: 3 }), weight: 2 },
	{ arbitrary: fc.constantFrom(null, undefined, NaN, { x: 1 }, [null], [{ x: 1 }, "a"]), weight: 1 },
);
const idArb = fc.integer({ min: 0, max: 60 }).map(n => `r${String(n).padStart(2, "0")}`);
/** A range: one or more of the four bounds, of one kind (a string, a number or a date), or now and then of two kinds. */
const boundOf = (kind: number) =>
	kind === 0
		? fc.constantFrom("", "1", "a", "ab", "b", "z")
		: kind === 1
			? fc.constantFrom(-2, 0, 1, 1.5, 2, 3)
			: fc.integer({ min: -1, max: 2 }).map(D);
const boundsArb = fc
	.tuple(
		fc.integer({ min: 0, max: 2 }),
		fc.oneof({ arbitrary: fc.constant(-1), weight: 4 }, { arbitrary: fc.integer({ min: 0, max: 2 }), weight: 1 }),
		fc.subarray(["$gt", "$gte", "$lt", "$lte"], { minLength: 1 }),
	)
	.chain(([kind, other, ops]) =>
		fc
			.tuple(...ops.map((_, i) => boundOf(i === 0 && other >= 0 ? other : kind)))
			.map(vs => Object.fromEntries(ops.map((op, i) => [op, vs[i]])) as Record<string, unknown>),
	);

const record = (id: string, value: unknown): Doc => (value === undefined ? { _id: id } : { _id: id, f: value });
const ids = (docs: Iterable<Doc>) => [...docs].map(d => d._id as string).sort();
/** Every answer of the index checked against NeDB's matcher over `records`, the records the index holds. */
function agrees(index: BucketIndex, records: Doc[], asked: unknown[], bounds: Array<Record<string, unknown>>): void {
	expect(index.recordCount).toBe(records.length);
	// The values each record holds, by NeDB's matcher (each value of a list).
	const held = new Map(records.map(r => [r, VALUES.filter(v => model.match(r, { f: v }))]));
	const holding = (...values: unknown[]) => records.filter(r => held.get(r)!.some(v => values.includes(v)));
	for (const value of asked) {
		const want = holding(value);
		expect(ids(index.getMatching(value))).toEqual(ids(want));
		expect(index.countMatching(value)).toBe(want.length);
		expect(ids(index.holders(value) ?? [])).toEqual(ids(want));
		if (want.length === 0) expect(index.holders(value)).toBeNull();
		expect(ids(records.filter(index.holder(value)))).toEqual(ids(want));
		// In _id order, kept so across the writes that follow.
		expect(index.inIdOrder(value).map(d => d._id)).toEqual(ids(want));
		// A list of values: the records holding any of them, each once; the count at most the sum.
		const pair = [value, VALUES[(VALUES.indexOf(value) + 3) % VALUES.length]];
		const either = holding(...pair);
		expect(ids(index.getMatching(pair))).toEqual(ids(either));
		expect(index.countMatching(pair)).toBe(want.length + holding(pair[1]).length);
		expect(ids(records.filter(index.holder(pair)))).toEqual(ids(either));
		// What the values' complement excludes: the records holding none of them, when every record holds one key.
		// (A list of one value may be taken for an irregular record: null is then a safe answer, never a wrong count.)
		const complement = index.complementOf(pair);
		if (records.some(r => held.get(r)!.length !== 1)) expect(complement).toBeNull();
		else if (records.every(r => !Array.isArray(r.f))) expect(complement).not.toBeNull();
		if (complement) expect(ids(complement.flatMap(s => [...s]))).toEqual(ids(records.filter(r => !either.includes(r))));
	}
	for (const b of bounds) {
		// The values within the bounds by NeDB's matcher (which also finds null `$lte` a date, as MongoDB does not:
		// null is no key here, a range never lists it).
		const within = VALUES.filter(v => model.match({ f: v }, { f: b }));
		expect(ids(index.getBetweenBounds(b))).toEqual(
			ids(records.filter(r => held.get(r)!.some(v => within.includes(v)))),
		);
		// Each record counted once per value it holds within the bounds.
		expect(index.countBetweenBounds(b)).toBe(
			records.reduce((n, r) => n + held.get(r)!.filter(v => within.includes(v)).length, 0),
		);
	}
	expect(ids(index.getAll())).toEqual(ids(records.filter(r => held.get(r)!.length > 0)));
}

describe("the bucket index", () => {
	it("answers as NeDB's matcher over its records, across inserts, removals, updates, rollbacks and resets", () => {
		const opArb = fc.oneof(
			fc.record({ op: fc.constant("insert" as const), id: idArb, value: heldArb }),
			fc.record({
				op: fc.constant("insertMany" as const),
				values: fc.array(fc.tuple(idArb, heldArb), { maxLength: 4 }),
			}),
			fc.record({ op: fc.constant("remove" as const), at: fc.nat() }),
			fc.record({ op: fc.constant("removeMany" as const), at: fc.nat(), n: fc.integer({ min: 0, max: 3 }) }),
			fc.record({ op: fc.constant("update" as const), at: fc.nat(), value: heldArb, revert: fc.boolean() }),
			fc.record({
				op: fc.constant("updateMany" as const),
				at: fc.nat(),
				values: fc.array(heldArb, { minLength: 1, maxLength: 3 }),
				revert: fc.boolean(),
			}),
			fc.record({ op: fc.constant("reset" as const), keep: fc.boolean() }),
		);
		fc.assert(
			fc.property(
				fc.array(fc.tuple(idArb, heldArb), { maxLength: 30 }),
				fc.array(opArb, { maxLength: 6 }),
				fc.subarray(VALUES, { minLength: 1, maxLength: 4 }),
				fc.array(boundsArb, { maxLength: 2 }),
				(initial, ops, asked, bounds) => {
					const index = new BucketIndex("f");
					let records = initial.map(([id, v]) => record(id, v));
					index.reset(records);
					agrees(index, records, asked, bounds);
					for (const o of ops) {
						if (o.op === "insert") {
							const r = record(o.id, o.value);
							index.insert(r);
							records.push(r);
						} else if (o.op === "insertMany") {
							const rs = o.values.map(([id, v]) => record(id, v));
							index.insert(rs);
							records.push(...rs);
						} else if (o.op === "remove" && records.length) {
							const [r] = records.splice(o.at % records.length, 1);
							index.remove(r);
						} else if (o.op === "removeMany" && records.length) {
							const rs = records.splice(o.at % records.length, o.n);
							index.remove(rs);
						} else if (o.op === "update" && records.length) {
							const at = o.at % records.length;
							const old = records[at];
							const next = record(old._id as string, o.value);
							index.update(old, next);
							records[at] = next;
							if (o.revert) {
								index.revertUpdate(old, next);
								records[at] = old;
							}
						} else if (o.op === "updateMany" && records.length) {
							const ats = [...new Set(o.values.map((_, k) => (o.at + k * 7) % records.length))];
							const pairs = ats.map((at, k) => ({
								oldDoc: records[at],
								newDoc: record(records[at]._id as string, o.values[k]),
							}));
							index.update(pairs);
							for (const [k, at] of ats.entries()) records[at] = pairs[k].newDoc;
							if (o.revert) {
								index.revertUpdate(pairs);
								for (const [k, at] of ats.entries()) records[at] = pairs[k].oldDoc;
							}
						} else if (o.op === "reset") {
							if (!o.keep) records = [];
							if (o.keep) index.reset(records);
							else index.reset();
						}
						agrees(index, records, asked, bounds);
					}
				},
			),
			{ numRuns: 100 },
		);
	});

	it("keeps a value's records in _id order as records come and go, an _id changed in place included", () => {
		const index = new BucketIndex("status");
		const recs = Array.from(
			{ length: 40 },
			(_, i): Doc => ({ _id: `h${String(i).padStart(2, "0")}`, status: i % 4 === 0 ? "down" : "up" }),
		);
		index.insert(recs);
		const order = (v: string) => index.inIdOrder(v).map(d => d._id);
		expect(order("down")).toEqual(recs.filter(r => r.status === "down").map(r => r._id));
		// Records going down between the others, first and last, one coming back up: still in order, no reorder asked.
		const down = (r: Doc) => index.update(r, (recs[recs.indexOf(r)] = { ...r, status: "down" }));
		for (const at of [39, 1, 17, 18]) down(recs[at]);
		index.update(recs[8], (recs[8] = { ...recs[8], status: "up" }));
		const first: Doc = { _id: "a0", status: "down" };
		index.insert(first);
		recs.push(first);
		expect(order("down")).toEqual(
			recs
				.filter(r => r.status === "down")
				.map(r => r._id as string)
				.sort(),
		);
		// An _id changed in place: the record is not where its new _id belongs; removing it still leaves the others in order.
		const moved = recs[12];
		moved._id = "zz";
		index.remove(moved);
		expect(order("down")).toEqual(
			recs
				.filter(r => r.status === "down" && r !== moved)
				.map(r => r._id as string)
				.sort(),
		);
		// A value more than half of the records hold: the order still right when asked again.
		for (const r of recs.filter(r => r.status === "up" && r !== moved).slice(0, 20)) down(r);
		expect(order("down")).toEqual(
			recs
				.filter(r => r.status === "down" && r !== moved)
				.map(r => r._id as string)
				.sort(),
		);
	});

	it("orders records by _id as NeDB does when the ids are not all strings", () => {
		const index = new BucketIndex("k");
		const recs: Doc[] = [10, "b", 2, "a", 1, "10"].map(id => ({ _id: id, k: "x" }));
		index.insert(recs);
		// Numbers before strings, numbers by value (NeDB's compareThings).
		expect(index.inIdOrder("x").map(d => d._id)).toEqual([1, 2, 10, "10", "a", "b"]);
		index.insert({ _id: 5, k: "x" });
		expect(index.inIdOrder("x").map(d => d._id)).toEqual([1, 2, 5, 10, "10", "a", "b"]);
	});
});
