/**
 * The few storage operations the services need, with the same meaning on NeDB (embedded default)
 * and MongoDB. Filters given here have already been checked (lib/eve/query.ts); the NeDB side
 * rewrites the operators whose NeDB meaning differs from MongoDB's.
 *
 * Any key a client sends can be stored: both stores encode every key written (documents, update
 * values, filter literals, field paths segment by segment) and decode every record read, so callers
 * only ever see keys as they were sent (lib/storage/store-keys.ts).
 */
/** A MongoDB-style filter, already checked by whoever built it (the Eve layer checks clients' `where`). */
export type Filter = Record<string, unknown>;
/** Fields and directions, in order. */
export type SortSpec = Array<[string, 1 | -1]>;
import { decodeAll, decodeKeys, encodeFilter, encodeKeys, encodePath, encodePaths, encodeSort, encodeUpdate } from "./store-keys";

export type Doc = Record<string, any>;

export interface FindOptions {
	sort?: SortSpec;
	skip?: number;
	limit?: number;
	/** Top-level fields to leave out at the database (Mongo-style exclusion projection). */
	exclude?: string[];
	/** Only these top-level fields (and `_id`): an inclusion projection, for lookups that need no more. */
	only?: string[];
}

export interface Update {
	$set?: Doc;
	$unset?: Record<string, true | 1 | "">;
	$inc?: Record<string, number>;
	$push?: Doc;
	$addToSet?: Doc;
	$pull?: Doc;
}

export interface Store {
	readonly kind: "nedb" | "mongo";
	find(filter: Filter, opts?: FindOptions): Promise<Doc[]>;
	findOne(filter: Filter): Promise<Doc | null>;
	count(filter: Filter): Promise<number>;
	insertMany(docs: Doc[]): Promise<void>;
	updateMany(filter: Filter, update: Update): Promise<number>;
	/** Atomic: updates one matching record and returns it as it is after the update. */
	findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null>;
	removeMany(filter: Filter): Promise<number>;
	/** `sparse`: records without the field are left out of the index (NeDB would put them all under one key). */
	ensureIndex(field: string, unique?: boolean, sparse?: boolean): Promise<void>;
	/** Drops an index an older version made (NeDB keeps index definitions in its file). */
	dropIndex(field: string): Promise<void>;
	/**
	 * Calls `visit` with every matching record, holding at least `fields` and `_id`, without copying
	 * them (only a record with an encoded key is copied, to decode it): for passes over a whole
	 * collection. `visit` must neither keep nor change what it is given.
	 */
	scan(filter: Filter, fields: string[], visit: (doc: Doc) => void): Promise<void>;
	/**
	 * MongoDB only (absent on NeDB): runs an aggregation pipeline in the database. Only for pipelines a
	 * service builds itself from checked values, never for anything a client sent.
	 */
	aggregate?(pipeline: Doc[]): Promise<Doc[]>;
}

export class DuplicateKeyError extends Error {
	constructor(readonly key: string) {
		super(`duplicate key ${key}`);
		this.name = "DuplicateKeyError";
	}
}

// ---------------------------------------------------------------- NeDB

function isPlain(v: unknown): v is Record<string, unknown> {
	return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date);
}

/** MongoDB matches `{f: null}` on missing fields; NeDB does not. */
function equals(field: string, value: unknown): Filter {
	return value === null ? { $or: [{ [field]: null }, { [field]: { $exists: false } }] } : { [field]: value };
}

function rewriteFieldOps(field: string, ops: Record<string, unknown>): Filter[] {
	const conds: Filter[] = [];
	const native: Record<string, unknown> = {};
	for (const [op, arg] of Object.entries(ops)) {
		switch (op) {
			case "$eq":
				conds.push(equals(field, arg));
				break;
			case "$ne":
				conds.push({ $not: equals(field, arg) });
				break;
			case "$in":
				conds.push((arg as unknown[]).includes(null) ? { $or: (arg as unknown[]).map(v => equals(field, v)) } : setMembership(field, arg as unknown[]) ?? { [field]: { $in: arg } });
				break;
			case "$nin":
				conds.push({ $not: { $or: [{ [field]: { $in: arg } }, ...((arg as unknown[]).includes(null) ? [equals(field, null)] : [])] } });
				break;
			case "$not":
				conds.push({ $not: toNedbFilter({ [field]: arg }) });
				break;
			case "$all":
				conds.push((arg as unknown[]).length === 0 ? { [field]: { $in: [] } } : { $and: (arg as unknown[]).map(v => ({ [field]: v })) });
				break;
			case "$elemMatch":
				native.$elemMatch = isPlain(arg) && Object.keys(arg).some(k => k.startsWith("$")) ? scalarElemOps(arg) : toNedbFilter(arg as Filter);
				break;
			default:
				native[op] = arg;
		}
	}
	if (Object.keys(native).length) conds.push({ [field]: native });
	return conds;
}

/** Lists longer than this are matched through a Set: NeDB checks `$in` by scanning the list for every record. */
const SET_MEMBERSHIP_FROM = 32;

/**
 * `{field: {$in: [strings]}}` for a long list, as a NeDB `$where` that looks each record's value (or each
 * element of an array value, as `$in` does) up in a Set: O(records) instead of O(records × list), which
 * turns a 5,000-host lookup from ~120 ms into a few. Only top-level fields and string lists, where Set
 * equality is NeDB's equality.
 */
function setMembership(field: string, list: unknown[]): Filter | null {
	if (list.length < SET_MEMBERSHIP_FROM || field.includes(".") || !list.every(v => typeof v === "string")) return null;
	const set = new Set(list as string[]);
	return {
		$where(this: Doc) {
			const v = this[field];
			return Array.isArray(v) ? v.some(e => typeof e === "string" && set.has(e)) : typeof v === "string" && set.has(v);
		},
	};
}

/** Inside $elemMatch on scalars NeDB has no $eq; `$in: [v]` means the same. */
function scalarElemOps(ops: Record<string, unknown>): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	for (const [op, arg] of Object.entries(ops)) {
		if (op === "$eq") out.$in = [arg];
		else out[op] = arg;
	}
	return out;
}

/** Rewrites a checked MongoDB filter into a NeDB query with the same meaning. */
export function toNedbFilter(filter: Filter): Filter {
	const conds: Filter[] = [];
	for (const [key, value] of Object.entries(filter)) {
		if (key === "$and" || key === "$or") conds.push({ [key]: (value as Filter[]).map(toNedbFilter) });
		else if (key === "$nor") conds.push({ $not: { $or: (value as Filter[]).map(toNedbFilter) } });
		else if (isPlain(value) && Object.keys(value).some(k => k.startsWith("$"))) conds.push(...rewriteFieldOps(key, value));
		else conds.push(equals(key, value));
	}
	if (conds.length === 0) return {};
	if (conds.length === 1) return conds[0];
	// NeDB looks for an index among the top-level fields only: conditions on distinct fields stay at the
	// top (an implicit AND, as in MongoDB), the others go under $and. A flat `{_id, …}` is found through the
	// _id index; the same under $and made every update by id scan the collection.
	const top: Filter = {};
	const rest: Filter[] = [];
	for (const cond of conds) {
		const keys = Object.keys(cond);
		if (keys.length === 1 && !keys[0].startsWith("$") && !(keys[0] in top)) top[keys[0]] = cond[keys[0]];
		else rest.push(cond);
	}
	return rest.length ? { ...top, $and: rest } : top;
}

interface NedbCursor extends PromiseLike<Doc[]> {
	sort(s: Record<string, number>): NedbCursor;
	skip(n: number): NedbCursor;
	limit(n: number): NedbCursor;
	projection(p: Record<string, number>): NedbCursor;
}

export interface NedbDatastore {
	findAsync(q: Filter): NedbCursor;
	findOneAsync(q: Filter): Promise<Doc | null>;
	countAsync(q: Filter): Promise<number>;
	insertAsync(docs: Doc[]): Promise<Doc[]>;
	updateAsync(q: Filter, u: Update, o: Record<string, unknown>): Promise<{ numAffected: number; affectedDocuments: Doc | Doc[] | null }>;
	removeAsync(q: Filter, o: Record<string, unknown>): Promise<number>;
	ensureIndexAsync(o: { fieldName: string; unique?: boolean; sparse?: boolean }): Promise<void>;
	removeIndexAsync(fieldName: string): Promise<void>;
	indexes?: Record<string, unknown>;
}

function nedbDuplicate(err: unknown): never {
	const e = err as { errorType?: string; key?: unknown };
	if (e && e.errorType === "uniqueViolated") throw new DuplicateKeyError(String(e.key));
	throw err;
}

/** Ids per NeDB query when a filter names many: NeDB fetches them through its _id index, then checks `$in` by scanning the list for each. */
const ID_CHUNK = 32;

/**
 * A filter whose `_id` is a long `$in` of strings, as NeDB queries of ID_CHUNK ids each that NeDB answers
 * through its _id index (the rest of the filter under `$and`, which NeDB does not look at for indexes);
 * null for any other filter.
 */
function byIdChunks(filter: Filter): Filter[] | null {
	const cond = filter._id;
	if (!isPlain(cond) || Object.keys(cond).length !== 1 || !Array.isArray(cond.$in)) return null;
	const ids = [...new Set(cond.$in as unknown[])];
	if (ids.length <= ID_CHUNK || !ids.every(v => typeof v === "string")) return null;
	const { _id: _ignored, ...rest } = filter;
	const restQuery = Object.keys(rest).length ? toNedbFilter(rest) : null;
	const out: Filter[] = [];
	for (let i = 0; i < ids.length; i += ID_CHUNK) {
		const chunk = { _id: { $in: ids.slice(i, i + ID_CHUNK) } };
		out.push(restQuery ? { ...chunk, $and: [restQuery] } : chunk);
	}
	return out;
}

export class NedbStore implements Store {
	readonly kind = "nedb";
	/**
	 * Each of NeDB's own records as callers may see it: the record itself, or its decoded copy when it has
	 * an encoded key. NeDB replaces a record on every update (it never changes one in place), so each
	 * record is walked once, not on every read: reading 10,000 hosts costs a lookup per host.
	 */
	private readonly readable = new WeakMap<Doc, Doc>();
	constructor(private readonly db: NedbDatastore) {}

	private readableOf(record: Doc): Doc {
		let doc = this.readable.get(record);
		if (doc === undefined) this.readable.set(record, (doc = decodeKeys(record)));
		return doc;
	}

	/**
	 * The NeDB query, also calling `each` with every matching record (NeDB's own, not a copy). Beside the
	 * filter's own fields (not under $and) the `$where` is checked after them, and NeDB can still pick an
	 * index by those fields.
	 */
	private withEach(query: Filter, each: (record: Doc) => boolean): Filter {
		const $where = function (this: Doc) {
			return each(this);
		};
		return "$where" in query ? { $and: [query, { $where }] } : { ...query, $where };
	}

	/** Runs `op` once per query: the id chunks of the filter, or the whole rewritten filter. */
	private async perQuery<T>(filter: Filter, op: (q: Filter) => Promise<T>): Promise<T[]> {
		const parts = byIdChunks(filter);
		if (!parts) return [await op(toNedbFilter(filter))];
		const out: T[] = [];
		for (const q of parts) out.push(await op(q));
		return out;
	}

	async find(filter: Filter, opts: FindOptions = {}): Promise<Doc[]> {
		filter = encodeFilter(filter);
		// The ids of the matching records that have an encoded key: only their copies are walked to decode them.
		const encoded = new Set<unknown>();
		const note = (record: Doc) => {
			if (this.readableOf(record) !== record) encoded.add(record._id);
			return true;
		};
		let docs: Doc[];
		if (!opts.sort?.length && !opts.skip && !opts.limit) docs = (await this.perQuery<Doc[]>(filter, async q => await this.db.findAsync(this.withEach(q, note)))).flat();
		else {
			let cursor = this.db.findAsync(this.withEach(toNedbFilter(filter), note));
			if (opts.sort?.length) cursor = cursor.sort(Object.fromEntries(encodeSort(opts.sort)));
			if (opts.skip) cursor = cursor.skip(opts.skip);
			if (opts.limit) cursor = cursor.limit(opts.limit);
			docs = await cursor;
		}
		// NeDB already copied each document; its own projections would build every one again (measured:
		// an inclusion projection of 5,000 hosts takes twice as long as the copy it would save).
		if (opts.only?.length) {
			const keep = new Set(["_id", ...encodePaths(opts.only)]);
			docs = docs.map(d => Object.fromEntries(Object.entries(d).filter(([k]) => keep.has(k))));
		} else if (opts.exclude?.length) {
			const drop = encodePaths(opts.exclude);
			for (const doc of docs) for (const f of drop) delete doc[f];
		}
		// Copies of NeDB's own: decoded in place.
		if (encoded.size) for (let i = 0; i < docs.length; i++) if (!("_id" in docs[i]) || encoded.has(docs[i]._id)) docs[i] = decodeKeys(docs[i]);
		return docs;
	}

	async findOne(filter: Filter): Promise<Doc | null> {
		return decodeKeys(await this.db.findOneAsync(toNedbFilter(encodeFilter(filter))));
	}

	async count(filter: Filter): Promise<number> {
		return (await this.perQuery(encodeFilter(filter), q => this.db.countAsync(q))).reduce((a, b) => a + b, 0);
	}

	async insertMany(docs: Doc[]): Promise<void> {
		if (docs.length === 0) return;
		await this.db.insertAsync(docs.map(encodeKeys)).catch(nedbDuplicate);
	}

	async updateMany(filter: Filter, update: Update): Promise<number> {
		const stored = encodeUpdate(update);
		const counts = await this.perQuery(encodeFilter(filter), async q => (await this.db.updateAsync(q, stored, { multi: true }).catch(nedbDuplicate)).numAffected);
		return counts.reduce((a, b) => a + b, 0);
	}

	async findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null> {
		const res = await this.db.updateAsync(toNedbFilter(encodeFilter(filter)), encodeUpdate(update), { multi: false, returnUpdatedDocs: true }).catch(nedbDuplicate);
		return res.numAffected ? decodeKeys(res.affectedDocuments as Doc) : null;
	}

	async removeMany(filter: Filter): Promise<number> {
		return (await this.perQuery(encodeFilter(filter), q => this.db.removeAsync(q, { multi: true }))).reduce((a, b) => a + b, 0);
	}

	ensureIndex(field: string, unique = false, sparse = false): Promise<void> {
		return this.db.ensureIndexAsync({ fieldName: encodePath(field), unique, sparse });
	}

	async dropIndex(field: string): Promise<void> {
		const stored = encodePath(field);
		if (this.db.indexes && stored in this.db.indexes) await this.db.removeIndexAsync(stored);
	}

	async scan(filter: Filter, _fields: string[], visit: (doc: Doc) => void): Promise<void> {
		// NeDB hands `$where` its own record: visiting from there skips the deep copy of every match. A
		// record with an encoded key is visited as its decoded copy (NeDB's own must not change).
		await this.db.findAsync(
			this.withEach(toNedbFilter(encodeFilter(filter)), record => {
				visit(this.readableOf(record));
				return false;
			}),
		);
	}
}

// ---------------------------------------------------------------- MongoDB (driver 3.7, as moleculer-db-adapter-mongo ships it)

interface MongoCursor {
	sort(s: Record<string, number>): MongoCursor;
	skip(n: number): MongoCursor;
	limit(n: number): MongoCursor;
	toArray(): Promise<Doc[]>;
}

export interface MongoCollection {
	find(q: Filter, o?: Record<string, unknown>): MongoCursor;
	findOne(q: Filter): Promise<Doc | null>;
	countDocuments(q: Filter): Promise<number>;
	insertMany(docs: Doc[], o?: Record<string, unknown>): Promise<unknown>;
	updateMany(q: Filter, u: Update): Promise<{ modifiedCount: number; matchedCount: number }>;
	findOneAndUpdate(q: Filter, u: Update, o: Record<string, unknown>): Promise<{ value: Doc | null }>;
	deleteMany(q: Filter): Promise<{ deletedCount?: number }>;
	createIndex(spec: Record<string, number>, o?: Record<string, unknown>): Promise<unknown>;
	aggregate(pipeline: Doc[], o?: Record<string, unknown>): { toArray(): Promise<Doc[]> };
}

function mongoDuplicate(err: unknown): never {
	const e = err as { code?: number; keyValue?: Record<string, unknown>; message?: string };
	if (e && e.code === 11000) throw new DuplicateKeyError(e.keyValue ? JSON.stringify(e.keyValue) : String(e.message));
	throw err;
}

export class MongoStore implements Store {
	readonly kind = "mongo";
	constructor(private readonly collection: MongoCollection) {}

	async find(filter: Filter, opts: FindOptions = {}): Promise<Doc[]> {
		const projection = opts.only?.length
			? Object.fromEntries(encodePaths(opts.only).map(f => [f, 1]))
			: opts.exclude?.length
				? Object.fromEntries(encodePaths(opts.exclude).map(f => [f, 0]))
				: undefined;
		let cursor = this.collection.find(encodeFilter(filter), projection ? { projection } : {});
		if (opts.sort?.length) cursor = cursor.sort(Object.fromEntries(encodeSort(opts.sort)));
		if (opts.skip) cursor = cursor.skip(opts.skip);
		if (opts.limit) cursor = cursor.limit(opts.limit);
		// The driver's fresh objects: decoded in place.
		return decodeAll(await cursor.toArray());
	}

	async findOne(filter: Filter): Promise<Doc | null> {
		return decodeKeys(await this.collection.findOne(encodeFilter(filter)));
	}

	count(filter: Filter): Promise<number> {
		return this.collection.countDocuments(encodeFilter(filter));
	}

	async insertMany(docs: Doc[]): Promise<void> {
		if (docs.length === 0) return;
		await this.collection.insertMany(docs.map(encodeKeys), { ordered: true }).catch(mongoDuplicate);
	}

	async updateMany(filter: Filter, update: Update): Promise<number> {
		const res = await this.collection.updateMany(encodeFilter(filter), encodeUpdate(update)).catch(mongoDuplicate);
		return res.matchedCount;
	}

	async findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null> {
		const res = await this.collection.findOneAndUpdate(encodeFilter(filter), encodeUpdate(update), { returnDocument: "after" }).catch(mongoDuplicate);
		return decodeKeys(res.value);
	}

	async removeMany(filter: Filter): Promise<number> {
		const res = await this.collection.deleteMany(encodeFilter(filter));
		return res.deletedCount ?? 0;
	}

	async ensureIndex(field: string, unique = false, sparse = false): Promise<void> {
		if (field === "_id") return;
		await this.collection.createIndex({ [encodePath(field)]: 1 }, { unique, sparse });
	}

	async dropIndex(): Promise<void> {
		// MongoDB keeps the indexes fleet-ctl makes; none has been given up there.
	}

	async scan(filter: Filter, fields: string[], visit: (doc: Doc) => void): Promise<void> {
		for (const doc of await this.find(filter, { only: fields })) visit(doc);
	}

	/** The pipeline names fields as they are stored (our own fields are stored as named); its answer is decoded. */
	async aggregate(pipeline: Doc[]): Promise<Doc[]> {
		return decodeAll(await this.collection.aggregate(pipeline).toArray());
	}
}

/** Operations a store was asked for, by kind, since it was made (the benchmarks' database load). */
export type StoreOps = Record<"find" | "findOne" | "count" | "insertMany" | "updateMany" | "findOneAndUpdate" | "removeMany" | "scan" | "aggregate", number>;

/** The store, counting the operations asked of it in `ops`. */
export function countingStore(store: Store): Store & { ops: StoreOps } {
	const ops: StoreOps = { find: 0, findOne: 0, count: 0, insertMany: 0, updateMany: 0, findOneAndUpdate: 0, removeMany: 0, scan: 0, aggregate: 0 };
	const wrapped = Object.create(store) as Store & { ops: StoreOps };
	for (const name of Object.keys(ops) as Array<keyof StoreOps>) {
		// A store without the operation (NeDB has no aggregate) keeps it absent: callers test for it.
		if (typeof store[name] !== "function") continue;
		const original = (store[name] as (...a: unknown[]) => unknown).bind(store);
		(wrapped as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
			ops[name]++;
			return original(...args);
		};
	}
	wrapped.ops = ops;
	return wrapped;
}
