/**
 * Owns the fleet's history: `hosts_statistic` (one small header per snapshot: `index`, `timestamp`, the
 * up/down counts), `hosts_statistic_counts` (per snapshot, its hosts counted per nodegroup, group, version
 * and status, for filtered `online`), `hosts_statistic_periods` (per keyframe period, what the unfiltered
 * unique statistics union) and `hosts_statistic_changes` (the host entries: whole in a keyframe every
 * STATS_KEYFRAME_EVERY snapshots, otherwise only what changed). Every STATS_SNAPSHOT_INTERVAL seconds
 * each replica tries to take the interval's snapshot; a unique index on the interval's number lets
 * exactly one of them. The REST views rebuild full snapshots; the aggregated statistics replay the
 * changes of their range (docs/statistics.md). The soft-deletion flag of an entry is `_soft_deleted` in
 * list output and `_deleted` in single-record output, as the spec shows them.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type RestContext } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import { renderDates } from "../../lib/eve/dates";
import { Malformed } from "../../lib/errors";
import { type QueryArgs, filterTouches, parseProjection, parseSort, type Filter } from "../../lib/eve/query";
import type { Doc } from "../../lib/storage/store";
import { FleetState } from "../../lib/fleet/stats-history";
import { OLD_LEASES, snapshotMethods } from "./snapshots";
import { migrateLeases } from "../../lib/runtime/lease";
import { statisticMethods } from "./statistics";
import { CHANGES, COUNTS, PERIODS, cfg } from "./history";
import type { StatsThis } from "./history";

const StatsService: EveServiceSchema<StatsThis> = {
	name: "stats",
	mixins: [
		EveCollection({
			resource: "hosts_statistic",
			writes: [],
			idPattern: OBJECT_ID,
			extraCollections: [CHANGES, PERIODS, COUNTS],
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
			async handler(this: StatsThis, ctx: Context<{ at?: Date }>) {
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
		...snapshotMethods,
		...statisticMethods,

		// ------------------------------------------------------------ taking snapshots

		// ------------------------------------------------------------ reading the history

		// ------------------------------------------------------------ the REST views

		/** Only complete snapshots are listed; their `hosts` are rebuilt, so they can be neither filtered nor sorted on. */
		listFilter(this: StatsThis, filter: Filter, args: QueryArgs): Filter {
			const sorted = parseSort(args.get("sort")).find(([f]) => f === "hosts" || f.startsWith("hosts."));
			const touched = filterTouches(filter, ["hosts"]) ?? sorted?.[0];
			if (touched)
				throw new Malformed(
					`'${touched}': snapshots cannot be filtered or sorted on their host entries; use the aggregated statistics (/hosts/statistics/...) with \`where\``,
				);
			return Object.keys(filter).length ? { $and: [filter, { complete: true }] } : { complete: true };
		},

		async findItem(this: StatsThis, id: string): Promise<Doc | null> {
			if (!OBJECT_ID.test(id)) return null;
			return this.store.findOne({ _id: id, complete: true });
		},

		/** Rebuilds the `hosts` of the snapshots shown, unless the projection leaves them out. */
		async beforeRender(this: StatsThis, _ctx: RestContext, docs: Doc[], args: QueryArgs): Promise<void> {
			const projection = parseProjection(args.get("projection"));
			const wanted =
				!projection ||
				(projection.mode === "include"
					? projection.fields.some(f => f === "hosts" || f.startsWith("hosts."))
					: !projection.fields.includes("hosts"));
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

		transformOutput(this: StatsThis, doc: Doc, single: boolean): Doc {
			if (!single || !Array.isArray(doc.hosts)) return doc;
			return {
				...doc,
				hosts: doc.hosts.map((h: Doc) => {
					const { _soft_deleted, ...rest } = h;
					return { ...rest, _deleted: _soft_deleted === true };
				}),
			};
		},

		scheduleSnapshots(this: StatsThis): void {
			const intervalMs = cfg(this).statsSnapshotIntervalS * 1000;
			// Every replica wakes at the start of each interval; the claim picks one.
			const wait = intervalMs - (Date.now() % intervalMs) + 20;
			this.snapshotTimer = setTimeout(async () => {
				this.snapshotRun = this.takeSnapshot(new Date()).catch((err: Error) =>
					this.logger.warn("Could not take the fleet snapshot:", err.message),
				);
				await this.snapshotRun;
				if (!this.snapshotsStopping) this.scheduleSnapshots();
			}, wait);
		},
	},

	async started(this: StatsThis) {
		await this.store.ensureIndex("index", { unique: true });
		await this.store.ensureIndex("slot", { unique: true, sparse: true });
		await this.store.ensureIndex("timestamp", { ordered: true });
		await this.changes().ensureIndex("index", { ordered: true });
		await this.changes().ensureIndex("snapshot", { ordered: true });
		await this.stores[PERIODS].ensureIndex("from", { ordered: true });
		await this.stores[COUNTS].ensureIndex("index", { ordered: true });
		await this.stores[COUNTS].ensureIndex("snapshot", { ordered: true });
		// A header an older version left incomplete keeps its lease under the new name (undone once it passes).
		await migrateLeases(this.store, OLD_LEASES);
		if (cfg(this).statsSnapshots) this.scheduleSnapshots();
	},

	async stopped(this: StatsThis) {
		this.snapshotsStopping = true;
		clearTimeout(this.snapshotTimer);
		await this.snapshotRun;
	},
};

/** One of the five aggregated statistics as a published action. */
function statistic(kind: string) {
	return {
		params: { query: { type: "any", optional: true } },
		handler(this: StatsThis, ctx: Context<{ query?: unknown }>) {
			// Timestamps as HTTP-dates, as everywhere in the API.
			return this.statistic(kind, ctx.params.query).then(renderDates);
		},
	};
}

export default StatsService;
