/**
 * The fleet's history as the stats service stores it (docs/statistics.md): every snapshot has a small
 * header; its host entries are stored whole in a keyframe now and then and, in between, as what changed
 * since the snapshot before (only the changed fields of the changed hosts). A full snapshot is a replay:
 * the keyframe at or before it, then every change up to it.
 *
 * The aggregated statistics are computed by one replay over their range, in the stats service, whatever
 * the store: the work is the keyframe plus the changes in the range (not snapshots × fleet). The
 * exceptions read what was stored for them: `online` unfiltered from the headers' counts (on MongoDB
 * bucketed in the database by onlinePipeline) or filtered on a counted field from each snapshot's counts
 * per value (Tally, countsReader); unfiltered unique statistics from period summaries.
 */
import type { Doc } from "../storage/store";
import type { Filter } from "../eve/query";
import { recordTest } from "../storage/nedb-plan";
import { badRequest } from "../eve/errors";
import { formatHttpDate, parseHttpDate } from "../eve/dates";
import { filterMentions } from "../eve/query";

/** The fields of a host entry besides `_id` (the spec's, then what the statistics need). */
export const ENTRY_FIELDS = [
	"version",
	"ip",
	"nodegroups",
	"_created",
	"_updated",
	"_soft_deleted",
	"status",
	"last_stateapply",
	"last_distupgrade",
	"groups",
];
/** Fields whose change alone is no new version of an entry: `_updated` moves with every heartbeat. */
const TRACKED = ENTRY_FIELDS.filter(f => f !== "_updated");

/** Internal: the index of the snapshot a host was first seen in (kept in keyframes; never shown). */
export const FIRST = "_first";
/** Internal: marks a change that removes the host from the snapshots. */
export const GONE = "_gone";

export type Entry = Doc;

/**
 * One stored document of snapshot `index`: a part of its keyframe (`full`) or of its changes, as `data`
 * (the encoded entries, see encodeEntries) or, in memory, as `entries`.
 */
export interface ChangeDoc {
	index: number;
	part: number;
	full: boolean;
	entries?: Doc[];
	data?: string;
}

const DATE_FIELDS = ["_created", "_updated", "last_stateapply", "last_distupgrade"];

/**
 * Entries as one JSON string, dates as epoch milliseconds. A month of changes is millions of small
 * entries: as strings they take a byte a character in the embedded store's memory (as objects, several
 * times that), and the same document on MongoDB. They are decoded one document at a time by a replay.
 */
export function encodeEntries(entries: Doc[]): string {
	return JSON.stringify(entries, function (this: Doc, key: string, value: unknown) {
		// JSON.stringify hands Dates to replacers already as strings; the holder still has the Date.
		const raw = this[key];
		return raw instanceof Date && DATE_FIELDS.includes(key) ? raw.getTime() : value;
	});
}

export function decodeEntries(data: string): Doc[] {
	const entries = JSON.parse(data) as Doc[];
	for (const e of entries) for (const f of DATE_FIELDS) if (typeof e[f] === "number") e[f] = new Date(e[f]);
	return entries;
}

function sameValue(a: unknown, b: unknown): boolean {
	if (a instanceof Date || b instanceof Date)
		return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
	if (Array.isArray(a) || Array.isArray(b))
		return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
	return (a ?? null) === (b ?? null);
}

/** A host record's fields as an entry: only the entry fields, dates as Dates, absent fields left out. */
export function toEntry(raw: Doc): Entry {
	const e: Entry = { _id: String(raw._id) };
	for (const f of ENTRY_FIELDS) {
		const v = raw[f];
		if (v === undefined || v === null) continue;
		e[f] =
			(f === "_created" || f === "_updated" || f === "last_stateapply" || f === "last_distupgrade") &&
			!(v instanceof Date)
				? new Date(v)
				: v;
	}
	e._soft_deleted = raw._soft_deleted === true;
	return e;
}

/**
 * What to store for a host whose entry was `prev` and is now `next`: null when no tracked field changed,
 * the whole entry for a host not in the previous snapshot, else `_id` and the changed fields (null for a
 * field now absent) with the new `_updated`.
 */
export function changeOf(prev: Entry | undefined, next: Entry): Doc | null {
	if (!prev) return { ...next };
	const change: Doc = { _id: next._id };
	let changed = false;
	for (const f of TRACKED) {
		if (!sameValue(prev[f], next[f])) {
			change[f] = next[f] ?? null;
			changed = true;
		}
	}
	if (!changed) return null;
	if (!sameValue(prev._updated, next._updated)) change._updated = next._updated ?? null;
	return change;
}

/** Applies a stored change to the entry (in place); answers the entry, or undefined for a host that left. */
function applyTo(entry: Entry | undefined, change: Doc): Entry | undefined {
	if (change[GONE]) return undefined;
	const out = entry ?? { _id: change._id };
	// for-in over a plain stored record: no array of pairs per change (millions per month-long replay).
	for (const k in change) {
		if (k === "_id") continue;
		const v = change[k];
		if (v === null) delete out[k];
		else out[k] = v;
	}
	return out;
}

/** Sees every entry that enters or leaves the state, to keep running counts. */
export interface ReplayVisitor {
	leave?(entry: Entry): void;
	/** `change`: the stored change that made the entry what it is (none for a keyframe's entry). */
	enter?(entry: Entry, change?: Doc): void;
	/** After every snapshot's documents were applied. */
	done?(index: number): void;
}

/** The fleet at one snapshot, rebuilt by replaying stored documents in (index, part) order. */
export class FleetState {
	readonly hosts = new Map<string, Entry>();
	index = -1;
	/** The counts of the hosts as they are (nextSnapshot keeps them up to date; any other replay drops them). */
	tally?: Tally;

	constructor(private readonly visitor: ReplayVisitor = {}) {}

	/** Applies the documents (sorted by index, then part); calls `done` after each snapshot's last one. */
	applyAll(docs: Iterable<ChangeDoc>): void {
		this.tally = undefined;
		let pending: number | null = null;
		let keyframeSeen: Set<string> | null = null;
		const finish = () => {
			if (pending === null) return;
			if (keyframeSeen) {
				// A keyframe is the whole fleet: whoever it does not list has left.
				for (const [id, e] of this.hosts) {
					if (keyframeSeen.has(id)) continue;
					this.visitor.leave?.(e);
					this.hosts.delete(id);
				}
				keyframeSeen = null;
			}
			this.index = pending;
			this.visitor.done?.(pending);
			pending = null;
		};
		for (const doc of docs) {
			if (pending !== null && doc.index !== pending) finish();
			pending = doc.index;
			if (doc.full) keyframeSeen ??= new Set();
			for (const change of doc.entries ?? decodeEntries(doc.data ?? "[]")) {
				const id = String(change._id);
				const before = this.hosts.get(id);
				if (before) this.visitor.leave?.(before);
				let after: Entry | undefined;
				if (doc.full) {
					after = { ...change };
					after[FIRST] ??= before?.[FIRST] ?? doc.index;
					keyframeSeen!.add(id);
				} else {
					after = applyTo(before, change);
					if (after && after[FIRST] === undefined) after[FIRST] = doc.index;
				}
				if (after) {
					this.hosts.set(id, after);
					this.visitor.enter?.(after, doc.full ? undefined : change);
				} else this.hosts.delete(id);
			}
		}
		finish();
	}

	/** The entries as a snapshot shows them: sorted by `_id`, without internal fields. */
	entries(): Entry[] {
		return [...this.hosts.values()]
			.map(e => {
				const { [FIRST]: _first, ...rest } = e;
				return rest;
			})
			.sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0));
	}
}

/** Entries per stored document: a keyframe of a large fleet stays far below MongoDB's 16 MB per document. */
export const PART_ENTRIES = 2000;

/**
 * Snapshot `index` (its header's id: `snapshot`) from the fleet at the previous one (`state`, brought forward in place) and the hosts
 * read now: all of them when `complete` (hosts it no longer lists have left), else only those written
 * since. Answers the documents to store (the whole fleet in a keyframe, else what changed) and the
 * counts of its live hosts.
 */
export function nextSnapshot(
	state: FleetState,
	read: Entry[],
	complete: boolean,
	index: number,
	keyframe: boolean,
	snapshot = String(index),
): { docs: Doc[]; counts: Doc; up: number; down: number } {
	const changes: Doc[] = [];
	for (const e of read) {
		const change = changeOf(state.hosts.get(e._id), e);
		if (change) changes.push(change);
	}
	if (complete) {
		const present = new Set(read.map(e => e._id));
		for (const id of state.hosts.keys()) if (!present.has(id)) changes.push({ _id: id, [GONE]: true });
	}
	// The counts follow the changed hosts only: out before the change (it is applied in place), in after it.
	const tally = state.tally ?? Tally.of(state.hosts.values());
	for (const change of changes) {
		const before = state.hosts.get(change._id);
		if (before) tally.count(before, -1);
	}
	state.applyAll([{ index, part: 0, full: false, entries: changes }]);
	for (const change of changes) {
		const after = state.hosts.get(change._id);
		if (after) tally.count(after, 1);
	}
	state.tally = tally;
	const stored = keyframe ? [...state.hosts.values()] : changes;
	const docs: Doc[] = [];
	for (let part = 0; part * PART_ENTRIES < stored.length || part === 0; part++) {
		docs.push({
			_id: `${snapshot}-${part}`,
			snapshot,
			index,
			part,
			full: keyframe,
			data: encodeEntries(stored.slice(part * PART_ENTRIES, (part + 1) * PART_ENTRIES)),
		});
	}
	const [up, down, other] = tally.total;
	return { docs, counts: { _id: `${snapshot}-counts`, snapshot, index, counts: tally.rows() }, up, down: down + other };
}

// ---------------------------------------------------------------- counts per value (filtered `online`)

/**
 * The entry fields whose live hosts every snapshot counts per value (and per status), so that `online`
 * filtered on one of them reads those counts instead of replaying the changes of its range. Those with
 * one value per host (`status`, `version`: the hosts service stores strings) may be asked with `$in` of
 * several values; the lists (`nodegroups`, `groups`) with one value at a time.
 */
export const COUNTED_FIELDS = ["status", "nodegroups", "groups", "version"];
const SINGLE_VALUED = new Set(["status", "version"]);
/** Beyond this many (field, value) rows a snapshot stores no counts (filtered `online` over it replays). */
export const MAX_COUNT_ROWS = 5000;

/** Status columns of a count: `up`, `down`, anything else (`unknown`, none). */
const STATUS_COLUMN = (status: unknown): number => (status === "up" ? 0 : status === "down" ? 1 : 2);

/** The live (not soft-deleted) hosts of a snapshot counted by status, in all and per value of each counted field. */
export class Tally {
	/** [up, down, other] over every live host. */
	readonly total = [0, 0, 0];
	private readonly byValue = new Map<string, number[]>();

	static of(entries: Iterable<Entry>): Tally {
		const t = new Tally();
		for (const e of entries) t.count(e, 1);
		return t;
	}

	/** Adds (`sign` 1) or takes away (-1) one entry. */
	count(e: Entry, sign: number): void {
		if (e._soft_deleted === true) return;
		const col = STATUS_COLUMN(e.status);
		this.total[col] += sign;
		for (const field of COUNTED_FIELDS) {
			const v = e[field];
			if (typeof v === "string") this.add(field, v, col, sign);
			else if (Array.isArray(v))
				// A value listed twice is one match of an equality filter, counted once.
				v.forEach((x, i) => {
					if (typeof x === "string" && v.indexOf(x) === i) this.add(field, x, col, sign);
				});
		}
	}

	private add(field: string, value: string, col: number, sign: number): void {
		const key = `${field}\0${value}`;
		let row = this.byValue.get(key);
		if (!row) this.byValue.set(key, (row = [0, 0, 0]));
		row[col] += sign;
		if (sign < 0 && row[0] === 0 && row[1] === 0 && row[2] === 0) this.byValue.delete(key);
	}

	/**
	 * The stored form: one flat list `[field, value, up, down, other, field, value, …]` (values are host data:
	 * as keys they would need escaping in both stores), or null past MAX_COUNT_ROWS.
	 */
	rows(): Array<string | number> | null {
		if (this.byValue.size > MAX_COUNT_ROWS) return null;
		const out: Array<string | number> = [];
		for (const [key, [up, down, other]] of this.byValue) {
			const cut = key.indexOf("\0");
			out.push(key.slice(0, cut), key.slice(cut + 1), up, down, other);
		}
		return out;
	}
}

/** Reads a snapshot's stored counts: [up, down] of the hosts a `where` selects. */
export type CountsReader = (rows: Array<string | number>) => { up: number; down: number };

/**
 * A reader of stored counts equivalent to `where`, or null when the counts cannot answer it. They answer
 * a conjunction of at most one condition on `nodegroups`, `groups` or `version` and at most one on
 * `status`, each an equality, `$eq` or `$in` of strings (`$in` of several values only on the single-valued
 * fields). Whatever else (`_id`, `ip`, `$or`, `$ne`, ranges, `_soft_deleted`) is replayed.
 */
export function countsReader(where: Filter): CountsReader | null {
	const conjuncts: Array<[string, unknown]> = [];
	const flatten = (f: unknown): boolean => {
		if (!f || typeof f !== "object" || Array.isArray(f)) return false;
		for (const [k, v] of Object.entries(f)) {
			if (k === "$and") {
				if (!Array.isArray(v) || !v.every(flatten)) return false;
			} else if (k.startsWith("$")) return false;
			else conjuncts.push([k, v]);
		}
		return true;
	};
	if (!flatten(where) || conjuncts.length === 0) return null;
	let facet: { field: string; values: string[] } | null = null;
	let statuses: string[] | null = null;
	for (const [field, cond] of conjuncts) {
		const values = stringValues(cond);
		if (!values || !COUNTED_FIELDS.includes(field)) return null;
		if (values.length > 1 && !SINGLE_VALUED.has(field)) return null;
		if (field === "status" && !statuses) statuses = values;
		else if (field !== "status" && !facet) facet = { field, values };
		else return null;
	}
	if (!facet) {
		// Status alone: the `status` rows (each holds its hosts in one column).
		facet = { field: "status", values: statuses! };
		statuses = null;
	}
	// Combined with a status, a facet's rows give only the up and down columns.
	if (statuses?.some(s => s !== "up" && s !== "down")) return null;
	const { field, values } = facet;
	const want = new Set(values);
	const cols = statuses ? [statuses.includes("up"), statuses.includes("down"), false] : [true, true, true];
	return rows => {
		let up = 0;
		let down = 0;
		for (let i = 0; i + 4 < rows.length; i += 5) {
			if (rows[i] !== field || !want.has(rows[i + 1] as string)) continue;
			if (cols[0]) up += rows[i + 2] as number;
			if (cols[1]) down += rows[i + 3] as number;
			if (cols[2]) down += rows[i + 4] as number;
		}
		return { up, down };
	};
}

/** The strings an equality, `$eq` or `$in` condition asks for (deduplicated), or null for any other condition. */
function stringValues(cond: unknown): string[] | null {
	if (typeof cond === "string") return [cond];
	if (!cond || typeof cond !== "object" || Array.isArray(cond) || cond instanceof Date) return null;
	const keys = Object.keys(cond);
	if (keys.length !== 1) return null;
	const v = (cond as Record<string, unknown>)[keys[0]];
	if (keys[0] === "$eq") return typeof v === "string" ? [v] : null;
	if (keys[0] === "$in")
		return Array.isArray(v) && v.length > 0 && v.every(x => typeof x === "string") ? [...new Set(v as string[])] : null;
	return null;
}

// ---------------------------------------------------------------- the statistics' parameters

/** At most this many points in one `online` answer. */
export const MAX_POINTS = 100_000;

export interface Range {
	start: Date;
	end: Date;
}

/** `range[]` (or `range`) given twice: start and end as HTTP-dates, start not after end. */
export function parseRange(values: string[]): Range {
	if (values.length === 0)
		throw badRequest(
			"`range[]` is required: two HTTP-dates (start, end), e.g. range[]=Mon, 01 Jan 2024 00:00:00 GMT&range[]=Tue, 02 Jan 2024 00:00:00 GMT",
		);
	if (values.length !== 2)
		throw badRequest(`\`range[]\` needs exactly two HTTP-dates (start, end), got ${values.length}`);
	const [start, end] = values.map(v => parseHttpDate(v.trim()));
	if (!start || !end)
		throw badRequest(
			`\`range[]\` values must be HTTP-dates like 'Mon, 01 Jan 2024 00:00:00 GMT', got '${(start ? values[1] : values[0]).slice(0, 60)}'`,
		);
	if (start > end) throw badRequest("`range[]` is reversed: the start is after the end");
	return { start, end };
}

/** `interval` in seconds: a positive integer giving at most MAX_POINTS points over the range. */
export function parseInterval(raw: string | undefined, range: Range): number {
	if (raw === undefined || raw.trim() === "")
		throw badRequest("`interval` is required: the seconds between two neighbouring points");
	const n = Number(raw);
	if (!Number.isSafeInteger(n) || n < 1) throw badRequest("`interval` must be a positive integer (seconds)");
	const points = Math.floor((range.end.getTime() - range.start.getTime()) / (n * 1000)) + 1;
	if (points > MAX_POINTS)
		throw badRequest(`\`interval\` ${n} s gives ${points} points over this range; at most ${MAX_POINTS} are answered`);
	return n;
}

/**
 * An entry test from a checked `where` (on entry fields; `_id` is the hostname). Soft-deleted hosts are
 * not counted unless the filter names `_soft_deleted`, as the REST layer hides them unless asked.
 * The filter is matched with the same rewrite the NeDB store uses, whatever the store.
 */
export function entryTest(where: Filter): EntryTest {
	const live = !filterMentions(where, "_soft_deleted");
	const fields = new Set(["_soft_deleted"]);
	collectFields(where, fields);
	if (Object.keys(where).length === 0)
		return Object.assign(live ? (e: Entry) => e._soft_deleted !== true : () => true, { fields });
	const test = recordTest(where);
	return Object.assign((e: Entry) => (!live || e._soft_deleted !== true) && test(e), { fields });
}

/** An entry test, and the top-level entry fields its answer depends on. */
export type EntryTest = ((e: Entry) => boolean) & { fields: Set<string> };

function collectFields(filter: unknown, out: Set<string>): void {
	if (Array.isArray(filter)) for (const f of filter) collectFields(f, out);
	else if (filter && typeof filter === "object" && !(filter instanceof Date))
		for (const [k, v] of Object.entries(filter)) {
			if (k.startsWith("$")) collectFields(v, out);
			else out.add(k.split(".")[0]);
		}
}

/**
 * The test, remembered per host: asked again only when a change touches a field the filter names (a
 * status flip does not change whether a host is in nodegroup "web"). Replays of filtered statistics
 * call it for every change of the range.
 */
function cachedTest(test: EntryTest): { matches(e: Entry, change?: Doc): boolean; was(e: Entry): boolean } {
	const known = new Map<string, boolean>();
	return {
		matches(e, change) {
			let m = known.get(e._id);
			if (m === undefined || !change || Object.keys(change).some(k => test.fields.has(k))) {
				m = test(e);
				known.set(e._id, m);
			}
			return m;
		},
		was: e => known.get(e._id) === true,
	};
}

// ---------------------------------------------------------------- the statistics

export interface Snap {
	index: number;
	/** Epoch milliseconds. */
	timestamp: number;
}

export interface OnlinePoint {
	/** The bucket's start as an HTTP-date: made here, a point is not copied again to render a Date (43,200 of them a month at one minute). */
	timestamp: string;
	_id: null;
	hostnames: { up: number; down: number };
}

/**
 * The snapshot each point of `online` shows: of the range's complete snapshots in a bucket of `interval`
 * seconds from the range's start, the one of highest index — what onlinePipeline keeps on MongoDB (`$last`
 * after sorting by index) — with the up and down counts the point shows (the header's stored ones, until a
 * filter's are set). Fed the headers in any order; one slot per bucket in typed arrays (at most MAX_POINTS),
 * so a month of one-minute snapshots is read without an object per snapshot.
 */
export class BucketLasts {
	private readonly start: number;
	private readonly end: number;
	private readonly width: number;
	private readonly index: Float64Array;
	private readonly up: Float64Array;
	private readonly down: Float64Array;
	/** How many buckets hold a snapshot. */
	size = 0;

	constructor(range: Range, interval: number) {
		this.start = range.start.getTime();
		this.end = range.end.getTime();
		this.width = interval * 1000;
		const buckets = Math.floor((this.end - this.start) / this.width) + 1;
		this.index = new Float64Array(buckets).fill(-1);
		this.up = new Float64Array(buckets);
		this.down = new Float64Array(buckets);
	}

	/** A complete snapshot: shown if it lies in the range and is the latest of its bucket so far. */
	offer(index: number, timestamp: number, up: number, down: number): void {
		if (!(timestamp >= this.start && timestamp <= this.end)) return;
		const b = Math.floor((timestamp - this.start) / this.width);
		if (index <= this.index[b]) return;
		if (this.index[b] < 0) this.size++;
		this.index[b] = index;
		this.up[b] = up;
		this.down[b] = down;
	}

	/** The shown snapshots' indexes, in bucket order. */
	indexes(): number[] {
		const out: number[] = [];
		for (let b = 0; b < this.index.length; b++) if (this.index[b] >= 0) out.push(this.index[b]);
		return out;
	}

	/**
	 * Sets each shown snapshot's counts to those `count` gives for it. Where it gives none: with "stop", false at
	 * once (the counts are then partly set); with "drop", that bucket shows no point.
	 */
	recount(
		count: (index: number) => { up: number; down: number } | null | undefined,
		missing: "stop" | "drop",
	): boolean {
		for (let b = 0; b < this.index.length; b++) {
			if (this.index[b] < 0) continue;
			const c = count(this.index[b]);
			if (c) {
				this.up[b] = c.up;
				this.down[b] = c.down;
			} else if (missing === "stop") return false;
			else {
				this.index[b] = -1;
				this.size--;
			}
		}
		return true;
	}

	/** The points in bucket order: each bucket's start as an HTTP-date (made here: no Date to render later) and its counts. */
	points(): OnlinePoint[] {
		const out: OnlinePoint[] = [];
		for (let b = 0; b < this.index.length; b++) {
			if (this.index[b] < 0) continue;
			out.push({
				timestamp: formatHttpDate(new Date(this.start + b * this.width)),
				_id: null,
				hostnames: { up: this.up[b], down: this.down[b] },
			});
		}
		return out;
	}
}

/**
 * `online` by replaying the changes: each shown snapshot's counts become those of the entries `test` selects
 * (up: status "up"; down: the others). `docs` are every stored document from the keyframe at or before the
 * first shown snapshot to the last.
 */
export function online(docs: Iterable<ChangeDoc>, lasts: BucketLasts, test: EntryTest): OnlinePoint[] {
	if (!lasts.size) return [];
	let up = 0;
	let down = 0;
	const cache = cachedTest(test);
	const count = (e: Entry, sign: number) => {
		if (e.status === "up") up += sign;
		else down += sign;
	};
	const shown = new Set(lasts.indexes());
	const counted = new Map<number, { up: number; down: number }>();
	new FleetState({
		// Before the change: whether the entry counted is what the cache says of it.
		leave: e => {
			if (cache.was(e)) count(e, -1);
		},
		enter: (e, change) => {
			if (cache.matches(e, change)) count(e, 1);
		},
		done: index => {
			if (shown.has(index)) counted.set(index, { up, down });
		},
	}).applyAll(docs);
	// A snapshot the documents do not reach shows no point.
	lasts.recount(index => counted.get(index), "drop");
	return lasts.points();
}

/**
 * The same as BucketLasts from the stored counts, as a MongoDB aggregation pipeline over the headers: the range's complete
 * headers in index order, grouped by bucket number (⌊(timestamp − start) / interval⌋, the date difference
 * being milliseconds) keeping the last one's counts, in bucket order. Built only from the checked range and
 * interval. Its operators ($subtract of dates, $divide, $floor, $last after $sort) are in MongoDB since 3.2.
 */
export function onlinePipeline(range: Range, interval: number): Doc[] {
	return [
		{ $match: { complete: true, timestamp: { $gte: range.start, $lte: range.end } } },
		// Sorting only the counted fields keeps the in-memory sort small (a month is 43,200 headers).
		{ $project: { _id: 0, index: 1, timestamp: 1, up: 1, down: 1 } },
		{ $sort: { index: 1 } },
		{
			$group: {
				_id: { $floor: { $divide: [{ $subtract: ["$timestamp", range.start] }, interval * 1000] } },
				up: { $last: "$up" },
				down: { $last: "$down" },
			},
		},
		{ $sort: { _id: 1 } },
	];
}

/** The points from onlinePipeline's answer (`_id` the bucket number). */
export function onlineFromBuckets(buckets: Doc[], range: Range, interval: number): OnlinePoint[] {
	const start = range.start.getTime();
	return buckets.map(b => ({
		timestamp: formatHttpDate(new Date(start + Number(b._id) * interval * 1000)),
		_id: null,
		hostnames: { up: Number(b.up), down: Number(b.down) },
	}));
}

/**
 * Calls `look` with every entry of the snapshot `first` and then with every entry that changes in a snapshot
 * up to `last`: each entry any snapshot of [first, last] holds, at least once (an entry unchanged over
 * several snapshots is seen once).
 */
export function eachInRange(
	docs: Iterable<ChangeDoc>,
	first: number,
	last: number,
	look: (e: Entry, change?: Doc) => void,
): void {
	let inRange = false;
	const state = new FleetState({
		enter: (e, change) => {
			if (inRange) look(e, change);
		},
		done: index => {
			if (!inRange && index >= first && index <= last) {
				// The state at the range's first snapshot counts whole, once; after it, only what changes.
				inRange = true;
				for (const e of state.hosts.values()) look(e);
			}
			if (index >= last) inRange = false;
		},
	});
	state.applyAll(docs);
}

/**
 * The hosts that match `test` in at least one snapshot of [first, last] (`all`), and those of them whose
 * entry also met `hit` in one of those snapshots (`hits`).
 */
export function uniqueHosts(
	docs: Iterable<ChangeDoc>,
	first: number,
	last: number,
	test: EntryTest,
	hit: (e: Entry) => boolean,
): { all: Set<string>; hits: Set<string> } {
	const all = new Set<string>();
	const hits = new Set<string>();
	const cache = cachedTest(test);
	eachInRange(docs, first, last, (e, change) => {
		if (!cache.matches(e, change)) return;
		all.add(e._id);
		if (!hits.has(e._id) && hit(e)) hits.add(e._id);
	});
	return { all, hits };
}

/**
 * What the unfiltered statistics need of one keyframe period (snapshots [from, to]), computed once when
 * the period ends: the live hosts, those up at least once, the state-apply and dist-upgrade times their
 * live entries showed (ms), and the hosts first seen in it. A statistic over whole periods unions these.
 * The times are lists of `{id, t}`, not objects keyed by hostname: hostnames hold dots, which neither
 * NeDB nor the MongoDB driver accept in field names.
 */
export interface PeriodSummary {
	/** The layout of the summary (SUMMARY_FORM); older ones are made again when read. */
	form: number;
	from: number;
	to: number;
	all: string[];
	up: string[];
	fresh: string[];
	applies: HostTimes[];
	upgrades: HostTimes[];
}

/** A host and the times (epoch ms, ascending) one of its date fields showed in a period. */
export interface HostTimes {
	id: string;
	t: number[];
}

/** The current layout of period summaries (older ones kept times in objects keyed by hostname). */
export const SUMMARY_FORM = 2;

/** Whether a stored summary is the one of period [from, to] in the current form. */
export function currentSummary(found: Doc | null | undefined, to: number): found is PeriodSummary {
	return (
		!!found &&
		found.form === SUMMARY_FORM &&
		found.to === to &&
		Array.isArray(found.applies) &&
		Array.isArray(found.upgrades)
	);
}

/** Which list of a period summary each unfiltered unique statistic unions. */
export const SUMMARY_FIELD: Record<string, "up" | "applies" | "upgrades" | "fresh"> = {
	unique_online: "up",
	unique_updated: "applies",
	unique_dist_upgraded: "upgrades",
	new_hosts: "fresh",
};

/**
 * The union of period summaries in the database (MongoDB): the hostnames in list `field` of the current
 * summaries of the periods starting at `froms`, or, for a list of host times (`applies`, `upgrades`), of
 * the hosts with a time inside the range. The database answers one document `{_id: null, ids}` (none when
 * nothing matched); summaryHits is the same selection in the service.
 */
export function summaryUnionPipeline(
	froms: number[],
	field: "all" | "up" | "fresh" | "applies" | "upgrades",
	range: Range,
): Doc[] {
	const head: Doc[] = [
		{ $match: { from: { $in: froms }, form: SUMMARY_FORM } },
		{ $project: { _id: 0, [field]: 1 } },
		{ $unwind: `$${field}` },
	];
	if (field !== "applies" && field !== "upgrades")
		return [...head, { $group: { _id: null, ids: { $addToSet: `$${field}` } } }];
	return [
		...head,
		{ $unwind: `$${field}.t` },
		{ $match: { [`${field}.t`]: { $gte: range.start.getTime(), $lte: range.end.getTime() } } },
		{ $group: { _id: null, ids: { $addToSet: `$${field}.id` } } },
	];
}

export function summarize(docs: Iterable<ChangeDoc>, from: number, to: number): PeriodSummary {
	const all = new Set<string>();
	const up = new Set<string>();
	const fresh = new Set<string>();
	const applies = new Map<string, Set<number>>();
	const upgrades = new Map<string, Set<number>>();
	const note = (m: Map<string, Set<number>>, id: string, d: unknown) => {
		if (!(d instanceof Date)) return;
		let times = m.get(id);
		if (!times) m.set(id, (times = new Set()));
		times.add(d.getTime());
	};
	eachInRange(docs, from, to, e => {
		if (e[FIRST] >= from && e[FIRST] <= to) fresh.add(e._id);
		if (e._soft_deleted === true) return;
		all.add(e._id);
		if (e.status === "up") up.add(e._id);
		note(applies, e._id, e.last_stateapply);
		note(upgrades, e._id, e.last_distupgrade);
	});
	const plain = (m: Map<string, Set<number>>): HostTimes[] =>
		[...m].map(([id, t]) => ({ id, t: [...t].sort((a, b) => a - b) }));
	return {
		form: SUMMARY_FORM,
		from,
		to,
		all: [...all],
		up: [...up],
		fresh: [...fresh],
		applies: plain(applies),
		upgrades: plain(upgrades),
	};
}

/** The hits of one unfiltered statistic in a period summary (`first`, `last`: the range's snapshots). */
export function summaryHits(kind: string, summary: PeriodSummary, range: Range): string[] {
	const from = range.start.getTime();
	const to = range.end.getTime();
	const within = (times: HostTimes[]) => times.filter(h => h.t.some(t => t >= from && t <= to)).map(h => h.id);
	switch (kind) {
		case "unique_online":
			return summary.up;
		case "unique_updated":
			return within(summary.applies);
		case "unique_dist_upgraded":
			return within(summary.upgrades);
		default:
			return summary.fresh;
	}
}

/** Whether a date field of the entry lies in the range (inclusive). */
export function happenedIn(field: string, range: Range): (e: Entry) => boolean {
	const from = range.start.getTime();
	const to = range.end.getTime();
	return e => e[field] instanceof Date && e[field].getTime() >= from && e[field].getTime() <= to;
}
