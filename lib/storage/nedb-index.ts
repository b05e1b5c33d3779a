/**
 * A bucket index for NeDB: the values a field holds, each with the set of records holding it, in a hash
 * map. It takes the place of NeDB's own index (an AVL tree whose nodes keep an array of records) for the
 * fields many records share — a host's status, key, nodegroups, groups, soft-delete flag — where NeDB's
 * index pays for every write by searching the value's array (a 10,000-host reconciliation under a status
 * index scanned 10,000-record arrays 10,000 times). Here adding or removing a record is O(1) per value.
 *
 * It speaks NeDB's index protocol (insert, remove, update, revertUpdate, reset, getMatching,
 * getBetweenBounds, getAll), so NeDB keeps it current on every insert, update, removal and load, with
 * its own rollback, and answers its own queries through it. The query planner (nedb-plan.ts) also asks
 * it how many records hold a value without listing them.
 *
 * Keys: strings, numbers, booleans and dates, each value of an array separately (NeDB's and MongoDB's
 * meaning of `{tags: "web"}`). Records whose value is missing, null or an object are not in any bucket:
 * the planner never asks a bucket index about those values. Unique indexes stay NeDB's.
 */
import type { Doc } from "./store";
import * as model from "./nedb-internals";

/** Two records in the order of NeDB's _id index (strings, as most ids are, compared directly). */
function byId(a: Doc, b: Doc): number {
	const x = a._id;
	const y = b._id;
	if (typeof x === "string" && typeof y === "string") return x < y ? -1 : x > y ? 1 : 0;
	return model.compareThings(x, y);
}

/** Where a record goes in a list in _id order: the first position whose record does not come before it. */
function positionById(list: Doc[], doc: Doc): number {
	let lo = 0;
	let hi = list.length;
	while (lo < hi) {
		const mid = (lo + hi) >>> 1;
		if (byId(list[mid], doc) < 0) lo = mid + 1;
		else hi = mid;
	}
	return lo;
}

/** A scalar as a map key, its type first: "s:up", "n:3", "b:true", "d:1700000000000"; null for what is not kept. */
export function bucketKey(value: unknown): string | null {
	switch (typeof value) {
		case "string":
			return "s:" + value;
		case "number":
			return Number.isNaN(value) ? null : "n:" + value;
		case "boolean":
			return "b:" + value;
		default:
			return value instanceof Date ? "d:" + value.getTime() : null;
	}
}

/** The bounds of a range condition NeDB passes to getBetweenBounds. */
type Bounds = Partial<Record<"$gt" | "$gte" | "$lt" | "$lte", unknown>>;

function comparable(a: unknown, b: unknown): boolean {
	return (
		(typeof a === "string" && typeof b === "string") ||
		(typeof a === "number" && typeof b === "number") ||
		(a instanceof Date && b instanceof Date)
	);
}

function inBounds(value: unknown, bounds: Bounds): boolean {
	const v = value instanceof Date ? value.getTime() : (value as string | number);
	for (const [op, bound] of Object.entries(bounds)) {
		if (!comparable(value, bound)) return false;
		const b = bound instanceof Date ? bound.getTime() : (bound as string | number);
		if (
			(op === "$gt" && !(v > b)) ||
			(op === "$gte" && !(v >= b)) ||
			(op === "$lt" && !(v < b)) ||
			(op === "$lte" && !(v <= b))
		)
			return false;
	}
	return true;
}

export class BucketIndex {
	readonly unique = false;
	readonly sparse = true;
	/**
	 * Key -> the value it stands for and the records holding it; `byId`, once asked for (inIdOrder), the same
	 * records in _id order, kept in order on every write after (a binary search and a splice).
	 */
	private readonly buckets = new Map<string, { value: unknown; docs: Set<Doc>; byId?: Doc[] }>();
	/** The records this index holds (NeDB gives every record to every index, those without a kept value too). */
	private records = 0;
	/**
	 * Records not in exactly one bucket: their value is missing, null, an object or a list. While there are
	 * none, every record holds exactly one key, so the records holding a value are all records but those of
	 * the other buckets (complementOf).
	 */
	private irregular = 0;

	constructor(readonly fieldName: string) {}

	/**
	 * The keys of a record's value (an array's elements once each) and whether it is irregular (see
	 * `irregular`). A single value, as most are, is answered without a list: this runs for every record and
	 * every such index at load (400,000 times for 50,000 hosts).
	 */
	private keysOf(doc: Doc): {
		irregular: boolean;
		key: string | null;
		value: unknown;
		more: Map<string, unknown> | null;
	} {
		const value = model.getDotValue(doc, this.fieldName);
		if (!Array.isArray(value)) {
			const key = bucketKey(value);
			return { irregular: key === null, key, value, more: null };
		}
		const more = new Map<string, unknown>();
		for (const v of value) {
			const key = bucketKey(v);
			if (key !== null) more.set(key, v);
		}
		return { irregular: true, key: null, value: undefined, more };
	}

	insert(doc: Doc | Doc[]): void {
		if (Array.isArray(doc)) {
			for (const d of doc) this.insert(d);
			return;
		}
		this.records++;
		const keys = this.keysOf(doc);
		if (keys.irregular) this.irregular++;
		if (keys.key !== null) this.add(keys.key, keys.value, doc);
		if (keys.more !== null) for (const [key, value] of keys.more) this.add(key, value, doc);
	}

	/** `doc` into the bucket of `key`. */
	private add(key: string, value: unknown, doc: Doc): void {
		let bucket = this.buckets.get(key);
		if (!bucket) this.buckets.set(key, (bucket = { value, docs: new Set() }));
		bucket.docs.add(doc);
		if (bucket.byId) {
			// Kept in order while the value stays rare; past half of the records a walk of the _id index is as cheap.
			if (bucket.docs.size * 2 > this.records) delete bucket.byId;
			else bucket.byId.splice(positionById(bucket.byId, doc), 0, doc);
		}
	}

	remove(doc: Doc | Doc[]): void {
		if (Array.isArray(doc)) {
			for (const d of doc) this.remove(d);
			return;
		}
		this.records--;
		const keys = this.keysOf(doc);
		if (keys.irregular) this.irregular--;
		if (keys.key !== null) this.take(keys.key, doc);
		if (keys.more !== null) for (const key of keys.more.keys()) this.take(key, doc);
	}

	/** `doc` out of the bucket of `key`. */
	private take(key: string, doc: Doc): void {
		const bucket = this.buckets.get(key);
		if (!bucket) return;
		bucket.docs.delete(doc);
		if (bucket.docs.size === 0) this.buckets.delete(key);
		else if (bucket.byId) {
			const at = positionById(bucket.byId, doc);
			if (bucket.byId[at] === doc) bucket.byId.splice(at, 1);
			else delete bucket.byId; // not where it belongs (an _id changed in place): ordered afresh when asked
		}
	}

	/** One record replaced by another, or (NeDB's multi-update) a list of `{oldDoc, newDoc}` pairs. */
	update(oldDoc: Doc | Array<{ oldDoc: Doc; newDoc: Doc }>, newDoc?: Doc): void {
		if (Array.isArray(oldDoc)) {
			for (const pair of oldDoc) this.remove(pair.oldDoc);
			for (const pair of oldDoc) this.insert(pair.newDoc);
			return;
		}
		this.remove(oldDoc);
		this.insert(newDoc as Doc);
	}

	revertUpdate(oldDoc: Doc | Array<{ oldDoc: Doc; newDoc: Doc }>, newDoc?: Doc): void {
		if (Array.isArray(oldDoc)) this.update(oldDoc.map(p => ({ oldDoc: p.newDoc, newDoc: p.oldDoc })));
		else this.update(newDoc as Doc, oldDoc);
	}

	reset(docs?: Doc | Doc[]): void {
		this.buckets.clear();
		this.irregular = 0;
		this.records = 0;
		if (docs) this.insert(docs);
	}

	/** The records holding the value, or any of the values of a list (each record once). */
	getMatching(value: unknown): Doc[] {
		if (!Array.isArray(value)) {
			const key = bucketKey(value);
			const bucket = key === null ? undefined : this.buckets.get(key);
			return bucket ? [...bucket.docs] : [];
		}
		const out = new Set<Doc>();
		for (const v of value) for (const d of this.getMatching(v)) out.add(d);
		return [...out];
	}

	/**
	 * Whether a record is in the bucket of the value, or of any value of a list, asked of many records: the
	 * buckets looked up once, each record then one set lookup (the record is not read). Valid while the index is unchanged (a planned read runs in NeDB's queue:
	 * no write comes between).
	 */
	holder(value: unknown): (doc: Doc) => boolean {
		const sets: Array<Set<Doc>> = [];
		for (const v of Array.isArray(value) ? value : [value]) {
			const key = bucketKey(v);
			const bucket = key === null ? undefined : this.buckets.get(key);
			if (bucket) sets.push(bucket.docs);
		}
		if (sets.length === 0) return () => false;
		if (sets.length === 1) {
			const [only] = sets;
			return doc => only.has(doc);
		}
		return doc => sets.some(s => s.has(doc));
	}

	/** The set of records holding exactly this scalar value (not a copy: read it, never change it); null when none. */
	holders(value: unknown): Set<Doc> | null {
		const key = bucketKey(value);
		return (key === null ? undefined : this.buckets.get(key)?.docs) ?? null;
	}

	/**
	 * The records holding none of the values, as the sets of the other buckets (disjoint), when every record
	 * holds exactly one key (else null: a record in no bucket, or in several, would be miscounted). What a
	 * conjunct most records pass (a soft-delete flag, `status: up`) excludes: checking those few records
	 * answers it for all the others.
	 */
	complementOf(values: unknown[]): Array<Set<Doc>> | null {
		if (this.irregular !== 0) return null;
		const keys = new Set(values.map(bucketKey));
		const out: Array<Set<Doc>> = [];
		for (const [key, bucket] of this.buckets) if (!keys.has(key)) out.push(bucket.docs);
		return out;
	}

	/** Whether every record holds exactly one kept value here (no list, no missing value): see `irregular`. */
	get regular(): boolean {
		return this.irregular === 0;
	}

	/** How many records this index holds (every record of the collection). */
	get recordCount(): number {
		return this.records;
	}

	/**
	 * The records holding exactly this scalar value, in the order of NeDB's _id index (not a copy: read it, never
	 * change it). Ordered once when first asked for, then kept in order as records come and go.
	 */
	inIdOrder(value: unknown): Doc[] {
		const key = bucketKey(value);
		const bucket = key === null ? undefined : this.buckets.get(key);
		if (!bucket) return [];
		return (bucket.byId ??= [...bucket.docs].sort(byId));
	}

	/** How many records getMatching would list, without listing them (a list's values may share records: at most). */
	countMatching(value: unknown): number {
		if (Array.isArray(value)) return value.reduce<number>((n, v) => n + this.countMatching(v), 0);
		const key = bucketKey(value);
		return key === null ? 0 : (this.buckets.get(key)?.docs.size ?? 0);
	}

	/** The records whose value (or an element of it) is within the bounds: the keys are compared, no record is visited. */
	getBetweenBounds(bounds: Bounds): Doc[] {
		const out = new Set<Doc>();
		for (const bucket of this.buckets.values())
			if (inBounds(bucket.value, bounds)) for (const d of bucket.docs) out.add(d);
		return [...out];
	}

	countBetweenBounds(bounds: Bounds): number {
		let n = 0;
		for (const bucket of this.buckets.values()) if (inBounds(bucket.value, bounds)) n += bucket.docs.size;
		return n;
	}

	/** Every indexed record (those without a kept value are not here: NeDB only asks the _id index for all). */
	getAll(): Doc[] {
		const out = new Set<Doc>();
		for (const bucket of this.buckets.values()) for (const d of bucket.docs) out.add(d);
		return [...out];
	}
}
