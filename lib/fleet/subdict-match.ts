/**
 * The grain matching of `G@` and `P@` terms: Salt 3006's salt.utils.data.subdict_match (with its
 * traverse_dict_and_list), in time bounded by the term's parts times the size of the grains (issue 43).
 *
 * Salt's semantics, kept exactly:
 *   - `expr` is split at every delimiter; each split (deepest first) takes the parts before it as a path
 *     (numeric parts index lists, other parts look into the dicts a list holds) and the rest as the pattern;
 *     a path of exactly `*` is the whole of the grains, compared with the whole expression;
 *   - a scalar at the path is compared with the pattern; a list member by member (a dict member both as a
 *     dict and as its text); a dict matches when the pattern is `*`, one of its keys, matches inside it
 *     (subdict_match again, with Salt's default `:` whatever the term's delimiter), or, when the pattern
 *     begins with `*:`, when one of its values matches the rest;
 *   - values compare as Python's str() of them, both sides lowercased.
 *
 * Salt recomputes the inner matches for every split, so a path of n repeated parts costs exponentially
 * many matches (a preview of `G@a:a:…:b` took 23 s on 35 hosts). Here the paths of one split are walked
 * incrementally (a walk stops where the grains end, so at most their depth), each pattern (a suffix of the
 * expression, named by where it starts) is compiled once per term, and each (dict, suffix) question is
 * answered once per host: the work is at most the grains' dicts times the term's parts.
 */

/** A value compared with one pattern: the value is lowercased, as Salt's _match does. */
export type ValueTest = (value: string) => boolean;

/** Compiles the lowercased pattern of one split (null: it cannot be compiled, which matches nothing, as in Salt). */
export type PatternCompiler = (pattern: string) => ValueTest | null;

/** Salt's DEFAULT_TARGET_DELIM: what the inner matches of dicts split on, whatever the term's delimiter. */
const DEFAULT_DELIMITER = ":";

type Dict = Record<string, unknown>;

/**
 * A grain the minion holds as a Python tuple, which the master's cache (JSON) shows as a list: minions neither index
 * it nor look at its members (traverse_dict_and_list and subdict_match test `isinstance(…, list)`), they compare its
 * str(), "(12,)". So `G@osrelease_info:0:12` selects no minion, although `salt --preview-target` lists them all
 * (more-2026-11-29/compound_differential.json); fleet-ctl follows the minions. salt/grains/core.py makes
 * osrelease_info a tuple; saltversioninfo and pythonversion are lists.
 */
const TUPLE_GRAINS = ["osrelease_info"];

class PyTuple {
	constructor(readonly items: unknown[]) {}
}

const isDict = (v: unknown): v is Dict =>
	v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof PyTuple);
const INDEX = /^-?\d+$/;
/** What answering one (dict, suffix) question costs in steps, beyond the values it looks at (its bookkeeping). */
const QUESTION_STEPS = 20;

/** Python's str() of a grain value, as subdict_match compares it (before lowercasing). */
function pyText(v: unknown): string {
	if (typeof v === "string") return v;
	if (v instanceof PyTuple)
		return `(${v.items.map(i => (typeof i === "string" ? `'${i}'` : pyText(i))).join(", ")}${v.items.length === 1 ? "," : ""})`;
	if (typeof v === "boolean") return v ? "True" : "False";
	if (v === null || v === undefined) return "None";
	if (typeof v === "number") return String(v);
	return JSON.stringify(v);
}

/** The grains as a minion holds them: its tuple grains as tuples (a shallow copy, only when it has one as a list). */
function asOnMinion(grains: unknown): unknown {
	if (!isDict(grains) || !TUPLE_GRAINS.some(k => Array.isArray(grains[k]))) return grains;
	const copy: Dict = { ...grains };
	for (const k of TUPLE_GRAINS) if (Array.isArray(copy[k])) copy[k] = new PyTuple(copy[k] as unknown[]);
	return copy;
}

/** One step of traverse_dict_and_list: `part` of a path applied to `ptr` (undefined: not there). */
function step(ptr: unknown, part: string): unknown {
	if (ptr instanceof PyTuple) return undefined;
	if (Array.isArray(ptr)) {
		if (INDEX.test(part)) {
			const i = Number(part);
			const at = i < 0 ? ptr.length + i : i;
			return at < 0 || at >= ptr.length ? undefined : ptr[at];
		}
		const holder = ptr.find(x => isDict(x) && Object.hasOwn(x, part)) as Dict | undefined;
		return holder ? holder[part] : undefined;
	}
	return isDict(ptr) && Object.hasOwn(ptr, part) ? ptr[part] : undefined;
}

/** Where each occurrence of `delimiter` is in `expr`, in order. */
function positions(expr: string, delimiter: string): number[] {
	const out: number[] = [];
	for (let i = expr.indexOf(delimiter); i >= 0; i = expr.indexOf(delimiter, i + 1)) out.push(i);
	return out;
}

/** The first index of `sorted` whose value is at least `from`. */
function firstAtOrAfter(sorted: number[], from: number): number {
	let lo = 0;
	let hi = sorted.length;
	while (lo < hi) {
		const mid = (lo + hi) >> 1;
		if (sorted[mid] < from) lo = mid + 1;
		else hi = mid;
	}
	return lo;
}

/**
 * A `G@`/`P@` term's expression (`path<delimiter>pattern`) compiled: a test of a host's grains. `compile`
 * turns a lowercased pattern into its value test; it is called at most once per split of the expression.
 * `charge` is told of every step taken through the grains (a path part followed, a value or member looked
 * at, QUESTION_STEPS for each dict and suffix answered), so that the caller can bound them; the value tests
 * count their own.
 */
export function subdictMatcher(
	expr: string,
	delimiter: string,
	compile: PatternCompiler,
	charge: (steps: number) => void = () => {},
): (grains: unknown) => boolean {
	const lowered = expr.toLowerCase();
	const tests = new Map<number, ValueTest | null>();
	/** The value test of the pattern that starts at `at`. */
	const testAt = (at: number): ValueTest | null => {
		let test = tests.get(at);
		if (test === undefined) tests.set(at, (test = compile(lowered.slice(at))));
		return test;
	};
	// Only a path that starts at a tuple grain (or `*`, the whole grains) can meet one: the others need no copy.
	const reachesTuple =
		expr.startsWith("*") ||
		TUPLE_GRAINS.some(k => expr.startsWith(`${k}${delimiter}`) || expr.startsWith(`${k}${DEFAULT_DELIMITER}`));
	const delimiters = new Map<string, number[]>([[delimiter, positions(expr, delimiter)]]);
	if (!delimiters.has(DEFAULT_DELIMITER)) delimiters.set(DEFAULT_DELIMITER, positions(expr, DEFAULT_DELIMITER));

	return grains => {
		/** Texts of lists and dicts (JSON), lowercased, made once per host. */
		const texts = new Map<unknown, string>();
		const one = (value: unknown, at: number): boolean => {
			const test = testAt(at);
			if (test === null) return false;
			let text = texts.get(value);
			if (text === undefined) {
				text = pyText(value).toLowerCase();
				if (value !== null && typeof value === "object") texts.set(value, text);
			}
			return test(text);
		};
		/** Answers per (dict, where its pattern starts): each asked once per host whichever split leads to it. */
		const dictAnswers = new Map<Dict, Map<number, boolean>>();
		const innerAnswers = new Map<Dict, Map<number, boolean>>();
		const memo = (answers: Map<Dict, Map<number, boolean>>, node: Dict, at: number, answer: () => boolean): boolean => {
			let byAt = answers.get(node);
			if (!byAt) answers.set(node, (byAt = new Map()));
			let known = byAt.get(at);
			if (known === undefined) {
				charge(QUESTION_STEPS);
				byAt.set(at, (known = answer()));
			}
			return known;
		};

		/** Salt's _dict_match of the pattern that starts at `at`. */
		const dictMatch = (target: Dict, at: number): boolean =>
			memo(dictAnswers, target, at, () => {
				const wildcard = expr.startsWith("*:", at);
				const p = wildcard ? at + 2 : at;
				if (expr.length - p === 1 && expr[p] === "*") return true;
				if (Object.hasOwn(target, expr.slice(p))) return true;
				if (memo(innerAnswers, target, p, () => splitMatch(target, p, DEFAULT_DELIMITER))) return true;
				if (!wildcard) return false;
				const values = Object.values(target);
				charge(values.length);
				for (const value of values) {
					if (isDict(value)) {
						if (dictMatch(value, p)) return true;
					} else if (Array.isArray(value)) {
						charge(value.length);
						if (value.some(item => one(item, p))) return true;
					} else if (one(value, p)) return true;
				}
				return false;
			});

		/** Salt's subdict_match of the expression's suffix from `from`, split at `delim`. */
		const splitMatch = (data: unknown, from: number, delim: string): boolean => {
			const cuts = delimiters.get(delim)!;
			const first = firstAtOrAfter(cuts, from);
			// Salt's num_splits is the suffix's delimiters + 1: none, and nothing can match.
			if (first >= cuts.length) return false;
			// The paths of the splits, shortest first, each one step from the one before; past the grains'
			// end no longer path exists, so the walk takes at most their depth.
			const found: Array<{ value: unknown; at: number }> = [];
			let ptr: unknown = data;
			let start = from;
			for (let i = first; i < cuts.length; i++) {
				const part = expr.slice(start, cuts[i]);
				const pattern = cuts[i] + 1;
				charge(1);
				if (i === first && part === "*") found.push({ value: data, at: from });
				else {
					ptr = step(ptr, part);
					if (ptr === undefined) break;
					found.push({ value: ptr, at: pattern });
				}
				// After `*`, a longer path looks the key `*` up (Salt special-cases only the path `*` itself).
				if (i === first && part === "*") ptr = step(data, part);
				if (ptr === undefined) break;
				start = pattern;
			}
			// The deepest first, as Salt tries them (the answer is the same in any order: none has side effects).
			for (let k = found.length - 1; k >= 0; k--) {
				const { value, at } = found[k];
				if (isDict(value)) {
					if (Object.keys(value).length && dictMatch(value, at)) return true;
				} else if (Array.isArray(value)) {
					charge(value.length);
					for (const member of value) if ((isDict(member) && dictMatch(member, at)) || one(member, at)) return true;
				} else if (one(value, at)) return true;
			}
			return false;
		};

		return splitMatch(reachesTuple ? asOnMinion(grains) : grains, 0, delimiter);
	};
}
