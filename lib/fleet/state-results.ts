/**
 * A Salt state run's return read the one way the services need it (rollouts' and approvals' dry runs, conformity checks): every
 * state of the return as `{state_id, sls, fun, name, result, changes, comment}`, in the order Salt ran them
 * (`__run_num__`), or the reason the return is not a state dict at all (a render or compile error's list of
 * messages, a text cut short by CM_RETURN_MAX_BYTES, anything else).
 *
 * A state's key is `<module>_|-<id>_|-<name>_|-<function>`; `__id__`, `__sls__` and `name` are taken from the
 * state's own fields when present (an id or a name holding `_|-` cannot be split back from the key).
 */
import { CATALOGUE } from "../security/catalogue";

export interface StateResult {
	state_id: string;
	sls: string;
	/** `<module>.<function>`, as `pkg.installed`. */
	fun: string;
	name: string;
	/** `true` done (or already right), `null` would change (test=True), `false` failed. */
	result: boolean | null;
	changes: Record<string, unknown>;
	comment: string;
}

export type StateReading = { states: StateResult[] } | { error: string };

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
const MESSAGE_MAX = 2000;

/** The states of a return, or why it has none to read. */
export function readStates(ret: unknown): StateReading {
	if (!isObject(ret)) {
		const text = Array.isArray(ret) ? ret.map(String).join("; ") : String(ret ?? "");
		return { error: text.slice(0, MESSAGE_MAX) || "an empty return" };
	}
	const states: Array<StateResult & { order: number }> = [];
	for (const [key, raw] of Object.entries(ret)) {
		if (!isObject(raw)) return { error: `state '${key.slice(0, 200)}' is not a state result` };
		const [module, id, name, fn] = key.split("_|-");
		states.push({
			state_id: typeof raw.__id__ === "string" ? raw.__id__ : (id ?? key),
			sls: typeof raw.__sls__ === "string" ? raw.__sls__ : "",
			fun: module && fn ? `${module}.${fn}` : "",
			name: typeof raw.name === "string" ? raw.name : (name ?? ""),
			result: raw.result === true ? true : raw.result === false ? false : null,
			changes: isObject(raw.changes) ? raw.changes : {},
			comment: typeof raw.comment === "string" ? raw.comment.slice(0, MESSAGE_MAX) : "",
			order: typeof raw.__run_num__ === "number" ? raw.__run_num__ : states.length,
		});
	}
	states.sort((a, b) => a.order - b.order);
	return { states: states.map(({ order: _order, ...s }) => s) };
}

/** Would this state change something (test=True: result None, or changes predicted), or did it fail? */
export const changesOrFails = (s: StateResult): boolean => s.result !== true || Object.keys(s.changes).length > 0;

/** A return held as text (the `actions` records keep returns as text): its JSON value, or the text itself. */
export function returnValue(text: string): unknown {
	try {
		return JSON.parse(text);
	} catch {
		return text;
	}
}

/** One state of one host that a dry run says would change (or fail). */
export interface PredictedChange {
	host: string;
	state_id: string;
	sls: string;
	function: string;
	name: string;
	result: boolean | null;
	changes: Record<string, unknown>;
}

/** The most predicted changes a batch or an approval request keeps (the count is kept whole). */
export const PREDICTED_MAX = 2000;

/** The functions a dry run (`test=True`) is for: the catalogue's `dryRun` functions (state.apply, state.sls, state.highstate). */
export const STATE_FUNCTIONS: ReadonlySet<string> = new Set(
	Object.entries(CATALOGUE)
		.filter(([, e]) => e.dryRun === true)
		.map(([fun]) => fun),
);

/**
 * The states of one host's dry-run return that would change or fail, normalized (readStates). A
 * return that is not a state dict (a render error's list of messages, a text cut short by CM_RETURN_MAX_BYTES) is
 * one entry with `result` false: it cannot be read as "no change".
 */
export function predictedChanges(host: string, ret: unknown): PredictedChange[] {
	const reading = readStates(ret);
	if ("error" in reading)
		return [
			{ host, state_id: "render", sls: "", function: "", name: "", result: false, changes: { comment: reading.error } },
		];
	return reading.states.filter(changesOrFails).map(st => ({
		host,
		state_id: st.state_id,
		sls: st.sls,
		function: st.fun,
		name: st.name,
		result: st.result,
		changes: st.changes,
	}));
}

/** One host's record of a dry run, as the job history keeps it (`actions.returnsOf`). */
export interface DryRunReturn {
	host: string;
	state: string;
	return: string;
	retcode?: number;
	success?: boolean;
}

/** A dry run read whole: its predicted changes (at most PREDICTED_MAX kept), how many in all, and its failures. */
export interface DryRunReading {
	predicted: PredictedChange[];
	total: number;
	failures: number;
}

/**
 * What a dry run of `expected` hosts predicts: every host's changes, and as failures the hosts that did not return,
 * did not finish, failed (retcode, success) or would fail a state.
 */
export function readDryRun(returns: DryRunReturn[], expected: number): DryRunReading {
	const predicted: PredictedChange[] = [];
	let failures = Math.max(0, expected - returns.length);
	for (const ret of returns) {
		if (ret.state !== "finished") {
			failures++;
			continue;
		}
		const changes = predictedChanges(ret.host, returnValue(ret.return));
		if (
			ret.success === false ||
			(typeof ret.retcode === "number" && ret.retcode !== 0) ||
			changes.some(c => c.result === false)
		)
			failures++;
		predicted.push(...changes);
	}
	return { predicted: predicted.slice(0, PREDICTED_MAX), total: predicted.length, failures };
}
