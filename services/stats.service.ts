/**
 * Owns the fleet's history: `hosts_statistic` (one small header per snapshot: `index`, `timestamp`, the
 * up/down counts) and `hosts_statistic_changes` (the host entries: whole in a keyframe every
 * STATS_KEYFRAME_EVERY snapshots, otherwise only what changed). Every STATS_SNAPSHOT_INTERVAL seconds
 * each replica tries to take the interval's snapshot; a unique index on the interval's number lets
 * exactly one of them. The REST views rebuild full snapshots; the aggregated statistics replay the
 * changes of their range (docs/statistics.md). The soft-deletion flag of an entry is `_soft_deleted` in
 * list output and `_deleted` in single-record output, as the spec shows them.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds, renderDates } from "../lib/eve/dates";
import { badRequest } from "../lib/eve/errors";
import { QueryArgs, filterTouches, parseProjection, parseSort, parseWhere, type Filter } from "../lib/eve/query";
import { loadConfig } from "../lib/config";
import { DuplicateKeyError, type Doc, type Store } from "../lib/storage/store";
import {
	FIRST,
	FleetState,
	nextSnapshot,
	entryTest,
	happenedIn,
	online,
	onlineFromCounts,
	onlineFromBuckets,
	onlinePipeline,
	parseInterval,
	parseRange,
	toEntry,
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
} from "../lib/fleet/stats-history";

const CHANGES = "hosts_statistic_changes";
/** One summary per keyframe period (lib/fleet/stats-history.ts summarize). */
const PERIODS = "hosts_statistic_periods";
/** Host records written this long before the last snapshot's newest are read again: their writes may land late. */
const SINCE_SLACK_MS = 5000;
/** A snapshot left incomplete this long (and two intervals) is undone by the next taker: its replica died. */
const LEASE_MIN_MS = 10_000;

const cfg = () => loadConfig();

type Header = Doc & { index: number; slot: number; timestamp: Date; complete: boolean };

/** The hosts' `_updated` watermark and the entries read. */
interface HostRead {
	entries: Entry[];
	seen: Date | null;
}

const StatsService: EveServiceSchema = {
	name: "stats",
	mixins: [
		EveCollection({
			resource: "hosts_statistic",
			writes: [],
			idPattern: OBJECT_ID,
			extraCollections: [CHANGES, PERIODS],
			schema: {
				hosts: { type: "array", items: "object" },
				timestamp: "date",
				index: { type: "number", integer: true, min: 0 },
			},
		}),
	],
	actions: {
		/** Takes the snapshot of the interval holding `at` (default now) unless it exists (internal: tests, tools). */
		snapshot: {
			visibility: "public",
			params: { at: { type: "date", convert: true, optional: true } },
			async handler(this: EveThis, ctx: Context<{ at?: Date }>) {
				const header = await this.takeSnapshot(ctx.params.at ?? new Date());
				return header ? { _id: header._id, index: header.index } : null;
			},
		},

		online: statistic("online"),
		uniqueOnline: statistic("unique_online"),
		uniqueUpdated: statistic("unique_updated"),
		uniqueDistUpgraded: statistic("unique_dist_upgraded"),
		newHosts: statistic("new_hosts"),
	},

	methods: {
		changes(this: EveThis): Store {
			return this.stores[CHANGES];
		},

		// ------------------------------------------------------------ taking snapshots

		/**
		 * Claims the snapshot of `at`'s interval by inserting its header (unique `slot` and `index`: one replica
		 * wins), then stores what changed since the previous one and completes the header. Answers the header,
		 * or null when another replica has (or had) this interval.
		 */
		async takeSnapshot(this: EveThis, at: Date): Promise<Header | null> {
			const intervalMs = cfg().statsSnapshotIntervalS * 1000;
			const slot = Math.floor(at.getTime() / intervalMs);
			for (let attempt = 0; attempt < 5; attempt++) {
				const [last] = (await this.store.find({}, { sort: [["index", -1]], limit: 1 })) as Header[];
				if (last && last.slot >= slot) return null;
				if (last && !last.complete) {
					// Its replica is still at it, or died at it: after the lease, its writes are undone and the index reused.
					if (new Date(last.lease_until) > new Date()) return null;
					this.logger.warn(`Snapshot ${last.index} was left incomplete by ${last.by}: undoing it`);
					await this.undoSnapshot(last);
					continue;
				}
				const now = nowSeconds();
				const header: Header = {
					_id: newObjectId(),
					index: last ? last.index + 1 : 0,
					slot,
					timestamp: at,
					complete: false,
					by: this.broker.nodeID,
					lease_until: new Date(Date.now() + Math.max(2 * intervalMs, LEASE_MIN_MS)),
					_created: now,
					_updated: now,
				};
				try {
					await this.store.insertMany([header]);
				} catch (err) {
					if (err instanceof DuplicateKeyError) continue; // another replica claimed it (or this index) first
					throw err;
				}
				try {
					await this.fillSnapshot(header, last ?? null);
				} catch (err) {
					await this.undoSnapshot(header);
					throw err;
				}
				return header;
			}
			return null;
		},

		/** Removes a snapshot's header and whatever it had stored (by its id: an undone index may be someone else's by now). */
		async undoSnapshot(this: EveThis, header: Header): Promise<void> {
			await this.changes().removeMany({ snapshot: header._id });
			await this.store.removeMany({ _id: header._id });
			if (this.cached?.index >= header.index) this.cached = null;
		},

		/** Reads the hosts (all, or those written since `since`) from the hosts service, page by page. */
		async readHosts(this: EveThis, since: Date | null): Promise<HostRead> {
			const entries: Entry[] = [];
			let seen: Date | null = null;
			let after: string | undefined;
			for (;;) {
				const page = await this.broker.call<{ entries: Doc[]; seen: Date | null; more: boolean }, Doc>("hosts.statisticEntries", { ...(since ? { since } : {}), ...(after !== undefined ? { after } : {}) });
				for (const raw of page.entries) entries.push(toEntry(raw));
				if (page.seen && (!seen || new Date(page.seen) > seen)) seen = new Date(page.seen);
				if (!page.more || !page.entries.length) break;
				after = String(page.entries[page.entries.length - 1]._id);
			}
			return { entries, seen };
		},

		async fillSnapshot(this: EveThis, header: Header, prev: Header | null): Promise<void> {
			const keyframe = !prev || header.index % cfg().statsKeyframeEvery === 0;
			const state = prev ? await this.stateAt(prev.index, prev._id) : new FleetState();
			// The kept state becomes this snapshot's, once it is stored.
			this.cached = null;
			// A keyframe (or a previous snapshot without a watermark) reads every host; the others only those written since.
			const full = keyframe || !prev?.seen;
			const read: HostRead = await this.readHosts(full ? null : new Date(new Date(prev!.seen).getTime() - SINCE_SLACK_MS));
			const { docs, up, down } = nextSnapshot(state, read.entries, full, header.index, keyframe, header._id);
			const changes: Store = this.changes();
			await changes.insertMany(docs);
			const seen = read.seen && prev?.seen && new Date(prev.seen) > read.seen ? new Date(prev.seen) : (read.seen ?? prev?.seen ?? null);
			const completed = await this.store.updateMany({ _id: header._id, complete: false }, { $set: { complete: true, keyframe, up, down, total: up + down, seen, _updated: nowSeconds() }, $unset: { lease_until: true } });
			// Too slow: its lease passed and another replica undid it (the caller removes what it stored).
			if (!completed) throw new Error(`snapshot ${header.index} was undone by another replica after its lease`);
			this.cached = { id: header._id, index: header.index, state };
			await this.notifyChanged(this.broker as unknown as Context, "created", [header._id]);
			if (keyframe && prev) {
				// The period that just ended is summarized once, for the unfiltered statistics over whole periods.
				const kf = await this.keyframeFor(prev.index);
				if (kf) await this.periodSummary(kf.index, prev.index);
				await this.dropExpired(header.timestamp);
			}
		},

		/**
		 * Retention: drops every snapshot before the keyframe that the oldest snapshot to keep replays from,
		 * so history is kept for STATS_RETENTION_DAYS plus at most one keyframe period.
		 */
		async dropExpired(this: EveThis, now: Date): Promise<void> {
			const cutoff = new Date(now.getTime() - cfg().statsRetentionDays * 86_400_000);
			const [oldest] = await this.store.find({ complete: true, timestamp: { $gte: cutoff } }, { sort: [["index", 1]], limit: 1, only: ["index"] });
			if (!oldest) return;
			const kf = await this.keyframeFor(oldest.index);
			if (!kf || kf.index === 0) return;
			const removed = await this.store.removeMany({ index: { $lt: kf.index } });
			await this.changes().removeMany({ index: { $lt: kf.index } });
			await this.stores[PERIODS].removeMany({ from: { $lt: kf.index } });
			if (removed) this.logger.info(`Retention: dropped ${removed} snapshots older than ${cutoff.toISOString()}`);
		},

		// ------------------------------------------------------------ reading the history

		async keyframeFor(this: EveThis, index: number): Promise<Header | null> {
			const [kf] = await this.store.find({ keyframe: true, complete: true, index: { $lte: index } }, { sort: [["index", -1]], limit: 1, only: ["index"] });
			return (kf as Header) ?? null;
		},

		/**
		 * The stored documents of snapshots [from, to], in order. On NeDB they are the records themselves
		 * (no copy of millions of entries): only read, and only during the call; no one updates them in place.
		 */
		async loadDocs(this: EveThis, from: number, to: number): Promise<ChangeDoc[]> {
			const out: ChangeDoc[] = [];
			const changes: Store = this.changes();
			await changes.scan({ index: { $gte: from, $lte: to } }, ["index", "part", "full", "data"], d => out.push(d as ChangeDoc));
			return out.sort((a, b) => a.index - b.index || a.part - b.part);
		},

		/** The fleet at snapshot `index` (the last one taken here is kept, known by its header's id: an index may be reused after an undo). */
		async stateAt(this: EveThis, index: number, id: string): Promise<FleetState> {
			if (this.cached?.id === id) return this.cached.state;
			const kf = await this.keyframeFor(index);
			const state = new FleetState();
			if (kf) state.applyAll(await this.loadDocs(kf.index, index));
			this.cached = { id, index, state };
			return state;
		},

		/** The complete snapshots whose timestamp lies in the range, in index order. */
		async snapsIn(this: EveThis, range: Range): Promise<Array<Snap & { up: number; down: number }>> {
			const out: Array<Snap & { up: number; down: number }> = [];
			await this.store.scan({ complete: true, timestamp: { $gte: range.start, $lte: range.end } }, ["index", "timestamp", "up", "down"], d => {
				out.push({ index: d.index, timestamp: d.timestamp instanceof Date ? d.timestamp.getTime() : Date.parse(d.timestamp), up: d.up, down: d.down });
			});
			return out.sort((a, b) => a.index - b.index);
		},

		/** Runs one of the five statistics for a request. */
		async statistic(this: EveThis, kind: string, query: unknown): Promise<unknown> {
			const args = QueryArgs.from(query);
			const range = parseRange([...args.all("range[]"), ...args.all("range")]);
			const where = parseWhere(args.get("where"));
			const interval = kind === "online" ? parseInterval(args.get("interval"), range) : 0;
			if (kind === "online" && Object.keys(where).length === 0) {
				// The headers' stored counts: on MongoDB bucketed in the database, on NeDB here (the same points).
				if (this.store.aggregate) return onlineFromBuckets(await this.store.aggregate(onlinePipeline(range, interval)), range, interval);
				return onlineFromCounts(await this.snapsIn(range), range, interval);
			}
			const snaps = await this.snapsIn(range);
			const test = entryTest(where);
			if (kind === "online") {
				if (!snaps.length) return [];
				const kf = await this.keyframeFor(snaps[0].index);
				return online(kf ? await this.loadDocs(kf.index, snaps[snaps.length - 1].index) : [], snaps, range, interval, test);
			}
			const first = snaps[0]?.index ?? 0;
			const last = snaps[snaps.length - 1]?.index ?? -1;
			const hit: (e: Entry) => boolean = {
				unique_online: (e: Entry) => e.status === "up",
				unique_updated: happenedIn("last_stateapply", range),
				unique_dist_upgraded: happenedIn("last_distupgrade", range),
				new_hosts: (e: Entry) => e[FIRST] >= first && e[FIRST] <= last,
			}[kind] as (e: Entry) => boolean;
			const { all, hits }: { all: Set<string>; hits: Set<string> } = !snaps.length ? { all: new Set(), hits: new Set() } : Object.keys(where).length ? await this.replayUnique(first, last, test, hit) : await this.uniqueByPeriods(kind, range, first, last, test, hit);
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
		async replayUnique(this: EveThis, first: number, last: number, test: EntryTest, hit: (e: Entry) => boolean): Promise<{ all: Set<string>; hits: Set<string> }> {
			const kf = await this.keyframeFor(first);
			return uniqueHosts(kf ? await this.loadDocs(kf.index, last) : [], first, last, test, hit);
		},

		/**
		 * An unfiltered unique statistic: the keyframe periods wholly inside [first, last] from their summaries,
		 * the parts before and after them by replay.
		 */
		async uniqueByPeriods(this: EveThis, kind: string, range: Range, first: number, last: number, test: EntryTest, hit: (e: Entry) => boolean): Promise<{ all: Set<string>; hits: Set<string> }> {
			const starts: number[] = [];
			await this.store.scan({ keyframe: true, complete: true, index: { $gte: first, $lte: last + 1 } }, ["index"], d => starts.push(d.index));
			starts.sort((a, b) => a - b);
			const periods: Array<[number, number]> = [];
			for (let i = 0; i + 1 < starts.length; i++) periods.push([starts[i], starts[i + 1] - 1]);
			const all = new Set<string>();
			const hits = new Set<string>();
			const fresh = new Set<string>();
			const segments: Array<[number, number]> = periods.length ? [[first, periods[0][0] - 1], [periods[periods.length - 1][1] + 1, last]] : [[first, last]];
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
				await periodStore.scan({ from: { $in: periods.map(p => p[0]) }, form: SUMMARY_FORM }, ["from", "to"], d => current.set(d.from, d.to));
				for (const [from, to] of periods) if (current.get(from) !== to) await this.periodSummary(from, to);
				const union = async (field: "all" | "up" | "fresh" | "applies" | "upgrades"): Promise<string[]> => ((await periodStore.aggregate!(summaryUnionPipeline(periods.map(p => p[0]), field, range)))[0]?.ids ?? []) as string[];
				for (const id of await union("all")) all.add(id);
				for (const id of await union(SUMMARY_FIELD[kind])) (kind === "new_hosts" ? fresh : hits).add(id);
			} else if (periods.length) {
				// The stored summaries are read in place (NeDB would copy each whole record for a find), and only read.
				const stored = new Map<number, PeriodSummary>();
				await periodStore.scan({ from: { $gte: periods[0][0], $lte: periods[periods.length - 1][0] } }, [], d => stored.set(d.from, d as PeriodSummary));
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
		async periodSummary(this: EveThis, from: number, to: number): Promise<PeriodSummary> {
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

		// ------------------------------------------------------------ the REST views

		/** Only complete snapshots are listed; their `hosts` are rebuilt, so they can be neither filtered nor sorted on. */
		listFilter(this: EveThis, filter: Filter, args: QueryArgs): Filter {
			const sorted = parseSort(args.get("sort")).find(([f]) => f === "hosts" || f.startsWith("hosts."));
			const touched = filterTouches(filter, ["hosts"]) ?? sorted?.[0];
			if (touched) throw badRequest(`'${touched}': snapshots cannot be filtered or sorted on their host entries; use the aggregated statistics (/hosts/statistics/...) with \`where\``);
			return Object.keys(filter).length ? { $and: [filter, { complete: true }] } : { complete: true };
		},

		async findItem(this: EveThis, id: string): Promise<Doc | null> {
			if (!OBJECT_ID.test(id)) return null;
			return this.store.findOne({ _id: id, complete: true });
		},

		/** Rebuilds the `hosts` of the snapshots shown, unless the projection leaves them out. */
		async beforeRender(this: EveThis, _ctx: RestContext, docs: Doc[], args: QueryArgs): Promise<void> {
			const projection = parseProjection(args.get("projection"));
			const wanted = !projection || (projection.mode === "include" ? projection.fields.some(f => f === "hosts" || f.startsWith("hosts.")) : !projection.fields.includes("hosts"));
			if (!wanted) return;
			let state: FleetState | null = null;
			let from = -1;
			for (const doc of [...docs].sort((a, b) => a.index - b.index)) {
				const kf = await this.keyframeFor(doc.index);
				if (!kf) {
					doc.hosts = [];
					continue;
				}
				// Snapshots after the same keyframe are rebuilt by one replay going forward.
				if (!state || from !== kf.index) {
					state = new FleetState();
					from = kf.index;
					state.applyAll(await this.loadDocs(kf.index, doc.index));
				} else if (state.index < doc.index) state.applyAll(await this.loadDocs(state.index + 1, doc.index));
				doc.hosts = state.entries();
			}
		},

		transformOutput(this: EveThis, doc: Doc, single: boolean): Doc {
			if (!single || !Array.isArray(doc.hosts)) return doc;
			return {
				...doc,
				hosts: doc.hosts.map((h: Doc) => {
					const { _soft_deleted, ...rest } = h;
					return { ...rest, _deleted: _soft_deleted === true };
				}),
			};
		},

		scheduleSnapshots(this: EveThis): void {
			const intervalMs = cfg().statsSnapshotIntervalS * 1000;
			// Every replica wakes at the start of each interval; the claim picks one.
			const wait = intervalMs - (Date.now() % intervalMs) + 20;
			this.snapshotTimer = setTimeout(async () => {
				this.snapshotRun = this.takeSnapshot(new Date()).catch((err: Error) => this.logger.warn("Could not take the fleet snapshot:", err.message));
				await this.snapshotRun;
				if (!this.snapshotsStopping) this.scheduleSnapshots();
			}, wait);
		},
	},

	async started(this: EveThis) {
		await this.store.ensureIndex("index", true);
		await this.store.ensureIndex("slot", true, true);
		await this.store.ensureIndex("timestamp");
		await this.changes().ensureIndex("index");
		await this.changes().ensureIndex("snapshot");
		await this.stores[PERIODS].ensureIndex("from");
		if (cfg().statsSnapshots) this.scheduleSnapshots();
	},

	async stopped(this: EveThis) {
		this.snapshotsStopping = true;
		clearTimeout(this.snapshotTimer);
		await this.snapshotRun;
	},
};

/** One of the five aggregated statistics as a published action. */
function statistic(kind: string) {
	return {
		params: { query: { type: "any", optional: true } },
		handler(this: EveThis, ctx: Context<{ query?: unknown }>) {
			// Timestamps as HTTP-dates, as everywhere in the API.
			return this.statistic(kind, ctx.params.query).then(renderDates);
		},
	};
}

export default StatsService;
