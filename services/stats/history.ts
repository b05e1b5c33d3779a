/**
 * What the stats service's parts share: the collections besides `hosts_statistic`, the snapshot header's
 * shape, and the timing constants of taking snapshots.
 */
import type { EveThis } from "../../mixins/eve-collection.mixin";
import type { Store } from "../../lib/storage/store";
import type {
	BucketLasts,
	ChangeDoc,
	EntryTest,
	FleetState,
	PeriodSummary,
	Range,
	Snap,
} from "../../lib/fleet/stats-history";
import { configOf } from "../../lib/config";
import type { Doc } from "../../lib/storage/store";
import type { Entry } from "../../lib/fleet/stats-history";

export const CHANGES = "hosts_statistic_changes";
/** Per snapshot, its live hosts counted per value of the fields filtered `online` reads (lib/fleet/stats-history.ts Tally). */
export const COUNTS = "hosts_statistic_counts";
/** One summary per keyframe period (lib/fleet/stats-history.ts summarize). */
export const PERIODS = "hosts_statistic_periods";
/** Host records written this long before the last snapshot's newest are read again: their writes may land late. */
export const SINCE_SLACK_MS = 5000;
/** A snapshot left incomplete this long (and two intervals) is undone by the next taker: its replica died. */
export const LEASE_MIN_MS = 10_000;

/** The stats service's configuration: its broker's (lib/config.ts configOf), loaded once at the broker's start. */
export const cfg = (svc: { broker: object }) => configOf(svc.broker);

export type Header = Doc & { index: number; slot: number; timestamp: Date; complete: boolean };

/** The hosts' `_updated` watermark and the entries read. */
export interface HostRead {
	entries: Entry[];
	seen: Date | null;
}

/** What the stats service has on `this` besides the Eve mixin's: the parts' methods (snapshots.ts, statistics.ts) and state. */
export interface StatsMembers {
	/** The fleet state at the last snapshot rebuilt, kept for the next read or snapshot. */
	cached: { id: string; index: number; state: FleetState } | null;
	snapshotTimer?: NodeJS.Timeout;
	snapshotRun?: Promise<unknown>;
	snapshotsStopping?: boolean;
	changes(): Store;
	takeSnapshot(at: Date): Promise<Header | null>;
	undoSnapshot(header: Header): Promise<void>;
	readHosts(since: Date | null): Promise<HostRead>;
	fillSnapshot(header: Header, prev: Header | null): Promise<void>;
	dropExpired(now: Date): Promise<void>;
	scheduleSnapshots(): void;
	keyframeFor(index: number): Promise<Header | null>;
	loadDocs(from: number, to: number): Promise<ChangeDoc[]>;
	stateAt(index: number, id: string): Promise<FleetState>;
	countsOf(indexes: number[]): Promise<(index: number) => Array<string | number> | null | undefined>;
	bucketLasts(range: Range, interval: number): Promise<BucketLasts>;
	snapsIn(range: Range): Promise<Array<Snap & { up: number; down: number }>>;
	statistic(kind: string, query: unknown): Promise<unknown>;
	replayUnique(
		first: number,
		last: number,
		test: EntryTest,
		hit: (e: Entry) => boolean,
	): Promise<{ all: Set<string>; hits: Set<string> }>;
	uniqueByPeriods(
		kind: string,
		range: Range,
		first: number,
		last: number,
		test: EntryTest,
		hit: (e: Entry) => boolean,
	): Promise<{ all: Set<string>; hits: Set<string> }>;
	periodSummary(from: number, to: number): Promise<PeriodSummary>;
}

export type StatsThis = EveThis & StatsMembers;
