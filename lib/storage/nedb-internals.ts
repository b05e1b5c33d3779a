/**
 * Every part of NeDB's private modules the embedded engine relies on, in one place: the engine (the planner,
 * the bucket and tree indexes, the store, the loader) reaches NeDB's internals only through this module.
 * NeDB publishes its Datastore alone; these functions are `lib/model.js` and `lib/storage.js` of the release
 * package.json pins exactly (NEDB_VERSION). test/storage/nedb-internals.spec.ts checks the installed release
 * and what each function does for the engine, so that an upgrade fails there first, by name.
 *
 * Beyond these modules, the engine also uses parts of a Datastore instance that NeDB does not document (its
 * queue, `_updateIndexes`, `_resetIndexes`, its persistence methods, the nodes of its AVL tree index): their
 * shapes are typed where they are used (nedb-store.ts, nedb-file.ts, nedb-tree.ts) and the same spec checks
 * that a Datastore of this release has each of them.
 */
import type { Doc, Filter, Update } from "./store";

/** The NeDB release whose internals this module describes; package.json pins the same. */
export const NEDB_VERSION = "3.1.0";

/** The functions of NeDB's `lib/model.js` the engine calls. */
interface NedbModel {
	/** A deep copy of a record: dates kept as the same Date, values other than JSON's and dates dropped. */
	deepCopy<T>(value: T): T;
	/** The new version of a record after an update (`$set`, `$unset`, `$inc`, `$push`…); the record is not changed. */
	modify(doc: Doc, update: Update): Doc;
	/** The value at a dotted path; across a list, the list of each element's value. */
	getDotValue(doc: Doc, field: string): unknown;
	/** NeDB's total order of values: undefined, null, numbers, strings, booleans, dates, lists, objects. */
	compareThings(a: unknown, b: unknown): number;
	/** Whether a record matches a NeDB query (filters reach it rewritten by nedb-filter.ts). */
	match(doc: Doc, query: Filter): boolean;
	/** A record as one line of a NeDB file (dates as `{"$$date": ms}`). */
	serialize(doc: unknown): string;
	/** Throws where NeDB refuses a record's keys (`$…`, a dot). */
	checkObject(doc: unknown): void;
}

/**
 * NeDB's tree index (`lib/indexes.js`): what `ensureIndex` makes for unique and ordered fields, which nedb-tree.ts
 * fills in one pass and whose removals it replaces, and which the planner walks (its `tree.tree` root node).
 */
export interface NedbIndexClass {
	new (options: {
		fieldName: string;
		unique?: boolean;
		sparse?: boolean;
	}): {
		fieldName: string;
		insert(doc: unknown): void;
		remove(doc: unknown): void;
		update(oldDoc: unknown, newDoc?: unknown): void;
		getAll(): Doc[];
		getMatching(value: unknown): Doc[];
		getBetweenBounds(bounds: Record<string, unknown>): Doc[];
	};
}

/** The function of NeDB's `lib/storage.js` the engine calls. */
interface NedbStorage {
	/** NeDB's crash-safe rewrite of a file: a temporary file written and flushed, then renamed over it. */
	crashSafeWriteFileLinesAsync(
		file: string,
		lines: string[],
		modes: { fileMode: number; dirMode: number },
	): Promise<void>;
}

const model = require("@seald-io/nedb/lib/model.js") as NedbModel;
const storage = require("@seald-io/nedb/lib/storage.js") as NedbStorage;
/** NeDB's tree index class, for the specs that compare nedb-tree.ts and the planner's walks with it. */
export const NedbIndex = require("@seald-io/nedb/lib/indexes.js") as NedbIndexClass;

export const { deepCopy, modify, getDotValue, compareThings, match, serialize, checkObject } = model;
export const { crashSafeWriteFileLinesAsync } = storage;

/** The release of NeDB installed (its package.json), to be held to NEDB_VERSION. */
export function installedNedbVersion(): string {
	return (require("@seald-io/nedb/package.json") as { version: string }).version;
}
