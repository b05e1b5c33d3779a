/**
 * The rollout driver's decisions, without effects (docs/rollouts.md, "How it goes", "Dry runs"): what a step does
 * with the current batch, the failures counted against the budget, what a dry run's reading leads to (pause, skip,
 * run), how a finished batch is counted, and after it whether the rollout pauses, finishes or goes on, and when.
 * driver.ts carries them out under its claim.
 */
import type { DryRunReading } from "../../lib/fleet/state-results";
import { batchFailures, sizeOf, type Batch } from "./plan";

/** The fields of a rollout record the decisions read. */
export interface RolloutProgress {
	status: string;
	batches: Batch[];
	current: number;
	dry_run_first?: boolean;
	budget: number;
	accepted_failures: number;
	done: number;
	succeeded: number;
	failed: number;
	timed_out: number;
	unreached: number;
	wait_s: number;
	jitter_s?: number;
}

/** A batch whose job is asked for or out. */
const IN_FLIGHT: ReadonlySet<Batch["state"]> = new Set(["dry_starting", "dry_running", "starting", "running"]);

/** Has the rollout a batch whose job (or dry run) is asked for or out? (The driver looks at such a rollout even paused.) */
export function inFlight(r: Pick<RolloutProgress, "batches" | "current">): boolean {
	const b = r.batches[r.current];
	return !!b && IN_FLIGHT.has(b.state);
}

/** Failures counted against the budget: those since the last resume (the ones before it were accepted). */
export function spentFailures(
	r: Pick<RolloutProgress, "failed" | "timed_out" | "unreached" | "accepted_failures">,
): number {
	return r.failed + r.timed_out + r.unreached - r.accepted_failures;
}

/** What one step does with a rollout. */
export type Step =
	/** No batch left: the rollout is finished (unless an operator aborted it). */
	| { do: "finish" }
	/** Ask for the batch's job, or its dry run; a takeover asks again under the run id already written. */
	| { do: "start"; batch: Batch; dry: boolean; takeover: boolean }
	/** Look at the batch's job (or dry run) in the history. */
	| { do: "observe"; batch: Batch; dry: boolean }
	/** Nothing: paused or aborted with no batch out, or a batch already ended. */
	| { do: "nothing" };

/** The step for a claimed rollout: its current batch's state says it. */
export function nextStep(r: Pick<RolloutProgress, "status" | "batches" | "current" | "dry_run_first">): Step {
	const b: Batch | undefined = r.batches[r.current];
	if (!b) return { do: "finish" };
	switch (b.state) {
		case "dry_starting":
			return { do: "start", batch: b, dry: true, takeover: true };
		case "starting":
			return { do: "start", batch: b, dry: false, takeover: true };
		case "dry_running":
			return { do: "observe", batch: b, dry: true };
		case "running":
			return { do: "observe", batch: b, dry: false };
		case "pending":
		case "ready":
			// Paused or aborted: nothing new starts.
			if (r.status !== "running") return { do: "nothing" };
			return { do: "start", batch: b, dry: b.state === "pending" && r.dry_run_first === true, takeover: false };
		default:
			return { do: "nothing" };
	}
}

/**
 * The state a batch goes back to when its ask ran nothing (refused, outside a window, held for approval): its dry
 * run (or, without one, the batch) is asked for again from `pending`; a real run after its dry run, from `ready`.
 */
export function stateBeforeAsk(dry: boolean, dryRunFirst: boolean | undefined): Batch["state"] {
	return !dry && dryRunFirst === true ? "ready" : "pending";
}

/** What follows a batch's dry run. */
export type AfterDryRun =
	/** Its predicted failures would take the rollout past its budget: it pauses, the batch `ready`. */
	| { do: "pause"; reason: string }
	/** Every host answered, and nothing would change: the batch is skipped, its hosts done; `last`: it was the last batch. */
	| { do: "skip"; current: number; done: number; last: boolean }
	/** The batch runs for real (its predicted failures within the budget). */
	| { do: "run" };

export function afterDryRun(
	r: RolloutProgress,
	b: Batch,
	reading: Pick<DryRunReading, "predicted" | "failures">,
): AfterDryRun {
	const spent = spentFailures(r);
	if (spent + reading.failures > r.budget) {
		return {
			do: "pause",
			reason: `the dry run of batch ${b.index} predicts ${reading.failures} failure(s); with ${spent} so far that is over the budget of ${r.budget}`,
		};
	}
	// A host that did not answer predicts nothing, which is no "nothing would change": the batch runs, and counts it.
	if (!reading.predicted.length && reading.failures === 0)
		return { do: "skip", current: r.current + 1, done: r.done + sizeOf(b), last: r.current + 1 >= r.batches.length };
	return { do: "run" };
}

/** A finished job's counts as the job history summarizes them. */
export interface JobCounts {
	expected: number;
	returned: number;
	succeeded: number;
	failed: number;
	timed_out: number;
}

/** A finished batch counted: its own fields, and the rollout's totals with it (hosts the job did not reach are failures). */
export function countBatch(
	r: RolloutProgress,
	b: Batch,
	job: JobCounts,
): {
	batch: Required<Pick<Batch, "expected" | "returned" | "succeeded" | "failed" | "timed_out" | "unreached">>;
	rollout: Pick<RolloutProgress, "done" | "succeeded" | "failed" | "timed_out" | "unreached">;
} {
	const unreached = Math.max(0, sizeOf(b) - job.expected);
	return {
		batch: {
			expected: job.expected,
			returned: job.returned,
			succeeded: job.succeeded,
			failed: job.failed,
			timed_out: job.timed_out,
			unreached,
		},
		rollout: {
			done: r.done + sizeOf(b),
			succeeded: r.succeeded + job.succeeded,
			failed: r.failed + job.failed,
			timed_out: r.timed_out + job.timed_out,
			unreached: r.unreached + unreached,
		},
	};
}

/** A batch none of whose hosts is live any more (or has an accepted key): nothing ran, every host unreached. */
export function nobodyLive(
	r: RolloutProgress,
	b: Batch,
	dry: boolean,
): { state: Batch["state"]; unreached: number; rollout: Partial<Pick<RolloutProgress, "done" | "unreached">> } {
	// A dry run of nobody predicts nothing: the batch is `ready`, and its real run finds nobody too (and counts them).
	if (dry) return { state: "ready", unreached: sizeOf(b), rollout: {} };
	return {
		state: "finished",
		unreached: sizeOf(b),
		rollout: { unreached: r.unreached + sizeOf(b), done: r.done + sizeOf(b) },
	};
}

/** What follows a finished batch (`r` counted with it). */
export interface AfterBatch {
	/** The batch now current. */
	current: number;
	/** How long until it is due: `wait_s` plus a share (`random`, in [0, 1)) of `jitter_s`. */
	waitMs: number;
	next: { do: "pause"; reason: string } | { do: "finish" } | { do: "next" };
}

export function afterBatch(r: RolloutProgress, index: number, random: number): AfterBatch {
	const spent = spentFailures(r);
	const current = index + 1;
	const waitMs = r.wait_s * 1000 + Math.floor(random * (r.jitter_s ?? 0) * 1000);
	if (spent > r.budget) {
		return {
			current,
			waitMs,
			next: {
				do: "pause",
				reason: `${spent} host(s) failed, timed out or were not reached (batch ${index}: ${batchFailures(r.batches[index])}), over the failure budget of ${r.budget}`,
			},
		};
	}
	return { current, waitMs, next: current >= r.batches.length ? { do: "finish" } : { do: "next" } };
}
