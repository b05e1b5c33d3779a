/**
 * moleculer-db's adapter contract (init, connect, disconnect and the CRUD methods its own actions call) on
 * the current MongoDB driver, for MONGO_URI. It replaces moleculer-db-adapter-mongo 0.5, which pins the
 * 3.7 driver (outside the support of MongoDB 7 and 8, deprecation warnings on every connection): the
 * contract is small, the package has had no release since 2021, and its only other maintained fork
 * (moleculer-db-adapter-mongoose) would add Mongoose's schemas on top of the ones Eve already checks.
 * docs/storage.md says why.
 *
 * fleet-ctl itself reads and writes only through lib/storage/mongo-store.ts on `collection` and `db`;
 * moleculer-db's CRUD actions are switched off (mixins/storage.mixin.ts). The CRUD methods are here so
 * that the adapter keeps the contract moleculer-db documents, and are tested against the emulator like
 * the rest of the Mongo path. `search` (MongoDB's `$text`) is refused with a message: no index fleet-ctl
 * makes is a text index, and the emulator has no `$text` to test it on.
 */
import {
	MongoClient,
	ObjectId,
	type Collection,
	type Db,
	type Document,
	type Filter,
	type MongoClientOptions,
	type Sort,
	type TopologyDescriptionChangedEvent,
} from "mongodb";
import { Errors, type Service, type ServiceBroker } from "moleculer";

/** moleculer-db's find/count parameters (its `FilterOptions`, `CountOptions`). */
export interface AdapterFindParams {
	query?: Record<string, unknown>;
	search?: string;
	searchFields?: string | string[];
	sort?: string | string[] | Record<string, number>;
	offset?: number;
	limit?: number;
	fields?: string | string[];
}

interface SchemaService {
	schema: { collection?: string };
	logger: Service["logger"];
}

export class MongoAdapter {
	client?: MongoClient;
	db?: Db;
	collection?: Collection<Document>;
	private service!: SchemaService;
	/** Whether the driver knows a server that holds data (its monitor marks a lost one Unknown, and known again once it answers). */
	private reachable = false;

	constructor(
		private readonly uri: string,
		private readonly options: MongoClientOptions = {},
	) {}

	init(_broker: ServiceBroker, service: Service): void {
		this.service = service as unknown as SchemaService;
		if (!this.service.schema.collection)
			throw new Errors.ServiceSchemaError("Missing `collection` definition in schema of service!", {});
	}

	/** Connects (moleculer-db calls it again a second after a failure): the client is there before it answers, not yet reachable. */
	async connect(): Promise<void> {
		await this.client?.close().catch(() => undefined);
		const client = new MongoClient(this.uri, this.options);
		this.client = client;
		this.reachable = false;
		client.on("topologyDescriptionChanged", (e: TopologyDescriptionChangedEvent) => {
			const was = this.reachable;
			this.reachable = e.newDescription.hasDataBearingServers;
			if (was && !this.reachable) this.service.logger.warn("MongoDB is not reachable; the driver keeps trying.");
			else if (!was && this.reachable && this.db) this.service.logger.info("MongoDB is reachable again.");
		});
		await client.connect();
		this.db = client.db();
		this.collection = this.db.collection(this.service.schema.collection as string);
		this.reachable = true;
		this.service.logger.info("MongoDB adapter has connected successfully.");
	}

	async disconnect(): Promise<void> {
		this.reachable = false;
		await this.client?.close();
	}

	/** Whether the storage can serve now (readiness, lib/runtime/health.ts). */
	connected(): boolean {
		return this.reachable;
	}

	private coll(): Collection<Document> {
		if (!this.collection)
			throw new Errors.MoleculerServerError("MongoDB is not connected", 503, "STORAGE_NOT_CONNECTED");
		return this.collection;
	}

	find(params: AdapterFindParams = {}): Promise<Document[]> {
		return this.createCursor(params).toArray();
	}

	findOne(query: Filter<Document>): Promise<Document | null> {
		return this.coll().findOne(query);
	}

	findById(id: unknown): Promise<Document | null> {
		return this.coll().findOne(idFilter([id]));
	}

	findByIds(ids: unknown[]): Promise<Document[]> {
		return this.coll().find(idFilter(ids)).toArray();
	}

	count(params: AdapterFindParams = {}): Promise<number> {
		this.refuseSearch(params);
		return this.coll().countDocuments((params.query ?? {}) as Filter<Document>);
	}

	async insert(entity: Document): Promise<Document> {
		const res = await this.coll().insertOne(entity);
		return { ...entity, _id: res.insertedId };
	}

	async insertMany(entities: Document[]): Promise<Document[]> {
		const res = await this.coll().insertMany(entities);
		return entities.map((e, i) => ({ ...e, _id: res.insertedIds[i] }));
	}

	async updateMany(query: Filter<Document>, update: Document): Promise<number> {
		return (await this.coll().updateMany(query, update)).modifiedCount;
	}

	updateById(id: unknown, update: Document): Promise<Document | null> {
		return this.coll().findOneAndUpdate(idFilter([id]), update, { returnDocument: "after" });
	}

	async removeMany(query: Filter<Document>): Promise<number> {
		return (await this.coll().deleteMany(query)).deletedCount;
	}

	removeById(id: unknown): Promise<Document | null> {
		return this.coll().findOneAndDelete(idFilter([id]));
	}

	async clear(): Promise<number> {
		return (await this.coll().deleteMany({})).deletedCount;
	}

	entityToObject(entity: Document): Document {
		const json = { ...entity };
		if (entity._id instanceof ObjectId) json._id = entity._id.toHexString();
		return json;
	}

	/** A cursor of find's parameters: query, sort (`"-a b"`, a list, or an object), offset, limit, fields. */
	createCursor(params: AdapterFindParams) {
		this.refuseSearch(params);
		let cursor = this.coll().find((params.query ?? {}) as Filter<Document>);
		const sort = toSort(params.sort);
		if (sort) cursor = cursor.sort(sort);
		if (params.offset) cursor = cursor.skip(Number(params.offset));
		if (params.limit) cursor = cursor.limit(Number(params.limit));
		const fields = typeof params.fields === "string" ? params.fields.split(/\s+/).filter(Boolean) : params.fields;
		if (fields?.length) cursor = cursor.project(Object.fromEntries(fields.map(f => [f, 1])));
		return cursor;
	}

	beforeSaveTransformID(entity: Document, idField: string): Document {
		const out = { ...entity };
		if (idField !== "_id" && entity[idField] !== undefined) {
			out._id = out[idField];
			delete out[idField];
		}
		return out;
	}

	afterRetrieveTransformID(entity: Document, idField: string): Document {
		if (idField === "_id") return entity;
		const { _id, ...rest } = entity;
		return { ...rest, [idField]: this.objectIDToString(_id) };
	}

	objectIDToString(id: unknown): unknown {
		return id instanceof ObjectId ? id.toHexString() : id;
	}

	private refuseSearch(params: AdapterFindParams): void {
		if (params.search)
			throw new Errors.MoleculerClientError(
				"Full-text search is not supported on this MongoDB adapter",
				400,
				"SEARCH_NOT_SUPPORTED",
			);
	}
}

/**
 * The records with these ids. fleet-ctl stores its ids as strings (24 hex digits look like ObjectIds but
 * are not stored as such); a record the driver inserted without one has an ObjectId. A hex id matches both.
 */
function idFilter(ids: unknown[]): Filter<Document> {
	const all: unknown[] = [];
	for (const id of ids) {
		all.push(id);
		if (typeof id === "string" && /^[0-9a-fA-F]{24}$/.test(id)) all.push(ObjectId.createFromHexString(id));
	}
	return { _id: { $in: all } } as Filter<Document>;
}

function toSort(sort: AdapterFindParams["sort"]): Sort | null {
	if (!sort) return null;
	if (!Array.isArray(sort) && typeof sort === "object") return sort as Sort;
	const names = Array.isArray(sort) ? sort : sort.split(/[\s,]+/);
	const out: Record<string, 1 | -1> = {};
	for (const name of names.filter(Boolean)) {
		if (name.startsWith("-")) out[name.slice(1)] = -1;
		else out[name] = 1;
	}
	return Object.keys(out).length ? out : null;
}
