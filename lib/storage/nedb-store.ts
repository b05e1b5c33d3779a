/**
 * The embedded store (the default): the Store contract on a NeDB datastore, reads answered by the
 * planner (nedb-plan.ts) through bucket and tree indexes (nedb-index.ts), writes by NeDB itself.
 */
import type { Doc, Filter, FindOptions, IndexOptions, Page, Store, Update } from "./store";
import { DuplicateKeyError } from "./store";
import { isPlain, toNedbFilter } from "./nedb-filter";
import { BucketIndex } from "./nedb-index";
import { readPlain } from "./nedb-file";
import { isTreeIndex, quickRemovals } from "./nedb-tree";
import { countRecords, pageOf, selectInIdOrder, selectPage, selectRecords, type PlannedDatastore } from "./nedb-plan";
import { decodeKeys, encodeFilter, encodeKeys, encodePath, encodePaths, encodeSort, encodeUpdate } from "./store-keys";
import * as model from "./nedb-internals";

/** The part of a NeDB datastore the store uses: writes, index definitions, and for reads its records and indexes. */
export interface NedbDatastore extends PlannedDatastore {
	insertAsync(docs: Doc[]): Promise<Doc[]>;
	updateAsync(
		q: Filter,
		u: Update,
		o: Record<string, unknown>,
	): Promise<{ numAffected: number; affectedDocuments: Doc | Doc[] | null }>;
	removeAsync(q: Filter, o: Record<string, unknown>): Promise<number>;
	ensureIndexAsync(o: { fieldName: string; unique?: boolean; sparse?: boolean }): Promise<void>;
	removeIndexAsync(fieldName: string): Promise<void>;
	/** NeDB's queue of operations: each runs after those pushed before it (and after the file is loaded). */
	executor: { pushAsync<T>(task: () => Promise<T>): Promise<T> };
	/** NeDB's own steps of an update (what updateAsync does): the indexes changed, all or none; the new records appended. */
	_updateIndexes(modifications: Array<{ oldDoc: Doc; newDoc: Doc }>): void;
	persistence: { persistNewStateAsync(docs: Doc[]): Promise<void> };
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
	/** Records checked against a filter by the planner since the store was made (indexes keep it low). */
	checked = 0;
	/** Records put in the order of a page's sort (a heap or a sort) since the store was made; a walk of the _id index puts none. */
	ordered = 0;
	/**
	 * Each of NeDB's own records as callers may see it: the record itself, or its decoded copy when it has
	 * an encoded key. NeDB replaces a record on every update (it never changes one in place), so each
	 * record is walked once, not on every read: reading 10,000 hosts costs a lookup per host.
	 */
	private readonly readable = new WeakMap<Doc, Doc>();
	constructor(private readonly db: NedbDatastore) {}

	private readableOf(record: Doc): Doc {
		if (readPlain(record)) return record;
		let doc = this.readable.get(record);
		if (doc === undefined) this.readable.set(record, (doc = decodeKeys(record)));
		return doc;
	}

	/**
	 * NeDB's own records matching the filter, found by the planner, in NeDB's queue: after every write
	 * asked for before (as NeDB's own reads), and never while NeDB loads its file.
	 */
	private select<T>(filter: Filter, then: (records: Doc[]) => T): Promise<T> {
		return this.db.executor.pushAsync(async () => {
			const { records, checked } = selectRecords(this.db, encodeFilter(filter));
			this.checked += checked;
			return then(records);
		});
	}

	/** Copies of the records for callers: only the fields asked for are copied, keys decoded. */
	private copies(records: Doc[], opts: FindOptions): Doc[] {
		const keep = opts.only?.length ? new Set(["_id", ...encodePaths(opts.only)]) : null;
		const drop = !keep && opts.exclude?.length ? new Set(encodePaths(opts.exclude)) : null;
		return records.map(record => {
			const copy: Doc = {};
			for (const key of Object.keys(record))
				if (keep ? keep.has(key) : !drop?.has(key)) copy[key] = model.deepCopy(record[key]);
			// Decided without readableOf, which would walk the whole record (a deferred field included: nedb-deferred.ts).
			return readPlain(record) || this.readable.get(record) === record ? copy : decodeKeys(copy);
		});
	}

	/** Runs `op` once per query: the id chunks of the filter, or the whole rewritten filter. */
	private async perQuery<T>(filter: Filter, op: (q: Filter) => Promise<T>): Promise<T[]> {
		const parts = byIdChunks(filter);
		if (!parts) return [await op(toNedbFilter(filter))];
		const out: T[] = [];
		for (const q of parts) out.push(await op(q));
		return out;
	}

	find(filter: Filter, opts: FindOptions = {}): Promise<Doc[]> {
		const sort = opts.sort ?? [];
		if (opts.limit !== undefined && (sort.length === 0 || (sort.length === 1 && sort[0][0] === "_id"))) {
			// A page in _id order after (or before) an _id: read from the _id index at that id (nedb-plan.ts).
			const dir = sort.length ? sort[0][1] : 1;
			const limit = opts.limit;
			return this.db.executor.pushAsync(async () => {
				const encoded = encodeFilter(filter);
				const page = selectInIdOrder(this.db, encoded, dir, opts.skip ?? 0, limit);
				if (page) {
					this.checked += page.checked;
					this.ordered += page.ordered;
					return this.copies(page.records, opts);
				}
				const { records, checked } = selectRecords(this.db, encoded);
				this.checked += checked;
				return this.copies(pageOf(records, encodeSort(sort), opts.skip, limit), opts);
			});
		}
		return this.select(filter, records => {
			const ordered =
				opts.sort?.length || opts.skip || opts.limit
					? pageOf(records, encodeSort(opts.sort ?? []), opts.skip, opts.limit)
					: records;
			return this.copies(ordered, opts);
		});
	}

	findPage(filter: Filter, opts: FindOptions): Promise<Page> {
		return this.db.executor.pushAsync(async () => {
			const { total, records, checked, ordered } = selectPage(
				this.db,
				encodeFilter(filter),
				encodeSort(opts.sort ?? []),
				opts.skip,
				opts.limit,
			);
			this.checked += checked;
			this.ordered += ordered;
			return { total, docs: this.copies(records, opts) };
		});
	}

	findPageShared(filter: Filter, opts: FindOptions): Promise<Page> {
		return this.db.executor.pushAsync(async () => {
			const { total, records, checked, ordered } = selectPage(
				this.db,
				encodeFilter(filter),
				encodeSort(opts.sort ?? []),
				opts.skip,
				opts.limit,
			);
			this.checked += checked;
			this.ordered += ordered;
			return { total, docs: records.map(r => this.readableOf(r)) };
		});
	}

	findOneShared(filter: Filter): Promise<Doc | null> {
		return this.select(filter, records => (records.length ? this.readableOf(records[0]) : null));
	}

	findOne(filter: Filter): Promise<Doc | null> {
		return this.select(filter, records => (records.length ? this.copies([records[0]], {})[0] : null));
	}

	count(filter: Filter): Promise<number> {
		return this.db.executor.pushAsync(async () => {
			const { count, checked } = countRecords(this.db, encodeFilter(filter));
			this.checked += checked;
			return count;
		});
	}

	async insertMany(docs: Doc[]): Promise<void> {
		if (docs.length === 0) return;
		await this.db.insertAsync(docs.map(encodeKeys)).catch(nedbDuplicate);
	}

	async updateMany(filter: Filter, update: Update): Promise<number> {
		const stored = encodeUpdate(update);
		const counts = await this.perQuery(
			encodeFilter(filter),
			async q => (await this.db.updateAsync(q, stored, { multi: true }).catch(nedbDuplicate)).numAffected,
		);
		return counts.reduce((a, b) => a + b, 0);
	}

	/**
	 * NeDB's update, done for many records at once: each record's new version made by NeDB (`modify`), the indexes
	 * changed together (NeDB puts them all back if one refuses, a duplicate key), then one append of every new
	 * version, in NeDB's queue as its own updates are.
	 */
	updateEach(updates: Array<[string, Update]>): Promise<number> {
		if (updates.length === 0) return Promise.resolve(0);
		return this.db.executor.pushAsync(async () => {
			const ids = this.db.indexes._id as unknown as { getMatching(value: unknown): Doc[] };
			const modifications: Array<{ oldDoc: Doc; newDoc: Doc }> = [];
			for (const [id, update] of updates) {
				const [oldDoc] = ids.getMatching(id);
				if (oldDoc) modifications.push({ oldDoc, newDoc: model.modify(oldDoc, encodeUpdate(update)) });
			}
			try {
				this.db._updateIndexes(modifications);
			} catch (err) {
				nedbDuplicate(err);
			}
			await this.db.persistence.persistNewStateAsync(modifications.map(m => m.newDoc));
			return modifications.length;
		});
	}

	async findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null> {
		const res = await this.db
			.updateAsync(toNedbFilter(encodeFilter(filter)), encodeUpdate(update), { multi: false, returnUpdatedDocs: true })
			.catch(nedbDuplicate);
		return res.numAffected ? decodeKeys(res.affectedDocuments as Doc) : null;
	}

	async removeMany(filter: Filter): Promise<number> {
		return (await this.perQuery(encodeFilter(filter), q => this.db.removeAsync(q, { multi: true }))).reduce(
			(a, b) => a + b,
			0,
		);
	}

	/**
	 * Unique and ordered fields get NeDB's own index (a tree, which also enforces uniqueness); the others a
	 * bucket index, put in NeDB's place for the field (NeDB keeps it current from then on).
	 */
	async ensureIndex(field: string, opts: IndexOptions = {}): Promise<void> {
		const stored = encodePath(field);
		if (opts.unique || opts.ordered) {
			if (this.db.indexes[stored] instanceof BucketIndex) await this.db.removeIndexAsync(stored);
			await this.db.ensureIndexAsync({ fieldName: stored, unique: opts.unique ?? false, sparse: opts.sparse ?? false });
			const index = this.db.indexes[stored];
			if (isTreeIndex(index)) quickRemovals(index);
			return;
		}
		if (this.db.indexes[stored] instanceof BucketIndex) return;
		// In NeDB's queue, so that no write is half done when it is built; NeDB may have made its own for the
		// field from a definition in its file (it writes one for every index when it compacts).
		await this.db.executor.pushAsync(async () => {
			const index = new BucketIndex(stored);
			index.insert(this.db.getAllData());
			this.db.indexes[stored] = index;
		});
	}

	async dropIndex(field: string): Promise<void> {
		const stored = encodePath(field);
		if (stored in this.db.indexes) await this.db.removeIndexAsync(stored);
	}

	scan(filter: Filter, _fields: string[], visit: (doc: Doc) => void): Promise<void> {
		// NeDB's own records, not copies; a record with an encoded key is visited as its decoded copy.
		return this.select(filter, records => {
			for (const record of records) visit(this.readableOf(record));
		});
	}
}
