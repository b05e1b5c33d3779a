/**
 * The MongoDB store (MONGO_URI): the Store contract on a driver collection; keys encoded as on NeDB.
 */
import type { Collection, Document, Filter as MongoFilter, UpdateFilter } from "mongodb";
import type { Doc, Filter, FindOptions, IndexOptions, Page, Store, Update } from "./store";
import { DuplicateKeyError } from "./store";
import {
	decodeAll,
	decodeKeys,
	encodeFilter,
	encodeKeys,
	encodePath,
	encodePaths,
	encodeSort,
	encodeUpdate,
} from "./store-keys";

/** A collection of the current MongoDB driver (lib/storage/mongo-adapter.ts connects it). */
export type MongoCollection = Collection<Document>;

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
		let cursor = this.collection.find(encodeFilter(filter) as MongoFilter<Document>, projection ? { projection } : {});
		if (opts.sort?.length) cursor = cursor.sort(Object.fromEntries(encodeSort(opts.sort)));
		if (opts.skip) cursor = cursor.skip(opts.skip);
		if (opts.limit) cursor = cursor.limit(opts.limit);
		// The driver's fresh objects: decoded in place.
		return decodeAll(await cursor.toArray());
	}

	async findPage(filter: Filter, opts: FindOptions): Promise<Page> {
		const [total, docs] = await Promise.all([this.count(filter), this.find(filter, opts)]);
		return { total, docs };
	}

	async findOne(filter: Filter): Promise<Doc | null> {
		return decodeKeys(await this.collection.findOne(encodeFilter(filter) as MongoFilter<Document>));
	}

	count(filter: Filter): Promise<number> {
		return this.collection.countDocuments(encodeFilter(filter) as MongoFilter<Document>);
	}

	async insertMany(docs: Doc[]): Promise<void> {
		if (docs.length === 0) return;
		await this.collection.insertMany(docs.map(encodeKeys), { ordered: true }).catch(mongoDuplicate);
	}

	async updateMany(filter: Filter, update: Update): Promise<number> {
		const res = await this.collection
			.updateMany(encodeFilter(filter) as MongoFilter<Document>, encodeUpdate(update) as UpdateFilter<Document>)
			.catch(mongoDuplicate);
		return res.matchedCount;
	}

	async findOneAndUpdate(filter: Filter, update: Update): Promise<Doc | null> {
		// The driver (6 and later) answers the document itself, or null.
		const doc = await this.collection
			.findOneAndUpdate(encodeFilter(filter) as MongoFilter<Document>, encodeUpdate(update) as UpdateFilter<Document>, {
				returnDocument: "after",
			})
			.catch(mongoDuplicate);
		return decodeKeys(doc as Doc | null);
	}

	async removeMany(filter: Filter): Promise<number> {
		const res = await this.collection.deleteMany(encodeFilter(filter) as MongoFilter<Document>);
		return res.deletedCount ?? 0;
	}

	async ensureIndex(field: string, opts: IndexOptions = {}): Promise<void> {
		if (field === "_id") return;
		await this.collection.createIndex(
			{ [encodePath(field)]: 1 },
			{ unique: opts.unique ?? false, sparse: opts.sparse ?? false },
		);
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
