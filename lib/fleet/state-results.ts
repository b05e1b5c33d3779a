/**
 * A Salt state run's return read the one way the services need it (rollouts' dry runs, conformity checks): every
 * state of the return as `{state_id, sls, fun, name, result, changes, comment}`, in the order Salt ran them
 * (`__run_num__`), or the reason the return is not a state dict at all (a render or compile error's list of
 * messages, a text cut short by CM_RETURN_MAX_BYTES, anything else).
 *
 * A state's key is `<module>_|-<id>_|-<name>_|-<function>`; `__id__`, `__sls__` and `name` are taken from the
 * state's own fields when present (an id or a name holding `_|-` cannot be split back from the key).
 */

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
