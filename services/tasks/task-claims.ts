/**
 * The scheduler's claims (docs/scheduling.md, "Runs"): the filters and updates through which the replicas of the
 * tasks service share the runs of due tasks with the database as the only truth, and the store operations that
 * apply them. The lease on a pending run is the one every leased record holds (lib/runtime/lease.ts): each write
 * is one atomic update conditional on what the replica saw, so however many replicas race on one record (NeDB in
 * one process, MongoDB across processes) one wins:
 *
 *  - a **claim** moves the task's `next` on, counts the run and records it as `pending` `{run, due}` under the
 *    claiming replica's lease — only while `next` is still the due time claimed and no run is pending (a task
 *    holds one run at a time: a run still being handed over is never overwritten and lost);
 *  - a **renewal** of the lease, while the claiming replica is still handing the run over;
 *  - a **takeover** of a pending run whose lease passed (its replica died) — only while the lease is still
 *    passed, so that the first replica to take it over is the only one;
 *  - the **record** of the run's result (`last_run`), which clears `pending` and the lease, for that run only.
 *
 * Nothing here reads a clock or makes an id: `now`, the run id and the replica's name are given.
 */
import type { Filter } from "../../lib/eve/query";
import type { Doc, Store, Update } from "../../lib/storage/store";
import { claim, findLapsed, release, renew, takeOver, type OldLeases } from "../../lib/runtime/lease";

/** Due tasks claimed per scheduler pass, earliest first. */
export const DUE_LIMIT = 500;
/** Pending runs whose lease passed, taken over per look. */
export const TAKEOVER_LIMIT = 100;

/** A run claimed and not recorded yet, as the task holds it (its replica holds the task's lease meanwhile). */
export interface PendingRun {
	run: string;
	due: Date;
}
/**
 * What became of a run: `started` (with the job's jid), `no_minions`, `skipped` or `failed` (with why),
 * `awaiting_approval` (held: nothing ran, with the approval), `waiting` (outside a maintenance window: due again
 * when it opens).
 */
export interface LastRun {
	due: Date;
	at: Date;
	status: string;
	jid?: string | null;
	message?: string;
	approval?: string;
}

/** One claim of a task's due run, as the claiming replica planned it (lib/fleet/schedule.ts planRun). */
export interface Claim {
	/** The due time claimed: the task's `next` as the replica read it. */
	due: Date;
	/** The due time after it; null when there is none (the task finishes). */
	next: Date | null;
	/** Why the run does not happen (misfire, overlap), recorded as `last_run`; null when it runs. */
	skipped: string | null;
	/** The new run's id. */
	run: string;
	/** The claiming replica. */
	by: string;
	now: Date;
	leaseMs: number;
}

/** Tasks whose run is due at `now` and whose previous run is recorded (none pending). */
export function dueFilter(now: Date): Filter {
	return { status: "scheduled", next: { $lte: now }, pending: { $exists: false } };
}

/** Scheduled tasks falling due after `now`, within `withinMs`. */
export function soonFilter(now: Date, withinMs: number): Filter {
	return { status: "scheduled", next: { $gt: now, $lte: new Date(now.getTime() + withinMs) } };
}

/** The claim's condition: the task still scheduled, still due at `due`, and holding no pending run. */
export function claimFilter(task: { _id: string }, due: Date): Filter {
	return { _id: task._id, status: "scheduled", next: due, pending: { $exists: false } };
}

/**
 * The claim: `next` moved on (finished without one), and the run pending and counted (the lease is taken with it:
 * claimRun), or recorded as skipped.
 */
export function claimUpdate(claim: Claim): Update {
	const set: Doc = { next: claim.next, status: claim.next ? "scheduled" : "finished", _updated: claim.now };
	if (claim.skipped)
		return {
			$set: { ...set, last_run: { due: claim.due, at: claim.now, status: "skipped", message: claim.skipped } },
			$unset: { window_wait: true },
		};
	const pending: PendingRun = { run: claim.run, due: claim.due };
	return { $set: { ...set, pending }, $unset: { window_wait: true }, $inc: { count_of_execution: 1 } };
}

/** The task while it still holds that run pending (takeovers, renewals and the record). */
export function runFilter(taskId: string, run: string): Filter {
	return { _id: taskId, "pending.run": run };
}

/** The run's result recorded, and the task free for its next run. */
export function recordUpdate(result: LastRun, now: Date): Update {
	return { $set: { last_run: result, _updated: now }, $unset: { pending: true } };
}

// ---------------------------------------------------------------- the store operations

/** The due tasks, earliest first. */
export function findDue(store: Store, now: Date): Promise<Doc[]> {
	return store.find(dueFilter(now), { sort: [["next", 1]], limit: DUE_LIMIT });
}

/** The scheduled task falling due first after `now`, within `withinMs` (none: empty). */
export function findSoonest(store: Store, now: Date, withinMs: number): Promise<Doc[]> {
	return store.find(soonFilter(now, withinMs), { sort: [["next", 1]], limit: 1 });
}

/** Tasks whose pending run's lease passed: their replica died. */
export function findExpired(store: Store, now: Date): Promise<Doc[]> {
	return findLapsed(store, {}, now, { limit: TAKEOVER_LIMIT });
}

/** Claims the run: the task as it is after the claim, or null when another replica won it or the task changed. */
export function claimRun(store: Store, task: { _id: string }, c: Claim): Promise<Doc | null> {
	// A skipped run holds nothing: only `next` moves on.
	if (c.skipped) return store.findOneAndUpdate(claimFilter(task, c.due), claimUpdate(c));
	return claim(store, claimFilter(task, c.due), { owner: c.by, ms: c.leaseMs, now: c.now }, claimUpdate(c));
}

/** Takes a dead replica's run over: the task as it is after, or null when another replica took it first or it was recorded. */
export function takeOverRun(
	store: Store,
	task: { _id: string; pending: { run: string } },
	by: string,
	now: Date,
	leaseMs: number,
): Promise<Doc | null> {
	return takeOver(store, runFilter(task._id, task.pending.run), { owner: by, ms: leaseMs, now });
}

/** Renews `by`'s lease on the run; false when the run is no longer pending or another replica took it over. */
export function renewLease(
	store: Store,
	taskId: string,
	run: string,
	by: string,
	now: Date,
	leaseMs: number,
): Promise<boolean> {
	return renew(store, runFilter(taskId, run), { owner: by, ms: leaseMs, now });
}

/**
 * A run refused outside a maintenance window, deferred (docs/scheduling.md): recorded as `waiting`, and the task due
 * again when the window opens (or at its next due time, if that comes first), remembering when the run was first due
 * so that the misfire policy judges it then. A finished one-shot task is scheduled again for it.
 */
export function deferUpdate(task: Doc, result: LastRun, until: Date, now: Date): Update {
	const next = task.next && new Date(task.next).getTime() < until.getTime() ? new Date(task.next) : until;
	const due = task.window_wait?.due ?? result.due;
	return {
		$set: {
			last_run: result,
			next,
			status: task.status === "finished" ? "scheduled" : task.status,
			window_wait: { due, until },
			_updated: now,
		},
		$unset: { pending: true },
	};
}

/** Defers the run to its window, letting the task's lease go; false when the run is no longer pending. */
export function deferRun(
	store: Store,
	task: Doc,
	run: string,
	result: LastRun,
	until: Date,
	now: Date,
): Promise<boolean> {
	return release(store, runFilter(task._id, run), deferUpdate(task, result, until, now));
}

/**
 * Records the run's result, letting the task's lease go (whoever holds it: the run is named); false when the run
 * is no longer pending (recorded already).
 */
export function recordRun(store: Store, taskId: string, run: string, result: LastRun, now: Date): Promise<boolean> {
	return release(store, runFilter(taskId, run), recordUpdate(result, now));
}

/** Leases as versions before issue 45 stored them: in the pending run, as `by` and `lease_until`. */
export const OLD_LEASES: OldLeases = {
	filter: { "pending.lease_until": { $exists: true } },
	lease: d => ({ owner: String(d.pending.by ?? ""), until: new Date(d.pending.lease_until) }),
	unset: ["pending.by", "pending.lease_until"],
};
