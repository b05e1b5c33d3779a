/**
 * The rollout driver's decisions (services/rollouts/decisions.ts): the step a rollout's current batch calls for, the
 * failures counted against the budget (those accepted on resume left out), what a dry run leads to, how a finished
 * batch is counted, and after it: pause, finish or the next batch, and when.
 */
import type { Batch } from "../../services/rollouts/plan";
import {
	afterBatch,
	afterDryRun,
	countBatch,
	inFlight,
	nextStep,
	nobodyLive,
	spentFailures,
	stateBeforeAsk,
	type RolloutProgress,
} from "../../services/rollouts/decisions";
import type { PredictedChange } from "../../lib/fleet/state-results";

/** Three batches of 9 hosts: the canary (host 0), hosts 1–4, hosts 5–8. */
const batches = (...states: Batch["state"][]): Batch[] => [
	{ index: 0, canary: true, from: 0, to: 1, state: states[0] ?? "pending" },
	{ index: 1, canary: false, from: 1, to: 5, state: states[1] ?? "pending" },
	{ index: 2, canary: false, from: 5, to: 9, state: states[2] ?? "pending" },
];
const rollout = (over: Partial<RolloutProgress> = {}): RolloutProgress => ({
	status: "running",
	batches: batches(),
	current: 0,
	budget: 0,
	accepted_failures: 0,
	done: 0,
	succeeded: 0,
	failed: 0,
	timed_out: 0,
	unreached: 0,
	wait_s: 0,
	...over,
});
const change: PredictedChange = {
	host: "web-02",
	state_id: "motd",
	sls: "common",
	function: "file.managed",
	name: "/etc/motd",
	result: null,
	changes: { diff: "+x" },
};

describe("the step a rollout calls for", () => {
	it("asks for a batch's dry run first when dry_run_first, then its real run once ready; without, the run at once", () => {
		const dry = rollout({ dry_run_first: true, current: 1, batches: batches("finished", "pending") });
		expect(nextStep(dry)).toEqual({ do: "start", batch: dry.batches[1], dry: true, takeover: false });
		const ready = rollout({ dry_run_first: true, current: 1, batches: batches("finished", "ready") });
		expect(nextStep(ready)).toEqual({ do: "start", batch: ready.batches[1], dry: false, takeover: false });
		expect(nextStep(rollout())).toEqual({ do: "start", batch: batches()[0], dry: false, takeover: false });
		expect(nextStep(rollout({ dry_run_first: false }))).toMatchObject({ do: "start", dry: false });
	});

	it("asks again, as a takeover, for a batch marked starting; looks at one out", () => {
		const at = (state: Batch["state"], status = "running") => nextStep(rollout({ status, batches: batches(state) }));
		expect(at("dry_starting")).toEqual({ do: "start", batch: batches("dry_starting")[0], dry: true, takeover: true });
		expect(at("starting")).toEqual({ do: "start", batch: batches("starting")[0], dry: false, takeover: true });
		expect(at("dry_running")).toEqual({ do: "observe", batch: batches("dry_running")[0], dry: true });
		expect(at("running")).toEqual({ do: "observe", batch: batches("running")[0], dry: false });
		// A batch out ends and is counted even when the rollout was paused or aborted meanwhile.
		expect(at("running", "paused")).toMatchObject({ do: "observe", dry: false });
		expect(at("starting", "aborted")).toMatchObject({ do: "start", takeover: true });
	});

	it("starts nothing new while paused or aborted, and finishes once no batch is left", () => {
		expect(nextStep(rollout({ status: "paused" }))).toEqual({ do: "nothing" });
		expect(nextStep(rollout({ status: "aborted", dry_run_first: true, batches: batches("ready") }))).toEqual({
			do: "nothing",
		});
		expect(nextStep(rollout({ batches: batches("finished") }))).toEqual({ do: "nothing" });
		expect(nextStep(rollout({ batches: batches("skipped") }))).toEqual({ do: "nothing" });
		expect(nextStep(rollout({ current: 3, batches: batches("finished", "finished", "finished") }))).toEqual({
			do: "finish",
		});
	});

	it("says a rollout is in flight while its current batch's job or dry run is asked for or out", () => {
		const states: Batch["state"][] = [
			"pending",
			"dry_starting",
			"dry_running",
			"ready",
			"skipped",
			"starting",
			"running",
			"finished",
		];
		expect(states.map(state => inFlight({ current: 0, batches: batches(state) }))).toEqual([
			false,
			true,
			true,
			false,
			false,
			true,
			true,
			false,
		]);
		expect(inFlight({ current: 3, batches: batches("running", "running", "running") })).toBe(false);
	});

	it("puts a batch whose ask ran nothing back to where it is asked again: its dry run from pending, a run after its dry run from ready", () => {
		expect(stateBeforeAsk(true, true)).toBe("pending");
		expect(stateBeforeAsk(false, true)).toBe("ready");
		expect(stateBeforeAsk(false, false)).toBe("pending");
		expect(stateBeforeAsk(false, undefined)).toBe("pending");
	});
});

describe("the failure budget", () => {
	it("counts failed, silent and unreached hosts, less those accepted on resume", () => {
		expect(spentFailures({ failed: 2, timed_out: 3, unreached: 4, accepted_failures: 0 })).toBe(9);
		expect(spentFailures({ failed: 2, timed_out: 3, unreached: 4, accepted_failures: 5 })).toBe(4);
	});

	it("pauses before the real run when the dry run's predicted failures would take it past the budget, saying so", () => {
		const r = rollout({ budget: 1, failed: 1, current: 1, batches: batches("finished", "dry_running") });
		expect(afterDryRun(r, r.batches[1], { predicted: [change], failures: 1 })).toEqual({
			do: "pause",
			reason: "the dry run of batch 1 predicts 1 failure(s); with 1 so far that is over the budget of 1",
		});
		// Up to the budget exactly, it runs.
		expect(afterDryRun({ ...r, failed: 0 }, r.batches[1], { predicted: [change], failures: 1 })).toEqual({ do: "run" });
		expect(afterDryRun({ ...r, budget: 3 }, r.batches[1], { predicted: [change], failures: 2 })).toEqual({ do: "run" });
		expect(afterDryRun({ ...r, budget: 3 }, r.batches[1], { predicted: [change], failures: 3 })).toMatchObject({
			do: "pause",
			reason: "the dry run of batch 1 predicts 3 failure(s); with 1 so far that is over the budget of 3",
		});
	});

	it("after a resume, counts the dry run against the failures since: those accepted are not counted again", () => {
		// Resumed with 2 failures accepted: a clean dry run goes on, one predicted failure is within the budget of 1.
		const resumed = rollout({
			budget: 1,
			failed: 2,
			accepted_failures: 2,
			current: 2,
			batches: batches("finished", "finished", "dry_running"),
		});
		expect(afterDryRun(resumed, resumed.batches[2], { predicted: [change], failures: 0 })).toEqual({ do: "run" });
		expect(afterDryRun(resumed, resumed.batches[2], { predicted: [change], failures: 1 })).toEqual({ do: "run" });
		expect(afterDryRun(resumed, resumed.batches[2], { predicted: [change], failures: 2 })).toMatchObject({
			do: "pause",
			reason: "the dry run of batch 2 predicts 2 failure(s); with 0 so far that is over the budget of 1",
		});
		// A timeout and an unreached host since the resume count.
		expect(
			afterDryRun({ ...resumed, timed_out: 1, unreached: 1 }, resumed.batches[2], { predicted: [change], failures: 0 }),
		).toMatchObject({
			do: "pause",
			reason: "the dry run of batch 2 predicts 0 failure(s); with 2 so far that is over the budget of 1",
		});
	});

	it("skips a batch whose every host answered that nothing would change; a host that did not answer is no 'no change'", () => {
		const r = rollout({ budget: 2, done: 1, current: 1, batches: batches("finished", "dry_running") });
		expect(afterDryRun(r, r.batches[1], { predicted: [], failures: 0 })).toEqual({
			do: "skip",
			current: 2,
			done: 5,
			last: false,
		});
		expect(afterDryRun(r, r.batches[1], { predicted: [], failures: 2 })).toEqual({ do: "run" });
		const last = rollout({ done: 5, current: 2, batches: batches("finished", "skipped", "dry_running") });
		expect(afterDryRun(last, last.batches[2], { predicted: [], failures: 0 })).toEqual({
			do: "skip",
			current: 3,
			done: 9,
			last: true,
		});
	});
});

describe("a batch's end", () => {
	it("counts the job's hosts in the batch and the rollout's totals; hosts of the batch the job did not reach are unreached", () => {
		const r = rollout({ done: 1, succeeded: 1, failed: 1, timed_out: 2, unreached: 3, current: 1 });
		expect(countBatch(r, r.batches[1], { expected: 3, returned: 2, succeeded: 1, failed: 1, timed_out: 1 })).toEqual({
			batch: { expected: 3, returned: 2, succeeded: 1, failed: 1, timed_out: 1, unreached: 1 },
			rollout: { done: 5, succeeded: 2, failed: 2, timed_out: 3, unreached: 4 },
		});
		// Never fewer than none unreached.
		expect(
			countBatch(r, r.batches[0], { expected: 2, returned: 2, succeeded: 2, failed: 0, timed_out: 0 }).batch.unreached,
		).toBe(0);
	});

	it("ends a batch none of whose hosts is live: a dry run is ready for its run, a run counts every host unreached", () => {
		const r = rollout({ done: 1, unreached: 2, current: 1 });
		expect(nobodyLive(r, r.batches[1], true)).toEqual({ state: "ready", unreached: 4, rollout: {} });
		expect(nobodyLive(r, r.batches[1], false)).toEqual({
			state: "finished",
			unreached: 4,
			rollout: { unreached: 6, done: 5 },
		});
	});

	it("pauses past the budget, saying how many and the batch's share; at the budget exactly it goes on", () => {
		const b = { ...batches()[1], state: "finished" as const, failed: 1, timed_out: 1, unreached: 0 };
		const r = rollout({ budget: 2, failed: 2, timed_out: 1, batches: [batches("finished")[0], b, batches()[2]] });
		expect(afterBatch(r, 1, 0)).toEqual({
			current: 2,
			waitMs: 0,
			next: {
				do: "pause",
				reason: "3 host(s) failed, timed out or were not reached (batch 1: 2), over the failure budget of 2",
			},
		});
		expect(afterBatch({ ...r, timed_out: 0 }, 1, 0)).toEqual({ current: 2, waitMs: 0, next: { do: "next" } });
		// Accepted on resume: not counted again.
		expect(afterBatch({ ...r, accepted_failures: 1 }, 1, 0).next).toEqual({ do: "next" });
		expect(afterBatch({ ...r, unreached: 1, accepted_failures: 1 }, 1, 0).next).toMatchObject({
			do: "pause",
			reason: "3 host(s) failed, timed out or were not reached (batch 1: 2), over the failure budget of 2",
		});
	});

	it("finishes after the last batch, else the next is due after wait_s and a share of jitter_s", () => {
		expect(afterBatch(rollout(), 2, 0)).toEqual({ current: 3, waitMs: 0, next: { do: "finish" } });
		expect(afterBatch(rollout({ wait_s: 2 }), 0, 0.99)).toEqual({ current: 1, waitMs: 2000, next: { do: "next" } });
		expect(afterBatch(rollout({ wait_s: 2, jitter_s: 10 }), 1, 0.5).waitMs).toBe(7000);
		expect(afterBatch(rollout({ jitter_s: 3 }), 1, 0.12345).waitMs).toBe(370);
	});
});
