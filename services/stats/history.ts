/**
 * What the stats service's parts share: the collections besides `hosts_statistic`, the snapshot header's
 * shape, and the timing constants of taking snapshots.
 */
import { loadConfig } from "../../lib/config";
import { type Doc } from "../../lib/storage/store";
import { summarize, type Entry } from "../../lib/fleet/stats-history";

export const CHANGES = "hosts_statistic_changes";
/** One summary per keyframe period (lib/fleet/stats-history.ts summarize). */
export const PERIODS = "hosts_statistic_periods";
/** Host records written this long before the last snapshot's newest are read again: their writes may land late. */
export const SINCE_SLACK_MS = 5000;
/** A snapshot left incomplete this long (and two intervals) is undone by the next taker: its replica died. */
export const LEASE_MIN_MS = 10_000;

export const cfg = () => loadConfig();

export type Header = Doc & { index: number; slot: number; timestamp: Date; complete: boolean };

/** The hosts' `_updated` watermark and the entries read. */
export interface HostRead {
	entries: Entry[];
	seen: Date | null;
}
