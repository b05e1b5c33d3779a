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

const suppressedBy = (rules: Suppression[]) => (s: StateResult) => rules.some(r => (r.sls !== undefined || r.state_id !== undefined) && (r.sls === undefined || r.sls === s.sls) && (r.state_id === undefined || r.state_id === s.state_id));

function digestOf(state: ConformityState, states: DriftedState[]): string {
	return crypto.createHash("sha256").update(JSON.stringify([state, states])).digest("base64url").slice(0, 22);
}

/** What a host's return (or its silence: `answered` false) says of its conformity. */
export function judge(ret: unknown, answered: boolean, rules: Suppression[] = []): Judgement {
	if (!answered) return { state: "unknown", states: [], drifted: 0, failing: 0, suppressed: 0, digest: digestOf("unknown", []) };
	const reading = readStates(ret);
	if ("error" in reading) {
		const states: DriftedState[] = [{ state_id: "render", sls: "", fun: "", name: "", result: false, predicted_changes: {}, comment: reading.error }];
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
		states.push({ state_id: s.state_id, sls: s.sls, fun: s.fun, name: s.name, result: s.result, predicted_changes: s.changes, comment: s.comment });
	}
	const failing = states.filter(s => s.result === false).length;
	const drifted = states.length - failing;
	const state: ConformityState = failing ? "failing" : drifted ? "drifted" : "conformant";
	// The digest leaves comments out: Salt words them with times and pids that change at every check.
	return { state, states, drifted, failing, suppressed, digest: digestOf(state, states.map(s => ({ ...s, comment: "" }))) };
}

const isKwarg = (a: unknown): a is Record<string, unknown> => !!a && typeof a === "object" && !Array.isArray(a) && (a as Record<string, unknown>).__kwarg__ === true;
const truthy = (v: unknown) => v === true || v === "True" || v === "true" || v === 1;

/**
 * Is this job a check of the declared state: `state.apply` without `mods` (or `state.highstate`) with `test=True`,
 * its arguments as Salt's `fun_args` hold them (positional, `k=v` strings, the `{"__kwarg__": true}` dict)?
 */
export function isHighstateTest(fun: string, args: unknown[]): boolean {
	if (fun !== "state.apply" && fun !== "state.highstate") return false;
	let test = false;
	let mods: unknown;
	for (const a of args) {
		if (isKwarg(a)) {
			if ("test" in a) test = truthy(a.test);
			if ("mods" in a) mods = a.mods;
		} else if (typeof a === "string" && /^test=/.test(a)) test = truthy(a.slice(5));
		else if (typeof a === "string" && /^mods=/.test(a)) mods = a.slice(5);
		else if (fun === "state.apply" && mods === undefined) mods = a;
	}
	const noMods = mods === undefined || mods === null || mods === "" || (Array.isArray(mods) && mods.length === 0);
	return test && noMods;
}

/** Is this job a `test=True` state run (`state.apply`, `state.sls`, `state.highstate`), whatever its mods? */
export function isStateTest(fun: string, args: unknown[]): boolean {
	if (fun !== "state.apply" && fun !== "state.sls" && fun !== "state.highstate") return false;
	let test = false;
	for (const a of args) {
		if (isKwarg(a) && "test" in a) test = truthy(a.test);
		else if (typeof a === "string" && /^test=/.test(a)) test = truthy(a.slice(5));
	}
	return test;
}

/** A transition worth an alert: into drift or failure from conformity, or back; `unknown` (silence) moves nothing. */
export function transitionAlert(from: ConformityState | null, to: ConformityState): "host.drifted" | "host.conformant" | null {
	const bad = (s: ConformityState | null) => s === "drifted" || s === "failing";
	if (bad(to) && !bad(from)) return "host.drifted";
	if (to === "conformant" && bad(from)) return "host.conformant";
	return null;
}
