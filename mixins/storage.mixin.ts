/**
 * Storage for one collection. The choice of adapter happens here and nowhere else:
 * MONGO_URI set -> our MongoDB adapter on the current driver (lib/storage/mongo-adapter.ts); otherwise NeDB files under DATA_DIR
 * (DATA_DIR=":memory:" keeps everything in memory). Services use `this.store` and never learn which.
 *
 * A NeDB file is opened once per process: every broker of the process that keeps the collection (replicas of a
 * service in one process, as the tests' embedded leg runs them) shares its one datastore, loaded by the first and
 * closed with the last. Two datastores on one file would each keep their own copy and overwrite the other's
 * writes when compacting; several processes on one DATA_DIR are not supported (replicas in processes share MongoDB).
 *
 * moleculer-db's own CRUD actions are switched off: they take client queries and whole entities
 * unchecked. The Eve layer (eve-collection.mixin) is the only way in from HTTP.
 */
import fs from "node:fs";
import path from "node:path";
import DbService from "moleculer-db";
import type { Service, ServiceBroker, ServiceSchema } from "moleculer";
import { beforeScrape, setMetric } from "../lib/runtime/metrics";
import { configOf, type Config } from "../lib/config";
import { countingStore, type Store, type StoreOps } from "../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../lib/storage/nedb-store";
import { manageNedbFile, type ManagedFile, type NedbFileDatastore } from "../lib/storage/nedb-file";
import { encodePath } from "../lib/storage/store-keys";

const Datastore = require("@seald-io/nedb") as new (
	opts: Record<string, unknown>,
) => NedbDatastore & NedbFileDatastore & { loadDatabaseAsync(): Promise<void> };
import { MongoStore } from "../lib/storage/mongo-store";
import { MongoAdapter } from "../lib/storage/mongo-adapter";

/** What the mixin keeps of an embedded store's files. */
interface NedbParts {
	nedb?: { managed?: ManagedFile };
	extraNedb?: OpenNedb[];
	stopGauge?: () => void;
}

export interface StorageThis {
	store: Store;
	/** The service's other collections (Storage's `extra`), by name. */
	stores: Record<string, Store>;
	adapter: MongoAdapter | { db?: unknown };
}

function createAdapter(config: Config, collection: string, deferred?: string): unknown {
	if (config.mongoUri) {
		return new MongoAdapter(config.mongoUri, { serverSelectionTimeoutMS: 5000 });
	}
	// The adapter is handed the process's datastore of the file, which this project loads and compacts (lib/storage/nedb-file.ts).
	return new SharedNedbAdapter(config.dataDir, collection, deferred);
}

type OpenNedb = NedbDatastore & { managed: ManagedFile };

/** A NeDB datastore for `collection`: in memory (DATA_DIR=":memory:"), or in its file under DATA_DIR, managed, with its `deferred` field left in the file at a load, read when first needed (lib/storage/nedb-deferred.ts). */
function nedbDatastore(
	dataDir: string,
	collection: string,
	deferred?: string,
): OpenNedb & NedbFileDatastore & { loadDatabaseAsync(): Promise<void> } {
	const opts = dataDir === ":memory:" ? { inMemoryOnly: true } : { filename: path.join(dataDir, `${collection}.db`) };
	if (dataDir !== ":memory:") fs.mkdirSync(dataDir, { recursive: true });
	const db = new Datastore(opts);
	return Object.assign(db, {
		managed: manageNedbFile(db, undefined, deferred === undefined ? undefined : encodePath(deferred)),
	});
}

/** The datastores of this process's NeDB files, by absolute path: loaded once, with how many services hold each. */
const openFiles = new Map<string, { db: Promise<OpenNedb>; holders: number }>();

/** The loaded datastore of `collection` (in memory: one of its own), held until released (releaseNedb). */
async function openNedb(dataDir: string, collection: string, deferred?: string): Promise<OpenNedb> {
	const load = async () => {
		const db = nedbDatastore(dataDir, collection, deferred);
		await db.loadDatabaseAsync();
		return db;
	};
	if (dataDir === ":memory:") return load();
	const file = path.resolve(dataDir, `${collection}.db`);
	let open = openFiles.get(file);
	if (!open) {
		open = { db: load(), holders: 0 };
		openFiles.set(file, open);
		// A load that failed is not kept: the next service to open the file tries again.
		open.db.catch(() => openFiles.get(file) === open && openFiles.delete(file));
	}
	open.holders++;
	try {
		return await open.db;
	} catch (err) {
		open.holders--;
		throw err;
	}
}

/** Lets go of a datastore opened by openNedb: its file is closed (compaction stopped) when no service holds it any more. */
function releaseNedb(db: OpenNedb & { filename?: string }): void {
	const file = db.filename ? path.resolve(db.filename) : null;
	const open = file ? openFiles.get(file) : undefined;
	if (open && --open.holders > 0) return;
	if (file && open) openFiles.delete(file);
	db.managed.stop();
}

/** moleculer-db's adapter for the embedded store: only connecting (the process's datastore of the file) and letting go; its CRUD actions are off. */
class SharedNedbAdapter {
	db: OpenNedb | null = null;
	constructor(
		private readonly dataDir: string,
		private readonly collection: string,
		private readonly deferred?: string,
	) {}
	init(): void {}
	async connect(): Promise<void> {
		this.db = await openNedb(this.dataDir, this.collection, this.deferred);
	}
	async disconnect(): Promise<void> {
		if (this.db) releaseNedb(this.db);
		this.db = null;
	}
}

/**
 * Storage for `collection` (the Eve collection) and, for a service that keeps more than one, the `extra`
 * collections (`this.stores[name]`) in the same database or directory. `deferred`: the collection's large field
 * that lists never show, parsed when first read on the embedded store.
 */
export function Storage(collection: string, extra: string[] = [], deferred?: string): Partial<ServiceSchema> {
	return {
		mixins: [DbService as unknown as Partial<ServiceSchema>],
		collection,
		settings: { idField: "_id" },
		actions: {
			find: false,
			count: false,
			list: false,
			create: false,
			insert: false,
			get: false,
			update: false,
			remove: false,
			/** The database operations this replica asked for so far (internal: the benchmarks). */
			storeStats: {
				visibility: "public",
				handler(this: StorageThis & { store: { ops?: StoreOps } }) {
					return {
						node: (this as unknown as { broker: { nodeID: string } }).broker.nodeID,
						ops: this.store?.ops ?? null,
					};
				},
			},
		},

		// Where the collections live: the broker's configuration (lib/config.ts configOf), before moleculer-db's `created`.
		merged(this: Service, schema: ServiceSchema & { adapter?: unknown }) {
			schema.adapter = createAdapter(configOf(this.broker), collection, deferred);
		},

		async afterConnected(this: StorageThis & NedbParts & { broker: ServiceBroker }) {
			const { adapter } = this;
			this.stores = {};
			if (adapter instanceof MongoAdapter) {
				this.store = countingStore(new MongoStore(adapter.collection!));
				for (const name of extra) this.stores[name] = countingStore(new MongoStore(adapter.db!.collection(name)));
				return;
			}
			this.store = countingStore(new NedbStore((adapter as { db?: unknown }).db as NedbDatastore));
			// NeDB appends every write to its file; it is rewritten when it has grown by half (nedb-file.ts).
			this.nedb = (adapter as { db?: unknown }).db as { managed?: ManagedFile };
			this.extraNedb = [];
			for (const name of extra) {
				const db = await openNedb(configOf(this.broker).dataDir, name);
				this.stores[name] = countingStore(new NedbStore(db));
				this.extraNedb.push(db);
			}
			const managed = this.nedb.managed;
			if (managed?.deferred) {
				// The deferred field (nedb-deferred.ts) is read from the file in the background once every service of
				// the process has started, not while the others still start; the gauge says how many are left.
				const { broker } = this;
				const hydrate = () => managed.hydrateInBackground?.();
				if (broker.started) hydrate();
				else broker.localBus.once("$broker.started", hydrate);
				const deferredField = managed.deferred;
				this.stopGauge = beforeScrape(broker, () =>
					setMetric(broker, "fleet.store.deferred.pending", deferredField.unread, { collection }),
				);
			}
		},

		async stopped(this: NedbParts) {
			// moleculer-db's own `stopped` disconnects the adapter (and waits for the Mongo client to close; NeDB: lets go of the file).
			for (const db of this.extraNedb ?? []) releaseNedb(db);
			this.stopGauge?.();
		},
	} as unknown as Partial<ServiceSchema>;
}
