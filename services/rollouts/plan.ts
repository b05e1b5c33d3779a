/**
 * A rollout's plan and its rules, without effects (docs/rollouts.md): the batches its hosts are cut into (the
 * canary hosts first, then batches of a count or a share of all the hosts), the failure budget as a count, what
 * counts as a failure (the predicted changes of a dry run are read by lib/fleet/state-results.ts).
 */
import type { PredictedChange } from "../../lib/fleet/state-results";

/** A batch as the rollout record keeps it. */
export interface Batch {
	index: number;
	canary: boolean;
	/** Its hosts: `hosts[from, to)` of the rollout's frozen list (kept apart from the record, which stays small). */
	from: number;
	to: number;
	/**
	 * pending → (dry_starting → dry_running → ready | skipped) → starting → running → finished. `*_starting` is
	 * written before the job is asked for: a replica that finds it there after the claimant died asks again with
	 * the same run id, and the cm-gateway answers the job already started (never a second one).
	 */
	state: "pending" | "dry_starting" | "dry_running" | "ready" | "skipped" | "starting" | "running" | "finished";
	jid?: string | null;
	dry_jid?: string | null;
	started?: Date | null;
	finished?: Date | null;
	/** Hosts Salt sent the job to (a host without an accepted key is not sent it). */
	expected?: number;
	returned?: number;
	succeeded?: number;
	failed?: number;
	timed_out?: number;
	/** Hosts of the batch the job did not reach (no longer live, or no accepted key): failures for the budget. */
	unreached?: number;
	/** The dry run's predicted changes, normalized (at most PREDICTED_MAX kept), how many in all, and its failures. */
	predicted?: PredictedChange[];
	predicted_total?: number;
	predicted_failures?: number;
}

export const SHARE = /^(\d{1,3})%$/;

/** `"10%"` of `total` rounded up (at least 1 host when the share is not 0) or down, or a count, as a number of hosts. */
export function hostsOf(spec: string | number, total: number, roundUp: boolean): number {
	if (typeof spec === "number") return spec;
	const pct = Number(SHARE.exec(spec)?.[1] ?? 0);
	return roundUp ? Math.ceil((total * pct) / 100) : Math.floor((total * pct) / 100);
}

/** The batches of `total` hosts: `canary` hosts first (when any), then batches of `batch` hosts (a share rounds up). */
export function planBatches(total: number, canary: number, batch: string | number): Batch[] {
	const out: Batch[] = [];
	const first = Math.min(canary, total);
	if (first > 0) out.push({ index: 0, canary: true, from: 0, to: first, state: "pending" });
	const size = Math.max(1, hostsOf(batch, total, true));
	for (let i = first; i < total; i += size)
		out.push({ index: out.length, canary: false, from: i, to: Math.min(total, i + size), state: "pending" });
	return out;
}

/** How many hosts a batch has. */
export const sizeOf = (b: Batch) => b.to - b.from;

/** The failures of a finished batch: hosts that failed, timed out, or were not reached. */
export function batchFailures(b: Batch): number {
	return (b.failed ?? 0) + (b.timed_out ?? 0) + (b.unreached ?? 0);
}
