/**
 * Taking snapshots (one per STATS_SNAPSHOT_INTERVAL across replicas: the interval's slot is a unique index),
 * filling them from the hosts' entries (whole in a keyframe, else what changed) under the header's lease
 * (lib/runtime/lease.ts), undoing one a dead replica left incomplete once its lease passed, and dropping expired
 * keyframe periods (STATS_RETENTION_DAYS).
 */
import type { Context } from "moleculer";
import { newObjectId } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import { DuplicateKeyError, type Store } from "../../lib/storage/store";
import { FleetState, nextSnapshot, toEntry, type Entry } from "../../lib/fleet/stats-history";
import { CHANGES, COUNTS, PERIODS, SINCE_SLACK_MS, LEASE_MIN_MS, cfg } from "./history";
import type { StatsThis } from "./history";
import type { Header, HostRead } from "./history";
import { call } from "../../lib/contracts/call";
import { LEASE, leaseFor, leaseLapsed, release, type OldLeases } from "../../lib/runtime/lease";

/** Leases as versions before issue 45 stored them on an incomplete header: `lease_until`, held by its taker (`by`). */
export const OLD_LEASES: OldLeases = {
	filter: { lease_until: { $exists: true } },
	lease: d => ({ owner: String(d.by ?? ""), until: new Date(d.lease_until) }),
	unset: ["lease_until"],
};

export const snapshotMethods = {
	changes(this: StatsThis): Store {
		return this.stores[CHANGES];
	},

	/**
	 * Claims the snapshot of `at`'s interval by inserting its header (unique `slot` and `index`: one replica
	 * wins), then stores what changed since the previous one and completes the header. Answers the header,
	 * or null when another replica has (or had) this interval.
	 */
	async takeSnapshot(this: StatsThis, at: Date): Promise<Header | null> {
		const intervalMs = cfg(this).statsSnapshotIntervalS * 1000;
		const slot = Math.floor(at.getTime() / intervalMs);
		for (let attempt = 0; attempt < 5; attempt++) {
			const [last] = (await this.store.find({}, { sort: [["index", -1]], limit: 1 })) as Header[];
			if (last && last.slot >= slot) return null;
			if (last && !last.complete) {
				// Its replica is still at it, or died at it: after the lease, its writes are undone and the index reused.
				if (!leaseLapsed(last)) return null;
				this.logger.warn(`Snapshot ${last.index} was left incomplete by ${last[LEASE]?.owner}: undoing it`);
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
				// Who took it, kept once complete (a query may ask); the lease is let go then.
				by: this.broker.nodeID,
				[LEASE]: leaseFor({ owner: this.broker.nodeID, ms: Math.max(2 * intervalMs, LEASE_MIN_MS) }),
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
	async undoSnapshot(this: StatsThis, header: Header): Promise<void> {
		await this.changes().removeMany({ snapshot: header._id });
		await this.stores[COUNTS].removeMany({ snapshot: header._id });
		await this.store.removeMany({ _id: header._id });
		if (this.cached && this.cached.index >= header.index) this.cached = null;
	},

	/** Reads the hosts (all, or those written since `since`) from the hosts service, page by page. */
	async readHosts(this: StatsThis, since: Date | null): Promise<HostRead> {
		const entries: Entry[] = [];
		let seen: Date | null = null;
		let after: string | undefined;
		for (;;) {
			const page = await call(this.broker, "hosts.statisticEntries", {
				...(since ? { since } : {}),
				...(after !== undefined ? { after } : {}),
			});
			for (const raw of page.entries) entries.push(toEntry(raw));
			if (page.seen && (!seen || new Date(page.seen) > seen)) seen = new Date(page.seen);
			if (!page.more || !page.entries.length) break;
			after = String(page.entries[page.entries.length - 1]._id);
		}
		return { entries, seen };
	},

	async fillSnapshot(this: StatsThis, header: Header, prev: Header | null): Promise<void> {
		const keyframe = !prev || header.index % cfg(this).statsKeyframeEvery === 0;
		const state = prev ? await this.stateAt(prev.index, prev._id) : new FleetState();
		// The kept state becomes this snapshot's, once it is stored.
		this.cached = null;
		// A keyframe (or a previous snapshot without a watermark) reads every host; the others only those written since.
		const full = keyframe || !prev?.seen;
		const read: HostRead = await this.readHosts(
			full ? null : new Date(new Date(prev!.seen).getTime() - SINCE_SLACK_MS),
		);
		const { docs, counts, up, down } = nextSnapshot(state, read.entries, full, header.index, keyframe, header._id);
		const changes: Store = this.changes();
		await changes.insertMany(docs);
		await this.stores[COUNTS].insertMany([counts]);
		const seen =
			read.seen && prev?.seen && new Date(prev.seen) > read.seen
				? new Date(prev.seen)
				: (read.seen ?? prev?.seen ?? null);
		const completed = await release(
			this.store,
			{ _id: header._id, complete: false },
			{ $set: { complete: true, keyframe, up, down, total: up + down, seen, _updated: nowSeconds() } },
		);
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
	async dropExpired(this: StatsThis, now: Date): Promise<void> {
		const cutoff = new Date(now.getTime() - cfg(this).statsRetentionDays * 86_400_000);
		const [oldest] = await this.store.find(
			{ complete: true, timestamp: { $gte: cutoff } },
			{ sort: [["index", 1]], limit: 1, only: ["index"] },
		);
		if (!oldest) return;
		const kf = await this.keyframeFor(oldest.index);
		if (!kf || kf.index === 0) return;
		const removed = await this.store.removeMany({ index: { $lt: kf.index } });
		await this.changes().removeMany({ index: { $lt: kf.index } });
		await this.stores[PERIODS].removeMany({ from: { $lt: kf.index } });
		await this.stores[COUNTS].removeMany({ index: { $lt: kf.index } });
		if (removed) this.logger.info(`Retention: dropped ${removed} snapshots older than ${cutoff.toISOString()}`);
	},
};
