/**
 * The master's nodegroup definitions (`nodegroups:` in /etc/salt/master, a compound string or a list of words
 * each) turned into the compound expressions fleet-ctl evaluates, the way Salt expands them
 * (salt/utils/minions.py nodegroup_comp): a nested `N@name` becomes `( <its expansion> )`; a definition with no
 * operator, no wildcard and no engine prefix is a list of minion ids (`L@a,b`, or `E@` when a word holds regex
 * characters). A definition that cannot be expanded (a cycle, an unknown nodegroup, no words) keeps its reason.
 */

/** A nodegroup as the master defines it: a compound expression, or its words as a list. */
export type SaltNodegroup = string | Array<string | number | boolean>;

export type Expansion = { name: string; target: string } | { name: string; problem: string };

const OPERATORS = new Set(["and", "or", "not", "(", ")"]);
const ENGINE = /^[A-Z]@/;
const REGEX_CHARS = ["(", "[", "{", "\\", "?", "}", "]", ")"];

class ExpansionError extends Error {}

function wordsOf(def: unknown): string[] {
	if (Array.isArray(def)) return def.map(w => String(w).trim()).filter(Boolean);
	if (typeof def === "string") return def.split(/\s+/).filter(Boolean);
	throw new ExpansionError(`its definition is a ${def === null ? "null" : typeof def}, not a string or a list`);
}

function expand(name: string, defs: Record<string, unknown>, stack: string[]): { words: string[]; nested: boolean } {
	if (stack.includes(name)) throw new ExpansionError(`it refers to itself (${[...stack, name].join(" -> ")})`);
	if (!Object.hasOwn(defs, name)) throw new ExpansionError(`it refers to N@${name}, which the master does not define`);
	const out: string[] = [];
	let nested = false;
	for (const word of wordsOf(defs[name])) {
		if (word.length >= 3 && word.startsWith("N@")) {
			nested = true;
			out.push("(", ...expand(word.slice(2), defs, [...stack, name]).words, ")");
		} else out.push(word);
	}
	if (!out.length) throw new ExpansionError("its definition is empty");
	return { words: out, nested };
}

/** One nodegroup's compound expression, as Salt would publish it for `N@name` (throws ExpansionError). */
function expandOne(name: string, defs: Record<string, unknown>): string {
	const { words, nested } = expand(name, defs, []);
	if (!nested && !words.some(w => OPERATORS.has(w)) && !words.some(w => w.includes("*") || ENGINE.test(w))) {
		return `${words.some(w => REGEX_CHARS.some(c => w.includes(c))) ? "E@" : "L@"}${words.join(",")}`;
	}
	return words.join(" ");
}

/** Every nodegroup of the master's `nodegroups` option, expanded; names in the master's order. */
export function expandNodegroups(defs: Record<string, unknown>): Expansion[] {
	return Object.keys(defs).map(name => {
		try {
			return { name, target: expandOne(name, defs) };
		} catch (err) {
			if (err instanceof ExpansionError)
				return { name, problem: `the master's nodegroup '${name}' cannot be expanded: ${err.message}` };
			throw err;
		}
	});
}
