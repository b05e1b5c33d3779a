/**
 * The few storage operations the services need, with the same meaning on NeDB (embedded default,
 * nedb-store.ts) and MongoDB (mongo-store.ts). Filters given here have already been checked
 * (lib/eve/query.ts).
 *
 * Any key a client sends can be stored: both stores encode every key written (documents, update
 * values, filter literals, field paths segment by segment) and decode every record read, so callers
 * only ever see keys as they were sent (lib/storage/store-keys.ts).
 */
/** A MongoDB-style filter, already checked by whoever built it (the Eve layer checks clients' `where`). */
export type Filter = Record<string, unknown>;
/** Fields and directions, in order. */
export type SortSpec = Array<[string, 1 | -1]>;

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

/** How a field is indexed. */
export interface IndexOptions {
	unique?: boolean;
	/** Records without the field are left out of the index (NeDB would put them all under one key). */
	sparse?: boolean;
	/**
	 * Values mostly distinct (timestamps, addresses): NeDB keeps them in its ordered tree. Otherwise, and
	 * never for a unique index, in a bucket index (nedb-index.ts), cheap to keep current when many records
	 * share a value. MongoDB indexes both alike.
	 */
	ordered?: boolean;
}

/** A page of a list and how many records the filter matches in all. */
export interface Page {
	total: number;
	docs: Doc[];
}

export interface Store {
	readonly kind: "nedb" | "mongo";
	/** Records the embedded store checked against a filter since it was made (MongoDB: undefined): the index tests' measure. */
	readonly checked?: number;
	find(filter: Filter, opts?: FindOptions): Promise<Doc[]>;
	/** A list's page and its total: one pass on NeDB; on MongoDB a count and a find, both on indexes. */
	findPage(filter: Filter, opts: FindOptions): Promise<Page>;
	findOne(filter: Filter): Promise<Doc | null>;
	count(filter: Filter): Promise<number>;
	insertMany(docs: Doc[]): Promise<void>;
	updateMany(filter: Filter, update: Update): Promise<number>;
	/** Atomic: updates one matching record and returns it as it is after the update. */
	findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null>;
	removeMany(filter: Filter): Promise<number>;
	ensureIndex(field: string, opts?: IndexOptions): Promise<void>;
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
	/**
	 * The embedded store only (MongoDB: absent): findPage's answer with the store's own records instead of copies,
	 * every field of them (`exclude` and `only` are not applied). Read them, never change one. A record stays the
	 * same object while it is unchanged and any write replaces it, so what is derived from one alone can be kept
	 * keyed by the object (lib/eve/render-cache.ts).
	 */
	findPageShared?(filter: Filter, opts: FindOptions): Promise<Page>;
	/** The embedded store only: findOne's answer as the store's own record (read it, never change it), like findPageShared. */
	findOneShared?(filter: Filter): Promise<Doc | null>;
	/**
	 * The embedded store only: a different update for each record, by id, all or none, written to the file in one
	 * append (one updateMany each would open and append to the file once per record). Answers how many records
	 * were found and updated; a record not found is skipped.
	 */
	updateEach?(updates: Array<[string, Update]>): Promise<number>;
}

export class DuplicateKeyError extends Error {
	constructor(readonly key: string) {
		super(`duplicate key ${key}`);
		this.name = "DuplicateKeyError";
	}
}

/** Operations a store was asked for, by kind, since it was made (the benchmarks' database load). */
export type StoreOps = Record<
	| "find"
	| "findPage"
	| "findPageShared"
	| "findOne"
	| "findOneShared"
	| "count"
	| "insertMany"
	| "updateMany"
	| "findOneAndUpdate"
	| "removeMany"
	| "scan"
	| "aggregate",
	number
>;

/** The store, counting the operations asked of it in `ops`. */
export function countingStore(store: Store): Store & { ops: StoreOps } {
	const ops: StoreOps = {
		find: 0,
		findPage: 0,
		findPageShared: 0,
		findOne: 0,
		findOneShared: 0,
		count: 0,
		insertMany: 0,
		updateMany: 0,
		findOneAndUpdate: 0,
		removeMany: 0,
		scan: 0,
		aggregate: 0,
	};
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
