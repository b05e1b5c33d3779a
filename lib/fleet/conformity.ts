/**
 * Conformity (issue 22): what one host's `state.apply test=True` return says of it. The host is
 *
 *   - `failing` when its states could not be rendered or compiled, or a state would fail (result False);
 *   - `drifted` when a state would change something (result None, or changes predicted);
 *   - `conformant` when every state is already as declared;
 *   - `unknown` when it did not answer.
 *
 * States a suppression rule names (`{sls?, state_id?}`: both given must match; a known-noisy state such as a
 * `cmd.run` that always runs) count for nothing. The drifted and failing states come back normalized, with a digest
 * of them that changes only when they change, so a check stores something for a host only when its state moved.
 */
import crypto from "node:crypto";
import { effectiveCall, kwargIsTrue } from "../security/effective-call";
import { entryOf } from "../security/catalogue";
import { changesOrFails, readStates, type StateResult } from "./state-results";

export type ConformityState = "conformant" | "drifted" | "failing" | "unknown";

/** A rule that makes a known-noisy state count for nothing (both fields given must match). */
export interface Suppression {
	sls?: string;
	state_id?: string;
}

/** One state that differs, as the conformity view shows it. */
export interface DriftedState {
	state_id: string;
	sls: string;
	fun: string;
	name: string;
	result: boolean | null;
	predicted_changes: Record<string, unknown>;
	comment: string;
}

export interface Judgement {
	state: ConformityState;
	/** States that would change or fail, not suppressed, in run order (a render error is one, `state_id` "render"). */
	states: DriftedState[];
	drifted: number;
	failing: number;
	suppressed: number;
	/** Stable over identical judgements: the host's record is written only when it changes. */
	digest: string;
}

const suppressedBy = (rules: Suppression[]) => (s: StateResult) =>
	rules.some(
		r =>
			(r.sls !== undefined || r.state_id !== undefined) &&
			(r.sls === undefined || r.sls === s.sls) &&
			(r.state_id === undefined || r.state_id === s.state_id),
	);

function digestOf(state: ConformityState, states: DriftedState[]): string {
	return crypto
		.createHash("sha256")
		.update(JSON.stringify([state, states]))
		.digest("base64url")
		.slice(0, 22);
}

/** What a host's return (or its silence: `answered` false) says of its conformity. */
export function judge(ret: unknown, answered: boolean, rules: Suppression[] = []): Judgement {
	if (!answered)
		return { state: "unknown", states: [], drifted: 0, failing: 0, suppressed: 0, digest: digestOf("unknown", []) };
	const reading = readStates(ret);
	if ("error" in reading) {
		const states: DriftedState[] = [
			{ state_id: "render", sls: "", fun: "", name: "", result: false, predicted_changes: {}, comment: reading.error },
		];
		return { state: "failing", states, drifted: 0, failing: 1, suppressed: 0, digest: digestOf("failing", states) };
	}
	const noisy = suppressedBy(rules);
	let suppressed = 0;
	const states: DriftedState[] = [];
	for (const s of reading.states) {
		if (!changesOrFails(s)) continue;
		if (noisy(s)) {
			suppressed++;
			continue;
		}
		states.push({
			state_id: s.state_id,
			sls: s.sls,
			fun: s.fun,
			name: s.name,
			result: s.result,
			predicted_changes: s.changes,
			comment: s.comment,
		});
	}
	const failing = states.filter(s => s.result === false).length;
	const drifted = states.length - failing;
	const state: ConformityState = failing ? "failing" : drifted ? "drifted" : "conformant";
	// The digest leaves comments out: Salt words them with times and pids that change at every check.
	return {
		state,
		states,
		drifted,
		failing,
		suppressed,
		digest: digestOf(
			state,
			states.map(s => ({ ...s, comment: "" })),
		),
	};
}

/**
 * Is this job a check of the declared state: `state.apply` without `mods` (or `state.highstate`) whose effective
 * `test` is true, its arguments as Salt's `fun_args` hold them (positional, `k=v` strings, the `{"__kwarg__": true}`
 * dict), read as the minion reads them (lib/security/effective-call.ts)?
 */
export function isHighstateTest(fun: string, args: unknown[]): boolean {
	if (fun !== "state.apply" && fun !== "state.highstate") return false;
	const call = effectiveCall(fun, args, undefined);
	if (!kwargIsTrue(call, "test")) return false;
	// state.apply's first positional argument is its mods; state.highstate's is `test`, which given as a keyword too
	// makes Salt refuse the call ("got multiple values for argument 'test'"): either with one that names something is no check.
	const mods = "mods" in call.kwargs ? call.kwargs.mods : call.args[0];
	return mods === undefined || mods === null || mods === "" || (Array.isArray(mods) && mods.length === 0);
}

/** Is this job a dry run of a state function (lib/security/catalogue.ts `dryRun`: apply, sls, highstate), whatever its mods? */
export function isStateTest(fun: string, args: unknown[]): boolean {
	return entryOf(fun)?.dryRun === true && kwargIsTrue(effectiveCall(fun, args, undefined), "test");
}

/** A transition worth an alert: into drift or failure from conformity, or back; `unknown` (silence) moves nothing. */
export function transitionAlert(
	from: ConformityState | null,
	to: ConformityState,
): "host.drifted" | "host.conformant" | null {
	const bad = (s: ConformityState | null) => s === "drifted" || s === "failing";
	if (bad(to) && !bad(from)) return "host.drifted";
	if (to === "conformant" && bad(from)) return "host.conformant";
	return null;
}
