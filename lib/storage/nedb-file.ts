/**
 * How an embedded (NeDB) datastore meets its file: loading it fast, and rewriting it only when that
 * gains something. NeDB itself, on every load, parses each line through a JSON reviver called for every
 * key of every record (a host's grains are hundreds), then rewrites the whole file to compact it, and
 * with autocompaction rewrites it again every interval: at 50,000 hosts a 181 MB file parsed in 3.7 s and
 * written again at every start and every ten minutes, whether anything changed or not. Here:
 *
 *   - each line is parsed by JSON.parse alone, NeDB's dates (`{"$$date": ms}`) revived by a walk that
 *     stops once it has found as many as the line holds; records, deletions and index definitions are
 *     read as NeDB reads them (the last line of an id wins, `$$deleted` removes it, lines NeDB cannot
 *     parse are counted against its corruption threshold);
 *   - the file is rewritten at load only when it holds more lines than the compact form would (superseded
 *     or deleted records, repeated index definitions, unparsable lines);
 *   - afterwards it is rewritten when it has grown by half since it was last compact (and by at least
 *     COMPACT_MIN_GROWTH bytes), checked every COMPACT_CHECK_MS: appends that supersede records
 *     pile up until then, never a rewrite for nothing.
 *
 * Only NeDB's own persistence methods of the one datastore are replaced (instance properties); its
 * format, its crash-safe rewrite and everything else stay NeDB's.
 */
import fs from "node:fs";

type Doc = Record<string, unknown>;

/** The parts of a NeDB datastore and its persistence this module takes over. */
export interface NedbFileDatastore {
	inMemoryOnly: boolean;
	filename?: string;
	indexes: Record<string, unknown>;
	getAllData(): Doc[];
	compactDatafileAsync(): Promise<void>;
	persistence: {
		corruptAlertThreshold: number;
		beforeDeserialization(line: string): string;
		treatRawStreamAsync(stream: NodeJS.ReadableStream): Promise<{ data: Doc[]; indexes: Record<string, Doc> }>;
		persistCachedDatabaseAsync(): Promise<void>;
	};
}

/** How often a file's growth is looked at. */
export const COMPACT_CHECK_MS = 10 * 60 * 1000;
/** A file is rewritten once it grew by half since it was compact, and by at least this much. */
export const COMPACT_MIN_GROWTH = 1 << 20;

const DATE_KEY = "$$date";

/** Counts the `"$$date"` keys in a line (NeDB writes each date as `{"$$date":<ms>}`). */
function countDates(line: string): number {
	let n = 0;
	for (let at = line.indexOf('"$$date"'); at !== -1; at = line.indexOf('"$$date"', at + 8)) n++;
	return n;
}

/**
 * Replaces NeDB's date objects by Dates, in place: top-level fields first (where nearly all are), then
 * deeper only while some are still missing. The walk keeps its own stack (no nesting can overflow it).
 */
function reviveDates(doc: Doc, expected: number): void {
	if (expected === 0) return;
	let found = 0;
	const stack: Array<Doc | unknown[]> = [];
	const visit = (holder: Doc | unknown[], key: string | number, value: unknown) => {
		if (value === null || typeof value !== "object") return;
		if (!Array.isArray(value) && Object.prototype.hasOwnProperty.call(value, DATE_KEY)) {
			(holder as Record<string | number, unknown>)[key] = new Date((value as Doc)[DATE_KEY] as number);
			found++;
		} else stack.push(value as Doc | unknown[]);
	};
	for (const key of Object.keys(doc)) visit(doc, key, doc[key]);
	while (found < expected && stack.length) {
		const node = stack.pop()!;
		if (Array.isArray(node)) for (let i = 0; i < node.length; i++) visit(node, i, node[i]);
		else for (const key of Object.keys(node)) visit(node, key, node[key]);
	}
}

/** What a file held: its records and index definitions, and whether its lines are exactly their compact form. */
interface Read {
	data: Doc[];
	indexes: Record<string, Doc>;
	compact: boolean;
}

function readLines(db: NedbFileDatastore, stream: NodeJS.ReadableStream): Promise<Read> {
	return new Promise((resolve, reject) => {
		const byId = new Map<unknown, Doc>();
		const indexes: Record<string, Doc> = {};
		let lines = 0;
		let corrupt = 0;
		let indexLines = 0;
		let rest = "";
		const take = (raw: string) => {
			const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
			if (line === "") return;
			lines++;
			try {
				const text = db.persistence.beforeDeserialization(line);
				const doc = JSON.parse(text) as Doc;
				if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new Error("not a record");
				reviveDates(doc, countDates(text));
				if (doc._id) {
					if (doc.$$deleted === true) byId.delete(doc._id);
					else byId.set(doc._id, doc);
				} else if (doc.$$indexCreated && (doc.$$indexCreated as Doc).fieldName != null) {
					indexes[(doc.$$indexCreated as Doc).fieldName as string] = doc.$$indexCreated as Doc;
					indexLines++;
				} else if (typeof doc.$$indexRemoved === "string") {
					delete indexes[doc.$$indexRemoved];
					indexLines++;
				}
			} catch {
				corrupt++;
			}
		};
		stream.setEncoding?.("utf8");
		stream.on("data", (chunk: string) => {
			const parts = (rest + chunk).split("\n");
			rest = parts.pop() as string;
			for (const part of parts) take(part);
		});
		stream.on("end", () => {
			take(rest);
			if (lines > 0 && corrupt / lines > db.persistence.corruptAlertThreshold) {
				const rate = corrupt / lines;
				reject(Object.assign(new Error(`${Math.floor(100 * rate)}% of the data file is corrupt, more than given corruptAlertThreshold (${Math.floor(100 * db.persistence.corruptAlertThreshold)}%). Cautiously refusing to start NeDB to prevent dataloss.`), { corruptionRate: rate, corruptItems: corrupt, dataLength: lines }));
				return;
			}
			const data = [...byId.values()];
			// The compact form: one line per record, one per index definition (none for _id).
			const definitions = Object.keys(indexes).filter(f => f !== "_id").length;
			resolve({ data, indexes, compact: corrupt === 0 && lines === data.length + definitions && indexLines === definitions });
		});
		stream.on("error", reject);
	});
}

/** A managed file: `checkGrowth` compacts it if it grew enough (the timer's check, callable), `stop` ends the checks. */
export interface ManagedFile {
	checkGrowth(): Promise<boolean>;
	stop(): void;
}

/**
 * Takes over the load and the compaction of a file-backed datastore (call before loading it). `onCompact`
 * hears of every rewrite (tests, logs).
 */
export function manageNedbFile(db: NedbFileDatastore, onCompact: () => void = () => undefined): ManagedFile {
	if (db.inMemoryOnly || !db.filename) return { checkGrowth: async () => false, stop: () => undefined };
	const file = db.filename;
	const persistence = db.persistence;
	const rewrite = persistence.persistCachedDatabaseAsync.bind(persistence);
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
		const read = await readLines(db, stream);
		// NeDB rewrites the file right after it loads it: not when the file is already its compact form.
		skipNextRewrite = read.compact;
		return { data: read.data, indexes: read.indexes };
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
	return { checkGrowth, stop: () => clearInterval(timer) };
}
