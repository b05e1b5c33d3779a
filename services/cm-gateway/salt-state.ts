/**
 * Reading `state.apply` returns (protocols.md Part A §5) for the `failed_patches` collection.
 *
 * A patch is applied with `state.apply` (or `state.sls`) naming it as `mods`: positional (`arg:
 * ["patches.fix1"]`) or keyword (`kwarg: {mods: "patches.fix1"}`, which salt shows as
 * `{"__kwarg__": true, "mods": ...}` in the job's arguments). Only the mods under the patches directory
 * (CM_PATCH_PREFIX, `patches/` → `patches.…`) are patches: a highstate, or `state.apply webserver`, is not.
 *
 * A run failed when a step has `result: false`, or when the states could not be rendered or compiled
 * (salt returns a list of error strings instead of the step dict). The failed_patches record keeps every
 * step of the run, in execution order (`__run_num__`), each with the fields salt sends plus `cmd`,
 * which salt does not send: for a `cmd` state it is the command line (the step's `name`); for any other
 * state it is `<state>.<function> <name>` from the state tag `<state>_|-<id>_|-<name>_|-<function>`
 * (e.g. "pkg.installed openssl"). A render or compile error becomes one step with `result: false`,
 * `__id__` "render", the errors joined in `comment`, and empty `changes`.
 */

export const STATE_FUNS = new Set(["state.apply", "state.sls"]);

export interface PatchStep {
	__id__: string;
	__run_num__: number;
	__sls__: string;
	name: string;
	result: boolean | null;
	comment: string;
	start_time: string;
	duration: number;
	changes: Record<string, unknown>;
	cmd: string;
	[key: string]: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

/** The mods of a run that are patches (under `prefix`, a directory such as "patches/"; "" is every file), joined by ",". */
function modsName(mods: unknown, prefix: string): string | null {
	// Salt takes mods as a list or a comma-separated string, and sls names with "/" for ".".
	const list =
		typeof mods === "string"
			? mods.split(",")
			: Array.isArray(mods) && mods.every(m => typeof m === "string")
				? (mods as string[])
				: [];
	const dotted = prefix.replace(/\//g, ".");
	const patches = list.map(m => m.trim()).filter(m => m && `${m.replace(/\//g, ".")}.`.startsWith(dotted));
	return patches.length ? patches.join(",") : null;
}

/** The patch a state run applies (its `mods` under the patches directory `prefix`), or null for a highstate, another state or function. */
export function patchOf(fun: string, args: unknown[], prefix: string): string | null {
	if (!STATE_FUNS.has(fun)) return null;
	for (const a of args) if (isObject(a) && a.__kwarg__ === true && "mods" in a) return modsName(a.mods, prefix);
	const first = args[0];
	return isObject(first) ? null : modsName(first, prefix);
}

/** `cmd` of a step, from its state tag and name (see the header). */
export function stepCommand(tag: string, name: string): string {
	const parts = tag.split("_|-");
	const [state, , , fn] = parts.length === 4 ? parts : ["", "", "", ""];
	if (state === "cmd") return name;
	return state && fn ? `${state}.${fn} ${name}`.trim() : name;
}

/** Every step of a state return, in execution order, each with `cmd`. */
export function stateSteps(ret: Record<string, unknown>, patch: string): PatchStep[] {
	const steps: PatchStep[] = [];
	for (const [tag, raw] of Object.entries(ret)) {
		if (!isObject(raw)) continue;
		const name = typeof raw.name === "string" ? raw.name : String(raw.name ?? "");
		steps.push({
			...raw,
			__id__: typeof raw.__id__ === "string" ? raw.__id__ : (tag.split("_|-")[1] ?? tag),
			__run_num__: typeof raw.__run_num__ === "number" ? raw.__run_num__ : Number.MAX_SAFE_INTEGER,
			__sls__: typeof raw.__sls__ === "string" ? raw.__sls__ : patch,
			name,
			result: typeof raw.result === "boolean" ? raw.result : null,
			comment: Array.isArray(raw.comment) ? raw.comment.join("\n") : String(raw.comment ?? ""),
			start_time: typeof raw.start_time === "string" ? raw.start_time : "",
			duration: typeof raw.duration === "number" ? raw.duration : 0,
			changes: isObject(raw.changes) ? raw.changes : {},
			cmd: stepCommand(tag, name),
		});
	}
	return steps.sort((a, b) => a.__run_num__ - b.__run_num__);
}

/**
 * The steps of a failed patch run, or null when the run did not fail (or the return is not a state
 * return: a minion that did not answer, a function that is not available).
 */
export function failedPatchSteps(ret: unknown, patch: string): PatchStep[] | null {
	if (Array.isArray(ret)) {
		const errors = ret.filter((e): e is string => typeof e === "string");
		if (!errors.length) return null;
		return [
			{
				__id__: "render",
				__run_num__: 0,
				__sls__: patch,
				name: patch,
				result: false,
				comment: errors.join("\n"),
				start_time: "",
				duration: 0,
				changes: {},
				cmd: "",
			},
		];
	}
	if (!isObject(ret)) return null;
	const steps = stateSteps(ret, patch);
	if (!steps.length || !steps.some(s => s.result === false)) return null;
	return steps;
}
