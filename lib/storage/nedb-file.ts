/**
 * How an embedded (NeDB) datastore meets its file: loading it fast, and rewriting it only when that
 * gains something. NeDB itself, on every load, parses each line through a JSON reviver called for every
 * key of every record (a host's grains are hundreds), then rewrites the whole file to compact it, and
 * with autocompaction rewrites it again every interval: at 50,000 hosts a 181 MB file parsed in 3.7 s and
 * written again at every start and every ten minutes, whether anything changed or not. Here:
 *
 *   - the file is read in large reads, cut into lines on its bytes (readLines);
 *   - a collection's deferred field (a host's grain) is left in the file, read when first needed or by a pass in the
 *     background once the process has started (nedb-deferred.ts), in files whose lines the writer made for it;
 *   - each line is parsed by JSON.parse alone, then one walk revives NeDB's dates (`{"$$date": ms}`) and
 *     shares the short strings records repeat (settle); records, deletions and index definitions are
 *     read as NeDB reads them (the last line of an id wins, `$$deleted` removes it, lines NeDB cannot
 *     parse are counted against its corruption threshold);
 *   - the records go into NeDB's tree indexes sorted, each tree built in one pass (nedb-tree.ts);
 *   - the file is rewritten at load only when it holds more lines than the compact form would (superseded
 *     or deleted records, repeated index definitions, unparsable lines);
 *   - records are written (appended, or the file rewritten) by JSON.stringify without NeDB's replacer
 *     (serializeRecord), in NeDB's format;
 *   - afterwards it is rewritten when it has grown by half since it was last compact (and by at least
 *     COMPACT_MIN_GROWTH bytes), checked every COMPACT_CHECK_MS: appends that supersede records
 *     pile up until then, never a rewrite for nothing.
 *
 * Only NeDB's own persistence methods and its index reset of the one datastore are replaced (instance
 * properties); its format, its crash-safe rewrite and everything else stay NeDB's.
 */
import fs from "node:fs";
import { isTreeIndex, resetTree } from "./nedb-tree";
import { DEFERRED_MARKER, DeferredField, serializeDeferred } from "./nedb-deferred";
import * as storage from "./nedb-internals";

type Doc = Record<string, unknown>;

/** The parts of a NeDB datastore and its persistence this module takes over. */
export interface NedbFileDatastore {
	inMemoryOnly: boolean;
	filename?: string;
	indexes: Record<string, unknown>;
	getAllData(): Doc[];
	/** Empties every index and, given records, fills it with them (NeDB calls it at load). */
	_resetIndexes(data?: Doc[]): void;
	compactDatafileAsync(): Promise<void>;
	emit(event: string): boolean;
	persistence: {
		corruptAlertThreshold: number;
		modes: { fileMode: number; dirMode: number };
		beforeDeserialization(line: string): string;
		afterSerialization(line: string): string;
		persistNewStateAsync(docs: Doc[]): Promise<void>;
		treatRawStreamAsync(stream: NodeJS.ReadableStream): Promise<{ data: Doc[]; indexes: Record<string, Doc> }>;
		persistCachedDatabaseAsync(): Promise<void>;
	};
}

/** How often a file's growth is looked at. */
export const COMPACT_CHECK_MS = 10 * 60 * 1000;
/** A file is rewritten once it grew by half since it was compact, and by at least this much. */
export const COMPACT_MIN_GROWTH = 1 << 20;

const DATE_KEY = "$$date";

/** How much of a file is read at a time at load (see treatRawStreamAsync). */
const READ_CHUNK = 1 << 20;

/** Strings up to this long are shared between the records that hold them (see settle). */
const SHARED_STRING_MAX = 64;
/**
 * The strings seen for sharing are forgotten every this many records. A value repeated across the fleet is then
 * held once per SHARE_EPOCH records rather than once (1 MiB more at 50,000 hosts), but the table never holds all of
 * the fleet's unique values (ids, serials, UUIDs: 536,000 strings at 50,000 hosts) at once: its lookups stay in the
 * processor's caches (0.18 s less to load 50,000 hosts), and no table of 30 MB is left as garbage when the load ends.
 */
const SHARE_EPOCH = 5000;
/** Lists of strings at least this long are shared whole between the records that hold them (shareLists). */
const SHARED_LIST_MIN = 16;
/** Lists of one length kept for sharing at most (a fleet has a few CPU models; a list unique to each record is not kept). */
const LIST_CANDIDATES = 8;
/**
 * Strings shorter than this come out of JSON.parse already shared: V8 internalizes a parsed string value of up
 * to 9 characters (measured on Node 22: 200,000 equal 9-character values take no memory of their own, 10-character
 * ones 32 bytes each). Were a later V8 to stop, memory would grow, not answers change (the bench's RSS rows show it).
 */
const UNSHARED_BELOW = 10;

/**
 * Records read from a file none of whose keys is in its encoded form (lib/storage/store-keys.ts: every encoded
 * key holds a `%`, so a line without one has none): the store shows them as they are without walking them
 * again (nedb-store.ts readableOf). A record written later is not here and is walked once when first read.
 */
const plainRecords = new WeakSet<object>();

/** Whether the record was read from its file with no encoded key (see plainRecords). */
export function readPlain(record: object): boolean {
	return plainRecords.has(record);
}

/**
 * Makes a parsed line a record, in place, in one walk with its own stack (no nesting can overflow it):
 * NeDB's date objects become Dates, and every short string value is replaced by the first equal one seen
 * in this file (`shared`). JSON.parse makes a string per occurrence: a fleet's grains repeat the same
 * values (an OS, a kernel, a hundred CPU flags) on every host, and at 50,000 hosts sharing them took the
 * records from 269 to 203 MiB of heap (measured 2026-11-28; long lists of strings are then shared whole,
 * shareLists). Dates of the same instant are one Date too (`dates`): a Date takes
 * about 90 bytes, and a host holds seven, most of them shared with other hosts (the `_created` and `_updated`
 * of the batch that wrote it) or within itself (a grain's `ctl.last_stateapply` is the host's
 * `last_stateapply`): 0.36 MiB less per 1,000 hosts. A stored record is never changed in place (NeDB writes a
 * new one, and no code of fleet-ctl calls a Date's setters), so a shared Date is never changed under another.
 */
function settle(doc: Doc, shared: Shared): void {
	const { dates } = shared;
	const stack: Array<Doc | unknown[]> = [doc];
	// Long lists held by an object, as [holder, key] pairs: shared whole once their strings are (shareLists).
	const lists: Array<Doc | string> = [];
	while (stack.length) {
		const node = stack.pop()!;
		if (Array.isArray(node)) {
			for (let i = 0; i < node.length; i++) {
				const value = node[i];
				if (typeof value === "string") node[i] = sharedString(value, shared.strings);
				else if (value !== null && typeof value === "object") {
					const date = dateOf(value, dates);
					if (date === undefined) stack.push(value as Doc | unknown[]);
					else node[i] = date;
				}
			}
		} else {
			for (const key in node) {
				const value = node[key];
				if (typeof value === "string") node[key] = sharedString(value, shared.strings);
				else if (value !== null && typeof value === "object") {
					const date = dateOf(value, dates);
					if (date !== undefined) node[key] = date;
					else {
						stack.push(value as Doc | unknown[]);
						if (Array.isArray(value) && value.length >= SHARED_LIST_MIN) lists.push(node, key);
					}
				}
			}
		}
	}
	if (lists.length) shareLists(lists, shared.lists);
}

/** Empties what a walk shares. */
function forget(shared: Shared): void {
	shared.strings.clear();
	shared.dates.clear();
	shared.lists.clear();
}

/**
 * A value parsed apart from its record (a deferred field, nedb-deferred.ts) made as `settle` makes a record's values,
 * sharing what it repeats of the record's own strings and Dates (a host's grain repeats its id and its last state
 * apply): 16 MiB less heap at 50,000 hosts than sharing with other records' grains alone.
 */
function settleValue(value: unknown, record: Doc, field: string, shared: Shared): unknown {
	if (value === null || typeof value !== "object")
		return typeof value === "string" ? sharedString(value, shared.strings) : value;
	// Forgotten every SHARE_EPOCH values, as a load forgets its strings every SHARE_EPOCH records.
	shared.settled = (shared.settled ?? 0) + 1;
	if (shared.settled % SHARE_EPOCH === 0) forget(shared);
	for (const key of Object.keys(record)) {
		if (key === field) continue;
		const own = record[key];
		if (typeof own === "string") {
			if (own.length >= UNSHARED_BELOW && own.length <= SHARED_STRING_MAX && !shared.strings.has(own))
				shared.strings.set(own, own);
		} else if (own instanceof Date && !shared.dates.has(own.getTime())) shared.dates.set(own.getTime(), own);
	}
	const holder: Doc = { value };
	settle(holder, shared);
	return holder.value;
}

/**
 * Lists of SHARED_LIST_MIN strings or more, each replaced by an equal one kept earlier in the file, frozen. A host's
 * `cpu_flags` (70 to 150 flags) is the same list on every host of a CPU model: 0.6 KB per host, 6 MiB at 10,000
 * hosts and 30 MiB at 50,000. Frozen, because one list then stands for many records: a stored record is never
 * changed in place (see settle), and were code ever to try, it would fail loudly rather than change every host.
 */
function shareLists(lists: Array<Doc | string>, seen: Map<number, Array<readonly unknown[]>>): void {
	for (let i = 0; i < lists.length; i += 2) {
		const holder = lists[i] as Doc;
		const key = lists[i + 1] as string;
		// A key `__proto__` (never written by fleet-ctl, whose keys are encoded) is left as it is: assigning it would set the prototype.
		if (key === "__proto__") continue;
		const list = holder[key] as unknown[];
		// The lists kept for this length are compared element by element (equal strings are mostly one string
		// by now, so most comparisons are of pointers); a record's own list becomes one of them if there is room.
		const candidates = seen.get(list.length);
		const same = candidates?.find(kept => sameItems(kept, list));
		if (same !== undefined) holder[key] = same;
		else if (list.every(v => typeof v === "string")) {
			if (candidates === undefined) seen.set(list.length, [Object.freeze(list)]);
			else if (candidates.length < LIST_CANDIDATES) candidates.push(Object.freeze(list));
		}
	}
}

/** Whether two lists of one length hold the same items in the same order. */
function sameItems(a: readonly unknown[], b: readonly unknown[]): boolean {
	for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
	return true;
}

/** What a file's records share (settle): strings, Dates of one instant, long lists of strings. */
interface Shared {
	/** Values settled apart from their records (settleValue). */
	settled?: number;
	strings: Map<string, string>;
	dates: Map<unknown, Date>;
	/** Lists kept for sharing, by length (at most LIST_CANDIDATES each). */
	lists: Map<number, Array<readonly unknown[]>>;
}

/**
 * The string to keep for `value`: the first equal one of the file. V8's JSON.parse already makes every string
 * value shorter than UNSHARED_BELOW one string (it internalizes them), so those are kept as they are without a
 * lookup (three in four of a host's strings); past SHARED_STRING_MAX a string is rarely repeated.
 */
function sharedString(value: string, shared: Map<string, string>): string {
	if (value.length < UNSHARED_BELOW || value.length > SHARED_STRING_MAX) return value;
	const same = shared.get(value);
	if (same !== undefined) return same;
	shared.set(value, value);
	return value;
}

/** The Date a NeDB date object (`{"$$date": ms}`) stands for, one per instant of the file; undefined for any other value. */
function dateOf(value: object, dates: Map<unknown, Date>): Date | undefined {
	if (Array.isArray(value) || !Object.hasOwn(value, DATE_KEY)) return undefined;
	const at = (value as Doc)[DATE_KEY];
	let date = dates.get(at);
	if (date === undefined) dates.set(at, (date = new Date(at as number)));
	return date;
}

/**
 * A record as NeDB's own serialize writes it (a Date as `{"$$date": ms}`), by JSON.stringify without a replacer:
 * NeDB's calls a replacer for every key and value (a host has some 300): appending 5,000 hosts took 180-380 ms
 * (now 100), and rewriting 50,000 held the process 1.6 s at once (now 0.7; docs/storage.md). Only the
 * objects and lists on the way to a Date are copied. NeDB's replacer also checks every key, which NeDB's insert
 * and update already did for every record they take. `test/storage/nedb-file.spec.ts` holds it to NeDB's.
 */
export function serializeRecord(doc: Doc, deferred?: DeferredField): string {
	if (deferred) return serializeDeferred(doc, deferred, value => JSON.stringify(withNedbDates(value)));
	return JSON.stringify(withNedbDates(doc));
}

/** `value`, or a copy of it where it holds a Date at any depth, with each Date as NeDB writes it. */
function withNedbDates(value: unknown): unknown {
	if (value instanceof Date) return { [DATE_KEY]: value.getTime() };
	if (value === null || typeof value !== "object") return value;
	if (Array.isArray(value)) {
		let copy: unknown[] | null = null;
		for (let i = 0; i < value.length; i++) {
			const item: unknown = value[i];
			if (item === null || typeof item !== "object") continue;
			const written = withNedbDates(item);
			if (written !== item) (copy ??= value.slice())[i] = written;
		}
		return copy ?? value;
	}
	let copy: Doc | null = null;
	for (const key of Object.keys(value)) {
		const item = (value as Doc)[key];
		if (item === null || typeof item !== "object") continue;
		const written = withNedbDates(item);
		// defineProperty: a key `__proto__` stays a key (an assignment would set the copy's prototype).
		if (written !== item)
			Object.defineProperty((copy ??= { ...(value as Doc) }), key, {
				value: written,
				enumerable: true,
				writable: true,
				configurable: true,
			});
	}
	return copy ?? value;
}

/** What a file held: its records and index definitions, and whether its lines are exactly their compact form. */
interface Read {
	data: Doc[];
	indexes: Record<string, Doc>;
	compact: boolean;
}

/**
 * Reads `file` as NeDB would (see the header), READ_CHUNK at a time into two buffers used in turn: a stream
 * allocates a buffer per read, and at 1 MiB a read those buffers held 50-80 MiB of memory outside the heap at
 * ready, until collected.
 */
async function readLines(db: NedbFileDatastore, file: string, deferred?: DeferredField): Promise<Read> {
	const byId = new Map<unknown, Doc>();
	const shared: Shared = { strings: new Map(), dates: new Map(), lists: new Map() };
	const indexes: Record<string, Doc> = {};
	let lines = 0;
	let corrupt = 0;
	let indexLines = 0;
	let settled = 0;
	// Whether the file's first line is the marker of the deferred field: the lines after it are cut (nedb-deferred.ts).
	let marked = false;
	let markers = 0;
	// The start of a line whose end has not come yet: the chunks read since the last line ended.
	let rest: Buffer[] = [];
	// A line's bytes, decoded here (inside the try: a line too long to be a string is one corrupt line).
	// `offset`: where bytes[from] is in the file (a deferred field is read from there later).
	const take = (bytes: Buffer, from: number, to: number, offset: number) => {
		if (to > from && bytes[to - 1] === 0x0d) to--;
		if (to === from) return;
		lines++;
		try {
			let doc: Doc | undefined;
			let plain: boolean;
			// A line of a marked file with its deferred field last: the record without it is parsed, the field left in the file.
			const line = marked ? bytes.subarray(from, to) : null;
			const at = line ? line.indexOf(deferred!.key) : -1;
			const parts = at > 0 && bytes[to - 1] === 0x7d ? deferred!.cut(bytes, from, from + at, to, offset) : null;
			if (parts) {
				doc = parts.doc;
				// No `%` in the line: no encoded key in the record, its field included.
				plain = line!.indexOf(0x25) < 0;
			} else {
				const text = db.persistence.beforeDeserialization(bytes.toString("utf8", from, to));
				doc = JSON.parse(text) as Doc;
				if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new Error("not a record");
				plain = !text.includes("%");
			}
			if (++settled % SHARE_EPOCH === 0) {
				shared.strings.clear();
				shared.lists.clear();
			}
			settle(doc, shared);
			if (parts) deferred!.attach(doc, parts.field);
			if (plain) plainRecords.add(doc);
			if (doc._id) {
				if (doc.$$deleted === true) byId.delete(doc._id);
				else byId.set(doc._id, doc);
			} else if (doc.$$indexCreated && (doc.$$indexCreated as Doc).fieldName != null) {
				indexes[(doc.$$indexCreated as Doc).fieldName as string] = doc.$$indexCreated as Doc;
				indexLines++;
			} else if (typeof doc.$$indexRemoved === "string") {
				delete indexes[doc.$$indexRemoved];
				indexLines++;
			} else if (doc[DEFERRED_MARKER] !== undefined) {
				markers++;
				if (lines === 1 && deferred && doc[DEFERRED_MARKER] === deferred.field) marked = true;
			}
		} catch {
			corrupt++;
		}
	};
	// Lines are cut on the bytes, then each decoded: a newline byte is never part of a longer UTF-8 character,
	// and this spares decoding every chunk into a string and cutting that again. `chunk` is a read buffer used
	// again for the next reads: what is kept of it is copied.
	// Where the file's bytes not yet cut into lines start (the first of `rest`, or the next chunk).
	let lineOffset = 0;
	const cut = (chunk: Buffer, position: number) => {
		let from = 0;
		let end = chunk.indexOf(0x0a);
		if (end >= 0 && rest.length > 0) {
			const line = Buffer.concat([...rest, chunk.subarray(0, end)]);
			rest = [];
			take(line, 0, line.length, lineOffset);
			from = end + 1;
			end = chunk.indexOf(0x0a, from);
		}
		while (end >= 0) {
			take(chunk, from, end, position + from);
			from = end + 1;
			end = chunk.indexOf(0x0a, from);
		}
		if (from < chunk.length) {
			if (rest.length === 0) lineOffset = position + from;
			rest.push(Buffer.from(chunk.subarray(from)));
		}
	};
	// Two buffers in turn: the next read runs in the thread pool while this one's lines are parsed.
	const handle = await fs.promises.open(file, "r");
	let next: Promise<{ bytesRead: number; buffer: Buffer }> | null = null;
	try {
		// No larger than the file (a fleet-ctl process opens some thirty files, most of them small).
		const size = Math.max(1, Math.min(READ_CHUNK, (await handle.stat()).size));
		const buffers = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
		let position = 0;
		let turn = 0;
		next = handle.read(buffers[0], 0, size, 0);
		for (;;) {
			const { bytesRead, buffer } = await next;
			if (bytesRead === 0) break;
			const at = position;
			position += bytesRead;
			turn ^= 1;
			next = handle.read(buffers[turn], 0, size, position);
			cut(buffer.subarray(0, bytesRead), at);
		}
	} finally {
		// A read still under way (cutting threw) ends before the file is closed, its failure with it.
		await next?.catch(() => undefined);
		await handle.close();
	}
	const last = Buffer.concat(rest);
	take(last, 0, last.length, lineOffset);
	if (lines > 0 && corrupt / lines > db.persistence.corruptAlertThreshold) {
		const rate = corrupt / lines;
		throw Object.assign(
			new Error(
				`${Math.floor(100 * rate)}% of the data file is corrupt, more than given corruptAlertThreshold (${Math.floor(100 * db.persistence.corruptAlertThreshold)}%). Cautiously refusing to start NeDB to prevent dataloss.`,
			),
			{ corruptionRate: rate, corruptItems: corrupt, dataLength: lines },
		);
	}
	const data = [...byId.values()];
	// The compact form: one line per record, one per index definition (none for _id).
	const definitions = Object.keys(indexes).filter(f => f !== "_id").length;
	// A collection with a deferred field: its marker first, once; without one: no marker.
	const markerRight = deferred ? marked && markers === 1 : markers === 0;
	return {
		data,
		indexes,
		compact:
			markerRight && corrupt === 0 && lines === data.length + definitions + markers && indexLines === definitions,
	};
}

/**
 * A managed file: `checkGrowth` compacts it if it grew enough (the timer's check, callable), `stop` ends the checks
 * and the background parse of deferred fields; `deferred` is the collection's deferred field, if it has one.
 */
export interface ManagedFile {
	checkGrowth(): Promise<boolean>;
	stop(): void;
	deferred?: DeferredField;
	/** Parses the deferred fields the load left in the file, a slice per turn of the event loop, until none is left. */
	hydrateInBackground?(): void;
}

/** How long a turn of the event loop parses deferred fields in the background after a load (nedb-deferred.ts). */
const HYDRATE_SLICE_MS = 4;

/**
 * Takes over the load and the compaction of a file-backed datastore (call before loading it). `onCompact`
 * hears of every rewrite (tests, logs).
 */
export function manageNedbFile(
	db: NedbFileDatastore,
	onCompact: () => void = () => undefined,
	deferredField?: string,
): ManagedFile {
	if (db.inMemoryOnly || !db.filename) return { checkGrowth: async () => false, stop: () => undefined };
	const file = db.filename;
	const persistence = db.persistence;
	// A field is deferred only where lines are written as JSON.stringify makes them (no serialization hooks).
	const hooked = persistence.afterSerialization("{}") !== "{}" || persistence.beforeDeserialization("{}") !== "{}";
	const deferredShared: Shared = { strings: new Map(), dates: new Map(), lists: new Map(), settled: 0 };
	const deferred =
		deferredField && !hooked
			? new DeferredField(deferredField, (value, record) => settleValue(value, record, deferredField, deferredShared))
			: undefined;
	const line = (doc: Doc) => persistence.afterSerialization(serializeRecord(doc, deferred));
	// NeDB's rewrite (its persistCachedDatabaseAsync) with the records serialized by serializeRecord: its
	// crash-safe write of every record and of every index's definition but _id's.
	const rewrite = async () => {
		const lines = deferred ? [line({ [DEFERRED_MARKER]: deferred.field })] : [];
		for (const doc of db.getAllData()) lines.push(line(doc));
		for (const [fieldName, index] of Object.entries(
			db.indexes as Record<string, { unique: boolean; sparse: boolean }>,
		)) {
			if (fieldName !== "_id")
				lines.push(line({ $$indexCreated: { fieldName, unique: index.unique, sparse: index.sparse } }));
		}
		await storage.crashSafeWriteFileLinesAsync(file, lines, persistence.modes);
		db.emit("compaction.done");
	};
	// NeDB's append of written records (its persistNewStateAsync), serialized by serializeRecord. Appended at once,
	// not through libuv's thread pool: NeDB runs one operation at a time and waits for the append, and an open, a
	// write and a close each handed to the pool and back cost 110-140 µs of processor per write on the 2-core machine,
	// against 8 µs for the same three calls made here (docs/storage.md). Neither syncs the disk: a record is in the
	// page cache when the write is acknowledged, as with NeDB's own append. Then the event loop gets its turn before
	// the write is acknowledged: NeDB starts the next queued operation as soon as this one resolves, and with nothing
	// to wait for, a queue of writes (a job's 5,000 returns) would run to its end before any request or timer.
	persistence.persistNewStateAsync = async docs => {
		let text = "";
		for (const doc of docs) text += line(doc) + "\n";
		if (text.length === 0) return;
		fs.appendFileSync(file, text, { encoding: "utf8", mode: persistence.modes.fileMode });
		await new Promise<void>(resolve => setImmediate(resolve));
	};
	let compactSize = 0;
	let skipNextRewrite = false;
	const sizeNow = () => {
		try {
			return fs.statSync(file).size;
		} catch {
			return 0;
		}
	};
	persistence.treatRawStreamAsync = async stream => {
		// NeDB's stream reads 64 KiB at a time into a new buffer each, and waits for each read: at 50,000 hosts
		// (190 MB) that waiting was 0.3 s of the start with nothing to do. The file is read by readLines instead.
		(stream as NodeJS.ReadableStream & { destroy(): void }).destroy();
		deferred?.open(file);
		let read: Read;
		try {
			read = await readLines(db, file, deferred);
		} catch (err) {
			deferred?.loaded();
			throw err;
		}
		deferred?.loaded(read.data);
		// NeDB rewrites the file right after it loads it: not when the file is already its compact form.
		skipNextRewrite = read.compact;
		return { data: read.data, indexes: read.indexes };
	};
	// The loaded records go into NeDB's tree indexes in one sorted pass each (nedb-tree.ts), not one insert at a time.
	db._resetIndexes = data => {
		for (const index of Object.values(db.indexes)) {
			if (data && isTreeIndex(index)) resetTree(index, data);
			else (index as { reset(docs?: Doc[]): void }).reset(data);
		}
	};
	// The deferred fields a load left in the file, parsed a slice at a time, a turn of the event loop each.
	let hydrating: NodeJS.Immediate | null = null;
	let stopped = false;
	const hydrateInBackground = () => {
		if (!deferred?.waiting || hydrating || stopped) return;
		hydrating = setImmediate(() => {
			hydrating = null;
			if (deferred.hydrateSome(HYDRATE_SLICE_MS)) hydrateInBackground();
			else forget(deferredShared);
		});
	};
	persistence.persistCachedDatabaseAsync = async () => {
		if (skipNextRewrite) {
			skipNextRewrite = false;
			compactSize = sizeNow();
			return;
		}
		await rewrite();
		compactSize = sizeNow();
		onCompact();
	};
	const checkGrowth = async () => {
		if (sizeNow() - compactSize < Math.max(COMPACT_MIN_GROWTH, compactSize / 2)) return false;
		await db.compactDatafileAsync();
		return true;
	};
	const timer = setInterval(() => void checkGrowth().catch(() => undefined), COMPACT_CHECK_MS);
	timer.unref();
	const stop = () => {
		stopped = true;
		clearInterval(timer);
		if (hydrating) clearImmediate(hydrating);
		hydrating = null;
	};
	return { checkGrowth, stop, deferred, hydrateInBackground };
}
