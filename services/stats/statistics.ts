/**
 * The statistics over a range (`online`, `unique_*`, `new_hosts`; docs/statistics.md): replaying the changes
 * of the range from the keyframe before it, or — for whole keyframe periods on MongoDB — unioning the periods'
 * summaries in the database.
 */
import { QueryArgs, parseWhere } from "../../lib/eve/query";
import { DuplicateKeyError, type Doc, type Store } from "../../lib/storage/store";
import {
	BucketLasts,
	FIRST,
	FleetState,
	entryTest,
	happenedIn,
	online,
	onlineFromBuckets,
	onlinePipeline,
	countsReader,
	parseInterval,
	parseRange,
	uniqueHosts,
	summarize,
	currentSummary,
	summaryHits,
	summaryUnionPipeline,
	SUMMARY_FIELD,
	SUMMARY_FORM,
	type PeriodSummary,
	type ChangeDoc,
	type Entry,
	type EntryTest,
	type Range,
	type Snap,
} from "../../lib/fleet/stats-history";
import { COUNTS, PERIODS } from "./history";
import type { StatsThis } from "./history";
import type { Header } from "./history";

/** Counts wanted for at least one snapshot in this many of a run are read as the run's range. */
const DENSE_SHARE = 4;

/** The lowest and the highest of a non-empty list of snapshot indexes. */
function spanOf(indexes: number[]): [number, number] {
	let low = indexes[0];
	let high = indexes[0];
	for (const i of indexes) {
		if (i < low) low = i;
		if (i > high) high = i;
	}
	return [low, high];
}

export const statisticMethods = {
	async keyframeFor(this: StatsThis, index: number): Promise<Header | null> {
		const [kf] = await this.store.find(
			{ keyframe: true, complete: true, index: { $lte: index } },
			{ sort: [["index", -1]], limit: 1, only: ["index"] },
		);
		return (kf as Header) ?? null;
	},

	/**
	 * The stored documents of snapshots [from, to], in order. On NeDB they are the records themselves
	 * (no copy of millions of entries): only read, and only during the call; no one updates them in place.
	 */
	async loadDocs(this: StatsThis, from: number, to: number): Promise<ChangeDoc[]> {
		const out: ChangeDoc[] = [];
		const changes: Store = this.changes();
		await changes.scan({ index: { $gte: from, $lte: to } }, ["index", "part", "full", "data"], d =>
			out.push(d as ChangeDoc),
		);
		return out.sort((a, b) => a.index - b.index || a.part - b.part);
	},

	/** The fleet at snapshot `index` (the last one taken here is kept, known by its header's id: an index may be reused after an undo). */
	async stateAt(this: StatsThis, index: number, id: string): Promise<FleetState> {
		if (this.cached?.id === id) return this.cached.state;
		const kf = await this.keyframeFor(index);
		const state = new FleetState();
		if (kf) state.applyAll(await this.loadDocs(kf.index, index));
		this.cached = { id, index, state };
		return state;
	},

	/**
	 * The stored counts of these snapshots, by index (null where a snapshot stored none; undefined where it is
	 * not found). Dense indexes are read as one range, into a list by offset: no map of 43,200 entries.
	 */
	async countsOf(
		this: StatsThis,
		indexes: number[],
	): Promise<(index: number) => Array<string | number> | null | undefined> {
		const rowsOf = (d: Doc) => (Array.isArray(d.counts) ? (d.counts as Array<string | number>) : null);
		if (!indexes.length) return () => undefined;
		const [low, high] = spanOf(indexes);
		if (indexes.length * DENSE_SHARE >= high - low + 1) {
			// Most of a run of snapshots (a one-minute interval over one-minute snapshots: all of them): one range
			// read, not a lookup per index. The counts of those between them come too (at most three in four).
			const at: Array<Array<string | number> | null | undefined> = new Array(high - low + 1);
			await this.stores[COUNTS].scan({ index: { $gte: low, $lte: high } }, ["index", "counts"], d => {
				at[d.index - low] = rowsOf(d);
			});
			return index => at[index - low];
		}
		const out = new Map<number, Array<string | number> | null>();
		// In chunks: a month of one-minute snapshots at a five-minute interval is 8,640 of them.
		for (let i = 0; i < indexes.length; i += 5000)
			await this.stores[COUNTS].scan({ index: { $in: indexes.slice(i, i + 5000) } }, ["index", "counts"], d =>
				out.set(d.index, rowsOf(d)),
			);
		return index => out.get(index);
	},

	/** Each bucket's latest complete snapshot of the range, with the counts its header stores. */
	async bucketLasts(this: StatsThis, range: Range, interval: number): Promise<BucketLasts> {
		const lasts = new BucketLasts(range, interval);
		await this.store.scan(
			{ complete: true, timestamp: { $gte: range.start, $lte: range.end } },
			["index", "timestamp", "up", "down"],
			d => {
				lasts.offer(
					d.index,
					d.timestamp instanceof Date ? d.timestamp.getTime() : Date.parse(d.timestamp),
					d.up,
					d.down,
				);
			},
		);
		return lasts;
	},

	/** The complete snapshots whose timestamp lies in the range, in index order. */
	async snapsIn(this: StatsThis, range: Range): Promise<Array<Snap & { up: number; down: number }>> {
		const out: Array<Snap & { up: number; down: number }> = [];
		await this.store.scan(
			{ complete: true, timestamp: { $gte: range.start, $lte: range.end } },
			["index", "timestamp", "up", "down"],
			d => {
				out.push({
					index: d.index,
					timestamp: d.timestamp instanceof Date ? d.timestamp.getTime() : Date.parse(d.timestamp),
					up: d.up,
					down: d.down,
				});
			},
		);
		return out.sort((a, b) => a.index - b.index);
	},

	/** Runs one of the five statistics for a request. */
	async statistic(this: StatsThis, kind: string, query: unknown): Promise<unknown> {
		const args = QueryArgs.from(query);
		const range = parseRange([...args.all("range[]"), ...args.all("range")]);
		const where = parseWhere(args.get("where"));
		const interval = kind === "online" ? parseInterval(args.get("interval"), range) : 0;
		if (kind === "online") {
			const filtered = Object.keys(where).length > 0;
			// No filter: the headers' stored counts, on MongoDB bucketed in the database.
			if (!filtered && this.store.aggregate)
				return onlineFromBuckets(await this.store.aggregate(onlinePipeline(range, interval)), range, interval);
			const lasts = await this.bucketLasts(range, interval);
			if (!filtered || !lasts.size) return lasts.points();
			// A filter the stored counts answer reads those of the shown snapshots, not the changes.
			const shown = lasts.indexes();
			const reader = countsReader(where);
			if (reader) {
				const rows = await this.countsOf(shown);
				const counts = (index: number) => {
					const r = rows(index);
					return r ? reader(r) : null;
				};
				if (lasts.recount(counts, "stop")) return lasts.points();
			}
			// Otherwise the changes are replayed from the keyframe before the first shown snapshot to the last.
			const [first, last] = spanOf(shown);
			const kf = await this.keyframeFor(first);
			return online(kf ? await this.loadDocs(kf.index, last) : [], lasts, entryTest(where));
		}
		const snaps = await this.snapsIn(range);
		const test = entryTest(where);
		const first = snaps[0]?.index ?? 0;
		const last = snaps[snaps.length - 1]?.index ?? -1;
		const hit: (e: Entry) => boolean = {
			unique_online: (e: Entry) => e.status === "up",
			unique_updated: happenedIn("last_stateapply", range),
			unique_dist_upgraded: happenedIn("last_distupgrade", range),
			new_hosts: (e: Entry) => e[FIRST] >= first && e[FIRST] <= last,
		}[kind] as (e: Entry) => boolean;
		const { all, hits }: { all: Set<string>; hits: Set<string> } = !snaps.length
			? { all: new Set(), hits: new Set() }
			: Object.keys(where).length
				? await this.replayUnique(first, last, test, hit)
				: await this.uniqueByPeriods(kind, range, first, last, test, hit);
		const sorted = (ids: Set<string>) => [...ids].sort();
		return [
			{
				hostnames: {
					unique_online: { up: sorted(hits), all: sorted(all) },
					unique_updated: { updated: sorted(hits), all: sorted(all) },
					unique_dist_upgraded: { distUpgraded: sorted(hits), all: sorted(all) },
					new_hosts: { new: sorted(hits) },
				}[kind],
			},
		];
	},

	/** A unique statistic by replaying snapshots [first, last] from the keyframe before them. */
	async replayUnique(
		this: StatsThis,
		first: number,
		last: number,
		test: EntryTest,
		hit: (e: Entry) => boolean,
	): Promise<{ all: Set<string>; hits: Set<string> }> {
		const kf = await this.keyframeFor(first);
		return uniqueHosts(kf ? await this.loadDocs(kf.index, last) : [], first, last, test, hit);
	},

	/**
	 * An unfiltered unique statistic: the keyframe periods wholly inside [first, last] from their summaries,
	 * the parts before and after them by replay.
	 */
	async uniqueByPeriods(
		this: StatsThis,
		kind: string,
		range: Range,
		first: number,
		last: number,
		test: EntryTest,
		hit: (e: Entry) => boolean,
	): Promise<{ all: Set<string>; hits: Set<string> }> {
		const starts: number[] = [];
		await this.store.scan({ keyframe: true, complete: true, index: { $gte: first, $lte: last + 1 } }, ["index"], d =>
			starts.push(d.index),
		);
		starts.sort((a, b) => a - b);
		const periods: Array<[number, number]> = [];
		for (let i = 0; i + 1 < starts.length; i++) periods.push([starts[i], starts[i + 1] - 1]);
		const all = new Set<string>();
		const hits = new Set<string>();
		const fresh = new Set<string>();
		const segments: Array<[number, number]> = periods.length
			? [
					[first, periods[0][0] - 1],
					[periods[periods.length - 1][1] + 1, last],
				]
			: [[first, last]];
		for (const [a, b] of segments) {
			if (a > b) continue;
			const part: { all: Set<string>; hits: Set<string> } = await this.replayUnique(a, b, test, hit);
			part.all.forEach(id => all.add(id));
			part.hits.forEach(id => hits.add(id));
		}
		const periodStore: Store = this.stores[PERIODS];
		if (periods.length && periodStore.aggregate) {
			// MongoDB: the summaries are unioned in the database; only which periods have a current one is read here.
			const current = new Map<number, number>();
			await periodStore.scan({ from: { $in: periods.map(p => p[0]) }, form: SUMMARY_FORM }, ["from", "to"], d =>
				current.set(d.from, d.to),
			);
			for (const [from, to] of periods) if (current.get(from) !== to) await this.periodSummary(from, to);
			const union = async (field: "all" | "up" | "fresh" | "applies" | "upgrades"): Promise<string[]> =>
				((
					await periodStore.aggregate!(
						summaryUnionPipeline(
							periods.map(p => p[0]),
							field,
							range,
						),
					)
				)[0]?.ids ?? []) as string[];
			for (const id of await union("all")) all.add(id);
			for (const id of await union(SUMMARY_FIELD[kind])) (kind === "new_hosts" ? fresh : hits).add(id);
		} else if (periods.length) {
			// The stored summaries are read in place (NeDB would copy each whole record for a find), and only read.
			const stored = new Map<number, PeriodSummary>();
			await periodStore.scan({ from: { $gte: periods[0][0], $lte: periods[periods.length - 1][0] } }, [], d =>
				stored.set(d.from, d as PeriodSummary),
			);
			for (const [from, to] of periods) {
				const found = stored.get(from);
				const summary: PeriodSummary = currentSummary(found, to) ? found : await this.periodSummary(from, to);
				for (const id of summary.all) all.add(id);
				for (const id of summaryHits(kind, summary, range)) (kind === "new_hosts" ? fresh : hits).add(id);
			}
		}
		// First seen in a period, and live in some snapshot of the range (perhaps a later period).
		for (const id of fresh) if (all.has(id)) hits.add(id);
		return { all, hits };
	},

	/** The summary of keyframe period [from, to]: stored when the period ended, or made now. */
	async periodSummary(this: StatsThis, from: number, to: number): Promise<PeriodSummary> {
		const periods: Store = this.stores[PERIODS];
		const found = await periods.findOne({ _id: String(from) });
		if (currentSummary(found, to)) return found;
		const summary = summarize(await this.loadDocs(from, to), from, to);
		await periods.removeMany({ _id: String(from) });
		await periods.insertMany([{ _id: String(from), ...summary }]).catch(err => {
			if (!(err instanceof DuplicateKeyError)) throw err; // another replica stored it meanwhile
		});
		return summary;
	},
};
